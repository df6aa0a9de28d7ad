"""The viewer in a real headless Chromium (Debian's /usr/bin/chromium, driven by Playwright; no browser is downloaded).

The page loads, the plots are there, filters and search give the counts the
run's rows give, a sample opens with its ECG (green true span, blue chosen
span), two runs compare, the counterfactual pair shows one above the other,
the static folder works from ``file://``; no console error, and no payload
from model or item text ever runs. Screenshots are kept under the test's tmp
folder and in ``tests/artifacts/`` (git-ignored).
"""

from __future__ import annotations

import io
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ecgtrace.views.run_view import open_run
from ecgtrace.views.viewer_server import ViewerServer
from ecgtrace.views.viewer_site import ViewerSite
from tests.support.viewer_runs import PAYLOAD

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the dev extra) is not installed")

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
ARTIFACTS = ROOT / "tests" / "artifacts"
GREEN_ON_PAPER = (191, 225, 189)  # the true-evidence shade over ECG paper (tools/_render_paper.py)


@pytest.fixture(scope="module")
def browser(viewer_runs: dict[str, Path]) -> Iterator[Any]:
    """Started after the runs are written: Playwright's sync API keeps an event loop running in this thread."""
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium not installed at /usr/bin/chromium (Debian package 'chromium'; CI installs it)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def server(viewer_runs: dict[str, Path]) -> Iterator[ViewerServer]:
    """Runs A (0), B (1), the prior run (2) and the QA run (3)."""
    site = ViewerSite([open_run(viewer_runs[name]) for name in ("a", "b", "prior", "qa")])
    site.warm()
    served = ViewerServer(site).start()
    yield served
    served.stop()


class Tab:
    """A page that records console errors and uncaught exceptions."""

    def __init__(self, browser: Any) -> None:
        self.page = browser.new_page(viewport={"width": 1500, "height": 1100})
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def go(self, url: str, ready: str) -> None:
        self.page.goto(url)
        self.page.wait_for_selector(ready)

    def wait(self, expression: str, timeout_s: float = 30.0) -> None:
        """Wait until ``expression`` holds in the page. (Playwright's wait_for_function evaluates a string, which the viewer's
        CSP forbids, as it should; page.evaluate goes through the DevTools protocol instead.)"""
        deadline = time.monotonic() + timeout_s
        while not self.page.evaluate(expression):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {expression}")
            time.sleep(0.02)

    def count(self) -> int:
        return int(self.page.inner_text("#match-count").split()[0])

    def not_pwned(self) -> None:
        page = self.page
        assert page.evaluate("window.__pwned") is None
        assert "PWNED" not in page.title()
        assert page.query_selector("#bold-inject") is None

    def shot(self, tmp_path: Path, name: str, selector: str | None = None) -> Path:
        path = tmp_path / f"{name}.png"
        (self.page.locator(selector).screenshot(path=str(path)) if selector else self.page.screenshot(path=str(path), full_page=True))
        if (ROOT / ".gitignore").read_text().find("/tests/artifacts/") >= 0:
            ARTIFACTS.mkdir(exist_ok=True)
            shutil.copy(path, ARTIFACTS / path.name)
        return path

    def close(self) -> None:
        self.page.close()


@pytest.fixture()
def tab(browser: Any) -> Iterator[Tab]:
    opened = Tab(browser)
    yield opened
    opened.close()


def _rows(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]


def test_harness_runs_the_payload_when_it_is_not_escaped(tab: Tab) -> None:
    """Positive control: the same payload put in as markup does run in this browser, so the checks below can fail."""
    tab.page.set_content("<!DOCTYPE html><html><body><div id=x></div></body></html>")
    tab.page.evaluate("(p) => { document.getElementById('x').innerHTML = p; }", PAYLOAD)
    tab.page.wait_for_function("window.__pwned === 1")
    assert tab.page.query_selector("#bold-inject") is not None


