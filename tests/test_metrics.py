"""Metrics against hand-computed values: IDA, GT-RDA, decision accuracy, Completion, Depth, stages, Wilson, McNemar.

The definitions are ERB's (metrics version 2, see ecgtrace.metrics): GT-RDA is the last
loop's decision per sample, the pooled decision accuracy is ``decision_acc``, and Depth is
pooled over loops with grounding, crediting grounding up to the first wrong answer.
"""

from __future__ import annotations

import pytest

from ecgtrace.metrics import METRICS_VERSION, compare_runs, current_results, loop_depth, mcnemar, summarize, wilson

Y, N, NA = True, False, None  # NA: not asked (stop mode)


def sample(sid, diagnosis, initial, loops):
    """loops: [(criterion, finding, [grounding...], decision)], each True/False/None (not asked)."""
    turns = []

    def add(stage, loop, ok, kind=None):
        turns.append({"index": len(turns), "stage": stage, "loop": loop, "kind": kind,
                      "asked": ok is not None, "correct": ok, "error": None, "parse_ok": ok is not None})

    add("initial", None, initial)
    for n, (crit, find, grounds, dec) in enumerate(loops):
        add("criterion", n, crit)
        add("finding", n, find)
        for k, g in enumerate(grounds):
            add("grounding", n, g, kind=("lead", "wave", "measurement")[k % 3])
        add("decision", n, dec)
    return {"id": sid, "diagnosis": diagnosis, "turns": turns}


# Hand-computed (see the module docstring of ecgtrace.metrics for the rules):
# S1: loop depths 2 + 1/2 = 2.5, 1 (finding wrong), third loop has no grounding; last decision wrong
# S2: 4, last decision right; S3: 0 (criterion wrong), last decision right;
# S4 (stop mode): 2 + 1/3 = 2.333333, last decision never asked (wrong)
# pooled Depth = (2.5 + 1 + 4 + 0 + 7/3) / 5 loops; per-sample mean = (1.75 + 4 + 0 + 7/3) / 4
SAMPLES = [
    sample("S1", "af", Y, [(Y, Y, [Y, N], Y), (Y, N, [Y], Y), (Y, Y, [], N)]),
    sample("S2", "af", N, [(Y, Y, [Y, Y, Y], Y)]),
    sample("S3", "avb1", Y, [(N, Y, [Y], Y)]),
    sample("S4", "avb1", Y, [(Y, Y, [Y, N, NA], NA)]),
]


def loop_turns(crit, find, grounds, dec):
    return sample("x", "d", Y, [(crit, find, grounds, dec)])["turns"][1:]


@pytest.mark.parametrize(("loop", "depth"), [
    ((N, Y, [Y], Y), 0.0),
    ((Y, N, [Y], Y), 1.0),
    ((Y, Y, [N, N], Y), 2.0),
    ((Y, Y, [Y, N], Y), 2.5),
    ((Y, Y, [Y, Y, N], Y), 2 + 2 / 3),
    ((Y, Y, [N, Y, Y], Y), 2.0),          # only the answers before the first wrong one count (ERB)
    ((Y, Y, [Y, N, Y], Y), 2 + 1 / 3),
    ((Y, Y, [Y, Y], N), 3.0),
    ((Y, Y, [Y], Y), 4.0),
    ((Y, Y, [Y, NA], NA), 2.5),          # not asked counts as wrong
    ((Y, Y, [], Y), None),               # no grounding: not part of Depth
])
def test_loop_depth(loop, depth):
    got = loop_depth(loop_turns(*loop))
    assert got == pytest.approx(depth) if depth is not None else got is None


