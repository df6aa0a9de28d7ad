"""Distractors follow the benchmark rules and are never correct answers."""

from __future__ import annotations

import random

from ecgtrace.agents.holter.distractors import count_distractors, hr_distractors, label_distractors, place_answer, timing_distractors, timing_matches


def test_count_distractors_rule_and_non_negative():
    assert count_distractors(5) == [4, 6, 7]
    assert count_distractors(0) == [1, 2, 3]
    assert count_distractors(1) == [0, 2, 3]


def test_timing_distractors_shift_and_change_count():
    truth = [10_000, 20_000]
    sets = timing_distractors(truth, event_ms=truth, filler_ms=[12_000, 15_000], rng=random.Random(1))
    assert sets[0] == [9_400, 19_400] and sets[1] == [10_800, 20_800]
    assert len(sets[2]) != len(truth)
    assert not any(timing_matches(s, truth, 150) for s in sets)


def test_shifted_set_on_real_events_is_rejected():
    # events every 600 ms: the -600 ms shift of the last two lands on real events and must be rejected
    events = [1_000, 1_600, 2_200]
    sets = timing_distractors([1_600, 2_200], event_ms=events, filler_ms=[], rng=random.Random(0))
    for s in sets:
        assert not all(any(abs(t - e) <= 150 for e in events) for t in s)


def test_hr_distractors_reject_ties():
    # HR is 150 bpm near 100 s and near 100.5 s (a tie), 80 bpm elsewhere
    def hr_near(t, radius):
        return (150.0, 150.0) if abs(t - 100_000) <= 600 + radius else (80.0, 80.0)

    times = hr_distractors(100_000, duration_ms=4_000_000, hr_near=hr_near, extremum_bpm=150.0, kind="max", rng=random.Random(3))
    assert len(times) == 3
    assert all(abs(t - 100_000) > 2_000 for t in times)
    assert all(abs(t - 100_000) in {10_000, 60_000, 300_000, 1_800_000} for t in times)


def test_labels_and_placement():
    labels = label_distractors("pause", ["pause", "a", "b", "c", "d"], random.Random(0))
    assert len(labels) == 3 and "pause" not in labels
    options = place_answer("X", ["a", "b", "c"], 2, random.Random(0))
    assert options[2] == "X" and sorted(options) == ["X", "a", "b", "c"]
