"""Run a model over a QA dataset (``qa.jsonl``): resumable, concurrent, scored.

Why a plain async runner and not a LangGraph graph: a QA item is one request
and one deterministic score (plus, optionally, one judge request). There is
no multi-turn state to checkpoint, so a graph and its SQLite checkpointer
would add a second source of truth next to ``samples.jsonl`` without making
anything resumable that is not already: a sample is appended (fsynced) only
when it is finished, and a rerun skips the ids already in ``samples.jsonl``.
Nothing is lost or counted twice; a request in flight when the run is killed
is simply asked again.

The examination is the audit's: the same messages (:mod:`ecgtrace.agents.exam.messages`,
QA layout), turn specs and rows (:mod:`ecgtrace.agents.exam.turns`) and run
loop (:mod:`ecgtrace.agents.exam.run_loop`). The run folder is a
:mod:`ecgtrace.runlog` folder of kind ``qa``; a ``samples.jsonl`` line is a
:class:`ecgtrace.contracts.QASample`::

    {"id", "kind": "qa", "task", "template_id", "answer_type", "family", "finding", "split",
     "score" (0-100), "correct" (bool | null),
     "turns": [TurnRow: {"index": 0, "stage": <task>, "kind": <family>, "asked": true, "prompt", "raw", "reasoning",
                         "parsed", "parse_ok", "parse_reason", "answer", "correct", "score", "details",
                         "latency_ms", "tokens", "error", "attempts", "meta"}],
     "judge": null | {"ok", "criteria", "score", "band", "hallucinations", "rationale", "raw", ...},
     "item": {"question", "options", "record", "window", "evidence", "modalities", "tolerance_ms"}}
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ecgtrace.agents.exam import messages
from ecgtrace.agents.exam.examinees import Examinee, Reply
from ecgtrace.agents.exam.messages import check_modality, prompt_record
from ecgtrace.agents.exam.qa_scoring import SCORING_VERSION, family, score_answer, tolerance_ms
from ecgtrace.agents.exam.run_loop import examine, worker_count, write_results
from ecgtrace.agents.exam.turns import answered_row, turn_spec
from ecgtrace.contracts.datasets import ItemSet, load_items
from ecgtrace.contracts.qa import QAItem
from ecgtrace.contracts.runs import QASample
from ecgtrace.errors import EcgTraceError, QAFormatError
from ecgtrace.redact import redact

#: Part of a run's identity: bump when prompts change.
QA_PROMPT_VERSION = "1"
SYSTEM_PROMPT = messages.QA.system_prompt

__all__ = ["QAFormatError", "QA_PROMPT_VERSION", "SYSTEM_PROMPT", "ask", "build_messages", "check_modality", "identity_for",
           "load_qa", "make_turn", "prompt_record", "question_text", "run_one", "run_qa"]


def load_qa(path: str | Path) -> ItemSet:
    """Read ``qa.jsonl`` (or the folder holding it) through :func:`ecgtrace.contracts.load_items`.

    Every line is validated (format 1 upgraded) as a :class:`QAItem`; the items
    are returned as that contract's plain JSON, the form scripts read. Every
    function here takes either form. Errors name the file and line.
    """
    qa = load_items(path, "qa")
    return ItemSet(kind=qa.kind, path=qa.path, base_dir=qa.base_dir, items=[item.to_json() for item in qa.items], sha256=qa.sha256)


def as_qa_item(item: QAItem | dict[str, Any]) -> QAItem:
    return item if isinstance(item, QAItem) else QAItem.model_validate(item)


# ------------------------------------------------------------------ requests

def make_turn(item: QAItem | dict[str, Any]) -> dict[str, Any]:
    """The examinee's turn spec for one QA item (stage: the task; kind: the scoring family)."""
    it = as_qa_item(item)
    return turn_spec(index=0, stage=it.task, kind=family(it.to_json()), question=it.question, options=it.options, answer=it.answer,
                     sample_id=it.id)


def question_text(item: QAItem | dict[str, Any]) -> str:
    """The question as asked: lettered options for closed items, the answer format for open ones."""
    it = as_qa_item(item)
    return messages.question_prompt(it.question, it.options, answer_type=it.answer_type)


def build_messages(item: QAItem | dict[str, Any], base_dir: str | Path, modality: str) -> list[dict[str, Any]]:
    """OpenAI chat messages for one item: its own messages, else built from its asset files (QA layout)."""
    it = as_qa_item(item)
    return messages.build_messages(it, base_dir, modality, layout=messages.QA, prompt=question_text(it))


# ------------------------------------------------------------------ one sample

