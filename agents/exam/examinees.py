"""Models under test, behind one async interface.

``await examinee.answer(messages, turn) -> Reply``, where ``messages`` are
OpenAI chat messages (the ECG attached to the first user message) and ``turn``
is the examiner's turn spec (see :mod:`ecgtrace.agents.audit.examiner`).

Specs accepted by :func:`make_examinee`:

* ``openai:<model>`` - any OpenAI-compatible chat endpoint through
  langchain-openai ``ChatOpenAI`` (OpenAI, vLLM, Ollama, LM Studio).
* ``oracle`` - answers the ground truth (must score 100% on every metric).
* ``random`` - uniform over the options; multi-select: a uniform non-empty
  subset. Seeded per (seed, sample id, turn index), so a resumed run draws the
  same answers as an uninterrupted one.
* ``prior`` - a shortcut probe that never sees the ECG nor the conversation:
  it reads only the option texts of the question and always picks the
  **longest option text** (the first one among ties). For Yes/No that is
  "Yes"; for decisions "Further findings are required…"; for multi-select the
  single longest option.
* ``human`` - you type answers at the terminal; the graph asks through a
  LangGraph ``interrupt()`` in a node of its own (``interactive = True``).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import random
import time
from dataclasses import asdict, dataclass
from typing import Any

from ecgtrace.errors import ModelError

BUILTINS = ("oracle", "random", "prior", "human")


@dataclass
class Reply:
    """What came back for one turn; ``raw`` is None when ``error`` is set."""

    raw: str | None
    reasoning: str | None = None
    usage: dict[str, Any] | None = None
    latency_ms: float = 0.0
    error: str | None = None
    attempts: int = 1
    meta: dict[str, Any] | None = None  # server response id, model, finish_reason

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Examinee:
    """Base class. ``interactive`` examinees are answered through an interrupt."""

    name: str = "examinee"
    interactive: bool = False

    async def answer(self, messages: list[dict[str, Any]], turn: dict[str, Any]) -> Reply:
        raise NotImplementedError


def _as_text(turn: dict[str, Any], choice: str | list[str]) -> str:
    return ", ".join(choice) if isinstance(choice, list) else choice


#: What the baselines say to an open question: they have no options to pick from, and
#: an honest "cannot tell" scores the floor of each open metric (not an error).
NO_OPTIONS_ANSWER = "I cannot tell."


class OracleExaminee(Examinee):
    """Answers the ground truth, as option text (never ambiguous to the parser)."""

    name = "oracle"

    async def answer(self, messages: list[dict[str, Any]], turn: dict[str, Any]) -> Reply:
        return Reply(raw=_as_text(turn, turn["answer"]))


class RandomExaminee(Examinee):
    """Uniform over options (multi-select: uniform over non-empty subsets), seeded per turn.

    Open questions (no options) get :data:`NO_OPTIONS_ANSWER`.
    """

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)

    def _rng(self, turn: dict[str, Any]) -> random.Random:
        key = f"{self.seed}:{turn.get('sample_id')}:{turn['index']}".encode()
        return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))

    async def answer(self, messages: list[dict[str, Any]], turn: dict[str, Any]) -> Reply:
        rng = self._rng(turn)
        options = turn.get("options") or []
        if not options:
            return Reply(raw=NO_OPTIONS_ANSWER)
        if turn["multi"]:
            mask = rng.randrange(1, 2 ** len(options))  # uniform over the 2^n - 1 non-empty subsets
            return Reply(raw=", ".join(o for i, o in enumerate(options) if mask >> i & 1))
        return Reply(raw=rng.choice(options))


class PriorExaminee(Examinee):
    """Sees the option texts only; always the longest option (first among ties).

    Open questions (no options) get :data:`NO_OPTIONS_ANSWER`.
    """

    name = "prior"

    async def answer(self, messages: list[dict[str, Any]], turn: dict[str, Any]) -> Reply:
        options = turn.get("options") or []
        if not options:
            return Reply(raw=NO_OPTIONS_ANSWER)
        return Reply(raw=max(options, key=len))  # max keeps the first of equal lengths


class HumanExaminee(Examinee):
    """Answered at the terminal: the graph routes its turns to an interrupt node."""

    name = "human"
    interactive = True

    async def answer(self, messages: list[dict[str, Any]], turn: dict[str, Any]) -> Reply:
        raise RuntimeError("human answers come through the graph's interrupt, not answer()")


# ------------------------------------------------------------ OpenAI-compatible

_FATAL_STATUS = (401, 403, 404)


@functools.lru_cache(maxsize=1)
def _reasoning_chat_class():
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


def _is_transient(exc: BaseException) -> bool:
    """429, 408, 409, 5xx, timeouts and connection errors are worth another try."""
    import openai

    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError | openai.RateLimitError | openai.InternalServerError):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    if isinstance(exc, asyncio.TimeoutError):
        return True
    # raw transport errors of httpx / httpx2 (openai>=3), should one escape the SDK
    names = {k.__name__ for k in type(exc).__mro__}
    return type(exc).__module__.startswith("httpx") and bool(names & {"TimeoutException", "TransportError"})


def _describe(exc: BaseException) -> str:
    """``RateLimitError 429: message``, naming the openai SDK class (langchain wraps them)."""
    name = next((k.__name__ for k in type(exc).__mro__ if k.__module__.startswith(("openai", "httpx"))), type(exc).__name__)
    status = getattr(exc, "status_code", None)
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{name}{f' {status}' if status else ''}: {text[:200]}"


class OpenAIExaminee(Examinee):
    """An OpenAI-compatible chat endpoint through ``ChatOpenAI``.

    Args:
        model: model name the server knows.
        base_url: endpoint (``http://127.0.0.1:8000/v1``); None for api.openai.com.
        api_key_env: name of the environment variable holding the key. The key is
            read from the environment only (when the client is built) and is never
            written anywhere. When the variable is unset and ``base_url`` is given
            (local servers), a placeholder key is sent.
        timeout_s: per-request timeout (s).
        concurrency: at most this many requests in flight (asyncio.Semaphore).
        max_attempts: tries per turn (tenacity, exponential backoff with jitter on
            429, 408, 5xx, timeouts, connection errors). The SDK's own retries are off.
        backoff_s: first backoff (s); doubles per retry, capped at 30 s.
        max_tokens: sent both as ``max_completion_tokens`` and (``extra_body``)
            ``max_tokens``, which Ollama and llama.cpp read.
        temperature: sampling temperature; None (default) sends none, so the
            server's default applies (reasoning models reject anything but 1).
            Pass 0 for reproducible audits on models that accept it.
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 timeout_s: float = 120.0, concurrency: int = 8, max_attempts: int = 4, backoff_s: float = 1.0,
                 max_tokens: int | None = None, temperature: float | None = None) -> None:
        if not model:
            raise ModelError("openai:<model> needs a model name, e.g. openai:gpt-4o")
        if not os.environ.get(api_key_env) and base_url is None:
            raise ModelError(f"environment variable {api_key_env} is not set (it must hold the API key)")
        self.name = f"openai:{model}"
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.concurrency = max(1, int(concurrency))
        self.max_attempts = max(1, int(max_attempts))
        self.backoff_s = float(backoff_s)
        self.timeout_s = float(timeout_s)
        self.max_tokens = int(max_tokens) if max_tokens else None
        self.temperature = temperature
        self._loop: asyncio.AbstractEventLoop | None = None
        self._llm: Any = None
        self._semaphore: asyncio.Semaphore | None = None

    def _bind(self) -> tuple[Any, asyncio.Semaphore]:
        """The model and semaphore of the running event loop.

        Built once per loop with its own HTTP client: langchain-openai caches a
        default async client per (base_url, timeout) across loops, which fails
        with "Event loop is closed" when a second ``asyncio.run`` reuses it.
        The key is read from the environment here and kept only by the client.
        """
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._llm is None:
            import openai

            kwargs: dict[str, Any] = dict(
                model=self.model, base_url=self.base_url, api_key=os.environ.get(self.api_key_env) or "not-needed",
                timeout=self.timeout_s, max_retries=0, use_responses_api=False,
                http_async_client=openai.DefaultAsyncHttpxClient(timeout=self.timeout_s))
            if self.temperature is not None:
                kwargs["temperature"] = self.temperature
            if self.max_tokens:
                kwargs["max_tokens"] = self.max_tokens
                kwargs["extra_body"] = {"max_tokens": self.max_tokens}
            self._llm = _reasoning_chat_class()(**kwargs)
            self._semaphore = asyncio.Semaphore(self.concurrency)
            self._loop = loop
        return self._llm, self._semaphore

    async def _call(self, messages: list[dict[str, Any]]):  # noqa: ANN202
        """One request; returns (message, ms spent on it, not counting the wait for a slot)."""
        llm, semaphore = self._bind()
        async with semaphore:
            started = time.perf_counter()
            message = await llm.ainvoke(messages)
            return message, (time.perf_counter() - started) * 1000

    async def answer(self, messages: list[dict[str, Any]], turn: dict[str, Any]) -> Reply:
        import openai
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

        started = time.perf_counter()
        attempts = 0
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(self.max_attempts),
                wait=wait_exponential_jitter(multiplier=self.backoff_s, max=30.0, jitter=self.backoff_s),
                retry=retry_if_exception(_is_transient),
                reraise=True,
            ):
                with attempt:
                    attempts += 1
                    message, latency_ms = await self._call(messages)
        except openai.APIStatusError as exc:
            if exc.status_code in _FATAL_STATUS:
                raise ModelError(f"the server refused model {self.model!r} ({_describe(exc)}); check --model, --base-url and the API key variable") from None
            return Reply(raw=None, error=f"{_describe(exc)} after {attempts} attempt(s)", attempts=attempts,
                         latency_ms=round((time.perf_counter() - started) * 1000, 3))
        except Exception as exc:  # noqa: BLE001 - any server failure is recorded, never crashes the run
            return Reply(raw=None, error=f"{_describe(exc)} after {attempts} attempt(s)", attempts=attempts,
                         latency_ms=round((time.perf_counter() - started) * 1000, 3))
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


def make_examinee(spec: str, *, seed: int = 0, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                  timeout_s: float = 120.0, concurrency: int = 8, max_attempts: int = 4, backoff_s: float = 1.0,
                  max_tokens: int | None = None, temperature: float | None = None) -> Examinee:
    """Build an examinee from ``--model``: ``openai:<model>``, ``oracle``, ``random``, ``prior``, ``human``."""
    if spec == "oracle":
        return OracleExaminee()
    if spec == "random":
        return RandomExaminee(seed)
    if spec == "prior":
        return PriorExaminee()
    if spec == "human":
        return HumanExaminee()
    if spec.startswith("openai:"):
        return OpenAIExaminee(spec.split(":", 1)[1], base_url=base_url, api_key_env=api_key_env, timeout_s=timeout_s,
                              concurrency=concurrency, max_attempts=max_attempts, backoff_s=backoff_s, max_tokens=max_tokens,
                              temperature=temperature)
    raise ModelError(f"unknown model {spec!r}: use openai:<model> or one of {', '.join(BUILTINS)}")
