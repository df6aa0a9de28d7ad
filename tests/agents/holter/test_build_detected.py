"""`ecgtrace build` on a record without a reference .atr: only kinds validated from the signal are asked about."""

from __future__ import annotations

import json
import shutil

from ecgtrace.cli import main
from ecgtrace.tools import signal_trust as st

TASKS = ["--tasks", "closed_count,open_timing,closed_presence,closed_hr_extremum", "--modalities", "text", "--no-audit", "--json"]


def _unannotated_copy(record, tmp_path):
    """The record's signal files alone, as a user's Holter comes (no .atr, no schedule)."""
    folder = tmp_path / "holter"
    folder.mkdir()
    for suffix in (".hea", ".dat"):
        shutil.copy(f"{record}{suffix}", folder / f"{record.name}{suffix}")
    return folder / record.name


def _rows(out):
    return [json.loads(line) for line in (out / "qa.jsonl").read_text(encoding="utf-8").splitlines()]


def test_build_on_detected_annotations_drops_unvalidated_kinds_and_all_keeps_them(synth_record, tmp_path, capsys):
    record = _unannotated_copy(synth_record.record_path, tmp_path)
    validated, everything = tmp_path / "validated", tmp_path / "all"
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert main(["build", str(record), "--out", str(validated), *TASKS, *cache]) == 0
    counts = json.loads(capsys.readouterr().out)["counts"]
    assert counts["dropped_reasons"].get("not validated from the signal", 0) > 0
    table = st.read_trust_table(st.TABLE_PATH)
    for row in _rows(validated):
        assert row["provenance"]["source"] == "detected"
        verdicts = row["provenance"]["params"]["signal_trust"]
        assert all(v["trusted"] for v in verdicts.values())
        assert all(st.kind_trust(kind, table).trusted for kind in verdicts)
    dropped = [json.loads(line) for line in (validated / "dropped.jsonl").read_text(encoding="utf-8").splitlines()]
    gated = [d for d in dropped if d["reason"].startswith("not validated from the signal")]
    assert gated and all("Se " in d["reason"] or "not validated" in d["reason"].split(":", 2)[2] for d in gated)

    assert main(["build", str(record), "--out", str(everything), *TASKS, *cache, "--detected-kinds", "all"]) == 0
    counts_all = json.loads(capsys.readouterr().out)["counts"]
    assert "not validated from the signal" not in counts_all["dropped_reasons"]
    assert counts_all["items"] > counts["items"]
    kinds_all = [row for row in _rows(everything) if row["task"] != "closed_hr_extremum"]
    assert any(not v["trusted"] for row in kinds_all for v in row["provenance"]["params"]["signal_trust"].values())
