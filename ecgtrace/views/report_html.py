"""A run as one static HTML file: ``RUNDIR/report.html``.

Works for reasoning-audit runs and QA runs (same run-folder format,
:mod:`ecgtrace.runlog`); the header's ``kind`` says which. The file is self-contained: inline CSS, no scripts,
no server, no network; images are ``data:`` URIs. A Content-Security-Policy
meta tag (``default-src 'none'``) forbids scripts and remote loads as a second
line of defence, but the first is that **every** piece of text that came from a
model, a dataset or a header is passed through :func:`html.escape` before it
touches the page.

Sections: run facts; summary metrics with 95 % intervals (audit: IDA, GT-RDA,
Completion, Depth per diagnosis and per stage; QA: per task and per finding,
report statistics); the viewer's plots as inline SVG drawn in Python
(:mod:`ecgtrace.views.plots`, :mod:`ecgtrace.views.svg`: per-stage or per-task
accuracy with chance and prior lines, depth histogram, per-diagnosis heatmap,
QA error distributions); tokens and cost; then every sample's transcript (prompt, raw answer,
reasoning, parse, truth, score), with a figure for each grounding turn: the
ECG window with the true evidence shaded green and the model's chosen span
outlined in blue (see :mod:`ecgtrace.views._report_images`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ecgtrace.views._report_tables import audit_tables, e, qa_tables, run_table, usage_table
from ecgtrace.jsonio import write_text_atomic
from ecgtrace.views.run_view import RunView, open_run

REPORT = "report.html"
MAX_TEXT_CHARS = 20_000
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5rem;color:#1b1b1b;max-width:1400px}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6rem 0;font-size:.85rem}th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:right;vertical-align:top}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}caption{text-align:left;font-size:.8rem;color:#555;padding:.2rem 0}
table.kv td{text-align:left}.ci,.n{color:#666;font-size:.8em}
details.sample{border:1px solid #ccc;border-radius:4px;margin:.4rem 0;padding:.3rem .6rem}
details.sample>summary{cursor:pointer;font-weight:600}
.turn{border-left:4px solid #999;margin:.6rem 0;padding:.2rem .6rem}.turn.ok{border-color:#2a9d3a}.turn.bad{border-color:#c62828}.turn.na{border-color:#bbb}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:.6rem}pre{white-space:pre-wrap;word-break:break-word;background:#fafafa;border:1px solid #eee;padding:.4rem;margin:.2rem 0;max-height:24rem;overflow:auto;font-size:.8rem}
.meta{font-size:.8rem;color:#444}.badge{display:inline-block;padding:0 .4rem;border-radius:3px;color:#fff;font-size:.75rem}
.badge.ok{background:#2a9d3a}.badge.bad{background:#c62828}.badge.na{background:#888}
figure{margin:.4rem 0}figure img{max-width:100%;border:1px solid #ddd}figcaption{font-size:.75rem;color:#555}
.legend-true{color:#1a8a2e;font-weight:600}.legend-model{color:#0d33d9;font-weight:600}
"""


