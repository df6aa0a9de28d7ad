"""Filters of the delineator: baseline removal, low-pass, NaN and QRS bridging (``fs_hz`` explicit)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = ["bridge_nan", "bridge_qrs", "lowpass", "preprocess"]


@lru_cache(maxsize=32)
def _lowpass_sos(cut_hz: float, fs_hz: float) -> np.ndarray | None:
    from scipy.signal import butter

    if cut_hz >= 0.45 * fs_hz:
        return None
    return butter(3, cut_hz, btype="lowpass", fs=fs_hz, output="sos")


def lowpass(x: np.ndarray, cut_hz: float, fs_hz: float) -> np.ndarray:
    from scipy.signal import sosfiltfilt

    sos = _lowpass_sos(float(cut_hz), float(fs_hz))
    if sos is None or x.size < 30:
        return x.copy()
    return sosfiltfilt(sos, x)


def _odd(n: float) -> int:
    n = max(int(round(n)), 1)
    return n if n % 2 else n + 1


def bridge_nan(x_mv: np.ndarray) -> np.ndarray:
    """A float64 copy with NaN/inf samples replaced by linear interpolation (0 when nothing is finite)."""
    x = np.array(x_mv, dtype=np.float64)
    bad = ~np.isfinite(x)
    if bad.any():
        good = np.flatnonzero(~bad)
        x[bad] = np.interp(np.flatnonzero(bad), good, x[good]) if good.size else 0.0
    return x


def preprocess(x_mv: np.ndarray, fs_hz: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(y, xf, xs, d)``: baseline-free signal, 40 Hz and 12 Hz low-passed, slope of xf (mV/s)."""
    from scipy.ndimage import median_filter

    x = bridge_nan(x_mv)
    base = median_filter(median_filter(x, _odd(0.2 * fs_hz), mode="nearest"), _odd(0.6 * fs_hz), mode="nearest")
    y = x - base
    xf = lowpass(y, 40.0, fs_hz)
    xs = lowpass(y, 12.0, fs_hz)
    d = np.gradient(xf) * fs_hz
    return y, xf, xs, d


def bridge_qrs(y: np.ndarray, qrs_on: np.ndarray, qrs_off: np.ndarray, fs_hz: float, cut_hz: float) -> tuple[np.ndarray, np.ndarray]:
    """``(xs, hf_noise)``: ``y`` with every QRS bridged by a straight line, low-passed at ``cut_hz``, and what the low-pass removed.

    Bridging keeps the filter from smearing the QRS into the P and T waves next to it.
    """
    n = y.size
    bridged = y.copy()
    pad = max(int(0.01 * fs_hz), 1)
    for on, off in zip(qrs_on, qrs_off):
        if on >= 0:
            a, b = max(int(on) - pad, 0), min(int(off) + pad, n - 1)
            bridged[a : b + 1] = np.linspace(bridged[a], bridged[b], b - a + 1)
    xs = lowpass(bridged, cut_hz, fs_hz)
    return xs, bridged - xs
