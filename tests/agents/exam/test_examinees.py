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


# ------------------------------------------------------------------ registry and plugins

def _entry_points(monkeypatch, *pairs):
    """Installed plugins, as importlib.metadata reports them (nothing is installed)."""
    from importlib.metadata import EntryPoint

    from ecgtrace.agents.exam.examinees import registry

    points = [EntryPoint(name=name, value=value, group=registry.ENTRY_POINT_GROUP) for name, value in pairs]
    calls = []

    def entry_points(*, group):  # noqa: ANN001, ANN202
        calls.append(group)
        return [ep for ep in points if ep.group == group]

    monkeypatch.setattr(registry.metadata, "entry_points", entry_points)
    return calls


def test_a_plugin_examinee_is_found_through_its_entry_point(monkeypatch):
    calls = _entry_points(monkeypatch, ("echo", "tests.support.fake_examinee:BACKEND"))
    examinee = make_examinee("echo:>> ", seed=4, timeout_s=9.0, temperature=0.5)
    assert calls == ["ecgtrace.examinees"]
    assert examinee.name == "echo:>> " and examinee.options.timeout_s == 9.0 and examinee.options.temperature == 0.5
    assert run(examinee.answer([], TURN)).raw == ">> " + TURN["options"][-1]
    from ecgtrace.agents.exam.examinees import examinee_specs

    assert examinee_specs()[-1] == "echo"  # listed after the built-ins


def test_a_plugin_factory_or_a_broken_plugin(monkeypatch):
    _entry_points(monkeypatch, ("bare", "tests.support.fake_examinee:make_echo"), ("broken", "tests.support.no_such_module:X"),
                  ("odd", "tests.support.fake_examinee:NOT_A_BACKEND"), ("oracle", "tests.support.fake_examinee:BACKEND"))
    assert run(make_examinee("bare").answer([], TURN)).raw == TURN["options"][-1]  # a factory alone, no argument
    with pytest.raises(ModelError, match=r"examinee plugin 'broken' .* failed to load: ModuleNotFoundError"):
        make_examinee("broken")
    with pytest.raises(ModelError, match="neither a Backend nor a factory"):
        make_examinee("odd")
    assert isinstance(make_examinee("oracle"), OracleExaminee)  # a plugin cannot take over a built-in name
    with pytest.raises(ModelError, match=r"unknown model 'nobody': use openai:<model>, langchain-openai:<model>, oracle, random, prior, human, bare, broken or odd"):
        make_examinee("nobody")


def test_registered_backends_and_spec_rules(monkeypatch):
    from ecgtrace.agents.exam.examinees import register_examinee, unregister_examinee
    from tests.support.fake_examinee import BACKEND, make_echo

    from ecgtrace.agents.exam.examinees import Backend

    _entry_points(monkeypatch)
    with pytest.raises(ModelError, match="built in"):
        register_examinee(Backend("random", make_echo))
    register_examinee(BACKEND)
    try:
        assert make_examinee("echo:!").prefix == "!"
    finally:
        unregister_examinee("echo")
    with pytest.raises(ModelError, match="unknown model 'echo:!'"):
        make_examinee("echo:!")
    with pytest.raises(ModelError, match="unknown model 'oracle:x'"):  # a bare-name backend takes no argument
        make_examinee("oracle:x")
    with pytest.raises(ModelError, match="needs a model name"):
        make_examinee("openai:")


def test_help_lists_the_registered_names_without_scanning_plugins(monkeypatch):
    from ecgtrace.agents.exam.examinees import describe_specs
    from ecgtrace.cli import build_parser

    calls = _entry_points(monkeypatch, ("echo", "tests.support.fake_examinee:BACKEND"))
    assert describe_specs() == "openai:<model>, langchain-openai:<model>, oracle, random, prior or human"
    text = build_parser().format_help() + "".join(
        action.choices[name].format_help() for action in build_parser()._subparsers._group_actions for name in ("audit", "qa-eval"))
    # argparse wraps help lines: compare with the whitespace collapsed
    assert "openai:<model>, langchain-openai:<model>, oracle, random, prior or human" in " ".join(text.split()) and calls == []


