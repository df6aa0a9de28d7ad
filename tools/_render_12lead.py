"""A 12-lead ECG on standard paper: the 3x4 layout with a rhythm strip, or the 12 leads stacked.

Both layouts draw the leads in the standard order (I, II, III, aVR, aVL, aVF,
V1-V6), whatever order the record stores them in, at 25 mm/s and 10 mm/mV on
the grid of :mod:`ecgtrace.tools._render_paper` (1 mm minor, 5 mm major
squares: one large square is 0.2 s wide and 0.5 mV tall).

* ``3x4`` (the standard print): three rows of four columns, each column a
  quarter of the window (2.5 s of a 10 s ECG) - row 1 I, aVR, V1, V4; row 2
  II, aVL, V2, V5; row 3 III, aVF, V3, V6 - then a rhythm strip of lead II over
  the whole window. Every column is drawn at its true time, so a time ``t``
  has the same pixel column in every row, the rhythm strip included, and the
  time labels under the paper hold for all of them.
* ``stacked`` (ERB's plot): the 12 leads one above the other, each over the
  whole window (:func:`ecgtrace.tools._render_paper.render_array`).

The PNG has no metadata; the same window gives the same bytes.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from ecgtrace.contracts.vocabulary import TWELVE_LEADS, standard_lead_name
from ecgtrace.errors import EcgTraceError
from ecgtrace.tools._render_paper import (LEFT_MM, MM_PER_MV, MM_PER_S, RIGHT_MM, TOP_MM, LABEL_MM, PaperLayout, PaperRender,
                                          _composite, _draw_time_ticks, _row_heights_mm, _transparent_figure, encode_png,
                                          grid_image, render_array)
from ecgtrace.tools.records import SignalWindow

LAYOUTS: tuple[str, ...] = ("3x4", "stacked")
#: Rows of the 3x4 layout, left to right (each column is a quarter of the window).
GRID_3X4: tuple[tuple[str, str, str, str], ...] = (("I", "aVR", "V1", "V4"), ("II", "aVL", "V2", "V5"), ("III", "aVF", "V3", "V6"))
RHYTHM_LEAD = "II"
RENDER_12LEAD_VERSION = "1"


def standard_order(window: SignalWindow) -> SignalWindow:
    """The window's 12 standard leads in the standard order, named in their standard spelling (``AVR`` -> ``aVR``).

    Raises:
        EcgTraceError: a standard lead is missing (names match case-insensitively).
    """
    names = [standard_lead_name(lead) for lead in window.leads]
    missing = [lead for lead in TWELVE_LEADS if lead not in names]
    if missing:
        raise EcgTraceError(f"a 12-lead plot needs leads {', '.join(missing)}; the window has {', '.join(window.leads)}")
    columns = [names.index(lead) for lead in TWELVE_LEADS]
    return SignalWindow(signal_mv=np.asarray(window.signal_mv)[:, columns], fs_hz=window.fs_hz, sampfrom=window.sampfrom,
                        leads=TWELVE_LEADS)


def _title(window: SignalWindow, t0_s: float, t1_s: float, layout: str) -> str:
    return (f"12-lead ECG ({layout}{', rhythm strip ' + RHYTHM_LEAD if layout == '3x4' else ''})   {MM_PER_S:g} mm/s   "
            f"{MM_PER_MV:g} mm/mV   large square 0.2 s x 0.5 mV   fs {window.fs_hz:g} Hz   {t0_s:.2f}-{t1_s:.2f} s")


def _grid_rows(signal: np.ndarray, n: int) -> list[tuple[str, list[tuple[str, int, int]]]]:
    """``[(row name, [(lead, first sample, end sample)])]``: the three 3x4 rows, then the rhythm strip."""
    edges = [round(n * c / 4) for c in range(5)]
    rows = [(f"row {r + 1}", [(lead, edges[c], edges[c + 1]) for c, lead in enumerate(names)]) for r, names in enumerate(GRID_3X4)]
    return [*rows, ("rhythm", [(RHYTHM_LEAD, 0, n)])]


def _row_sizes(signal: np.ndarray, rows: list[tuple[str, list[tuple[str, int, int]]]]) -> list[tuple[int, float]]:
    """(height mm, baseline mm) per row: the excursion of every segment the row holds (:func:`_row_heights_mm`)."""
    sizes = []
    for _, cells in rows:
        trace = np.concatenate([signal[a:b, TWELVE_LEADS.index(lead)] for lead, a, b in cells])
        sizes.append(_row_heights_mm(trace[:, None])[0])
    return sizes


def _draw_3x4(ax: Any, signal: np.ndarray, fs: float, rows: list[tuple[str, list[tuple[str, int, int]]]],
              sizes: list[tuple[int, float]], font: float, px_per_mm: int, dpi: float) -> list[dict[str, Any]]:
    """Traces, calibration pulses, lead labels and column marks; returns one cell per drawn segment (pixels)."""
    from matplotlib.collections import LineCollection

    segments, cells_out = [], []
    row_top = float(TOP_MM)
    for (_, cells), (height, baseline) in zip(rows, sizes):
        base_mm = row_top + baseline
        x0 = LEFT_MM - 12.0  # calibration pulse: 1 mV (10 mm) for 200 ms (5 mm)
        segments.append(np.array([[x0 - 2, base_mm], [x0, base_mm], [x0, base_mm - 10], [x0 + 5, base_mm - 10], [x0 + 5, base_mm], [x0 + 7, base_mm]]))
        for k, (lead, a, b) in enumerate(cells):
            x_mm = LEFT_MM + np.arange(a, b) * (MM_PER_S / fs)
            segments.append(np.column_stack([x_mm, base_mm - signal[a:b, TWELVE_LEADS.index(lead)] * MM_PER_MV]))
            if k:  # a short mark where a column starts
                segments.append(np.array([[x_mm[0], base_mm - 4.0], [x_mm[0], base_mm + 4.0]]))
            ax.text(x_mm[0] + (1.0 if k else -LEFT_MM + 1.0), row_top + 1.0, lead, fontsize=font * 1.15, fontweight="bold",
                    va="top", ha="left", color="black")
            cells_out.append({"lead": lead, "top_px": int(round(row_top * px_per_mm)), "height_px": int(height * px_per_mm),
                              "baseline_px": int(round(base_mm * px_per_mm)), "x0_px": int(round(x_mm[0] * px_per_mm)),
                              "x1_px": int(round((LEFT_MM + b * MM_PER_S / fs) * px_per_mm)), "t0_s": a / fs, "t1_s": b / fs})
        row_top += height
    ax.add_collection(LineCollection(segments, colors="black", linewidths=1.8 * 72.0 / dpi, capstyle="round", joinstyle="round",
                                     antialiased=True))
    return cells_out


def render_3x4_array(window: SignalWindow, *, px_per_mm: int = 10, title: str | None = None) -> tuple[np.ndarray, PaperLayout]:
    """Draw the 3x4 layout with a lead II rhythm strip; ``(rgb uint8 (H, W, 3), layout)``.

    ``layout.lead_rows`` holds one cell per drawn segment: ``{lead, top_px,
    height_px, baseline_px, x0_px, x1_px, t0_s, t1_s}`` (times relative to the
    window start); the rhythm strip is the last cell.
    """
    px_per_mm = int(px_per_mm)
    if px_per_mm < 2:
        raise EcgTraceError(f"px_per_mm must be an integer >= 2, got {px_per_mm}")
    shown = standard_order(window)
    signal = np.asarray(shown.signal_mv, dtype=np.float64)
    n = signal.shape[0]
    if n < 8:
        raise EcgTraceError("cannot draw a 12-lead window with fewer than 8 samples")
    fs = float(shown.fs_hz)
    t0_s, t1_s = shown.sampfrom / fs, shown.sampfrom / fs + n / fs
    rows = _grid_rows(signal, n)
    sizes = _row_sizes(signal, rows)
    width_mm = LEFT_MM + int(math.ceil(n / fs * MM_PER_S)) + RIGHT_MM
    paper_mm = TOP_MM + sum(h for h, _ in sizes)
    height_mm = paper_mm + LABEL_MM
    width_px, height_px, paper_px = width_mm * px_per_mm, height_mm * px_per_mm, paper_mm * px_per_mm
    dpi = 25.4 * px_per_mm
    fig, ax = _transparent_figure(width_px, height_px, dpi, width_mm, height_mm)
    font = max(6.0, 2.6 * 72.0 / 25.4)
    cells = _draw_3x4(ax, signal, fs, rows, sizes, font, px_per_mm, dpi)
    ticks = _draw_time_ticks(ax, t0_s, t1_s, 1.0, paper_mm, font, px_per_mm, dpi)
    ax.text(LEFT_MM, TOP_MM / 2.0, title if title is not None else _title(shown, t0_s, t1_s, "3x4"), fontsize=font, ha="left",
            va="center", color="black")
    fig.canvas.draw()
    rgba = np.asarray(fig.canvas.buffer_rgba())
    background = np.full((height_px, width_px, 3), 255, dtype=np.uint8)
    background[:paper_px] = grid_image(paper_px, width_px, px_per_mm)
    layout = PaperLayout(width_px=width_px, height_px=height_px, px_per_mm=px_per_mm, mm_per_s=MM_PER_S, mm_per_mv=MM_PER_MV,
                         t0_s=t0_s, t1_s=t1_s, trace_x0_px=LEFT_MM * px_per_mm, paper_height_px=paper_px, lead_rows=tuple(cells),
                         time_ticks=tuple(ticks), params={"layout": "3x4", "px_per_mm": px_per_mm, "fs_hz": fs,
                                                          "leads": list(TWELVE_LEADS), "rhythm_lead": RHYTHM_LEAD,
                                                          "sampfrom": int(shown.sampfrom), "n_samples": int(n)})
    return _composite(rgba, background), layout


def render_12lead_png(window: SignalWindow, path: str | os.PathLike[str] | None = None, *, layout: str = "3x4", px_per_mm: int = 10,
                      title: str | None = None) -> PaperRender:
    """A 12-lead window as a PNG on ECG paper, in ``layout`` (``3x4`` or ``stacked``); written to ``path`` when given.

    A 10 s window at 10 px/mm is about 2750 x 1300 px (3x4) or 2750 x 3000 px (stacked).
    """
    if layout not in LAYOUTS:
        raise EcgTraceError(f"unknown 12-lead layout {layout!r} (choose from {', '.join(LAYOUTS)})")
    if layout == "3x4":
        rgb, paper = render_3x4_array(window, px_per_mm=px_per_mm, title=title)
    else:
        shown = standard_order(window)
        t0_s = shown.sampfrom / shown.fs_hz
        rgb, paper = render_array(shown, px_per_mm=px_per_mm,
                                  title=title if title is not None else _title(shown, t0_s, t0_s + shown.signal_mv.shape[0] / shown.fs_hz, "stacked"))
    png = encode_png(rgb)
    written = None
    if path is not None:
        from ecgtrace.jsonio import write_bytes_atomic

        written = str(write_bytes_atomic(path, png))
    return PaperRender(png=png, layout=paper, path=written)
