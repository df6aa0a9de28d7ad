"""``ecgtrace view``'s local server: the viewer's files over HTTP on 127.0.0.1, read-only.

Only ``GET`` and ``HEAD``; only the names :mod:`ecgtrace.views.viewer_site`
knows (fixed patterns, so no URL ever names a file on disk); only requests
whose ``Host`` is this server's own loopback address (a page elsewhere cannot
reach it through DNS rebinding). Every response carries the strict CSP. Item
images are read from inside the run or dataset folder (symlinks resolved
first); nothing is ever written.
"""

from __future__ import annotations

import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from ecgtrace.views.viewer_site import CONTENT_TYPES, CSP, ViewerSite, app_file

HOST = "127.0.0.1"


class _Handler(BaseHTTPRequestHandler):
    server: ViewerServer
    server_version = "ecgtrace-viewer"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        if self.server.verbose:
            super().log_message(format, *args)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._serve(body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve(body=False)

    def _refuse(self) -> None:
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, b"read-only viewer\n", "text/plain; charset=utf-8", extra={"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse  # noqa: N815

    def _send(self, status: HTTPStatus, data: bytes, content_type: str, *, body: bool = True, cache: str = "no-cache",
              extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", cache)
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _serve(self, *, body: bool) -> None:
        if self.headers.get("Host", "") not in self.server.allowed_hosts:
            self._send(HTTPStatus.FORBIDDEN, b"unknown host\n", "text/plain; charset=utf-8", body=body)
            return
        path = unquote(urlsplit(self.path).path)
        found = self.server.lookup(path)
        if found is None:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8", body=body)
            return
        data, content_type, cache = found
        self._send(HTTPStatus.OK, data, content_type, body=body, cache=cache)


class ViewerServer(ThreadingHTTPServer):
    """The viewer on ``http://127.0.0.1:<port>/`` (port 0: a free one); ``url`` says where."""

    daemon_threads = True

    def __init__(self, site: ViewerSite, port: int = 0, *, verbose: bool = False) -> None:
        super().__init__((HOST, port), _Handler)
        self.site = site
        self.verbose = verbose
        self.port = int(self.server_address[1])
        self.allowed_hosts = {f"{HOST}:{self.port}", f"localhost:{self.port}"}
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/"

    def lookup(self, path: str) -> tuple[bytes, str, str] | None:
        """(bytes, content type, cache policy) for a request path, or None (404)."""
        if "\x00" in path or "\\" in path or ".." in PurePosixPath(path).parts:
            return None
        if path in ("/", "/index.html"):
            return app_file("index.html"), CONTENT_TYPES[".html"], "no-cache"  # type: ignore[return-value]
        if path.startswith("/app/"):
            name = path[len("/app/"):]
            data = app_file(name)
            return (data, CONTENT_TYPES[PurePosixPath(name).suffix], "no-cache") if data is not None else None
        if not path.startswith("/data/"):
            return None
        name = path[len("/data/"):]
        if name.endswith(".js"):
            data = self.site.data(name[:-3])
            return (data, CONTENT_TYPES[".js"], "no-cache") if data is not None else None
        if "/fig/" in name:
            data = self.site.figure(name)
            return (data, CONTENT_TYPES[".png"], "private, max-age=3600") if data is not None else None
        asset = self.site.asset(name)
        if asset is None:
            return None
        return asset.read_bytes(), CONTENT_TYPES[asset.suffix.lower()], "private, max-age=3600"

    def start(self) -> ViewerServer:
        """Serve in a background thread (tests, benchmarks); :meth:`stop` ends it."""
        self._thread = threading.Thread(target=self.serve_forever, name="ecgtrace-viewer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