def test_a_langchain_chat_model_is_an_examinee():
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from ecgtrace.agents.exam.examinees import ChatModelExaminee, as_examinee

    examinee = as_examinee(GenericFakeChatModel(messages=iter([AIMessage("B. No")])))
    assert isinstance(examinee, ChatModelExaminee) and as_examinee(examinee) is examinee
    reply = run(examinee.answer(MESSAGES, TURN))
    assert reply.raw == "B. No" and reply.error is None and reply.latency_ms >= 0


def test_text_only_content_goes_out_as_one_string(mock_server):
    """llama-cpp-python's chat templates answer HTTP 500 to a list of text parts: an all-text message is sent as a string."""
    server = mock_server("B")
    examinee = OpenAIExaminee("m", base_url=server.url, max_attempts=1, timeout_s=5)
    text_only = [{"role": "system", "content": "sys"},
                 {"role": "user", "content": [{"type": "text", "text": "ECG signal (text): 1 2 3"}, {"type": "text", "text": "How many PVCs?"}]}]
    assert run(examinee.answer(text_only, TURN)).raw == "B"
    assert run(examinee.answer(MESSAGES, TURN)).raw == "B"
    sent_text, sent_image = server.requests[0]["messages"], server.requests[1]["messages"]
    assert sent_text[1]["content"] == "ECG signal (text): 1 2 3\n\nHow many PVCs?"
    assert isinstance(sent_image[1]["content"], list) and [p["type"] for p in sent_image[1]["content"]] == ["text", "image_url", "text"]


def test_the_sdk_examinee_sends_and_reads_what_chatopenai_does(mock_server):
    """openai:<model> (the SDK's client) and langchain-openai:<model> (ChatOpenAI): same body, same Reply."""
    from ecgtrace.agents.exam.examinees import LangChainOpenAIExaminee

    server = mock_server(fixed("**B. No**"), reasoning="P waves are absent")
    replies = []
    for spec in ("openai:mock-vl", "langchain-openai:mock-vl"):
        examinee = make_examinee(spec, base_url=server.url, timeout_s=5, max_tokens=64, temperature=0.0)
        assert examinee.name == spec
        replies.append(run(examinee.answer(MESSAGES, TURN)))
    assert isinstance(make_examinee("langchain-openai:m", base_url=server.url), LangChainOpenAIExaminee)
    sdk_body, chat_body = server.requests
    assert {k: v for k, v in sdk_body.items() if k != "stream"} == {k: v for k, v in chat_body.items() if k != "stream"}
    assert sdk_body["max_tokens"] == sdk_body["max_completion_tokens"] == 64 and sdk_body["temperature"] == 0.0
    sdk, chat = replies
    assert sdk.raw == chat.raw == "**B. No**" and sdk.reasoning == chat.reasoning == "P waves are absent"
    # the server's usage as it came; ChatOpenAI's model_dump adds the detail fields the server left out as None
    assert sdk.usage == {k: v for k, v in chat.usage.items() if v is not None} and sdk.usage["total_tokens"] > 0
    assert sdk.meta["model"] == chat.meta["model"] and sdk.meta["finish_reason"] == chat.meta["finish_reason"] == "stop"
    assert sdk.meta["id"] and chat.meta["id"] and sdk.error is None and chat.error is None


def test_an_answer_without_choices_is_a_recorded_error(mock_server):
    from ecgtrace.agents.exam.examinees.openai_chat import reply_from_completion

    with pytest.raises(ValueError, match="no choices"):
        reply_from_completion({"id": "x", "choices": []}, 1.0)
    reply = reply_from_completion({"id": "x", "model": "m", "choices": [{"message": {"content": None, "reasoning": "r"}, "finish_reason": "length"}]}, 2.0)
    assert (reply.raw, reply.reasoning, reply.meta["finish_reason"], reply.usage) == ("", "r", "length", None)
