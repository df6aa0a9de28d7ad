"""Deterministic scoring of one answer to one QA item: :func:`score_answer`, the entry point of QA scoring.

:func:`score_answer` takes a QA item (a :class:`~ecgtrace.contracts.QAItem` or
its ``qa.jsonl`` dict) and the model's raw reply and returns a plain-JSON
score record; it never raises on model text. It dispatches to the item's task
type (:mod:`ecgtrace.agents.holter.tasks`), which scores as its family
(:mod:`ecgtrace.agents.exam.qa_families`, where every metric is defined) or
with a scorer of its own. Items of tasks no module registers (imported from
elsewhere) score as the family their shape implies.
"""

from __future__ import annotations

from typing import Any

from ecgtrace.agents.exam.qa_families import (
    DEFAULT_TOLERANCE_MS,
    MAE_REFERENCE,
    content_family,
    match_times,
    numeric_error,
    rouge_l,
    score_family,
    score_mae,
    tolerance_ms,
)
from ecgtrace.agents.exam.reply_values import parse_number, parse_times_ms
from ecgtrace.agents.holter.tasks import find_task

#: Part of a run's identity. 2: label sets (precision, recall, F1 score), times that share a unit or come in parts
#: ("1 h 5 min"), report breakdowns and Holtercare phrasings, yes/no read without options.
SCORING_VERSION = "2"

__all__ = ["DEFAULT_TOLERANCE_MS", "MAE_REFERENCE", "SCORING_VERSION", "family", "match_times", "numeric_error", "parse_number",
           "parse_times_ms", "rouge_l", "score_answer", "score_mae", "tolerance_ms"]


def _as_dict(item: Any) -> dict[str, Any]:
    return item.to_json() if hasattr(item, "to_json") else item


def family(item: Any) -> str:
    """closed | numeric | timestamps | label | text | report: how the item is scored."""
    item = _as_dict(item)
    task = find_task(str(item.get("task", "")))
    return task.family_of(item) if task is not None else content_family(item)


def score_answer(item: Any, raw: Any, *, error: str | None = None) -> dict[str, Any]:
    """Score one reply to ``item``; returns ``{family, parsed, parse_ok, parse_reason, correct, score, details}``.

    ``correct`` is a bool for closed, numeric (within tolerance: 0 events for
    counts, ``tolerance_ms`` for times), timestamps (F1 == 1) and labels;
    None for free text and reports. ``score`` is 0-100. ``error`` (a server
    failure after retries) scores the turn wrong.
    """
    item = _as_dict(item)
    task = find_task(str(item.get("task", "")))
    if task is None:
        return score_family(content_family(item), item, raw, error=error)
    return task.score(item, raw, error=error)
