"""12-lead plots: the 3x4 print with a rhythm strip and the stacked layout, leads in the standard order."""

from __future__ import annotations

import numpy as np
import pytest

from ecgtrace.contracts.vocabulary import TWELVE_LEADS
from ecgtrace.errors import EcgTraceError
from ecgtrace.tools._render_12lead import GRID_3X4, render_3x4_array, standard_order
from ecgtrace.tools.records import SignalWindow
from ecgtrace.tools.render import PAPER_NOTE, render_12lead_png

STORED = ["V6", "AVR", "I", "V1", "III", "AVF", "V2", "II", "V3", "AVL", "V4", "V5"]  # any order, PTB-XL's spelling


def window(fs_hz: int = 100, seconds: float = 10.0) -> SignalWindow:
    n = int(fs_hz * seconds)
    # each lead's trace is its position in the standard order, in mV, so the reordering can be checked
    signal = np.stack([np.full(n, TWELVE_LEADS.index(lead.replace("AV", "aV")) / 10.0) for lead in STORED], axis=1).astype(np.float32)
    return SignalWindow(signal_mv=signal, fs_hz=float(fs_hz), sampfrom=0, leads=tuple(STORED))


def test_standard_order_renames_and_reorders():
    shown = standard_order(window())
    assert shown.leads == TWELVE_LEADS
    assert np.allclose(shown.signal_mv[0], np.arange(12) / 10.0)
    with pytest.raises(EcgTraceError, match="needs leads V5"):
        standard_order(SignalWindow(np.zeros((10, 11), np.float32), 100.0, 0, tuple(STORED[:-1])))


def test_3x4_cells_are_drawn_at_their_true_times():
    rgb, layout = render_3x4_array(window(), px_per_mm=3)
    assert rgb.shape == (layout.height_px, layout.width_px, 3) and layout.width_px == (20 + 250 + 5) * 3
    cells = layout.lead_rows
    assert [c["lead"] for c in cells] == [lead for row in GRID_3X4 for lead in row] + ["II"]
    for k, cell in enumerate(cells[:12]):
        column = k % 4
        assert cell["t0_s"] == pytest.approx(2.5 * column) and cell["t1_s"] == pytest.approx(2.5 * (column + 1))
        assert cell["x0_px"] == pytest.approx(layout.x_px(2.5 * column), abs=1)  # same pixel column for a time in every row
    strip = cells[-1]
    assert (strip["t0_s"], strip["t1_s"]) == (0.0, 10.0) and strip["top_px"] > cells[11]["top_px"]
    assert layout.params["layout"] == "3x4" and layout.mm_per_s == 25 and layout.mm_per_mv == 10


def test_png_layouts_and_the_paper_note(tmp_path):
    grid = render_12lead_png(window(), tmp_path / "a.png", px_per_mm=3)
    stacked = render_12lead_png(window(), tmp_path / "b.png", layout="stacked", px_per_mm=3)
    assert (tmp_path / "a.png").read_bytes() == grid.png and grid.png[:8] == b"\x89PNG\r\n\x1a\n"
    assert [r["lead"] for r in stacked.layout.lead_rows] == list(TWELVE_LEADS)
    assert stacked.layout.height_px > grid.layout.height_px
    assert render_12lead_png(window(), px_per_mm=3).png == grid.png  # deterministic
    assert "0.2 s" in PAPER_NOTE and "0.5 mV" in PAPER_NOTE
    with pytest.raises(EcgTraceError, match="unknown 12-lead layout"):
        render_12lead_png(window(), layout="6x2")
