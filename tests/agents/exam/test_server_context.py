"""The context length a server reports, read from the answers vLLM, llama.cpp and LM Studio give."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ecgtrace.agents.exam.examinees.openai_chat import OpenAIExaminee, _reported_context  # noqa: E402
from tests.support.mock_openai import MockOpenAI  # noqa: E402


def test_the_fields_each_server_uses() -> None:
    vllm = {"object": "list", "data": [{"id": "Qwen/Qwen2.5-VL-7B", "object": "model", "max_model_len": 32768}]}
    assert _reported_context(vllm, "Qwen/Qwen2.5-VL-7B") == {"max_model_len": 32768}
    llama_models = {"object": "list", "data": [{"id": "smollm2.gguf", "meta": {"n_ctx_train": 8192, "n_vocab": 49152}}]}
    assert _reported_context(llama_models, "anything") == {"n_ctx_train": 8192}  # the only model listed
    llama_props = {"default_generation_settings": {"n_ctx": 4096, "params": {}}, "total_slots": 1}
    assert _reported_context(llama_props, "x") == {"n_ctx": 4096}
    lmstudio = {"data": [{"id": "a", "max_context_length": 4096}, {"id": "b", "max_context_length": 131072}]}
    assert _reported_context(lmstudio, "b") == {"max_context_length": 131072}
    assert _reported_context(lmstudio, "c") == {}  # several models and none is ours
    assert _reported_context({"data": [{"id": "gpt-4o", "object": "model"}]}, "gpt-4o") == {} and _reported_context(None, "m") == {}


def test_the_examinee_asks_the_server() -> None:
    with MockOpenAI("A", context_tokens=8192) as server:
        assert asyncio.run(OpenAIExaminee("mock", base_url=server.url).context_tokens()) == 8192
    with MockOpenAI("A") as server:
        assert asyncio.run(OpenAIExaminee("mock", base_url=server.url).context_tokens()) is None
    assert asyncio.run(OpenAIExaminee("mock", base_url="http://127.0.0.1:9/v1", timeout_s=1).context_tokens()) is None  # nobody there
