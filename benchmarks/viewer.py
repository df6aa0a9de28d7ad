"""How fast the viewer opens a large run, in a real headless Chromium (target: a 10,000-sample run opens in under 2 s).

Builds a synthetic audit run of ``--samples`` samples (default 10,000; the
audit's own turn scoring from scripted replies, :mod:`tests.support.viewer_runs`),
then times, for the local server and for a ``--static`` folder opened as
``file://``:

* ``open overview``: navigation to the overview rendered (metrics, plots);
* ``open samples``: the samples table's first page rendered (index of every sample loaded);
* ``filter``: outcome = wrong applied to every sample;
* ``search``: a text query (loads the search texts on first use);
* ``open sample``: one sample's page with its turns (the figure is not waited for; ``figure`` times it).

Server-side costs are printed too: reading the run, computing overviews and
indexes (before the URL is printed), peak memory (MB), and the sizes of the
data files the browser loads.

    nice -n 10 .venv/bin/python benchmarks/viewer.py [--samples 10000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.viewer_runs import noisy, write_audit_run  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
TARGET_S = 2.0


def _timed(page, action, ready: str) -> float:  # noqa: ANN001
    started = time.perf_counter()
    action()
    page.wait_for_selector(ready, timeout=60_000)
    return time.perf_counter() - started


def poll(page, expression: str, timeout_s: float = 60.0) -> None:  # noqa: ANN001
    """Wait until ``expression`` is true in the page (page.evaluate is not subject to the page's CSP; wait_for_function is)."""
    deadline = time.perf_counter() + timeout_s
    while not page.evaluate(expression):
        if time.perf_counter() > deadline:
            raise TimeoutError(expression)
        time.sleep(0.01)


def _timed_poll(page, action, expression: str) -> float:  # noqa: ANN001
    started = time.perf_counter()
    action()
    poll(page, expression)
    return time.perf_counter() - started


def browse(base_url: str, sample_id: str) -> list[tuple[str, float]]:
    """Time the steps in one fresh browser (no cache between runs of this function)."""
    from playwright.sync_api import sync_playwright

    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        rows.append(("open overview", _timed(page, lambda: page.goto(base_url, wait_until="commit"), "body[data-ready=overview] #chart-stages")))
        rows.append(("open samples", _timed(page, lambda: page.goto(base_url + "?view=samples", wait_until="commit"), "body[data-ready=samples] #samples-table tbody tr")))
        count = "document.querySelector('#match-count').textContent"
        before = page.inner_text("#match-count")
        rows.append(("filter (outcome = wrong)", _timed_poll(page, lambda: page.select_option("#f-outcome", "wrong"), f"{count} !== {before!r}")))
        before = page.inner_text("#match-count")
        rows.append(("search (first use)", _timed_poll(page, lambda: page.fill("#f-q", "premature"), f"{count} !== {before!r}")))
        url = base_url + "?sample=" + sample_id
        rows.append(("open sample", _timed(page, lambda: page.goto(url, wait_until="commit"), "body[data-ready=sample] #chat article.turn")))
        started = time.perf_counter()
        poll(page, "(() => { const i = document.querySelector('#ecg-img'); return !!i && i.complete && i.naturalWidth > 0; })()")
        rows.append(("figure (drawn on request)", time.perf_counter() - started))
        browser.close()
        if errors:
            raise SystemExit(f"page errors: {errors}")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--keep", default=None, help="build the run folder here and keep it")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} not found (Debian package 'chromium')")
    from ecgtrace.views.run_view import open_run
    from ecgtrace.views.viewer_server import ViewerServer
    from ecgtrace.views.viewer_site import ViewerSite
    from ecgtrace.views.viewer_static import export_static

    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="viewer-bench-"))
    try:
        started = time.perf_counter()
        run_path = base / "run"
        if not (run_path / "results.json").is_file():
            run_path, _ = write_audit_run(base, args.samples, noisy(0.7), seed=3, loops=None, settings={"price_in": 0.15, "price_out": 0.6})
        build_s = time.perf_counter() - started
        started = time.perf_counter()
        site = ViewerSite([open_run(run_path)])
        read_s = time.perf_counter() - started
        started = time.perf_counter()
        site.warm()
        warm_s = time.perf_counter() - started
        sizes = {name: len(site.data(name) or b"") / 1e6 for name in ("r0/overview", "r0/index", "r0/text")}
        sample_id = site.runs[0].rows[0]["id"]  # the static export draws the first samples' figures (--max-images 20)
        server = ViewerServer(site).start()
        try:
            served = browse(server.url, sample_id)
        finally:
            server.stop()
        started = time.perf_counter()
        static_dir = base / "static"
        shutil.rmtree(static_dir, ignore_errors=True)
        export_static(site, static_dir, max_images=20)
        export_s = time.perf_counter() - started
        static = browse((static_dir / "index.html").as_uri(), sample_id)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    n = len(site.runs[0].rows)
    print(f"\nviewer benchmark: {n} samples, {sum(len(r['turns']) for r in site.runs[0].rows)} turns\n")
    print(f"{'step':<28}{'server (s)':>12}{'static file:// (s)':>20}")
    for (name, a), (_, b) in zip(served, static):
        print(f"{name:<28}{a:>12.3f}{b:>20.3f}")
    print(f"\n{'server-side':<28}{'seconds':>12}")
    for name, value in (("build synthetic run", build_s), ("read run folder", read_s), ("overview + index (warm)", warm_s),
                        ("static export (20 figures)", export_s)):
        print(f"{name:<28}{value:>12.2f}")
    print(f"\ndata files (MB): overview {sizes['r0/overview']:.2f}, index {sizes['r0/index']:.2f}, search texts {sizes['r0/text']:.2f}; "
          f"peak RSS of this process {peak_mb:.0f} MB")
    worst = max(v for name, v in served + static if name in ("open overview", "open samples"))
    verdict = "met" if worst < TARGET_S else "MISSED"
    print(f"target: first load (overview or samples table) under {TARGET_S:.0f} s: {verdict} (slowest {worst:.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
