"""Reasoning-audit metrics with 95% intervals, and McNemar tests for paired runs.

Input is the ``samples.jsonl`` rows of a run: ``{"id", "diagnosis", "turns": [...]}``
where each turn has ``stage`` (initial|criterion|finding|grounding|decision),
``loop`` (None for initial), ``kind`` (grounding kind), ``asked`` (False for
turns a ``stop``-mode chain never reached; missing means True) and ``correct``.
A turn not asked counts as wrong wherever a metric needs it.

Definitions (metrics version 2: exactly what is computed, and how each relates
to the ECG-Reasoning-Benchmark evaluator, ``../shared/formats/ERB.md``):

* **IDA** (``ida``) - correct initial answers / samples. Unit: sample. Same as ERB.
* **GT-RDA** (``gt_rda``) - per sample, the decision of its **last loop**
  (asked with the ground-truth history in ``teacher`` mode); correct / samples
  with at least one loop. In ``stop`` mode a last decision never reached counts
  as wrong. Unit: sample. Same as ERB's GT-RDA. (Metrics version 1 called the
  pooled number below "gt_rda".)
* **Decision accuracy** (``decision_acc``) - correct / asked decision turns,
  pooled over every loop of every sample. Unit: decision turn. ERB's
  ``decision_accuracy_w_gt``. Every loop but the last answers "Further
  findings ...", so an examinee that always says so scores GT-RDA 0 and a
  ``decision_acc`` equal to the share of such answers (55.7% on ERB's PTB-XL release).
* **Completion** (``completion``) - samples whose every loop turn (criterion,
  finding, each grounding question, decision, in every loop) was asked and
  correct / samples. The initial question is not part of it. Unit: sample. Same as ERB.
* **Depth** (``depth``, 0-4) - pooled over all loops that have at least one
  grounding question (not averaged per sample first): walk the loop's steps in
  order, stop at the first wrong one: criterion correct -> +1; then finding
  correct -> +1; then grounding adds ``p / g`` where ``p`` is the number of
  grounding questions answered correctly **before the first wrong one** and
  ``g`` the loop's grounding questions, and the walk stops unless ``p == g``;
  then decision correct -> +1. A loop scores 0, 1, 2, 2 + p/g, 3 or 4.
  ``depth = sum of loop depths / number of such loops``. Same as ERB's Depth.
  Its interval treats samples as clusters (loops of one sample are not
  independent): the ratio estimator's linearised variance
  ``n / (n - 1) * sum_i (D_i - depth * L_i)^2 / (sum_i L_i)^2`` over the ``n``
  samples with such loops (``D_i`` their summed depths, ``L_i`` their loop
  counts), 1.96 standard errors, clipped to [0, 4]; with n = 1 it is [0, 4].
* **Depth per sample** (``depth_per_sample``, 0-4) - the same loop depths
  averaged within each sample first, then over samples that have such a loop
  (normal-approximation interval over samples). Not an ERB number; it weighs
  every sample alike however many loops it has. (Metrics version 1 reported a
  per-sample mean as "depth", with grounding credited as the share of all its
  questions answered correctly, not only those before the first wrong one.)
* **Per-stage accuracy** (``stages``) - correct / asked turns per stage
  (``initial``, ``criterion``, ``finding``, ``grounding``, ``grounding:lead``,
  ``grounding:wave``, ``grounding:measurement``, ``decision``). Unit: turn.
  The criterion, finding, lead, wave, measurement and decision numbers are
  ERB's per-stage accuracies "with ground truth" (``accuracy_w_gt``).

Proportions carry a Wilson score 95% interval (z = 1.959964). Every block is
computed overall and per diagnosis. Numbers are rounded to 6 decimals so that
the same samples give byte-identical ``results.json``; its ``provenance.version``
is :data:`METRICS_VERSION`, and a run header records the version its run began
with (``metrics_version``; headers without one began under version 1).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

Z95 = 1.959963984540054
#: Bump when a metric definition changes; recorded in results.json provenance and in new run headers.
METRICS_VERSION = "2"
STAGE_KEYS = ("initial", "criterion", "finding", "grounding", "grounding:lead", "grounding:wave",
              "grounding:measurement", "decision")


def _r(x: float) -> float:
    return round(float(x), 6)


def _sig(p: float) -> float:
    """A p-value to 6 significant digits: rounding to 6 decimals would turn 1e-9 into 0."""
    return float(f"{float(p):.6g}")


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for ``k`` successes in ``n`` trials; (0, 1) when n == 0."""
    if n <= 0:
        return (0.0, 1.0)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def proportion(k: int, n: int) -> dict[str, Any]:
    lo, hi = wilson(k, n)
    return {"value": _r(k / n) if n else None, "k": int(k), "n": int(n), "ci95": [_r(lo), _r(hi)]}


