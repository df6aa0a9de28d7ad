"""Atrial fibrillation / flutter episodes from a beat stream (RR irregularity, P waves).

The detector works on R-peak sample indices only, so it runs the same way on
reference annotations (``.atr``, LTAFDB at 128 Hz) and on detected beats, and
runs *before* beat classification (premature-beat rules misfire inside AF).

Method (all thresholds are keyword parameters, see :data:`DEFAULT_AF_PARAMS`):

1. RR intervals in ms; an RR is *usable* when it lies in ``[rr_min_ms,
   rr_max_ms]`` and, when ``beat_classes`` is given, neither of its two beats
   is in ``exclude_classes`` (ectopic beats and the RRs around them are left
   out, the usual Holter convention).
2. Each usable RR is compared to its neighbours (lags 1 and 2 in the usable
   sequence), relative to a running median RR. An RR is *irregular* when it
   differs from both by more than ``succ_diff_frac``. Requiring both lags keeps
   bigeminal patterns (short-long-short-long: equal at lag 2) out, and an
   isolated ectopic disturbs only two or three RRs.
3. The fraction of irregular RRs over a centred window of ``window_beats``
   usable RRs is the irregularity score. A beat enters AF when the score
   reaches ``on_frac`` and leaves it below ``off_frac`` (hysteresis).
4. With ``p_wave_present`` (bool per beat, or float with NaN = unknown), the
   fraction of beats with a P wave in the same window must stay at or below
   ``p_present_max_frac`` for AF; where P waves are clearly absent
   (fraction <= ``p_absent_max_frac``) the irregularity threshold is relaxed to
   ``on_frac_p_absent``.
5. AF is vetoed where more than ``max_s_frac`` of the window's beats are
   classed S (premature atrial beats mean organised atrial activity) and where
   more than ``max_turning_frac`` of the RRs are turning points (strict
   short-long alternation is bigeminal; random AF RRs turn at about 2/3), and
   where fewer than ``min_usable_frac`` of the window's RRs are usable
   (ventricular bigeminy and trigeminy leave few RRs between conducted beats,
   and the few left say nothing about the atrial rhythm).
6. Episode edges are moved to the change point of the irregular-RR flags.
7. Runs of AF beats separated by less than ``merge_gap_s`` are merged, and
   episodes shorter than ``min_episode_s`` are dropped.

Known limit: flutter with a fixed AV block is regular, and is only found when
P-wave information says the P waves are absent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ecgtrace.tools._af_scoring import score_af_episodes  # noqa: F401 - part of this module's API (benchmarks, tests)

AF_VERSION = "1.2"  # 1.1: no AF where fewer than half of the RRs are usable (ventricular bigeminy);
#                     1.2: no AF where more than 30 % of the window's beats show the dominant P wave (was 50 %)

#: Default thresholds; every one can be overridden as a keyword argument of :func:`detect_af`.
DEFAULT_AF_PARAMS: dict[str, Any] = {
    "rr_min_ms": 200.0,
    "rr_max_ms": 3000.0,
    "exclude_classes": ("S", "V", "F", "Q"),
    "median_beats": 31,
    "succ_diff_frac": 0.10,
    "irregular_lags": 1,
    "window_beats": 32,
    "on_frac": 0.55,
    "off_frac": 0.40,
    "on_frac_p_absent": 0.40,
    # MIT-BIH DS1, beats inside detected AF with the window's P-present fraction: true AF 10th/50th/90th
    # percentile 0, 0, 0.19 (201), 0, 0, 0 (203); the false AF of 220's clustered atrial runs between sinus
    # beats 0.34, 0.44, 0.62. 0.5 let 220 through and masked 18 of its S beats; 0.3 keeps every true AF beat.
    "p_present_max_frac": 0.30,
    "p_absent_max_frac": 0.20,
    "merge_gap_s": 10.0,
    "min_episode_s": 30.0,
    "edge_level": 0.25,
    "max_s_frac": 0.2,
    "max_turning_frac": 0.85,
    "min_usable_frac": 0.5,
}


@dataclass
class AfResult:
    """AF/flutter detection result.

    Attributes:
        beat_mask: bool per beat, True for beats inside an AF/flutter episode.
        episodes: plain-JSON dicts ``{onset_sample, offset_sample, onset_ms,
            offset_ms, n_beats, mean_rate_bpm, first_beat, last_beat}``;
            onset/offset are the R peaks of the first and last beat.
        irregularity: per-beat irregularity score in [0, 1] (NaN where unknown).
        fs_hz: sampling rate of the beat samples.
        provenance: ``{source, method, version, params}``.
    """

    beat_mask: np.ndarray
    episodes: list[dict[str, Any]]
    irregularity: np.ndarray
    fs_hz: float
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def burden_s(self) -> float:
        """Total AF duration in seconds (sum of episode spans)."""
        return float(sum(e["offset_ms"] - e["onset_ms"] for e in self.episodes) / 1000.0)

    def to_json(self) -> dict[str, Any]:
        n_af = int(np.count_nonzero(self.beat_mask))
        return {"n_episodes": len(self.episodes), "burden_s": round(self.burden_s, 3), "n_af_beats": n_af, "episodes": self.episodes, "provenance": self.provenance}


def af_params(**overrides: Any) -> dict[str, Any]:
    """Defaults merged with ``overrides``; unknown names raise ``TypeError``."""
    unknown = set(overrides) - set(DEFAULT_AF_PARAMS)
    if unknown:
        raise TypeError(f"unknown AF parameter(s): {', '.join(sorted(unknown))}")
    params = dict(DEFAULT_AF_PARAMS)
    params.update(overrides)
    params["exclude_classes"] = tuple(params["exclude_classes"])
    return params


def as_beat_samples(beat_samples: Any) -> np.ndarray:
    """Beat sample indices as int64; ``ValueError`` for NaN/inf or a non-1-D input."""
    arr = np.asarray(beat_samples)
    if arr.ndim != 1:
        raise ValueError(f"beat_samples must be 1-D, got shape {arr.shape}")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ValueError("beat_samples contains NaN or infinite values")
    return arr.astype(np.int64, copy=False)


def _window_mean(values: np.ndarray, valid: np.ndarray, width: int) -> np.ndarray:
    """Centred moving mean of ``values`` over ``width`` points, counting only ``valid`` ones."""
    n = values.size
    if n == 0:
        return np.zeros(0)
    csum = np.concatenate([[0.0], np.cumsum(np.where(valid, values, 0.0))])
    ccount = np.concatenate([[0.0], np.cumsum(valid.astype(np.float64))])
    idx = np.arange(n)
    lo, hi = np.clip(idx - width // 2, 0, n), np.clip(idx + width - width // 2, 0, n)
    count = ccount[hi] - ccount[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (csum[hi] - csum[lo]) / count
    out[count < max(3, width // 4)] = np.nan
    return out


def _running_median(x: np.ndarray, width: int) -> np.ndarray:
    from scipy.ndimage import median_filter

    if x.size == 0:
        return x.astype(np.float64)
    return median_filter(x.astype(np.float64), size=max(1, min(int(width), x.size)), mode="nearest")


def _hysteresis(score: np.ndarray, on: np.ndarray, off: float) -> np.ndarray:
    """True from where ``score >= on`` until ``score < off`` (NaN keeps the state); O(n)."""
    out = np.zeros(score.size, dtype=bool)
    state = False
    for i, (s, on_i) in enumerate(zip(score.tolist(), on.tolist())):
        if s == s:  # not NaN
            state = s >= off if state else s >= on_i
        out[i] = state
    return out


def irregular_rr_flags(
    beat_samples: np.ndarray,
    fs_hz: float,
    *,
    beat_classes: np.ndarray | None = None,
    **thresholds: Any,
) -> np.ndarray:
    """Per-beat irregularity flag of the RR ending at each beat: 1.0, 0.0, or NaN where not usable."""
    p = af_params(**thresholds)
    samples = np.asarray(beat_samples, dtype=np.int64)
    n = samples.size
    flags = np.full(n, np.nan)
    if n < 4:
        return flags
    rr_ms = np.full(n, np.nan)
    rr_ms[1:] = np.diff(samples) * (1000.0 / float(fs_hz))
    usable = np.isfinite(rr_ms) & (rr_ms >= p["rr_min_ms"]) & (rr_ms <= p["rr_max_ms"])
    if beat_classes is not None and p["exclude_classes"]:
        ectopic = np.isin(np.asarray(beat_classes).astype(str), list(p["exclude_classes"]))
        bad = ectopic.copy()
        bad[1:] |= ectopic[:-1]  # the RR after an ectopic beat is compensatory
        usable &= ~bad
    idx = np.flatnonzero(usable)
    if idx.size < 4:
        return flags
    x = rr_ms[idx]
    med = _running_median(x, p["median_beats"])
    d1 = np.full(x.size, np.inf)
    d1[1:] = np.abs(np.diff(x)) / med[1:]
    thr = p["succ_diff_frac"]
    irregular = d1 > thr
    if int(p["irregular_lags"]) >= 2:  # also unlike the RR two back: rejects bigeminal alternation
        d2 = np.full(x.size, np.inf)
        d2[2:] = np.abs(x[2:] - x[:-2]) / med[2:]
        irregular &= d2 > thr
    flags[idx] = irregular.astype(np.float64)
    return flags


def rr_irregularity(
    beat_samples: np.ndarray,
    fs_hz: float,
    *,
    beat_classes: np.ndarray | None = None,
    **thresholds: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-beat irregularity score and usable-RR mask.

    Returns:
        ``(score, usable)``: ``score[i]`` is the fraction of irregular RRs among
        the ``window_beats`` usable RRs around beat ``i`` (NaN when too few);
        ``usable[i]`` is True when the RR ending at beat ``i`` was used.
    """
    p = af_params(**thresholds)
    flags = irregular_rr_flags(beat_samples, fs_hz, beat_classes=beat_classes, **thresholds)
    usable = np.isfinite(flags)
    n = flags.size
    score = np.full(n, np.nan)
    idx = np.flatnonzero(usable)
    if idx.size < 4:
        return score, usable
    score[idx] = _window_mean(flags[idx], np.ones(idx.size, dtype=bool), int(p["window_beats"]))
    # beats without a usable RR take the score of the nearest usable one before them
    filled = np.maximum.accumulate(np.where(np.isfinite(score), np.arange(n), -1))
    has = filled >= 0
    score[has] = score[filled[has]]
    return score, usable


