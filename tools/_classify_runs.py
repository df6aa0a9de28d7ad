"""Supraventricular runs against the record's own RR (internal to :mod:`ecgtrace.tools.classify`).

Inside a run of atrial (or junctional) tachycardia the local median RR is the run's own fast RR, so the
beats of the run are not premature against it and the forest calls them N. Against a long window of the
record's RR (:data:`SVT_RUN_RULE` ``long_half_beats`` beats either side) they are still clearly short.
A run counts only from a beat that breaks the rhythm (locally premature, or already S), so a gradual
sinus speed-up is not a run.
"""

from __future__ import annotations

import numpy as np
from scipy.ndimage import median_filter

#: Chosen on the DS1 leave-one-record-out outputs (grid: long_half 60/150 beats, long_prematurity 0.15/0.2/0.25/0.3,
#: with/without a foreign-P and a noise condition): S Se 37.2 -> 46.2 %, S +P 91.2 -> 91.8 % (209: 276 -> 195 S missed).
#: The P-wave and noise conditions were dropped: inside a fast run the P wave merges with the previous T.
SVT_RUN_RULE = {"long_half_beats": 150, "long_prematurity_min": 0.3, "start_prematurity_min": 0.1,
                "corr_qrs_mean_min": 0.9, "width_ratio_max": 1.2}


def long_prematurity(rr_prev_ms: np.ndarray, half_beats: int) -> np.ndarray:
    """1 - RR / (median RR over ``half_beats`` beats either side): prematurity against the record's slow rhythm."""
    rr = np.asarray(rr_prev_ms, dtype=np.float64)
    if rr.size == 0:
        return rr.copy()
    ref = median_filter(rr, size=2 * int(half_beats) + 1, mode="nearest")
    return 1.0 - rr / np.maximum(ref, 1.0)


def _runs_from_start(candidate: np.ndarray, start_ok: np.ndarray) -> np.ndarray:
    """Of each run of consecutive candidates, the beats from its first ``start_ok`` beat on."""
    keep = np.zeros(candidate.size, dtype=bool)
    edges = np.diff(np.concatenate([[0], candidate.astype(np.int8), [0]]))
    for lo, hi in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)):
        first = np.flatnonzero(start_ok[lo:hi])
        if first.size:
            keep[lo + first[0] : hi] = True
    return keep


def svt_run(feats: dict[str, np.ndarray], labels: np.ndarray, blocked: np.ndarray) -> np.ndarray:
    """Beats labelled N that :data:`SVT_RUN_RULE` puts in a supraventricular run (bool per beat).

    ``blocked`` beats (in AF, or with an untrustworthy preceding RR) are never part of a run.
    """
    r = SVT_RUN_RULE
    narrow_fast = (
        (long_prematurity(feats["rr_prev_ms"], r["long_half_beats"]) >= r["long_prematurity_min"])
        & (feats["corr_qrs_mean"] >= r["corr_qrs_mean_min"])
        & (feats["width_ratio"] <= r["width_ratio_max"])
        & ~blocked
        & ((labels == "N") | (labels == "S"))
    )
    start = (feats["prematurity"] >= r["start_prematurity_min"]) | (labels == "S")
    return _runs_from_start(narrow_fast, start) & (labels == "N")
