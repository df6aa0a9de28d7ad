"""Where a detected beat is placed on its QRS: the same point as the other beats of its block (internal to :mod:`ecgtrace.tools.beats`).

The detector's candidate lies somewhere on the QRS; refinement moves it to
a peak. Taking each beat's largest |deflection| on its own best lead flips
between R and S where the two are of similar size, and between leads from
beat to beat: on MIT-BIH 112 (DS1), 43 % of the normal beats sat 30 ms or
more off the record's median offset from the expert's mark. Every QRS match
within 150 ms still counts, but the beat classifier aligns beats on this
point (within +-24 ms, :mod:`ecgtrace.tools._classify_features`) and reads a
flipped beat as a new shape: from detected beats, SVDB 800 had 471 normal
beats called V.

So the beats of one block (``block_s``, 60 s on the record's own time grid)
are placed together: on the first lead that sees most of them, at its
positive peak unless their negative peaks are clearly the deeper ones there,
then each shifted to where its QRS best matches the block's median QRS, and
to that median's own peak. A beat whose best match correlates under
``MIN_ALIGN_CORR`` (another shape: a PVC, an aberrant beat), or where that
lead is unusable, keeps its largest deflection on its own best lead, as the
expert annotations of ectopic beats do.

A sliding neighbourhood of 8 beats each side was tried first: where R and S
are of about the same size its decision drifts from stretch to stretch (MIT-BIH
112: 48 % of normal beats 30 ms or more off the record's median, against 0 %
with whole blocks). Blocks on the absolute grid keep streamed chunks exact:
with chunk lengths that are whole multiples of ``block_s`` (the default 600 s)
every block lies inside one chunk's core, and its beats are placed exactly
where the whole record places them. Which beats survive the refractory merge
and the excursion check is still decided on each beat's largest deflection.
"""

from __future__ import annotations

import numpy as np

from ecgtrace.tools._beats_grid import nanmedian_rows

#: Half-width (ms) of the QRS window matched against the block's median QRS.
ALIGN_HALF_MS = 60.0
#: A beat moves to its best match with the median QRS only where the two correlate at least this well.
MIN_ALIGN_CORR = 0.8
#: A block's beats are placed on the negative peak only where theirs is clearly the deeper one (the median of
#: (|negative| - positive) / larger over this): a majority of signs flips where R and S are of about the same size.
NEGATIVE_MARGIN = 0.25
#: A block with fewer beats keeps every beat's largest deflection (its median QRS would mean little).
MIN_GROUP_BEATS = 8
#: A block's beats are placed on its first lead whose evidence reaches MIN_LEAD_EVIDENCE (the detector's
#: support threshold) at MIN_LEAD_SHARE of them.
MIN_LEAD_EVIDENCE = 0.3
MIN_LEAD_SHARE = 0.8


def _deviation(x: np.ndarray, beats: np.ndarray, lead: int | np.ndarray, r: int, base_half: int) -> np.ndarray:
    """(n_beats, 2r+1) deviation from the local median baseline around each beat on ``lead``; NaN where the signal is."""
    offs = np.arange(-base_half, base_half + 1)
    pos = np.clip(beats[:, None] + offs[None, :], 0, x.shape[0] - 1)
    win = x[pos, np.broadcast_to(np.asarray(lead).reshape(-1, 1), pos.shape)].astype(np.float64)
    win = np.where(np.isfinite(win), win, np.nan)
    empty = ~np.isfinite(win).any(axis=1)
    baseline = nanmedian_rows(np.where(empty[:, None], 0.0, win))[:, None]  # an all-NaN row stays NaN below
    return win[:, base_half - r : base_half + r + 1] - baseline


def _peak(dev: np.ndarray, r: int, polarity: float | None = None) -> np.ndarray:
    """Offset (samples, -r..r) of each row's largest |deviation| (``polarity`` None) or largest deviation of that sign; 0 on an empty row."""
    score = np.abs(dev) if polarity is None else dev * polarity
    at = np.argmax(np.nan_to_num(score, nan=-np.inf), axis=1) - r
    return np.where(np.isfinite(dev).any(axis=1), at, 0)


