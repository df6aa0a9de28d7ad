"""A probe run in the viewer: one row per kept pair (the original's sample, the edited strip and the answers on it),
the paired metrics in the overview, the table filtered by kind; model text in a pair stays text."""

from __future__ import annotations

import asyncio
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.agents.conftest import synth_build  # noqa: F401  (the audit items of the synthetic record)
from tests.agents.probe.test_probe import dataset  # noqa: F401  (the probe tests' dataset on the synthetic record)
from tests.support.viewer_runs import PAYLOAD

GREEN_ON_PAPER = (191, 225, 189)  # the true-evidence shade over ECG paper (tools/_render_paper.py)


@pytest.fixture(scope="module")
def probe_run(dataset, tmp_path_factory) -> Path:  # noqa: F811
    """The oracle over a small probe set (PVC audit items, QA presence items; every kind)."""
    from ecgtrace.agents.exam.examinees import make_examinee
    from ecgtrace.agents.probe.builder import build_probe_set
    from ecgtrace.graphs.probe_runner import load_probe_set, run_probe
    from ecgtrace.runlog import RunDir

    folder = tmp_path_factory.mktemp("viewer-probe")
    build_probe_set(dataset, folder / "set", seed=0, max_per_group=1, only=["pvc", "closed_presence", "closed_timing"])
    run = RunDir.open(folder / "run", {"kind": "probe", "model": "oracle"}, kind="probe")
    asyncio.run(run_probe(load_probe_set(folder / "set"), run, make_examinee("oracle", seed=0), modality="text"))
    return run.path


def _payload(path: Path) -> Any:
    text = path.read_text(encoding="ascii")
    return json.loads(text[text.index(",") + 1: text.rindex(")")])


def _kept(run: Path) -> list[dict[str, Any]]:
    results = json.loads((run / "results.json").read_text())
    pairs = [json.loads(line) for line in (Path(results["probe_set"]["path"]) / "pairs.jsonl").read_text().splitlines()]
    return [p for p in pairs if p["status"] == "kept"]


def _green(png: bytes) -> int:
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    return sum(n for n, colour in image.getcolors(1 << 20) if all(abs(a - b) <= 6 for a, b in zip(colour, GREEN_ON_PAPER)))


def test_view_static_shows_one_row_per_kept_pair_with_the_paired_metrics(probe_run: Path, tmp_path: Path) -> None:
    from ecgtrace.cli import main
    from ecgtrace.views.run_view import sample_key

    kept = _kept(probe_run)
    assert main(["view", str(probe_run), "--static", str(tmp_path / "site")]) == 0
    data = tmp_path / "site" / "data" / "r0"
    index = _payload(data / "index.js")
    assert index["kind"] == "probe"
    rows = [dict(zip(index["columns"], r)) for r in index["rows"]]
    assert sorted(r["id"] for r in rows) == sorted(p["id"] for p in kept)  # one row per kept pair, named by the pair
    assert {r["pkind"] for r in rows} >= {"remove", "swap", "control", "move"} and {r["source"] for r in rows} == {"audit", "qa"}
    for r in rows:  # the oracle does on every paired turn what the pair asks (change, stay, follow)
        assert r["paired"] > 0 and r["followed"] == r["paired"] and r["cf_right"] == r["cf_asked"] > 0
    results = json.loads((probe_run / "results.json").read_text())
    overview = _payload(data / "overview.js")
    metrics = {m["key"]: m for m in overview["metrics"]}
    assert [m["key"] for m in overview["metrics"]][:4] == ["sensitivity", "grounded_accuracy", "localization_follow", "invariance"]
    for key in ("sensitivity", "invariance"):
        assert metrics[key]["value"] == results["overall"][key]["value"] == 1.0
        assert metrics[key]["ci95"] == results["overall"][key]["ci95"] and metrics[key]["chance"] == results["overall"][key]["chance"]
    assert {b["kind"] for b in overview["per_kind"]} == set(results["per_kind"]) and overview["plots"] == []

    pair = next(p for p in kept if p["kind"] == "remove" and p["source"] == "audit")
    detail = _payload(data / "s" / f"{sample_key(pair['id'])}.js")
    cf = detail["counterfactual"]
    raw = {r["id"]: r for r in map(json.loads, (probe_run / "samples.jsonl").read_text().splitlines())}
    assert cf["description"].startswith("remove") and "truth before" in cf["description"]
    assert cf["turns"] == raw[pair["id"]]["sample"]["turns"] and detail["turns"] == raw[pair["original"]]["sample"]["turns"]  # each strip's own answers
    assert ["original item", pair["original"]] in detail["facts"] and ["pair kind", "remove"] in detail["facts"]
    figures = {f["name"]: f for f in detail["figures"]}
    assert "window" in figures and "cf" in figures
    assert [[s["t0_ms"], s["t1_ms"]] for s in figures["cf"]["true"]] == pair["edit"]["spans_ms"]  # the report's span data
    edited = (tmp_path / "site" / figures["cf"]["url"]).read_bytes()
    assert edited.startswith(b"\x89PNG") and _green(edited) > 0  # the edited spans shaded

    from ecgtrace.views._report_probe import strip_png

    plain = strip_png(Path(results["probe_set"]["path"]), pair["files"]["window"], [], px_per_mm=6)
    assert plain is not None and _green(plain) == 0  # the green comes from the edit spans, not the trace


