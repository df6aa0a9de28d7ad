"""``langchain-openai:<model>``: the same OpenAI-compatible endpoint through langchain-openai's ``ChatOpenAI``.

Everything but the transport is :class:`~ecgtrace.agents.exam.examinees.openai_chat.OpenAIExaminee`'s:
retries (tenacity; ChatOpenAI's own are off), Retry-After, error texts and
redaction, fatal statuses, text-only messages sent as one string, reply caps,
the rate budget, preflight, the key from the environment. ChatOpenAI's quirks are handled here (``../shared/PITFALLS.md``):
a subclass keeps ``reasoning_content`` and the server's ``usage``, the
Responses API is off, and ``max_tokens`` also goes in ``extra_body`` for
Ollama and llama.cpp. It costs about four times the CPU of the SDK path per
call (``benchmarks/audit.py``); use it where a langchain callback, tracer or
cache is wanted.
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any

from ecgtrace.agents.exam.examinees.base import Backend, Examinee, ExamineeOptions, Reply
from ecgtrace.agents.exam.examinees.chat_model import reply_from_message
from ecgtrace.agents.exam.examinees.openai_chat import OpenAIExaminee, options_kwargs


@functools.lru_cache(maxsize=1)
def _reasoning_chat_class():  # noqa: ANN202
    """``ChatOpenAI`` subclass that keeps ``reasoning_content`` and the server's ``usage``."""
    from langchain_openai import ChatOpenAI

    class ReasoningChatOpenAI(ChatOpenAI):
        def _create_chat_result(self, response, generation_info=None):  # noqa: ANN001
            result = super()._create_chat_result(response, generation_info)
            data = response if isinstance(response, dict) else response.model_dump(warnings=False)
            choices = data.get("choices") or [{}]
            message = (choices[0] or {}).get("message") or {}
            reasoning = message.get("reasoning_content") or message.get("reasoning")
            if result.generations:
                msg = result.generations[0].message
                if reasoning:
                    msg.additional_kwargs["reasoning_content"] = reasoning
                msg.response_metadata["server_usage"] = data.get("usage")
                msg.response_metadata["server_id"] = data.get("id")
                msg.response_metadata["finish_reason"] = (choices[0] or {}).get("finish_reason")
            return result

    return ReasoningChatOpenAI


class LangChainOpenAIExaminee(OpenAIExaminee):
    """:class:`OpenAIExaminee` whose requests go through ``ChatOpenAI`` (one per event loop, own HTTP client)."""

    prefix = "langchain-openai"

    def _open_client(self) -> Any:
        import openai

        kwargs: dict[str, Any] = dict(
            model=self.model, base_url=self.base_url, api_key=os.environ.get(self.api_key_env) or "not-needed",
            timeout=self.timeout_s, max_retries=0, use_responses_api=False,
            # langchain-openai caches a default client per (base_url, timeout) across loops, which fails with
            # "Event loop is closed" when a second asyncio.run reuses it: one client per loop instead
            http_async_client=openai.DefaultAsyncHttpxClient(timeout=self.timeout_s))
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.max_tokens:
            kwargs["max_tokens"] = self.max_tokens
            kwargs["extra_body"] = {"max_tokens": self.max_tokens}
        return _reasoning_chat_class()(**kwargs)

    async def _send(self, client: Any, messages: list[dict[str, Any]]) -> Reply:
        started = time.perf_counter()
        message = await client.ainvoke(messages)
        return reply_from_message(message, (time.perf_counter() - started) * 1000)


def _make(argument: str | None, options: ExamineeOptions) -> Examinee:
    return LangChainOpenAIExaminee(argument or "", **options_kwargs(options))


BACKEND = Backend("langchain-openai", _make, argument="model",
                  summary="the same endpoint through langchain-openai's ChatOpenAI (slower; for langchain callbacks)")
