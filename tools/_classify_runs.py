"""Supraventricular runs against the record's own RR (internal to :mod:`ecgtrace.tools.classify`).

Inside a run of atrial (or junctional) tachycardia the local median RR is the run's own fast RR, so the
beats of the run are not premature against it and the forest calls them N. Against a long window of the
record's RR (:data:`SVT_RUN_RULE` ``long_half_beats`` beats either side) they are still clearly short.
A run counts only from a beat that breaks the rhythm, so a gradual sinus speed-up is not a run: a beat
already called S, or one premature against the local median or against the beats just before it
(:func:`onset_prematurity`; the centred local median misses the first beat of a run longer than its
half-window, which already sits inside the run). A run interrupted for ``bridge_beats`` beats (a noisy
or aberrant beat) goes on after the interruption without a new break.

A run longer than that long window (a sustained atrial tachycardia of minutes) is on time even against it;
:func:`paroxysmal` reads such a run against the rhythm it broke into instead (classify version 8).
"""

from __future__ import annotations

import numpy as np
from scipy.ndimage import median_filter

#: Chosen on the DS1 leave-one-record-out outputs (grid: long_half 60/150 beats, long_prematurity 0.15/0.2/0.25/0.3,
#: with/without a foreign-P and a noise condition): S Se 37.2 -> 46.2 %, S +P 91.2 -> 91.8 % (209: 276 -> 195 S missed).
#: The P-wave and noise conditions were dropped: inside a fast run the P wave merges with the previous T.
#: Version 6 (classify.VERSION) added ``onset_ref_beats`` and ``bridge_beats``, chosen on the same DS1 outputs: S Se 46.2 -> 61.7 %,
#: +P 91.8 -> 93.7 % (209: 195 -> 49 S missed); onset_ref 4/16 and bridge 2/3 within 0.2 points, long_prematurity 0.25 / 0.2
#: 62.6 / 92.6 and 63.6 / 90.1 (kept 0.3); the onset reference alone 56.1 / 93.1, the bridge alone 46.6 / 91.9; a long reference at the
#: 65th-85th RR percentile instead of the median gained at most 1 point of Se for 4 of +P (version 5 rules).
#: Version 8 added the ``paroxysm_*`` entries (:func:`paroxysmal`), set on the synthetic holtercare record (tuned):
#: its sustained atrial tachycardias (60-300 s at 110-150 bpm) were called N from the first beat on (S Se 32 of 188
#: on 4 h, seed 1; atrial_tachycardia episodes 0 of 3 from the signal on 24 h); with them 188 of 188 and no N called S,
#: where its sinus tachycardias (which the generator starts as abruptly, median p_corr 0.48 against -0.48) stay N.
#: 0.2 is DEVIANT_V_RULE's "no dominant P". No MIT-BIH, QTDB or SVDB figure of benchmarks/classify.py moved (DS1 LORO
#: and untuned): none of those records has a sustained atrial tachycardia of this kind.
SVT_RUN_RULE = {"long_half_beats": 150, "long_prematurity_min": 0.3, "start_prematurity_min": 0.1,
                "onset_ref_beats": 8, "bridge_beats": 1, "corr_qrs_mean_min": 0.9, "width_ratio_max": 1.2,
                "paroxysm_onset_min": 0.3, "paroxysm_stay_min": 0.2, "paroxysm_min_beats": 3, "paroxysm_max_rr_ms": 600.0,
                "paroxysm_p_corr_max": 0.2}


def long_prematurity(rr_prev_ms: np.ndarray, half_beats: int) -> np.ndarray:
    """1 - RR / (median RR over ``half_beats`` beats either side): prematurity against the record's slow rhythm."""
    rr = np.asarray(rr_prev_ms, dtype=np.float64)
    if rr.size == 0:
        return rr.copy()
    ref = median_filter(rr, size=2 * int(half_beats) + 1, mode="nearest")
    return 1.0 - rr / np.maximum(ref, 1.0)


def onset_prematurity(rr_prev_ms: np.ndarray, ref_beats: int) -> np.ndarray:
    """1 - RR / (median of the ``ref_beats`` RR intervals before it): how abruptly a beat comes early (0 for the first beat)."""
    rr = np.asarray(rr_prev_ms, dtype=np.float64)
    out = np.zeros(rr.size)
    if rr.size < 2 or ref_beats < 1:
        return out
    padded = np.concatenate([np.full(ref_beats - 1, np.nan), rr[:-1]])
    before = np.nanmedian(np.lib.stride_tricks.sliding_window_view(padded, ref_beats), axis=1)  # beats i-ref .. i-1
    out[1:] = 1.0 - rr[1:] / np.maximum(before, 1.0)
    return out


