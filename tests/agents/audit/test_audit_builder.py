"""Audit items built from records match independent ground truth.

* synthetic record: the generator's schedule (exact event times and PR);
* MIT-BIH: the .atr expert labels, re-read here with wfdb directly.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ecgtrace.agents.audit.builder import build_record
from ecgtrace.agents.audit.dataset import build_audit_items, write_audit_dataset
from ecgtrace.agents.audit.format import AuditItem, load_audit

V_KINDS = {"pvc", "v_couplet", "vt", "v_bigeminy", "v_trigeminy"}
#: diagnosis -> (schedule event kinds that make it positive, positive rule)
SYNTH_TRUTH = {
    "pvc": (V_KINDS, "touch"),
    "pac": ({"pac", "svt"}, "touch"),
    "vt": ({"vt"}, "inside"),
    "svt": ({"svt"}, "inside"),
    "af": ({"af"}, "cover"),
    "sinus_bradycardia": ({"sinus_bradycardia"}, "cover"),
    "sinus_tachycardia": ({"sinus_tachycardia"}, "cover"),
    "first_degree_av_block": ({"avb1"}, "cover"),
    "sinus_pause": ({"pause"}, "inside"),
    "ventricular_bigeminy": ({"v_bigeminy"}, "touch"),
    "ventricular_trigeminy": ({"v_trigeminy"}, "touch"),
}


def _events(schedule: dict, kinds: set[str]) -> list[tuple[float, float]]:
    return [(e["onset_ms"] / 1000.0, e["offset_ms"] / 1000.0) for e in schedule["events"] if e["kind"] in kinds]


def _check_options(item: dict) -> None:
    AuditItem.model_validate(item)
    questions = [item["initial"]] + [q for loop in item["loops"] for q in (loop["criterion"], loop["finding"], loop["decision"], *loop["grounding"])]
    for q in questions:
        assert len(q["options"]) == len(set(q["options"])), q
        answers = q["answer"] if isinstance(q["answer"], list) else [q["answer"]]
        assert answers and all(a in q["options"] for a in answers), q
        if q.get("kind") == "lead":
            assert q["multi"] is True and len(q["answer"]) >= 1
            assert set(q["options"]) <= set(item["record"]["leads"])
    assert all(len(loop["criterion"]["options"]) == 5 for loop in item["loops"])
    assert item["loops"][-1]["decision"]["answer"] == ("Yes" if item["label"] else "No")
    assert all(loop["decision"]["answer"].startswith("Further") for loop in item["loops"][:-1])


def test_synthetic_items_match_the_schedule(synth_record, synth_build) -> None:
    schedule = synth_record.schedule
    items = synth_build.items
    assert items
    for item in items:
        _check_options(item)
        truth = SYNTH_TRUTH.get(item["diagnosis"])
        if truth is None:
            continue
        t0, t1 = item["window"]["t0_s"], item["window"]["t1_s"]
        spans = _events(schedule, truth[0])
        touching = [(a, b) for a, b in spans if b >= t0 and a <= t1]
        if not item["label"]:
            assert not touching, (item["id"], touching)
            continue
        assert item["provenance"]["source"] == "synthetic"
        if truth[1] == "inside":
            assert any(a >= t0 and b <= t1 for a, b in spans), item["id"]
        elif truth[1] == "cover":
            assert any(min(b, t1) - max(a, t0) >= 0.8 * (t1 - t0) for a, b in spans), item["id"]
        else:
            assert touching, item["id"]


def test_every_scheduled_kind_gives_positive_and_negative_items(synth_build) -> None:
    labels: dict[str, set[bool]] = {}
    for item in synth_build.items:
        labels.setdefault(item["diagnosis"], set()).add(item["label"])
    for diagnosis in SYNTH_TRUTH:
        assert labels.get(diagnosis) == {True, False}, diagnosis


def test_grounding_answers_point_at_the_scheduled_truth(synth_record, synth_build) -> None:
    schedule = synth_record.schedule
    avb1_pr = [e["pr_ms"] for e in schedule["events"] if e["kind"] == "avb1"][0]
    checked = 0
    for item in synth_build.items:
        if not item["label"]:
            continue
        t0 = item["window"]["t0_s"]
        for loop in item["loops"]:
            for g in loop["grounding"]:
                if item["diagnosis"] == "first_degree_av_block" and g["kind"] == "measurement":
                    lo, hi = (float(x) for x in g["answer"].strip("[] ms").split("-"))
                    assert abs((lo + hi) / 2 - avb1_pr) <= 40.0
                    checked += 1
                if item["diagnosis"] == "pvc" and g["kind"] == "wave" and "wide" in g["question"]:
                    a, b = (float(x.strip(" s")) for x in g["answer"].strip("[]").split(" - "))
                    assert t0 <= a < b <= item["window"]["t1_s"] and "recording start" in g["question"]
                    v_beats = [e["onset_ms"] / 1000.0 for e in schedule["events"] if e["kind"] in V_KINDS]
                    assert any(a - 0.1 <= t <= b + 0.1 for t in v_beats), g
                    checked += 1
                if item["diagnosis"] == "sinus_pause" and g["kind"] == "wave":
                    pause = [e for e in schedule["events"] if e["kind"] == "pause"][0]
                    a, b = (float(x.strip(" s")) for x in g["answer"].strip("[]").split(" - "))
                    assert abs(a - pause["onset_ms"] / 1000.0) < 0.02 and abs(b - pause["offset_ms"] / 1000.0) < 0.02
                    checked += 1
    assert checked >= 3


def test_same_seed_same_items_and_drop_counts(synth_record) -> None:
    kwargs = dict(seed=5, max_per_diagnosis=2, render_assets=False, diagnoses=["pvc", "af", "sinus_pause"])
    first = build_audit_items(synth_record.record_path, **kwargs)
    second = build_audit_items(synth_record.record_path, **kwargs)
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    other = build_audit_items(synth_record.record_path, **{**kwargs, "seed": 6})
    assert json.dumps(first[0], sort_keys=True) != json.dumps(other[0], sort_keys=True)


def test_dataset_is_written_atomically_with_assets(synth_record, tmp_path: Path) -> None:
    summary = write_audit_dataset([str(synth_record.record_path)], tmp_path / "out", seed=1, max_per_diagnosis=1, diagnoses=["sinus_pause", "pvc"])
    audit = load_audit(tmp_path / "out" / "audit.jsonl")
    assert summary["n_items"] == len(audit.items) >= 2
    for item in audit.items:
        assert (audit.base_dir / item.assets.image).stat().st_size > 1000
        assert (audit.base_dir / item.assets.text).read_text(encoding="utf-8").strip()
    per = summary["per_diagnosis"]
    assert all(row["positive"] == row["negative"] for row in per.values()), per
    again = write_audit_dataset([str(synth_record.record_path)], tmp_path / "again", seed=1, max_per_diagnosis=1, diagnoses=["sinus_pause", "pvc"])
    assert (tmp_path / "out" / "audit.jsonl").read_bytes() == (tmp_path / "again" / "audit.jsonl").read_bytes()
    assert again["drops"] == summary["drops"]


def _atr_label(record: Path, diagnosis: str, t0: float, t1: float) -> bool | None:
    """The expert label computed here, straight from the .atr with wfdb."""
    import wfdb

    ann = wfdb.rdann(str(record), "atr")
    fs = float(ann.fs)
    samples = np.asarray(ann.sample)
    symbols = np.asarray(ann.symbol)
    inside = (samples >= t0 * fs) & (samples < t1 * fs)
    if diagnosis == "pvc":
        return bool(np.isin(symbols[inside], ["V", "E"]).any())
    if diagnosis == "pac":
        return bool(np.isin(symbols[inside], ["A", "a", "J", "S"]).any())
    rhythm = {"af": "AFIB", "vt": "VT", "ventricular_bigeminy": "B", "ventricular_trigeminy": "T"}[diagnosis]
    notes = [(int(s), a.strip("\x00").strip()) for s, a in zip(samples, ann.aux_note) if a and a.strip("\x00").startswith("(")]
    spans = []
    for k, (s, note) in enumerate(notes):
        end = notes[k + 1][0] if k + 1 < len(notes) else 10**12
        if note[1:] == rhythm:
            spans.append((s / fs, end / fs))
    overlap = sum(max(0.0, min(b, t1) - max(a, t0)) for a, b in spans)
    return overlap > 0


@pytest.mark.parametrize("record", ["119", "201"])
def test_mitdb_items_agree_with_the_atr_labels(shared_data: Path, record: str) -> None:
    diagnoses = ["pvc", "pac", "af", "vt", "ventricular_bigeminy", "ventricular_trigeminy"]
    built = build_record(shared_data / "mitdb" / record, seed=0, max_per_diagnosis=2, diagnoses=diagnoses)
    assert built.items
    reference = 0
    for item in built.items:
        _check_options(item)
        assert item["provenance"]["params"]["beats"]["source"] == "reference"
        if item["provenance"]["source"] != "reference":
            continue
        reference += 1
        t0, t1 = item["window"]["t0_s"], item["window"]["t1_s"]
        assert item["label"] == _atr_label(shared_data / "mitdb" / record, item["diagnosis"], t0, t1), item["id"]
    assert reference == len(built.items)
    for diagnosis, counts in built.drops.items():
        assert all(n > 0 for n in counts.values()), (diagnosis, counts)


def test_features_cover_the_graph_vocabulary(synth_record) -> None:
    """Every feature a graph may name is computed (as a value or an explicit None), in its declared scope."""
    from ecgtrace.agents.audit._features import BeatTable, window_features
    from ecgtrace.rubrics.diagnosis_schema import FEATURES
    from ecgtrace.tools.annotations import read_reference_annotations
    from ecgtrace.tools.records import open_record, read_window

    ref = read_reference_annotations(synth_record.record_path)
    info = open_record(synth_record.record_path, check_leads=False)
    wf = window_features(read_window(info, 60.0, 70.0), BeatTable(ref.beat_samples, ref.beat_classes, ref.beat_symbols, ref.provenance))
    feats = wf.features
    for name, spec in FEATURES.items():
        if spec.scope in ("window", "both"):
            assert name in feats, name
        if spec.scope in ("lead", "both"):
            assert set(feats["per_lead"][name]) == set(info.leads), name
    truth = synth_record.schedule["morphology"]["N"]
    assert abs(feats["pr_ms"] - truth["pr_ms"]) <= 30 and abs(feats["qrs_ms"] - truth["qrs_ms"]) <= 30
    assert feats["premature_beat_count"] == 0 and feats["p_wave_present_pct"] >= 80
