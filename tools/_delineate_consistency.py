"""Beat-to-beat consistency of one lead's wave boundaries (template projection with outlier rejection).

Within one lead, beats of the same morphology keep their boundaries at nearly
the same distance from the R peak: the QRS width of a dominant beat does not
change from beat to beat, the PR interval barely, and the QT follows the RR
slowly. A single beat's mark that strays far from its neighbours is almost
always noise, a P wave mistaken for the QRS start or a U wave for the T end.

:func:`beat_consistency` therefore, per lead and per boundary, takes each mark
relative to its beat's R peak, computes a running median of that distance over
the ``span`` nearest dominant beats (the template's mark, projected onto the
beat), and

* replaces a mark farther than ``limit_ms`` from it by the projection (the
  outlier rejection), and
* pulls every other mark ``blend`` of the way to it (``blend`` = 1: the pure
  template mark; 0: the beat's own).

Dominant beats are those whose QRS (+-60 ms around R, 40 Hz signal) correlates
with the lead's median QRS at ``min_corr`` or more; ectopic beats keep their own
marks and do not enter the running median. A boundary missing in a dominant
beat stays missing (the sensitivity of a mark is never bought by guessing).

:func:`median_beat_qrs` (called by the delineator itself, before this projection)
reads the QRS offset of dominant beats on the lead's median beat instead: a
template delineated once, then projected onto each beat by alignment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

#: ``(slope_mv_s, main, lo, hi) -> (on, off)``: the delineator's QRS boundary rule on local indices.
QrsBoundRule = Callable[[np.ndarray, int, int, int], tuple[int, int]]

#: Marks :func:`median_beat_qrs` sets. QRS onset is left out: on the tuning half (QTDB even positions,
#: LUDB 1-60) it made QRS-on SD worse (QTDB 10.3 -> 10.5 ms) while the offset improved (14.1 -> 13.7 ms).
MEDIAN_BEAT_MARKS = ("qrs_off",)


@dataclass(frozen=True)
class ConsistencyParams:
    """Per boundary: ``limit_ms`` (outlier distance), ``blend`` (0-1); shared: ``span`` beats, ``min_corr``.

    Set on the tuning half of the fixed split in ``benchmarks/delineation.py``
    (QTDB even positions, LUDB 1-60): of blend 0 / 0.5 / 1, tighter limits and
    span 7 / 11, these gave the lowest tuning-half SD for P on and T off.
    """

    # QRS on/off are left out: projecting them made the tuning half worse at every setting tried (their errors are per record, not per beat)
    limit_ms: dict[str, float] = field(default_factory=lambda: {"p_on": 20.0, "p_off": 20.0, "t_off": 40.0})
    blend: dict[str, float] = field(default_factory=lambda: {"p_on": 0.5, "p_off": 0.5, "t_off": 0.5})
    span: int = 7
    min_corr: float = 0.9
    min_beats: int = 3

    def to_json(self) -> dict[str, object]:
        return {"limit_ms": dict(self.limit_ms), "blend": dict(self.blend), "span": int(self.span), "min_corr": float(self.min_corr), "min_beats": int(self.min_beats)}


def dominant_beats(xf: np.ndarray, beats: np.ndarray, fs_hz: float, min_corr: float) -> np.ndarray:
    """Boolean per beat: its QRS (+-60 ms around R) correlates with the median QRS at ``min_corr`` or more."""
    half = int(round(0.06 * fs_hz))
    ok = (beats - half >= 0) & (beats + half < xf.size)
    out = np.zeros(beats.size, dtype=bool)
    if ok.sum() < 2:
        return out
    stack = np.stack([xf[b - half : b + half + 1] for b in beats[ok]])
    stack = stack - stack.mean(axis=1, keepdims=True)
    template = np.median(stack, axis=0)
    norm = np.linalg.norm(stack, axis=1) * np.linalg.norm(template)
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = np.where(norm > 0, stack @ template / norm, 0.0)
    out[np.flatnonzero(ok)] = corr >= min_corr
    return out


def running_median(values: np.ndarray, span: int) -> np.ndarray:
    """Median of the ``span`` values nearest in order to each one (itself included); NaN is skipped."""
    n = values.size
    out = np.full(n, np.nan)
    good = np.flatnonzero(np.isfinite(values))
    if good.size == 0:
        return out
    half = span // 2
    for k in range(n):
        # the span nearest finite neighbours in beat order
        pos = int(np.searchsorted(good, k))
        lo = max(0, min(pos - half, good.size - span))
        sel = good[lo : lo + span]
        out[k] = float(np.median(values[sel]))
    return out


def beat_consistency(res: dict[str, np.ndarray], beats: np.ndarray, fs_hz: float, cp: ConsistencyParams | None = None) -> int:
    """Project the running-median template marks onto one lead's dominant beats (in place); returns how many marks moved."""
    cp = cp or ConsistencyParams()
    dominant = dominant_beats(res["xf"], beats, fs_hz, cp.min_corr)
    if dominant.sum() < cp.min_beats:
        return 0
    moved = 0
    for name, limit_ms in cp.limit_ms.items():
        marks = res[name]
        have = dominant & (marks >= 0)
        if have.sum() < cp.min_beats:
            continue
        rel = np.where(have, marks - beats, np.nan).astype(np.float64)
        template = running_median(rel, cp.span)
        limit = limit_ms * fs_hz / 1000.0
        idx = np.flatnonzero(have & np.isfinite(template))
        dev = rel[idx] - template[idx]
        blend = np.where(np.abs(dev) > limit, 1.0, cp.blend.get(name, 0.0))
        new = np.round(beats[idx] + rel[idx] - blend * dev).astype(np.int64)
        moved += int(np.count_nonzero(new != marks[idx]))
        marks[idx] = new
    return moved