def test_overview_draws_plots_with_chance_and_prior(tab: Tab, server: ViewerServer, viewer_runs: dict[str, Path], tmp_path: Path) -> None:
    tab.go(server.url, "body[data-ready=overview] #chart-stages")
    results = json.loads((viewer_runs["a"] / "results.json").read_text())
    stages = results["overall"]["stages"]
    page = tab.page
    assert page.locator("#chart-stages rect.bar").count() == len(stages)
    assert page.locator("#chart-stages line.ref-chance").count() == len(stages) + 1  # one per bar, one in the legend
    assert page.locator("#chart-stages line.ref-prior").count() >= 2
    assert page.locator("#chart-depth rect.bar").count() == 8 and page.locator("#chart-heatmap rect.cell").count() == 3 * 8
    assert "IDA" in page.inner_text(".cards") and f"{100 * results['overall']['ida']['value']:.1f}%" in page.inner_text(".cards")
    usage = page.inner_text("#usage")
    assert "scripted-a" in usage and "$" in usage and "price: $2" in usage
    tab.shot(tmp_path, "viewer-overview")
    page.click("#chart-heatmap .cell-group.link >> nth=0")  # a heatmap cell opens its wrong samples
    page.wait_for_selector("#samples-table")
    assert "outcome=wrong" in page.url and "diagnosis=" in page.url
    assert not tab.errors, tab.errors


def test_samples_table_filters_search_and_sort(tab: Tab, server: ViewerServer, viewer_runs: dict[str, Path], tmp_path: Path) -> None:
    rows = _rows(viewer_runs["a"])
    asked = lambda r: [t for t in r["turns"] if t["asked"]]  # noqa: E731
    tab.go(server.url + "?view=samples", "#samples-table tbody tr")
    page = tab.page
    assert tab.count() == len(rows) == 6

    def expect(select: str, value: str, count: int) -> None:
        page.select_option(select, value)
        tab.wait(f"document.querySelector('#match-count').textContent.startsWith('{count} of')")
        assert page.locator("#samples-table tbody tr").count() == count

    expect("#f-outcome", "wrong", sum(1 for r in rows if not all(t["correct"] for t in asked(r))))
    expect("#f-stage", "grounding:wave", sum(1 for r in rows if any(t.get("kind") == "wave" and not t["correct"] for t in r["turns"])))
    assert tab.count() == 3
    page.click("#f-reset")
    tab.wait("document.querySelector('#match-count').textContent.startsWith('6 of')")
    expect("#f-parse", "yes", sum(1 for r in rows if any(not t["parse_ok"] and not t["error"] for t in r["turns"])))
    assert page.inner_text("#samples-table tbody tr td.c-id") == rows[1]["id"]
    expect("#f-parse", "", 6)
    expect("#f-error", "yes", 1)
    assert page.inner_text("#samples-table tbody tr td.c-id") == rows[3]["id"]
    expect("#f-error", "", 6)
    expect("#f-first", "finding", 1)
    expect("#f-first", "none", 1)
    assert page.inner_text("#samples-table tbody tr td.c-id") == rows[5]["id"]
    expect("#f-first", "", 6)
    expect("#f-diagnosis", "af", sum(1 for r in rows if r["diagnosis"] == "af"))
    expect("#f-diagnosis", "", 6)
    page.fill("#f-q", "banana")
    tab.wait("document.querySelector('#match-count').textContent.startsWith('1 of')")
    page.fill("#f-q", "")
    tab.wait("document.querySelector('#match-count').textContent.startsWith('6 of')")
    page.fill("#f-q", "onerror")  # the payload is searchable text, nothing more
    tab.wait("document.querySelector('#match-count').textContent.startsWith('1 of')")
    assert page.inner_text("#samples-table tbody tr td.c-id") == rows[0]["id"]
    page.fill("#f-q", "")
    tab.wait("document.querySelector('#match-count').textContent.startsWith('6 of')")
    page.click("button.sort[data-col=id]")
    page.click("button.sort[data-col=id]")
    tab.wait("document.querySelector('th[aria-sort=descending]') !== null")
    ids = page.locator("#samples-table tbody td.c-id").all_inner_texts()
    assert ids == sorted((r["id"] for r in rows), reverse=True)
    assert "sort=id" in page.url and "dir=desc" in page.url
    tab.shot(tmp_path, "viewer-samples")
    tab.not_pwned()
    assert not tab.errors, tab.errors


def _colour_counts(png: bytes) -> tuple[int, int]:
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)
    green = int(np.all(np.abs(pixels - np.array(GREEN_ON_PAPER)) <= 14, axis=-1).sum())
    blue = int(((pixels[..., 2] > 150) & (pixels[..., 0] < 110) & (pixels[..., 1] < 140)).sum())
    return green, blue


