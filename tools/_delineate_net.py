"""Per-beat wave boundaries from the wave net's probabilities (see :mod:`ecgtrace.tools._wave_net`).

The net labels every sample none / P / QRS / T. For one lead and the caller's
beats (R peaks, local samples at ``fs_hz``):

* a wave is a run of samples whose most probable class it is; runs of one class
  separated by less than ``gap_ms`` (QRS, P) or ``t_gap_ms`` (T) are one wave, so
  a notch does not split a QRS;
* a boundary is where the class stops being the most probable, to a fraction of
  a sample: the zero crossing of (its probability - the largest other one),
  moved half a net sample (2 ms) inwards, because the net was trained on
  labels that include both boundary samples;
* the beat's QRS is the run that holds its R peak, or the nearest one within
  ``qrs_reach_ms`` (one run, one beat); its P is the last P run of at least ``p_min_ms`` that ends
  before that QRS and starts after the previous one; its T is the first T run
  after the QRS and before the next beat's QRS.

Marks are floats in local samples, NaN where the beat has no such wave. Which
marks the delineator takes from here, and which from its own rules, is
:class:`~ecgtrace.tools._delineate.DelineationParams`' choice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ecgtrace.tools._wave_net import CLASSES, WAVE_NET_FS_HZ

NET_MARKS = ("p_on", "p_off", "qrs_on", "qrs_off", "t_on", "t_off")


@dataclass(frozen=True)
class NetMarkParams:
    """How runs become waves (ms); chosen on the net's validation records (``benchmarks/train_wave_net.py --set fit``)."""

    gap_ms: float = 16.0
    t_gap_ms: float = 40.0
    p_min_ms: float = 20.0
    qrs_reach_ms: float = 80.0


def _margin(prob: np.ndarray, cls: int) -> np.ndarray:
    """``p[cls] - max(other classes)`` per sample: >= 0 where ``cls`` is the most probable class."""
    others = np.delete(prob, cls, axis=1).max(axis=1)
    return prob[:, cls] - others


def _runs(inside: np.ndarray, gap: int) -> tuple[np.ndarray, np.ndarray]:
    """``(first, last)`` samples of the runs of ``inside``, runs closer than ``gap`` samples merged."""
    edges = np.diff(np.r_[0, inside.astype(np.int8), 0])
    first, last = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    if first.size < 2:
        return first, last
    keep = np.r_[True, first[1:] - last[:-1] - 1 > gap]
    return first[keep], last[np.r_[keep[1:], True]]


def _crossing(margin: np.ndarray, a: int, b: int) -> float:
    """Where ``margin`` crosses zero between samples ``a`` and ``b`` (adjacent), linearly; ``b`` if it does not."""
    ma, mb = float(margin[a]), float(margin[b])
    if (ma < 0) == (mb < 0) or ma == mb:
        return float(b)
    return a + (b - a) * ma / (ma - mb)


def _boundaries(margin: np.ndarray, first: int, last: int, half_step: float) -> tuple[float, float]:
    """``(on, off)`` of the run ``first..last``, inside the lead's samples and ``on <= off``."""
    n = margin.size
    on = _crossing(margin, first - 1, first) + half_step if first > 0 else float(first)
    off = _crossing(margin, last, last + 1) - half_step if last + 1 < n else float(last)
    on = min(max(on, 0.0), n - 1.0)
    return on, min(max(off, on), n - 1.0)


def _qrs_runs_of_beats(q_first: np.ndarray, q_last: np.ndarray, beats: np.ndarray, reach: float) -> np.ndarray:
    """Per beat, the index of its QRS run (-1: none within ``reach`` samples); a run goes to one beat only.

    A beat's run is the one that holds its R peak, else the nearest; where two beats
    (a double detection, or a beat the net folded into its neighbour's QRS) pick the
    same run, the beat nearest the run's middle keeps it and the other gets none.
    """
    inside = (q_first[None, :] <= beats[:, None]) & (q_last[None, :] >= beats[:, None])
    dist = np.where(inside, 0, np.minimum(np.abs(q_first[None, :] - beats[:, None]), np.abs(q_last[None, :] - beats[:, None])))
    run = np.argmin(dist, axis=1)
    run = np.where(dist[np.arange(beats.size), run] <= reach, run, -1)
    middle = 0.5 * (q_first + q_last)
    for k in np.unique(run[run >= 0]):
        holders = np.flatnonzero(run == k)
        if holders.size > 1:
            keep = holders[np.argmin(np.abs(beats[holders] - middle[k]))]
            run[holders[holders != keep]] = -1
    return run


def net_beat_marks(prob: np.ndarray, beats: np.ndarray, fs_hz: float, params: NetMarkParams | None = None) -> dict[str, np.ndarray]:
    """Per beat: ``NET_MARKS`` (float local samples, NaN: none) from one lead's probabilities ``prob`` (n, 4) at ``fs_hz``."""
    cp = params or NetMarkParams()
    beats = np.asarray(beats, dtype=np.int64)
    out = {k: np.full(beats.size, np.nan) for k in NET_MARKS}
    if beats.size == 0 or prob.shape[0] < 2:
        return out
    ms = fs_hz / 1000.0
    half_step = 0.5 * fs_hz / WAVE_NET_FS_HZ
    label = prob.argmax(axis=1)
    runs = {}
    for wave in ("p", "qrs", "t"):
        cls = CLASSES.index(wave)
        gap = int(round((cp.t_gap_ms if wave == "t" else cp.gap_ms) * ms))
        first, last = _runs(label == cls, gap)
        runs[wave] = (first, last, _margin(prob, cls))
    q_first, q_last, q_margin = runs["qrs"]
    if q_first.size == 0:
        return out
    for i, k in enumerate(_qrs_runs_of_beats(q_first, q_last, beats, cp.qrs_reach_ms * ms)):
        if k < 0:
            continue
        out["qrs_on"][i], out["qrs_off"][i] = _boundaries(q_margin, int(q_first[k]), int(q_last[k]), half_step)
        prev_end = q_last[k - 1] if k > 0 else -1
        next_start = q_first[k + 1] if k + 1 < q_first.size else prob.shape[0]
        p_first, p_last, p_margin = runs["p"]
        p_ok = np.flatnonzero((p_last < q_first[k]) & (p_first > prev_end) & (p_last - p_first + 1 >= cp.p_min_ms * ms))
        if p_ok.size:
            j = int(p_ok[-1])
            out["p_on"][i], out["p_off"][i] = _boundaries(p_margin, int(p_first[j]), int(p_last[j]), half_step)
        t_first, t_last, t_margin = runs["t"]
        t_ok = np.flatnonzero((t_first > q_last[k]) & (t_last < next_start))
        if t_ok.size:
            j = int(t_ok[0])
            out["t_on"][i], out["t_off"][i] = _boundaries(t_margin, int(t_first[j]), int(t_last[j]), half_step)
    return out
