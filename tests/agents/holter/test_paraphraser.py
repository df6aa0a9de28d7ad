"""Paraphrases keep every number and label, else the original wording stays (offline fake chat model)."""

from __future__ import annotations

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from ecgtrace.agents.holter.paraphraser import check_paraphrase, paraphrase_items

Q = "How many premature ventricular contractions (PVCs) occur between 1200 ms and 31200 ms from the start of the recording?"
LABELS = ["premature ventricular contractions (PVCs)"]


def _item(question=Q):
    return {"id": "x", "question": question, "provenance": {"source": "reference", "method": "m", "version": "1", "params": {}}}


def _model(*replies):
    # GenericFakeChatModel needs an iterator of messages; each invoke consumes one
    return GenericFakeChatModel(messages=iter([AIMessage(r) for r in replies]))


def test_good_paraphrase_is_used():
    good = "Between 1200 ms and 31200 ms from the start of the recording, how many premature ventricular contractions (PVCs) are there?"
    out = paraphrase_items([_item()], _model(good), LABELS)
    assert out[0]["question"] == good
    assert out[0]["provenance"]["params"]["paraphrase"]["status"] == "rewritten"


def test_lost_number_or_label_keeps_original():
    bad_number = "How many premature ventricular contractions (PVCs) occur between 1200 ms and 31000 ms?"
    bad_label = "How many extra beats occur between 1200 ms and 31200 ms from the start?"
    out = paraphrase_items([_item(), _item()], _model(bad_number, bad_label), LABELS)
    assert [o["question"] for o in out] == [Q, Q]
    assert out[0]["provenance"]["params"]["paraphrase"]["reason"].startswith("numbers changed")
    assert out[1]["provenance"]["params"]["paraphrase"]["reason"].startswith("lost term")


def test_model_error_keeps_original():
    out = paraphrase_items([_item()], _model(), LABELS)  # empty iterator: the fake model raises
    assert out[0]["question"] == Q and out[0]["provenance"]["params"]["paraphrase"]["status"] == "kept"


def test_check_paraphrase_numbers():
    assert check_paraphrase("at 5 ms", "at 5 ms exactly", []) is None
    assert check_paraphrase("at 5 ms", "", []) == "empty paraphrase"


def test_default_model_comes_from_the_examinee_factory(monkeypatch):
    """The paraphraser talks to its model through the same factory as every examinee (retries, key from the environment)."""
    import pytest

    from ecgtrace.agents.exam.examinees import OpenAIExaminee
    from ecgtrace.agents.holter.paraphraser import default_model
    from ecgtrace.errors import ModelError
    from tests.support.mock_openai import MockOpenAI, fixed

    good = "Between 1200 ms and 31200 ms from the start of the recording, how many premature ventricular contractions (PVCs) are there?"
    monkeypatch.setenv("ECGTRACE_PARAPHRASE_MODEL", "mock-writer")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with MockOpenAI(fixed(good)) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        model = default_model()
        assert isinstance(model, OpenAIExaminee) and model.temperature == 0 and model.base_url == server.url
        out = paraphrase_items([_item()], model, LABELS)
        body = server.requests[0]
    assert out[0]["question"] == good and out[0]["provenance"]["params"]["paraphrase"]["status"] == "rewritten"
    assert body["model"] == "mock-writer" and body["temperature"] == 0 and body["messages"][1]["content"] == Q
    monkeypatch.delenv("OPENAI_BASE_URL")
    with pytest.raises(ModelError, match="OPENAI_API_KEY is not set"):
        default_model()


def test_a_server_failure_keeps_the_original_wording():
    from ecgtrace.agents.exam.examinees import Examinee, Reply

    class Down(Examinee):
        async def answer(self, messages, turn):  # noqa: ANN001
            return Reply(raw=None, error="APIConnectionError: refused after 4 attempt(s)")

    out = paraphrase_items([_item()], Down(), LABELS)
    assert out[0]["question"] == Q and out[0]["provenance"]["params"]["paraphrase"]["reason"] == "model error: APIConnectionError"
