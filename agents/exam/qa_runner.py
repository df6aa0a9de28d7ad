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

    {"id", "kind": "qa", "epoch", "task", "template_id", "answer_type", "family", "finding", "split",
     "score" (0-100), "correct" (bool | null), "skipped": null | {"kind", "reason", "prompt_tokens", "budget_tokens", "text_encoding"},
     "turns": [TurnRow: {"index": 0, "stage": <task>, "kind": <family>, "asked": true, "prompt", "raw", "reasoning",
                         "parsed", "parse_ok", "parse_reason", "answer", "correct", "score", "details",
                         "latency_ms", "tokens", "error", "attempts", "meta"}],
     "judge": null | {"ok", "criteria", "score", "band", "hallucinations", "rationale", "raw", ...},
     "item": {"question", "options", "record", "window", "evidence", "modalities", "tolerance_ms"}}
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ecgtrace.agents.exam import messages
from ecgtrace.agents.exam.budget import PromptBudget, estimate_request_tokens, skip_record
from ecgtrace.agents.exam.examinees import Examinee, Reply
from ecgtrace.agents.exam.messages import check_modality, prompt_record
from ecgtrace.agents.exam.qa_scoring import SCORING_VERSION, family, score_answer, tolerance_ms
from ecgtrace.agents.exam.replay import RecordedAnswers
from ecgtrace.agents.exam.run_control import SHUFFLE_VERSION, shuffled_options
from ecgtrace.agents.exam.run_loop import EpochUnit, epoch_units, examine, worker_count, write_exam_results
from ecgtrace.agents.exam.turns import answered_row, turn_spec, unasked_row
from ecgtrace.agents.exam.video_parts import VideoSettings, video_messages
from ecgtrace.contracts.datasets import ItemSet, load_items
from ecgtrace.contracts.qa import QAItem
from ecgtrace.contracts.runs import QASample, sample_key
from ecgtrace.errors import EcgTraceError, QAFormatError
from ecgtrace.redact import redact
from ecgtrace.tools.text_encodings import RAW, EncodingError, TextEncoding

#: Part of a run's identity: bump when prompts change.
QA_PROMPT_VERSION = "1"
SYSTEM_PROMPT = messages.QA.system_prompt