def refine_beats(x: np.ndarray, beats: np.ndarray, lead_weight: np.ndarray, fs_hz: float, refine_ms: float, *,
                 offset: int = 0, block_s: float = 60.0) -> tuple[np.ndarray, np.ndarray]:
    """``(fiducial, largest)``: samples of each beat's fiducial point and of its largest |deflection| on its best lead.

    The fiducial point is the point of its QRS where the other beats of its
    block of the same shape are placed; beats of another shape keep their
    largest deflection there.

    Args:
        x: the chunk's signal (n_samples, n_leads), mV.
        beats: candidate samples (n_beats,) within the chunk, sorted.
        lead_weight: per lead and beat (n_leads, n_beats), the evidence a lead gives the beat (0: unusable there).
        fs_hz: sampling rate (Hz).
        refine_ms: half-width (ms) of the search around each candidate.
        offset: absolute sample of the chunk's first sample (blocks lie on the record's own grid).
        block_s: length (s) of the blocks whose beats are placed together.
    """
    if beats.size == 0:
        return beats.astype(np.int64), beats.astype(np.int64)
    n_samples = x.shape[0]
    r = max(int(round(refine_ms * fs_hz / 1000.0)), 1)
    base_half = max(int(round(0.25 * fs_hz)), r)
    best = np.argmax(lead_weight, axis=0)
    dev_best = _deviation(x, beats, best, r, base_half)
    largest = np.clip(beats + _peak(dev_best, r), 0, n_samples - 1).astype(np.int64)
    placed = largest.copy()
    block = (offset + beats) // max(int(round(block_s * fs_hz)), 1)
    for b in np.unique(block):
        group = np.flatnonzero(block == b)
        if group.size < MIN_GROUP_BEATS:
            continue
        # the first lead that sees most beats; summed evidence would swap between leads of the same strength block to block
        sees = (lead_weight[:, group] >= MIN_LEAD_EVIDENCE).mean(axis=1) >= MIN_LEAD_SHARE
        lead = int(np.argmax(sees)) if sees.any() else int(np.argmax(lead_weight[:, group].sum(axis=1)))
        dev = dev_best[group].copy()
        other = np.flatnonzero(best[group] != lead)  # the deviation is recomputed only where the block's lead is not the beat's own
        if other.size:
            dev[other] = _deviation(x, beats[group][other], lead, r, base_half)
        placed[group] = _place_group(x, beats[group], lead_weight[lead, group], dev, lead, largest[group], r,
                                     int(round(ALIGN_HALF_MS * fs_hz / 1000.0)))
    return placed, largest


def _place_group(x: np.ndarray, beats: np.ndarray, weight: np.ndarray, dev: np.ndarray, lead: int, largest: np.ndarray, r: int,
                 half: int) -> np.ndarray:
    """Fiducial points of one block's beats on ``lead`` (``dev``: their deviation there): one polarity, each aligned on the median QRS."""
    finite = np.isfinite(dev)
    up = np.where(finite, dev, -np.inf).max(axis=1).clip(min=0.0)
    down = (-np.where(finite, dev, np.inf).min(axis=1)).clip(min=0.0)
    ok = finite.any(axis=1)
    deeper = (down[ok] - up[ok]) / np.maximum(np.maximum(up[ok], down[ok]), 1e-9)  # how much deeper the negative peak is (-1..1)
    polarity = -1.0 if deeper.size and np.median(deeper) > NEGATIVE_MARGIN else 1.0
    polar = np.clip(beats + _peak(dev, r, polarity), 0, x.shape[0] - 1)
    moved, matched = _align_to_median(x[:, lead], polar, polarity, r, half)
    keep = matched & (weight > 0) & ok & (np.abs(moved - beats) <= r)  # never further than the search width
    return np.where(keep, moved, largest)


def _align_to_median(trace: np.ndarray, polar: np.ndarray, polarity: float, r: int, half: int) -> tuple[np.ndarray, np.ndarray]:
    """``(positions, matched)``: each beat moved within +-``r`` to its best match with the median QRS, then to that median's peak."""
    n = trace.size
    width = 2 * half + 1
    seg = np.nan_to_num(trace[np.clip(polar[:, None] + np.arange(-r - half, r + half + 1)[None, :], 0, n - 1)].astype(np.float64))
    windows = np.lib.stride_tricks.sliding_window_view(seg, width, axis=1)  # (n_beats, 2r+1 shifts, width), no copy
    template = np.median(windows[:, r, :], axis=0)
    template -= template.mean()
    # Pearson correlation per shift from running sums: the template is centred, so the window's mean drops out of the dot
    sums = np.concatenate([np.zeros((seg.shape[0], 1)), np.cumsum(seg, axis=1)], axis=1)
    squares = np.concatenate([np.zeros((seg.shape[0], 1)), np.cumsum(seg * seg, axis=1)], axis=1)
    total, total_sq = sums[:, width:] - sums[:, :-width], squares[:, width:] - squares[:, :-width]
    spread = np.sqrt(np.maximum(total_sq - total * total / width, 0.0))
    corr = (windows @ template) / (spread * np.linalg.norm(template) + 1e-12)
    best = np.argmax(corr, axis=1)
    peak = int(np.argmax(template[half - r : half + r + 1] * polarity)) - r  # the median QRS's own peak, within the search width
    return polar + best - r + peak, corr[np.arange(polar.size), best] >= MIN_ALIGN_CORR


__all__ = ["ALIGN_HALF_MS", "MIN_ALIGN_CORR", "MIN_GROUP_BEATS", "NEGATIVE_MARGIN", "refine_beats"]
