"""Grounding figures for the HTML report and the viewer: the ECG window, true span green, model's span blue.

For every grounding turn (audit: lead and wave grounding, measurement bins
shown without spans; QA: every item with evidence) the window is read from
the record and drawn with :func:`ecgtrace.tools.render.render_png`, whose
``highlight_spans_ms`` shade the true evidence and ``overlay_spans_ms`` outline
the model's choice. When the record cannot be opened, the item's own image
asset is shown (if any) above a strip drawn here with matplotlib that marks
the same spans on the window's time axis. The report embeds them as
``data:image/png;base64,...`` URIs (:func:`render_figure`); the viewer serves
the PNG bytes as files, drawn on request at a larger scale (:func:`render_figure_png`).

Wave-grounding options read like ``[5.62s - 5.81s]``. They are taken as
seconds from the record start when they fall inside the window, otherwise as
seconds from the window start (both conventions occur).
"""

from __future__ import annotations

import base64
import io
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

MAX_WINDOW_S = 30.0
DEFAULT_WINDOW_S = 10.0
PX_PER_MM = 4
_SPAN = re.compile(r"\[?\s*(-?\d+(?:\.\d+)?)\s*(ms|s)?\s*[-–]\s*(-?\d+(?:\.\d+)?)\s*(ms|s)\s*\]?", re.I)


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def compact_png(png: bytes) -> bytes:
    """The same picture with a 128-colour palette (no dithering): ECG paper has few colours, the file is ~3x smaller."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    buffer = io.BytesIO()
    image.quantize(colors=128, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE).save(buffer, format="PNG", compress_level=6)
    return buffer.getvalue()


def parse_span_ms(text: Any, window: dict[str, Any] | None) -> tuple[float, float] | None:
    """``"[5.62s - 5.81s]"`` -> (t0_ms, t1_ms) from the record start, or None."""
    if not isinstance(text, str):
        return None
    match = _SPAN.search(text)
    if not match:
        return None
    unit = (match.group(4) or "s").lower()
    k = 1.0 if unit == "ms" else 1000.0
    a, b = float(match.group(1)) * k, float(match.group(3)) * k
    if window:
        w0, w1 = window["t0_s"] * 1000.0, window["t1_s"] * 1000.0
        if not (w0 - 1 <= a <= w1 + 1 and w0 - 1 <= b <= w1 + 1) and 0 <= a <= (w1 - w0) + 1:
            a, b = a + w0, b + w0
    return (min(a, b), max(a, b))


def resolve_record(path: str, roots: list[Path]) -> Path | None:
    """The record base path: absolute, or relative to one of ``roots`` (first that has a header)."""
    raw = Path(path)
    candidates = [raw] if raw.is_absolute() else [root / raw for root in roots] + [raw]
    for base in candidates:
        if base.with_suffix(".hea").exists() or Path(str(base) + ".hea").exists() or Path(str(base) + ".edf").exists() or base.suffix in (".hea", ".edf") and base.exists():
            return base
    return None


@lru_cache(maxsize=32)
def _open(path: str):  # noqa: ANN202
    from ecgtrace.tools.records import open_record

    return open_record(path, check_leads=False)


def window_bounds(window: dict[str, Any] | None, spans: list[tuple[float, float]], duration_s: float | None) -> tuple[float, float] | None:
    """The window to draw (s): the item's, clipped to 30 s around the spans, or 10 s centred on the spans."""
    if window:
        t0, t1 = float(window["t0_s"]), float(window["t1_s"])
        if t1 - t0 <= MAX_WINDOW_S:
            return t0, t1
        centre = (spans[0][0] + spans[0][1]) / 2000.0 if spans else (t0 + t1) / 2
        return max(t0, centre - MAX_WINDOW_S / 2), min(t1, max(t0, centre - MAX_WINDOW_S / 2) + MAX_WINDOW_S)
    if not spans:
        return None
    a, b = spans[0]
    centre = (a + b) / 2000.0
    length = min(MAX_WINDOW_S, max(DEFAULT_WINDOW_S, (b - a) / 1000.0 + 2.0))
    t0 = max(0.0, centre - length / 2)
    if duration_s:
        t0 = max(0.0, min(t0, duration_s - length))
    return t0, t0 + length