def detect_af(
    beat_samples: np.ndarray,
    fs_hz: float,
    *,
    beat_classes: np.ndarray | None = None,
    p_wave_present: np.ndarray | None = None,
    **thresholds: Any,
) -> AfResult:
    """Find AF/flutter episodes in a beat stream.

    Args:
        beat_samples: R-peak sample indices (sorted, int).
        fs_hz: Sampling rate of ``beat_samples`` in Hz.
        beat_classes: Optional AAMI class per beat (``N S V F Q``); beats in
            ``exclude_classes`` and the RRs around them are ignored.
        p_wave_present: Optional per-beat P-wave presence (bool, or float with
            NaN for unknown).
        **thresholds: Overrides of :data:`DEFAULT_AF_PARAMS`.

    Returns:
        :class:`AfResult` with the per-beat mask and plain-JSON episodes.
    """
    if not fs_hz or fs_hz <= 0:
        raise ValueError(f"fs_hz must be > 0, got {fs_hz!r}")
    p = af_params(**thresholds)
    samples = as_beat_samples(beat_samples)
    n = samples.size
    if beat_classes is not None and len(beat_classes) != n:
        raise ValueError(f"beat_classes has {len(beat_classes)} entries for {n} beats")
    if p_wave_present is not None and len(p_wave_present) != n:
        raise ValueError(f"p_wave_present has {len(p_wave_present)} entries for {n} beats")
    score, usable = rr_irregularity(samples, fs_hz, beat_classes=beat_classes, **thresholds)
    flags = irregular_rr_flags(samples, fs_hz, beat_classes=beat_classes, **thresholds)
    on, allowed = _thresholds_and_vetoes(samples, beat_classes, p_wave_present, usable, p)
    state = _hysteresis(score, on, float(p["off_frac"])) & allowed
    episodes, mask = _episodes_from_state(samples, state, flags, fs_hz, p)
    provenance = {
        "source": "detected",
        "method": "af.rr_irregularity" + ("+p_wave" if p_wave_present is not None else ""),
        "version": AF_VERSION,
        "params": {k: (list(v) if isinstance(v, tuple) else v) for k, v in p.items()},
    }
    return AfResult(beat_mask=mask, episodes=episodes, irregularity=score, fs_hz=float(fs_hz), provenance=provenance)


