"""``closed_diagnosis`` / ``open_diagnosis`` / ``open_evidence``: what does a window show, and why?

One window per event (the window's single finding) plus, for the diagnosis
questions, one window without any event (answer: normal sinus rhythm).
``open_diagnosis`` also asks about windows with several findings (the answer
names them all), and ``closed_diagnosis`` templates with the distractor rule
``present_labels`` ask the negative framing about such windows ("which of
the listed diagnoses is not supported"); see
:mod:`ecgtrace.agents.holter.tasks._finding_sets`.
Closed distractors are findings absent from the window, never one a beat class
in it belongs to; their number is drawn per item between the template's
``params.n_min`` and ``n`` (1-3: 2-4 options, as Holtercare asks).
``open_evidence`` answers with the finding and its rhythm, timing and
morphology clues (:func:`ecgtrace.agents.holter.evidence.evidence_text`).
"""

from __future__ import annotations

import random
from typing import Any

from ecgtrace.agents.holter import recount as rc
from ecgtrace.agents.holter.distractors import label_distractors
from ecgtrace.agents.holter.evidence import evidence_text, window_evidence
from ecgtrace.agents.holter.facts import Facts
from ecgtrace.agents.holter.report import DIAGNOSIS_LABELS
from ecgtrace.agents.holter.tasks import _finding_sets as sets
from ecgtrace.agents.holter.tasks._base import QATask, Target, WindowView, WriteContext, Written, register
from ecgtrace.agents.holter.tasks._finding_sets import RELATED_KINDS
from ecgtrace.agents.holter.windows import finding_set_targets, normal_target, present_kinds, window_targets
from ecgtrace.contracts.vocabulary import EPISODE_KINDS, NORMAL
from ecgtrace.rubrics.template_schema import QATemplate

__all__ = ["RELATED_KINDS", "absent_labels"]


def absent_labels(facts: Facts, w: WindowView) -> list[str]:
    """Diagnosis labels of findings not in the window, nor related to a beat class in it (normal is never a decoy of an episode)."""
    present = {e["kind"] for e in facts.events_overlapping(w.t0, w.t1)}
    i0, i1 = facts.beat_range(w.t0, w.t1)
    related = {k for cls, kinds in RELATED_KINDS.items() if cls in facts.class_text[i0:i1] for k in kinds}
    return [DIAGNOSIS_LABELS[k] for k in DIAGNOSIS_LABELS
            if k not in present | related and k != w.kind and not (k == NORMAL and w.kind in EPISODE_KINDS)]


class FindingTask(QATask):
    """A window's single finding, by its diagnosis label."""

    #: Plans one window without any event (the normal finding) after the event windows.
    plans_normal: bool = True
    #: Plans windows with several findings too (:mod:`ecgtrace.agents.holter.tasks._finding_sets`), after the others.
    plans_sets: bool = False

    def plan(self, facts: Facts, template: QATemplate, rng: random.Random) -> list[Target]:
        targets = window_targets(facts, template, rng, present_kinds(facts, template, self.kinds))
        targets += normal_target(facts, template, rng) if self.plans_normal else []
        return targets + (finding_set_targets(facts, template, rng, allowed=self.kinds) if self.plans_sets else [])

    def write(self, ctx: WriteContext) -> Written | None:
        if sets.is_set_target(ctx.target):
            return sets.write_set_item(ctx, negative=False)
        w = ctx.window()
        if w.kind != NORMAL and not w.found:
            return None
        answer = DIAGNOSIS_LABELS[w.kind]
        out = {**w.base(), "answer": answer, "evidence": window_evidence(ctx.facts, ctx.lead, w.t0, w.t1, w.found)}
        out["_values"]["diagnosis"] = answer
        return out

    def verify(self, facts: Facts, item: dict[str, Any]) -> str | None:
        target = item["_target"]
        if sets.is_set_target(target):
            return sets.verify_set(facts, item)
        t0, t1, kind = int(target["t0_ms"]), int(target["t1_ms"]), target["kind"]
        i0, i1 = facts.beat_range(t0, t1)
        others = {e["kind"] for e in facts.events_overlapping(t0, t1)} - {kind}
        if others:
            return f"ambiguous: several findings in the window ({', '.join(sorted(others | {kind}))})"
        if kind == NORMAL and (set(facts.class_text[i0:i1]) - {"N"}):
            return "recount disagrees: ectopic beats in a normal window"
        spans = rc.recount(facts, kind, i0, i1) if kind != NORMAL else None
        if spans is not None and not spans:
            return f"recount disagrees: no {kind} in the beat table"
        return None


@register
class ClosedDiagnosis(FindingTask):
    """The window's finding among absent ones, or (distractor rule ``present_labels``) the one listed that it does not hold."""

    name = "closed_diagnosis"
    family = "closed"

    def plan(self, facts: Facts, template: QATemplate, rng: random.Random) -> list[Target]:
        if template.distractors.rule == "present_labels":
            return finding_set_targets(facts, template, rng, allowed=self.kinds)
        return super().plan(facts, template, rng)

    def write(self, ctx: WriteContext) -> Written | None:
        if ctx.template.distractors.rule == "present_labels":
            return sets.write_set_item(ctx, negative=True) if sets.is_set_target(ctx.target) else None
        out = super().write(ctx)
        if out is not None:
            n = ctx.rng.randint(min(int(ctx.param("n_min", ctx.n_distractors)), ctx.n_distractors), ctx.n_distractors)  # 2-4 options, as Holtercare
            out["_distractors"] = label_distractors(out["answer"], absent_labels(ctx.facts, ctx.window()), ctx.rng, n)
        return out

    def verify_distractors(self, facts: Facts, item: dict[str, Any]) -> str | None:
        if sets.is_set_target(item["_target"]):
            return sets.verify_negative_options(facts, item)
        target = item["_target"]
        present = {DIAGNOSIS_LABELS[e["kind"]] for e in facts.events_overlapping(target["t0_ms"], target["t1_ms"]) if e["kind"] in DIAGNOSIS_LABELS}
        if present.intersection(item["_distractors"]):
            return "distractor: a label present in the window"
        return None


@register
class OpenDiagnosis(FindingTask):
    """The window's finding, or every finding of a window that holds several (a set of labels)."""

    name = "open_diagnosis"
    family = "label"
    plans_sets = True

    def asserted_kinds(self, item: dict[str, Any]) -> frozenset[str] | None:
        """Every kind: an open answer that names the window's findings says that no other is there."""
        return None


@register
class OpenEvidence(FindingTask):
    name = "open_evidence"
    family = "text"
    plans_normal = False

    def write(self, ctx: WriteContext) -> Written | None:
        out = super().write(ctx)
        if out is not None:
            w = ctx.window()
            out["answer"] = evidence_text(ctx.facts, out["answer"], (w.found or [None])[0], w.t0, w.t1, measure=ctx.measure)
        return out
