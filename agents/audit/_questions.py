"""Turn a ground-truth path into the audit item's questions (ECG-Reasoning-Benchmark protocol).

One loop per visited criterion: criterion selection (5 options: a wording of
the criterion and 4 of its distractors), finding (Yes/No), grounding when the
finding is present (lead set / wave time span / measurement bin) and the decision (Yes /
No / further findings required). Options never repeat; every answer is one of
its options. Lead questions are prepared here as entries and written over a
whole set by :mod:`ecgtrace.agents.audit._leads` (a non-empty, preferably
proper subset of the leads where the feature was measured, thresholds asked
only with a margin). Randomness comes only from the
``rng`` passed in, so a seed gives the same item. The criterion and finding
questions drawn here are provisional: :func:`ecgtrace.agents.audit._surface.balance_surface`
re-draws them over a whole set so that their text gives nothing away.

Measurement questions (bins sorted ascending, so position A is "the lowest
bin") never offer a bin the finding just confirmed rules out (after "PR >
200 ms: yes", no [180-200] ms). A value just past the threshold can then only
be the first (or, for "<", the last) bin, which made "pick A" beat chance.
Each question records its allowed answer positions in
``provenance.params.measurement_grounding``; :func:`balance_measurement`
places every answer over a whole set (a record's, then the final dataset's)
so that each position holds at most ``T/n + 1`` of the ``T`` questions with
``n`` options: most constrained questions first, each at its least-used
allowed position (bins beyond the value are valid distractors, so a free
question takes the window that puts its answer where the set needs it); while
a position is still over-full, the most constrained question there (edge-only
first) is dropped with reason ``balance_measurement_position`` in
``grounding_skipped``. Answers (the bin that holds the value) never change.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from ecgtrace.agents.audit._leads import lead_entry
from ecgtrace.agents.audit._surface import _pick, criterion_question, finding_question
from ecgtrace.contracts.audit import DECISION_OPTIONS
from ecgtrace.agents.audit.engine import MissingFeature, Path, feature_in_unit
from ecgtrace.rubrics.diagnosis_schema import DIAGNOSE, RULE_OUT, DiagnosisGraph, GroundingRule, unit_factor

FURTHER = DECISION_OPTIONS[2]
MIN_DECOY_GAP = 0.7  # a decoy span may overlap a correct span by at most 30 % of its length
SKIP_POSITION = "balance_measurement_position"
POSITION_SLACK = 1.0  # a measurement answer position may exceed its uniform share by at most this (in questions)


class GroundingSkipped(Exception):
    """This grounding question cannot be asked on this window (reason in args[0])."""


def _fmt_num(x: float) -> str:
    text = f"{round(x, 6):.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def span_text(a_s: float, b_s: float) -> str:
    """``[5.62s - 5.81s]`` (seconds from the recording start, as on the PNG and text assets' time axis)."""
    return f"[{a_s:.2f}s - {b_s:.2f}s]"


def bin_text(lo: float, hi: float, unit: str) -> str:
    """``[200-210] ms``; ``[-45 to -30] deg`` when a bound is negative."""
    sep = " to " if lo < 0 or hi < 0 else "-"
    return f"[{_fmt_num(lo)}{sep}{_fmt_num(hi)}] {unit}"


def decision_answer(next_node: str) -> str:
    if next_node == DIAGNOSE:
        return DECISION_OPTIONS[0]
    if next_node == RULE_OUT:
        return DECISION_OPTIONS[1]
    return FURTHER


# ---------------------------------------------------------------- grounding


def _beat_span(beat: dict[str, Any]) -> tuple[float, float]:
    on, off = beat.get("qrs_on_s"), beat.get("qrs_off_s")
    if on is None or off is None or off <= on:
        return beat["r_s"] - 0.06, beat["r_s"] + 0.06
    return on, off


def _wave_spans(target: str, beats: list[dict[str, Any]]) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(correct spans, decoy spans from other beats) for a wave target, absolute seconds."""
    def spans(sel: list[dict[str, Any]]) -> list[tuple[float, float]]:
        return [_beat_span(b) for b in sel]

    if target in ("premature_beat", "v_beat", "s_beat", "paced_beat"):
        chooser = {
            "premature_beat": lambda b: b["premature"],
            "v_beat": lambda b: b["premature"] and b["wide"] is True,
            "s_beat": lambda b: b["premature"] and b["wide"] is False,
            "paced_beat": lambda b: b["cls"] == "Q",
        }[target]
        hit = [b for b in beats if chooser(b)]
        return spans(hit), spans([b for b in beats if not chooser(b) and not b["premature"]])
    if target in ("v_run", "s_run"):
        cls = "V" if target == "v_run" else "S"
        best: list[dict[str, Any]] = []
        run: list[dict[str, Any]] = []
        for b in beats:
            run = run + [b] if b["cls"] == cls else []
            if len(run) > len(best):
                best = list(run)
        if len(best) < 2:
            return [], []
        return [(_beat_span(best[0])[0], _beat_span(best[-1])[1])], []
    if target == "longest_rr":
        pairs = [(beats[k - 1]["r_s"], beats[k]["r_s"]) for k in range(1, len(beats))]
        if not pairs:
            return [], []
        longest = max(pairs, key=lambda p: p[1] - p[0])
        near = [p for p in pairs if (p[1] - p[0]) >= 0.9 * (longest[1] - longest[0])]  # ties are all correct
        return near, [p for p in pairs if p not in near]
    if target == "pr_interval":
        return [(b["p_on_s"], b["qrs_on_s"]) for b in beats if b["p"] and b["p_on_s"] is not None and b["qrs_on_s"] is not None and b["cls"] == "N"], []
    if target == "qrs_complex":
        return spans([b for b in beats if b["cls"] == "N" and not b["premature"]]), []
    raise GroundingSkipped(f"unknown wave target {target}")


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th`` ... ``11th``, ``12th``, ``13th``, ``21st``."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def pair_text(first: int) -> str:
    """ERB's QRS-pair option ``[6th QRS wave - 7th QRS wave]`` for the RR from QRS ``first`` (1-based) to the next."""
    return f"[{ordinal(first)} QRS wave - {ordinal(first + 1)} QRS wave]"


def pair_question(rule: GroundingRule, beats: list[dict[str, Any]], rng: np.random.Generator) -> dict[str, Any]:
    """Which consecutive QRS pair encloses the dropped beat: the RR opened by the beat marked ``opens_long_rr``.

    Decoys are other consecutive pairs of the window, never one whose RR is within
    10 % of the long one (two equally long RRs would both be right).
    """
    opens = [b for b in beats if b.get("opens_long_rr")]
    if not opens or opens[0]["ordinal"] >= len(beats):
        raise GroundingSkipped(f"no_wave_target:{rule.target}")
    first = int(opens[0]["ordinal"])
    long_rr = beats[first]["rr_ms"]  # the beat after the opener carries the long RR
    pool = [b["ordinal"] - 1 for b in beats[1:] if b["ordinal"] - 1 != first
            and not (long_rr and b["rr_ms"] and b["rr_ms"] >= 0.9 * long_rr)]
    picks = [pool[int(i)] for i in rng.permutation(len(pool))[: rule.n_options - 1]]
    if not picks:
        raise GroundingSkipped(f"no_wave_decoys:{rule.target}")
    options = [pair_text(k) for k in sorted([first, *picks])]
    return {"kind": "wave", "question": _pick(rng, rule.questions), "options": options, "answer": pair_text(first), "multi": False}


def wave_question(rule: GroundingRule, beats: list[dict[str, Any]], t0_s: float, t1_s: float, rng: np.random.Generator) -> dict[str, Any]:
    if rule.target == "dropped_beat_pair":
        return pair_question(rule, beats, rng)
    correct, decoys = _wave_spans(rule.target or "", beats)
    correct = [c for c in correct if c[0] >= t0_s and c[1] <= t1_s]
    if not correct:
        raise GroundingSkipped(f"no_wave_target:{rule.target}")
    answer = correct[int(rng.integers(len(correct)))]
    length = answer[1] - answer[0]
    pool = [d for d in decoys if d[0] >= t0_s and d[1] <= t1_s]
    shifts = [answer[0] + s for s in np.arange(-6.0, 6.0, 0.35)]
    pool += [(s, s + length) for s in shifts if t0_s <= s and s + length <= t1_s]
    rel = lambda span: span_text(span[0], span[1])  # noqa: E731  (absolute, like the assets' time axis)
    chosen: list[tuple[float, float]] = [answer]
    texts = {rel(answer)}
    for k in rng.permutation(len(pool)):
        cand = pool[int(k)]
        width = cand[1] - cand[0]
        if any(_overlap(cand, c) > (1 - MIN_DECOY_GAP) * min(width, c[1] - c[0]) for c in correct + chosen):
            continue
        if rel(cand) in texts:
            continue
        chosen.append(cand)
        texts.add(rel(cand))
        if len(chosen) == rule.n_options:
            break
    if len(chosen) < 2:
        raise GroundingSkipped(f"no_wave_decoys:{rule.target}")
    options = [rel(c) for c in sorted(chosen)]
    return {"kind": "wave", "question": _pick(rng, rule.questions), "options": options, "answer": rel(answer), "multi": False}


def finding_bound(finding: dict[str, Any], rule: GroundingRule) -> tuple[str, float] | None:
    """``(op, threshold in the rule's unit)`` when the finding is one window-level test of the measured feature, else None."""
    if finding.get("feature") != rule.feature or "lead" in finding or "leads" in finding or isinstance(finding.get("value"), bool):
        return None
    to_canonical = unit_factor(rule.feature or "", str(finding.get("unit")))
    to_rule = unit_factor(rule.feature or "", rule.unit or "")
    if to_canonical is None or not to_rule or finding.get("op") not in (">", ">=", "<", "<="):
        return None
    return str(finding["op"]), float(finding["value"]) * to_canonical / to_rule


def measurement_entry(rule: GroundingRule, features: dict[str, Any], rng: np.random.Generator,
                      bound: tuple[str, float] | None = None) -> dict[str, Any]:
    """The measured bin and the answer positions allowed for one measurement rule (see :func:`measurement_question`).

    ``bound`` (see :func:`finding_bound`): the finding just confirmed says the
    value lies beyond this threshold, so a window holding a bin wholly on the
    other side (or a negative bin for a non-negative value) is never offered.
    ``positions`` are the answer positions of the windows that offer none
    (the windows with fewest such bins, if none is clean); ``chosen`` is a
    provisional uniform draw among them, re-chosen over a whole set by
    :func:`balance_measurement`.
    """
    try:
        value = feature_in_unit(features, rule.feature or "", rule.unit or "")
    except MissingFeature as exc:
        raise GroundingSkipped(f"feature_unavailable:{exc.feature}") from None
    width = float(rule.bin_width or 1.0)
    k0 = math.floor(value / width + 1e-9)
    n = rule.n_options

    def outside(k: int) -> bool:  # bin k cannot hold a value that satisfies the finding, or is negative for a non-negative value
        if value >= 0 and k0 >= 0 and k < 0:
            return True
        if bound is None:
            return False
        op, threshold = bound
        lo, hi = k * width, (k + 1) * width
        return hi <= threshold if op in (">", ">=") else lo > threshold if op == "<=" else lo >= threshold

    cost = {p: sum(outside(k) for k in range(k0 - p, k0 - p + n)) for p in range(n)}  # p: the answer's position
    positions = [p for p in range(n) if cost[p] == min(cost.values())]
    return {"question": _pick(rng, rule.questions), "k0": int(k0), "width": width, "unit": rule.unit or "", "n": int(n),
            "positions": positions, "chosen": positions[int(rng.integers(len(positions)))], "dropped": None}


def measurement_from_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """The question of a measurement entry with its answer at position ``entry["chosen"]``."""
    first = entry["k0"] - entry["chosen"]
    options = [bin_text(k * entry["width"], (k + 1) * entry["width"], entry["unit"]) for k in range(first, first + entry["n"])]
    return {"kind": "measurement", "question": entry["question"], "options": options, "answer": options[entry["chosen"]], "multi": False}


def measurement_question(rule: GroundingRule, features: dict[str, Any], rng: np.random.Generator,
                         bound: tuple[str, float] | None = None) -> dict[str, Any]:
    """The bin holding the measured value among ``n_options`` consecutive bins (answer position: a uniform draw
    among the windows that offer no bin excluded by ``bound``; see :func:`measurement_entry`)."""
    return measurement_from_entry(measurement_entry(rule, features, rng, bound))


# ---------------------------------------------------------------- loops


def build_loops(graph: DiagnosisGraph, path: Path, features: dict[str, Any], beats: list[dict[str, Any]], record_leads: list[str],
                t0_s: float, t1_s: float, rng: np.random.Generator
                ) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]], list[dict[str, Any]]]:
    """The loops of one item, the skip reasons of grounding questions left out, the lead- and the measurement-question entries.

    Lead questions are not placed in the loops here: each becomes an entry
    (:func:`ecgtrace.agents.audit._leads.lead_entry`, with its ``loop`` and
    ``rule`` index) that :func:`ecgtrace.agents.audit._leads.balance_leads`
    turns into a question over a whole set of items. Measurement questions are
    placed provisionally; their entries (:func:`measurement_entry`, with
    ``loop``, ``rule`` and ``criterion``) let :func:`balance_measurement`
    re-place or drop them over a whole set.
    """
    loops: list[dict[str, Any]] = []
    skipped: list[str] = []
    entries: list[dict[str, Any]] = []
    measures: list[dict[str, Any]] = []
    for j, step in enumerate(path.steps):
        crit = graph.criteria[step.criterion]
        criterion, _, _ = criterion_question(graph, crit, None, rng)
        finding = finding_question(crit, step.present, bool(rng.integers(2)), rng)
        grounding: list[dict[str, Any]] = []
        if step.present:
            for r, rule in enumerate(crit.grounding):
                if rule.kind == "lead":
                    try:
                        entries.append({"loop": j, "rule": r, "criterion": step.criterion, **lead_entry(rule, features, record_leads, rng)})
                    except ValueError as exc:
                        skipped.append(f"{step.criterion}.lead:{exc.args[0]}")
                    continue
                try:
                    if rule.kind == "wave":
                        grounding.append(wave_question(rule, beats, t0_s, t1_s, rng))
                    else:
                        entry = measurement_entry(rule, features, rng, finding_bound(crit.finding, rule))
                        measures.append({"loop": j, "rule": r, "criterion": step.criterion, **entry})
                        grounding.append(measurement_from_entry(entry))
                except GroundingSkipped as exc:
                    skipped.append(f"{step.criterion}.{rule.kind}:{exc.args[0]}")
        loops.append({
            "criterion": criterion,
            "finding": finding,
            "grounding": grounding,
            "decision": {"question": _pick(rng, graph.decision_questions).replace("{name}", graph.name), "options": list(DECISION_OPTIONS),
                         "answer": decision_answer(step.next)},
        })
    return loops, skipped, entries, measures


