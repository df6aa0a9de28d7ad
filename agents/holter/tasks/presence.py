"""``closed_presence``: is there any event of a kind in a window? As many windows without the kind as with it."""

from __future__ import annotations

import random
from typing import Any

from ecgtrace.agents.holter import recount as rc
from ecgtrace.agents.holter.evidence import window_evidence
from ecgtrace.agents.holter.facts import Facts
from ecgtrace.agents.holter.tasks._base import QATask, Target, WriteContext, Written, register
from ecgtrace.agents.holter.windows import present_kinds, window_targets
from ecgtrace.contracts.vocabulary import NORMAL
from ecgtrace.rubrics.template_schema import QATemplate


@register
class ClosedPresence(QATask):
    name = "closed_presence"
    family = "closed"

    def plan(self, facts: Facts, template: QATemplate, rng: random.Random) -> list[Target]:
        kinds = present_kinds(facts, template, self.kinds)
        return window_targets(facts, template, rng, kinds, negatives=lambda n_planned: n_planned)

    def write(self, ctx: WriteContext) -> Written | None:
        w = ctx.window()
        present = bool(w.found)
        if present != (ctx.target["polarity"] == "positive"):
            return None
        evidence = window_evidence(ctx.facts, ctx.lead, w.t0, w.t1, w.found)
        return {**w.base(), "answer": "Yes" if present else "No", "_distractors": ["No" if present else "Yes"], "evidence": evidence}

    def verify(self, facts: Facts, item: dict[str, Any]) -> str | None:
        target = item["_target"]
        t0, t1, kind = int(target["t0_ms"]), int(target["t1_ms"]), target["kind"]
        i0, i1 = facts.beat_range(t0, t1)
        spans = rc.recount(facts, kind, i0, i1) if kind != NORMAL else None
        present = rc.presence(facts, kind, t0, t1, i0, i1, spans)
        if present is not None and present != (item["answer"] == "Yes"):
            return f"recount disagrees: beat table says {kind} {'present' if present else 'absent'}"
        return None
