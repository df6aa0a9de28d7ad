"""Clipped (saturated) leads: the trace sits flat at its extreme where the heart's signal went on.

An amplifier or ADC that saturates writes its limit, sample after sample, where
the true signal went beyond it. Amplitudes, ST levels and wave shapes read
there are the limit's, not the heart's (QTDB sel42's first lead is cut at
2.555 mV in every QRS; MIT-BIH 116 and 223 and CPSC 2021 data_8_2 run into the
ADC limit with baseline wander).

A plateau counts as clipping when the trace holds its window maximum (or
minimum) exactly, for at least :data:`MIN_PLATEAU_MS` and 3 samples, and

* runs into it and out of it steeply (at least :data:`MIN_EDGE_SLOPE_MV_S`
  over :data:`EDGE_MS` on both sides: a QRS cut off), or
* stays there for :data:`LONG_PLATEAU_MS` or more (no recorded ECG holds one
  value to the quantization step that long).

The slope condition is what tells a cut QRS from a slow wave that lingers on
one quantization level at its peak: QTDB's 5 uV steps at 250 Hz leave 3-5
equal samples at the trough of many baselines (sel30, sel34, sel15814), with
edges under 1 mV/s. Measured over 10 s windows of every shared record, the rule
fires on QTDB sel42 and sel14046, MIT-BIH 116 and 223, CPSC data_8_2 and LUDB
115's lead II (300 ms held at its first samples), and on no PTB-XL window.
"""

from __future__ import annotations

import numpy as np

CLIPPING_VERSION = "1"
MIN_PLATEAU_MS = 16.0  # shortest run at the extreme that can be a cut-off peak (and >= 3 samples)
EDGE_MS = 10.0  # the slope into and out of a plateau is read over this span
MIN_EDGE_SLOPE_MV_S = 5.0  # a QRS edge; a T or baseline turning point is under 1 mV/s
LONG_PLATEAU_MS = 200.0  # held this long at the extreme: clipped whatever the edges
MIN_CUT_PLATEAUS = 2  # a lead is clipped with this many steep-edged plateaus (or one long one)


def clipped_plateaus(trace_mv: np.ndarray, fs_hz: float) -> list[tuple[int, int]]:
    """``(start, n_samples)`` of every plateau of ``trace_mv`` that looks clipped (see the module doc).

    Args:
        trace_mv: one lead, in mV (NaN allowed: it never joins a plateau).
        fs_hz: sampling rate in Hz.
    """
    x = np.asarray(trace_mv, dtype=float)
    finite = np.isfinite(x)
    if finite.sum() < 10 or np.ptp(x[finite]) == 0:  # a constant lead is flat, not clipped (records.lead_is_unusable)
        return []
    min_len = max(3, int(np.ceil(MIN_PLATEAU_MS * fs_hz / 1000.0)))
    long_len = int(np.ceil(LONG_PLATEAU_MS * fs_hz / 1000.0))
    edge = max(int(round(EDGE_MS * fs_hz / 1000.0)), 1)
    found: list[tuple[int, int]] = []
    for extreme, sign in ((np.nanmax(x), 1.0), (np.nanmin(x), -1.0)):
        at = np.abs(x - extreme) <= 1e-6 * max(abs(extreme), 1.0)  # NaN compares False
        steps = np.diff(np.r_[0, at.astype(np.int8), 0])
        for start, stop in zip(np.flatnonzero(steps == 1), np.flatnonzero(steps == -1)):
            length = int(stop - start)
            if length < min_len:
                continue
            if length >= long_len:
                found.append((int(start), length))
                continue
            if start - edge < 0 or stop - 1 + edge >= x.size:
                continue
            into = sign * (x[start] - x[start - edge]) * fs_hz / edge
            away = sign * (x[stop - 1] - x[stop - 1 + edge]) * fs_hz / edge
            if into >= MIN_EDGE_SLOPE_MV_S and away >= MIN_EDGE_SLOPE_MV_S:
                found.append((int(start), length))
    return sorted(found)


def lead_clipped(trace_mv: np.ndarray, fs_hz: float) -> bool:
    """True when ``trace_mv`` holds :data:`MIN_CUT_PLATEAUS` clipped plateaus, or one of :data:`LONG_PLATEAU_MS`."""
    plateaus = clipped_plateaus(trace_mv, fs_hz)
    long_len = int(np.ceil(LONG_PLATEAU_MS * fs_hz / 1000.0))
    return len(plateaus) >= MIN_CUT_PLATEAUS or any(n >= long_len for _, n in plateaus)


def clipped_leads(signal_mv: np.ndarray, fs_hz: float, leads: tuple[str, ...] | list[str]) -> list[str]:
    """Names of the leads of a ``(n_samples, n_leads)`` window that are clipped."""
    x = np.asarray(signal_mv)
    return [name for j, name in enumerate(leads) if lead_clipped(x[:, j], fs_hz)]