def test_overall_block_matches_hand_computation():
    res = summarize(SAMPLES)["overall"]
    assert res["n"] == 4
    assert (res["ida"]["k"], res["ida"]["n"]) == (3, 4)
    assert (res["gt_rda"]["k"], res["gt_rda"]["n"]) == (2, 4)  # per sample, the last loop's decision (S4's never asked: wrong)
    assert (res["decision_acc"]["k"], res["decision_acc"]["n"]) == (4, 5)  # S4's decision was never asked
    assert (res["completion"]["k"], res["completion"]["n"]) == (1, 4)
    assert res["depth"]["value"] == pytest.approx((2.5 + 1 + 4 + 0 + 7 / 3) / 5, abs=1e-6)
    assert (res["depth"]["n"], res["depth"]["n_samples"]) == (5, 4)
    assert res["depth_per_sample"]["value"] == pytest.approx((1.75 + 4 + 0 + 7 / 3) / 4, abs=1e-6)
    assert res["depth_per_sample"]["n"] == 4
    stages = {k: (v["k"], v["n"]) for k, v in res["stages"].items()}
    assert stages["initial"] == (3, 4)
    assert stages["criterion"] == (5, 6)
    assert stages["finding"] == (5, 6)
    assert stages["grounding"] == (7, 9)
    assert stages["decision"] == (4, 5)
    assert res["turns"]["not_asked"] == 2


def test_per_diagnosis_blocks():
    per = summarize(SAMPLES)["per_diagnosis"]
    assert sorted(per) == ["af", "avb1"]
    af, avb1 = per["af"], per["avb1"]
    assert af["ida"]["value"] == 0.5 and af["gt_rda"]["value"] == 0.5 and af["completion"]["value"] == 0.5
    assert af["decision_acc"]["value"] == 0.75
    assert af["depth"]["value"] == pytest.approx((2.5 + 1 + 4) / 3) and af["depth_per_sample"]["value"] == pytest.approx(2.875)
    assert avb1["ida"]["value"] == 1.0 and avb1["gt_rda"]["value"] == 0.5 and avb1["completion"]["value"] == 0.0
    assert avb1["decision_acc"]["value"] == 1.0
    assert avb1["depth"]["value"] == pytest.approx((0 + 7 / 3) / 2, abs=1e-6)


def test_wilson_reference_values():
    lo, hi = wilson(3, 4)
    assert (lo, hi) == pytest.approx((0.3006, 0.9544), abs=1e-4)
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = wilson(50, 100)
    assert (lo, hi) == pytest.approx((0.4038, 0.5962), abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)


def test_intervals_in_results():
    res = summarize(SAMPLES)["overall"]
    assert res["ida"]["ci95"] == pytest.approx([0.3006, 0.9544], abs=1e-4)
    lo, hi = res["depth"]["ci95"]
    assert 0 <= lo < res["depth"]["value"] < hi <= 4


def test_mcnemar_exact_and_chi_square():
    exact = mcnemar(1, 6)  # P(X <= 1 | n=7, 1/2) = 8/128 -> two-sided 0.125
    assert exact["method"] == "exact" and exact["p_value"] == pytest.approx(0.125)
    assert mcnemar(3, 3)["p_value"] == 1.0
    big = mcnemar(10, 25)  # (|10-25| - 1)^2 / 35 = 5.6 -> p = 0.017961
    assert big["method"] == "chi2-cc"
    assert big["statistic"] == pytest.approx(5.6) and big["p_value"] == pytest.approx(0.0179605, abs=2e-6)
    assert mcnemar(0, 0)["p_value"] == 1.0


def test_compare_runs_pairs_shared_units():
    better = [sample(s["id"], s["diagnosis"], True, [(Y, Y, [Y, Y], Y)]) for s in SAMPLES]
    for s, b in zip(SAMPLES, better):
        b["turns"] = [dict(t, correct=True, asked=True) for t in s["turns"]]
    extra = sample("only-b", "af", Y, [(Y, Y, [Y], Y)])
    out = compare_runs(SAMPLES, better + [extra])
    assert out["shared_samples"] == 4 and out["only_b"] == 1
    ida = out["tests"]["ida"]
    assert (ida["n"], ida["b"], ida["c"]) == (4, 0, 1)
    comp = out["tests"]["completion"]
    assert (comp["b"], comp["c"]) == (0, 3)
    # S4's unasked decision is not paired for decision_acc; gt_rda pairs samples
    assert out["tests"]["decision_acc"]["n"] == 5
    gt = out["tests"]["gt_rda"]
    assert (gt["n"], gt["b"], gt["c"]) == (4, 0, 2)  # S1 and S4 got their last decision wrong in A, right in B


FURTHER = "Further findings are required to confirm the diagnosis"