_MEMO: dict[str, tuple[bytes, str] | None] = {}
_MEMO_MAX = 256


def render_figure(record: dict[str, Any] | None, window: dict[str, Any] | None, roots: list[Path],
                  highlight: list[dict[str, Any]], overlay: list[dict[str, Any]], asset: Path | None = None) -> tuple[str, str] | None:
    """``(data URI, how it was drawn)`` of one grounding figure, or None when nothing can be drawn (the report's form)."""
    drawn = render_figure_png(record, window, roots, highlight, overlay, asset)
    return None if drawn is None else (data_uri(drawn[0]), drawn[1])


def render_figure_png(record: dict[str, Any] | None, window: dict[str, Any] | None, roots: list[Path],
                      highlight: list[dict[str, Any]], overlay: list[dict[str, Any]], asset: Path | None = None, *,
                      px_per_mm: int = PX_PER_MM) -> tuple[bytes, str] | None:
    """``(PNG bytes, how it was drawn)`` of one grounding figure, or None when nothing can be drawn.

    ``highlight`` / ``overlay`` are ``{"t0_ms", "t1_ms", "lead"?}`` spans from the record start;
    ``px_per_mm`` is the paper's scale (4 for the report, larger for the zoomable viewer).
    The same figure asked twice in one process is drawn once.
    """
    key = json.dumps([record, window, [str(r) for r in roots], highlight, overlay, str(asset), px_per_mm], sort_keys=True, default=str)
    if key not in _MEMO:
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.clear()
        _MEMO[key] = _render_figure(record, window, roots, highlight, overlay, asset, px_per_mm)
    return _MEMO[key]


def _render_figure(record: dict[str, Any] | None, window: dict[str, Any] | None, roots: list[Path],
                   highlight: list[dict[str, Any]], overlay: list[dict[str, Any]], asset: Path | None,
                   px_per_mm: int = PX_PER_MM) -> tuple[bytes, str] | None:
    spans = [(float(s["t0_ms"]), float(s["t1_ms"])) for s in highlight] or [(float(s["t0_ms"]), float(s["t1_ms"])) for s in overlay]
    base = resolve_record(str(record.get("path", "")), roots) if record and record.get("path") else None
    if base is not None:
        try:
            from ecgtrace.tools.render import render_png, window_by_time

            info = _open(str(base))
            bounds = window_bounds(window, spans, info.duration_s)
            if bounds is not None:
                win = window_by_time(info, bounds[0], bounds[1])
                png = render_png(win, highlight_spans_ms=_clip(highlight, bounds), overlay_spans_ms=_clip(overlay, bounds), px_per_mm=px_per_mm).png
                return compact_png(png), "record"
        except Exception:  # noqa: BLE001 - a record that cannot be drawn falls back to the asset + strip
            pass
    bounds = window_bounds(window, spans, None)
    if bounds is None:
        return None
    return _strip_png(bounds, highlight, overlay, asset), "asset+strip" if asset is not None and asset.is_file() else "strip"


def _clip(spans: list[dict[str, Any]], bounds: tuple[float, float]) -> list[dict[str, Any]]:
    lo, hi = bounds[0] * 1000.0, bounds[1] * 1000.0
    out = []
    for s in spans:
        a, b = max(float(s["t0_ms"]), lo), min(float(s["t1_ms"]), hi)
        if b >= a:
            out.append({**s, "t0_ms": a, "t1_ms": b})
    return out