async def ask(examinee: Examinee, request: list[dict[str, Any]], turn: dict[str, Any],
              ask_human: Callable[[dict[str, Any]], str] | None = None) -> Reply:
    """One answer; a built-in that cannot answer (random on an open question) is an error, not a crash."""
    if examinee.interactive:
        if ask_human is None:
            raise EcgTraceError("a human examinee needs a terminal")
        typed = await asyncio.to_thread(ask_human, {"sample_id": turn["sample_id"], "stage": turn["stage"], "prompt": prompt_record(request)})
        return Reply(raw=str(typed))
    try:
        return (await examinee.answer(request, turn)).capped(examinee.max_reply_chars)
    except EcgTraceError:
        raise
    except Exception as exc:  # noqa: BLE001
        return Reply(raw=None, error=f"{type(exc).__name__}: {redact(str(exc))[:200] or 'examinee cannot answer this question'}")


async def _verdict(judge: Examinee | None, rubrics: dict[str, Any] | None, data: dict[str, Any], reply: Reply,
                   scored: dict[str, Any]) -> dict[str, Any] | None:
    """The judge's verdict on a free-text answer, when a judge and a rubric for the task are given."""
    rubric = (rubrics or {}).get(str(data["task"]))
    if judge is None or rubric is None or reply.error:
        return None
    from ecgtrace.agents.exam.judge import judge_answer

    deterministic = scored["details"] if scored["family"] == "report" else None
    return await judge_answer(judge, rubric, data, reply.raw or "", deterministic)


async def run_one(item: QAItem | dict[str, Any], base_dir: str | Path, examinee: Examinee, modality: str, *,
                  judge: Examinee | None = None, rubrics: dict[str, Any] | None = None,
                  ask_human: Callable[[dict[str, Any]], str] | None = None) -> dict[str, Any]:
    """Ask, score and (optionally) judge one item; returns its samples.jsonl row (:class:`QASample` JSON)."""
    it = as_qa_item(item)
    data = it.to_json()
    turn = make_turn(it)
    request = build_messages(it, base_dir, modality)
    reply = await ask(examinee, request, turn, ask_human)
    scored = score_answer(data, reply.raw, error=reply.error)
    verdict = await _verdict(judge, rubrics, data, reply, scored)
    row = answered_row(turn, prompt_record(request), reply, parsed=scored["parsed"], parse_ok=scored["parse_ok"],
                       parse_reason=scored["parse_reason"], correct=scored["correct"], score=scored["score"], details=scored["details"])
    shown = {k: data.get(k) for k in ("question", "options", "record", "window", "evidence", "modalities")}
    return QASample(id=it.id, task=it.task, template_id=it.template_id, answer_type=it.answer_type, family=scored["family"],
                    finding=it.finding, split=it.split, score=scored["score"], correct=scored["correct"], turns=[row],
                    judge=verdict, item={**shown, "tolerance_ms": tolerance_ms(data)}).to_json()


# ------------------------------------------------------------------ a run

async def run_qa(qa: ItemSet, run: Any, examinee: Examinee, *, modality: str = "text", concurrency: int = 8, limit: int | None = None,
                 judge: Examinee | None = None, rubrics: dict[str, Any] | None = None,
                 on_sample: Callable[[dict[str, Any]], None] | None = None,
                 ask_human: Callable[[dict[str, Any]], str] | None = None, skip_ids: set[str] | None = None) -> dict[str, Any]:
    """Run (or resume) the QA evaluation; returns the results written to ``results.json``.

    ``skip_ids``: items left out (e.g. those that cannot be shown in the modality).
    """
    from ecgtrace.agents.exam.qa_results import summarize_qa

    chosen = [as_qa_item(it) for it in (qa.items[:limit] if limit else qa.items)]
    items = [it for it in chosen if it.id not in (skip_ids or set())]

    async def examine_one(item: QAItem) -> dict[str, Any]:
        return await run_one(item, qa.base_dir, examinee, modality, judge=judge, rubrics=rubrics, ask_human=ask_human)

    await examine(run, items, examine_one, workers=worker_count(examinee, concurrency), on_sample=on_sample)
    return write_results(run, items, summarize_qa, kind="qa")


def identity_for(qa: ItemSet, *, model: str, modality: str, seed: int, limit: int | None, max_tokens: int | None,
                 judge: str | None, temperature: float | None = None) -> dict[str, Any]:
    """What decides a QA run's results (a rerun with anything else is refused).

    ``temperature`` enters only when set, so runs made before it was an option keep their identity.
    """
    from ecgtrace.agents.exam.judge import JUDGE_VERSION

    identity = {"kind": "qa", "dataset_sha256": qa.sha256, "dataset_items": len(qa.items), "model": model, "modality": modality,
                "seed": seed, "limit": limit, "max_tokens": max_tokens, "prompt_version": QA_PROMPT_VERSION,
                "scoring_version": SCORING_VERSION, "judge": judge, "judge_version": JUDGE_VERSION if judge else None}
    if temperature is not None:
        identity["temperature"] = temperature
    return identity
