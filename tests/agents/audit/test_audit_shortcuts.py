"""Audit items cannot be answered from the question text: option lengths, Yes/No balance,
lead subsets and measurement-bin positions stay at chance, and no ground-truth answer moves."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ecgtrace.agents.audit.dataset import write_audit_dataset

# ---------------------------------------------------------------- the answers cannot be read off the question text

def _loops(items):
    from ecgtrace.rubrics.diagnosis_schema import load_diagnoses

    graphs = load_diagnoses()
    for item in items:
        steps = item["provenance"]["params"]["path"]["steps"]
        assert len(steps) == len(item["loops"])
        for step, loop in zip(steps, item["loops"]):
            yield item, graphs[item["diagnosis"]], graphs[item["diagnosis"]].criteria[step["criterion"]], step, loop


def test_correct_criterion_is_not_recognisable_by_its_length(synth_build) -> None:
    from scipy.stats import binom

    from ecgtrace.rubrics.diagnosis_schema import distractor_wordings

    longest = shortest = n = 0
    longer_counts = [0] * 5
    for _, _, crit, _, loop in _loops(synth_build.items):
        q = loop["criterion"]
        assert q["answer"] in [crit.text, *crit.variants]
        wordings = {w: k for k, e in enumerate(crit.distractors) for w in distractor_wordings(e)}
        others = [o for o in q["options"] if o != q["answer"]]
        assert len(others) == 4 and all(o in wordings for o in others) and len({wordings[o] for o in others}) == 4  # 4 distinct distractors
        size = len(q["answer"])
        assert all(len(o) != size for o in others)  # no tie for a "longest option" rule
        n += 1
        longest += all(len(o) < size for o in others)
        shortest += all(len(o) > size for o in others)
        longer_counts[sum(len(o) > size for o in others)] += 1
    assert n >= 40
    # under chance the answer is the longest (shortest) of 5 with p = 1/5: far more hits than that is a shortcut
    assert binom.sf(longest - 1, n, 0.2) > 1e-3, (longest, n)
    assert binom.sf(shortest - 1, n, 0.2) > 1e-3, (shortest, n)
    assert min(longer_counts) >= 0.1 * n, longer_counts  # every length rank of the answer occurs


def test_finding_answers_are_balanced_and_keep_the_ground_truth(synth_build) -> None:
    from scipy.stats import binomtest

    from ecgtrace.agents.audit.engine import evaluate_predicate

    yes_by_dx: dict[str, list[int]] = {}
    wording: dict[tuple, list[int]] = {}
    for item, _, crit, step, loop in _loops(synth_build.items):
        q = loop["finding"]
        negated = q["question"] in crit.negated_questions
        assert negated or q["question"] in crit.questions
        # the finding's truth, recomputed from the measured features, is what the answer says (through the wording)
        present = evaluate_predicate(crit.finding, item["provenance"]["params"]["features"])
        assert present is step["present"]
        assert (q["answer"] == "Yes") is (present != negated), (item["id"], q)
        yes_by_dx.setdefault(item["diagnosis"], [0, 0])[q["answer"] == "Yes"] += 1
        wording.setdefault((item["diagnosis"], step["criterion"], present), [0, 0])[negated] += 1
    no, yes = (sum(v[i] for v in yes_by_dx.values()) for i in (0, 1))
    assert binomtest(yes, yes + no, 0.5).pvalue > 0.2 and abs(yes - no) <= 2, (yes, no)
    for diagnosis, (n_no, n_yes) in yes_by_dx.items():
        assert abs(n_yes - n_no) <= 2, (diagnosis, n_yes, n_no)
    for key, (plain, negated) in wording.items():  # the wording says nothing about the answer
        assert abs(plain - negated) <= 1, (key, plain, negated)


def _asked(crit, step, question: str) -> str:
    """The rule's own wording of a grounding question: absent findings ask it as ERB's check, after a prefix naming the criterion."""
    from ecgtrace.agents.audit._surface import verify_wording

    if step["present"]:
        assert not question.startswith("To verify that"), question
        return question
    prefix = verify_wording(crit, "\x00").split("\x00")[0]
    assert question.startswith(prefix), (prefix, question)
    rest = question[len(prefix):]
    return rest[:1].upper() + rest[1:]


def _lead_reading(rule, question: str) -> tuple[float, bool] | None:
    """(threshold, complement) that the question text asks, read from the rule's wordings; None when no wording fits."""
    def fmt(x: float) -> str:
        return f"{round(x, 6):.6f}".rstrip("0").rstrip(".")

    for value in [rule.value, *rule.values]:
        for complement, pool in ((False, rule.questions), (True, rule.complement_questions)):
            if question in [q.replace("{value}", fmt(value)) for q in pool]:
                return float(value), complement
    return None


