"""What ERB asks: grounding on absent findings ("To verify that ..."), and measurement bins with variable widths and open edges."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ecgtrace.agents.audit._bins import GroundingSkipped, erb_bin_text, finding_bound, measurement_entry, measurement_from_entry
from ecgtrace.agents.audit._questions import pair_question
from ecgtrace.agents.audit._surface import LONGEST_PAIR_QUESTION, verify_wording
from ecgtrace.rubrics.diagnosis_schema import GroundingRule, load_diagnoses

PR_EDGES = [120, 140, 160, 180, 200, 210, 220, 230, 240]
PR_FINDING = {"feature": "pr_ms", "op": ">", "value": 200, "unit": "ms"}


def test_erb_bin_texts():
    assert erb_bin_text(230, 240, "ms") == "[230ms - 240ms]"
    assert erb_bin_text(240, None, "ms") == "Above 240ms" and erb_bin_text(None, 120, "ms") == "Below 120ms"
    assert erb_bin_text(0, 75, "deg") == "[0 degrees - 75 degrees]"
    assert erb_bin_text(1.1, 1.2, "mV") == "[1.1mV - 1.2mV]" and erb_bin_text(80, 90, "bpm") == "[80 bpm - 90 bpm]"


def _every_window(rule, value, bound):
    entry = measurement_entry(rule, {"pr_ms": value}, np.random.default_rng(0), bound)
    return entry, [measurement_from_entry({**entry, "chosen": pos}) for pos in entry["positions"]]


def _bounds(option: str) -> tuple[float, float]:
    if option.startswith("Below "):
        return -math.inf, float(option[6:].removesuffix("ms"))
    if option.startswith("Above "):
        return float(option[6:].removesuffix("ms")), math.inf
    lo, hi = option.strip("[]").split(" - ")
    return float(lo.removesuffix("ms")), float(hi.removesuffix("ms"))


@pytest.mark.parametrize(("value", "present"), [(205.0, True), (235.0, True), (310.0, True), (200.0, False), (150.0, False), (95.0, False)])
def test_edge_bins_hold_the_value_and_offer_nothing_the_finding_rules_out(value, present):
    rule = GroundingRule(kind="measurement", feature="pr_ms", unit="ms", bin_edges=PR_EDGES, questions=["What is the PR interval?"])
    op, threshold = finding_bound(PR_FINDING, rule, present)
    assert (op, threshold) == ((">", 200.0) if present else ("<=", 200.0))
    entry, questions = _every_window(rule, value, (op, threshold))
    assert entry["n"] == 5 and questions
    for q in questions:
        bins = [_bounds(o) for o in q["options"]]
        assert len(q["options"]) == 5 and bins == sorted(bins) and len(set(q["options"])) == 5
        lo, hi = _bounds(q["answer"])
        assert lo <= value < hi
        for b_lo, b_hi in bins:  # could hold a value on the finding's side of the threshold
            assert b_hi > threshold if op == ">" else b_lo <= threshold, (q, op)
    if present and value == 235.0:  # ERB's own options after "PR > 200 ms: yes"
        assert ["[200ms - 210ms]", "[210ms - 220ms]", "[220ms - 230ms]", "[230ms - 240ms]", "Above 240ms"] in [q["options"] for q in questions]


def test_edge_bins_that_cannot_be_drawn_are_skipped_with_a_reason():
    rule = GroundingRule(kind="measurement", feature="pr_ms", unit="ms", bin_edges=[200, 210], n_options=3, questions=["PR?"])
    with pytest.raises(GroundingSkipped, match="no_bins_around_value"):
        measurement_entry(rule, {"pr_ms": 150.0}, np.random.default_rng(0), ("<=", 200.0))


def test_uniform_bins_shrink_rather_than_offer_a_ruled_out_bin():
    rule = GroundingRule(kind="measurement", feature="pr_ms", unit="ms", bin_width=20, questions=["PR?"])
    entry = measurement_entry(rule, {"pr_ms": 10.0}, np.random.default_rng(0), ("<", 60.0))  # 0 <= value < 60: three bins fit
    assert entry["n"] == 3 and entry["positions"] == [0]
    assert measurement_from_entry(entry)["options"] == ["[0-20] ms", "[20-40] ms", "[40-60] ms"]
    with pytest.raises(GroundingSkipped, match="no_bins_clear_of_the_finding"):  # only [0-20] fits: not asked
        measurement_entry(rule, {"pr_ms": 10.0}, np.random.default_rng(0), ("<", 20.0))


def test_absent_dropped_beat_asks_for_the_longest_rr_pair():
    rule = GroundingRule(kind="wave", target="dropped_beat_pair", n_options=4, questions=["Between which QRS complexes is the beat dropped?"])
    rr = [None, 800, 810, 1010, 790, 805, 800]
    beats = [{"ordinal": k + 1, "rr_ms": v} for k, v in enumerate(rr)]
    q = pair_question(rule, beats, np.random.default_rng(1), present=False)
    assert q["question"] == LONGEST_PAIR_QUESTION and q["answer"] == "[3rd QRS wave - 4th QRS wave]"
    assert len(q["options"]) == 4 and q["answer"] in q["options"]


def test_verify_wording_names_the_criterion():
    crit = load_diagnoses()["first_degree_av_block"].criteria["long_pr"]
    assert verify_wording(crit, "What is the PR interval?") == \
        "To verify that this ECG does not show prolonged PR interval (> 200 ms), what is the PR interval?"


def test_absent_findings_are_grounded_where_the_signal_settles_the_answer(synth_build):
    graphs = load_diagnoses()
    absent = grounded = 0
    kinds = set()
    for item in synth_build.items:
        steps = item["provenance"]["params"]["path"]["steps"]
        for step, loop in zip(steps, item["loops"]):
            if step["present"]:
                assert not any(g["question"].startswith("To verify that") for g in loop["grounding"])
                continue
            crit = graphs[item["diagnosis"]].criteria[step["criterion"]]
            if not crit.grounding:
                continue
            absent += 1
            grounded += bool(loop["grounding"])
            for g in loop["grounding"]:
                assert g["question"].startswith("To verify that this ECG does not show"), g
                kinds.add(g["kind"])
            asked = len(loop["grounding"])
            skipped = [s for s in item["provenance"]["params"]["grounding_skipped"] if s.startswith(f"{step['criterion']}.")]
            assert asked + len(skipped) == len(crit.grounding), (item["id"], step["criterion"])  # each rule asked or skipped with a reason
    assert absent >= 20 and grounded >= 0.5 * absent, (grounded, absent)
    assert {"lead", "measurement"} <= kinds


def test_every_measurement_question_says_how_far_its_value_lies_from_a_bin_edge():
    from ecgtrace.rubrics.diagnosis_features import FEATURES

    edges_rule = GroundingRule(kind="measurement", feature="pr_ms", unit="ms", bin_edges=PR_EDGES, questions=["What is the PR interval?"])
    entry = measurement_entry(edges_rule, {"pr_ms": 226.0}, np.random.default_rng(0), (">", 200.0))
    assert entry["edge_distance"] == pytest.approx(4.0)  # 230 ms is the nearest edge
    assert entry["tolerance"] == pytest.approx(FEATURES["pr_ms"].tolerance)  # 6.0 ms: the neighbouring bin could hold it
    width_rule = GroundingRule(kind="measurement", feature="qrs_ms", unit="s", bin_width=0.02, questions=["QRS?"])
    entry = measurement_entry(width_rule, {"qrs_ms": 131.0}, np.random.default_rng(0), None)
    assert entry["edge_distance"] == pytest.approx(0.009)  # in the rule's unit (s): 131 ms sits 9 ms from 140 ms and 11 from 120
    assert entry["tolerance"] == pytest.approx(FEATURES["qrs_ms"].tolerance / 1000.0)