def _text(value: Any) -> str:
    """Any value as escaped text for a <pre>, truncated when huge."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, indent=1)
    if len(text) > MAX_TEXT_CHARS:
        text = text[:MAX_TEXT_CHARS] + f"\n[... {len(text) - MAX_TEXT_CHARS} more characters not shown]"
    return e(text)


def _badge(correct: Any, score: Any = None) -> str:
    if correct is True:
        label, cls = "correct", "ok"
    elif correct is False:
        label, cls = "wrong", "bad"
    else:
        label, cls = ("not asked" if score is None else "scored"), "na"
    extra = f" {float(score):.1f}" if isinstance(score, int | float) and not isinstance(score, bool) and correct is None else ""
    return f"<span class='badge {cls}'>{e(label)}{e(extra)}</span>"


class _Figures:
    """Renders grounding figures up to a limit."""

    def __init__(self, roots: list[Path], limit: int) -> None:
        self.roots = roots
        self.limit = limit
        self.count = 0

    def figure(self, record: dict[str, Any] | None, window: dict[str, Any] | None, true: list[dict[str, Any]],
               model: list[dict[str, Any]], asset: Path | None, what: str) -> str:
        if not true and not model and what != "measurement":
            return ""
        if self.count >= self.limit:
            return "<p class=meta>(figure not drawn: --max-images limit reached)</p>"
        from ecgtrace.views._report_images import render_figure

        drawn = render_figure(record, window, self.roots, true, model, asset)
        if drawn is None:
            return "<p class=meta>(no figure: the window and the record are unknown)</p>"
        self.count += 1
        uri, how = drawn
        spans = "; ".join(f"{s['t0_ms'] / 1000:.3f}-{s['t1_ms'] / 1000:.3f} s" + (f" ({s['lead']})" if s.get("lead") else "") for s in true) or "none"
        chosen = "; ".join(f"{s['t0_ms'] / 1000:.3f}-{s['t1_ms'] / 1000:.3f} s" + (f" ({s['lead']})" if s.get("lead") else "") for s in model) or "none"
        if not true and not model:
            return (f"<figure><img src=\"{e(uri)}\" alt=\"ECG window for {e(what)}\">"
                    f"<figcaption>the window this {e(what)} question is about (no time span to mark) &middot; drawn from {e(how)}</figcaption></figure>")
        return (f"<figure><img src=\"{e(uri)}\" alt=\"ECG window for {e(what)}\">"
                f"<figcaption><span class=legend-true>green: true evidence</span> {e(spans)} &middot; "
                f"<span class=legend-model>blue hatched: model's choice</span> {e(chosen)} &middot; drawn from {e(how)}</figcaption></figure>")


def _turn_html(turn: dict[str, Any], figure: str = "", extra: str = "") -> str:
    asked = turn.get("asked", True)
    correct = turn.get("correct") if asked else None
    cls = "na" if not asked or correct is None else ("ok" if correct else "bad")
    where = " &middot; ".join(e(x) for x in (f"#{turn.get('index')}", turn.get("stage"), f"loop {turn['loop']}" if turn.get("loop") is not None else None,
                                            turn.get("kind")) if x)
    meta = [where, _badge(correct, turn.get("score"))]
    if turn.get("latency_ms") is not None:
        meta.append(e(f"{float(turn['latency_ms']):.0f} ms"))
    if turn.get("tokens"):
        meta.append(e(f"tokens {turn['tokens'].get('total_tokens', '?') if isinstance(turn['tokens'], dict) else turn['tokens']}"))
    if turn.get("attempts") and turn["attempts"] > 1:
        meta.append(e(f"{turn['attempts']} attempts"))
    parts = [f"<div class='turn {cls}'><div class=meta>{' &middot; '.join(meta)}</div>"]
    if not asked:
        parts.append("<p class=meta>not asked (the chain stopped at an earlier error)</p>")
    else:
        parts.append(f"<div class=pair><div><div class=meta>prompt</div><pre>{_text(turn.get('prompt'))}</pre></div>"
                     f"<div><div class=meta>model answer (raw)</div><pre>{_text(turn.get('raw'))}</pre></div></div>")
        if turn.get("reasoning"):
            parts.append(f"<details><summary class=meta>reasoning</summary><pre>{_text(turn['reasoning'])}</pre></details>")
        facts = [f"parsed: <code>{_text(turn.get('parsed'))}</code>", f"truth: <code>{_text(turn.get('answer'))}</code>"]
        if turn.get("parse_reason"):
            facts.append(f"parse: {e(turn['parse_reason'])}")
        if turn.get("error"):
            facts.append(f"<b>error:</b> {e(turn['error'])}")
        parts.append(f"<p class=meta>{' &middot; '.join(facts)}</p>")
    parts.append(extra + figure + "</div>")
    return "".join(parts)


def _asset(base_dir: Path | None, rel: Any) -> Path | None:
    """An item's asset file for a figure, when the dataset folder is known (never a path outside it)."""
    from ecgtrace.agents.exam.messages import resolve_asset
    from ecgtrace.errors import EcgTraceError

    if base_dir is None or not isinstance(rel, str):
        return None
    try:
        return resolve_asset(base_dir, rel)
    except EcgTraceError:
        return None


def _audit_sample(i: int, row: dict[str, Any], item: dict[str, Any] | None, figures: _Figures, base_dir: Path | None, open_: bool) -> str:
    from ecgtrace.views._report_images import audit_turn_spans

    turns = row.get("turns") or []
    asked = [t for t in turns if t.get("asked", True)]
    right = sum(1 for t in asked if t.get("correct"))
    head = f"{row['id']} · {row.get('diagnosis', '?')} · label {row.get('label')} · {right}/{len(asked)} turns correct" + _skip_note(row)
    body = []
    for turn in turns:
        figure = ""
        if turn.get("stage") == "grounding" and item is not None:
            true, model = audit_turn_spans(turn, item)
            asset = _asset(base_dir, (item.get("assets") or {}).get("image"))
            what = "measurement" if turn.get("kind") == "measurement" else f"{row['id']} turn {turn.get('index')}"
            figure = figures.figure(item.get("record"), item.get("window"), true, model, asset, what)
        body.append(_turn_html(turn, figure))
    return f"<details class=sample id=s{i}{' open' if open_ else ''}><summary>{e(head)}</summary>{''.join(body)}</details>"