def mean_interval(values: list[float], lo_bound: float = 0.0, hi_bound: float = 4.0) -> dict[str, Any]:
    n = len(values)
    if n == 0:
        return {"value": None, "n": 0, "sd": None, "ci95": [lo_bound, hi_bound]}
    mean = sum(values) / n
    if n == 1:
        return {"value": _r(mean), "n": 1, "sd": None, "ci95": [lo_bound, hi_bound]}
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = Z95 * sd / math.sqrt(n)
    return {"value": _r(mean), "n": n, "sd": _r(sd), "ci95": [_r(max(lo_bound, mean - half)), _r(min(hi_bound, mean + half))]}


def pooled_interval(per_sample: list[list[float]], lo_bound: float = 0.0, hi_bound: float = 4.0) -> dict[str, Any]:
    """Mean of every value pooled over samples, with a cluster-robust (ratio-estimator) 95% interval.

    ``per_sample`` holds each sample's values (samples without any are left
    out). ``n`` is the number of values (loops), ``n_samples`` the clusters.
    """
    clusters = [v for v in per_sample if v]
    total = sum(len(v) for v in clusters)
    if total == 0:
        return {"value": None, "n": 0, "n_samples": 0, "ci95": [lo_bound, hi_bound]}
    mean = sum(sum(v) for v in clusters) / total
    m = len(clusters)
    if m == 1:
        return {"value": _r(mean), "n": total, "n_samples": 1, "ci95": [lo_bound, hi_bound]}
    var = m / (m - 1) * sum((sum(v) - mean * len(v)) ** 2 for v in clusters) / total ** 2
    half = Z95 * math.sqrt(var)
    return {"value": _r(mean), "n": total, "n_samples": m, "ci95": [_r(max(lo_bound, mean - half)), _r(min(hi_bound, mean + half))]}


# ------------------------------------------------------------------ per sample

def _ok(turn: dict[str, Any]) -> bool:
    return bool(turn.get("asked", True) and turn.get("correct"))


def loop_depth(loop_turns: list[dict[str, Any]]) -> float | None:
    """Depth of one loop (ERB's walk, see the module docstring); None when the loop has no grounding."""
    by_stage: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in sorted(loop_turns, key=lambda t: t.get("index", 0)):
        by_stage[t["stage"]].append(t)
    grounding = by_stage.get("grounding", [])
    if not grounding:
        return None
    depth = 0.0
    for stage in ("criterion", "finding"):
        if not by_stage.get(stage) or not all(_ok(t) for t in by_stage[stage]):
            return depth
        depth += 1
    before_wrong = next((k for k, t in enumerate(grounding) if not _ok(t)), len(grounding))
    depth += before_wrong / len(grounding)
    if before_wrong < len(grounding):
        return depth
    if by_stage.get("decision") and all(_ok(t) for t in by_stage["decision"]):
        depth += 1
    return depth


