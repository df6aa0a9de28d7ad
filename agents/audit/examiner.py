"""The examiner: turns an :class:`AuditItem` into questions, prompts, requests and scores.

Everything here returns plain JSON (dicts, lists, str, int, float, bool) so it
can live in LangGraph state. The ECG itself (image bytes, text) is attached
only when a request is built (:func:`build_request`), never stored.

A *turn spec* (see :func:`plan_turns`) is::

    {"index": int, "stage": "initial"|"criterion"|"finding"|"grounding"|"decision",
     "loop": int | None, "kind": "lead"|"wave"|"measurement"|None,
     "question": str, "options": [str], "answer": str | [str], "multi": bool,
     "sample_id": str}
"""

from __future__ import annotations

import base64
import string
from functools import lru_cache
from pathlib import Path
from typing import Any

from ecgtrace.contracts.audit import AuditItem
from ecgtrace.contracts.vocabulary import AUDIT_STAGES, EXAM_MODALITIES, EXAM_MODES
from ecgtrace.errors import AuditFormatError
from ecgtrace.agents.exam.parsing import is_correct, parse_answer

#: Bump when prompts or scoring change: it is part of a run's identity.
PROMPT_VERSION = "1"
MODALITIES = EXAM_MODALITIES
MODES = EXAM_MODES
STAGES = AUDIT_STAGES

SYSTEM_PROMPT = (
    "You are a cardiologist reading an electrocardiogram (ECG). You will be asked a series of "
    "multiple-choice questions about the ECG shown in the first message. Answer each question with "
    "the letter of your choice followed by the option text, for example 'B. No'."
)


def plan_turns(item: AuditItem | dict[str, Any]) -> list[dict[str, Any]]:
    """All turns of one sample in asking order (initial, then each loop's steps)."""
    it = item if isinstance(item, AuditItem) else AuditItem.model_validate(item)
    turns: list[dict[str, Any]] = []

    def add(stage: str, loop: int | None, q: Any, kind: str | None = None, multi: bool = False) -> None:
        answer = list(q.answer) if isinstance(q.answer, list) else q.answer
        turns.append({
            "index": len(turns), "stage": stage, "loop": loop, "kind": kind,
            "question": q.question, "options": list(q.options), "answer": answer,
            "multi": bool(multi), "sample_id": it.id,
        })

    add("initial", None, it.initial)
    for n, loop in enumerate(it.loops):
        add("criterion", n, loop.criterion)
        add("finding", n, loop.finding)
        for g in loop.grounding:
            add("grounding", n, g, kind=g.kind, multi=g.multi)
        add("decision", n, loop.decision)
    return turns


def format_prompt(turn: dict[str, Any]) -> str:
    """The user message for one turn: question, lettered options, how to answer."""
    lines = [turn["question"], ""]
    lines += [f"{string.ascii_uppercase[i]}. {opt}" for i, opt in enumerate(turn["options"])]
    lines.append("")
    if turn["multi"]:
        lines.append("Select every option that applies. Answer with the letters separated by commas, e.g. 'A, C'.")
    else:
        lines.append("Answer with the letter of one option.")
    return "\n".join(lines)


def render_answer(turn: dict[str, Any]) -> str:
    """The ground-truth answer as the assistant would have said it (teacher forcing)."""
    answers = turn["answer"] if isinstance(turn["answer"], list) else [turn["answer"]]
    return ", ".join(f"{string.ascii_uppercase[turn['options'].index(a)]}. {a}" for a in answers)


def score_reply(turn: dict[str, Any], prompt: str, reply: dict[str, Any]) -> dict[str, Any]:
    """One finished turn as it goes into samples.jsonl.

    ``reply`` is :meth:`Reply.to_json` output. A reply with an ``error`` (server
    failure after retries) is scored wrong with the error kept.
    """
    raw = reply.get("raw")
    if reply.get("error"):
        parsed = {"value": None, "ok": False, "reason": "no answer: server error", "method": "none"}
    else:
        parsed = parse_answer(raw, turn["options"], turn["multi"]).to_json()
    correct = bool(parsed["ok"] and is_correct(parsed["value"], turn["answer"], turn["multi"]))
    return {
        "index": turn["index"], "stage": turn["stage"], "loop": turn["loop"], "kind": turn["kind"],
        "asked": True, "prompt": prompt, "raw": raw, "reasoning": reply.get("reasoning"),
        "parsed": parsed["value"], "parse_ok": parsed["ok"], "parse_reason": parsed["reason"] or None,
        "answer": turn["answer"], "correct": correct, "latency_ms": reply.get("latency_ms"),
        "tokens": reply.get("usage"), "error": reply.get("error"), "attempts": reply.get("attempts"),
        "meta": reply.get("meta"),
    }


