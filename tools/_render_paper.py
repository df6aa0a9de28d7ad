"""Standard ECG paper: 25 mm/s, 10 mm/mV, 1 mm minor and 5 mm major grid.

The drawing is in millimetres on a figure of exactly ``px_per_mm`` pixels per
mm (default 10 px/mm, i.e. 254 dpi), so a grid line at ``k`` mm lies on pixel
column ``k * px_per_mm``. The grid is a precomputed RGB image placed with
``figimage`` (no resampling); matplotlib (Agg, no pyplot) draws the traces,
labels and spans on top. The PNG is encoded with Pillow without metadata, so
the same input gives the same bytes.

Layout, left to right: a 20 mm margin with the lead name and a 1 mV x 200 ms
calibration pulse, then the trace starting at the window start. Rows are
stacked top to bottom, one per lead, each a multiple of 5 mm tall and large
enough for the lead's excursion. Below the paper, time labels in seconds from
the recording start mark every whole second.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ecgtrace.contracts.common import provenance
from ecgtrace.errors import EcgTraceError
from ecgtrace.tools.records import SignalWindow

MM_PER_S = 25.0
#: Length of a display window (s): one standard strip.
DEFAULT_WINDOW_S = 10.0
MM_PER_MV = 10.0
LEFT_MM = 20
RIGHT_MM = 5
TOP_MM = 5
LABEL_MM = 8
MIN_ROW_MM = 20
BACKGROUND_RGB = (255, 243, 243)
MINOR_RGB = (247, 198, 198)
MAJOR_RGB = (226, 104, 104)
HIGHLIGHT_RGBA = (0.1, 0.7, 0.2, 0.28)
OVERLAY_RGB = (0.05, 0.2, 0.85)
PAPER_VERSION = "1"
#: What the grid means, as image prompts state it (the grid of every ecgtrace PNG).
PAPER_NOTE = (f"The ECG is drawn on paper at {MM_PER_S:g} mm/s and {MM_PER_MV:g} mm/mV: one large square (5 mm) is 0.2 s wide "
              "and 0.5 mV tall, one small square (1 mm) 0.04 s and 0.1 mV.")


@dataclass(frozen=True)
class PaperLayout:
    """Where everything was drawn, in pixels (x to the right, y down from the top)."""

    width_px: int
    height_px: int
    px_per_mm: int
    mm_per_s: float
    mm_per_mv: float
    t0_s: float
    t1_s: float
    trace_x0_px: int  # pixel column of t0_s
    paper_height_px: int  # grid covers rows [0, paper_height_px)
    lead_rows: tuple[dict[str, Any], ...]  # {lead, top_px, height_px, baseline_px}
    time_ticks: tuple[dict[str, Any], ...]  # {t_s, x_px, label}
    highlight_spans_ms: tuple[tuple[float, float], ...] = ()
    overlay_spans_ms: tuple[tuple[float, float], ...] = ()
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def px_per_s(self) -> float:
        return self.px_per_mm * self.mm_per_s

    @property
    def px_per_mv(self) -> float:
        return self.px_per_mm * self.mm_per_mv

    def x_px(self, t_s: float) -> float:
        """Pixel column of time ``t_s`` (s from the recording start)."""
        return self.trace_x0_px + (t_s - self.t0_s) * self.px_per_s

    def to_json(self) -> dict[str, Any]:
        return {
            "width_px": self.width_px,
            "height_px": self.height_px,
            "px_per_mm": self.px_per_mm,
            "mm_per_s": self.mm_per_s,
            "mm_per_mv": self.mm_per_mv,
            "t0_s": float(self.t0_s),
            "t1_s": float(self.t1_s),
            "trace_x0_px": self.trace_x0_px,
            "lead_rows": [dict(r) for r in self.lead_rows],
            "time_ticks": [dict(t) for t in self.time_ticks],
            "highlight_spans_ms": [list(s) for s in self.highlight_spans_ms],
            "overlay_spans_ms": [list(s) for s in self.overlay_spans_ms],
            "provenance": provenance("computed", "ecgtrace.render.paper", PAPER_VERSION, dict(self.params)),
        }


@dataclass(frozen=True)
class PaperRender:
    """A rendered window: the PNG bytes (also written to ``path`` when given) and its layout."""

    png: bytes
    layout: PaperLayout
    path: str | None = None


def grid_image(height_px: int, width_px: int, px_per_mm: int) -> np.ndarray:
    """ECG paper as an RGB uint8 array: 1 px minor lines every mm, 2 px major lines every 5 mm."""
    image = np.empty((height_px, width_px, 3), dtype=np.uint8)
    image[:] = BACKGROUND_RGB
    image[::px_per_mm, :] = MINOR_RGB
    image[:, ::px_per_mm] = MINOR_RGB
    major = 5 * px_per_mm
    for offset in (0, 1):
        image[offset::major, :] = MAJOR_RGB
        image[:, offset::major] = MAJOR_RGB
    return image


def _row_heights_mm(signal_mv: np.ndarray) -> list[tuple[int, float]]:
    """(row height in mm, baseline offset from the row top in mm) for each lead."""
    rows = []
    for j in range(signal_mv.shape[1]):
        trace = signal_mv[:, j]
        finite = trace[np.isfinite(trace)]
        hi = float(finite.max()) if finite.size else 0.5
        lo = float(finite.min()) if finite.size else -0.5
        hi, lo = max(hi, 0.5), min(lo, -0.5)
        top_mm = hi * MM_PER_MV + 3.0
        height = int(5 * math.ceil((top_mm - lo * MM_PER_MV + 3.0) / 5.0))
        height = max(height, MIN_ROW_MM)
        extra = height - (top_mm - lo * MM_PER_MV + 3.0)
        rows.append((height, top_mm + extra / 2.0))
    return rows


def _spans(spans: Iterable[Any], label: str) -> list[tuple[float, float, str | None]]:
    out = []
    for span in spans or ():
        if isinstance(span, Mapping):
            t0 = span.get("t0_ms", span.get("onset_ms"))
            t1 = span.get("t1_ms", span.get("offset_ms"))
            lead = span.get("lead")
        else:
            t0, t1 = span
            lead = None
        try:
            t0, t1 = float(t0), float(t1)
        except (TypeError, ValueError):
            raise EcgTraceError(f"{label} span {span!r}: t0_ms/t1_ms must be numbers") from None
        if not (math.isfinite(t0) and math.isfinite(t1)) or t1 < t0:
            raise EcgTraceError(f"{label} span {span!r}: needs finite t0_ms <= t1_ms")
        out.append((t0, t1, lead))
    return out


def render_array(
    window: SignalWindow,
    *,
    highlight_spans_ms: Sequence[Any] = (),
    overlay_spans_ms: Sequence[Any] = (),
    px_per_mm: int = 10,
    title: str | None = None,
    row_layout: Sequence[tuple[int, float]] | None = None,
    tick_every_s: float = 1.0,
) -> tuple[np.ndarray, PaperLayout]:
    """Draw the window and return ``(rgb uint8 array (H, W, 3), layout)``.

    Args:
        window: the signal (mV) to draw.
        highlight_spans_ms: spans to shade green (true evidence): ``(t0_ms,
            t1_ms)`` pairs or dicts ``{t0_ms, t1_ms, lead?}`` in ms from the
            record start; with ``lead`` only that lead's row is shaded.
        overlay_spans_ms: spans to outline with a blue hatched box (a model's
            chosen span), same format.
        px_per_mm: resolution (integer; 10 px/mm = 254 dpi).
        title: a line of text above the paper (default: leads, speed, gain, fs).
        row_layout: fixed ``(height_mm, baseline_mm)`` per lead (used by video).
        tick_every_s: time-label spacing in seconds.
    """
    px_per_mm = int(px_per_mm)
    if px_per_mm < 2:
        raise EcgTraceError(f"px_per_mm must be an integer >= 2, got {px_per_mm}")
    signal, rows = _signal_and_rows(window, row_layout)
    n = signal.shape[0]
    fs = float(window.fs_hz)
    t0_s = window.sampfrom / fs
    dur_s = n / fs
    t1_s = t0_s + dur_s
    trace_mm = int(math.ceil(dur_s * MM_PER_S))
    width_mm = LEFT_MM + trace_mm + RIGHT_MM
    paper_mm = TOP_MM + sum(h for h, _ in rows)
    height_mm = paper_mm + LABEL_MM
    width_px, height_px, paper_px = width_mm * px_per_mm, height_mm * px_per_mm, paper_mm * px_per_mm
    dpi = 25.4 * px_per_mm

    fig, ax = _transparent_figure(width_px, height_px, dpi, width_mm, height_mm)
    pt_per_mm = 72.0 / 25.4
    font = max(6.0, 2.6 * pt_per_mm)

    lead_rows = _draw_traces(ax, window, signal, rows, fs, font, px_per_mm, dpi)
    highlights = _spans(highlight_spans_ms, "highlight")
    overlays = _spans(overlay_spans_ms, "overlay")
    _draw_spans(ax, highlights, overlays, lead_rows, t0_s, t1_s, paper_mm, px_per_mm)
    ticks = _draw_time_ticks(ax, t0_s, t1_s, float(tick_every_s), paper_mm, font, px_per_mm, dpi)
    if title is None:
        title = f"{', '.join(window.leads)}   {MM_PER_S:g} mm/s   {MM_PER_MV:g} mm/mV   fs {fs:g} Hz   window {t0_s:.3f}-{t1_s:.3f} s from the recording start"
    ax.text(LEFT_MM, TOP_MM / 2.0, title, fontsize=font, ha="left", va="center", color="black")

    rgb = _on_grid_paper(fig, height_px, width_px, paper_px, px_per_mm)
    layout = PaperLayout(
        width_px=width_px,
        height_px=height_px,
        px_per_mm=px_per_mm,
        mm_per_s=MM_PER_S,
        mm_per_mv=MM_PER_MV,
        t0_s=t0_s,
        t1_s=t1_s,
        trace_x0_px=LEFT_MM * px_per_mm,
        paper_height_px=paper_px,
        lead_rows=tuple(lead_rows),
        time_ticks=tuple(ticks),
        highlight_spans_ms=tuple((a, b) for a, b, _ in highlights),
        overlay_spans_ms=tuple((a, b) for a, b, _ in overlays),
        params={"px_per_mm": px_per_mm, "fs_hz": fs, "leads": list(window.leads), "sampfrom": int(window.sampfrom), "n_samples": int(n)},
    )
    return rgb, layout


def _signal_and_rows(window: SignalWindow, row_layout: Sequence[tuple[int, float]] | None) -> tuple[np.ndarray, list[tuple[int, float]]]:
    """The window's signal (n, leads) float64 and one ``(height_mm, baseline_mm)`` row per lead (given or fitted)."""
    signal = np.asarray(window.signal_mv, dtype=np.float64)
    if signal.ndim != 2 or signal.shape[0] < 2:
        raise EcgTraceError("cannot draw a window with fewer than 2 samples")
    rows = list(row_layout) if row_layout is not None else _row_heights_mm(signal)
    if len(rows) != signal.shape[1]:
        raise EcgTraceError(f"row_layout has {len(rows)} rows for {signal.shape[1]} leads")
    return signal, rows


