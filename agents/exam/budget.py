"""The prompt token budget: how long a request is, and whether it may be sent.

A request that does not fit the model's context fails with HTTP 400 after the
server has spent a prompt's worth of work on it, and an examination that keeps
asking such requests "succeeds" with 0 %. So every request is counted before it
is sent and a sample whose requests cannot fit is skipped with its reason
(:func:`skip_record`), never sent to fail.

Counting (:func:`estimate_request_tokens`): the local estimate of each text part
(:func:`ecgtrace.tools.tokens.estimate_tokens`, calibrated to stay at or above
real tokenizers), :data:`MESSAGE_OVERHEAD_TOKENS` per message for the chat
template's role markers, :data:`REQUEST_OVERHEAD_TOKENS` per request (the
default system prompt some templates add, the generation prompt), and per image
:func:`image_tokens`. Within a conversation the server's own ``usage`` of the
previous turn replaces the estimate of everything it covered
(:func:`next_request_tokens`).

The budget (:func:`prompt_budget`) is ``--max-prompt-tokens`` when given, else
the context length the server reports minus the room kept for the answer
(``--max-tokens``, or :data:`ANSWER_RESERVE_TOKENS` without it).
"""

from __future__ import annotations

import base64
import math
import struct
from dataclasses import dataclass
from typing import Any

from ecgtrace.tools.tokens import estimate_tokens

#: Role markers of one message under common chat templates (ChatML uses 5: ``<|im_start|>``, role, newline, ``<|im_end|>``, newline).
MESSAGE_OVERHEAD_TOKENS = 8
#: Per request: a default system prompt a template may insert (SmolLM2's is 20 tokens) and the generation prompt.
REQUEST_OVERHEAD_TOKENS = 32
#: Room kept for the answer under a server-reported context when ``--max-tokens`` is not set.
ANSWER_RESERVE_TOKENS = 512
#: An image whose size cannot be read (not a PNG data URI).
UNKNOWN_IMAGE_TOKENS = 1600


def png_size(url: str) -> tuple[int, int] | None:
    """``(width, height)`` in pixels of a PNG ``data:`` URI, read from its header; None for anything else."""
    if not url.startswith("data:image/png;base64,"):
        return None
    try:
        head = base64.b64decode(url[22:54])
    except ValueError:
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)


def image_tokens(width: int, height: int) -> int:
    """Tokens one image costs, the larger of two common accountings.

    OpenAI high detail (fit in 2048 px, shortest side to 768 px, 85 + 170 per
    512 px tile) and Qwen2-VL style patches (one token per 28 x 28 px, up to
    16,384). Vision servers differ widely; this is an estimate, not a count.
    """
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    openai = 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)
    patches = min(16_384, math.ceil(width / 28) * math.ceil(height / 28)) + 2
    return int(max(openai, patches))


def content_tokens(content: Any) -> int:
    """Estimated tokens of one message's content (a string, or text and image parts)."""
    if isinstance(content, str):
        return estimate_tokens(content)
    total = 0
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            total += estimate_tokens(str(part.get("text", "")))
        elif part.get("type") == "image_url":
            size = png_size(str((part.get("image_url") or {}).get("url", "")))
            total += image_tokens(*size) if size else UNKNOWN_IMAGE_TOKENS
    return total


def estimate_request_tokens(messages: list[dict[str, Any]]) -> int:
    """Estimated prompt tokens of a chat request (see the module docstring)."""
    return REQUEST_OVERHEAD_TOKENS + sum(MESSAGE_OVERHEAD_TOKENS + content_tokens(m.get("content")) for m in messages)


def next_request_tokens(messages: list[dict[str, Any]], previous_usage: dict[str, Any] | None, previous_length: int) -> int:
    """Tokens of ``messages``, counted from the server's usage of the previous request where it gave one.

    ``previous_length`` is how many of ``messages`` the previous request held
    (the conversation grows at its end). Without a usable ``prompt_tokens`` the
    whole request is estimated.
    """
    prompt = (previous_usage or {}).get("prompt_tokens") if isinstance(previous_usage, dict) else None
    if not isinstance(prompt, int) or prompt <= 0 or not 0 < previous_length <= len(messages):
        return estimate_request_tokens(messages)
    added = messages[previous_length:]
    return prompt + sum(MESSAGE_OVERHEAD_TOKENS + content_tokens(m.get("content")) for m in added)


@dataclass(frozen=True)
class PromptBudget:
    """The most prompt tokens a request may have, and where that number came from (for messages and results)."""

    max_prompt_tokens: int
    source: str

    def fits(self, tokens: int) -> bool:
        return tokens <= self.max_prompt_tokens

    def reason(self, tokens: int, what: str = "the prompt") -> str:
        return f"{what} needs about {tokens:,} tokens; the budget is {self.max_prompt_tokens:,} ({self.source})"

    def to_json(self) -> dict[str, Any]:
        return {"max_prompt_tokens": self.max_prompt_tokens, "source": self.source}


def prompt_budget(max_prompt_tokens: int | None, context_tokens: int | None = None, max_tokens: int | None = None) -> PromptBudget | None:
    """The budget: ``max_prompt_tokens``, else the server's context less the answer's room, else None (no check)."""
    if max_prompt_tokens is not None:
        return PromptBudget(int(max_prompt_tokens), "--max-prompt-tokens")
    if context_tokens:
        reserve = int(max_tokens) if max_tokens else ANSWER_RESERVE_TOKENS
        why = "--max-tokens" if max_tokens else "kept for the answer"
        return PromptBudget(max(int(context_tokens) - reserve, 0), f"server context {int(context_tokens):,} minus {reserve:,} {why}")
    return None


def skip_record(kind: str, reason: str, *, prompt_tokens: int | None = None, budget: PromptBudget | None = None,
                text_encoding: dict[str, Any] | None = None) -> dict[str, Any]:
    """A sample's :class:`ecgtrace.contracts.SkipRecord` JSON."""
    from ecgtrace.contracts.runs import SkipRecord

    return SkipRecord(kind=kind, reason=reason, prompt_tokens=prompt_tokens,  # type: ignore[arg-type]
                      budget_tokens=budget.max_prompt_tokens if budget else None, text_encoding=text_encoding).to_json()
