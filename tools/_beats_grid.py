"""Shared primitives of the beat detector: its settings, band-pass filters and the absolute 1 s block grid.

:mod:`ecgtrace.tools._beats_core` (the per-chunk detector) and
:mod:`ecgtrace.tools._beats_excursion` (the electrode-motion index) both build
on these; neither imports the other's internals, so there is no import cycle.

Every windowed statistic lives on the *absolute* block grid
``(offset + i) // block`` (``offset``: the chunk's first sample in the record),
which is what keeps two overlapping chunks' decisions equal near a seam.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy.signal import butter

__all__ = ["DetectorParams", "band_edges", "bandpass_sos", "block_centres_local", "block_grid", "block_reduce", "nanmedian_rows", "sliding"]


@dataclass(frozen=True)
class DetectorParams:
    """Detector settings. All are general; none is set per record.

    Levels and thresholds are in units of the lead's typical QRS slope energy
    (dimensionless); times in ms or s as named; frequencies in Hz.
    """

    band_hz: tuple[float, float] = (5.0, 15.0)  # QRS band-pass
    integration_ms: float = 150.0  # moving window of the slope energy
    block_s: float = 1.0  # block of the absolute grid for levels and quality
    level_halfwidth_blocks: int = 2  # level/quality window: block +- this many blocks
    threshold: float = 0.30  # fused evidence needed for a beat
    consensus: float = 0.3  # per-lead evidence for a lead to agree
    strong: float = 0.7  # per-lead evidence that confirms a beat alone
    voter_weight: float = 0.3  # a lead votes only where min(quality_gain * q, 1) reaches this
    quality_gain: float = 3.0  # lead evidence is scaled by min(quality_gain * q, 1)
    support_threshold: float = 0.3  # lead_support: lead evidence at the beat
    searchback_factor: float = 0.5  # search-back thresholds = this x the thresholds above
    searchback_rr_ratio: float = 1.66  # gap (x local median RR) that triggers search-back
    refractory_ms: float = 200.0
    twave_window_ms: float = 360.0
    twave_slope_ratio: float = 0.5
    refine_ms: float = 50.0  # R-peak refinement half-window
    fiducial_block_s: float = 60.0  # the beats of one block of the record's time grid are placed on their QRS together (_beats_fiducial)
    hf_band_hz: tuple[float, float] = (25.0, 45.0)  # noise band for the quality index
    hf_ratio_good: float = 0.6
    hf_ratio_bad: float = 1.0
    quiet_level: float = 0.2  # slope energy below this x level counts as quiet
    quiet_good: float = 0.5  # quiet share of the window for full quality
    quiet_bad: float = 0.07  # quiet share at or below which no discrete QRS is seen
    block_hf_bad: float = 0.85  # a single block this white-noise-like is bad on that lead
    block_peakiness_good: float = 2.5  # a block whose max/mean slope energy reaches this shows a sharp QRS
    block_energy_ratio: float = 0.25  # ... and only if its QRS-band power is >= this x the window's median block
    block_quality_low: float = 0.05
    artifact_grow_blocks: int = 2
    lf_band_hz: tuple[float, float] = (0.7, 10.0)  # baseline-excursion band (electrode motion)
    lf_reference: str = "lf"  # size reference: "lf" (the 0.7-10 Hz band's own peak-to-peak) or "qrs" (5-15 Hz)
    lf_reference_halfwidth_blocks: int = 10  # median of the reference over block +- this many blocks
    lf_decimate_max: int = 1  # >1: LF index on the signal averaged in groups of up to this many samples (faster, shifts marginal blocks)
    lf_edge_margin: float = 0.15  # an artifact grows into neighbours whose LF-quiet share is under lf_quiet_bad + this
    lf_quiet_level: float = 0.2  # |LF - block median| below this x the reference size (lf_reference) is quiet
    lf_quiet_bad: float = 0.55  # a block whose LF-quiet share is under this is an excursion on that lead (0: index off)
    beat_match_corr: float = 0.75  # a beat is like a neighbour when their shapes correlate this well
    beat_match_neighbours: int = 3  # neighbours on each side a beat is compared with
    beat_unlike_share: float = 0.5  # an excursion block is an artifact when this share of the beats within +-1 block is unlike
    # a beat whose slope energy is under this x its neighbours' upper quartile on every lead is no QRS (_beats_faint;
    # 0: off); on the tuning records (DS1, paced, QTDB tuned: 66 212 beats) the lowest true beat lies at 0.198 (208, an
    # N beat among large PVCs), the P, T and noise bumps a pause lets through at 0.02-0.12
    faint_ratio: float = 0.12
    faint_window_s: float = 5.0  # neighbours: the other beats within +- this

    def min_overlap_s(self) -> float:
        """Warm-up (s) a chunk needs on each side for seam-exact results: the widest window plus margin."""
        widest = self.level_halfwidth_blocks
        if self.lf_quiet_bad > 0:
            widest = max(widest, self.lf_reference_halfwidth_blocks)
        faint_s = self.faint_window_s + (self.level_halfwidth_blocks + 3) * self.block_s if self.faint_ratio > 0 else 0.0
        return max(5.0, (widest + 3) * self.block_s, faint_s)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["band_hz"] = [float(v) for v in self.band_hz]
        out["hf_band_hz"] = [float(v) for v in self.hf_band_hz]
        out["lf_band_hz"] = [float(v) for v in self.lf_band_hz]
        return out


def band_edges(f1: float, f2: float, fs_hz: float) -> tuple[float, float]:
    """Band edges (Hz) kept below 0.45 x fs_hz, with the low edge at most half the high one."""
    hi = min(f2, 0.45 * fs_hz)
    return min(f1, 0.5 * hi), hi


@lru_cache(maxsize=32)
def bandpass_sos(f1: float, f2: float, fs_hz: float) -> np.ndarray:
    """Second-order Butterworth band-pass ``f1``-``f2`` Hz at ``fs_hz`` as second-order sections (cached)."""
    lo, hi = band_edges(f1, f2, fs_hz)
    return butter(2, [lo / (fs_hz / 2.0), hi / (fs_hz / 2.0)], btype="bandpass", output="sos")


def block_reduce(values: np.ndarray, offset: int, block: int, how: str) -> np.ndarray:
    """Reduce a 1-D array per block of the absolute grid ``(offset + i) // block``."""
    lead_pad = offset % block
    n = values.size
    n_blocks = -(-(lead_pad + n) // block)
    padded = np.zeros(n_blocks * block, dtype=values.dtype)
    padded[lead_pad : lead_pad + n] = values
    grid = padded.reshape(n_blocks, block)
    if how == "max":
        return grid.max(axis=1)
    return grid.sum(axis=1)


def sliding(values: np.ndarray, half: int, how: str) -> np.ndarray:
    """Centred sliding median/sum over ``2 * half + 1`` blocks (edges use what exists)."""
    padded = np.concatenate([np.full(half, np.nan), values.astype(np.float64), np.full(half, np.nan)])
    windows = sliding_window_view(padded, 2 * half + 1)
    if how == "median":
        return nanmedian_rows(windows)
    return np.nansum(windows, axis=1)


def nanmedian_rows(a: np.ndarray) -> np.ndarray:
    """``np.nanmedian(a, axis=1)`` of a 2-D float array, bit for bit, by one sort.

    nanmedian of short rows goes through masked arrays (about 1-2 ms a call; the
    detector makes ten or more per chunk), which sort each row and return
    ``(low + high) / 2`` of the middle pair of its non-NaN values (the middle value
    twice for an odd count; longer rows give the same through ``np.median``).
    ``np.sort`` puts NaN last, so the same two values sit at the same places
    (``tests/tools/test_beats_grid.py`` compares them). A row of NaN only, or an
    array holding -0.0 (which sorts level with 0.0, so either may come first), goes to nanmedian.
    """
    if a.ndim != 2 or a.size == 0:
        return np.nanmedian(a, axis=1)
    zero = a == 0
    count = a.shape[1] - np.count_nonzero(np.isnan(a), axis=1)
    if not count.all() or np.signbit(a[zero]).any():
        return np.nanmedian(a, axis=1)
    ordered = np.sort(a, axis=1)
    rows = np.arange(a.shape[0])
    return (ordered[rows, (count - 1) // 2] + ordered[rows, count // 2]) / 2


def block_centres_local(offset: int, n: int, block: int, n_blocks: int) -> np.ndarray:
    """Centres of the chunk's blocks in chunk-local samples (for interpolating per-block levels)."""
    first = offset // block
    return (np.arange(first, first + n_blocks) * block + (block - 1) / 2.0) - offset


def block_grid(values: np.ndarray, offset: int, block: int) -> np.ndarray:
    """``(n_blocks, block)`` view of a 1-D array on the absolute grid; partial edge blocks repeat their edge sample."""
    lead_pad = offset % block
    n = values.size
    n_blocks = -(-(lead_pad + n) // block)
    tail = n_blocks * block - lead_pad - n
    return np.pad(values, (lead_pad, tail), mode="edge").reshape(n_blocks, block)