def _on_grid_paper(fig: Any, height_px: int, width_px: int, paper_px: int, px_per_mm: int) -> np.ndarray:
    """The drawn (transparent) figure composited over the ECG grid: (height_px, width_px, 3) uint8."""
    fig.canvas.draw()
    rgba = np.asarray(fig.canvas.buffer_rgba())
    if rgba.shape[:2] != (height_px, width_px):
        raise EcgTraceError(f"internal: canvas is {rgba.shape[:2]}, expected {(height_px, width_px)}")
    background = np.full((height_px, width_px, 3), 255, dtype=np.uint8)
    background[:paper_px] = grid_image(paper_px, width_px, px_per_mm)
    return _composite(rgba, background)


def _transparent_figure(width_px: int, height_px: int, dpi: float, width_mm: float, height_mm: float) -> tuple[Any, Any]:
    """A figure in paper millimetres (y down) on a transparent canvas.

    The traces are drawn on it and then composited over the grid in numpy:
    much faster than letting matplotlib resample a figure-sized image.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_px / dpi, height_px / dpi), dpi=dpi)
    fig.patch.set_alpha(0.0)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.patch.set_visible(False)
    ax.set_xlim(0, width_mm)
    ax.set_ylim(height_mm, 0)
    return fig, ax


def _draw_traces(ax: Any, window: SignalWindow, signal: np.ndarray, rows: list[tuple[int, float]], fs: float, font: float,
                 px_per_mm: int, dpi: float) -> list[dict[str, Any]]:
    """Each lead's trace, its 1 mV calibration pulse and its label; returns the lead rows (pixels)."""
    from matplotlib.collections import LineCollection

    lead_rows = []
    segments = []
    row_top = float(TOP_MM)
    time_mm = LEFT_MM + np.arange(signal.shape[0]) * (MM_PER_S / fs)
    for j, (height, baseline) in enumerate(rows):
        base_mm = row_top + baseline
        y = base_mm - signal[:, j] * MM_PER_MV
        segments.append(np.column_stack([time_mm, y]))
        # calibration pulse: 1 mV (10 mm) for 200 ms (5 mm)
        x0 = LEFT_MM - 12.0
        segments.append(np.array([[x0 - 2, base_mm], [x0, base_mm], [x0, base_mm - 10], [x0 + 5, base_mm - 10], [x0 + 5, base_mm], [x0 + 7, base_mm]]))
        ax.text(1.0, row_top + 1.0, window.leads[j], fontsize=font * 1.15, fontweight="bold", va="top", ha="left", color="black")
        lead_rows.append({"lead": window.leads[j], "top_px": int(round(row_top * px_per_mm)), "height_px": int(height * px_per_mm), "baseline_px": int(round(base_mm * px_per_mm))})
        row_top += height
    ax.add_collection(LineCollection(segments, colors="black", linewidths=1.8 * 72.0 / dpi, capstyle="round", joinstyle="round", antialiased=True))
    return lead_rows