def decision_sample(sid, truths, answered):
    """A sample whose every non-decision turn is right; decision turns scored ``answered == truth`` per loop."""
    turns = [{"index": 0, "stage": "initial", "loop": None, "kind": None, "correct": True}]
    for n, (truth, said) in enumerate(zip(truths, answered)):
        for stage, ok in (("criterion", True), ("finding", True), ("grounding", True), ("decision", truth == said)):
            turns.append({"index": len(turns), "stage": stage, "loop": n, "kind": "lead" if stage == "grounding" else None, "correct": ok})
    return {"id": sid, "diagnosis": "d", "turns": turns}


def test_always_further_scores_no_gt_rda_and_the_share_of_further_as_decision_accuracy():
    # ERB's paths: every loop but the last is "Further ..."; the last is Yes or No
    paths = {"a": [FURTHER, FURTHER, "Yes"], "b": ["No"], "c": [FURTHER, "Yes"], "d": [FURTHER, FURTHER, FURTHER, "No"]}
    rows = [decision_sample(sid, truths, [FURTHER] * len(truths)) for sid, truths in paths.items()]
    res = summarize(rows)["overall"]
    assert res["gt_rda"]["value"] == 0.0 and res["gt_rda"]["n"] == 4
    assert (res["decision_acc"]["k"], res["decision_acc"]["n"]) == (6, 10)  # 6 of the 10 decision turns are "Further"
    assert res["depth"]["value"] == pytest.approx((4 * 6 + 3 * 4) / 10)  # loops with a "Further" truth reach 4, the last ones 3


def test_one_wrong_grounding_answer_per_loop():
    # every turn right except the first grounding answer of each loop (two grounding questions per loop)
    rows = []
    for sid, n_loops in (("s1", 1), ("s2", 2), ("s3", 3)):
        turns = [{"index": 0, "stage": "initial", "loop": None, "kind": None, "correct": True}]
        for n in range(n_loops):
            for stage, ok in (("criterion", True), ("finding", True), ("grounding", False), ("grounding", True), ("decision", True)):
                turns.append({"index": len(turns), "stage": stage, "loop": n, "kind": "wave", "correct": ok})
        rows.append({"id": sid, "diagnosis": "d", "turns": turns})
    res = summarize(rows)["overall"]
    assert res["ida"]["value"] == 1.0 and res["gt_rda"]["value"] == 1.0 and res["decision_acc"]["value"] == 1.0
    assert res["completion"]["value"] == 0.0
    assert res["depth"]["value"] == 2.0 and res["depth"]["n"] == 6  # criterion + finding, then 0 of 2 groundings before the wrong one
    assert (res["stages"]["grounding"]["k"], res["stages"]["grounding"]["n"]) == (6, 12)


def test_pooled_depth_weighs_loops_and_its_interval_clusters_by_sample():
    # one sample with 3 perfect loops, one with a single loop that fails at the criterion: pooled 12/4, per sample (4 + 0)/2
    good = sample("g", "d", Y, [(Y, Y, [Y], Y)] * 3)
    bad = sample("b", "d", Y, [(N, Y, [Y], Y)])
    res = summarize([good, bad])["overall"]
    assert res["depth"]["value"] == 3.0 and res["depth_per_sample"]["value"] == 2.0
    # ratio estimator: m/(m-1) * sum((D_i - r L_i)^2) / (sum L_i)^2 = 2 * ((12 - 9)^2 + (0 - 3)^2) / 16 = 2.25 -> se 1.5
    lo, hi = res["depth"]["ci95"]
    assert lo == pytest.approx(max(0.0, 3.0 - 1.959964 * 1.5), abs=1e-5) and hi == 4.0


def test_old_results_are_recomputed_with_the_current_definitions():
    old = {"run_id": "r", "n_items": 4, "n_finished": 4, "complete": True, "overall": {"gt_rda": {"value": 0.8}},
           "provenance": {"source": "computed", "method": "ecgtrace.metrics.summarize", "version": "1"}}
    now = current_results(old, SAMPLES)
    assert now["recomputed_from"] == "1" and now["provenance"]["version"] == METRICS_VERSION
    assert now["overall"]["gt_rda"]["value"] == 0.5 and now["n_items"] == 4 and now["run_id"] == "r"
    fresh = summarize(SAMPLES)
    assert current_results(fresh, []) is fresh