# ---------------------------------------------------------------- answer position of measurement questions


def _assign_positions(slots: list[tuple[dict[str, Any], list[int]]]) -> Counter:
    """Most constrained first, each entry takes its allowed position used least so far (ties: its own seeded order)."""
    used: Counter = Counter()
    for entry, order in sorted(slots, key=lambda s: len(s[1])):
        pick = min(order, key=lambda p: used[(entry["n"], p)])
        entry["chosen"] = pick
        used[(entry["n"], pick)] += 1
    return used


def balance_measurement(items: list[dict[str, Any]], rng: np.random.Generator) -> None:
    """Place every measurement answer over ``items`` so that its position is uniform; rebuild the questions in place.

    Bins are sorted ascending, so the position is also "lowest bin" / "highest
    bin". Each entry may only use its ``positions`` (no offered bin excluded
    by the finding). Entries are assigned most constrained first, each to its
    allowed position used least so far among questions with as many options.
    While a position holds more than ``T/n + POSITION_SLACK`` of the ``T``
    kept questions with ``n`` options, the entry there with the fewest allowed
    positions (ties: a seeded order) is dropped with reason
    :data:`SKIP_POSITION` and the rest re-assigned, so questions that can only
    put their answer at an edge are thinned first. Ground truth never changes.
    """
    refs = [(n, e) for n, item in enumerate(items) for e in range(len(item["provenance"]["params"].get("measurement_grounding", [])))]
    refs = [refs[int(i)] for i in rng.permutation(len(refs))]
    slots = []
    for n, e in refs:
        entry = items[n]["provenance"]["params"]["measurement_grounding"][e]
        entry["dropped"] = None
        slots.append((entry, [entry["positions"][int(i)] for i in rng.permutation(len(entry["positions"]))]))
    while True:
        used = _assign_positions(slots)
        totals: Counter = Counter(entry["n"] for entry, _ in slots)
        excess = {key: c - (totals[key[0]] / key[0] + POSITION_SLACK) for key, c in used.items()}
        key = max(excess, key=lambda k: (excess[k], -k[0], -k[1]), default=None)
        if key is None or excess[key] <= 0:
            break
        there = [k for k, (entry, _) in enumerate(slots) if entry["n"] == key[0] and entry["chosen"] == key[1]]
        drop = min(reversed(there), key=lambda k: len(slots[k][1]))  # the most constrained; ties: last in the seeded order
        slots[drop][0]["dropped"] = SKIP_POSITION
        del slots[drop]
    for item in items:
        _rebuild_measurement(item)


def _rebuild_measurement(item: dict[str, Any]) -> None:
    params = item["provenance"]["params"]
    entries = params.get("measurement_grounding", [])
    if not entries:
        return
    skipped = [s for s in params.get("grounding_skipped", []) if not s.endswith(f".measurement:{SKIP_POSITION}")]
    for entry in entries:
        loop = item["loops"][entry["loop"]]
        answer = bin_text(entry["k0"] * entry["width"], (entry["k0"] + 1) * entry["width"], entry["unit"])
        at = [i for i, g in enumerate(loop["grounding"]) if g["kind"] == "measurement" and g["question"] == entry["question"] and g["answer"] == answer]
        if entry["dropped"]:
            skipped.append(f"{entry['criterion']}.measurement:{entry['dropped']}")
            if at:
                del loop["grounding"][at[0]]
        elif at:
            loop["grounding"][at[0]] = measurement_from_entry(entry)
        else:
            loop["grounding"].append(measurement_from_entry(entry))
    params["grounding_skipped"] = skipped