def _aligned_anchors(xf: np.ndarray, anchors: np.ndarray, half: int, max_lag: int) -> np.ndarray:
    """Anchors shifted (up to ``max_lag`` samples) to best match the median QRS: alignment by cross-correlation, not by one peak sample."""
    stack = np.stack([xf[a - half : a + half + 1] for a in anchors])
    template = np.median(stack, axis=0)
    core = template[max_lag : template.size - max_lag]
    out = anchors.copy()
    for k, a in enumerate(anchors):
        seg = xf[a - half : a + half + 1]
        scores = [float(np.dot(seg[max_lag + s : seg.size - max_lag + s], core)) for s in range(-max_lag, max_lag + 1)]
        out[k] = a + int(np.argmax(scores)) - max_lag
    return out


def median_beat_qrs(res: dict[str, np.ndarray], fs_hz: float, qrs_bounds: QrsBoundRule, names: tuple[str, ...] = MEDIAN_BEAT_MARKS,
                    half_ms: float = 150.0, agree_ms: float = 10.0, outlier_ms: float = 10.0, min_corr: float = 0.9, min_beats: int = 3) -> int:
    """QRS boundaries (``names``) of one lead's dominant beats from its median beat, projected onto each beat (in place).

    ``qrs_bounds(d, main, lo, hi)`` is the delineator's boundary rule (slope in mV/s, local indices).
    Dominant beats (QRS correlation >= ``min_corr`` with the median QRS) are aligned by
    cross-correlation (+-8 ms) and their median over +-``half_ms`` is delineated with the same
    rule: it has far less noise than any one beat, so its slope walk-out does not stop early on
    a dip or run on over noise. A dominant beat whose own mark lies more than ``outlier_ms`` from
    the template's (its distance from the beat's aligned anchor) gets the template's; the others
    keep their own (replacing every mark moved the 100 vs 500 Hz QRS agreement, p90 2.5 -> 3.5 ms).
    Nothing moves when the template's distance is more than ``agree_ms`` from the median of the
    beats' own (a wave merged into or lost from the median beat). Returns how many marks moved.
    """
    xf, main = res["xf"], res["r_peak"]
    half = int(round(half_ms * fs_hz / 1000.0))
    max_lag = max(int(round(0.008 * fs_hz)), 1)
    have = (main >= 0) & (res["qrs_on"] >= 0) & (main - half - max_lag >= 0) & (main + half + max_lag < xf.size)
    dominant = have & dominant_beats(xf, np.where(have, main, 0), fs_hz, min_corr)
    if dominant.sum() < min_beats:
        return 0
    idx = np.flatnonzero(dominant)
    anchors = _aligned_anchors(xf, main[idx], half + max_lag, max_lag)
    template = np.median(np.stack([xf[a - half : a + half + 1] for a in anchors]), axis=0)
    d = np.gradient(template) * fs_hz
    on, off = qrs_bounds(d, half, 0, template.size - 1)
    if on <= 0 or off >= template.size - 1:
        return 0  # the walk-out hit the template's edge: no boundary found on it
    moved = 0
    agree, outlier = agree_ms * fs_hz / 1000.0, outlier_ms * fs_hz / 1000.0
    for name, rel in (("qrs_on", on - half), ("qrs_off", off - half)):
        if name not in names:
            continue
        if abs(rel - float(np.median(res[name][idx] - anchors))) > agree:
            continue  # the median beat's boundary is not the beats' typical one: a wave merged or lost on it, keep the beats' own
        own = res[name][idx]
        new = np.where(np.abs(anchors + rel - own) > outlier, anchors + rel, own)
        moved += int(np.count_nonzero(new != res[name][idx]))
        res[name][idx] = new
    return moved


def drop_impossible_marks(res: dict[str, np.ndarray], min_gap: int = 1) -> int:
    """Remove (set to -1, in place) the marks of one lead that no heart can produce; returns how many were removed.

    The QRS boundaries are the anchors (the most reliable marks): a P mark after its beat's QRS onset, a T mark
    before its beat's QRS offset or less than ``min_gap`` samples before the next beat's QRS onset, and the ends of a
    P or T wave whose onset lies after its own offset are dropped, never moved (the beat-to-beat projection and the
    cross-lead correction move marks one at a time and can push one across another). ``min_gap`` > 1 keeps a T end
    apart from the next QRS onset once both are rounded to a coarser record rate (:func:`record_gap`).
    """
    qrs_on, qrs_off = res["qrs_on"], res["qrs_off"]
    next_on = np.concatenate([qrs_on[1:], [-1]])
    removed = 0
    for wave in ("p", "t"):
        on, off = res[f"{wave}_on"], res[f"{wave}_off"]
        reversed_wave = (on >= 0) & (off >= 0) & (on > off)
        for name in (f"{wave}_on", f"{wave}_peak", f"{wave}_off"):
            marks = res[name]
            if wave == "p":
                bad = (marks >= 0) & (qrs_on >= 0) & (marks > qrs_on)
            else:
                bad = (marks >= 0) & (((qrs_off >= 0) & (marks < qrs_off)) | ((next_on >= 0) & (marks > next_on - min_gap)))
            bad |= reversed_wave & (marks >= 0) & (name != f"{wave}_peak")
            removed += int(np.count_nonzero(bad))
            marks[bad] = -1
    return removed


def record_gap(internal_hz: float, record_hz: float) -> int:
    """Internal samples two marks need between them to stay apart once rounded to the record's rate.

    Rounding half to even can bring marks ``ratio`` internal samples apart onto one record sample (3 and 5 at
    a ratio of 2 both round to 2), so the gap is one more than the ratio.
    """
    return int(np.ceil(internal_hz / record_hz)) + 1
