"""The verifier's independent checks, and answers on real reference annotations against a computation written here."""

from __future__ import annotations

from itertools import groupby

import numpy as np
import pytest

from ecgtrace.agents.holter import annotator, planner, verifier, writer
from ecgtrace.agents.holter.facts import Facts, load_facts
from ecgtrace.rubrics.template_schema import load_templates

CLASS = {**dict.fromkeys("NLRej", "N"), **dict.fromkeys("AaJS", "S"), **dict.fromkeys("VE", "V"), "F": "F", **dict.fromkeys("Q/f", "Q")}


def _items(record, tmp_path, *, fs=None, tasks=None, seed=5):
    ref = annotator.load_record(record, fs_hz=fs)
    facts = load_facts(annotator.annotate(ref, tmp_path, fs_hz=fs)["path"])
    templates = load_templates(tasks=tasks)
    items = []
    for entry in planner.plan(facts, templates, seed):
        template = next(t for t in templates if t.id == entry["template_id"])
        items += writer.write_items(facts, template, entry["targets"], seed=seed, measure=False)
    kept, dropped = verifier.verify(facts, items)
    return facts, kept, dropped


def _reference(record, fs=None):
    """Beat times (ms) and classes straight from the .atr, with wfdb only."""
    import wfdb

    ann = wfdb.rdann(str(record), "atr")
    fs = fs or ann.fs
    pairs = [(int(round(s * 1000.0 / fs)), CLASS[sym]) for s, sym in zip(ann.sample, ann.symbol) if sym in CLASS]
    noise, start = [], None  # '~' with a non-zero subtype opens a noisy stretch, the next '~' closes it
    for s, sym, sub in zip(ann.sample, ann.symbol, ann.subtype):
        if sym == "~":
            if start is not None:
                noise.append((start, int(round(s * 1000.0 / fs))))
            start = int(round(s * 1000.0 / fs)) if sub else None
    return np.array([p[0] for p in pairs]), "".join(p[1] for p in pairs), noise


def _independent_events(times, classes, kind):
    """Onsets (ms) of kind, from runs of classes: the benchmark's conventions written out again."""
    runs, i = [], 0
    for cls, group in groupby(classes):
        n = len(list(group))
        runs.append((i, n, cls))
        i += n
    if kind == "pause":
        return [int(times[j]) for j in np.flatnonzero(np.diff(times) > 2000)]
    if kind == "v_couplet":
        return [int(times[s]) for s, n, c in runs if c == "V" and n == 2]
    if kind == "vt":
        return [int(times[s]) for s, n, c in runs if c == "V" and n >= 3 and 60000.0 * (n - 1) / (times[s + n - 1] - times[s]) > 100]
    raise AssertionError(kind)


def _independent_hr(times, classes, noise, kind):
    rr = np.diff(times).astype(float)
    valid = [j for j in range(1, len(times)) if classes[j] == "N" and classes[j - 1] == "N" and 250 <= rr[j - 1] <= 3000
             and not any(times[j] >= a and times[j - 1] <= b for a, b in noise)]
    best = None
    for a in range(len(valid) - 7):
        window = valid[a:a + 8]
        if window[-1] - (window[0] - 1) > 12:
            continue
        hr = 60000.0 * 8 / sum(rr[j - 1] for j in window)
        if best is None or (hr > best[0] if kind == "max" else hr < best[0]):
            best = (hr, int(times[window[-1]]))
    return best


@pytest.mark.parametrize("name,fs", [("ltafdb/00", 128.0), ("mitdb/208", None), ("mitdb/119", None)])
def test_reference_answers_match_independent_computation(shared_data, tmp_path, name, fs):
    record = shared_data / name
    facts, kept, _ = _items(record, tmp_path, fs=fs, tasks=["closed_count", "open_timing", "closed_hr_extremum", "open_hr_extremum"])
    times, classes, noise = _reference(record, fs)
    assert np.array_equal(times, facts.beat_ms)
    checked = 0
    for item in kept:
        kind = item["provenance"]["params"]["kind"]
        if item["task"] == "closed_count" and kind in ("pause", "v_couplet", "vt"):
            t0, t1 = item["_target"]["t0_ms"], item["_target"]["t1_ms"]
            assert int(item["answer"]) == sum(t0 <= t < t1 for t in _independent_events(times, classes, kind)), item["id"]
            checked += 1
        elif item["task"] == "open_timing" and kind in ("pause", "v_couplet", "vt"):
            t0, t1 = item["_target"]["t0_ms"], item["_target"]["t1_ms"]
            expected = [t for t in _independent_events(times, classes, kind) if t0 <= t < t1]
            assert item["answer"] == ", ".join(f"{t} ms" for t in expected), item["id"]
            checked += 1
        elif item["task"].endswith("hr_extremum"):
            hr_kind = item["provenance"]["params"]["hr_kind"]
            hr, t_ms = _independent_hr(times, classes, noise, hr_kind)
            assert item["answer"] == f"{t_ms} ms", item["id"]
            checked += 1
    if name != "mitdb/119":
        assert checked > 0


def test_noise_seam_and_boundary_are_dropped(synth_record, tmp_path):
    ref = annotator.load_record(synth_record.record_path)
    facts = load_facts(annotator.annotate(ref, tmp_path)["path"])
    template = next(t for t in load_templates(tasks=["closed_presence"]))
    noise = next(e for e in synth_record.schedule["events"] if e["kind"] == "noise")
    pvc = next(e for e in synth_record.schedule["events"] if e["kind"] == "pvc")
    targets = [
        {"scope": "window", "kind": "pvc", "polarity": "negative", "t0_ms": noise["onset_ms"] - 2000, "t1_ms": noise["onset_ms"] + 8000},
        {"scope": "window", "kind": "pvc", "polarity": "positive", "t0_ms": pvc["onset_ms"] - 100, "t1_ms": pvc["onset_ms"] + 9900},
    ]
    items = writer.write_items(facts, template, targets, seed=0, measure=False)
    _, dropped = verifier.verify(facts, items)
    reasons = [d["reason"] for d in dropped]
    assert reasons[0].startswith("evidence in noise")
    assert reasons[1].startswith("ambiguous boundary")
    seamed = Facts({**facts.bundle, "seams_ms": [pvc["onset_ms"] + 400]})
    ok_target = {"scope": "window", "kind": "pvc", "polarity": "positive", "t0_ms": pvc["onset_ms"] - 5000, "t1_ms": pvc["onset_ms"] + 5000}
    items = writer.write_items(seamed, template, [ok_target], seed=0, measure=False)
    assert verifier.check_item(seamed, items[0]).startswith("chunk seam")
    assert verifier.check_item(facts, items[0]) is None


def test_recount_disagreement_is_dropped(synth_record, tmp_path):
    ref = annotator.load_record(synth_record.record_path)
    facts = load_facts(annotator.annotate(ref, tmp_path)["path"])
    _, kept, _ = _items(synth_record.record_path, tmp_path, tasks=["closed_count"])
    item = dict(kept[0])
    item["_truth"] += 1
    assert verifier.check_item(facts, item).startswith("recount disagrees")


def test_missing_patient_fields_are_left_out():
    assert writer.patient_context({}, 24 * 3_600_000) == "Holter ECG. "
    assert writer.patient_context({"sex": "male"}, 1000) == "ECG recording of a male patient. "
    assert writer.patient_context({"age_years": 64}, 24 * 3_600_000) == "Holter ECG of a 64-year-old patient. "
    assert writer.patient_context({"age_years": None, "sex": "unknown"}, 1000) == "ECG recording. "