def _strip_png(bounds: tuple[float, float], highlight: list[dict[str, Any]], overlay: list[dict[str, Any]], asset: Path | None) -> bytes:
    """The asset image (if readable) above a time strip with the spans, as PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    picture = None
    if asset is not None and asset.is_file():
        try:
            from PIL import Image

            picture = Image.open(asset).convert("RGB")
        except Exception:  # noqa: BLE001
            picture = None
    t0, t1 = bounds
    fig = Figure(figsize=(8, 2.6 if picture is not None else 1.0), dpi=100)
    FigureCanvasAgg(fig)
    if picture is not None:
        top = fig.add_axes((0.02, 0.36, 0.96, 0.62))
        top.imshow(picture, aspect="auto")
        top.set_axis_off()
        ax = fig.add_axes((0.02, 0.12, 0.96, 0.18))
    else:
        ax = fig.add_axes((0.02, 0.45, 0.96, 0.45))
    ax.set_xlim(t0, t1)
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    ax.tick_params(labelsize=7)
    ax.set_xlabel("s from the recording start", fontsize=7)
    for s in highlight:
        a, b = max(s["t0_ms"] / 1000.0, t0), min(s["t1_ms"] / 1000.0, t1)
        if b >= a:
            ax.add_patch(Rectangle((a, 0), max(b - a, (t1 - t0) / 400), 1, facecolor=(0.1, 0.7, 0.2, 0.45), edgecolor="none"))
    for s in overlay:
        a, b = max(s["t0_ms"] / 1000.0, t0), min(s["t1_ms"] / 1000.0, t1)
        if b >= a:
            ax.add_patch(Rectangle((a, 0.1), max(b - a, (t1 - t0) / 400), 0.8, fill=False, edgecolor=(0.05, 0.2, 0.85), hatch="///", linewidth=1.2))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


# ------------------------------------------------------------------ spans per turn

def audit_turn_spans(turn: dict[str, Any], item: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(true spans, model spans) of an audit grounding turn."""
    window = item.get("window")
    w = (window["t0_s"] * 1000.0, window["t1_s"] * 1000.0) if window else None
    kind = turn.get("kind")
    if kind == "wave":
        true = parse_span_ms(turn.get("answer"), window)
        got = parse_span_ms(turn.get("parsed"), window) if turn.get("parse_ok") else None
        return ([{"t0_ms": true[0], "t1_ms": true[1]}] if true else [], [{"t0_ms": got[0], "t1_ms": got[1]}] if got else [])
    if kind == "lead" and w:
        answer = turn.get("answer") if isinstance(turn.get("answer"), list) else [turn.get("answer")]
        parsed = turn.get("parsed") if isinstance(turn.get("parsed"), list) else ([turn.get("parsed")] if turn.get("parsed") else [])
        leads = (item.get("record") or {}).get("leads") or []
        return ([{"t0_ms": w[0], "t1_ms": w[1], "lead": _record_lead(a, leads)} for a in answer if a],
                [{"t0_ms": w[0], "t1_ms": w[1], "lead": _record_lead(p, leads)} for p in parsed if p] if turn.get("parse_ok") else [])
    return [], []


def _record_lead(option: str, leads: list[str]) -> str:
    """The record's name of the lead an option names (ERB's "Lead aVR" -> the record's "AVR"); the option's lead otherwise."""
    from ecgtrace.contracts.vocabulary import lead_of_option, standard_lead_name

    lead = lead_of_option(str(option))
    return next((name for name in leads if standard_lead_name(name) == lead), lead)


def qa_spans(row: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(evidence spans, the model's times as +-tolerance spans) of a QA sample."""
    item = row.get("item") or {}
    true = [{"t0_ms": float(e["t0_ms"]), "t1_ms": float(e["t1_ms"]), "lead": e.get("lead")} for e in item.get("evidence") or []
            if isinstance(e, dict) and isinstance(e.get("t0_ms"), int | float) and isinstance(e.get("t1_ms"), int | float)]
    for span in true:  # a point evidence (one beat) gets +-40 ms so that it is visible
        if span["t1_ms"] - span["t0_ms"] < 80:
            centre = (span["t0_ms"] + span["t1_ms"]) / 2
            span["t0_ms"], span["t1_ms"] = centre - 40, centre + 40
    turn = row["turns"][0]
    parsed = turn.get("parsed")
    times: list[float] = []
    if row.get("family") == "timestamps" and isinstance(parsed, list):
        times = [float(t) for t in parsed if isinstance(t, int | float)]
    elif row.get("family") == "numeric" and row.get("answer_type") == "time_ms" and isinstance(parsed, int | float):
        times = [float(parsed)]
    elif row.get("family") == "closed" and row.get("answer_type") in ("timestamps_ms", "time_ms") and isinstance(parsed, str):
        from ecgtrace.agents.exam.qa_scoring import parse_times_ms

        times = parse_times_ms(parsed)
    tol = float(item.get("tolerance_ms") or 150.0)
    return true, [{"t0_ms": t - tol, "t1_ms": t + tol} for t in times]
