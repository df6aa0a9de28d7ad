"""Low-frequency excursion index (electrode motion) used by :mod:`ecgtrace.tools._beats_core` (``lf_quiet_bad = 0``: off).

The LF reference uses block +- ``lf_reference_halfwidth_blocks`` (10 s) and
the beat check beats within 3 neighbours; :meth:`DetectorParams.min_overlap_s`
gives chunks that much warm-up, so chunked detection stays seam-exact.
"""

from __future__ import annotations

import numpy as np
from scipy.signal import sosfiltfilt

from ecgtrace.tools._beats_grid import DetectorParams, bandpass_sos, block_grid, sliding

__all__ = ["implausible_blocks", "lf_quiet_share"]


def decimation(block: int, fs_hz: float, band_top_hz: float, most: int) -> int:
    """Largest group size (<= ``most``) that divides ``block`` and keeps >= 4 samples per cycle of ``band_top_hz``."""
    return max(k for k in range(1, max(most, 1) + 1) if block % k == 0 and (k == 1 or fs_hz / k >= 4.0 * band_top_hz))


def lf_quiet_share(trace: np.ndarray, bp: np.ndarray, offset: int, block: int, n_blocks: int, fs_hz: float, p: DetectorParams) -> np.ndarray:
    """Per block: share of samples where the low-frequency component stays near its block median (1: no reference).

    The 0.7-10 Hz component's deviation from its block median is compared with
    ``lf_quiet_level`` x a reference size: the median over block +-
    ``lf_reference_halfwidth_blocks`` of the per-block peak-to-peak of that
    component (``lf_reference="lf"``, the lead's typical beat, robust to bursts
    shorter than half the window) or of the 5-15 Hz band (``"qrs"``). Between
    discrete complexes clean ECG stays quiet for >= ~0.8 of a block; electrode
    motion (0.7-9 Hz swings of a QRS size or more) leaves ~0.2-0.6 quiet.
    """
    # the 0.7-10 Hz band needs no more than ~50 samples/s: average groups of ``step`` samples on the absolute grid
    step = decimation(block, fs_hz, p.lf_band_hz[1], p.lf_decimate_max)
    dec = block_grid(trace, offset, step).mean(axis=1)
    lf = sosfiltfilt(bandpass_sos(p.lf_band_hz[0], p.lf_band_hz[1], fs_hz / step), dec).astype(np.float32)
    grid = block_grid(lf, offset // step, block // step)[:n_blocks]
    dev = np.abs(grid - np.median(grid, axis=1, keepdims=True))
    ref_grid = grid if p.lf_reference == "lf" else block_grid(bp, offset, block)[:n_blocks]
    ref = sliding(ref_grid.max(axis=1) - ref_grid.min(axis=1), p.lf_reference_halfwidth_blocks, "median")
    quiet = (dev < (p.lf_quiet_level * ref)[:, None]).mean(axis=1)
    return np.where(ref > 0, quiet, 1.0).astype(np.float32)


def implausible_blocks(x: np.ndarray, beats: np.ndarray, offset: int, block: int, first_block: int, excursion: np.ndarray, lead_bad: np.ndarray, fs_hz: float, p: DetectorParams) -> np.ndarray:
    """Excursion blocks whose beats are not beats: at least ``beat_unlike_share`` of the beats within +-1 block are unlike.

    Beat shape: each lead's signal from -200 to +300 ms around the R peak, less
    its median. A beat is alike when, against one of its ``beat_match_neighbours``
    neighbours on either side, the mean correlation over the leads good in both
    beats' blocks (``~lead_bad``; all leads when none is) reaches ``beat_match_corr``.
    Real rhythms under an excursion (VT, couplets, bigeminy, paced) repeat a
    shape; motion adds a different swing to every beat. No beat near: artifact.
    """
    out = excursion.copy()
    if beats.size == 0:
        return out
    n = x.shape[0]
    blk = np.clip((offset + beats) // block - first_block, 0, excursion.size - 1)
    near_exc = np.zeros(excursion.size, bool)
    near_exc[:-1] |= excursion[1:]
    near_exc[1:] |= excursion[:-1]
    near_exc |= excursion
    judged = near_exc[blk]  # beats that decide some excursion block
    kmax = p.beat_match_neighbours
    need = np.zeros(beats.size, bool)
    for k in range(-kmax, kmax + 1):  # ... and their neighbours
        lo, hi = max(k, 0), beats.size + min(k, 0)
        need[lo:hi] |= judged[lo - k : hi - k]
    sel = np.flatnonzero(need)
    offs = np.arange(-int(0.2 * fs_hz), int(0.3 * fs_hz) + 1)
    pos = np.clip(beats[sel, None] + offs[None, :], 0, n - 1)
    shapes = np.nan_to_num(x[pos]).astype(np.float64)  # (n_selected, width, n_leads)
    shapes -= np.median(shapes, axis=1, keepdims=True)
    shapes -= shapes.mean(axis=1, keepdims=True)
    norm = np.linalg.norm(shapes, axis=1, keepdims=True)
    shapes /= np.where(norm > 0, norm, 1.0)
    good = ~lead_bad[:, blk[sel]].T  # (n_selected, n_leads)
    best = np.zeros(beats.size)
    for k in range(1, kmax + 1):
        pair = np.flatnonzero(sel[k:] - sel[:-k] == k)  # both beats selected (selected runs are contiguous)
        if pair.size == 0:
            continue
        a, b = pair + k, pair
        c = np.einsum("ijl,ijl->il", shapes[a], shapes[b])  # per-lead correlation
        m = good[a] & good[b]
        m = np.where(m.any(axis=1, keepdims=True), m, True)
        c = (c * m).sum(axis=1) / m.sum(axis=1)
        np.maximum.at(best, sel[a], c)
        np.maximum.at(best, sel[b], c)
    alike = best >= p.beat_match_corr
    for b in np.flatnonzero(excursion):
        near = (blk >= b - 1) & (blk <= b + 1)
        out[b] = not near.any() or np.count_nonzero(~alike[near]) >= p.beat_unlike_share * np.count_nonzero(near)
    return out
