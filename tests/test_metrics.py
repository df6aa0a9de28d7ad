"""Metrics against hand-computed values: IDA, GT-RDA, Completion, Depth, stages, Wilson, McNemar."""

from __future__ import annotations

import pytest

from ecgtrace.metrics import compare_runs, loop_depth, mcnemar, summarize, wilson

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
# S1: loops depth 2 + 1/2 = 2.5, 1 (finding wrong), third loop has no grounding -> mean 1.75
# S2: 4; S3: 0 (criterion wrong); S4 (stop mode): 2 + 1/3 = 2.333333
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
    ((Y, Y, [N, Y, Y], Y), 2 + 2 / 3),  # fraction of correct grounding answers, not a prefix
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
    assert (res["gt_rda"]["k"], res["gt_rda"]["n"]) == (4, 5)  # S4's decision was never asked
    assert (res["completion"]["k"], res["completion"]["n"]) == (1, 4)
    assert res["depth"]["value"] == pytest.approx((1.75 + 4 + 0 + 7 / 3) / 4, abs=1e-6)
    assert res["depth"]["n"] == 4
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
    assert af["ida"]["value"] == 0.5 and af["gt_rda"]["value"] == 0.75 and af["completion"]["value"] == 0.5
    assert af["depth"]["value"] == pytest.approx(2.875)
    assert avb1["ida"]["value"] == 1.0 and avb1["gt_rda"]["value"] == 1.0 and avb1["completion"]["value"] == 0.0
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
    # S4's unasked decision is not paired
    assert out["tests"]["gt_rda"]["n"] == 5