def sample_outcomes(sample: dict[str, Any]) -> dict[str, Any]:
    """The per-sample pieces every metric is built from."""
    turns = sample["turns"]
    initial = [t for t in turns if t["stage"] == "initial"]
    loops: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for t in turns:
        if t["stage"] != "initial":
            loops[int(t["loop"])].append(t)
    depths = [d for d in (loop_depth(loops[k]) for k in sorted(loops)) if d is not None]
    last = [t for t in loops[max(loops)] if t["stage"] == "decision"] if loops else []
    stages: dict[str, list[bool]] = defaultdict(list)
    for t in turns:
        if not t.get("asked", True):
            continue
        stages[t["stage"]].append(bool(t.get("correct")))
        if t["stage"] == "grounding":
            stages[f"grounding:{t.get('kind')}"].append(bool(t.get("correct")))
    loop_turns = [t for t in turns if t["stage"] != "initial"]
    return {
        "ida": _ok(initial[0]) if initial else None,
        "completion": bool(loop_turns) and all(_ok(t) for t in loop_turns),
        "loop_depths": depths,
        "depth": sum(depths) / len(depths) if depths else None,
        "last_decision": (bool(last) and all(_ok(t) for t in last)) if loops else None,
        "decisions": [(int(t["loop"]), bool(t.get("correct"))) for t in turns if t["stage"] == "decision" and t.get("asked", True)],
        "stages": dict(stages),
        "errors": sum(1 for t in turns if t.get("error")),
        "parse_failures": sum(1 for t in turns if t.get("asked", True) and not t.get("error") and not t.get("parse_ok", True)),
        "not_asked": sum(1 for t in turns if not t.get("asked", True)),
    }


# ----------------------------------------------------------------------- blocks

def summarize_block(samples: list[dict[str, Any]]) -> dict[str, Any]:
    outs = [sample_outcomes(s) for s in samples]
    ida = [o["ida"] for o in outs if o["ida"] is not None]
    last = [o["last_decision"] for o in outs if o["last_decision"] is not None]
    decisions = [ok for o in outs for _, ok in o["decisions"]]
    stages: dict[str, list[bool]] = defaultdict(list)
    for o in outs:
        for key, values in o["stages"].items():
            stages[key].extend(values)
    return {
        "n": len(samples),
        "ida": proportion(sum(ida), len(ida)),
        "gt_rda": proportion(sum(last), len(last)),
        "decision_acc": proportion(sum(decisions), len(decisions)),
        "completion": proportion(sum(o["completion"] for o in outs), len(outs)),
        "depth": pooled_interval([o["loop_depths"] for o in outs]),
        "depth_per_sample": mean_interval([o["depth"] for o in outs if o["depth"] is not None]),
        "stages": {k: proportion(sum(stages[k]), len(stages[k])) for k in STAGE_KEYS if stages.get(k)},
        "turns": {
            "errors": sum(o["errors"] for o in outs),
            "parse_failures": sum(o["parse_failures"] for o in outs),
            "not_asked": sum(o["not_asked"] for o in outs),
        },
    }