def test_one_sample_turns_beside_the_ecg_and_no_payload_runs(tab: Tab, server: ViewerServer, viewer_runs: dict[str, Path],
                                                             tmp_path: Path) -> None:
    rows = _rows(viewer_runs["a"])
    tab.go(server.url + "?sample=" + rows[0]["id"], "#chat article.turn")
    page = tab.page
    assert page.locator("#chat article.turn").count() == len(rows[0]["turns"]) == 7
    raw = page.inner_text("#turn-0 pre.raw")
    assert PAYLOAD in raw  # shown as text, character for character
    page.click("#turn-0 details.reasoning summary")
    assert PAYLOAD in page.inner_text("#turn-0 details.reasoning pre")
    facts = page.inner_text("#turn-4 dl.turn-facts")
    assert "truth" in facts and rows[0]["turns"][4]["answer"] in facts and "latency" in facts and "tokens" in facts
    tab.wait("document.querySelector('#ecg-img').complete && document.querySelector('#ecg-img').naturalWidth > 1000")
    green, blue = _colour_counts(page.locator("#ecg-view").screenshot())
    assert green > 300, "no green true-evidence span visible"
    assert blue > 30, "no blue chosen span visible"
    assert "green: true evidence" in page.inner_text("#ecg-legend") and " s" in page.inner_text("#ecg-legend")
    tab.shot(tmp_path, "viewer-sample")
    width = page.evaluate("document.querySelector('#ecg-img').getBoundingClientRect().width")
    page.click("#zoom-in")
    page.click("#zoom-in")
    assert page.evaluate("document.querySelector('#ecg-img').getBoundingClientRect().width") > 1.4 * width
    page.click("#turn-4 button.show-ecg")  # the wave-grounding turn's own figure
    assert page.get_attribute("#ecg-img", "src").endswith("/t4.png")
    tab.wait("document.querySelector('#ecg-img').complete && document.querySelector('#ecg-img').naturalWidth > 1000")
    page.click("#next-sample")
    page.wait_for_selector(f"h2:has-text('{rows[1]['id']}')")
    tab.not_pwned()
    tab.go(server.url + "?sample=" + rows[5]["id"], "#chat article.turn")  # the payload in an item's question
    assert PAYLOAD in tab.page.inner_text("#turn-0 pre.prompt")
    tab.not_pwned()
    assert not tab.errors, tab.errors
    # second line of defence: even markup forced into the page cannot run its handler under the viewer's CSP
    page.evaluate("(p) => { document.body.insertAdjacentHTML('beforeend', p); }", PAYLOAD)
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None


def test_counterfactual_pair_is_shown_one_above_the_other(tab: Tab, viewer_runs: dict[str, Path], tmp_path: Path) -> None:
    """The extension point: a sample row carrying ``counterfactual`` (edited strip + answers on it)."""
    from PIL import Image

    run = tmp_path / "run"
    shutil.copytree(viewer_runs["a"], run)
    (run / "cf").mkdir()
    Image.new("RGB", (900, 240), (200, 220, 255)).save(run / "cf" / "edited.png")
    rows = _rows(run)
    edited_turn = {**rows[2]["turns"][0], "raw": f"Yes {PAYLOAD}", "index": 0}
    rows[2]["counterfactual"] = {"image": "cf/edited.png", "description": "P waves removed from beats 3-5", "turns": [edited_turn]}
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    served = ViewerServer(ViewerSite([open_run(run)])).start()
    try:
        tab.go(served.url + "?sample=" + rows[2]["id"], "#counterfactual")
        page = tab.page
        page.locator("#counterfactual .cf-edited").scroll_into_view_if_needed()  # its images load lazily, when seen
        tab.wait("[...document.querySelectorAll('#counterfactual img')].every((i) => i.complete && i.naturalWidth > 0)")
        original = page.locator("#counterfactual .cf-original img").bounding_box()
        edited = page.locator("#counterfactual .cf-edited img").bounding_box()
        assert original and edited and original["y"] + original["height"] <= edited["y"] + 1  # one above the other
        assert "P waves removed" in page.inner_text("#counterfactual")
        assert PAYLOAD in page.inner_text("#counterfactual article.turn pre.raw")
        tab.not_pwned()
        tab.shot(tmp_path, "viewer-counterfactual", "#counterfactual")
        assert not tab.errors, tab.errors
    finally:
        served.stop()


