"""Requests-per-minute and tokens-per-minute limits, one budget however many processes share it.

The budget itself is :class:`Buckets`: two GCRA token buckets (requests and
tokens) that hand out *reservations*: ``reserve(tokens)`` books one request and
``tokens`` tokens and returns how many seconds the caller must wait before
sending it. Because a reservation is a pure computation on the server's own
clock, the same object can be called in this process, through a
:mod:`multiprocessing` manager (local shards) or as a Ray actor (cluster
shards, :mod:`ecgtrace.commands._exam_shards`): callers never compare clocks.

A request's token count is not known until the server answers, so the caller
books an estimate (:func:`estimate_tokens`) and settles the difference with
the server's ``usage`` afterwards (:meth:`RateLimiter.settle`), so the budget
converges on what the server counts.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

#: How far ahead of the steady rate a burst may run (seconds of budget): a fresh limiter
#: sends about ``limit / 60 * BURST_S`` at once, never a whole minute's worth.
BURST_S = 1.0
#: Tokens booked for one image part before the server counts it (providers charge ~85-1500).
IMAGE_TOKENS = 800


class TokenBucket:
    """GCRA bucket of ``per_minute`` units; :meth:`reserve` returns the wait in seconds (never refuses)."""

    def __init__(self, per_minute: float, burst_s: float = BURST_S) -> None:
        if per_minute <= 0:
            raise ValueError(f"a rate limit must be positive, got {per_minute:g}")
        self.interval_s = 60.0 / float(per_minute)
        self.burst_s = float(burst_s)
        self.tat = 0.0  # theoretical arrival time of the next unit (monotonic seconds)

    def reserve(self, units: float, now_s: float) -> float:
        start = max(self.tat, now_s)
        self.tat = start + max(0.0, units) * self.interval_s
        return max(0.0, start - now_s - self.burst_s)

    def adjust(self, units: float) -> None:
        """Give back (negative) or take more (positive) units once the true cost is known."""
        self.tat += units * self.interval_s


class Buckets:
    """The shared budget: requests per minute and tokens per minute (either may be None: unlimited)."""

    def __init__(self, max_rpm: float | None, max_tpm: float | None) -> None:
        self.max_rpm, self.max_tpm = max_rpm, max_tpm
        self._requests = TokenBucket(max_rpm) if max_rpm else None
        self._tokens = TokenBucket(max_tpm) if max_tpm else None
        self._lock = threading.Lock()  # a manager serves calls from several threads

    def reserve(self, tokens: float) -> float:
        now = time.monotonic()
        with self._lock:
            waits = [b.reserve(units, now) for b, units in ((self._requests, 1), (self._tokens, tokens)) if b is not None]
        return max(waits, default=0.0)

    def adjust(self, tokens: float) -> None:
        if self._tokens is not None and tokens:
            with self._lock:
                self._tokens.adjust(tokens)


def estimate_tokens(messages: list[dict[str, Any]], max_tokens: int | None = None) -> int:
    """Tokens a request will be charged, before the server says: text chars / 4, images a flat
    :data:`IMAGE_TOKENS`, plus the answer cap (``max_tokens``, else 256)."""
    chars, images = 0, 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and part.get("type") == "text":
                    chars += len(part.get("text") or "")
                elif isinstance(part, dict):
                    images += 1
        elif content is not None:
            chars += len(json.dumps(content))
    return chars // 4 + images * IMAGE_TOKENS + int(max_tokens or 256)


class RateLimiter:
    """What an examinee awaits before each request.

    ``server`` is where the budget lives: a :class:`Buckets` in this process
    (default), or a proxy with the same ``reserve``/``adjust`` methods, called
    through ``call(method_name, *args) -> awaitable`` (a manager proxy or a Ray
    actor: see :func:`ecgtrace.commands._exam_shards.shard_limiter`).
    """

    def __init__(self, max_rpm: float | None = None, max_tpm: float | None = None, *, server: Any = None,
                 call: Callable[..., Awaitable[Any]] | None = None) -> None:
        self.max_rpm, self.max_tpm = max_rpm, max_tpm
        self.server = server if server is not None else Buckets(max_rpm, max_tpm)
        self._call = call

    async def _invoke(self, method: str, *args: Any) -> Any:
        if self._call is not None:
            return await self._call(self.server, method, *args)
        return getattr(self.server, method)(*args)

    async def acquire(self, tokens: int) -> float:
        """Book one request of about ``tokens`` tokens; sleeps until it may go. Returns the seconds waited."""
        wait_s = float(await self._invoke("reserve", tokens))
        if wait_s > 0:
            await asyncio.sleep(wait_s)
        return wait_s

    async def settle(self, booked: int, usage: dict[str, Any] | None) -> None:
        """Correct the booking with the server's ``usage`` (total tokens), when it sent one."""
        total = (usage or {}).get("total_tokens")
        if self.max_tpm and isinstance(total, int | float):
            await self._invoke("adjust", float(total) - booked)


def make_limiter(max_rpm: float | None, max_tpm: float | None) -> RateLimiter | None:
    """A limiter for the given limits, or None when neither is set."""
    return RateLimiter(max_rpm, max_tpm) if (max_rpm or max_tpm) else None
