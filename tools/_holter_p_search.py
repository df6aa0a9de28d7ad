"""Array kernels of the P-wave search (:mod:`ecgtrace.tools.holter_p`): beat windows, R alignment, QRS-T
subtraction, sliding correlation, search masks and peak picking.

They are vectorised over beats (a 24 h Holter has ~100 000 of them) and
reproduce, bit for bit, the per-beat loops they replace: the same floating
point operations in the same order (numpy's ``linspace`` and row-by-row sums
are spelled out where a batched call would round differently). That keeps
:data:`ecgtrace.tools.holter_p.HOLTER_P_VERSION` unchanged; ``tests/tools/test_holter_p_search.py``
checks each kernel against the plain loop.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.ndimage import maximum_filter1d, minimum_filter1d
from scipy.signal import fftconvolve


def _windows(x: np.ndarray, centers: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """(n_centers, hi - lo, n_leads) windows ``x[c + lo : c + hi]`` (centers must fit)."""
    idx = centers[:, None] + np.arange(lo, hi)[None, :]
    return x[idx]


def align_beats(f: np.ndarray, beats: np.ndarray, good: np.ndarray, is_n: np.ndarray, fs_hz: float, p: dict[str, Any]) -> np.ndarray:
    """N-beat R peaks moved (up to ``align_ms``) to best match the median QRS: one fiducial, so PR steps are real."""
    half, lag = int(0.08 * fs_hz), int(p["align_ms"] * fs_hz / 1000)
    inside = (beats - half - lag >= 0) & (beats + half + lag < f.shape[0])
    fit = good & inside
    out = beats.copy()
    if fit.sum() < p["min_template_beats"]:
        return out
    tpl = np.median(_windows(f, beats[fit], -half, half), axis=0)
    tpl = tpl - tpl.mean(axis=0)
    idx = np.flatnonzero(is_n & inside)
    if idx.size == 0:
        return out
    wide = _windows(f, beats[idx], -half - lag, half + lag)  # one gather; each lag is a view of it
    score = np.stack([(wide[:, k : k + 2 * half] * tpl[None]).sum(axis=(1, 2)) for k in range(2 * lag + 1)], axis=1)
    out[idx] = beats[idx] + np.argmax(score, axis=1) - lag
    return out


def _linspace_rows(start: np.ndarray, stop: np.ndarray, num: np.ndarray, width: int) -> np.ndarray:
    """(beats, width, leads): row ``i`` holds ``np.linspace(start[i], stop[i], num[i])`` (num >= 2), then zeros.

    numpy's own steps, so the values are the ones a per-beat ``linspace`` gives:
    ``k * step + start``, or ``k / div * delta + start`` where a lead's step
    underflows to 0, and ``stop`` exactly at the end.
    """
    div = (num - 1).astype(np.float64)[:, None, None]
    delta = (stop - start)[:, None, :]
    step = delta / div
    k = np.arange(width, dtype=np.float64)[None, :, None]
    zero_step = (step == 0).any(axis=2)[:, :, None]
    y = np.where(zero_step, k / div * delta, k * step) + start[:, None, :]
    rows = np.arange(num.size)
    y[rows, num - 1] = stop
    y[np.arange(width)[None, :] >= num[:, None]] = 0.0
    return y


def _qrst_spans(beats: np.ndarray, is_n: np.ndarray, n: int, pre: int, post: int, cut: int) -> tuple[np.ndarray, np.ndarray]:
    """``(beat indices, samples after R)`` of the N beats whose QRS-T is subtracted: up to ``post``, cut ``cut`` before the next R."""
    idx = np.flatnonzero(is_n)
    nxt = np.minimum(idx + 1, beats.size - 1)
    end = np.where(idx + 1 >= beats.size, post, np.minimum(post, beats[nxt] - beats[idx] - cut))
    ok = (beats[idx] - pre >= 0) & (end > 0) & (beats[idx] + end <= n)
    return idx[ok], end[ok]


def subtract_qrst(f: np.ndarray, beats: np.ndarray, good: np.ndarray, is_n: np.ndarray, fs_hz: float, pr_guess: int, p: dict[str, Any]) -> np.ndarray:
    """The signal minus each N beat's fitted median QRS-T (in a copy).

    Each beat's piece of the template is detrended (zero at both ends: the
    subtraction leaves no step) and scaled (least squares, 0.6-1.6) per lead.
    """
    pre, post = int(p["qrst_pre_ms"] * fs_hz / 1000), int(p["qrst_post_ms"] * fs_hz / 1000)
    fit = good & (beats - pre >= 0) & (beats + post < f.shape[0])
    res = f.copy()
    if fit.sum() < p["min_template_beats"]:
        return res
    template = np.median(_windows(f, beats[fit], -pre, post), axis=0)  # (pre + post, leads)
    idx, end = _qrst_spans(beats, is_n, f.shape[0], pre, post, pr_guess + int(0.06 * fs_hz))
    if idx.size == 0:
        return res
    num = pre + end  # samples per beat
    width = int(num.max())
    tpl = _linspace_rows(np.broadcast_to(template[0], (num.size, template.shape[1])), template[num - 1], num, width)
    np.subtract(template[None, :width], tpl, out=tpl, where=np.arange(width)[None, :, None] < num[:, None, None])
    seg = _windows(f, beats[idx], -pre, -pre + width) if int(beats[idx].max()) - pre + width <= f.shape[0] else _padded_windows(f, beats[idx] - pre, width)
    # row-by-row sums, as numpy sums a (time, leads) array over time; the zero padding adds exact zeros
    fit_sum, energy = seg[:, 0] * tpl[:, 0], tpl[:, 0] * tpl[:, 0]
    for k in range(1, width):
        fit_sum += seg[:, k] * tpl[:, k]
        energy += tpl[:, k] * tpl[:, k]
    scale = np.clip(fit_sum / np.maximum(energy, 1e-12), 0.6, 1.6)
    inside = np.arange(width)[None, :] < num[:, None]
    rows = (beats[idx, None] - pre + np.arange(width)[None, :])[inside]
    delta = (tpl * scale[:, None, :])[inside]
    starts = beats[idx] - pre
    if np.all(starts[1:] >= starts[:-1] + num[:-1]):  # spans in order, none overlapping (sorted beats)
        res[rows] -= delta
    else:  # overlapping spans (unsorted beats): subtract in beat order, as one beat after another
        np.subtract.at(res, rows, delta)
    return res


def _padded_windows(f: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """``_windows`` from ``starts`` where the last windows run past the end (those samples read as 0)."""
    padded = np.concatenate([f, np.zeros((width, f.shape[1]), f.dtype)])
    return _windows(padded, starts, 0, width)


def sliding_corr(res: np.ndarray, tpl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Multi-lead normalised correlation and scale of ``tpl`` at each centre sample of ``res``."""
    n, m = res.shape[0], tpl.shape[0]
    per_lead = fftconvolve(np.ascontiguousarray(res.T), tpl[::-1].T, mode="same", axes=-1)  # all leads in one call: the same transforms
    num = np.zeros(n)
    for row in per_lead:  # summed lead by lead, in order: the sum rounds as it always did
        num += row
    csum = np.cumsum(np.vstack([np.zeros((1, res.shape[1])), res]), axis=0)
    csq = np.cumsum(np.vstack([np.zeros((1, res.shape[1])), res * res]), axis=0)
    if n >= m:  # each full window once; the edge samples reuse the first and last
        s1, s2 = csum[m:] - csum[:-m], csq[m:] - csq[:-m]
        var_full = np.maximum((s2 - s1 * s1 / m).sum(axis=1), 1e-12)
        var = var_full[np.clip(np.arange(n) - m // 2, 0, n - m)]
    else:
        lo = np.clip(np.arange(n) - m // 2, 0, n - m)
        s1, s2 = csum[lo + m] - csum[lo], csq[lo + m] - csq[lo]
        var = np.maximum((s2 - s1 * s1 / m).sum(axis=1), 1e-12)
    energy = float((tpl * tpl).sum())
    return num / np.sqrt(var * energy), num / energy


def pick_peaks(corr: np.ndarray, scale: np.ndarray, allowed: np.ndarray, t_zone: np.ndarray, fs_hz: float, p: dict[str, Any]) -> np.ndarray:
    """Greedy non-maximum suppression of allowed correlation peaks, ``min_pp_ms`` apart (stricter on T waves).

    Greedy order is highest correlation first (ties: earlier sample). Rather than
    one candidate at a time, each round keeps every undecided candidate that
    outranks all undecided ones within ``min_pp_ms`` and has no kept peak there,
    then drops the undecided ones next to a kept peak: the same peaks as the
    one-at-a-time greedy pass (a candidate is only ever suppressed by a kept,
    higher-ranked one), in a few array passes.
    """
    need = np.where(t_zone, p["t_zone_min_corr"], p["min_corr"])
    cand = np.flatnonzero(allowed & (corr >= need) & (scale >= p["min_scale"]) & (scale <= p["max_scale"]))
    if cand.size == 0:
        return cand
    gap = int(p["min_pp_ms"] * fs_hz / 1000)
    size = max(2 * gap - 1, 1)  # the window [c - gap + 1, c + gap - 1]
    none = cand.size
    rank = np.full(corr.size, none, np.int64)
    rank[cand[np.argsort(-corr[cand], kind="stable")]] = np.arange(cand.size)
    kept = np.zeros(corr.size, bool)
    while True:
        undecided = rank < none
        if not undecided.any():
            break
        best = undecided & (rank == minimum_filter1d(rank, size, mode="constant", cval=none))
        kept |= best & ~maximum_filter1d(kept, size, mode="constant", cval=False)
        rank[best] = none
        rank[maximum_filter1d(kept, size, mode="constant", cval=False)] = none
    return np.flatnonzero(kept).astype(np.int64)


def _covered(n: int, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """Bool (n,): True inside any ``[start, stop)`` (clipped to ``[0, n)``), as slice assignments would mark it."""
    starts, stops = np.clip(starts, 0, n), np.clip(stops, 0, n)
    ok = stops > starts
    edges = np.zeros(n + 1, np.int64)
    np.add.at(edges, starts[ok], 1)
    np.add.at(edges, stops[ok], -1)
    return np.cumsum(edges[:n]) > 0


def allowed_masks(n: int, beats: np.ndarray, is_n: np.ndarray, fs_hz: float, p: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """``(allowed, t_zone)`` masks: no P inside a QRS (or another beat's QRS-T); the T wave after it asks more."""
    t_end = int(p["t_zone_ms"] * fs_hz / 1000)
    t_zone = _covered(n, np.maximum(beats[is_n], 0), np.maximum(beats[is_n] + t_end, 0))  # the subtracted T wave's residual can mimic a P
    blocked = np.zeros(n, bool)
    for guard, which in ((p["qrs_guard_ms"], is_n), (p["other_beat_guard_ms"], ~is_n)):
        before, after = (int(v * fs_hz / 1000) for v in guard)
        blocked |= _covered(n, np.maximum(beats[which] - before, 0), np.maximum(beats[which] + after, 0))
    return ~blocked, t_zone