def _draw_spans(ax: Any, highlights: list[tuple[float, float, Any]], overlays: list[tuple[float, float, Any]],
                lead_rows: list[dict[str, Any]], t0_s: float, t1_s: float, paper_mm: float, px_per_mm: int) -> None:
    """True evidence shaded green, a model's chosen span outlined in blue (one lead's row, or all rows)."""
    from matplotlib.patches import Rectangle

    row_extent = {r["lead"]: (r["top_px"] / px_per_mm, r["height_px"] / px_per_mm) for r in lead_rows}
    for spans, style in ((highlights, "highlight"), (overlays, "overlay")):
        for a_ms, b_ms, lead in spans:
            a, b = max(a_ms / 1000.0, t0_s), min(b_ms / 1000.0, t1_s)
            if b < a:
                continue
            top, h = (float(TOP_MM), paper_mm - float(TOP_MM)) if lead not in row_extent else row_extent[lead]
            w = max((b - a) * MM_PER_S, 0.4)
            x = LEFT_MM + (a - t0_s) * MM_PER_S
            if style == "highlight":
                ax.add_patch(Rectangle((x, top), w, h, facecolor=HIGHLIGHT_RGBA, edgecolor="none", zorder=1))
            else:
                ax.add_patch(Rectangle((x, top + 0.3), w, h - 0.6, fill=False, edgecolor=OVERLAY_RGB, hatch="///", linewidth=1.6, zorder=3))


