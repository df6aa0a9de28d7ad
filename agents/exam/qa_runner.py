"""Run a model over a QA dataset (``qa.jsonl``): resumable, concurrent, scored.

Why a plain async runner and not a LangGraph graph: a QA item is one request
and one deterministic score (plus, optionally, one judge request). There is
no multi-turn state to checkpoint, so a graph and its SQLite checkpointer
would add a second source of truth next to ``samples.jsonl`` without making
anything resumable that is not already: a sample is appended (fsynced) only
when it is finished, and a rerun skips the ids already in ``samples.jsonl``.
Nothing is lost or counted twice; a request in flight when the run is killed
is simply asked again.

The run folder is the audit run format (:mod:`ecgtrace.runlog`) with
``identity.kind = "qa"``. A ``samples.jsonl`` line::

    {"id", "kind": "qa", "task", "template_id", "answer_type", "family", "finding", "split",
     "score" (0-100), "correct" (bool | null),
     "turns": [{"index": 0, "stage": <task>, "asked": true, "prompt", "raw", "reasoning", "parsed",
                "parse_ok", "parse_reason", "answer", "correct", "score", "details",
                "latency_ms", "tokens", "error", "attempts"}],
     "judge": null | {"ok", "criteria", "score", "band", "hallucinations", "rationale", "raw", ...},
     "item": {"question", "options", "record", "window", "evidence", "modalities", "tolerance_ms"}}
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ecgtrace.agents.exam.workers import drain
from ecgtrace.agents.exam.examinees import Examinee, Reply
from ecgtrace.agents.audit.examiner import format_prompt
from ecgtrace.agents.exam.qa_scoring import SCORING_VERSION, family, score_answer, tolerance_ms
from ecgtrace.contracts.vocabulary import EXAM_MODALITIES
from ecgtrace.errors import EcgTraceError
from ecgtrace.jsonio import jsonl_records, safe_join

#: Part of a run's identity: bump when prompts change.
QA_PROMPT_VERSION = "1"
MODALITIES = EXAM_MODALITIES
SYSTEM_PROMPT = ("You are a cardiologist reading a Holter electrocardiogram (ECG). Answer the question about the ECG "
                 "shown in this message. Times are in milliseconds from the recording start unless stated otherwise.")
_OPEN_HINTS = {
    "integer": "Answer with a single number.",
    "time_ms": "Answer with one time in ms from the recording start.",
    "timestamps_ms": "Answer with every time in ms from the recording start, separated by commas, or 'none'.",
    "label": "Answer with the name of the finding.",
}
_SIGNAL_TEXT_MARKS = ("# format: ecgtrace-signal-text", "Signal as text:", "ECG signal (text):")


class QAFormatError(EcgTraceError):
    """A qa.jsonl file (or one of its lines) is not a QA item set."""


@dataclass(frozen=True)
class QASet:
    path: Path
    base_dir: Path
    items: list[dict[str, Any]]
    sha256: str


def load_qa(path: str | Path) -> QASet:
    """Read ``qa.jsonl`` (or the folder holding it); minimal checks with file:line messages."""
    target = Path(path)
    if target.is_dir():
        target = target / "qa.jsonl"
    if not target.is_file():
        raise QAFormatError(f"QA file not found: {target}")
    data = target.read_bytes()
    items: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for number, obj in jsonl_records(data, target, QAFormatError):
        where = f"{target}:{number}"
        if not isinstance(obj, dict):
            raise QAFormatError(f"{where}: expected a JSON object")
        for key in ("id", "task", "question", "answer"):
            if key not in obj:
                raise QAFormatError(f"{where}: missing field {key!r}")
        options = obj.get("options")
        if options is not None:
            if not isinstance(options, list) or len(options) < 2 or not all(isinstance(o, str) for o in options):
                raise QAFormatError(f"{where}: options must be null or a list of at least 2 option texts")
            if obj["answer"] not in options:
                raise QAFormatError(f"{where}: answer {obj['answer']!r} is not one of the options")
        if obj["id"] in seen:
            raise QAFormatError(f"{where}: duplicate id {obj['id']!r} (first on line {seen[obj['id']]})")
        seen[obj["id"]] = number
        items.append(obj)
    if not items:
        raise QAFormatError(f"{target}: no QA items")
    return QASet(path=target, base_dir=target.parent, items=items, sha256=hashlib.sha256(data).hexdigest())


# ------------------------------------------------------------------ requests

def make_turn(item: dict[str, Any]) -> dict[str, Any]:
    """The examinee's turn spec for one QA item (same keys as the audit examiner's)."""
    options = list(item.get("options") or [])
    return {"index": 0, "stage": str(item["task"]), "loop": None, "kind": family(item), "question": item["question"],
            "options": options, "answer": item["answer"] if isinstance(item["answer"], str) else json.dumps(item["answer"], sort_keys=True),
            "multi": False, "sample_id": item["id"]}


def question_text(item: dict[str, Any]) -> str:
    turn = make_turn(item)
    if turn["options"]:
        return format_prompt(turn)
    hint = _OPEN_HINTS.get(str(item.get("answer_type")))
    return f"{item['question']}\n\n{hint}" if hint else str(item["question"])


@lru_cache(maxsize=64)
def _image_data_uri(path: str) -> str:
    """A PNG/JPEG file as a data URI (cached: items share display windows)."""
    mime = "image/png" if path.lower().endswith(".png") else "image/jpeg"
    return f"data:{mime};base64,{base64.b64encode(Path(path).read_bytes()).decode('ascii')}"


@lru_cache(maxsize=64)
def _text_asset(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


def _asset_paths(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    if isinstance(value, dict):
        return _asset_paths(value.get("path") or value.get("paths"))
    return []


def check_modality(item: dict[str, Any], base_dir: Path, modality: str) -> None:
    """Refuse, before any model call, an item that cannot be shown in ``modality``."""
    if modality not in MODALITIES:
        raise QAFormatError(f"unknown modality {modality!r} (choose from {', '.join(MODALITIES)})")
    prebuilt = item.get("messages")
    if isinstance(prebuilt, list) and prebuilt:
        return
    if isinstance(prebuilt, dict):
        for name in (("text", "image") if modality == "both" else (modality,)):
            if not prebuilt.get(name):
                raise QAFormatError(f"item {item['id']!r} has no messages.{name}, needed for --modality {modality}")
        return
    mods = item.get("modalities") or {}
    for name in (("text", "image") if modality == "both" else (modality,)):
        paths = _asset_paths(mods.get(name))
        if not paths:
            raise QAFormatError(f"item {item['id']!r} has no modalities.{name}, needed for --modality {modality}")
        for rel in paths:
            if not safe_join(base_dir, rel).is_file():
                raise QAFormatError(f"item {item['id']!r}: modalities.{name} file not found: {base_dir / rel}")


def _filter(messages: list[dict[str, Any]], modality: str) -> list[dict[str, Any]]:
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            kept = []
            for part in content:
                is_image = isinstance(part, dict) and part.get("type") == "image_url"
                is_signal = isinstance(part, dict) and part.get("type") == "text" and any(m in str(part.get("text", "")) for m in _SIGNAL_TEXT_MARKS)
                if (modality == "text" and is_image) or (modality == "image" and is_signal):
                    continue
                kept.append(part)
            message = {**message, "content": kept}
        out.append(message)
    return out


def _inline_images(messages: list[dict[str, Any]], base_dir: Path, to_uri: Callable[[str], str]) -> list[dict[str, Any]]:
    """Image parts whose URL is a path relative to the dataset folder become data URIs (the dataset writes paths)."""
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            url = (part.get("image_url") or {}).get("url") if isinstance(part, dict) and part.get("type") == "image_url" else None
            if isinstance(url, str) and not url.startswith(("data:", "http://", "https://")):
                path = safe_join(base_dir, url)
                if not path.is_file():
                    raise QAFormatError(f"image {url!r} of a QA item not found under {base_dir}")
                part["image_url"] = {**part["image_url"], "url": to_uri(str(path))}
    return messages


def build_messages(item: dict[str, Any], base_dir: Path, modality: str) -> list[dict[str, Any]]:
    """OpenAI chat messages for one item.

    An item's own ``messages`` win: the dataset's dict keyed by modality
    (``{"text": [...], "image": [...]}``; ``both`` = the text messages plus the
    image parts), or a list (image parts dropped for ``text``, signal-text
    parts dropped for ``image``). Image URLs that are paths relative to the
    qa.jsonl folder (as the dataset writes them) are inlined as data URIs.
    Otherwise the request is built from ``modalities`` (paths relative to the
    qa.jsonl folder): signal text and/or PNG data URIs, then the question.
    """
    prebuilt = item.get("messages")
    if isinstance(prebuilt, dict) and (prebuilt.get(modality) or (modality == "both" and prebuilt.get("text") and prebuilt.get("image"))):
        if modality == "both":
            chosen = json.loads(json.dumps(prebuilt["text"]))
            images = [p for m in prebuilt["image"] if isinstance(m.get("content"), list) for p in m["content"] if p.get("type") == "image_url"]
            last = next(m for m in reversed(chosen) if m.get("role") == "user")
            if isinstance(last["content"], str):
                last["content"] = [{"type": "text", "text": last["content"]}]
            last["content"] = [*last["content"], *json.loads(json.dumps(images))]
        else:
            chosen = json.loads(json.dumps(prebuilt[modality]))
        return _inline_images(chosen, base_dir, _image_data_uri)
    if isinstance(prebuilt, list) and prebuilt:
        return _inline_images(_filter(json.loads(json.dumps(prebuilt)), modality), base_dir, _image_data_uri)

    mods = item.get("modalities") or {}
    record = item.get("record") or {}
    window = item.get("window")
    where = f" from {window['t0_s']:g} s to {window['t1_s']:g} s" if window else ""
    intro = f"ECG record {record.get('id', '?')}{where}, leads {', '.join(record.get('leads') or [])}, sampled at {record.get('fs', 0):g} Hz."
    parts: list[dict[str, Any]] = [{"type": "text", "text": intro}]
    if modality in ("text", "both"):
        for rel in _asset_paths(mods.get("text")):
            parts.append({"type": "text", "text": "Signal as text:\n" + _text_asset(str(safe_join(base_dir, rel)))})
    if modality in ("image", "both"):
        for rel in _asset_paths(mods.get("image")):
            parts.append({"type": "image_url", "image_url": {"url": _image_data_uri(str(safe_join(base_dir, rel)))}})
    parts.append({"type": "text", "text": question_text(item)})
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": parts}]


def finding_of(item: dict[str, Any]) -> str | None:
    """The event kind / diagnosis an item is about, when the item says so."""
    for key in ("finding", "event_kind", "kind", "diagnosis"):
        if isinstance(item.get(key), str):
            return item[key]
    params = (item.get("provenance") or {}).get("params") or {}
    for key in ("event_kind", "kind", "finding"):
        if isinstance(params.get(key), str):
            return params[key]
    if str(item.get("task", "")).endswith("_diagnosis"):
        return str(item.get("answer"))
    return None


# ------------------------------------------------------------------ one sample

PROMPT_KEEP_CHARS = 4000


def prompt_record(messages: list[dict[str, Any]]) -> str:
    """What samples.jsonl keeps of the request: the last user message's text (images as ``[image]``), capped.

    The ECG as text can be tens of kB per item; only its first characters are
    kept (the dataset holds the rest), so the run log stays small.
    """
    user = next((m for m in reversed(messages) if m.get("role") == "user"), {"content": ""})
    content = user.get("content")
    if isinstance(content, list):
        text = "\n".join(p.get("text", "") if p.get("type") == "text" else "[image]" for p in content if isinstance(p, dict))
    else:
        text = str(content or "")
    if len(text) > PROMPT_KEEP_CHARS:
        text = text[:PROMPT_KEEP_CHARS] + f"\n[... {len(text) - PROMPT_KEEP_CHARS} more characters of the request not stored]"
    return text


async def ask(examinee: Examinee, messages: list[dict[str, Any]], turn: dict[str, Any],
              ask_human: Callable[[dict[str, Any]], str] | None = None) -> Reply:
    """One answer; a built-in that cannot answer (random on an open question) is an error, not a crash."""
    if examinee.interactive:
        if ask_human is None:
            raise EcgTraceError("a human examinee needs a terminal")
        typed = await asyncio.to_thread(ask_human, {"sample_id": turn["sample_id"], "stage": turn["stage"], "prompt": prompt_record(messages)})
        return Reply(raw=str(typed))
    try:
        return await examinee.answer(messages, turn)
    except EcgTraceError:
        raise
    except Exception as exc:  # noqa: BLE001
        return Reply(raw=None, error=f"{type(exc).__name__}: {str(exc)[:200] or 'examinee cannot answer this question'}")


async def run_one(item: dict[str, Any], base_dir: Path, examinee: Examinee, modality: str, *, judge: Examinee | None = None,
                  rubrics: dict[str, Any] | None = None, ask_human: Callable[[dict[str, Any]], str] | None = None) -> dict[str, Any]:
    """Ask, score and (optionally) judge one item; returns its samples.jsonl row."""
    turn = make_turn(item)
    messages = build_messages(item, base_dir, modality)
    reply = await ask(examinee, messages, turn, ask_human)
    scored = score_answer(item, reply.raw, error=reply.error)
    verdict = None
    rubric = (rubrics or {}).get(str(item["task"]))
    if judge is not None and rubric is not None and not reply.error:
        from ecgtrace.agents.exam.judge import judge_answer

        deterministic = scored["details"] if scored["family"] == "report" else None
        verdict = await judge_answer(judge, rubric, item, reply.raw or "", deterministic)
    prompt = prompt_record(messages)
    record = {
        "index": 0, "stage": str(item["task"]), "loop": None, "kind": scored["family"], "asked": True, "prompt": prompt,
        "raw": reply.raw, "reasoning": reply.reasoning, "parsed": scored["parsed"], "parse_ok": scored["parse_ok"],
        "parse_reason": scored["parse_reason"], "answer": item["answer"], "correct": scored["correct"], "score": scored["score"],
        "details": scored["details"], "latency_ms": reply.latency_ms, "tokens": reply.usage, "error": reply.error,
        "attempts": reply.attempts,
    }
    return {
        "id": item["id"], "kind": "qa", "task": item["task"], "template_id": item.get("template_id"),
        "answer_type": item.get("answer_type"), "family": scored["family"], "finding": finding_of(item), "split": item.get("split"),
        "score": scored["score"], "correct": scored["correct"], "turns": [record], "judge": verdict,
        "item": {**{k: item.get(k) for k in ("question", "options", "record", "window", "evidence", "modalities")},
                 "tolerance_ms": tolerance_ms(item)},
    }


async def run_qa(qa: QASet, run: Any, examinee: Examinee, *, modality: str = "text", concurrency: int = 8, limit: int | None = None,
                 judge: Examinee | None = None, rubrics: dict[str, Any] | None = None,
                 on_sample: Callable[[dict[str, Any]], None] | None = None,
                 ask_human: Callable[[dict[str, Any]], str] | None = None, skip_ids: set[str] | None = None) -> dict[str, Any]:
    """Run (or resume) the QA evaluation; returns the results written to ``results.json``.

    ``skip_ids``: items left out (e.g. those that cannot be shown in the modality).
    """
    from ecgtrace.agents.exam.qa_results import write_qa_results

    items = qa.items[:limit] if limit else list(qa.items)
    items = [it for it in items if it["id"] not in (skip_ids or set())]
    finished = run.finished_ids()
    todo = [item for item in items if item["id"] not in finished]
    workers = 1 if examinee.interactive else max(1, int(concurrency))

    async def handle(item: dict[str, Any]) -> None:
        row = await run_one(item, qa.base_dir, examinee, modality, judge=judge, rubrics=rubrics, ask_human=ask_human)
        if run.append_sample(row) and on_sample is not None:
            on_sample(row)

    await drain(todo, handle, workers)
    return write_qa_results(run, items)


def identity_for(qa: QASet, *, model: str, modality: str, seed: int, limit: int | None, max_tokens: int | None,
                 judge: str | None) -> dict[str, Any]:
    """What decides a QA run's results (a rerun with anything else is refused)."""
    from ecgtrace.agents.exam.judge import JUDGE_VERSION

    return {"kind": "qa", "dataset_sha256": qa.sha256, "dataset_items": len(qa.items), "model": model, "modality": modality,
            "seed": seed, "limit": limit, "max_tokens": max_tokens, "prompt_version": QA_PROMPT_VERSION,
            "scoring_version": SCORING_VERSION, "judge": judge, "judge_version": JUDGE_VERSION if judge else None}