def paroxysmal(rr_prev_ms: np.ndarray, p_corr: np.ndarray, r: dict[str, float]) -> np.ndarray:
    """Beats of paroxysmal atrial runs (bool per beat) under the ``paroxysm_*`` entries of ``r`` (:data:`SVT_RUN_RULE`).

    A run starts at an abrupt onset (``1 - RR / median of the onset_ref_beats RRs before`` >= ``paroxysm_onset_min``)
    and lasts while every RR stays at least ``paroxysm_stay_min`` shorter than that pre-onset median and no longer than
    ``paroxysm_max_rr_ms`` (a tachycardia); it counts with ``paroxysm_min_beats`` or more beats whose P window does not
    look like the dominant beat's (median ``p_corr`` below ``paroxysm_p_corr_max``: an ectopic P, or one hidden in
    the T wave).

    A sustained atrial tachycardia outlasts any centred window, so against the record's own long RR its beats are
    on time; against the rhythm it broke into they stay early. Sinus rhythm speeds up over many beats and keeps its
    P wave; the rate limit keeps a return from a slow rhythm (an AV block, a pause) out.
    """
    rr = np.asarray(rr_prev_ms, dtype=np.float64)
    ref_beats = int(r["onset_ref_beats"])
    keep = np.zeros(rr.size, dtype=bool)
    onsets = np.flatnonzero(onset_prematurity(rr, ref_beats) >= r["paroxysm_onset_min"])
    done = -1
    for i in onsets:
        if i <= done or i < ref_beats:
            continue
        limit = min((1.0 - r["paroxysm_stay_min"]) * float(np.median(rr[i - ref_beats : i])), r["paroxysm_max_rr_ms"])
        end = _first_above(rr, i, limit)  # the first beat back at the old rate (or the record's end)
        if end - i >= r["paroxysm_min_beats"] and float(np.median(p_corr[i:end])) < r["paroxysm_p_corr_max"]:
            keep[i:end] = True
        done = end - 1
    return keep


def _first_above(rr: np.ndarray, start: int, limit: float, block: int = 256) -> int:
    """Index of the first RR from ``start`` on that exceeds ``limit`` (``rr.size`` if none), read block by block: most runs
    end within a few beats, and every premature beat of a 24 h record starts a search."""
    for lo in range(start, rr.size, block):
        above = np.flatnonzero(rr[lo : lo + block] > limit)
        if above.size:
            return lo + int(above[0])
    return int(rr.size)


def _runs_from_start(candidate: np.ndarray, start_ok: np.ndarray, bridge_beats: int = 0) -> np.ndarray:
    """Of each run of consecutive candidates, the beats from its first ``start_ok`` beat on; a run that begins at most
    ``bridge_beats`` beats after a kept run is kept whole (the same run, interrupted)."""
    keep = np.zeros(candidate.size, dtype=bool)
    edges = np.diff(np.concatenate([[0], candidate.astype(np.int8), [0]]))
    last_kept_end = None
    for lo, hi in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)):
        if last_kept_end is not None and lo - last_kept_end <= bridge_beats:
            keep[lo:hi] = True
            last_kept_end = hi
            continue
        first = np.flatnonzero(start_ok[lo:hi])
        if first.size:
            keep[lo + first[0] : hi] = True
            last_kept_end = hi
    return keep


def svt_run(feats: dict[str, np.ndarray], labels: np.ndarray, blocked: np.ndarray) -> np.ndarray:
    """Beats labelled N that :data:`SVT_RUN_RULE` puts in a supraventricular run (bool per beat).

    ``blocked`` beats (in AF, or with an untrustworthy preceding RR) are never part of a run.
    """
    r = SVT_RUN_RULE
    early = long_prematurity(feats["rr_prev_ms"], r["long_half_beats"]) >= r["long_prematurity_min"]
    early |= paroxysmal(feats["rr_prev_ms"], feats["p_corr"], r)
    narrow_fast = (
        early
        & (feats["corr_qrs_mean"] >= r["corr_qrs_mean_min"])
        & (feats["width_ratio"] <= r["width_ratio_max"])
        & ~blocked
        & ((labels == "N") | (labels == "S"))
    )
    start = ((feats["prematurity"] >= r["start_prematurity_min"]) | (labels == "S")
             | (onset_prematurity(feats["rr_prev_ms"], r["onset_ref_beats"]) >= r["start_prematurity_min"]))
    return _runs_from_start(narrow_fast, start, r["bridge_beats"]) & (labels == "N")
