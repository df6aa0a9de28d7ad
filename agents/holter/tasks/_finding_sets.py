"""Windows with several findings, as Holtercare asks about them: every finding named, or the one listed that is not there.

Used by the diagnosis tasks (:mod:`ecgtrace.agents.holter.tasks.diagnosis`):

* ``open_diagnosis`` names every arrhythmia of a window that holds two or more
  ("The arrhythmias present in this ECG strip are premature ventricular
  contraction and premature atrial contraction."): the answer is the set of
  diagnosis labels joined with ``"; "`` (:func:`join_labels`), scored as a set
  (:func:`ecgtrace.agents.exam.findings_text.label_verdict`).
* ``closed_diagnosis`` framed negatively (distractor rule ``present_labels``):
  "Which of the listed diagnoses is not supported by this recording?". The
  options are the window's findings (two or three, at most the template's
  ``n``) and one it does not hold, the answer: 3-4 options. The answer is
  never a finding a beat class of the window belongs to (a PVC window never
  offers "ventricular couplet" as unsupported) nor normal sinus rhythm (an
  abnormal strip's "normal" is no clean negative). A single-finding window
  is not asked this way: with two options it is the positive question with
  the answer swapped.

Windows come from :func:`ecgtrace.agents.holter.windows.finding_set_targets`.
Every finding with a beat pattern is recounted from the beat table
(:mod:`ecgtrace.agents.holter.recount`).
"""

from __future__ import annotations

from typing import Any

from ecgtrace.agents.holter import recount as rc
from ecgtrace.agents.holter.evidence import window_evidence, window_values
from ecgtrace.agents.holter.facts import Facts
from ecgtrace.agents.holter.report import DIAGNOSIS_LABELS
from ecgtrace.agents.holter.tasks._base import Target, WriteContext, Written
from ecgtrace.agents.holter.windows import window_kinds
from ecgtrace.contracts.vocabulary import NORMAL

#: How a set of diagnosis labels is written in an answer.
LABEL_SEPARATOR = "; "
#: Findings a beat class can be part of: never offered as a wrong diagnosis when that class is in the window.
RELATED_KINDS = {"V": ("pvc", "v_couplet", "vt", "v_bigeminy", "v_trigeminy"), "S": ("pac", "svt")}


def join_labels(kinds: list[str]) -> str:
    """``["pac", "pvc"]`` -> ``"premature atrial contraction; premature ventricular contraction"`` (sorted by label)."""
    return LABEL_SEPARATOR.join(sorted(DIAGNOSIS_LABELS[k] for k in kinds))


def is_set_target(target: Target) -> bool:
    """A target placed for several findings (:func:`~ecgtrace.agents.holter.windows.finding_set_targets`)."""
    return "kinds" in target


def window_findings(facts: Facts, target: Target) -> list[str] | None:
    """The findings of a target window, or None when one of them has no diagnosis label (it could not be named)."""
    kinds = window_kinds(facts, int(target["t0_ms"]), int(target["t1_ms"]))
    return kinds if kinds and all(k in DIAGNOSIS_LABELS for k in kinds) else None


def set_base(ctx: WriteContext, kinds: list[str]) -> Written:
    """The fields of a several-findings item: window, display, stem values, evidence of every event, the findings as truth."""
    t0, t1 = int(ctx.target["t0_ms"]), int(ctx.target["t1_ms"])
    values = {**window_values(t0, t1, kinds[0]), "diagnosis": join_labels(kinds)}
    return {"window": {"t0_s": round(t0 / 1000.0, 3), "t1_s": round(t1 / 1000.0, 3)}, "_display_ms": [[t0, t1]], "_values": values,
            "evidence": window_evidence(ctx.facts, ctx.lead, t0, t1, ctx.facts.events_overlapping(t0, t1)), "_truth": kinds}


def unsupported_labels(facts: Facts, t0: int, t1: int) -> list[str]:
    """Labels of findings absent from ``[t0, t1)`` and unrelated to any beat class in it (normal excluded)."""
    present = set(window_kinds(facts, t0, t1))
    i0, i1 = facts.beat_range(t0, t1)
    related = {k for cls, kinds in RELATED_KINDS.items() if cls in facts.class_text[i0:i1] for k in kinds}
    return [DIAGNOSIS_LABELS[k] for k in DIAGNOSIS_LABELS if k not in present | related | {NORMAL}]


def write_set_item(ctx: WriteContext, *, negative: bool) -> Written | None:
    """A several-findings item: every label as the answer, or (``negative``) the window's labels as distractors of one it lacks."""
    kinds = window_findings(ctx.facts, ctx.target)
    if kinds is None or len(kinds) < 2 or NORMAL in kinds:
        return None
    out = set_base(ctx, kinds)
    if not negative:
        return {**out, "answer": join_labels(kinds)}
    pool = unsupported_labels(ctx.facts, int(ctx.target["t0_ms"]), int(ctx.target["t1_ms"]))
    if not pool:
        return None
    supported = sorted(DIAGNOSIS_LABELS[k] for k in kinds)
    ctx.rng.shuffle(supported)
    return {**out, "answer": pool[ctx.rng.randrange(len(pool))], "_distractors": supported[:ctx.n_distractors]}


def verify_set(facts: Facts, item: dict[str, Any]) -> str | None:
    """The window still holds exactly these findings, and each one with a beat pattern is found again in the beat table."""
    target, kinds = item["_target"], item["_truth"]
    if window_findings(facts, target) != kinds:
        return "ambiguous: the window's findings changed"
    i0, i1 = facts.beat_range(int(target["t0_ms"]), int(target["t1_ms"]))
    for kind in kinds:
        spans = rc.recount(facts, kind, i0, i1)
        if spans is not None and not spans:
            return f"recount disagrees: no {kind} in the beat table"
    return None


def verify_negative_options(facts: Facts, item: dict[str, Any]) -> str | None:
    """Every listed diagnosis but the answer is in the window; the answer is not, nor related to a beat class in it."""
    target = item["_target"]
    t0, t1 = int(target["t0_ms"]), int(target["t1_ms"])
    present = {DIAGNOSIS_LABELS[k] for k in window_kinds(facts, t0, t1) if k in DIAGNOSIS_LABELS}
    if item["answer"] in present or item["answer"] not in unsupported_labels(facts, t0, t1):
        return "distractor: the unsupported answer is supported by the window"
    if not set(item["_distractors"]) <= present:
        return "distractor: a listed diagnosis the window does not hold"
    return None