__all__ = ["QAFormatError", "QA_PROMPT_VERSION", "SYSTEM_PROMPT", "answers_identity", "ask", "build_messages", "check_modality", "identity_for",
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


def build_messages(item: QAItem | dict[str, Any], base_dir: str | Path, modality: str, encoding: TextEncoding = RAW, *,
                   video: VideoSettings | None = None) -> list[dict[str, Any]]:
    """OpenAI chat messages for one item: its own messages, else built from its asset files (QA layout).

    ``modality="video"`` sends the item's MP4 as frames or as ``video_url`` (:mod:`ecgtrace.agents.exam.video_parts`).
    """
    it = as_qa_item(item)
    if modality == "video":
        return video_messages(it, base_dir, video or VideoSettings(), system_prompt=messages.QA.system_prompt, prompt=question_text(it))
    return messages.build_messages(it, base_dir, modality, layout=messages.QA, prompt=question_text(it), encoding=encoding)


def shown_item(item: QAItem | dict[str, Any], *, seed: int, epoch: int) -> QAItem:
    """The item as asked in ``epoch``: a closed item's options in that epoch's order (:func:`shuffled_options`).

    Stored messages hold the options in the dataset's order; in a later epoch
    the options block they hold (:func:`ecgtrace.agents.exam.messages.dataset_prompt`)
    is rewritten in the shown order, or, when they hold none, the item is asked
    from its assets instead.
    """
    it = as_qa_item(item)
    if not epoch or not it.options:
        return it
    options = shuffled_options(it.options, seed=seed, sample_id=it.id, epoch=epoch)
    old, new = messages.dataset_prompt(it.question, it.options), messages.dataset_prompt(it.question, options)
    own = it.to_json()["messages"]
    if own is not None:
        text = json.dumps(own)
        own = json.loads(text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])) if json.dumps(old)[1:-1] in text else None
    return it.model_copy(update={"options": options, "messages": own})


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
                  ask_human: Callable[[dict[str, Any]], str] | None = None, encoding: TextEncoding = RAW,
                  budget: PromptBudget | None = None, epoch: int = 0, seed: int = 0, replay: RecordedAnswers | None = None,
                  video: VideoSettings | None = None) -> dict[str, Any]:
    """Ask, score and (optionally) judge one item; returns its samples.jsonl row (:class:`QASample` JSON).

    An item whose ECG cannot be written in ``encoding``, or whose request would
    not fit ``budget``, is not asked: its row says why (``skipped``).
    With ``replay`` (answers a model already gave, :mod:`ecgtrace.agents.exam.replay`) nothing is shown to
    anyone: the row keeps the prompt recorded with the answer, else the question as the scorer reads it, and
    a sample the recorded run skipped is skipped again for the same reason.
    """
    it = shown_item(item, seed=seed, epoch=epoch)
    data = it.to_json()
    turn = make_turn(it)
    key = sample_key(it.id, epoch)
    if replay is not None:
        if key in replay.skipped:
            return _skipped_row(it, data, turn, epoch, replay.skipped[key])
        request: list[dict[str, Any]] = []
    elif not examinee.reads_ecg and it.record is None and not it.messages:  # a baseline on an item without signal
        request = [{"role": "system", "content": messages.QA.system_prompt}, {"role": "user", "content": question_text(it)}]
    else:
        try:
            request = build_messages(it, base_dir, modality, encoding, video=video)
        except EncodingError as exc:
            return _skipped_row(it, data, turn, epoch, skip_record("encoding", str(exc), text_encoding=encoding.to_json()))
        if budget is not None:
            tokens = estimate_request_tokens(request)
            if not budget.fits(tokens):
                return _skipped_row(it, data, turn, epoch, skip_record("token_budget", budget.reason(tokens, "the request"), prompt_tokens=tokens,
                                                                       budget=budget, text_encoding=encoding.to_json()))
    reply = await ask(examinee, request, turn if replay is None else {**turn, "sample_key": key}, ask_human)
    scored = score_answer(data, reply.raw, error=reply.error)
    verdict = await _verdict(judge, rubrics, data if replay is None else {**data, "id": key}, reply, scored)  # a replayed verdict is found by sample
    prompt = prompt_record(request) if replay is None else replay.prompts.get((key, 0), question_text(it))
    row = answered_row(turn, prompt, reply, parsed=scored["parsed"], parse_ok=scored["parse_ok"],
                       parse_reason=scored["parse_reason"], correct=scored["correct"], score=scored["score"], details=scored["details"])
    return QASample(id=sample_key(it.id, epoch), epoch=epoch, task=it.task, template_id=it.template_id, answer_type=it.answer_type,
                    family=scored["family"], finding=it.finding, split=it.split, score=scored["score"], correct=scored["correct"],
                    turns=[row], judge=verdict, item=_shown(data)).to_json()


def _shown(data: dict[str, Any]) -> dict[str, Any]:
    return {**{k: data.get(k) for k in ("question", "options", "record", "window", "evidence", "modalities")}, "tolerance_ms": tolerance_ms(data)}


def _skipped_row(it: QAItem, data: dict[str, Any], turn: dict[str, Any], epoch: int, skipped: dict[str, Any]) -> dict[str, Any]:
    """The row of an item that was not asked (score 0, ``correct`` None; metrics leave it out)."""
    return QASample(id=sample_key(it.id, epoch), epoch=epoch, task=it.task, template_id=it.template_id, answer_type=it.answer_type,
                    family=family(data), finding=it.finding, split=it.split, score=0.0, correct=None, turns=[unasked_row(turn)],
                    item=_shown(data), skipped=skipped).to_json()


# ------------------------------------------------------------------ a run

