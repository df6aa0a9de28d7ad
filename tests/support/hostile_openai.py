"""A scripted, hostile OpenAI-compatible server on 127.0.0.1 for the reliability tests.

Unlike :mod:`tests.support.mock_openai` (which answers like a model and injects
random faults), every response here is chosen by the test: a ``respond(request)``
callable returns a :class:`Response` (status, headers, JSON body or raw bytes).
It serves ``POST /v1/chat/completions`` and ``GET /v1/models``, keeps every
request (path, headers, body, arrival time) and never leaves 127.0.0.1.

Helpers build the hostile answers the probes used: :func:`chat` (any text,
e.g. 5 MB), :func:`error` (any status, message, headers such as
``Retry-After``), :func:`echo_key_401` and :func:`echo_key_500` (a server that
repeats the caller's ``Authorization`` header back in its error).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    at_s: float


@dataclass
class Response:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


def chat(text: str, model: str = "mock") -> Response:
    """A chat.completion answering ``text``."""
    return Response(200, {"id": "chatcmpl-hostile", "object": "chat.completion", "created": 0, "model": model,
                          "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                          "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(status, {"error": {"message": message, "type": "error"}}, headers or {})


def echo_key_401(request: Request) -> Response:
    """401 whose message repeats the Authorization header it got (a real server bug the probe met)."""
    return error(401, f"Incorrect API key provided: {request.headers.get('authorization', '')}")


def echo_key_500(request: Request) -> Response:
    """500 whose body repeats the caller's key (and headers) back."""
    auth = request.headers.get("authorization", "")
    return error(500, f"upstream failed for {auth} (key {auth.removeprefix('Bearer ')})")


class HostileServer:
    """``with HostileServer(respond) as server: ... server.url ...``; ``respond(Request) -> Response``."""

    def __init__(self, respond: Callable[[Request], Response], *, models: tuple[str, ...] = ("mock",)) -> None:
        self.respond = respond
        self.models = models
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def chat_requests(self) -> list[Request]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def __enter__(self) -> HostileServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                server._serve(self, "GET")

            def do_POST(self) -> None:  # noqa: N802
                server._serve(self, "POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _serve(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        request = Request(method, handler.path, {k.lower(): v for k, v in handler.headers.items()}, body, time.monotonic())
        with self._lock:
            self.requests.append(request)
        if method == "GET" and handler.path.rstrip("/").endswith("/models"):
            response = Response(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]})
        elif method == "GET":  # other probes (llama.cpp's /props): a server without them; the responder answers chat only
            response = Response(404, {"error": {"message": f"no route {handler.path}"}})
        else:
            response = self.respond(request)
        data = response.body if isinstance(response.body, bytes) else json.dumps(response.body).encode()
        try:
            handler.send_response(response.status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            for name, value in response.headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True
