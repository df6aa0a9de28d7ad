"""--max-rpm / --max-tpm: the GCRA token bucket on a fake clock (no timed test), its use by the examinee, the CLI flags."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ecgtrace.agents.exam.budget import estimate_request_tokens  # noqa: E402
from ecgtrace.agents.exam.examinees import LangChainOpenAIExaminee, OpenAIExaminee, make_examinee  # noqa: E402
from ecgtrace.agents.exam.rate_limit import DEFAULT_ANSWER_TOKENS, Buckets, RateLimiter, TokenBucket, estimate_tokens, make_limiter  # noqa: E402
from ecgtrace.cli import main  # noqa: E402
from tests.support.audit_items import write_audit  # noqa: E402
from tests.support.mock_openai import MockOpenAI, audit_oracle  # noqa: E402

MESSAGES = [{"role": "user", "content": "x" * 400}]


class FakeClock:
    """Monotonic seconds that move only when the limiter sleeps."""

    def __init__(self) -> None:
        self.now_s = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now_s

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now_s += seconds


def test_requests_per_minute_allow_the_rate_plus_a_one_second_burst():
    clock = FakeClock()
    limiter = RateLimiter(max_rpm=60, clock=clock, sleep=clock.sleep)  # one request a second
    sent_at = []
    for _ in range(150):
        asyncio.run(limiter.acquire(10))
        sent_at.append(clock.now_s)
    # request k may go at max(0, k - 1) s: the first two at once (1 s of burst), then one a second
    assert sent_at == [float(max(0, k - 1)) for k in range(150)]
    assert sum(t < 60 for t in sent_at) == 61  # 60 a minute, plus the burst


def test_tokens_per_minute_book_the_estimate_and_settle_with_the_servers_count():
    clock = FakeClock()
    limiter = RateLimiter(max_tpm=6000, clock=clock, sleep=clock.sleep)  # 100 tokens a second
    assert asyncio.run(limiter.acquire(500)) == 0.0  # the first request goes at once, 5 s of budget in debt
    assert asyncio.run(limiter.acquire(500)) == pytest.approx(4.0)  # starts at 5 s, less the 1 s burst
    # the server counted 300 tokens for a request booked at 500: 2 s of budget come back
    asyncio.run(limiter.settle(500, {"prompt_tokens": 250, "completion_tokens": 50, "total_tokens": 300}))
    clock.now_s = 8.0  # the bucket's next free time is 10 - 2 = 8 s
    assert asyncio.run(limiter.acquire(100)) == pytest.approx(0.0)
    assert asyncio.run(limiter.acquire(100)) == pytest.approx(0.0)  # 9 s: still within the burst second
    assert asyncio.run(limiter.acquire(100)) == pytest.approx(1.0)
    asyncio.run(limiter.settle(100, None))  # no usage from the server: the estimate stands
    asyncio.run(limiter.settle(100, {"total_tokens": True}))  # nonsense is ignored
    assert limiter.buckets.tokens.tat_s == pytest.approx(11.0)


def test_both_limits_the_longer_wait_wins_and_concurrent_callers_queue():
    buckets = Buckets(max_rpm=120, max_tpm=60_000)  # 2 requests/s, 1000 tokens/s
    assert buckets.reserve(100, 0.0) == 0.0
    assert buckets.reserve(5000, 0.0) == pytest.approx(0.0)  # request bucket at 0.5 s (within burst), tokens at 0.1 s
    assert buckets.reserve(100, 0.0) == pytest.approx(5.1 - 1.0)  # the tokens bucket is 5.1 s ahead

    clock = FakeClock()
    clock.sleep = _recording_sleep(clock.slept)  # concurrent callers: the clock stays at 0
    limiter = RateLimiter(max_rpm=60, clock=clock, sleep=clock.sleep)

    async def five() -> list[float]:
        return list(await asyncio.gather(*(limiter.acquire(1) for _ in range(5))))

    assert asyncio.run(five()) == [0.0, 0.0, 1.0, 2.0, 3.0]
    assert clock.slept == [1.0, 2.0, 3.0]


def _recording_sleep(slept: list[float]):  # noqa: ANN202
    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    return sleep


def test_limits_must_be_positive_and_none_means_unlimited():
    assert make_limiter(None, None) is None
    assert isinstance(make_limiter(30, None), RateLimiter)
    for bad in (0, -1.0):
        with pytest.raises(ValueError, match="must be a positive number"):
            make_limiter(bad, None)
    with pytest.raises(ValueError, match="must be positive"):
        TokenBucket(0)
    assert estimate_tokens(MESSAGES, None) == estimate_request_tokens(MESSAGES) + DEFAULT_ANSWER_TOKENS
    assert estimate_tokens(MESSAGES, 64) == estimate_request_tokens(MESSAGES) + 64


class RecordingLimit:
    """A RateLimit as another backend (a shared, cross-process one) would provide it: just the two methods."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, Any]] = []

    async def acquire(self, tokens: int) -> float:
        self.calls.append(("acquire", tokens, None))
        return 0.0

    async def settle(self, booked: int, usage: dict[str, Any] | None) -> None:
        self.calls.append(("settle", booked, usage))


