"""``closed_hr_extremum`` / ``open_hr_extremum``: when is the heart rate highest (lowest) over the whole record?

Heart rate is the Holter 8-beat average (:mod:`ecgtrace.tools.hr`). Closed
distractors are the true time offset by +-500 ms up to +-30 min; an offset
whose rate ties the extremum is rejected. The displayed windows hold the
truth and every decoy time at random places, in time order, so the display
does not point at the answer.
"""

from __future__ import annotations

import random
from typing import Any

from ecgtrace.agents.holter import recount as rc
from ecgtrace.agents.holter.distractors import hr_distractors
from ecgtrace.agents.holter.evidence import display_around, evidence_span
from ecgtrace.agents.holter.facts import Facts
from ecgtrace.agents.holter.tasks._base import QATask, Target, WriteContext, Written, register
from ecgtrace.rubrics.template_schema import QATemplate

HR_TIE_BPM = 1.0
HR_OFFSETS_MS = (500, 2000, 10000, 60000, 300000, 1800000)


class HrExtremumTask(QATask):
    kinds = ()

    def plan(self, facts: Facts, template: QATemplate, rng: random.Random) -> list[Target]:
        return [{"scope": "record", "hr_kind": k} for k in ("max", "min") if facts.hr.get(k)]

    def write(self, ctx: WriteContext) -> Written:
        facts, hr_kind = ctx.facts, ctx.target["hr_kind"]
        ext = facts.hr[hr_kind]
        t_ms = int(ext["t_ms"])
        ev = ext.get("evidence") or {}
        evidence = [evidence_span(ctx.lead, ev.get("t0_ms", t_ms), ev.get("t1_ms", t_ms), ev.get("beats", []))]
        times = hr_distractors(t_ms, duration_ms=facts.duration_ms, hr_near=facts.hr_near, extremum_bpm=float(ext["hr_bpm"]), kind=hr_kind,
                               rng=ctx.rng, offsets_ms=ctx.param("offsets_ms", HR_OFFSETS_MS), tol_ms=ctx.template.answer.tolerance_ms,
                               n=ctx.n_distractors)
        display = sorted(display_around(facts, t, ctx.rng) for t in [t_ms, *times])
        out = {"window": None, "answer": f"{t_ms} ms", "evidence": evidence, "_truth": t_ms, "_display_ms": display,
               "_values": {"hr_kind": "maximum" if hr_kind == "max" else "minimum"}}
        if ctx.template.format == "closed":
            out["_distractors"] = [f"{t} ms" for t in times]
            out["_distractor_values"] = times
        return out

    def verify(self, facts: Facts, item: dict[str, Any]) -> str | None:
        hr_kind = item["_target"]["hr_kind"]
        t, value, other = rc.hr_recheck(facts, hr_kind)
        if abs(t - item["_truth"]) > item["provenance"]["params"]["tolerance_ms"]:
            return f"recount disagrees: HR extremum recomputed at {t} ms"
        if abs(value - other) <= HR_TIE_BPM:
            return f"ambiguous: HR {hr_kind} nearly tied elsewhere ({value:.1f} vs {other:.1f} bpm)"
        return None

    def verify_distractors(self, facts: Facts, item: dict[str, Any]) -> str | None:
        hr_kind = item["_target"]["hr_kind"]
        tol = item["provenance"]["params"]["tolerance_ms"]
        extremum = float(facts.hr[hr_kind]["hr_bpm"])
        for t in item["_distractor_values"]:
            rates = facts.hr_near(t, tol)
            near = None if rates is None else (rates[1] if hr_kind == "max" else rates[0])
            if abs(t - item["_truth"]) <= tol or near is None or abs(near - extremum) <= HR_TIE_BPM:
                return "distractor: an offset time is as extreme as the answer"
        return None


@register
class ClosedHrExtremum(HrExtremumTask):
    name = "closed_hr_extremum"
    family = "closed"


@register
class OpenHrExtremum(HrExtremumTask):
    name = "open_hr_extremum"
    family = "numeric"
