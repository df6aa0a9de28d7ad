"""A hostile OpenAI-compatible server on 127.0.0.1 (issue 17): echoed keys, Retry-After, 5 MB replies, bad options.

The server is :mod:`tests.support.hostile_openai`; every answer is scripted here.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ecgtrace.cli import main
from tests.support.audit_items import write_audit
from tests.support.hostile_openai import HostileServer, Response, chat, echo_key_401, echo_key_500, error

SECRET = "sk-test-TOPSECRET-0123456789abcdef"


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("HOSTILE_KEY", SECRET)
    return SECRET


def _qa_dataset(tmp_path: Path) -> Path:
    from tests.support.qa_items import copy_small_qa

    return copy_small_qa(tmp_path / "qa")


def _exam(command: str, dataset: Path, server: HostileServer, run: Path, *extra: str) -> int:
    return main([command, str(dataset), "--model", "openai:mock", "--base-url", server.url, "--api-key-env", "HOSTILE_KEY",
                 "--run", str(run), "--modality", "text", "--quiet", "--max-attempts", "2", "--backoff", "0.01", *extra])


def _files_holding(folder: Path, text: str) -> list[str]:
    if not folder.exists():
        return []
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and text.encode() in p.read_bytes())


def test_a_key_echoed_in_a_401_is_never_printed_or_stored(tmp_path, key, capsys):
    with HostileServer(echo_key_401) as server:
        code = _exam("audit", write_audit(tmp_path / "audit", 2), server, tmp_path / "run")
    err = capsys.readouterr().err
    assert code == 2 and "error:" in err and "401" in err
    assert key not in err and "[redacted]" in err  # before: "Incorrect API key provided: Bearer sk-..." on stderr
    assert _files_holding(tmp_path / "run", key) == []  # and in the checkpoint
    assert any(r.headers.get("authorization") == f"Bearer {key}" for r in server.requests)  # the key was sent, and echoed


def test_a_key_echoed_in_a_500_body_never_reaches_samples_checkpoints_or_the_report(tmp_path, key, capsys):
    with HostileServer(echo_key_500) as server:
        code = _exam("audit", write_audit(tmp_path / "audit", 2), server, tmp_path / "run")
        qa_code = _exam("qa-eval", _qa_dataset(tmp_path), server, tmp_path / "qa_run", "--limit", "2")
    assert code == 3 and qa_code == 3  # every turn failed: recorded, and a failed-run exit (before: 0 and complete: true)
    assert main(["report", str(tmp_path / "run")]) == 0
    assert main(["report", str(tmp_path / "qa_run")]) == 0
    err = capsys.readouterr().err
    rows = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    errors = [t["error"] for row in rows for t in row["turns"] if t.get("error")]
    assert errors and all("InternalServerError 500" in e and "[redacted]" in e for e in errors)
    assert _files_holding(tmp_path / "run", key) == [] and _files_holding(tmp_path / "qa_run", key) == []
    assert key not in err


def test_retry_after_on_a_429_is_honoured(tmp_path, key):
    asked: list[float] = []

    def respond(request) -> Response:
        asked.append(time.monotonic())
        return error(429, "slow down", {"Retry-After": "1"}) if len(asked) == 1 else chat("A")

    with HostileServer(respond) as server:
        assert _exam("qa-eval", _qa_dataset(tmp_path), server, tmp_path / "run", "--limit", "1") == 0
    chat_times = [r.at_s for r in server.chat_requests()]
    assert len(chat_times) >= 2
    gap = chat_times[1] - chat_times[0]
    assert 0.95 <= gap < 5, gap  # before: retried after the 0.01 s backoff


def test_retry_after_is_read_in_every_form_and_capped():
    import email.utils

    from ecgtrace.agents.exam.examinees.openai_chat import MAX_RETRY_AFTER_S, retry_after_s

    class Exc(Exception):
        def __init__(self, headers: dict[str, str]) -> None:
            self.response = type("R", (), {"headers": headers})()

    assert retry_after_s(Exc({"retry-after": "2"})) == 2.0
    assert retry_after_s(Exc({"retry-after-ms": "1500"})) == 1.5
    assert retry_after_s(Exc({"retry-after": "86400"})) == MAX_RETRY_AFTER_S
    assert retry_after_s(Exc({"retry-after": "nan"})) is None and retry_after_s(Exc({"retry-after": "soon"})) is None
    later = email.utils.formatdate(time.time() + 5, usegmt=True)
    assert 3 <= retry_after_s(Exc({"retry-after": later})) <= 6
    assert retry_after_s(Exc({})) is None and retry_after_s(ValueError()) is None


def test_a_5_mb_reply_is_capped_where_stored_and_where_re_sent(tmp_path, key):
    huge = "Yes. " + "x" * 5_000_000
    with HostileServer(lambda request: chat(huge)) as server:
        code = _exam("audit", write_audit(tmp_path / "audit", 1, loops=1), server, tmp_path / "run", "--max-reply-chars", "2000")
    assert code == 0
    bodies = [len(json.dumps(r.body)) for r in server.chat_requests()]
    assert len(bodies) >= 5 and max(bodies) < 40_000  # before: the initial 5 MB answer rode along in every later turn
    samples = tmp_path / "run" / "samples.jsonl"
    assert samples.stat().st_size < 200_000  # before: 5 MB per turn
    turns = json.loads(samples.read_text().splitlines()[0])["turns"]
    assert all(t["meta"]["truncated"] == {"raw_chars": len(huge)} for t in turns)
    assert all(len(t["raw"]) < 2100 and "characters of the reply not kept" in t["raw"] for t in turns)
    assert json.loads((tmp_path / "run" / "header.json").read_text())["settings"]["max_reply_chars"] == 2000


def test_the_default_reply_cap_keeps_both_ends():
    from ecgtrace.agents.exam.examinees.base import MAX_REPLY_CHARS, Reply

    reply = Reply(raw="<think>" + "y" * 100_000 + "</think> B. No", reasoning="r" * 10)
    capped = reply.capped()
    assert len(capped.raw) < MAX_REPLY_CHARS + 100 and capped.raw.endswith("B. No") and capped.raw.startswith("<think>")
    assert capped.meta == {"truncated": {"raw_chars": len(reply.raw)}} and capped.reasoning == "r" * 10
    assert Reply(raw="short").capped() == Reply(raw="short")


@pytest.mark.parametrize("option, value, message", [("--timeout", "nan", "--timeout must be a positive number"),
                                                    ("--timeout", "inf", "--timeout must be a positive number"),
                                                    ("--backoff", "-5", "--backoff must not be negative"),
                                                    ("--backoff", "nan", "--backoff must not be negative"),
                                                    ("--temperature", "nan", "--temperature must be a number"),
                                                    ("--max-reply-chars", "0", "--max-reply-chars must be at least 1")])
def test_bad_request_options_are_refused_before_any_request(tmp_path, key, capsys, option, value, message):
    with HostileServer(lambda request: chat("A")) as server:
        assert _exam("qa-eval", _qa_dataset(tmp_path), server, tmp_path / "run", option, value) == 2
    assert message in capsys.readouterr().err
    assert server.chat_requests() == [] and not (tmp_path / "run").exists()


def test_the_examinee_itself_refuses_a_nan_timeout():
    from ecgtrace.agents.exam.examinees import make_examinee
    from ecgtrace.errors import ModelError

    with pytest.raises(ModelError, match="timeout"):
        make_examinee("openai:m", base_url="http://127.0.0.1:9/v1", timeout_s=float("nan"))  # `ecgtrace debug --ask` path
    with pytest.raises(ModelError, match="backoff"):
        make_examinee("openai:m", base_url="http://127.0.0.1:9/v1", backoff_s=-5.0)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_dead_endpoint_is_an_error_exit_and_writes_nothing(tmp_path, key, capsys):
    dead = f"http://127.0.0.1:{_free_port()}/v1"  # nothing listens there: every request is refused
    for command, dataset in (("audit", write_audit(tmp_path / "audit", 2)), ("qa-eval", _qa_dataset(tmp_path))):
        run = tmp_path / f"run-{command}"
        code = main([command, str(dataset), "--model", "openai:mock", "--base-url", dead, "--api-key-env", "HOSTILE_KEY", "--run", str(run),
                     "--modality", "text", "--quiet", "--max-attempts", "1", "--timeout", "2", "--limit", "2"])
        err = capsys.readouterr().err
        assert code != 0 and "error:" in err, command  # before: 0, with results.json saying complete: true
        assert not run.exists(), command  # the endpoint preflight fails before the run folder exists


def test_a_malformed_endpoint_is_an_error_exit(tmp_path, key, capsys):
    with HostileServer(lambda request: Response(200, b"<html>not an API</html>")) as server:
        code = _exam("qa-eval", _qa_dataset(tmp_path), server, tmp_path / "run", "--limit", "2")
    assert code != 0 and "error:" in capsys.readouterr().err
    samples = tmp_path / "run" / "samples.jsonl"
    turns = [t for line in (samples.read_text().splitlines() if samples.exists() else []) for t in json.loads(line)["turns"]]
    assert all(t.get("error") for t in turns)  # nothing is scored as if it had been answered


def test_some_failed_turns_warn_and_retry_errors_asks_them_again(tmp_path, key, capsys):
    chats: list[int] = []

    def flaky(request) -> Response:
        chats.append(1)
        return error(500, "down for a moment") if len(chats) == 2 else chat("A")  # the 1st request is the preflight

    dataset = _qa_dataset(tmp_path)
    with HostileServer(flaky) as server:
        assert _exam("qa-eval", dataset, server, tmp_path / "run", "--limit", "3", "--max-attempts", "1") == 0
        err = capsys.readouterr().err
        assert "warning: 1 of" in err and "--retry-errors" in err
        assert _exam("qa-eval", dataset, server, tmp_path / "run", "--limit", "3", "--retry-errors") == 0
    rows = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and not [t for row in rows for t in row["turns"] if t.get("error")]
