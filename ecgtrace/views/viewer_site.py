"""The viewer as a set of named files: the app (package data) and the run data, shared by the server and the static export.

Layout (the same served by ``ecgtrace view`` and written by ``--static``)::

    index.html, app/<file>                      the browser app (``viewer_app/`` package data)
    data/app.js                                 the served runs and comparable pairs
    data/r<N>/overview.js | index.js | text.js  a run's plots and metrics, sample index, search texts
    data/r<N>/s/<key>.js                        one sample
    data/r<N>/fig/<key>/<name>.png              one figure, drawn on request
    data/r<N>/asset/<key>/<name>.<ext>          an image the model was shown, or a counterfactual strip
    data/cmp/<A>-<B>.js                         two runs compared

Data files are scripts calling ``ECGV.receive(name, payload)`` with the payload
as JSON whose ``<``, ``>`` and ``&`` are escaped, so that a browser can load them
from a ``file://`` folder (where ``fetch`` is refused) under a CSP that allows
scripts from the page's own origin only. Names are matched against fixed
patterns: nothing in a URL ever becomes a file path.
"""

from __future__ import annotations

import json
import re
import threading
from importlib.resources import files
from pathlib import Path
from typing import Any

from ecgtrace.jsonio import plain_json
from ecgtrace.views.run_view import RunView

#: Strict policy of every page and file the viewer serves (the page repeats it in a meta tag for static folders).
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
APP_FILES = ("index.html", "core.js", "charts.js", "overview.js", "table.js", "sample.js", "compare.js", "main.js",
             "style.css", "charts.css", "favicon.svg")
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
                 ".svg": "image/svg+xml", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
                 ".webp": "image/webp"}
_KEY = r"s[0-9a-f]{20}"
DATA = re.compile(rf"^(app|r(\d+)/(overview|index|text)|r(\d+)/s/({_KEY})|cmp/(\d+)-(\d+))$")
FIGURE = re.compile(rf"^r(\d+)/fig/({_KEY})/(window|cf|t\d+)\.png$")
ASSET = re.compile(rf"^r(\d+)/asset/({_KEY})/(img\d+|cf)\.(png|jpg|jpeg|gif|webp)$")


def js_payload(name: str, data: Any) -> bytes:
    """``ECGV.receive("<name>", <json>);`` with markup characters escaped inside the JSON (ASCII only)."""
    text = json.dumps(plain_json(data), ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f"ECGV.receive({json.dumps(name)},{text});\n".encode("ascii")


def app_file(name: str) -> bytes | None:
    """One file of the browser app, by name (only the files listed in :data:`APP_FILES`)."""
    if name not in APP_FILES:
        return None
    return files("ecgtrace.views").joinpath("viewer_app", name).read_bytes()


class ViewerSite:
    """The served runs and every file of the viewer, computed on first use and kept (safe to use from several threads)."""

    def __init__(self, runs: list[RunView]) -> None:
        from ecgtrace.views.viewer_probe import pair_view

        self.runs = [pair_view(run) if run.kind == "probe" else run for run in runs]  # a probe run: one row per kept pair
        self._cache: dict[str, bytes] = {}
        self._rows = [run.by_key() for run in self.runs]
        self._lock = threading.Lock()
        self._draw_lock = threading.Lock()  # matplotlib figures are drawn one at a time

    def warm(self) -> None:
        """Compute what the first page needs (run list, overviews, indexes) before anyone asks."""
        from ecgtrace.views.run_view import paused_gc

        with paused_gc():
            self.data("app")
            for n in range(len(self.runs)):
                self.data(f"r{n}/overview")
                self.data(f"r{n}/index")
        import ecgtrace.tools.render  # noqa: F401 - so that the first figure is not also the one that pays for matplotlib

    def _run(self, n: str | None) -> int | None:
        return int(n) if n is not None and int(n) < len(self.runs) else None

    def _payload(self, name: str) -> Any:
        from ecgtrace.views import viewer_data as vd
        from ecgtrace.views.viewer_sample import compare_data, sample_detail

        match = DATA.match(name)
        if match is None:
            return None
        if name == "app":
            return vd.app_data(self.runs)
        if match.group(3):
            n = self._run(match.group(2))
            if n is None:
                return None
            run = self.runs[n]
            what = match.group(3)
            return vd.overview(run, self.runs) if what == "overview" else vd.sample_index(run) if what == "index" else vd.search_texts(run)
        if match.group(5):
            n = self._run(match.group(4))
            row = self._rows[n].get(match.group(5)) if n is not None else None
            return sample_detail(self.runs[n], n, row) if row is not None and n is not None else None
        a, b = self._run(match.group(6)), self._run(match.group(7))
        return compare_data(self.runs, a, b) if a is not None and b is not None and a != b else None

    def data(self, name: str) -> bytes | None:
        """The data file ``data/<name>.js`` as bytes, or None when there is no such file."""
        with self._lock:
            cached = self._cache.get(name)
        if cached is not None:
            return cached
        payload = self._payload(name)
        if payload is None:
            return None
        body = js_payload(name, payload)
        if not name.startswith("r") or "/s/" not in name:  # sample files are cheap to rebuild; keep memory bounded
            with self._lock:
                self._cache[name] = body
        return body

    def _sample(self, pattern: re.Pattern[str], name: str) -> tuple[int, dict[str, Any], re.Match[str]] | None:
        """(run number, sample row, match) for a figure or asset name, or None."""
        match = pattern.match(name)
        n = self._run(match.group(1)) if match else None
        row = self._rows[n].get(match.group(2)) if match and n is not None else None
        return (n, row, match) if match and n is not None and row is not None else None

    def figure(self, name: str) -> bytes | None:
        """``data/<name>`` for a figure (``r0/fig/<key>/window.png``), drawn now, or None."""
        from ecgtrace.views.viewer_sample import render_sample_figure

        found = self._sample(FIGURE, name)
        if found is None:
            return None
        n, row, match = found
        with self._draw_lock:
            return render_sample_figure(self.runs[n], row, match.group(3))

    def asset(self, name: str) -> Path | None:
        """The file behind ``data/<name>`` for an image asset, resolved inside the run or dataset folder, or None."""
        from ecgtrace.views.viewer_sample import asset_file

        found = self._sample(ASSET, name)
        if found is None:
            return None
        n, row, match = found
        path = asset_file(self.runs[n], row, match.group(3))
        return path if path is not None and path.suffix.lower() == "." + match.group(4) else None
