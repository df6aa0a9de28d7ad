"""A real OpenAI-compatible chat server on 127.0.0.1 for offline tests, benchmarks and trying ``audit`` without a model.

``POST /v1/chat/completions`` answers with a chat.completion object that has a
``usage`` field (and ``reasoning_content`` when asked). The answer comes from a
*policy*: a callable ``policy(body: dict) -> str`` run on the request body.
Built-ins: :func:`fixed`, :func:`garbage`, :func:`lookup`, :func:`audit_oracle`.

``GET /v1/models`` lists ``models`` (default ``("mock",)``). With ``models``
given, a chat request for another name gets the 404 ``model_not_found`` that
OpenAI and vLLM send; by default any name is answered (tests use several).
With ``api_key`` given, a request without ``Authorization: Bearer <api_key>``
gets a 401, as a server with a key does. Model-list requests are counted in
``stats["models_requests"]``, not in ``stats["requests"]`` (the chat requests).

Faults are injected per request with probability ``fault_rate``, the kind drawn
uniformly from ``faults``:

* ``"429"`` - HTTP 429 with an OpenAI-style error body;
* ``"500"`` - HTTP 500;
* ``"timeout"`` - sleeps ``timeout_sleep_s`` (longer than the client timeout), then answers;
* ``"garbage"`` - HTTP 200 whose answer names no option.

``context_tokens`` makes it a server with a context length: ``GET /v1/models``
reports it as vLLM does (``max_model_len``) and a request whose prompt (the
mock counts ``len(body) // 4`` tokens) and ``max_tokens`` exceed it gets HTTP 400,
as real servers answer.

``stats`` counts requests, answers and each fault kind (thread-safe);
``requests[i]`` and ``faults_log[i]`` keep the first ``keep_requests`` bodies and
the fault each got, so a test can check that every injected fault shows up in
the run log for the turn it hit (:func:`turn_key`).

Run standalone (benchmarks; users run ``ecgtrace mock-server``, the same server)::

    python -m ecgtrace.agents.exam.mock_server --delay 0.05 --items DIR/audit.jsonl
    # prints "PORT <n>" once listening
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Policy = Callable[[dict[str, Any]], str]


def _user_texts(body: dict[str, Any]) -> list[str]:
    """Text of each user message (content parts joined)."""
    out = []
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        out.append(content or "")
    return out


def last_question(body: dict[str, Any]) -> str:
    """The question of the last user message: the line above its ``A. …`` option list.

    Works whether the ECG came first as content parts or as one string.
    """
    texts = _user_texts(body)
    if not texts:
        return ""
    lines = [line for line in texts[-1].splitlines() if line.strip()]
    options = [i for i, line in enumerate(lines) if line.startswith("A. ")]
    if options and options[-1] > 0:
        return lines[options[-1] - 1]
    return lines[0] if lines else ""


def fixed(text: str) -> Policy:
    return lambda body: text


def garbage(seed: int = 0) -> Policy:
    rng = random.Random(seed)
    lock = threading.Lock()
    words = ["zebra", "quartz", "lorem", "ipsum", "nebula", "%%%", "??", "42"]

    def policy(body: dict[str, Any]) -> str:
        with lock:
            return " ".join(rng.choice(words) for _ in range(5))

    return policy


def lookup(table: dict[str, Any], key: Callable[[dict[str, Any]], str] = last_question, default: str = "I cannot tell.") -> Policy:
    """Answer ``table[key(body)]`` (a list answer is joined with commas)."""

    def policy(body: dict[str, Any]) -> str:
        answer = table.get(key(body), default)
        return ", ".join(answer) if isinstance(answer, list) else str(answer)

    return policy


def _first_user_intro(body: dict[str, Any]) -> str:
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return content[0].get("text", "").splitlines()[0] if content else ""
            return (content or "").splitlines()[0]
    return ""


def turn_key(body: dict[str, Any]) -> tuple[str, int]:
    """(ECG intro line, turn index) of an audit request: which sample and turn it asks."""
    n_user = sum(1 for m in body.get("messages", []) if m.get("role") == "user")
    return _first_user_intro(body), n_user - 1


def audit_oracle(items: list[Any]) -> Policy:
    """Oracle for audit items, keyed by (ECG intro line, turn number, question).

    The intro line names the record and window, the turn number is the count of
    user messages in the request; ``items`` are AuditItem objects or their JSON
    and must differ in record id or window.
    """
    from ecgtrace.agents.audit.examiner import ecg_content, plan_turns

    table: dict[tuple[str, int, str], Any] = {}
    for item in items:
        data = item if isinstance(item, dict) else item.to_json()
        intro = ecg_content({**data, "assets": {}}, ".", "text")[0]["text"].splitlines()[0]
        for turn in plan_turns(data):
            table[(intro, turn["index"], turn["question"])] = turn["answer"]

    def policy(body: dict[str, Any]) -> str:
        n_user = sum(1 for m in body.get("messages", []) if m.get("role") == "user")
        answer = table.get((_first_user_intro(body), n_user - 1, last_question(body)), "I cannot tell.")
        return ", ".join(answer) if isinstance(answer, list) else str(answer)

    return policy


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if not isinstance(exc, ConnectionError | TimeoutError | OSError):
            super().handle_error(request, client_address)


class MockOpenAI:
    """A threaded local server; use as a context manager or call :meth:`start`/:meth:`stop`."""

    def __init__(self, policy: Policy | str = "I cannot tell.", *, delay_s: float = 0.0, fault_rate: float = 0.0,
                 faults: tuple[str, ...] = ("429", "500", "timeout", "garbage"), timeout_sleep_s: float = 2.0,
                 seed: int = 0, reasoning: str | None = None, keep_requests: int = 50,
                 models: tuple[str, ...] | None = None, api_key: str | None = None, context_tokens: int | None = None) -> None:
        self.policy: Policy = fixed(policy) if isinstance(policy, str) else policy
        self.context_tokens = context_tokens
        self.models = tuple(models) if models else None  # None: any name is answered, "mock" is listed
        self.api_key = api_key
        self.delay_s = float(delay_s)
        self.fault_rate = float(fault_rate)
        self.faults = tuple(faults)
        self.timeout_sleep_s = float(timeout_sleep_s)
        self.reasoning = reasoning
        self.stats: Counter[str] = Counter()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.faults_log: list[str | None] = []  # fault injected into requests[i] (None: none)
        self._keep = keep_requests
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._inflight = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --------------------------------------------------------------- lifecycle
    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, port: int = 0) -> MockOpenAI:
        mock = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out at once: no 40 ms delayed-ACK stalls

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                mock._handle(self)

            def do_GET(self) -> None:  # noqa: N802
                mock._list_models(self)

        server = _QuietServer(("127.0.0.1", port), Handler)
        server.daemon_threads = True
        server.block_on_close = False
        server.request_queue_size = 128
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> MockOpenAI:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ----------------------------------------------------------------- serving
    def _draw_fault(self) -> str | None:
        with self._lock:
            self.stats["requests"] += 1
            if self.fault_rate and self._rng.random() < self.fault_rate:
                kind = self._rng.choice(self.faults)
                self.stats[f"fault:{kind}"] += 1
                return kind
        return None

    def _authorized(self, handler: BaseHTTPRequestHandler) -> bool:
        """True without an ``api_key``, or when the request carries it; else a 401 is sent."""
        if self.api_key is None or handler.headers.get("Authorization") == f"Bearer {self.api_key}":
            return True
        self._send(handler, 401, {"error": {"message": "Incorrect API key provided (mock)", "type": "invalid_request_error",
                                            "code": "invalid_api_key"}})
        return False

    def _list_models(self, handler: BaseHTTPRequestHandler) -> None:
        if handler.path.split("?")[0].rstrip("/") != "/v1/models":
            return self._send(handler, 404, {"error": {"message": f"no route {handler.path}", "type": "not_found"}})
        with self._lock:
            self.stats["models_requests"] += 1
        if not self._authorized(handler):
            return None
        names = self.models or ("mock",)
        extra = {"max_model_len": self.context_tokens} if self.context_tokens else {}
        return self._send(handler, 200, {"object": "list", "data": [{"id": n, "object": "model", "owned_by": "mock", **extra} for n in names]})

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length)
        if handler.path.split("?")[0].rstrip("/") != "/v1/chat/completions":
            return self._send(handler, 404, {"error": {"message": f"no route {handler.path}", "type": "not_found"}})
        if not self._authorized(handler):
            return None
        try:
            body = json.loads(raw)
        except ValueError:
            return self._send(handler, 400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
        if self.models is not None and body.get("model") not in self.models:
            return self._send(handler, 404, {"error": {"message": f"The model `{body.get('model')}` does not exist", "type": "invalid_request_error",
                                                       "code": "model_not_found"}})
        with self._lock:
            slot = None
            if len(self.requests) < self._keep:
                slot = len(self.requests)
                self.requests.append(body)
                self.headers.append({k.lower(): v for k, v in handler.headers.items()})
                self.faults_log.append(None)
            self._inflight += 1
            self.stats["max_inflight"] = max(self.stats["max_inflight"], self._inflight)
        try:
            self._answer(handler, body, raw, slot)
        finally:
            with self._lock:
                self._inflight -= 1

    def _answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], raw: bytes, slot: int | None) -> None:
        fault = self._draw_fault()
        if slot is not None:
            self.faults_log[slot] = fault
        wanted = len(raw) // 4 + int(body.get("max_tokens") or 0)
        if self.context_tokens and wanted > self.context_tokens:
            with self._lock:
                self.stats["context_exceeded"] += 1
            return self._send(handler, 400, {"error": {"message": f"requested {wanted} tokens, context is {self.context_tokens}",
                                                       "type": "invalid_request_error"}})
        if fault == "429":
            return self._send(handler, 429, {"error": {"message": "rate limited (injected)", "type": "rate_limit_error"}})
        if fault == "500":
            return self._send(handler, 500, {"error": {"message": "server error (injected)", "type": "server_error"}})
        if fault == "timeout":
            time.sleep(self.timeout_sleep_s)
        elif self.delay_s:
            time.sleep(self.delay_s)
        try:
            text = garbage(self._rng.randrange(1 << 30))(body) if fault == "garbage" else self.policy(body)
        except Exception as exc:  # noqa: BLE001 - a broken policy is a 500, visible to the test
            return self._send(handler, 500, {"error": {"message": f"policy failed: {exc}", "type": "server_error"}})
        with self._lock:
            self.stats["answers"] += 1
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if self.reasoning is not None:
            message["reasoning_content"] = self.reasoning
        prompt_chars = len(raw)
        usage = {"prompt_tokens": prompt_chars // 4, "completion_tokens": max(1, len(text) // 4)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        self._send(handler, 200, {
            "id": f"chatcmpl-mock-{self.stats['requests']}", "object": "chat.completion", "created": 0,
            "model": body.get("model", "mock"),
            "choices": [{"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}],
            "usage": usage,
        })

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
            handler.close_connection = True


def policy_for(items: str | None, text: str) -> Policy:
    """The oracle of ``items`` (an audit.jsonl or its folder) when given, else the fixed answer ``text``."""
    if items:
        from ecgtrace.agents.audit.format import load_audit

        return audit_oracle(load_audit(items).items)
    return fixed(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="serve a mock OpenAI chat endpoint on 127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds per answer")
    parser.add_argument("--items", default=None, help="audit.jsonl: answer as the oracle for these items")
    parser.add_argument("--text", default="B", help="fixed answer when --items is not given")
    parser.add_argument("--fault-rate", type=float, default=0.0)
    args = parser.parse_args(argv)
    server = MockOpenAI(policy_for(args.items, args.text), delay_s=args.delay, fault_rate=args.fault_rate).start(args.port)
    print(f"PORT {server.port}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