@pytest.mark.parametrize("examinee_class", [OpenAIExaminee, LangChainOpenAIExaminee])
def test_the_examinee_books_every_try_and_settles_each_answer(examinee_class):
    with MockOpenAI("B", fault_rate=1.0, faults=("429",)) as failing:
        examinee = examinee_class("m", base_url=failing.url, max_attempts=3, backoff_s=0.0, timeout_s=5, max_tokens=64, max_rpm=600)
        assert isinstance(examinee.limiter, RateLimiter) and examinee.limiter.max_rpm == 600
        limit = examinee.limiter = RecordingLimit()  # what a sharded run does: swap in the shared limit
        reply = asyncio.run(examinee.answer(MESSAGES, {"index": 0}))
        assert reply.error and reply.attempts == 3
        booked = estimate_tokens(MESSAGES, 64)
        assert limit.calls == [("acquire", booked, None)] * 3  # every try is booked; a refused one is not settled
    with MockOpenAI("B") as server:
        examinee.base_url = server.url
        examinee.limiter = limit = RecordingLimit()
        reply = asyncio.run(examinee.answer(MESSAGES, {"index": 0}))
        assert reply.raw == "B" and limit.calls == [("acquire", booked, None), ("settle", booked, reply.usage)]
        assert reply.usage["total_tokens"] > 0


def test_an_examinee_with_limits_pickles_for_a_shard_worker():
    import pickle

    examinee = make_examinee("openai:m", base_url="http://127.0.0.1:9/v1", max_rpm=60)
    asyncio.run(examinee.limiter.acquire(1))
    copy = pickle.loads(pickle.dumps(examinee))
    assert copy.name == "openai:m" and copy.limiter.max_rpm == 60 and copy._client is None
    assert copy.limiter.buckets.requests.tat_s == examinee.limiter.buckets.requests.tat_s  # the budget spent so far goes along
    assert asyncio.run(copy.limiter.acquire(1)) >= 0.0  # and its lock works


def test_max_rpm_and_max_tpm_reach_the_examinee_and_the_run_settings(tmp_path, capsys):
    examinee = make_examinee("openai:m", base_url="http://127.0.0.1:9/v1", max_rpm=30, max_tpm=10_000)
    assert (examinee.limiter.max_rpm, examinee.limiter.max_tpm) == (30, 10_000)
    assert make_examinee("oracle", max_rpm=30).limiter is None  # baselines send nothing to limit
    audit = write_audit(tmp_path / "data", 2, seed=1)
    from ecgtrace.agents.audit.format import load_audit

    with MockOpenAI(audit_oracle(load_audit(audit).items)) as server:
        code = main(["audit", str(audit), "--model", "openai:mock", "--base-url", server.url, "--modality", "text", "--run",
                     str(tmp_path / "run"), "--quiet", "--max-rpm", "100000", "--max-tpm", "100000000"])
        assert code == 0 and server.stats["requests"] > 0
    settings = json.loads((tmp_path / "run" / "header.json").read_text())["settings"]
    assert (settings["max_rpm"], settings["max_tpm"]) == (100000, 100000000)
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["overall"]["turns"]["errors"] == 0
    for flag in ("--max-rpm", "--max-tpm"):
        for bad in ("0", "-3", "nan"):
            capsys.readouterr()
            assert main(["audit", str(audit), "--model", "oracle", "--modality", "text", "--run", str(tmp_path / "bad"), flag, bad]) == 2
            err = capsys.readouterr().err.strip()
            assert err.startswith("error:") and f"{flag} must be a positive number" in err and len(err.splitlines()) == 1
