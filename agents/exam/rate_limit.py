"""Requests-per-minute and tokens-per-minute limits (``--max-rpm``, ``--max-tpm``): one token bucket per limit.

What an examinee awaits before each request is a :class:`RateLimit`, a small
protocol: ``await acquire(tokens)`` books one request of about ``tokens``
tokens and returns once it may go; ``await settle(booked, usage)`` corrects the
booking with what the server counted. :class:`RateLimiter` is the in-process
one. A limit shared by several processes (shards, Ray workers) implements the
same two methods on top of :class:`Buckets`, whose :meth:`Buckets.reserve` is a
pure computation on the clock of wherever the buckets live (a manager process,
a Ray actor), so callers never compare clocks.

The buckets are GCRA (generic cell rate algorithm) buckets: each unit moves a
"theoretical arrival time" on by ``60 / per_minute`` seconds, a request waits
until that time is less than :data:`BURST_S` ahead of now. A request's token
count is not known until the server answers, so an estimate is booked
(:func:`estimate_tokens`) and the difference settled afterwards, which makes
the budget converge on what the server counts.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

#: Seconds of budget a fresh bucket may spend at once: about ``limit / 60 * BURST_S`` requests go without waiting.
BURST_S = 1.0
#: Answer tokens booked when ``--max-tokens`` is not set.
DEFAULT_ANSWER_TOKENS = 256


class RateLimit(Protocol):
    """What an examinee needs of a rate limit, wherever its budget lives."""

    async def acquire(self, tokens: int) -> float:
        """Book one request of about ``tokens`` tokens; return (after waiting) the seconds waited."""
        ...

    async def settle(self, booked: int, usage: dict[str, Any] | None) -> None:
        """Correct a booking of ``booked`` tokens with the server's ``usage`` (its ``total_tokens``)."""
        ...


class TokenBucket:
    """GCRA bucket of ``per_minute`` units; :meth:`reserve` books units and says how long to wait (it never refuses)."""

    def __init__(self, per_minute: float, burst_s: float = BURST_S) -> None:
        if not per_minute > 0:
            raise ValueError(f"a rate limit must be positive, got {per_minute!r}")
        self.interval_s = 60.0 / float(per_minute)
        self.burst_s = float(burst_s)
        self.tat_s: float | None = None  # theoretical arrival time of the next unit, on the caller's clock

    def reserve(self, units: float, now_s: float) -> float:
        """Book ``units`` at ``now_s``; the seconds to wait before using them."""
        start = now_s if self.tat_s is None else max(self.tat_s, now_s)
        self.tat_s = start + max(0.0, float(units)) * self.interval_s
        return max(0.0, start - now_s - self.burst_s)

    def adjust(self, units: float) -> None:
        """Take more units (positive) or give some back (negative) once the true cost is known."""
        if self.tat_s is not None:
            self.tat_s += float(units) * self.interval_s


class Buckets:
    """The budget itself: a request bucket and a token bucket (either may be None: unlimited). Thread-safe."""

    def __init__(self, max_rpm: float | None = None, max_tpm: float | None = None) -> None:
        self.requests = TokenBucket(max_rpm) if max_rpm else None
        self.tokens = TokenBucket(max_tpm) if max_tpm else None
        self._lock = threading.Lock()  # a manager or actor may serve callers from several threads

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (a shard worker gets a copy; a shared budget lives in one place instead): the lock is not sent."""
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def reserve(self, tokens: float, now_s: float) -> float:
        """Book one request of ``tokens`` tokens at ``now_s``; the seconds to wait (the longer of the two buckets')."""
        with self._lock:
            waits = [bucket.reserve(units, now_s) for bucket, units in ((self.requests, 1), (self.tokens, tokens)) if bucket is not None]
        return max(waits, default=0.0)

    def adjust(self, tokens: float) -> None:
        """Correct the token bucket by ``tokens`` (counted minus booked)."""
        if self.tokens is not None and tokens:
            with self._lock:
                self.tokens.adjust(tokens)


class RateLimiter:
    """The in-process :class:`RateLimit`: :class:`Buckets` on ``clock``, waits with ``sleep`` (both swappable in tests).

    Args:
        max_rpm: requests per minute (None: unlimited).
        max_tpm: tokens per minute, prompt plus answer as the server counts them (None: unlimited).
        clock: monotonic seconds.
        sleep: ``await sleep(seconds)``.
    """

    def __init__(self, max_rpm: float | None = None, max_tpm: float | None = None, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> None:
        self.max_rpm, self.max_tpm = max_rpm, max_tpm
        self.buckets = Buckets(max_rpm, max_tpm)
        self.clock, self.sleep = clock, sleep

    async def acquire(self, tokens: int) -> float:
        wait_s = self.buckets.reserve(tokens, self.clock())
        if wait_s > 0:
            await self.sleep(wait_s)
        return wait_s

    async def settle(self, booked: int, usage: dict[str, Any] | None) -> None:
        correction = token_correction(booked, usage, self.max_tpm)
        if correction is not None:
            self.buckets.adjust(correction)


def token_correction(booked: int, usage: dict[str, Any] | None, max_tpm: float | None) -> float | None:
    """Tokens to give back (negative) or take (positive) once the server's ``usage`` is known; None: nothing to settle.

    Only a token budget is settled, and only against a real ``total_tokens`` count (not a bool, not missing).
    """
    total = (usage or {}).get("total_tokens")
    if max_tpm and isinstance(total, int | float) and not isinstance(total, bool):
        return float(total) - booked
    return None


def make_limiter(max_rpm: float | None, max_tpm: float | None) -> RateLimiter | None:
    """The in-process limiter for these limits, or None when neither is set."""
    for name, value in (("--max-rpm", max_rpm), ("--max-tpm", max_tpm)):
        if value is not None and not value > 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    return RateLimiter(max_rpm, max_tpm) if (max_rpm or max_tpm) else None


def estimate_tokens(messages: list[dict[str, Any]], max_tokens: int | None = None) -> int:
    """Tokens a request is booked for before the server counts them: its prompt as
    :func:`ecgtrace.agents.exam.budget.estimate_request_tokens` estimates it, plus the
    answer cap (``max_tokens``, else :data:`DEFAULT_ANSWER_TOKENS`)."""
    from ecgtrace.agents.exam.budget import estimate_request_tokens

    return estimate_request_tokens(messages) + int(max_tokens or DEFAULT_ANSWER_TOKENS)