def summarize(samples: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """``{"overall": block, "per_diagnosis": {diagnosis: block}, "provenance": ...}`` (samples sorted by id first)."""
    rows = sorted(samples, key=lambda s: s["id"])
    per: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in rows:
        per[s.get("diagnosis", "?")].append(s)
    return {"overall": summarize_block(rows), "per_diagnosis": {d: summarize_block(per[d]) for d in sorted(per)},
            "provenance": {"source": "computed", "method": "ecgtrace.metrics.summarize", "version": METRICS_VERSION,
                           "params": {"interval": "wilson", "z": Z95, "depth_interval": "cluster-robust ratio (samples)",
                                      "depth_per_sample_interval": "normal-approximation"}}}


def results_version(results: dict[str, Any]) -> str:
    """The metrics version a results.json was computed with ("1" for files written before versions were checked)."""
    return str(((results or {}).get("provenance") or {}).get("version") or "1")


def current_results(results: dict[str, Any], samples: list[dict[str, Any]]) -> dict[str, Any]:
    """``results`` as computed by this version: unchanged when its metrics version is current, else recomputed
    from ``samples`` (the run's rows; the file's counts of items are kept) with ``recomputed_from`` naming the old version."""
    old = results_version(results)
    if old == METRICS_VERSION:
        return results
    keep = {k: v for k, v in results.items() if k in ("run_id", "n_items", "n_finished", "complete")}
    return {**keep, **summarize(samples), "recomputed_from": old}


# ---------------------------------------------------------------------- McNemar

EXACT_BELOW = 25  # discordant pairs; below this the exact binomial test is used


def mcnemar(b: int, c: int) -> dict[str, Any]:
    """McNemar test on discordant counts ``b`` (A right, B wrong) and ``c`` (A wrong, B right).

    Exact two-sided binomial test (p = min(1, 2 * P[X <= min(b, c)]), X ~ Bin(b + c, 1/2))
    when ``b + c < 25``; otherwise chi-square with continuity correction,
    ``(|b - c| - 1)^2 / (b + c)``, 1 degree of freedom.
    """
    n = b + c
    if n == 0:
        return {"b": b, "c": c, "method": "none", "statistic": None, "p_value": 1.0}
    if n < EXACT_BELOW:
        k = min(b, c)
        tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
        return {"b": b, "c": c, "method": "exact", "statistic": None, "p_value": _sig(min(1.0, 2 * tail))}
    stat = (abs(b - c) - 1) ** 2 / n
    return {"b": b, "c": c, "method": "chi2-cc", "statistic": _r(stat), "p_value": _sig(math.erfc(math.sqrt(stat / 2)))}


def _units(sample: dict[str, Any]) -> dict[str, dict[Any, bool]]:
    """Binary outcomes per metric, keyed by the unit they pair on."""
    out = sample_outcomes(sample)
    sid = sample["id"]
    units: dict[str, dict[Any, bool]] = defaultdict(dict)
    if out["ida"] is not None:
        units["ida"][sid] = out["ida"]
    units["completion"][sid] = out["completion"]
    if out["last_decision"] is not None:
        units["gt_rda"][sid] = out["last_decision"]
    for loop, ok in out["decisions"]:
        units["decision_acc"][(sid, loop)] = ok
    for t in sample["turns"]:
        if t.get("asked", True):
            units[f"stage:{t['stage']}"][(sid, t["index"])] = bool(t.get("correct"))
            if t["stage"] == "grounding":
                units[f"stage:grounding:{t.get('kind')}"][(sid, t["index"])] = bool(t.get("correct"))
    return units


def compare_runs(samples_a: Iterable[dict[str, Any]], samples_b: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """McNemar per metric and stage on the units both runs share (same sample id, same turn)."""
    a_units: dict[str, dict[Any, bool]] = defaultdict(dict)
    b_units: dict[str, dict[Any, bool]] = defaultdict(dict)
    a_rows = {s["id"]: s for s in samples_a}
    b_rows = {s["id"]: s for s in samples_b}
    shared = sorted(set(a_rows) & set(b_rows))
    for sid in shared:
        for key, vals in _units(a_rows[sid]).items():
            a_units[key].update(vals)
        for key, vals in _units(b_rows[sid]).items():
            b_units[key].update(vals)
    tests: dict[str, Any] = {}
    order = ["ida", "gt_rda", "decision_acc", "completion"] + [f"stage:{k}" for k in STAGE_KEYS]
    for key in order:
        common = sorted(set(a_units.get(key, {})) & set(b_units.get(key, {})), key=str)
        if not common:
            continue
        a = [a_units[key][u] for u in common]
        b = [b_units[key][u] for u in common]
        n10 = sum(1 for x, y in zip(a, b) if x and not y)
        n01 = sum(1 for x, y in zip(a, b) if y and not x)
        tests[key] = {"n": len(common), "acc_a": _r(sum(a) / len(a)), "acc_b": _r(sum(b) / len(b)), **mcnemar(n10, n01)}
    return {"shared_samples": len(shared), "only_a": len(set(a_rows) - set(b_rows)), "only_b": len(set(b_rows) - set(a_rows)), "tests": tests}