def not_asked(turn: dict[str, Any]) -> dict[str, Any]:
    """A turn the chain never reached (``stop`` mode after an error)."""
    return {
        "index": turn["index"], "stage": turn["stage"], "loop": turn["loop"], "kind": turn["kind"],
        "asked": False, "prompt": None, "raw": None, "reasoning": None, "parsed": None, "parse_ok": False,
        "parse_reason": None, "answer": turn["answer"], "correct": None, "latency_ms": None,
        "tokens": None, "error": None, "attempts": None, "meta": None,
    }


# ---------------------------------------------------------------- requests

def check_assets(item: AuditItem, base_dir: str | Path, modality: str) -> None:
    """Refuse, before any model call, an item whose asset for ``modality`` is missing."""
    if modality not in MODALITIES:
        raise AuditFormatError(f"unknown modality {modality!r} (choose from {', '.join(MODALITIES)})")
    needed = ("image", "text") if modality == "both" else (modality,)
    for name in needed:
        rel = getattr(item.assets, name)
        if rel is None:
            raise AuditFormatError(f"item {item.id!r} has no assets.{name}, needed for --modality {modality}")
        if not (Path(base_dir) / rel).is_file():
            raise AuditFormatError(f"item {item.id!r}: assets.{name} file not found: {Path(base_dir) / rel}")


@lru_cache(maxsize=64)
def _image_data_uri(path: str) -> str:
    data = Path(path).read_bytes()
    mime = "image/png" if path.lower().endswith(".png") else "image/jpeg"
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


@lru_cache(maxsize=64)
def _text_asset(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


def ecg_content(item: dict[str, Any], base_dir: str, modality: str) -> list[dict[str, Any]]:
    """OpenAI content parts that show the ECG window (read from disk on demand, cached)."""
    assets = item.get("assets") or {}
    parts: list[dict[str, Any]] = []
    window = item.get("window")
    where = f" from {window['t0_s']:g} s to {window['t1_s']:g} s" if window else ""
    leads = ", ".join(item["record"]["leads"])
    intro = f"ECG record {item['record']['id']}{where}, leads {leads}, sampled at {item['record']['fs_hz']:g} Hz."
    if modality in ("text", "both") and assets.get("text"):
        parts.append({"type": "text", "text": f"{intro}\nSignal as text:\n{_text_asset(str(Path(base_dir) / assets['text']))}"})
    else:
        parts.append({"type": "text", "text": intro})
    if modality in ("image", "both") and assets.get("image"):
        parts.append({"type": "image_url", "image_url": {"url": _image_data_uri(str(Path(base_dir) / assets["image"]))}})
    return parts


def build_request(history: list[dict[str, Any]], prompt: str, item: dict[str, Any], base_dir: str, modality: str) -> list[dict[str, Any]]:
    """OpenAI chat messages: system, the ECG + first question, the text history, this question.

    ``history`` is the plain-text conversation so far (``{"role", "content"}``
    pairs). The ECG is attached to the first user message: content parts
    (text, image) when there is an image, one string when all is text.
    """
    turns = [*history, {"role": "user", "content": prompt}]
    first = turns[0]
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
    parts = [*ecg_content(item, base_dir, modality), {"type": "text", "text": first["content"]}]
    if all(p["type"] == "text" for p in parts):  # text only: one string (content parts cost the SDK ~3x more CPU)
        messages.append({"role": "user", "content": "\n\n".join(p["text"] for p in parts)})
    else:
        messages.append({"role": "user", "content": parts})
    messages.extend(turns[1:])
    return messages
