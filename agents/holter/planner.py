"""Choose what each template asks about in one record: event kinds, windows, HR extrema.

Each template goes to its task type's ``plan`` (:mod:`ecgtrace.agents.holter.tasks`),
built from the window-placing pieces of :mod:`ecgtrace.agents.holter.windows`.
The planner covers every event kind the record has, balances presence
questions (as many windows without a kind as with it), keeps windows clear of
noise and of events of the asked kind that straddle the window edge, and is
deterministic: every choice comes from ``random.Random`` seeded with
``(seed, record, template)``.
"""

from __future__ import annotations

from typing import Any

from ecgtrace.agents.holter.facts import Facts
from ecgtrace.agents.holter.tasks import get_task
from ecgtrace.agents.holter.windows import rng_for
from ecgtrace.rubrics.template_schema import QATemplate


def plan(facts: Facts, templates: list[QATemplate], seed: int) -> list[dict[str, Any]]:
    """One plan entry per template that has targets in this record: ``{template_id, targets: [...]}`` (plain JSON)."""
    entries = []
    for template in templates:
        rng = rng_for(seed, facts.record["db"], facts.record["id"], template.id)
        targets = get_task(template.task).plan(facts, template, rng)
        if targets:
            entries.append({"template_id": template.id, "targets": targets})
    return entries
