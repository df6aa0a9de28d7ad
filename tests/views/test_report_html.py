"""The static HTML report: audit and QA runs, escaping, figures; and a real headless Chromium check."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ecgtrace.agents.exam.examinees import Examinee, Reply  # noqa: E402
from ecgtrace.cli import main  # noqa: E402
from ecgtrace.views.report_html import build_report, render_html  # noqa: E402
from ecgtrace.runlog import RunDir  # noqa: E402
from tests.support.audit_items import write_audit  # noqa: E402
from tests.support.viewer_runs import write_qa_run  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
INJECTION = ('<script>document.title="PWNED";document.body.insertAdjacentHTML("beforeend","<div id=pwned>x</div>")</script>'
             '<img src=x onerror="document.title=\'PWNED-IMG\';document.body.insertAdjacentHTML(\'beforeend\',\'<p id=pwned-img>y</p>\')">'
             '<b id=bold-inject>bold</b>')
PAPER = (255, 243, 243)  # ECG-paper background of tools/_render_paper.py
GREEN_ON_PAPER = (191, 225, 189)  # HIGHLIGHT_RGBA (0.1, 0.7, 0.2, 0.28) over the paper


class Scripted(Examinee):
    """Truth everywhere except: an injection for chosen samples, the wrong wave span."""

    name = "scripted"

    def __init__(self, inject: set[str]) -> None:
        self.inject = inject

    async def answer(self, messages, turn):  # noqa: ANN001
        if turn["sample_id"] in self.inject and turn["index"] == 0:
            return Reply(raw=f"Answer: {INJECTION}", reasoning=INJECTION, latency_ms=3.0)
        if turn.get("kind") == "wave":
            return Reply(raw=next(o for o in turn["options"] if o != turn["answer"]), latency_ms=3.0)
        answer = turn["answer"]
        return Reply(raw=", ".join(answer) if isinstance(answer, list) else str(answer), latency_ms=3.0)


@pytest.fixture(scope="module")
def runs(synth_record, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One audit run and one QA run over the synthetic record, with injected model text."""
    from ecgtrace.agents.audit.format import load_audit
    from ecgtrace.graphs.audit_runner import run_audit

    base = tmp_path_factory.mktemp("report")
    record_path = str(synth_record.record_path)
    audit_path = write_audit(base / "audit", 3, seed=1, loops=1)
    rows = [json.loads(line) for line in audit_path.read_text().splitlines()]
    for row in rows:
        row["record"]["path"] = record_path
        row["record"]["duration_s"] = 1800.0
    audit_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    audit = load_audit(audit_path)
    run = RunDir.open(base / "audit_run", {"dataset_sha256": audit.sha256, "model": "scripted"}, {"dataset_path": str(audit.path)})
    asyncio.run(run_audit(audit, run, Scripted({rows[0]["id"]}), modality="text", concurrency=2))

    qa_run = write_qa_run(base, record_path, Scripted)
    return {"audit": run.path, "qa": qa_run, "audit_items": audit_path}


def _external_refs(html: str) -> list[str]:
    """src/href/action values of real tags (escaped text such as &lt;img src=x&gt; is not a tag)."""
    refs = [r for tag in re.findall(r"<[a-zA-Z][^>]*>", html) for r in re.findall(r"""(?:src|href|action)\s*=\s*["']?([^"' >]+)""", tag, re.I)]
    return [r for r in refs if not r.startswith(("data:", "#"))]


