"""``closed_count`` / ``open_count``: how many events of a kind in a window, or in the whole record.

Window plans add the window holding the closest pair of events (so answers
are not always 1) and one window without the kind (answer 0). Closed
distractors are the answer -1, +1, +2 (kept >= 0).
"""

from __future__ import annotations

import random
from typing import Any

from ecgtrace.agents.holter import recount as rc
from ecgtrace.agents.holter.distractors import count_distractors
from ecgtrace.agents.holter.evidence import MAX_DISPLAY_WINDOWS, centered_display, event_evidence, window_evidence
from ecgtrace.agents.holter.facts import Facts
from ecgtrace.agents.holter.report import LABELS
from ecgtrace.agents.holter.tasks._base import QATask, Target, WriteContext, Written, register
from ecgtrace.agents.holter.windows import present_kinds, record_targets, window_targets
from ecgtrace.contracts.vocabulary import COUNTABLE_KINDS, NORMAL
from ecgtrace.rubrics.template_schema import QATemplate

COUNT_OFFSETS = (-1, 1, 2)


def _disagreement(spans: list[tuple[int, int]] | None, truth: int) -> str | None:
    if spans is not None and len(spans) != truth:
        return f"recount disagrees: beat table gives {len(spans)}, events give {truth}"
    return None


class CountTask(QATask):
    """Counts in a window (``scope: window``) or over the record (``scope: record``)."""

    kinds = COUNTABLE_KINDS

    def plan(self, facts: Facts, template: QATemplate, rng: random.Random) -> list[Target]:
        kinds = present_kinds(facts, template, self.kinds)
        if template.scope == "record":
            return record_targets(kinds)
        return window_targets(facts, template, rng, kinds, pairs=True, negatives=lambda n_planned: 1)

    def write(self, ctx: WriteContext) -> Written | None:
        out = self._window_count(ctx) if ctx.target["scope"] == "window" else self._record_count(ctx)
        if out is not None and ctx.template.format == "closed":
            out["_distractors"] = [str(v) for v in count_distractors(out["_truth"], ctx.param("offsets", COUNT_OFFSETS), ctx.n_distractors)]
        return out

    def _window_count(self, ctx: WriteContext) -> Written | None:
        w = ctx.window()
        if not w.inside and ctx.target.get("polarity") != "negative":
            return None
        evidence = window_evidence(ctx.facts, ctx.lead, w.t0, w.t1, w.inside)
        return {**w.base(), "answer": str(len(w.inside)), "evidence": evidence, "_truth": len(w.inside)}

    def _record_count(self, ctx: WriteContext) -> Written:
        facts, kind = ctx.facts, ctx.target["kind"]
        events = facts.events_of(kind)
        singular, plural = LABELS[kind]
        return {"window": None, "answer": str(len(events)), "evidence": [event_evidence(ctx.lead, e) for e in events], "_truth": len(events),
                "_display_ms": [centered_display(facts, e["onset_ms"], e["offset_ms"]) for e in events[:MAX_DISPLAY_WINDOWS]],
                "_values": {"event": singular, "event_plural": plural}}

    def verify(self, facts: Facts, item: dict[str, Any]) -> str | None:
        target = item["_target"]
        if target["scope"] != "window":
            return _disagreement(rc.recount(facts, target["kind"]), item["_truth"])
        kind = target["kind"]
        spans = rc.recount(facts, kind, *facts.beat_range(int(target["t0_ms"]), int(target["t1_ms"]))) if kind != NORMAL else None
        return _disagreement(spans, item["_truth"])


@register
class ClosedCount(CountTask):
    name = "closed_count"
    family = "closed"


@register
class OpenCount(CountTask):
    name = "open_count"
    family = "numeric"