def _draw_time_ticks(ax: Any, t0_s: float, t1_s: float, step: float, paper_mm: float, font: float, px_per_mm: int,
                     dpi: float) -> list[dict[str, Any]]:
    """Time labels (s from the recording start) under the paper every ``step`` seconds."""
    ticks = []
    first = math.ceil(t0_s / step - 1e-9) * step
    k = 0
    while first + k * step <= t1_s + 1e-9:
        t = round(first + k * step, 6)
        k += 1
        x = LEFT_MM + (t - t0_s) * MM_PER_S
        label = f"{t:g} s" if abs(t - round(t)) > 1e-9 else f"{int(round(t))} s"
        ax.plot([x, x], [paper_mm, paper_mm + 1.5], color="black", linewidth=1.0 * 72.0 / dpi * 1.5)
        ax.text(x, paper_mm + 1.8, label, fontsize=font, ha="center", va="top", color="black")
        ticks.append({"t_s": float(t), "x_px": int(round(x * px_per_mm)), "label": label})
    return ticks


def _composite(rgba: np.ndarray, background: np.ndarray) -> np.ndarray:
    """``rgba`` (straight alpha, uint8) over an opaque ``background``; only touched pixels cost."""
    out = background.copy()
    alpha = rgba[:, :, 3]
    rows, cols = np.nonzero(alpha)
    a = alpha[rows, cols].astype(np.uint16)[:, None]
    fg = rgba[rows, cols, :3].astype(np.uint16)
    bg = background[rows, cols].astype(np.uint16)
    out[rows, cols] = ((fg * a + bg * (255 - a) + 127) // 255).astype(np.uint8)
    return out


def encode_png(rgb: np.ndarray, compress_level: int = 3) -> bytes:
    """PNG bytes of an RGB array, with no metadata (deterministic)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="PNG", compress_level=compress_level)
    return buffer.getvalue()


def render_png(
    window: SignalWindow,
    path: str | os.PathLike[str] | None = None,
    *,
    highlight_spans_ms: Sequence[Any] = (),
    overlay_spans_ms: Sequence[Any] = (),
    px_per_mm: int = 10,
    title: str | None = None,
) -> PaperRender:
    """Render the window as a PNG on ECG paper; write it to ``path`` when given.

    See :func:`render_array` for the parameters. A 10 s, 3-lead window at
    10 px/mm is about 2750 x 900 px.
    """
    rgb, layout = render_array(window, highlight_spans_ms=highlight_spans_ms, overlay_spans_ms=overlay_spans_ms, px_per_mm=px_per_mm, title=title)
    png = encode_png(rgb)
    written = None
    if path is not None:
        from ecgtrace.jsonio import write_bytes_atomic

        written = str(write_bytes_atomic(path, png))
    return PaperRender(png=png, layout=layout, path=written)