def _with_payload(probe_run: Path, tmp_path: Path) -> tuple[Path, str]:
    """A copy of the run whose first audit original answers, and its remove counterfactual answers, with the payload."""
    run = tmp_path / "run"
    shutil.copytree(probe_run, run)
    pair = next(p for p in _kept(probe_run) if p["kind"] == "remove" and p["source"] == "audit")
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    for row in rows:
        if row["id"] in (pair["original"], pair["id"]):
            row["sample"]["turns"][0]["raw"] = f"Yes {PAYLOAD}"
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run, pair["id"]


def test_model_text_of_a_pair_is_data_never_markup(probe_run: Path, tmp_path: Path) -> None:
    from ecgtrace.views.run_view import open_run, sample_key
    from ecgtrace.views.viewer_site import ViewerSite

    run, pair_id = _with_payload(probe_run, tmp_path)
    site = ViewerSite([open_run(run)])
    body = site.data(f"r0/s/{sample_key(pair_id)}")
    assert body is not None and b"<" not in body and b">" not in body  # escaped inside the JSON
    detail = json.loads(body.decode("ascii")[body.decode("ascii").index(",") + 1: -3])
    assert PAYLOAD in detail["turns"][0]["raw"] and PAYLOAD in detail["counterfactual"]["turns"][0]["raw"]
    assert b"<" not in (site.data("r0/text") or b"<")


def test_two_probe_runs_are_listed_but_not_compared(probe_run: Path, tmp_path: Path) -> None:
    from ecgtrace.views.run_view import open_run
    from ecgtrace.views.viewer_site import ViewerSite
    from ecgtrace.views.viewer_static import export_static

    shutil.copytree(probe_run, tmp_path / "again")
    site = ViewerSite([open_run(probe_run), open_run(tmp_path / "again")])
    summary = export_static(site, tmp_path / "site", max_images=0)
    app = _payload(tmp_path / "site" / "data" / "app.js")
    assert [r["kind"] for r in app["runs"]] == ["probe", "probe"] and app["pairs"] == []
    assert summary["samples"] == 2 * len(_kept(probe_run)) and summary["figures"] == 0


def test_a_probe_run_whose_probe_set_is_gone_is_refused_with_one_line(probe_run: Path, tmp_path: Path, capsys) -> None:
    from ecgtrace.cli import main

    run = tmp_path / "run"
    shutil.copytree(probe_run, run)
    results = json.loads((run / "results.json").read_text())
    results["probe_set"]["path"] = str(tmp_path / "gone")
    (run / "results.json").write_text(json.dumps(results))
    assert main(["view", str(run), "--static", str(tmp_path / "site")]) != 0
    err = capsys.readouterr().err
    assert "error:" in err and "probe set" in err and "Traceback" not in err and not (tmp_path / "site").exists()


def test_the_pair_view_shows_both_strips_and_filters_by_kind(probe_run: Path, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the dev extra) is not installed")
    from tests.views.test_viewer_browser import CHROMIUM, FLAGS, Tab

    if not CHROMIUM.exists():
        pytest.skip("headless Chromium not installed at /usr/bin/chromium")
    from ecgtrace.views.run_view import open_run
    from ecgtrace.views.viewer_server import ViewerServer
    from ecgtrace.views.viewer_site import ViewerSite

    run, pair_id = _with_payload(probe_run, tmp_path)
    n_control = sum(1 for p in _kept(run) if p["kind"] == "control")
    served = ViewerServer(ViewerSite([open_run(run)])).start()
    try:
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
            tab = Tab(browser)
            page = tab.page
            tab.go(served.url + "?run=0", "#per-kind")
            assert "Sensitivity" in page.inner_text(".cards") and "chance" in page.inner_text(".cards")
            tab.go(served.url + "?run=0&view=samples", "#samples-table tbody tr")
            page.select_option("#f-pkind", "control")
            tab.wait(f"document.querySelector('#match-count').textContent.startsWith('{n_control} of')")
            tab.go(served.url + "?sample=" + pair_id, "#counterfactual")
            page.locator("#counterfactual .cf-edited").scroll_into_view_if_needed()
            tab.wait("[...document.querySelectorAll('#counterfactual img')].length === 2 && "
                     "[...document.querySelectorAll('#counterfactual img')].every((i) => i.complete && i.naturalWidth > 0)")
            original = page.locator("#counterfactual .cf-original img").bounding_box()
            edited = page.locator("#counterfactual .cf-edited img").bounding_box()
            assert original and edited and original["y"] + original["height"] <= edited["y"] + 1  # one above the other
            assert "remove" in page.inner_text("#counterfactual") and "green" in page.inner_text("#counterfactual .cf-edited")
            assert PAYLOAD in page.inner_text("#counterfactual article.turn pre.raw")  # the answer on the edited strip, as text
            assert PAYLOAD in page.inner_text("#chat pre.raw")
            tab.not_pwned()
            tab.shot(tmp_path, "viewer-probe-pair", "#counterfactual")
            assert not tab.errors, tab.errors
            tab.close()
            browser.close()
    finally:
        served.stop()
