"""One turn of an examination, for audits and QA alike: what is asked (the turn spec) and what is kept (a TurnRow).

A *turn spec* is plain JSON (it lives in LangGraph state and is what an
examinee's ``answer`` gets besides the messages)::

    {"index": int, "stage": str, "loop": int | None, "kind": str | None,
     "question": str, "options": [str], "answer": str | [str], "multi": bool,
     "sample_id": str}

``stage`` is an audit stage (:data:`ecgtrace.contracts.vocabulary.AUDIT_STAGES`)
or a QA task; ``kind`` the grounding kind or the QA scoring family. A finished
turn is kept as :class:`ecgtrace.contracts.TurnRow` JSON, built here only.
"""

from __future__ import annotations

from typing import Any

from ecgtrace.agents.exam.examinees.base import Reply
from ecgtrace.agents.exam.parsing import is_correct, parse_answer
from ecgtrace.contracts.runs import TurnRow


def turn_spec(*, index: int, stage: str, question: str, options: list[str] | None, answer: str | list[str], sample_id: str,
              loop: int | None = None, kind: str | None = None, multi: bool = False) -> dict[str, Any]:
    """A turn spec (see the module docstring)."""
    return {"index": int(index), "stage": str(stage), "loop": loop, "kind": kind, "question": question,
            "options": list(options or []), "answer": list(answer) if isinstance(answer, list) else answer,
            "multi": bool(multi), "sample_id": sample_id}


def as_reply(reply: Reply | dict[str, Any]) -> Reply:
    """A :class:`Reply`, also from its JSON (as graph state keeps it)."""
    return reply if isinstance(reply, Reply) else Reply(**reply)


def answered_row(turn: dict[str, Any], prompt: str | None, reply: Reply | dict[str, Any], *, parsed: Any, parse_ok: bool,
                 parse_reason: str | None, correct: bool | None, score: float | None = None,
                 details: dict[str, Any] | None = None) -> dict[str, Any]:
    """An asked turn as samples.jsonl keeps it (:class:`TurnRow` JSON)."""
    got = as_reply(reply)
    return TurnRow(index=turn["index"], stage=turn["stage"], loop=turn["loop"], kind=turn["kind"], asked=True, prompt=prompt,
                   raw=got.raw, reasoning=got.reasoning, parsed=parsed, parse_ok=parse_ok, parse_reason=parse_reason or None,
                   answer=turn["answer"], correct=correct, score=score, details=details, latency_ms=got.latency_ms,
                   tokens=got.usage, error=got.error, attempts=got.attempts, meta=got.meta).to_json()


def closed_row(turn: dict[str, Any], prompt: str, reply: Reply | dict[str, Any], *, letters: bool = True) -> dict[str, Any]:
    """Score the reply to a closed turn (exact option, or exact set for multi-select) into its row.

    A reply with an ``error`` (server failure after retries) is scored wrong with the error kept.
    ``letters=False``: the options were shown without letters, so only option texts count.
    """
    got = as_reply(reply)
    if got.error:
        value, ok, reason = None, False, "no answer: not sent" if got.error.startswith("not sent") else "no answer: server error"
    else:
        result = parse_answer(got.raw, turn["options"], turn["multi"], letters=letters)
        value, ok, reason = result.value, result.ok, result.reason
    correct = bool(ok and is_correct(value, turn["answer"], turn["multi"]))
    return answered_row(turn, prompt, got, parsed=value, parse_ok=ok, parse_reason=reason, correct=correct)


def unasked_row(turn: dict[str, Any]) -> dict[str, Any]:
    """A turn the chain never reached (``stop`` mode after an error)."""
    return TurnRow(index=turn["index"], stage=turn["stage"], loop=turn["loop"], kind=turn["kind"], asked=False,
                   answer=turn["answer"]).to_json()
