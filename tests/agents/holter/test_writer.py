"""Writer: computed answers, benchmark distractors, evidence explanations, safe question text."""

from __future__ import annotations

import json

import pytest

from ecgtrace.agents.holter import annotator, planner, writer
from ecgtrace.agents.holter.facts import load_facts
from ecgtrace.rubrics.template_schema import load_templates


@pytest.fixture(scope="module")
def facts(synth_record, tmp_path_factory):
    ref = annotator.load_record(synth_record.record_path)
    return load_facts(annotator.annotate(ref, tmp_path_factory.mktemp("ann"))["path"])


def _write(facts, task, seed=1, measure=False):
    template = load_templates(tasks=[task])[0]
    entry = next(e for e in planner.plan(facts, [template], seed))
    return writer.write_items(facts, template, entry["targets"], seed=seed, measure=measure)


def test_closed_count_items(facts):
    for item in _write(facts, "closed_count"):
        n = int(item["answer"])
        assert item["_distractors"] == [str(v) for v in (n - 1, n + 1, n + 2) if v >= 0] + (["3"] if n == 0 else [])
        assert item["answer_type"] == "integer"
        assert "ms from the start of the recording" in item["question"] or "after the recording start" in item["question"]
        assert item["question"].startswith("ECG recording of a 59-year-old female patient. ")


def test_hr_extremum_items_use_offsets(facts):
    for item in _write(facts, "closed_hr_extremum"):
        truth = item["_truth"]
        offsets = sorted(abs(t - truth) for t in item["_distractor_values"])
        assert all(o in (500, 2000, 10000, 60000, 300000, 1800000) for o in offsets)
        assert item["answer"] == f"{truth} ms" and item["window"] is None


def test_evidence_reasoning_has_rhythm_and_morphology_clues(facts):
    items = _write(facts, "open_evidence", measure=True)
    pvc = next(i for i in items if i["provenance"]["params"]["kind"] == "pvc")
    assert "comes early" in pvc["answer"] and "Morphology clues: lead" in pvc["answer"] and "QRS" in pvc["answer"]


def test_report_fields(facts):
    item = _write(facts, "report_statistics")[0]
    stats = json.loads(item["answer"])
    assert set(stats) == {"duration_s", "total_beats", "mean_hr_bpm", "max_hr_bpm", "min_hr_bpm", "pct_time_hr_gt_100", "pct_time_hr_lt_60",
                          "pac_total", "pac_pct", "pvc_total", "pvc_pct", "couplets", "runs", "bigeminy_episodes", "trigeminy_episodes",
                          "pauses", "rhythm"}
    assert stats["duration_s"] == 1800.0 and stats["total_beats"] == facts.beat_ms.size
    summary = _write(facts, "report_summary")[0]["answer"]
    assert "beats" in summary and "pauses" in summary