@pytest.mark.parametrize("kind", ["audit", "qa"])
def test_report_is_one_escaped_self_contained_file(runs: dict[str, Path], kind: str) -> None:
    assert main(["report", str(runs[kind])]) == 0
    html = (runs[kind] / "report.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert "<script" not in html.lower()                     # the report has no script of its own; the injected one is text
    assert "onerror=" not in html.replace("onerror=&quot;", "")  # the attribute only appears escaped
    assert "&lt;script&gt;document.title=&quot;PWNED&quot;" in html
    assert "&lt;b id=bold-inject&gt;" in html
    assert not _external_refs(html), _external_refs(html)  # no CDN, no server, no files next to it
    images = re.findall(r'<img src="(data:image/png;base64,[A-Za-z0-9+/=]+)"', html)
    assert images and len(images) == html.count("<img ")
    assert "Content-Security-Policy" in html


def test_audit_report_tables_and_grounding_figures(runs: dict[str, Path]) -> None:
    html = render_html(runs["audit"])
    for name in ("IDA", "GT-RDA", "Completion", "Depth (0-4)", "Per-stage accuracy", "grounding:wave"):
        assert name in html
    samples = [json.loads(line) for line in (runs["audit"] / "samples.jsonl").read_text().splitlines()]
    grounding = [t for s in samples for t in s["turns"] if t["stage"] == "grounding" and t["kind"] in ("wave", "lead")]
    # every wave/lead grounding turn has a figure drawn from the record, captioned with both spans
    assert html.count("drawn from record") >= len(grounding) > 0
    wave = next(t for s in samples for t in s["turns"] if t.get("kind") == "wave")
    t0 = float(re.search(r"\[(\d+\.\d+)s", wave["answer"]).group(1))
    assert f"green: true evidence</span> {t0:.3f}-" in html
    assert html.count("<details class=sample") == len(samples)


def test_qa_report_tables_and_figures(runs: dict[str, Path]) -> None:
    html = render_html(runs["qa"])
    for name in ("Summary per task", "ScoreMAE", "timestamp F1", "Per diagnosis / finding", "statistics within tolerance", "closed_timing"):
        assert name in html
    assert "drawn from record" in html
    assert html.count("<details class=sample") == 13


def test_report_of_a_folder_that_is_not_a_run_is_one_error_line(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    assert main(["report", str(tmp_path)]) == 2
    assert "not an audit run folder" in capsys.readouterr().err


def test_figures_fall_back_when_the_record_is_missing(runs: dict[str, Path], tmp_path: Path) -> None:
    """No record on disk: the item's own image asset is shown above a matplotlib strip with the same spans."""
    from PIL import Image

    copy = tmp_path / "run"
    shutil.copytree(runs["audit"], copy)
    (tmp_path / "assets").mkdir()
    rows = [json.loads(line) for line in runs["audit_items"].read_text().splitlines()]
    for row in rows:
        row["record"]["path"] = "/nonexistent/holter"
        row["assets"]["image"] = f"assets/{row['id']}.png"
        Image.new("RGB", (200, 60), PAPER).save(tmp_path / row["assets"]["image"])
    (tmp_path / "audit.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    header = json.loads((copy / "header.json").read_text())
    header["settings"]["dataset_path"] = str(tmp_path / "audit.jsonl")
    (copy / "header.json").write_text(json.dumps(header))
    html = render_html(copy, max_images=2)
    assert html.count("drawn from asset+strip") == 2 and "drawn from record" not in html
    assert "--max-images limit reached" in html


# ------------------------------------------------------------------ real browser

def _chromium(tmp_path: Path, page: Path, *extra: str) -> subprocess.CompletedProcess:
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium not installed at /usr/bin/chromium (Debian package 'chromium'; CI installs it)")
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
           "--hide-scrollbars", "--virtual-time-budget=3000", *extra, page.resolve().as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)


def test_browser_harness_runs_scripts_positive_control(tmp_path: Path) -> None:
    """The same payload, unescaped, does run in this headless Chromium: the escaping test below is not vacuous."""
    page = tmp_path / "control.html"
    page.write_text(f"<!DOCTYPE html><html><head><title>control</title></head><body>{INJECTION}</body></html>")
    dom = _chromium(tmp_path, page, "--dump-dom").stdout
    assert "<title>PWNED" in dom and 'id="pwned"' in dom


@pytest.mark.parametrize("csp", [False, True], ids=["escaping-only", "escaping+csp"])
def test_browser_renders_tables_and_images_and_runs_no_injected_code(runs: dict[str, Path], tmp_path: Path, csp: bool) -> None:
    from PIL import Image

    page = build_report(runs["audit"], tmp_path / "report.html", csp=csp)
    title = re.search(r"<title>(.*?)</title>", page.read_text()).group(1)
    dom = _chromium(tmp_path, page, "--dump-dom").stdout
    assert dom, "chromium printed no DOM"
    assert f"<title>{title}</title>" in dom                      # the title was not rewritten
    assert "PWNED" not in re.search(r"<title>(.*?)</title>", dom).group(1)
    for marker in ('id="pwned"', 'id="pwned-img"', 'id="bold-inject"'):
        assert marker not in dom, marker                          # no injected element exists
    assert "&lt;script&gt;document.title=" in dom                # the payload is shown as text
    assert dom.count("<table") >= 3 and "GT-RDA" in dom and "<td>overall</td>" in dom
    if not csp:
        return  # the screenshot is taken of the report as shipped (with its CSP): images must render under it
    shot = tmp_path / "shot.png"
    _chromium(tmp_path, page, "--window-size=1300,4200", f"--screenshot={shot}")
    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=np.int16)

    def near(rgb: tuple[int, int, int], tol: int) -> int:
        return int(np.all(np.abs(pixels - np.array(rgb, dtype=np.int16)) <= tol, axis=-1).sum())

    assert near(PAPER, 2) > 20_000, "no ECG paper visible: the figure did not render"
    assert near(GREEN_ON_PAPER, 8) > 200, "no green evidence highlight visible"


def test_the_header_says_the_kind_also_for_format1_runs(runs: dict[str, Path], tmp_path: Path) -> None:
    """No guessing from rows: an old (format 1) header names its kind through its identity; a new one says it outright."""
    old = tmp_path / "old"
    shutil.copytree(runs["qa"], old)
    header = json.loads((old / "header.json").read_text())
    assert header["format"] == "ecgtrace-run/2" and header["kind"] == "qa"
    header["format"] = "ecgtrace-audit-run/1"
    del header["kind"]
    (old / "header.json").write_text(json.dumps(header))
    rows = [json.loads(line) for line in (old / "samples.jsonl").read_text().splitlines()]
    (old / "samples.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "kind"}) + "\n" for r in rows))
    (old / "results.json").unlink()
    html = render_html(old, max_images=0)
    assert "ecgtrace qa report" in html and "Summary per task" in html and "<td>kind</td><td>qa</td>" in html


def test_an_old_run_folder_loads_and_says_which_metric_definitions_it_used(runs: dict[str, Path], tmp_path: Path) -> None:
    """A run begun under metrics version 1 (header without metrics_version, results.json of version 1) is shown with
    today's definitions, recomputed from its samples, and the report says so."""
    old = tmp_path / "old"
    shutil.copytree(runs["audit"], old)
    header = json.loads((old / "header.json").read_text())
    assert header["metrics_version"] == "2"
    del header["metrics_version"]
    (old / "header.json").write_text(json.dumps(header))
    results = json.loads((old / "results.json").read_text())
    results["provenance"]["version"] = "1"
    results["overall"]["gt_rda"] = {"value": 0.123456, "k": 1, "n": 8, "ci95": [0.0, 1.0]}  # what version 1 might have said
    (old / "results.json").write_text(json.dumps(results))
    html = render_html(old, max_images=0)
    assert "<td>metric definitions at start</td><td>version 1</td>" in html
    assert "recomputed with version 2 (results.json holds version 1)" in html
    assert "12.3%" not in html and "Decision acc." in html


@pytest.mark.parametrize("kind", ["audit", "qa"])
def test_report_has_the_viewers_plots_as_inline_svg_without_script(runs: dict[str, Path], kind: str) -> None:
    """The same plot specs the viewer draws in the browser, drawn here in Python: bars with intervals, chance and prior lines."""
    from ecgtrace.views.plots import run_plots
    from ecgtrace.views.run_view import open_run

    html = render_html(runs[kind], max_images=0)
    specs = run_plots(open_run(runs[kind]))
    assert specs and all(f'id="chart-{s["id"]}"' in html for s in specs)
    first = specs[0]
    assert html.count('class="bar"') >= len(first["bars"]) and 'class="ref ref-chance"' in html and 'class="ref ref-prior"' in html
    if kind == "qa":
        assert 'id="chart-timing_error"' in html and 'id="chart-count_error"' in html
    else:
        assert 'id="chart-depth"' in html and 'id="chart-heatmap"' in html
    assert "<script" not in html.lower() and "Tokens and cost" in html


def test_the_report_shows_skipped_samples_epochs_tokens_and_cost(tmp_path):
    import asyncio

    from ecgtrace.agents.exam.budget import PromptBudget
    from ecgtrace.agents.exam.examinees import Examinee, Reply
    from ecgtrace.agents.exam.examinees.base import as_text
    from ecgtrace.agents.audit.format import load_audit
    from ecgtrace.graphs.audit_runner import run_audit
    from ecgtrace.runlog import RunDir
    from ecgtrace.views.report_html import render_html
    from tests.support.audit_items import write_audit

    class Counted(Examinee):
        name = "counted"

        async def answer(self, messages, turn):  # noqa: ANN001
            return Reply(raw=as_text(turn["answer"]), usage={"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010})

    audit = load_audit(write_audit(tmp_path / "audit", 4, seed=1))
    run = RunDir.open(tmp_path / "run", {"model": "counted", "modality": "text"})
    # a budget that the largest chain of this set does not fit: that sample is skipped, the others are asked twice
    from ecgtrace.agents.audit.examiner import chain_request
    from ecgtrace.agents.exam.budget import estimate_request_tokens

    sizes = sorted(estimate_request_tokens(chain_request(it, audit.base_dir, "text")) for it in audit.items)
    results = asyncio.run(run_audit(audit, run, Counted(), modality="text", epochs=2, budget=PromptBudget(sizes[-1] - 1, "--max-prompt-tokens"),
                                    pricing={"counted": {"in": 1.0, "out": 2.0}}))
    assert results["skipped"]["n"] == 1 and results["n_answered"] == 3
    html = render_html(tmp_path / "run")
    assert "skipped (not asked)" in html and "1 (1 token budget; budget" in html
    assert "not asked: the last turn of its chain needs about" in html
    requests = results["usage"]["requests"]
    assert f"tokens: counted</td><td>{1000 * requests:,} prompt + {10 * requests:,} completion in {requests:,} requests" in html
    assert f"cost (total)</td><td>{results['usage']['cost_usd']:.4f} USD" in html
    assert results["usage"]["cost_usd"] == round(requests * (1000 * 1.0 + 10 * 2.0) / 1e6, 6)
    epochs = html.split("<td>epochs</td><td>")[1].split("</td>")[0]
    assert epochs.startswith("2 (mean ") and "ida 1.000" in epochs and epochs.endswith("samples answering alike in every epoch 100.0%)")
