"""``openai:<model>``: any OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama, LM Studio) through the ``openai`` SDK.

The request goes through the SDK's async client (``AsyncOpenAI``, over its
aiohttp transport where aiohttp is installed, the SDK's own retries off) and
the answer's JSON is read as it came, so nothing a server sends is dropped:
``reasoning_content`` (vLLM, DeepSeek) or ``reasoning``, ``usage``, the
response id and finish reason. The body is the one ``ChatOpenAI`` sends
(``max_completion_tokens``, plus ``max_tokens``, which Ollama and llama.cpp
read). This costs about a quarter of ChatOpenAI's CPU per call
(``benchmarks/audit.py``); ChatOpenAI itself stays available as
``langchain-openai:<model>`` (:mod:`ecgtrace.agents.exam.examinees.langchain_chat`).
``--max-rpm``/``--max-tpm`` are booked before every try
(:mod:`ecgtrace.agents.exam.rate_limit`).

Retries with exponential backoff and jitter (tenacity) on 429, 408, 409, 5xx,
timeouts and connection errors; a server's ``Retry-After`` (or
``retry-after-ms``) is honoured, capped at :data:`MAX_RETRY_AFTER_S`; a failure
after the last try is a recorded :class:`Reply` error, never a crash;
401/403/404 are a :class:`ModelError` (wrong model, URL or key). The API key is
read from the environment only, and every error text is passed through
:func:`ecgtrace.redact.redact` first (servers echo keys back in 401s and 500s).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import os
import time
from typing import Any

from ecgtrace.agents.exam.examinees.base import Backend, Examinee, ExamineeOptions, Reply
from ecgtrace.agents.exam.rate_limit import RateLimit, estimate_tokens, make_limiter
from ecgtrace.errors import ModelError
from ecgtrace.redact import redact, register_secret

_FATAL_STATUS = (401, 403, 404)
#: A server's Retry-After is followed up to this many seconds (a longer wait is shortened to it).
MAX_RETRY_AFTER_S = 60.0


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
    """``RateLimitError 429: message``, naming the openai SDK class (langchain wraps them); credentials redacted."""
    name = next((k.__name__ for k in type(exc).__mro__ if k.__module__.startswith(("openai", "httpx"))), type(exc).__name__)
    status = getattr(exc, "status_code", None)
    text = redact(str(exc)).splitlines()[0] if str(exc) else ""
    return f"{name}{f' {status}' if status else ''}: {text[:200]}"


def retry_after_s(exc: BaseException | None) -> float | None:
    """The wait a server asked for in its ``retry-after-ms`` or ``Retry-After`` header (seconds or an HTTP date), capped."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    wait: float | None = None
    try:
        if headers.get("retry-after-ms"):
            wait = float(headers["retry-after-ms"]) / 1000.0
        elif headers.get("retry-after"):
            value = headers["retry-after"].strip()
            try:
                wait = float(value)
            except ValueError:
                when = email.utils.parsedate_to_datetime(value)
                wait = when.timestamp() - time.time()
    except (TypeError, ValueError, OverflowError):
        return None
    if wait is None or not math.isfinite(wait):
        return None
    return min(max(wait, 0.0), MAX_RETRY_AFTER_S)


class _WaitRetryAfter:
    """tenacity wait: the server's Retry-After when it sent one, else ``fallback`` (exponential backoff with jitter)."""

    def __init__(self, fallback: Any) -> None:
        self.fallback = fallback

    def __call__(self, retry_state: Any) -> float:
        outcome = retry_state.outcome
        asked = retry_after_s(outcome.exception() if outcome is not None and outcome.failed else None)
        return asked if asked is not None else self.fallback(retry_state)


