"""``report_statistics`` / ``report_summary``: the whole-record Holter report, as JSON fields or as prose.

Answers come from :func:`ecgtrace.agents.holter.report.report_statistics`. The
statistics report is JSON with the fields of
:data:`~ecgtrace.agents.holter.report.STATISTICS_FIELDS` when its template's
``answer.format`` is ``report_json``, and the prose statistical overview
(:func:`~ecgtrace.agents.holter.report_prose.overview_text`, with the PAC/PVC
breakdowns) when it is ``text``; the summary is prose
(:func:`~ecgtrace.agents.holter.report_prose.summary_text`). Prose phrasings
come from the item's seeded generator. The displayed windows show the first
event of each kind (at most four).
"""

from __future__ import annotations

import json
import random
from typing import Any

from ecgtrace.agents.holter.evidence import MAX_DISPLAY_WINDOWS, centered_display, evidence_span
from ecgtrace.agents.holter.facts import Facts
from ecgtrace.agents.holter.report import LABELS, STATISTICS_FIELDS, report_statistics, statistics
from ecgtrace.agents.holter.report_prose import overview_text, summary_text
from ecgtrace.agents.holter.tasks._base import QATask, Target, WriteContext, Written, register
from ecgtrace.rubrics.template_schema import QATemplate


class ReportTask(QATask):
    family = "report"
    kinds = ()

    def asserted_kinds(self, item: dict[str, Any]) -> frozenset[str] | None:
        """Every kind: a report counts them all."""
        return None

    def plan(self, facts: Facts, template: QATemplate, rng: random.Random) -> list[Target]:
        return [{"scope": "record"}]

    def answer(self, stats: dict[str, Any], ctx: WriteContext) -> str:
        raise NotImplementedError

    def write(self, ctx: WriteContext) -> Written:
        facts = ctx.facts
        stats = report_statistics(facts)
        firsts = [facts.events_of(k)[0] for k in sorted(LABELS) if facts.events_of(k)]
        return {"window": None, "answer": self.answer(stats, ctx), "evidence": [evidence_span(ctx.lead, 0, facts.duration_ms, [])], "_truth": stats,
                "_display_ms": [centered_display(facts, e["onset_ms"], e["offset_ms"]) for e in firsts[:MAX_DISPLAY_WINDOWS]]}

    def verify(self, facts: Facts, item: dict[str, Any]) -> str | None:
        stats = statistics(facts)
        if stats["total_beats"] != len(facts.class_text) or stats["pvc_total"] != facts.class_text.count("V"):
            return "recount disagrees: report totals"
        return None


@register
class ReportStatistics(ReportTask):
    name = "report_statistics"

    def answer(self, stats: dict[str, Any], ctx: WriteContext) -> str:
        if ctx.template.answer.format == "report_json":
            return json.dumps({k: stats[k] for k in STATISTICS_FIELDS}, sort_keys=True)
        return overview_text(stats, ctx.rng)


@register
class ReportSummary(ReportTask):
    name = "report_summary"

    def answer(self, stats: dict[str, Any], ctx: WriteContext) -> str:
        return summary_text(stats, ctx.rng)
