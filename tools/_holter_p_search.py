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
    """(width, beats, leads), time first: column ``i`` holds ``np.linspace(start, stop[i], num[i])`` (num >= 2), then zeros.

    numpy's own steps, so the values are the ones a per-beat ``linspace`` gives:
    ``k * step + start``, or ``k / div * delta + start`` for a beat where a
    lead's step underflows to 0, and ``stop`` exactly at the end.
    """
    div = (num - 1).astype(np.float64)[None, :, None]
    delta = (stop - start)[None]
    step = delta / div
    k = np.arange(width, dtype=np.float64)[:, None, None]
    y = k * step
    zero_step = np.flatnonzero((step[0] == 0).any(axis=1))
    if zero_step.size:
        y[:, zero_step] = k / div[:, zero_step] * delta[:, zero_step]
    y += start
    y[num - 1, np.arange(num.size)] = stop
    if int(num.min()) < width:
        y[np.arange(width)[:, None] >= num[None, :]] = 0.0
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
    inside = np.arange(width)[:, None] < num[None, :]  # (time, beats)
    tpl = _linspace_rows(template[0], template[num - 1], num, width)
    np.subtract(template[:width, None], tpl, out=tpl, where=inside[:, :, None])
    rows = (beats[idx] - pre)[None, :] + np.arange(width)[:, None]
    seg = (f if int(rows.max()) < f.shape[0] else np.concatenate([f, np.zeros((width, f.shape[1]))]))[rows]
    # summed over time row by row, as numpy sums each beat's (time, leads) array; the zero padding adds exact zeros
    fit_sum = np.multiply(seg, tpl, out=seg).sum(axis=0)
    scale = np.clip(fit_sum / np.maximum(np.multiply(tpl, tpl, out=seg).sum(axis=0), 1e-12), 0.6, 1.6)
    tpl *= scale[None]
    for i, (a, k) in enumerate(zip((beats[idx] - pre).tolist(), num.tolist())):  # slices beat after beat: faster than a scatter
        res[a : a + k] -= tpl[:k, i]
    return res


def _lead_sum(per_lead: np.ndarray, work: Workspace | None = None) -> np.ndarray:
    """``per_lead.T.sum(axis=1)`` for a (leads, n) array, rounded as numpy sums each contiguous row of the (n, leads) array."""
    if per_lead.shape[0] >= 8:  # numpy sums 8 or more in pairs: let it
        return np.ascontiguousarray(per_lead.T).sum(axis=1)
    total = work.get("lead_total", per_lead.shape[1:]) if work is not None else np.empty(per_lead.shape[1:])
    np.copyto(total, per_lead[0])
    for row in per_lead[1:]:  # under 8 terms numpy adds them one by one
        total += row
    return total


class Workspace:
    """Float64 buffers reused from chunk to chunk by one P-wave search (never shared between searches or threads).

    A 10-min chunk's (leads, samples) arrays are ~3.7 MB each: allocated fresh
    for every chunk, each page of them faults in again (seconds of system time
    over the 144 chunks of a 24 h record). :meth:`get` hands out a view of a
    buffer that only ever grows.
    """

    def __init__(self) -> None:
        self._buffers: dict[str, np.ndarray] = {}

    def get(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        size = int(np.prod(shape))
        buffer = self._buffers.get(name)
        if buffer is None or buffer.size < size:
            buffer = self._buffers[name] = np.empty(max(size, 1))
        return buffer[:size].reshape(shape)


def sliding_corr(res: np.ndarray, tpl: np.ndarray, work: Workspace | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Multi-lead normalised correlation and scale of ``tpl`` at each centre sample of ``res``.

    Computed lead-major ((leads, n) arrays: each lead contiguous), in the
    operations and order of the (n, leads) formulation it replaces; the
    intermediate arrays live in ``work`` (the returned two are new).
    """
    work = work or Workspace()
    n, m = res.shape[0], tpl.shape[0]
    n_leads = res.shape[1]
    csum = work.get("csum", (n_leads, n + 1))  # a zero, then each lead's samples; cumulated below
    csum[:, 0] = 0.0
    csum[:, 1:] = res.T
    num = work.get("num", (n,))
    num.fill(0.0)
    for row in fftconvolve(csum[:, 1:], tpl[::-1].T, mode="same", axes=-1):  # the leads' transforms in one call
        num += row  # summed lead by lead, in order, as a sum over the leads always was
    csq = np.square(csum, out=work.get("csq", csum.shape))
    np.cumsum(csum, axis=1, out=csum)
    np.cumsum(csq, axis=1, out=csq)
    if n >= m:  # each full window once; the edge samples reuse the first and last
        s1 = np.subtract(csum[:, m:], csum[:, :-m], out=work.get("s1", (n_leads, n - m + 1)))
        s2 = np.subtract(csq[:, m:], csq[:, :-m], out=work.get("s2", (n_leads, n - m + 1)))
    else:
        lo = np.clip(np.arange(n) - m // 2, 0, n - m)
        s1, s2 = csum[:, lo + m] - csum[:, lo], csq[:, lo + m] - csq[:, lo]
    np.multiply(s1, s1, out=s1)
    s1 /= m
    s2 -= s1
    per_window = np.maximum(_lead_sum(s2, work), 1e-12, out=work.get("lead_sum", (s2.shape[1],)) if n_leads < 8 else None)
    var = _spread_to_centres(per_window, n, m, work) if n >= m else per_window
    energy = float((tpl * tpl).sum())
    var *= energy
    np.sqrt(var, out=var)
    return num / var, num / energy


def _spread_to_centres(per_window: np.ndarray, n: int, m: int, work: Workspace) -> np.ndarray:
    """``per_window[clip(arange(n) - m // 2, 0, n - m)]`` (the window of each centre sample), by three copies."""
    half = m // 2
    out = work.get("var", (n,))
    out[:half] = per_window[0]
    out[half : half + per_window.size] = per_window
    out[half + per_window.size :] = per_window[-1]
    return out


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
