"""Windows with several findings (multi-label open diagnosis, the negative framing), wording variety, articles, HR offsets.

A hand-made beat table: 5 minutes of sinus rhythm at 75 bpm with one PVC and one PAC 4 s apart, a lone PVC far
from them, and a pause: the expected findings of every window are known by construction.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from ecgtrace.agents.holter import planner, verifier, writer
from ecgtrace.agents.holter.facts import Facts, hr_summary
from ecgtrace.agents.holter.tasks._finding_sets import join_labels
from ecgtrace.rubrics.template_schema import load_templates

FS_HZ = 250.0


def _event(kind: str, beat: int, beat_ms: np.ndarray, last: int | None = None) -> dict:
    last = beat if last is None else last
    return {"kind": kind, "onset_ms": int(beat_ms[beat]), "offset_ms": int(beat_ms[last]), "first_beat": beat, "last_beat": last,
            "n_beats": last - beat + 1, "lead": None, "rate_bpm": None,
            "provenance": {"source": "synthetic", "method": "hand-made", "version": "1", "params": {}}}


@pytest.fixture(scope="module")
def facts() -> Facts:
    rr = np.full(375, 800.0)
    rr[49], rr[50] = 480.0, 1120.0  # beat 50: a PVC, early with a compensatory pause
    rr[54], rr[55] = 500.0, 1100.0  # beat 55: a PAC
    rr[200] = 2600.0  # beat 201 follows a pause
    rr[150], rr[151] = 480.0, 1120.0  # beat 151: a lone PVC
    beat_ms = np.round(np.cumsum(rr)).astype(np.int64)
    classes = ["N"] * len(beat_ms)
    classes[50] = classes[151] = "V"
    classes[55] = "S"
    samples = np.round(beat_ms * FS_HZ / 1000.0).astype(np.int64)
    duration_ms = int(beat_ms[-1] + 1000)
    events = [_event("pvc", 50, beat_ms), _event("pac", 55, beat_ms), _event("pvc", 151, beat_ms), _event("pause", 200, beat_ms, 201)]
    bundle = {"record": {"db": "hand", "id": "r1", "path": "hand/r1", "fs_hz": FS_HZ, "leads": [], "duration_s": duration_ms / 1000.0},
              "patient": {"age_years": 82, "sex": "male"}, "source": "synthetic",
              "provenance": {"source": "synthetic", "method": "hand-made", "version": "1"}, "fs_hz": FS_HZ, "duration_ms": duration_ms,
              "beat_ms": beat_ms.tolist(), "beat_samples": samples.tolist(), "beat_classes": "".join(classes), "events": events,
              "noise_spans_ms": [], "seams_ms": [], "hr": hr_summary(samples, np.array(classes), FS_HZ, duration_ms, [])}
    return Facts(bundle)


def _items(facts: Facts, template_id: str, seed: int = 1) -> tuple[list[dict], list[str]]:
    template = next(t for t in load_templates() if t.id == template_id)
    entries = planner.plan(facts, [template], seed)
    targets = entries[0]["targets"] if entries else []
    written = writer.write_items(facts, template, targets, seed=seed, measure=False)
    kept = [i for i in written if verifier.check_item(facts, i) is None]
    return kept, [verifier.check_item(facts, i) for i in written if verifier.check_item(facts, i)]


def test_open_diagnosis_names_every_finding_of_a_window_with_two(facts: Facts) -> None:
    kept, _ = _items(facts, "open_diagnosis")
    multi = [i for i in kept if ";" in i["answer"]]
    assert multi and all(i["answer"] == join_labels(["pac", "pvc"]) for i in multi)
    for item in multi:  # the window holds beats 50 and 55 and nothing else
        t0, t1 = item["window"]["t0_s"] * 1000, item["window"]["t1_s"] * 1000
        beats = facts.beat_ms
        assert t0 < beats[50] and beats[55] < t1 and not (t0 <= beats[151] < t1) and item["finding"] is None
    singles = {i["answer"] for seed in range(6) for i in _items(facts, "open_diagnosis", seed)[0] if ";" not in i["answer"]}
    assert {"premature ventricular contraction", "sinus pause", "normal sinus rhythm"} <= singles


def test_negative_framing_lists_the_findings_and_one_the_window_lacks(facts: Facts) -> None:
    kept, _ = _items(facts, "closed_diagnosis_negative")
    assert kept
    for item in kept:
        assert len(item["_distractors"]) == 2 and set(item["_distractors"]) == {"premature atrial contraction", "premature ventricular contraction"}
        assert item["answer"] not in ("premature atrial contraction", "premature ventricular contraction", "normal sinus rhythm")
        assert item["answer"] not in ("ventricular couplet", "ventricular tachycardia", "ventricular bigeminy", "ventricular trigeminy",
                                      "supraventricular tachycardia")  # a beat class of the window belongs to these
        assert "not" in item["question"] or "absent" in item["question"]


def test_a_listed_diagnosis_the_window_lacks_is_dropped(facts: Facts) -> None:
    kept, _ = _items(facts, "closed_diagnosis_negative")
    item = dict(kept[0])
    item["_distractors"] = ["premature atrial contraction", "sinus pause"]
    assert verifier.check_item(facts, item).startswith("distractor")
    item = {**kept[0], "answer": "premature atrial contraction", "_distractors": ["premature ventricular contraction"]}
    assert verifier.check_item(facts, item).startswith("distractor")


def test_closed_diagnosis_asks_with_two_to_four_options(facts: Facts) -> None:
    counts = set()
    for seed in range(12):
        kept, _ = _items(facts, "closed_diagnosis", seed)
        counts |= {len(i["_distractors"]) + 1 for i in kept}
    assert counts == {2, 3, 4}


def test_stems_vary_by_seed_and_articles_follow_the_number(facts: Facts) -> None:
    template = next(t for t in load_templates() if t.id == "closed_presence")
    questions = set()
    for seed in range(30):
        for item in _items(facts, "closed_presence", seed)[0]:
            questions.add(item["question"].split(". ", 1)[0])
    assert any(q.startswith("This case concerns an 82-year-old male patient") for q in questions)
    assert any(q.startswith("ECG recording of an 82-year-old male patient") for q in questions)
    assert not any("a 82-year-old" in q for q in questions)
    assert len(template.stems) >= 4
    assert writer.patient_line({"age_years": 20, "sex": "male"}, 1000, random.Random(0)) in set(
        p.format(a="a", age=20, sex="male") for p in writer.PATIENT_LINES)
    assert writer.patient_line({"age_years": 20}, 1000, random.Random(0)) == "ECG recording of a 20-year-old patient. "
    assert [writer.indefinite_article(n) for n in (8, 11, 18, 20, 80, 89, 90, 108)] == ["an", "an", "an", "a", "an", "an", "a", "a"]


def test_a_wrong_article_is_dropped(facts: Facts) -> None:
    kept, _ = _items(facts, "closed_presence")
    item = {**kept[0], "question": "This case concerns a 82-year-old male patient. Is there any PVC?"}
    assert verifier.check_item(facts, item).startswith("question")


def test_holtercare_hr_offsets(facts: Facts) -> None:
    holtercare = {500, 1000, 2000, 5000, 10000, 30000, 60000, 120000, 300000, 600000, 1800000}
    offsets = set()
    for seed in range(10):
        for item in _items(facts, "closed_hr_extremum_holtercare", seed)[0] + [i for i in _written(facts, seed)]:
            offsets |= {abs(t - item["_truth"]) for t in item["_distractor_values"]}
    assert offsets <= holtercare and len(offsets & {1000, 5000, 30000, 120000, 600000}) >= 1


def _written(facts: Facts, seed: int) -> list[dict]:
    """HR items before verification (the hand-made record's extrema may tie, which the verifier rightly drops)."""
    template = next(t for t in load_templates() if t.id == "closed_hr_extremum_holtercare")
    targets = planner.plan(facts, [template], seed)[0]["targets"]
    return writer.write_items(facts, template, targets, seed=seed, measure=False)