def _thresholds_and_vetoes(samples: np.ndarray, beat_classes: np.ndarray | None, p_wave_present: np.ndarray | None, usable: np.ndarray,
                           p: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Per beat: the irregularity score that enters AF, and whether AF is allowed there at all (steps 4 and 5)."""
    n = samples.size
    window = int(p["window_beats"])
    everywhere = np.ones(n, dtype=bool)
    on = np.full(n, float(p["on_frac"]))
    allowed = everywhere.copy()
    if p_wave_present is not None and n:
        pw = np.asarray(p_wave_present, dtype=np.float64)
        p_frac = _window_mean(np.nan_to_num(pw), np.isfinite(pw), window)
        has_p = np.isfinite(p_frac)
        allowed = ~(has_p & (p_frac > p["p_present_max_frac"]))
        on = np.where(has_p & (p_frac <= p["p_absent_max_frac"]), float(p["on_frac_p_absent"]), on)
    if beat_classes is not None and n:
        # beats labelled S mean organised atrial activity: many of them argue against AF
        allowed &= ~(_window_mean((np.asarray(beat_classes).astype(str) == "S").astype(np.float64), everywhere, window) > p["max_s_frac"])
        # AF is read from the RRs between conducted beats; where ectopic beats leave fewer than half of the window's
        # RRs usable (ventricular bigeminy: none), the few left say nothing about the atrial rhythm
        allowed &= ~(_window_mean(usable.astype(np.float64), everywhere, window) < p["min_usable_frac"])
    if n > 3:
        # strict short-long alternation (turning points at nearly every beat) is bigeminal, not AF,
        # whose random RRs turn at about 2/3 of beats
        rr = np.diff(samples).astype(np.float64)
        turning = np.zeros(n)
        turning[2:-1] = ((rr[1:-1] - rr[:-2]) * (rr[2:] - rr[1:-1])) < 0
        allowed &= ~(_window_mean(turning, everywhere, window) > p["max_turning_frac"])
    return on, allowed


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """``(first, last)`` index pairs of the True runs of a bool array."""
    if flags.size == 0:
        return []
    padded = np.concatenate([[False], flags, [False]]).astype(np.int8)
    edges = np.diff(padded)
    starts = np.flatnonzero(edges == 1)
    stops = np.flatnonzero(edges == -1) - 1
    return list(zip(starts.tolist(), stops.tolist()))


def _refine_edges(first: int, last: int, flags: np.ndarray, p: dict[str, Any]) -> tuple[int, int]:
    """Move episode edges to the change point of the irregular-RR flags.

    The windowed score crosses its threshold several beats inside the episode;
    the onset is moved to the split that best separates regular from irregular
    RRs within half a window of it (minimum of the prefix sum of
    ``flag - edge_level``; the level sits between the irregular fraction of
    sinus rhythm, about 0, and of AF, 0.5 to 0.8), and likewise the offset. A flag belongs to the RR pair
    ``(i-1, i)``, so the last irregular pair ends one beat after the last AF beat.
    """
    n = flags.size
    w = int(p["window_beats"]) // 2
    level = float(p["edge_level"])
    g = np.nan_to_num(flags - level, nan=0.0)
    a, b = max(first - w, 0), min(first + w, last, n - 1)
    if b > a:
        prefix = np.concatenate([[0.0], np.cumsum(g[a:b])])
        first = a + int(np.argmin(prefix))
    a, b = max(last - w, first), min(last + w + 1, n - 1)
    if b > a:
        prefix = np.cumsum(g[a : b + 1])
        end = a + prefix.size - 1 - int(np.argmax(prefix[::-1]))  # ties: the later split
        last = max(end - 1, first)
    return first, last


def _episodes_from_state(samples: np.ndarray, state: np.ndarray, flags: np.ndarray, fs_hz: float, p: dict[str, Any]) -> tuple[list[dict[str, Any]], np.ndarray]:
    runs = [_refine_edges(first, last, flags, p) for first, last in _runs(state)]
    merged: list[list[int]] = []
    gap_samples = p["merge_gap_s"] * fs_hz
    for first, last in runs:
        if merged and samples[first] - samples[merged[-1][1]] < gap_samples:
            merged[-1][1] = last
        else:
            merged.append([first, last])
    mask = np.zeros(samples.size, dtype=bool)
    episodes: list[dict[str, Any]] = []
    min_samples = p["min_episode_s"] * fs_hz
    for first, last in merged:
        if last <= first or samples[last] - samples[first] < min_samples:
            continue
        mask[first : last + 1] = True
        episodes.append(make_episode(samples, first, last, fs_hz))
    return episodes, mask


def make_episode(samples: np.ndarray, first: int, last: int, fs_hz: float) -> dict[str, Any]:
    """Plain-JSON episode for beats ``first..last`` (inclusive)."""
    onset = int(samples[first])
    offset = int(samples[last])
    n_beats = int(last - first + 1)
    span_s = (offset - onset) / float(fs_hz)
    rate = 60.0 * (n_beats - 1) / span_s if span_s > 0 else 0.0
    return {
        "onset_sample": onset,
        "offset_sample": offset,
        "onset_ms": int(round(onset * 1000.0 / fs_hz)),
        "offset_ms": int(round(offset * 1000.0 / fs_hz)),
        "n_beats": n_beats,
        "mean_rate_bpm": round(float(rate), 2),
        "first_beat": int(first),
        "last_beat": int(last),
    }
