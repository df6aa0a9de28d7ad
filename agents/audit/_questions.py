"""Turn a ground-truth path into the audit item's questions (ECG-Reasoning-Benchmark protocol).

One loop per visited criterion: criterion selection (5 options: a wording of
the criterion and 4 of its distractors), finding (Yes/No), grounding (lead set /
wave time span / measurement bin) and the decision (Yes / No / further findings
required). Grounding is asked whether the finding is present or absent, as ERB
does: on an absent finding each rule whose answer the signal still settles is
asked after "To verify that this ECG does not show <criterion>, ..."
(:func:`ecgtrace.agents.audit._surface.verify_wording`), and skipped with its
reason where it does not (no premature beat to point at, no lead on either
side of the threshold, ...). Options never repeat; every answer is one of
its options. Lead questions are prepared here as entries and written over a
whole set by :mod:`ecgtrace.agents.audit._leads` (a non-empty, preferably
proper subset of the leads where the feature was measured, thresholds asked
only with a margin). Randomness comes only from the
``rng`` passed in, so a seed gives the same item. The criterion and finding
questions drawn here are provisional: :func:`ecgtrace.agents.audit._surface.balance_surface`
re-draws them over a whole set so that their text gives nothing away.

Measurement questions and the balance of their answer positions are
:mod:`ecgtrace.agents.audit._bins`' (re-exported here).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ecgtrace.agents.audit._bins import (POSITION_SLACK, SKIP_POSITION, GroundingSkipped, balance_measurement, bin_text, erb_bin_text,
                                         finding_bound, measurement_entry, measurement_from_entry, measurement_question)
from ecgtrace.agents.audit._leads import lead_entry
from ecgtrace.agents.audit._surface import LONGEST_PAIR_QUESTION, _pick, criterion_question, finding_question, verify_wording
from ecgtrace.contracts.audit import DECISION_OPTIONS
from ecgtrace.agents.audit.engine import Path
from ecgtrace.rubrics.diagnosis_schema import DIAGNOSE, RULE_OUT, Criterion, DiagnosisGraph, GroundingRule

__all__ = ["POSITION_SLACK", "SKIP_POSITION", "GroundingSkipped", "balance_measurement", "bin_text", "build_loops", "decision_answer",
           "erb_bin_text", "finding_bound", "measurement_entry", "measurement_from_entry", "measurement_question", "pair_question",
           "span_text", "wave_question"]

FURTHER = DECISION_OPTIONS[2]
MIN_DECOY_GAP = 0.7  # a decoy span may overlap a correct span by at most 30 % of its length
#: Wave targets every window has whether the finding is present or not (asked on absent findings too).
NEUTRAL_WAVE_TARGETS = frozenset({"longest_rr", "pr_interval", "qrs_complex"})


def span_text(a_s: float, b_s: float) -> str:
    """``[5.62s - 5.81s]`` (seconds from the recording start, as on the PNG and text assets' time axis)."""
    return f"[{a_s:.2f}s - {b_s:.2f}s]"


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


def pair_question(rule: GroundingRule, beats: list[dict[str, Any]], rng: np.random.Generator, present: bool = True) -> dict[str, Any]:
    """Which consecutive QRS pair encloses the dropped beat: the RR opened by the beat marked ``opens_long_rr``;
    with the finding absent (no beat dropped), ERB's check: the pair around the longest RR.

    Decoys are other consecutive pairs of the window, never one whose RR is within
    10 % of the long one (two equally long RRs would both be right).
    """
    if present:
        opens = [b for b in beats if b.get("opens_long_rr")]
        if not opens or opens[0]["ordinal"] >= len(beats):
            raise GroundingSkipped(f"no_wave_target:{rule.target}")
        first = int(opens[0]["ordinal"])
    else:
        rrs = [(int(b["ordinal"]) - 1, b["rr_ms"]) for b in beats[1:] if b.get("rr_ms")]
        if not rrs:
            raise GroundingSkipped(f"no_wave_target:{rule.target}")
        first = max(rrs, key=lambda pair: pair[1])[0]
    long_rr = beats[first]["rr_ms"]  # the beat after the opener carries the long RR
    pool = [b["ordinal"] - 1 for b in beats[1:] if b["ordinal"] - 1 != first
            and not (long_rr and b["rr_ms"] and b["rr_ms"] >= 0.9 * long_rr)]
    picks = [pool[int(i)] for i in rng.permutation(len(pool))[: rule.n_options - 1]]
    if not picks:
        raise GroundingSkipped(f"no_wave_decoys:{rule.target}")
    options = [pair_text(k) for k in sorted([first, *picks])]
    question = _pick(rng, rule.questions) if present else LONGEST_PAIR_QUESTION
    return {"kind": "wave", "question": question, "options": options, "answer": pair_text(first), "multi": False}


def wave_question(rule: GroundingRule, beats: list[dict[str, Any]], t0_s: float, t1_s: float, rng: np.random.Generator,
                  present: bool = True) -> dict[str, Any]:
    """The time span (or QRS pair) of the rule's target among decoys. On an absent finding only targets every window
    has are asked (:data:`NEUTRAL_WAVE_TARGETS`, and the longest-RR pair for a dropped beat)."""
    if rule.target == "dropped_beat_pair":
        return pair_question(rule, beats, rng, present)
    if not present and rule.target not in NEUTRAL_WAVE_TARGETS:
        raise GroundingSkipped(f"no_wave_target:{rule.target}")
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
        for r, rule in enumerate(crit.grounding):
            if rule.kind == "lead":
                try:
                    entries.append({"loop": j, "rule": r, "criterion": step.criterion, **lead_entry(rule, features, record_leads, rng)})
                except ValueError as exc:
                    skipped.append(f"{step.criterion}.lead:{exc.args[0]}")
                continue
            try:
                grounding.append(_placed_question(crit, rule, step.present, features, beats, t0_s, t1_s, rng, measures,
                                                  {"loop": j, "rule": r, "criterion": step.criterion}))
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


def _placed_question(crit: Criterion, rule: GroundingRule, present: bool, features: dict[str, Any], beats: list[dict[str, Any]],
                     t0_s: float, t1_s: float, rng: np.random.Generator, measures: list[dict[str, Any]], where: dict[str, Any]) -> dict[str, Any]:
    """One wave or measurement question of a loop (a measurement's entry is added to ``measures``); on an absent
    finding it is asked as a check ("To verify that this ECG does not show ...")."""
    if rule.kind == "wave":
        question = wave_question(rule, beats, t0_s, t1_s, rng, present)
    else:
        entry = measurement_entry(rule, features, rng, finding_bound(crit.finding, rule, present))
        if not present:
            entry["question"] = verify_wording(crit, entry["question"])
        measures.append({**where, **entry})
        return measurement_from_entry(entry)
    if not present:
        question["question"] = verify_wording(crit, question["question"])
    return question
