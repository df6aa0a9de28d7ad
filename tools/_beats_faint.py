"""Faint-beat check used by :mod:`ecgtrace.tools._beats_core` (``faint_ratio = 0``: off).

The detector's level is the median of the per-block maxima of the slope energy
over block +- 2 (1 s blocks). Where a long pause leaves most of those blocks
without a QRS, the median is a quiet block's maximum and the level collapses: a
P wave, a T wave or baseline noise in the pause then reaches the threshold, and
search-back, which long gaps trigger, accepts it. A QRS complex is not an
eighth of the size of the beats around it on every lead, so a beat is faint
when, on every lead with quality there, its slope energy is under ``faint_ratio``
x the upper quartile of the slope energies of the other beats within +- ``faint_window_s``.

The window is shorter than the chunk warm-up (:meth:`DetectorParams.min_overlap_s`),
so chunked detection stays seam-exact.
"""

from __future__ import annotations

import numpy as np

__all__ = ["TYPICAL_QUANTILE", "faint_beats"]

#: The neighbours' typical QRS is their upper quartile, not their median: in a long pause with blocked P waves
#: the false beats can outnumber the QRS complexes around them, and a median would then be a P wave.
TYPICAL_QUANTILE = 0.75


def beat_energy(env: np.ndarray, beats: np.ndarray, half: int) -> np.ndarray:
    """Per beat and lead (n_beats, n_leads): the largest slope energy within +- ``half`` samples of the beat."""
    n = env.shape[1]
    pos = np.clip(beats[:, None] + np.arange(-half, half + 1)[None, :], 0, n - 1)
    return env[:, pos].max(axis=2).T


def faint_beats(env: np.ndarray, counted: np.ndarray, beats: np.ndarray, fs_hz: float, ratio: float, window_s: float) -> np.ndarray:
    """Bool per beat: faint against its neighbours (see the module doc).

    ``env`` is the raw slope energy (n_leads, n samples, mV/s); ``counted`` (n_leads, n_beats)
    says which leads have quality at each beat. A beat with fewer than two neighbours in the
    window, or no counted lead, is never faint.
    """
    out = np.zeros(beats.size, dtype=bool)
    if ratio <= 0 or beats.size < 3:
        return out
    energy = beat_energy(env, beats, max(int(round(0.05 * fs_hz)), 1)).astype(np.float64)  # (n_beats, n_leads)
    seen = counted.T
    # the neighbours' upper quartile never exceeds the chunk's largest beat: a beat at ratio x that on a counted lead
    # is not faint, which leaves a handful of beats to compare with their neighbours
    largest = np.where(seen, energy, 0.0).max(axis=0)
    maybe = seen.any(axis=1) & ~(seen & (energy >= ratio * largest[None, :])).any(axis=1)
    reach = window_s * fs_hz
    lo = np.searchsorted(beats, beats - reach, side="left")
    hi = np.searchsorted(beats, beats + reach, side="right")
    for i in np.flatnonzero(maybe):
        others = np.r_[lo[i]:i, i + 1 : hi[i]]
        if others.size < 2:
            continue
        typical = np.quantile(energy[others], TYPICAL_QUANTILE, axis=0)
        leads = seen[i] & (typical > 0)
        out[i] = bool(leads.any()) and bool((energy[i, leads] < ratio * typical[leads]).all())
    return out
