"""The signal-trust table: verdicts from counts, stale and missing tables, and the shipped table against the running detectors."""

from __future__ import annotations

import json

import pytest

from ecgtrace.tools import signal_trust as st
from ecgtrace.tools.annotate import annotation_versions


def test_a_kind_needs_both_rates_and_enough_events():
    assert st.verdict(9, 10, 9, 10).trusted  # 90 % and 90 % over 10 and 10: exactly enough
    low_se = st.verdict(8, 10, 10, 10, kind="pac")
    assert not low_se.trusted and "Se 80.0% (8/10)" in low_se.reason and "+P 100.0% (10/10)" in low_se.reason
    assert not st.verdict(10, 10, 17, 20).trusted  # +P 85 %
    few = st.verdict(9, 9, 9, 9)
    assert not few.trusted and few.reason.startswith("not validated") and ">= 10" in few.reason
    none_called = st.verdict(0, 12, 0, 0)
    assert not none_called.trusted and "no detected event" in none_called.reason


def test_a_table_measured_with_other_detector_versions_trusts_nothing():
    running = {"beats": "3", "classify": "8"}
    table = st.TrustTable({"beats": "3", "classify": "7"}, {"pvc": (100, 100, 100, 100)})
    stale = table.kind("pvc", running)
    assert not stale.trusted and "classify 7 -> 8" in stale.reason and "benchmarks/signal_trust.py" in stale.reason
    current = st.TrustTable(dict(running), {"pvc": (100, 100, 100, 100)})
    assert current.kind("pvc", running).trusted
    unmeasured = current.kind("vf", running)
    assert not unmeasured.trusted and unmeasured.reason.startswith("not validated")


@pytest.mark.parametrize("text", [None, "{not json", json.dumps({"format": 999, "versions": {}, "kinds": {}}), json.dumps({"format": 1})])
def test_a_missing_or_unreadable_table_trusts_nothing(tmp_path, text):
    path = tmp_path / "signal_trust.json"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    verdict = st.kind_trust("pvc", st.read_trust_table(path))
    assert not verdict.trusted


def test_written_table_reads_back_with_the_running_versions(tmp_path):
    path = tmp_path / "t.json"
    st.write_trust_table(path, {"pvc": [95, 100, 96, 100], "pac": [10, 100, 9, 10]}, records=["svdb/800"], command="test")
    table = st.read_trust_table(path)
    assert table.versions == annotation_versions() and table.records == ("svdb/800",)
    assert st.kind_trust("pvc", table).trusted
    assert not st.kind_trust("pac", table).trusted
    assert st.table_identity(path) != st.table_identity(tmp_path / "absent.json") == "absent"


def test_the_shipped_table_was_measured_with_the_running_detectors():
    table = st.read_trust_table(st.TABLE_PATH)
    assert st.TABLE_PATH.exists(), "tools/data/signal_trust.json is missing: run benchmarks/signal_trust.py --write tools/data/signal_trust.json"
    stale = table.stale_versions(annotation_versions())
    assert not stale, f"a detector changed since the signal-trust table was measured ({'; '.join(stale)}): {st.REMEASURE}"
    assert table.counts, "the shipped table measures no kind"
    assert all(c[0] <= c[1] and c[2] <= c[3] for c in table.counts.values())


def test_brief_cells():
    assert st.verdict(93, 100, 90, 90).brief == "yes: Se 93% / +P 100%"
    assert st.verdict(77, 100, 86, 100).brief == "no: Se 77% / +P 86%"
    assert st.verdict(3, 5, 3, 3).brief == "no: Se 60% / +P 100% (too few events: 5 expert, 3 detected)"
    assert st.verdict(0, 0, 0, 7).brief == "no: Se - / +P 0% (too few events: 0 expert, 7 detected)"
    assert st.TrustTable({"beats": "2"}, {}).kind("pvc", {"beats": "3"}).brief == "no: measured with other detector versions"
    assert st.TrustTable({"beats": "3"}, {}).kind("pvc", {"beats": "3"}).brief == "no: not measured"


def test_annotate_shows_the_verdict_on_detected_events_only(synth_record, tmp_path, capsys):
    import shutil

    from ecgtrace.cli import main

    folder = tmp_path / "signal"
    folder.mkdir()
    for suffix in (".hea", ".dat"):
        shutil.copy(f"{synth_record.record_path}{suffix}", folder / f"holter{suffix}")
    cache = ["--cache-dir", str(tmp_path / "cache"), "--workers", "1", "--json"]
    assert main(["annotate", str(folder / "holter"), "--out", str(tmp_path / "a"), *cache]) == 0
    summary = json.loads(capsys.readouterr().out)
    found = {k for k, n in summary["events"].items() if n and k != "noise"}
    assert found and set(summary["signal_trust"]) == found
    assert all(v["brief"].startswith("yes" if v["trusted"] else "no") for v in summary["signal_trust"].values())
    assert main(["annotate", str(synth_record.record_path), "--out", str(tmp_path / "r"), "--reference", *cache]) == 0
    assert "signal_trust" not in json.loads(capsys.readouterr().out)
