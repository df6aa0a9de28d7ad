"""Any langchain chat model as an examinee, and the one reader of a chat model's reply.

:class:`ChatModelExaminee` lets code that is handed a chat model (a fake in
tests, a provider's own chat class) use it wherever an :class:`Examinee` is
expected, e.g. the paraphraser. The ChatOpenAI backend
(:mod:`ecgtrace.agents.exam.examinees.langchain_chat`) reads its replies with the
same :func:`reply_from_message`.
"""

from __future__ import annotations

import time
from typing import Any

from ecgtrace.agents.exam.examinees.base import Examinee, Reply


def reply_from_message(message: Any, latency_ms: float, attempts: int = 1) -> Reply:
    """A chat model's ``AIMessage`` as a :class:`Reply`: text, reasoning, the server's usage and ids."""
    content = message.content
    if isinstance(content, list):  # content blocks -> their text
        content = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    meta = message.response_metadata or {}
    return Reply(
        raw=content,
        reasoning=message.additional_kwargs.get("reasoning_content"),
        usage=meta.get("server_usage"),
        latency_ms=round(latency_ms, 3),
        attempts=attempts,
        meta={"id": meta.get("server_id"), "model": meta.get("model_name"), "finish_reason": meta.get("finish_reason")},
    )


class ChatModelExaminee(Examinee):
    """A langchain chat model (anything with ``ainvoke(messages)``); failures propagate to the caller."""

    def __init__(self, model: Any, name: str | None = None) -> None:
        self.model = model
        self.name = name or type(model).__name__

    async def answer(self, messages: list[dict[str, Any]], turn: dict[str, Any]) -> Reply:
        started = time.perf_counter()
        message = await self.model.ainvoke(messages)
        return reply_from_message(message, (time.perf_counter() - started) * 1000)


def as_examinee(model: Any) -> Examinee:
    """``model`` itself when it is an :class:`Examinee`, else the chat model wrapped as one."""
    return model if isinstance(model, Examinee) else ChatModelExaminee(model)