def text_parts_joined(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with each all-text content list sent as one string (:func:`text_only_as_string`).

    OpenAI's API takes either form, but some compatible servers (llama-cpp-python's
    chat templates, among them SmolLM2's) answer HTTP 500 to a list of text parts,
    and datasets store QA messages as parts.
    """
    from ecgtrace.agents.exam.messages import text_only_as_string  # here: `ecgtrace --help` must not load numpy

    return [{**m, "content": text_only_as_string(m["content"])} if isinstance(m.get("content"), list) else m for m in messages]


def reply_from_completion(data: dict[str, Any], latency_ms: float, attempts: int = 1) -> Reply:
    """A chat.completion JSON object as a :class:`Reply`: text, reasoning, the server's usage and ids.

    Reads what :func:`~ecgtrace.agents.exam.examinees.chat_model.reply_from_message` reads from a
    ChatOpenAI message, from the JSON directly (null content is ``""``, as ChatOpenAI makes it).
    """
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError(f"the server's answer holds no choices: {redact(json.dumps(data)[:200])}")
    choice = choices[0]
    message = choice.get("message") or {}
    content = message.get("content") or ""
    if isinstance(content, list):  # content blocks -> their text
        content = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return Reply(raw=str(content), reasoning=message.get("reasoning_content") or message.get("reasoning") or None, usage=data.get("usage"),
                 latency_ms=round(latency_ms, 3), attempts=attempts,
                 meta={"id": data.get("id"), "model": data.get("model"), "finish_reason": choice.get("finish_reason")})


def _response_class() -> type:
    """The HTTP response class the SDK hands back unparsed (httpx2 in openai>=3, httpx before)."""
    try:
        import httpx2
    except ImportError:  # openai < 3
        import httpx as httpx2
    return httpx2.Response


def _http_client(timeout_s: float) -> Any:
    """The SDK's aiohttp transport (a third of its httpx CPU per request) where aiohttp is installed, else its httpx client."""
    import openai

    try:
        return openai.DefaultAioHttpClient(timeout=timeout_s)
    except (RuntimeError, AttributeError):  # openai without the aiohttp extra
        return openai.DefaultAsyncHttpxClient(timeout=timeout_s)


async def _close_with_loop(client: Any):  # noqa: ANN202 - an async generator
    """Closes ``client`` when its event loop shuts down (``asyncio.run`` finalises live async generators)."""
    try:
        yield
    finally:
        await client.close()


class OpenAIExaminee(Examinee):
    """An OpenAI-compatible chat endpoint through the ``openai`` SDK's async client.

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
        max_tokens: sent both as ``max_completion_tokens`` and ``max_tokens``,
            which Ollama and llama.cpp read.
        temperature: sampling temperature; None (default) sends none, so the
            server's default applies (reasoning models reject anything but 1).
            Pass 0 for reproducible audits on models that accept it.
        max_rpm, max_tpm: requests / tokens per minute (None: unlimited), booked
            before every try in :attr:`limiter`, which a sharded run may replace
            with one shared by every shard.
    """

    #: What ``--model`` starts with for this backend.
    prefix = "openai"

    def __init__(self, model: str, *, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 timeout_s: float = 120.0, concurrency: int = 8, max_attempts: int = 4, backoff_s: float = 1.0,
                 max_tokens: int | None = None, temperature: float | None = None,
                 max_rpm: float | None = None, max_tpm: float | None = None) -> None:
        if not model:
            raise ModelError(f"{self.prefix}:<model> needs a model name, e.g. {self.prefix}:gpt-4o")
        if not os.environ.get(api_key_env) and base_url is None:
            raise ModelError(f"environment variable {api_key_env} is not set (it must hold the API key)")
        if not (math.isfinite(float(timeout_s)) and float(timeout_s) > 0):
            raise ModelError(f"the request timeout must be a positive number of seconds, got {timeout_s!r}")
        if not (math.isfinite(float(backoff_s)) and float(backoff_s) >= 0):
            raise ModelError(f"the retry backoff must be a number of seconds >= 0, got {backoff_s!r}")
        register_secret(os.environ.get(api_key_env))  # whatever a server echoes of it is masked before it is shown or stored
        self.name = f"{self.prefix}:{model}"
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.concurrency = max(1, int(concurrency))
        self.max_attempts = max(1, int(max_attempts))
        self.backoff_s = float(backoff_s)
        self.timeout_s = float(timeout_s)
        self.max_tokens = int(max_tokens) if max_tokens else None
        self.temperature = temperature
        self.limiter: RateLimit | None = make_limiter(max_rpm, max_tpm)
        self._forget_loop()

    # ------------------------------------------------------------ per event loop
    def _forget_loop(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._semaphore: asyncio.Semaphore | None = None
        self._closer: Any = None

    def __getstate__(self) -> dict[str, Any]:
        """Picklable for shard workers: the client and semaphore belong to this process's loop."""
        return {**self.__dict__, "_loop": None, "_client": None, "_semaphore": None, "_closer": None}

    def _open_client(self) -> Any:
        """The SDK client of this loop, SDK retries off. The key is read from the environment here and kept only by the client."""
        import openai

        return openai.AsyncOpenAI(api_key=os.environ.get(self.api_key_env) or "not-needed", base_url=self.base_url,
                                  timeout=self.timeout_s, max_retries=0, http_client=_http_client(self.timeout_s))

    async def _bind(self) -> tuple[Any, asyncio.Semaphore]:
        """The client and semaphore of the running event loop, built once per loop and closed with it.

        A client cannot outlive its loop (its connections belong to it): a
        second ``asyncio.run`` gets a new one.
        """
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._client is None:
            self._client = self._open_client()
            self._semaphore = asyncio.Semaphore(self.concurrency)
            self._loop = loop
            closer = _close_with_loop(self._client) if callable(getattr(self._client, "close", None)) else None
            if closer is not None:
                await closer.__anext__()
            self._closer = closer
        return self._client, self._semaphore

    async def aclose(self) -> None:
        """Close this loop's client now; the next request opens a new one."""
        if self._closer is not None and self._loop is asyncio.get_running_loop():
            await self._closer.aclose()
        self._forget_loop()

    # ------------------------------------------------------------ one request
    def request_body(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The JSON body sent: what ChatOpenAI sends for the same settings."""
        body: dict[str, Any] = {"messages": messages, "model": self.model, "stream": False}
        if self.max_tokens:
            body["max_completion_tokens"] = self.max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.max_tokens:
            body["max_tokens"] = self.max_tokens  # what Ollama and llama.cpp read
        return body

    async def _send(self, client: Any, messages: list[dict[str, Any]]) -> Reply:
        """One HTTP request (the SDK raises its own error classes on a non-2xx status); latency in ms."""
        started = time.perf_counter()
        response = await client.post("/chat/completions", cast_to=_response_class(), body=self.request_body(messages))
        return reply_from_completion(json.loads(response.content), (time.perf_counter() - started) * 1000)

    async def _call(self, messages: list[dict[str, Any]]) -> Reply:
        """One try: the rate budget, a slot, the request (its latency counts neither wait)."""
        client, semaphore = await self._bind()
        limiter = self.limiter
        booked = estimate_tokens(messages, self.max_tokens) if limiter is not None else 0
        if limiter is not None:
            await limiter.acquire(booked)
        async with semaphore:
            reply = await self._send(client, messages)
        if limiter is not None:
            await limiter.settle(booked, reply.usage)
        return reply

    def preflight(self) -> str:
        """``GET /models`` and, where that does not settle it, one one-token request (see :mod:`ecgtrace.agents.exam.preflight`)."""
        from ecgtrace.agents.exam.preflight import check_openai_endpoint

        return check_openai_endpoint(self.model, base_url=self.base_url, api_key_env=self.api_key_env, timeout_s=self.timeout_s,
                                     max_attempts=self.max_attempts, backoff_s=self.backoff_s)

    async def answer(self, messages: list[dict[str, Any]], turn: dict[str, Any]) -> Reply:
        import openai
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

        started = time.perf_counter()
        attempts = 0
        sent = text_parts_joined(messages)
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(self.max_attempts),
                wait=_WaitRetryAfter(wait_exponential_jitter(multiplier=self.backoff_s, max=30.0, jitter=self.backoff_s)),
                retry=retry_if_exception(_is_transient),
                reraise=True,
            ):
                with attempt:
                    attempts += 1
                    reply = await self._call(sent)
        except openai.APIStatusError as exc:
            if exc.status_code in _FATAL_STATUS:
                raise ModelError(f"the server refused model {self.model!r} ({_describe(exc)}); check --model, --base-url and the API key variable") from None
            return Reply(raw=None, error=f"{_describe(exc)} after {attempts} attempt(s)", attempts=attempts,
                         latency_ms=round((time.perf_counter() - started) * 1000, 3))
        except Exception as exc:  # noqa: BLE001 - any server failure is recorded, never crashes the run
            return Reply(raw=None, error=f"{_describe(exc)} after {attempts} attempt(s)", attempts=attempts,
                         latency_ms=round((time.perf_counter() - started) * 1000, 3))
        reply.attempts = attempts
        return reply

    async def context_tokens(self) -> int | None:
        """The context length the server reports for this model, or None (api.openai.com and many servers report none).

        Read from ``GET {base_url}/models`` (vLLM's ``max_model_len``; the
        ``context_length`` / ``max_context_length`` of LM Studio and routers)
        and llama.cpp's ``GET /props`` (``n_ctx`` of the running server, which
        wins over the ``n_ctx_train`` its model list gives). Any failure is None.
        """
        if not self.base_url:
            return None
        import httpx

        headers = {"Authorization": f"Bearer {os.environ.get(self.api_key_env) or 'not-needed'}"}
        base = self.base_url.rstrip("/")
        found: dict[str, int] = {}
        async with httpx.AsyncClient(timeout=min(self.timeout_s, 10.0), headers=headers) as client:
            for url in (f"{base}/models", f"{base[:-3] if base.endswith('/v1') else base}/props"):
                try:
                    response = await client.get(url)
                    data = response.json() if response.status_code == 200 else None
                except (httpx.HTTPError, ValueError):
                    continue
                found.update(_reported_context(data, self.model))
        for key in ("max_model_len", "n_ctx", "context_length", "max_context_length", "context_window", "n_ctx_train"):
            if found.get(key):
                return found[key]
        return None


def _reported_context(data: Any, model: str) -> dict[str, int]:
    """Context-length fields of a ``/models`` or ``/props`` answer, for ``model`` (or the only model listed)."""
    if not isinstance(data, dict):
        return {}
    entries = data.get("data") if isinstance(data.get("data"), list) else None
    if entries is not None:
        entry = next((e for e in entries if isinstance(e, dict) and e.get("id") == model), entries[0] if len(entries) == 1 else None)
        data = entry if isinstance(entry, dict) else {}
    out: dict[str, int] = {}
    settings = data.get("default_generation_settings")
    for source in (data, data.get("meta"), settings, (settings or {}).get("params") if isinstance(settings, dict) else None):
        if not isinstance(source, dict):
            continue
        for key in ("max_model_len", "n_ctx", "context_length", "max_context_length", "context_window", "n_ctx_train"):
            value = source.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                out.setdefault(key, value)
    return out


def options_kwargs(options: ExamineeOptions) -> dict[str, Any]:
    """The keyword arguments an OpenAI-compatible examinee takes from ``--model``'s options."""
    return dict(base_url=options.base_url, api_key_env=options.api_key_env, timeout_s=options.timeout_s,
                concurrency=options.concurrency, max_attempts=options.max_attempts, backoff_s=options.backoff_s,
                max_tokens=options.max_tokens, temperature=options.temperature, max_rpm=options.max_rpm, max_tpm=options.max_tpm)


def _make(argument: str | None, options: ExamineeOptions) -> Examinee:
    return OpenAIExaminee(argument or "", **options_kwargs(options))


BACKEND = Backend("openai", _make, argument="model", summary="an OpenAI-compatible chat endpoint (--base-url, --api-key-env)")
