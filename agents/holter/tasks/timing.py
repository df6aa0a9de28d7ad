"""``closed_timing`` / ``open_timing``: the onset of every event of a kind in a window, in ms from the recording start.

Closed distractors shift every onset (-600 ms, +800 ms ...) or change the
count; a set whose every time still falls on a real event is rejected.
"""

from __future__ import annotations

import random
from typing import Any

from ecgtrace.agents.holter import recount as rc
from ecgtrace.agents.holter.distractors import format_ms_list, timing_distractors, timing_matches
from ecgtrace.agents.holter.evidence import window_evidence
from ecgtrace.agents.holter.facts import Facts
from ecgtrace.agents.holter.tasks._base import QATask, Target, WriteContext, Written, register
from ecgtrace.agents.holter.windows import present_kinds, window_targets
from ecgtrace.contracts.vocabulary import COUNTABLE_KINDS, NORMAL
from ecgtrace.rubrics.template_schema import QATemplate

TIMING_SHIFTS_MS = (-600, 800)


class TimingTask(QATask):
    kinds = COUNTABLE_KINDS

    def plan(self, facts: Facts, template: QATemplate, rng: random.Random) -> list[Target]:
        return window_targets(facts, template, rng, present_kinds(facts, template, self.kinds), pairs=True)

    def write(self, ctx: WriteContext) -> Written | None:
        w = ctx.window()
        if not w.inside:
            return None
        onsets = sorted(e["onset_ms"] for e in w.inside)
        out = {**w.base(), "answer": format_ms_list(onsets), "evidence": window_evidence(ctx.facts, ctx.lead, w.t0, w.t1, w.inside), "_truth": onsets}
        if ctx.template.format == "closed":
            i0, i1 = ctx.facts.beat_range(w.t0, w.t1)
            sets = timing_distractors(onsets, event_ms=[e["onset_ms"] for e in ctx.facts.events_of(w.kind)],
                                      filler_ms=[int(t) for t in ctx.facts.beat_ms[i0:i1]], rng=ctx.rng,
                                      shifts_ms=ctx.param("shifts_ms", TIMING_SHIFTS_MS), tol_ms=ctx.template.answer.tolerance_ms,
                                      n=ctx.n_distractors)
            out["_distractors"] = [format_ms_list(s) for s in sets]
            out["_distractor_values"] = sets
        return out

    def verify(self, facts: Facts, item: dict[str, Any]) -> str | None:
        target = item["_target"]
        kind = target["kind"]
        spans = rc.recount(facts, kind, *facts.beat_range(int(target["t0_ms"]), int(target["t1_ms"]))) if kind != NORMAL else None
        if spans is not None and not timing_matches([int(facts.beat_ms[a]) for a, _ in spans], item["_truth"], 0):
            return "recount disagrees: onsets from the beat table differ"
        return None

    def verify_distractors(self, facts: Facts, item: dict[str, Any]) -> str | None:
        tol = item["provenance"]["params"]["tolerance_ms"]
        all_onsets = [e["onset_ms"] for e in facts.events_of(item["_target"]["kind"])]
        for values in item["_distractor_values"]:
            if timing_matches(values, item["_truth"], tol) or all(any(abs(v - e) <= tol for e in all_onsets) for v in values):
                return "distractor: a timestamp set matches real events"
        return None


@register
class ClosedTiming(TimingTask):
    name = "closed_timing"
    family = "closed"


@register
class OpenTiming(TimingTask):
    name = "open_timing"
    family = "timestamps"