def test_lead_answers_are_recomputed_from_the_per_lead_values(synth_build) -> None:
    """Each lead answer follows from the per-lead measurements (with the rule's margin), and no lead is invented."""
    from ecgtrace.agents.audit.engine import lead_values
    from ecgtrace.rubrics.diagnosis_schema import unit_factor

    ops = {">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b}
    asked = proper = 0
    for item, _, crit, step, loop in _loops(synth_build.items):
        rules = [r for r in crit.grounding if r.kind == "lead"]
        leads = [g for g in loop["grounding"] if g["kind"] == "lead"]
        if not rules:
            assert not leads
            continue
        skipped = [s for s in item["provenance"]["params"]["grounding_skipped"] if s.startswith(f"{step['criterion']}.lead:")]
        assert len(leads) + len(skipped) == len(rules), item["id"]
        for g in leads:
            text = _asked(crit, step, g["question"])  # on an absent finding: "To verify that this ECG does not show ..., <question>"
            found = [(rule, _lead_reading(rule, text)) for rule in rules if _lead_reading(rule, text)]
            assert len(found) == 1, g["question"]
            rule, (value, complement) = found[0]
            measured = lead_values(item["provenance"]["params"]["features"], rule.feature)  # canonical units
            wanted = {x.upper() for x in rule.leads} if rule.leads else {x.upper() for x in item["record"]["leads"]}
            assert g["multi"] is True and len(g["options"]) >= 2 and set(g["options"]) <= set(item["record"]["leads"])
            assert set(g["options"]) == {lead for lead in measured if lead.upper() in wanted}
            factor = unit_factor(rule.feature, rule.unit)
            threshold, margin = value * factor, (rule.margin or 0.0) * factor
            assert all(abs(measured[lead] - threshold) >= margin for lead in g["options"]), (g, measured)  # nothing too close to call
            truth = {lead for lead in g["options"] if ops[rule.op](measured[lead], threshold) != complement}
            assert g["answer"] and set(g["answer"]) == truth and len(g["answer"]) == len(truth), (item["id"], g, measured)
            asked += 1
            proper += len(truth) < len(g["options"])
    assert asked >= 10 and proper >= 0.6 * asked, (asked, proper)


def test_all_lead_answers_are_no_more_frequent_than_a_uniform_subset_draw(synth_build) -> None:
    from scipy.stats import binom

    questions = [g for item in synth_build.items for loop in item["loops"] for g in loop["grounding"] if g["kind"] == "lead"]
    n = len(questions)
    full = sum(1 for g in questions if set(g["answer"]) == set(g["options"]))
    rate = sum(1.0 / (2 ** len(g["options"]) - 1) for g in questions) / n
    assert binom.sf(full - 1, n, rate) > 0.05, (full, n, rate)  # not significantly above the uniform-subset rate
    assert full >= 1  # ... and not simply never the full set (that, too, would be a cue)
    first = sum(1 for g in questions if g["answer"] == [g["options"][0]])  # "select the first option"
    assert binom.sf(first - 1, n, rate) > 0.05, (first, n)
    firsts = {g["options"][0] for g in questions}
    assert len(firsts) >= 2  # options are not always in the same order


def test_lead_balance_is_redone_over_a_merged_set(synth_build) -> None:
    """The dataset-level pass rebuilds lead questions from the kept entries: same truths, same rules."""
    import copy

    from ecgtrace.agents.audit._leads import balance_leads
    from ecgtrace.rubrics.diagnosis_schema import load_diagnoses

    items = copy.deepcopy(synth_build.items)
    balance_leads(items, load_diagnoses(), np.random.default_rng(11))
    for before, after in zip(synth_build.items, items):
        entries = after["provenance"]["params"]["lead_grounding"]
        kept = sum(1 for e in entries if not e["dropped"])
        assert kept == sum(1 for loop in after["loops"] for g in loop["grounding"] if g["kind"] == "lead")
        assert [g["kind"] for loop in before["loops"] for g in loop["grounding"] if g["kind"] != "lead"] == \
               [g["kind"] for loop in after["loops"] for g in loop["grounding"] if g["kind"] != "lead"]


def test_the_shortcut_probe_finds_nothing_in_criterion_and_finding_questions(synth_build, tmp_path: Path) -> None:
    from ecgtrace.agents.exam.bias import probe
    from ecgtrace.jsonio import write_jsonl_atomic

    write_jsonl_atomic(tmp_path / "audit.jsonl", synth_build.items)
    result = probe(tmp_path)
    groups = {(g["by"], g["group"]): g for g in result["groups"] if g["source"] == "audit"}
    for stage in ("audit:criterion", "audit:finding"):
        g = groups[("task", stage)]
        assert not g["flags"], (stage, g)
        assert g["prior"]["accuracy"] <= g["prior"]["chance"] + 0.1, (stage, g["prior"])
    lead = groups[("task", "audit:grounding:lead")]
    assert lead["n"] >= 10 and not lead["flags"], lead
    assert not [g for g in result["groups"] if "select_all" in g["flags"]], result["flagged"]


def test_measurement_bins_are_not_ruled_out_by_the_finding_just_answered(synth_build) -> None:
    """After "PR > 200 ms: yes", a bin like [160-180] ms could be discarded without the ECG: none is offered."""
    from ecgtrace.agents.audit._questions import finding_bound

    checked = 0
    positions = set()
    for _, _, crit, step, loop in _loops(synth_build.items):
        rules = [r for r in crit.grounding if r.kind == "measurement"]
        for g in (g for g in loop["grounding"] if g["kind"] == "measurement"):
            rule = rules[0]
            bound = finding_bound(crit.finding, rule, step["present"])  # an absent finding bounds the value the other way
            positions.add(g["options"].index(g["answer"]))
            if bound is None:
                continue
            op, threshold = bound
            for option in g["options"]:
                lo, hi = _bin_bounds(option)
                assert (hi > threshold) if op in (">", ">=") else (lo < threshold if op == "<" else lo <= threshold), (g, bound)
            checked += 1
    assert checked >= 5 and len(positions) >= 3  # and the answer is not always in the same place


def test_lead_entry_asks_only_thresholds_clear_of_every_lead() -> None:
    """Hand-made per-lead values: thresholds within the margin of a lead are not asked; complements are exact."""
    from ecgtrace.agents.audit._leads import lead_entry
    from ecgtrace.rubrics.diagnosis_schema import GroundingRule

    rule = GroundingRule(kind="lead", feature="p_amp_mv", op=">=", value=0.12, values=[0.085, 0.2], margin=0.01, unit="mV",
                         questions=["At least {value} mV?"], complement_questions=["Below {value} mV?"])
    feats = {"per_lead": {"p_amp_mv": {"MLII": 0.15, "V1": 0.05, "V5": 0.115, "V2": None}}}
    entry = lead_entry(rule, feats, ["MLII", "V1", "V5", "V2"], np.random.default_rng(0))
    assert sorted(entry["options"]) == ["MLII", "V1", "V5"]  # V2 unmeasured: not offered
    got = {(c["value"], c["complement"]): sorted(c["answer"]) for c in entry["candidates"]}
    # 0.12 is within 0.01 of V5 (0.115): not asked; 0.2: nobody reaches it, only the complement (every lead) is a candidate
    assert got == {(0.085, False): ["MLII", "V5"], (0.085, True): ["V1"], (0.2, True): ["MLII", "V1", "V5"]}
    near = GroundingRule(kind="lead", feature="p_amp_mv", op=">=", value=0.12, margin=0.01, unit="mV", questions=["At least 0.12 mV?"])
    with pytest.raises(ValueError, match="near_threshold:V5"):
        lead_entry(near, feats, ["MLII", "V1", "V5"], np.random.default_rng(0))
    # a rule margin below the feature's measurement tolerance (0.025 mV for amplitudes) does not make a lead clear:
    # V1 at 0.07 mV lies 0.015 mV from 0.085, outside the rule's 0.01 but inside the tolerance
    tight = GroundingRule(kind="lead", feature="p_amp_mv", op=">=", value=0.085, margin=0.01, unit="mV", questions=["At least 0.085 mV?"])
    with pytest.raises(ValueError, match="near_threshold:V1"):
        lead_entry(tight, {"per_lead": {"p_amp_mv": {"MLII": 0.15, "V1": 0.07}}}, ["MLII", "V1"], np.random.default_rng(0))


def _bin_bounds(option: str) -> tuple[float, float]:
    """``[200-210] ms``, ``[-45 to -30] deg``, or ERB's ``[200ms - 210ms]``, ``Below 120ms`` and ``Above 240ms`` (open ends infinite)."""
    import math
    import re

    number = r"(-?[\d.]+)\s*[A-Za-z%*]*"
    if option.startswith("Below "):
        return -math.inf, float(re.match(number, option[6:]).group(1))
    if option.startswith("Above "):
        return float(re.match(number, option[6:]).group(1)), math.inf
    match = re.match(r"\[(-?[\d.]+)(?:-| to )(-?[\d.]+)\]", option) or re.match(rf"\[{number} - {number}\]", option)
    lo, hi = (float(x) for x in match.groups())
    return lo, hi


def _checked_measurement_questions(items) -> list[dict]:
    """Measurement questions of ``items``, after checking: answer = bin of the measured value, bins ascending, none ruled out by the finding."""
    from ecgtrace.agents.audit._questions import finding_bound
    from ecgtrace.agents.audit.engine import feature_in_unit

    questions = []
    for item, _, crit, step, loop in _loops(items):
        rule = next((r for r in crit.grounding if r.kind == "measurement"), None)
        for g in (g for g in loop["grounding"] if g["kind"] == "measurement"):
            value = feature_in_unit(item["provenance"]["params"]["features"], rule.feature, rule.unit)
            lo, hi = _bin_bounds(g["answer"])
            assert lo - 1e-6 <= value < hi + 1e-6, (item["id"], g, value)  # ground truth unchanged
            bins = [_bin_bounds(o) for o in g["options"]]
            assert bins == sorted(bins)
            bound = finding_bound(crit.finding, rule, step["present"])
            if bound is not None:
                op, threshold = bound
                for b_lo, b_hi in bins:
                    assert (b_hi > threshold) if op in (">", ">=") else (b_lo < threshold if op == "<" else b_lo <= threshold), (g, bound)
            questions.append(g)
    return questions


def _assert_positions_not_a_cue(questions: list[dict]) -> None:
    """Answer at A ("lowest bin") or at the last option ("highest bin") not significantly more often than 1/n."""
    from scipy.stats import binom

    n = len(questions)
    rate = sum(1.0 / len(g["options"]) for g in questions) / n
    for where in (0, -1):
        hits = sum(1 for g in questions if g["options"].index(g["answer"]) == range(len(g["options"]))[where])
        assert binom.sf(hits - 1, n, rate) > 0.05, (where, hits, n, [g["options"].index(g["answer"]) for g in questions])


def test_measurement_answer_position_is_not_a_cue_and_keeps_the_measured_bin(synth_build) -> None:
    questions = _checked_measurement_questions(synth_build.items)
    assert len(questions) >= 8, len(questions)
    _assert_positions_not_a_cue(questions)
    kept = sum(1 for item in synth_build.items for e in item["provenance"]["params"]["measurement_grounding"] if not e["dropped"])
    assert kept == len(questions)


def test_mitdb_measurement_answers_are_not_mostly_the_lowest_bin(shared_data: Path, tmp_path: Path) -> None:
    """Rate and interval values just past a finding's threshold used to force the answer into bin A (10 of 17 here)."""
    diagnoses = ["vt", "ventricular_bigeminy", "svt", "af", "sinus_tachycardia", "sinus_bradycardia", "first_degree_av_block", "sinus_pause"]
    write_audit_dataset([str(shared_data / "mitdb" / r) for r in ("119", "201", "208")], tmp_path, seed=0, diagnoses=diagnoses,
                        render_assets=False)
    items = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    questions = _checked_measurement_questions(items)
    assert len(questions) >= 10, len(questions)
    _assert_positions_not_a_cue(questions)


def test_measurement_balance_thins_edge_only_questions_and_never_offers_excluded_bins() -> None:
    """Hand-made set: 30 questions whose value sits just above a '>' threshold (answer can only be first), 20 free ones."""
    from collections import Counter

    from ecgtrace.agents.audit._questions import SKIP_POSITION, balance_measurement, finding_bound, measurement_entry
    from ecgtrace.rubrics.diagnosis_schema import GroundingRule

    rule = GroundingRule(kind="measurement", feature="pr_ms", unit="ms", bin_width=20, questions=["PR interval?"])
    finding = {"feature": "pr_ms", "op": ">", "value": 200, "unit": "ms"}
    bound = finding_bound(finding, rule)
    assert bound == (">", 200.0)
    rng = np.random.default_rng(5)
    items = []
    for k, pr in enumerate([205.0] * 30 + [300.0] * 20):
        entry = measurement_entry(rule, {"pr_ms": pr}, rng, bound)
        assert entry["positions"] == ([0] if pr == 205.0 else [0, 1, 2, 3, 4])  # [180-200] would be ruled out by "PR > 200"
        loops = [{"grounding": []}]
        items.append({"loops": loops, "provenance": {"params": {"grounding_skipped": [], "measurement_grounding": [
            {"loop": 0, "rule": 0, "criterion": f"c{k}", **entry}]}}})
    balance_measurement(items, np.random.default_rng(0))
    qs = [g for item in items for g in item["loops"][0]["grounding"]]
    counts = Counter(g["options"].index(g["answer"]) for g in qs)
    assert max(counts.values()) <= len(qs) / 5 + 1 and len(counts) == 5, counts
    dropped = [s for item in items for s in item["provenance"]["params"]["grounding_skipped"]]
    assert len(dropped) + len(qs) == 50 and all(s.endswith(f".measurement:{SKIP_POSITION}") for s in dropped)
    assert len(qs) >= 24  # only as many edge-only questions as needed are dropped
    for g in qs:
        assert all(_bin_bounds(o)[1] > 200 for o in g["options"]), g
        assert g["answer"] in ("[200-220] ms", "[300-320] ms")
    balance_measurement(items, np.random.default_rng(1))  # redone over the same set: drops are re-decided, nothing duplicated
    assert sum(len(item["loops"][0]["grounding"]) for item in items) + sum(
        len(item["provenance"]["params"]["grounding_skipped"]) for item in items) == 50
