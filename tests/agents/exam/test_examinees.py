"""Examinees: built-ins, and a real ChatOpenAI talking HTTP to the local mock server."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ecgtrace.agents.exam.examinees import (  # noqa: E402
    OpenAIExaminee,
    OracleExaminee,
    PriorExaminee,
    RandomExaminee,
    make_examinee,
)
from ecgtrace.errors import ModelError  # noqa: E402
from tests.support.mock_openai import MockOpenAI, fixed  # noqa: E402

SENTINEL = "sk-SENTINEL-4f1c9e-do-not-log"
TURN = {"index": 3, "sample_id": "s1", "stage": "decision", "options": ["Yes", "No", "Further findings are required to confirm the diagnosis"],
        "answer": "No", "multi": False}
LEAD_TURN = {"index": 4, "sample_id": "s1", "stage": "grounding", "options": ["I", "II", "V1"], "answer": ["I", "V1"], "multi": True}
MESSAGES = [{"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "ECG"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                                         {"type": "text", "text": "Does this ECG show af?\n\nA. Yes\nB. No"}]}]


@pytest.fixture
def mock_server():
    servers = []

    def start(policy="B", **kwargs):
        server = MockOpenAI(policy, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def run(coro):
    return asyncio.run(coro)


def test_builtins():
    assert run(OracleExaminee().answer([], TURN)).raw == "No"
    assert run(OracleExaminee().answer([], LEAD_TURN)).raw == "I, V1"
    assert run(PriorExaminee().answer([], TURN)).raw == TURN["options"][2]  # longest option
    assert run(PriorExaminee().answer([], {**TURN, "options": ["Yes", "No"]})).raw == "Yes"
    with pytest.raises(ModelError, match="unknown model"):
        make_examinee("gpt-4o")


def test_random_is_seeded_per_turn_and_multi_is_non_empty():
    a, b = RandomExaminee(7), RandomExaminee(7)
    draws = [run(a.answer([], {**LEAD_TURN, "index": i})).raw for i in range(200)]
    assert draws == [run(b.answer([], {**LEAD_TURN, "index": i})).raw for i in range(200)]
    subsets = {d for d in draws}
    assert all(d for d in draws) and len(subsets) == 7  # every non-empty subset of 3 leads occurs
    assert draws != [run(RandomExaminee(8).answer([], {**LEAD_TURN, "index": i})).raw for i in range(200)]


def test_chatopenai_over_http_keeps_reasoning_usage_and_sends_the_right_payload(mock_server, monkeypatch):
    monkeypatch.setenv("ECG_TEST_KEY", SENTINEL)
    server = mock_server(fixed("**B. No**"), reasoning="P waves are absent, so...")
    examinee = OpenAIExaminee("mock-vl", base_url=server.url, api_key_env="ECG_TEST_KEY", timeout_s=5, max_tokens=64)
    reply = run(examinee.answer(MESSAGES, TURN))
    assert reply.error is None and reply.raw == "**B. No**"
    assert reply.reasoning == "P waves are absent, so..."
    assert reply.usage["total_tokens"] == reply.usage["prompt_tokens"] + reply.usage["completion_tokens"] > 0
    assert reply.attempts == 1 and reply.latency_ms > 0
    body = server.requests[0]
    assert body["model"] == "mock-vl" and body["max_tokens"] == 64  # extra_body max_tokens for Ollama/llama.cpp
    parts = body["messages"][1]["content"]
    assert parts[1]["type"] == "image_url" and parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert server.headers[0]["authorization"] == f"Bearer {SENTINEL}"
    assert SENTINEL not in repr(reply.to_json())


def test_retries_then_records_the_error(mock_server):
    server = mock_server("A", fault_rate=1.0, faults=("429",))
    examinee = OpenAIExaminee("m", base_url=server.url, max_attempts=3, backoff_s=0.01, timeout_s=5)
    reply = run(examinee.answer(MESSAGES, TURN))
    assert reply.raw is None and "429" in reply.error and "after 3 attempt(s)" in reply.error
    assert server.stats["fault:429"] == 3


def test_timeouts_are_retried_and_recorded(mock_server):
    server = mock_server("A", fault_rate=1.0, faults=("timeout",), timeout_sleep_s=0.6)
    examinee = OpenAIExaminee("m", base_url=server.url, max_attempts=2, backoff_s=0.01, timeout_s=0.2)
    started = time.perf_counter()
    reply = run(examinee.answer(MESSAGES, TURN))
    assert "Timeout" in reply.error and reply.attempts == 2
    assert time.perf_counter() - started < 1.5


def test_transient_500s_recover_with_backoff(mock_server):
    server = mock_server("B", fault_rate=0.5, faults=("500",), seed=3)
    examinee = OpenAIExaminee("m", base_url=server.url, max_attempts=12, backoff_s=0.005, timeout_s=5, concurrency=4)

    async def many():
        return await asyncio.gather(*(examinee.answer(MESSAGES, TURN) for _ in range(20)))

    replies = run(many())
    assert all(r.raw == "B" and r.error is None for r in replies)
    assert server.stats["fault:500"] == sum(r.attempts - 1 for r in replies) > 0


def test_concurrency_is_bounded(mock_server):
    server = mock_server("B", delay_s=0.05)
    examinee = OpenAIExaminee("m", base_url=server.url, concurrency=3, timeout_s=5)

    async def many():
        return await asyncio.gather(*(examinee.answer(MESSAGES, TURN) for _ in range(12)))

    run(many())
    assert server.stats["max_inflight"] == 3


def test_fatal_status_and_missing_key_are_user_errors(mock_server, monkeypatch):
    server = mock_server("B")
    examinee = OpenAIExaminee("m", base_url=server.url.replace("/v1", "/nope"), timeout_s=5)
    with pytest.raises(ModelError, match="refused"):
        run(examinee.answer(MESSAGES, TURN))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelError, match="OPENAI_API_KEY is not set"):
        make_examinee("openai:gpt-4o")


def test_baselines_answer_open_questions_without_error():
    import asyncio

    from ecgtrace.agents.exam.examinees import NO_OPTIONS_ANSWER, make_examinee

    open_turn = {"index": 0, "sample_id": "s", "options": None, "multi": False, "answer": "3"}
    for spec in ("random", "prior"):
        reply = asyncio.run(make_examinee(spec).answer([], open_turn))
        assert reply.error is None and reply.raw == NO_OPTIONS_ANSWER
