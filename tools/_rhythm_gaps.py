"""Long RR gaps read from the signal: quiet (a pause, an asystole) or busy (missed beats, noise).

A pause (or an asystole) is an RR interval with no electrical activity between the
T wave of one beat and the P wave of the next. When the beat detector misses beats
inside noise it has not marked as an artifact span (electrode motion, the chest
compressions of a resuscitation), the long RR it leaves is not a pause: the signal
there swings as much as a QRS complex. This module finds such gaps from the signal.

For every RR longer than ``min_gap_s`` outside the artifact spans, the *middle* of
the gap (from ``after_r_s`` past the first R peak, past its T wave, to ``before_r_s``
before the next, before its P wave) is detrended (least-squares line: baseline
wander) and its peak-to-peak range is compared, lead by lead, with the QRS range of
the two bounding beats (``qrs_half_s`` around each R peak). The gap is *busy* when the
median of that ratio over the usable leads reaches ``busy_ratio``: in a true pause
the middle holds at most a P wave or a blocked P, a fraction of the QRS.

What the thresholds were set on (``busy_ratio`` 0.5, in the wide space between the two
groups): quiet gaps read 0.06 in the synthetic Holter's scheduled pauses and asystole
and 0.06-0.11 in the pauses of MIT-BIH 201 (reference beats, DS1); busy ones 1.06-6.1
in the chest-compression noise of VFDB 419, and 2.1-2.4 where the detector missed
beats of 418's sinus rhythm (detected beats, tuned half of ``benchmarks/_protocol.py``).
The T wave and P wave margins are physiological (a QT under 0.45 s at the rates
before a pause, a PR under 0.25 s).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ecgtrace.tools._rhythm_spans import overlaps_any
from ecgtrace.tools.records import RecordInfo, read_samples

GAPS_VERSION = "1"
DEFAULT_GAP_PARAMS = {"min_gap_s": 2.0, "after_r_s": 0.45, "before_r_s": 0.25, "qrs_half_s": 0.06, "busy_ratio": 0.5}


def _detrended_ptp(x: np.ndarray) -> np.ndarray:
    """Per lead, the peak-to-peak range of ``x`` (samples x leads) after removing its least-squares line (NaN-free input)."""
    t = np.arange(x.shape[0], dtype=np.float64)
    t -= t.mean()
    centred = x - x.mean(axis=0, keepdims=True)
    slope = (t[:, None] * centred).sum(axis=0) / max(float((t * t).sum()), 1e-12)
    return np.ptp(centred - t[:, None] * slope[None, :], axis=0)


def gap_activity(signal_mv: np.ndarray, r_first: int, r_next: int, fs_hz: float, params: dict | None = None) -> float:
    """Median over leads of (detrended range of the gap's middle) / (QRS range of the bounding beats).

    Samples are relative to ``signal_mv`` (samples x leads); NaN when the gap's middle is too
    short, or no lead has a QRS range to compare with.
    """
    p = {**DEFAULT_GAP_PARAMS, **(params or {})}
    x = np.asarray(signal_mv, dtype=np.float64)
    x = x[:, None] if x.ndim == 1 else x
    lo, hi = r_first + int(round(p["after_r_s"] * fs_hz)), r_next - int(round(p["before_r_s"] * fs_hz))
    half = max(int(round(p["qrs_half_s"] * fs_hz)), 1)
    if hi - lo < max(int(round(0.2 * fs_hz)), 3) or r_first - half < 0 or r_next + half + 1 > x.shape[0]:
        return float("nan")
    ok = np.isfinite(x[r_first - half : r_next + half + 1]).all(axis=0)
    if not ok.any():
        return float("nan")
    middle = _detrended_ptp(x[lo:hi][:, ok])
    qrs = np.maximum(np.ptp(x[r_first - half : r_first + half + 1][:, ok], axis=0), np.ptp(x[r_next - half : r_next + half + 1][:, ok], axis=0))
    usable = qrs > 0
    if not usable.any():
        return float("nan")
    return float(np.median(middle[usable] / qrs[usable]))


def is_quiet(gap: dict) -> bool:
    """Whether a gap of :func:`measure_gaps` was read and found quiet (a pause even beside an artifact span)."""
    return gap.get("activity") is not None and not gap["busy"]


def measure_gaps(info: RecordInfo, beat_samples: np.ndarray, skip_spans: Sequence[tuple[int, int]] = (), *,
                 params: dict | None = None) -> list[dict]:
    """Every RR gap longer than ``min_gap_s`` that overlaps no ``skip_spans`` (VF/VFL), with its activity.

    Each: ``{onset_sample, offset_sample, activity, busy}`` (the two R peaks, :func:`gap_activity`, and
    whether it reaches ``busy_ratio``; activity None where it cannot be measured). Artifact spans are
    *not* skipped: a flat asystole is where the detector sees no QRS and may mark an artifact, and the
    gap's own signal says which it is. Reads only the gaps and their bounding beats.
    """
    p = {**DEFAULT_GAP_PARAMS, **(params or {})}
    beats = np.asarray(beat_samples, dtype=np.int64)
    fs = float(info.fs_hz)
    half = max(int(round(p["qrs_half_s"] * fs)), 1)
    out: list[dict] = []
    if beats.size < 2:
        return out
    spans = [(int(a), int(b)) for a, b in skip_spans]
    unusable = set(info.unusable_leads)
    leads = [j for j, lead in enumerate(info.leads) if lead not in unusable] or list(range(len(info.leads)))
    for i in np.flatnonzero(np.diff(beats) > p["min_gap_s"] * fs).tolist():
        a, b = int(beats[i]), int(beats[i + 1])
        if overlaps_any(a, b, spans) or a - half < 0 or b + half + 1 > info.n_samples:
            continue
        window = read_samples(info, a - half, b + half + 1, leads=leads)
        activity = gap_activity(window.signal_mv, half, b - a + half, fs, p)
        known = bool(np.isfinite(activity))
        out.append({"onset_sample": a, "offset_sample": b, "activity": round(activity, 3) if known else None,
                    "busy": known and activity >= p["busy_ratio"]})
    return out