def _qa_sample(i: int, row: dict[str, Any], figures: _Figures, base_dir: Path | None, open_: bool) -> str:
    from ecgtrace.views._report_images import qa_spans

    item = row.get("item") or {}
    turn = row["turns"][0]
    head = f"{row['id']} · {row.get('task')} · {row.get('finding') or ''} · score {float(row.get('score') or 0):.1f}" + _skip_note(row)
    extra = ""
    if item.get("options"):
        extra += "<p class=meta>options: " + " | ".join(f"<code>{e(o)}</code>" for o in item["options"]) + "</p>"
    if turn.get("details"):
        extra += f"<details><summary class=meta>scoring details</summary><pre>{_text(turn['details'])}</pre></details>"
    verdict = row.get("judge")
    if verdict:
        extra += (f"<details><summary class=meta>judge {e(verdict.get('judge'))} ({e(verdict.get('rubric'))}): "
                  f"{e(verdict.get('score'))} {e(verdict.get('band'))}{' - ' + e(verdict.get('reason')) if verdict.get('reason') else ''}</summary>"
                  f"<pre>{_text({k: verdict.get(k) for k in ('criteria', 'hallucinations', 'rationale', 'raw', 'error')})}</pre></details>")
    true, model = qa_spans(row)
    image = (item.get("modalities") or {}).get("image")
    image = image[0] if isinstance(image, list) and image else image
    figure = figures.figure(item.get("record"), item.get("window"), true, model, _asset(base_dir, image), row["id"]) if true else ""
    return f"<details class=sample id=s{i}{' open' if open_ else ''}><summary>{e(head)}</summary>{_turn_html(turn, figure, extra)}</details>"


def _plots(run: RunView) -> str:
    """The viewer's overview plots as inline SVG (drawn here in Python: the report runs no script)."""
    from ecgtrace.views.plots import run_plots
    from ecgtrace.views.svg import plot_svg

    specs = run_plots(run)
    return "<h2 id=plots>Plots</h2>" + "".join(plot_svg(spec) for spec in specs) if specs else ""


def _skip_note(row: dict[str, Any]) -> str:
    skipped = row.get("skipped")
    return f" · not asked: {skipped.get('reason')}" if isinstance(skipped, dict) else ""


def render_html(root: str | os.PathLike[str], *, max_images: int = 200, open_samples: int = 3, csp: bool = True) -> str:
    """The report of the run folder ``root`` as an HTML string (nothing written)."""
    from ecgtrace.views.svg import chart_css
    from ecgtrace.views.usage import run_usage

    run = open_run(root)
    header, rows, results, base_dir = run.header, run.rows, run.results, run.base_dir
    kind = run.kind
    figures = _Figures(run.roots, max_images)
    identity = header.get("identity") or {}
    title = f"ecgtrace {kind} report: {identity.get('model', '?')} ({header.get('run_id')})"
    if kind == "qa":
        summary = qa_tables(results)
        samples = [_qa_sample(i, row, figures, base_dir, i < open_samples) for i, row in enumerate(rows)]
    else:
        summary = audit_tables(results)
        samples = [_audit_sample(i, row, run.item(row), figures, base_dir, i < open_samples) for i, row in enumerate(rows)]
    meta = f"<meta http-equiv=\"Content-Security-Policy\" content=\"{e(CSP)}\">" if csp else ""
    incomplete = "" if results.get("complete", True) else f"<p><b>Incomplete run:</b> {e(results.get('n_finished'))} of {e(results.get('n_items'))} samples finished.</p>"
    return "\n".join([
        "<!DOCTYPE html>", "<html lang=en><head><meta charset=utf-8>", meta,
        "<meta name=viewport content=\"width=device-width, initial-scale=1\">",
        f"<title>{e(title)}</title><style>{CSS}{chart_css()}</style></head><body>",
        f"<h1>{e(title)}</h1>", incomplete, "<h2 id=run>Run</h2>", run_table(header, results), summary, _plots(run),
        usage_table(run_usage(header, rows, results)),
        f"<h2 id=samples>Samples ({len(rows)})</h2>", f"<p class=meta>{figures.count} figure(s) embedded.</p>" if figures.count else "",
        *samples, "</body></html>", ""])


def build_report(root: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *, max_images: int = 200,
                 open_samples: int = 3, csp: bool = True) -> Path:
    """Write ``report.html`` (atomically) into the run folder, or to ``out``; returns the path."""
    text = render_html(root, max_images=max_images, open_samples=open_samples, csp=csp)
    return write_text_atomic(Path(out) if out else Path(root) / REPORT, text)