async def run_qa(qa: ItemSet, run: Any, examinee: Examinee, *, modality: str = "text", concurrency: int = 8, limit: int | None = None,
                 judge: Examinee | None = None, rubrics: dict[str, Any] | None = None,
                 on_sample: Callable[[dict[str, Any]], None] | None = None,
                 ask_human: Callable[[dict[str, Any]], str] | None = None, skip_ids: set[str] | None = None,
                 items: list[Any] | None = None, encoding: TextEncoding = RAW, budget: PromptBudget | None = None,
                 epochs: int = 1, seed: int = 0, pricing: dict[str, dict[str, float]] | None = None,
                 replay: RecordedAnswers | None = None, video: VideoSettings | None = None) -> dict[str, Any]:
    """Run (or resume) the QA evaluation; returns the results written to ``results.json``.

    Args:
        items: the items to ask (default: every item of ``qa``; see
            :func:`ecgtrace.agents.exam.run_control.select_items`); ``limit`` keeps the first N of them.
        skip_ids: items left out (e.g. those that cannot be shown in the modality).
        encoding: how the ECG is written as text; budget: the prompt token budget (None: no check).
        epochs: times each item is asked (options shuffled from epoch 1 on, seeded by ``seed``).
        pricing: USD per 1M tokens by model name, for the cost in ``results["usage"]``.
        replay: the answers are recorded ones (``examinee`` is a :class:`~ecgtrace.agents.exam.replay.ReplayExaminee`).
        video: how ``modality="video"`` sends the video (frames or ``video_url``).
    """
    from ecgtrace.agents.exam.qa_results import headline_qa, summarize_qa

    pool = list(items) if items is not None else list(qa.items)
    chosen = [as_qa_item(it) for it in (pool[:limit] if limit else pool)]
    selected = [it for it in chosen if it.id not in (skip_ids or set())]

    async def examine_one(unit: EpochUnit[QAItem]) -> dict[str, Any]:
        return await run_one(unit.item, qa.base_dir, examinee, modality, judge=judge, rubrics=rubrics, ask_human=ask_human,
                             encoding=encoding, budget=budget, epoch=unit.epoch, seed=seed, replay=replay, video=video)

    await examine(run, epoch_units(selected, epochs), examine_one, workers=worker_count(examinee, concurrency), on_sample=on_sample)
    models = {"examinee": (run.header.get("identity") or {}).get("model") or getattr(examinee, "name", None),
              "judge": getattr(judge, "name", None) if judge is not None else None}
    return write_exam_results(run, selected, summarize_qa, kind="qa", epochs=epochs, headline=headline_qa, models=models, pricing=pricing,
                         budget=budget.to_json() if budget else None)


def answers_identity(qa: ItemSet, answers: RecordedAnswers, *, limit: int | None, judge: str | None) -> dict[str, Any]:
    """What decides the results of scoring recorded answers.

    A run's own answers keep that run's identity, with today's scoring version
    (so the same code gives the same run id and results, and a scorer fix a
    new one); any other answers file is named by its SHA-256.

    Raises:
        AnswersError: the run examined another dataset, or is not a QA run.
    """
    from ecgtrace.agents.exam.judge import JUDGE_VERSION
    from ecgtrace.agents.exam.replay import AnswersError

    if answers.header is not None:
        source = dict(answers.header["identity"])
        if answers.header.get("kind") != "qa":
            raise AnswersError(f"--answers {answers.path}: a run of kind {answers.header.get('kind')!r}, not a QA run")
        if source.get("dataset_sha256") != qa.sha256:
            raise AnswersError(f"--answers {answers.path}: its run examined another dataset (SHA-256 {str(source.get('dataset_sha256'))[:12]}..., "
                               f"this one is {qa.sha256[:12]}...)")
        return {**source, "scoring_version": SCORING_VERSION, **({"judge_version": JUDGE_VERSION} if source.get("judge") else {})}
    return {"kind": "qa", "dataset_sha256": qa.sha256, "dataset_items": len(qa.items), "model": None, "answers_sha256": answers.sha256,
            "limit": limit, "scoring_version": SCORING_VERSION, "judge": judge, "judge_version": JUDGE_VERSION if judge else None}


def identity_for(qa: ItemSet, *, model: str, modality: str, seed: int, limit: int | None = None, max_tokens: int | None,
                 judge: str | None, temperature: float | None = None, text_encoding: TextEncoding | None = None) -> dict[str, Any]:
    """What decides a QA run's per-sample results (a rerun with anything else is refused).

    Which items are asked (``--limit``, ``--sample-id``) and how often
    (``--epochs``) are not in it: a run folder grows. ``limit`` is accepted for
    older callers and ignored. ``temperature`` enters only when set, so runs
    made before it was an option keep their identity; ``text_encoding`` is
    recorded for the modalities that show text (:func:`ecgtrace.runlog.comparable_identity`
    reads its absence in older runs as raw).
    """
    from ecgtrace.agents.exam.judge import JUDGE_VERSION

    identity = {"kind": "qa", "dataset_sha256": qa.sha256, "dataset_items": len(qa.items), "model": model, "modality": modality,
                "seed": seed, "max_tokens": max_tokens, "prompt_version": QA_PROMPT_VERSION,
                "scoring_version": SCORING_VERSION, "judge": judge, "judge_version": JUDGE_VERSION if judge else None,
                "text_encoding": (text_encoding or RAW).to_json() if modality in ("text", "both") else None,
                "option_shuffle": SHUFFLE_VERSION}
    if temperature is not None:
        identity["temperature"] = temperature
    return identity
