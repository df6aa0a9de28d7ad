"""The planner covers every event kind, balances presence questions and is deterministic."""

from __future__ import annotations

from collections import Counter

import pytest

from ecgtrace.agents.holter import annotator, planner
from ecgtrace.agents.holter.facts import load_facts
from ecgtrace.rubrics.template_schema import load_templates


@pytest.fixture(scope="module")
def facts(synth_record, tmp_path_factory):
    ref = annotator.load_record(synth_record.record_path)
    return load_facts(annotator.annotate(ref, tmp_path_factory.mktemp("ann"))["path"])


def test_annotations_equal_the_schedule(facts, synth_record):
    key = lambda e: (e["kind"], e["onset_ms"], e["offset_ms"], e["n_beats"], e["first_beat"], e["last_beat"])  # noqa: E731
    assert sorted(map(key, facts.events)) == sorted(key(e) for e in synth_record.schedule["events"] if e["kind"] != "noise")
    assert facts.source == "reference"
    assert facts.noise == [[e["onset_ms"], e["offset_ms"]] for e in synth_record.schedule["events"] if e["kind"] == "noise"]


def test_presence_is_balanced_and_covers_every_kind(facts):
    entries = planner.plan(facts, load_templates(tasks=["closed_presence", "closed_diagnosis"]), seed=4)
    presence = next(e for e in entries if e["template_id"] == "closed_presence")["targets"]
    polarity = Counter((t["kind"], t["polarity"]) for t in presence)
    for kind in facts.kinds():
        assert polarity[(kind, "positive")] >= 1
        assert polarity[(kind, "positive")] == polarity[(kind, "negative")]
    diagnosis = next(e for e in entries if e["template_id"] == "closed_diagnosis")["targets"]
    assert {t["kind"] for t in diagnosis} == set(facts.kinds()) | {"normal"}


def test_windows_are_clean_and_deterministic(facts):
    templates = load_templates(tasks=["closed_count", "closed_presence"])
    first = planner.plan(facts, templates, seed=9)
    assert first == planner.plan(facts, templates, seed=9)
    assert first != planner.plan(facts, templates, seed=10)
    for entry in first:
        for target in entry["targets"]:
            assert not facts.noise_near(target["t0_ms"], target["t1_ms"], 500)
            assert 0 <= target["t0_ms"] < target["t1_ms"] <= facts.duration_ms