def test_two_runs_side_by_side(tab: Tab, server: ViewerServer, viewer_runs: dict[str, Path], tmp_path: Path) -> None:
    tab.go(server.url + "?compare=0,1", "#mcnemar")
    page = tab.page
    row = page.locator("#mcnemar tr", has_text="stage:grounding:wave").inner_text().split("\t")
    assert row[4:6] == ["1", "2"]  # A right B wrong: item 1; A wrong B right: items 2 and 4
    assert page.locator("#diffs tbody tr").count() == 5
    tab.shot(tmp_path, "viewer-compare")
    sample = _rows(viewer_runs["a"])[1]["id"]
    page.click(f"#diffs a:has-text('{sample}') >> nth=0")
    page.wait_for_selector("#pair .pair-row")
    assert page.locator("#pair .pair-row.differs").count() == 2  # its finding (A unreadable) and its wave span (B wrong)
    page.click("#pair .pair-row[data-index='4'] article.turn >> nth=1 >> button.show-ecg")  # B's wave turn, on B's own figure
    assert page.get_attribute("#ecg-img", "src").startswith("data/r1/fig/") and page.get_attribute("#ecg-img", "src").endswith("/t4.png")
    tab.wait("document.querySelector('#ecg-img').complete && document.querySelector('#ecg-img').naturalWidth > 1000")
    tab.shot(tmp_path, "viewer-pair")
    tab.not_pwned()
    assert not tab.errors, tab.errors


def test_qa_run_overview_filters_and_sample(tab: Tab, server: ViewerServer, viewer_runs: dict[str, Path], tmp_path: Path) -> None:
    rows = _rows(viewer_runs["qa"])
    tab.go(server.url + "?run=3", "#chart-tasks")
    page = tab.page
    for chart in ("#chart-scores", "#chart-count_error", "#chart-timing_error"):
        assert page.locator(chart).count() == 1, chart
    tab.shot(tmp_path, "viewer-qa-overview")
    tab.go(server.url + "?run=3&view=samples", "#samples-table tbody tr")
    page.select_option("#f-stage", "closed_timing")
    tab.wait(f"document.querySelector('#match-count').textContent.startsWith('{sum(1 for r in rows if r['task'] == 'closed_timing')} of')")
    page.click("#samples-table tbody tr a")
    page.wait_for_selector("#chat article.turn")
    tab.wait("document.querySelector('#ecg-img').complete && document.querySelector('#ecg-img').naturalWidth > 1000")
    tab.go(server.url + "?run=3&sample=" + next(r["id"] for r in rows if r["task"] == "open_evidence"), "#chat article.turn")
    assert "<script>" in page.inner_text("#chat pre.raw")  # the report fixture's injection, as text
    tab.not_pwned()
    assert not page.evaluate("document.title").startswith("PWNED")
    assert not tab.errors, tab.errors


def test_static_folder_works_from_file_urls(tab: Tab, viewer_runs: dict[str, Path], tmp_path: Path) -> None:
    from ecgtrace.views.viewer_static import export_static

    site = ViewerSite([open_run(viewer_runs["a"]), open_run(viewer_runs["b"])])
    out = tmp_path / "share"
    export_static(site, out, max_images=2)  # the windows of the first two samples: enough for the sample below
    index = (out / "index.html").as_uri()
    tab.go(index, "#chart-stages")
    page = tab.page
    page.click("#nav-samples")
    page.wait_for_selector("#samples-table tbody tr")
    page.select_option("#f-outcome", "wrong")
    tab.wait("document.querySelector('#match-count').textContent.startsWith('5 of')")
    rows = _rows(viewer_runs["a"])
    tab.go(f"{index}?sample={rows[0]['id']}", "#chat article.turn")  # a ?sample=ID link into the static folder
    tab.wait("document.querySelector('#ecg-img').complete && document.querySelector('#ecg-img').naturalWidth > 1000")
    tab.go(index + "?compare=0,1", "#mcnemar")
    tab.not_pwned()
    assert not tab.errors, tab.errors
