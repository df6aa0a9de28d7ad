"""``report_statistics`` / ``report_summary``: the whole-record Holter report, as JSON fields or as prose.

Answers come from :func:`ecgtrace.agents.holter.report.statistics`; the
displayed windows show the first event of each kind (at most four).
"""

from __future__ import annotations

import json
import random
from typing import Any

from ecgtrace.agents.holter.evidence import MAX_DISPLAY_WINDOWS, centered_display, evidence_span
from ecgtrace.agents.holter.facts import Facts
from ecgtrace.agents.holter.report import LABELS, statistics, summary_text
from ecgtrace.agents.holter.tasks._base import QATask, Target, WriteContext, Written, register
from ecgtrace.rubrics.template_schema import QATemplate


class ReportTask(QATask):
    family = "report"
    kinds = ()

    def plan(self, facts: Facts, template: QATemplate, rng: random.Random) -> list[Target]:
        return [{"scope": "record"}]

    def answer(self, stats: dict[str, Any], facts: Facts) -> str:
        raise NotImplementedError

    def write(self, ctx: WriteContext) -> Written:
        facts = ctx.facts
        stats = statistics(facts)
        firsts = [facts.events_of(k)[0] for k in sorted(LABELS) if facts.events_of(k)]
        return {"window": None, "answer": self.answer(stats, facts), "evidence": [evidence_span(ctx.lead, 0, facts.duration_ms, [])], "_truth": stats,
                "_display_ms": [centered_display(facts, e["onset_ms"], e["offset_ms"]) for e in firsts[:MAX_DISPLAY_WINDOWS]]}

    def verify(self, facts: Facts, item: dict[str, Any]) -> str | None:
        stats = statistics(facts)
        if stats["total_beats"] != len(facts.class_text) or stats["pvc_total"] != facts.class_text.count("V"):
            return "recount disagrees: report totals"
        return None


@register
class ReportStatistics(ReportTask):
    name = "report_statistics"

    def answer(self, stats: dict[str, Any], facts: Facts) -> str:
        return json.dumps(stats, sort_keys=True)


@register
class ReportSummary(ReportTask):
    name = "report_summary"

    def answer(self, stats: dict[str, Any], facts: Facts) -> str:
        return summary_text(stats, facts)
