"""Single-chunk multi-lead QRS detector (the engine behind :mod:`ecgtrace.tools.beats`).

A Pan-Tompkins-style pipeline whose adaptive levels are *windowed* statistics
on an absolute 1 s block grid instead of recursive running averages. A
decision at sample ``s`` depends only on the signal a few seconds around ``s``,
so two chunks that both hold that neighbourhood (the warm-up overlap) decide
the same way: this is what keeps beats from being lost or doubled at a seam.

Per lead ``j`` (``fs_hz`` explicit everywhere):

1. ``bp_j``: 5-15 Hz band-pass (zero phase); ``d_j``: its derivative (mV/s).
2. ``e_j = sqrt(moving_mean(d_j**2, 150 ms))``: QRS slope energy (mV/s).
3. Level ``S_j``: the median, over the block and 2 blocks each side, of the
   per-block maxima of ``e_j`` (interpolated between block centres);
   ``e_j / S_j`` is about 1 on a typical QRS.
4. Quality ``q_j`` in [0, 1] per block (signal-quality index over the same
   5 s window): power density in 25-45 Hz against 5-15 Hz (white noise and EMG
   give about 1, clean ECG 0.1-0.5) times the peakiness ``S_j / mean(e_j)``
   (discrete QRS complexes give 2.5-5, noise and flutter waves 1.5-1.8).
   Flat (records.lead_is_unusable), NaN or excluded leads get 0.

Fusion: ``f = sum_j q_j e_j / S_j / sum_j q_j``. A candidate (peak of ``f``,
>= 200 ms from a larger one) is a beat when ``f >= threshold`` and the leads
confirm it: ``min(2, active leads)`` leads reach ``consensus`` or one lead
reaches ``strong`` (lead evidence is ``e_j / S_j`` scaled by
``min(quality_gain * q_j, 1)``, so a noisy lead counts less; a lead whose scale
is under ``voter_weight`` is left out of the vote there). A candidate closer
than 360 ms to the previous beat with under half its slope is a T wave. A
search-back pass fills RR gaps longer than 1.66 x the local median RR with the
best candidate that passes half of every threshold. Each beat then moves to the
largest absolute deflection (from the local median baseline) of its best lead
within +-50 ms.

Artifact spans: a block is an artifact when every lead is bad there, i.e.
unusable, white-noise-like in that block alone (25-45 Hz / 5-15 Hz ratio
>= ``block_hf_bad``), or of nil window quality without a sharp QRS in the block
(noise, or flutter with no discrete QRS). Spans grow into neighbouring blocks
where no lead shows a sharp QRS. No beat is reported inside an artifact span.

Low-frequency excursion index (electrode motion, :mod:`ecgtrace.tools._beats_excursion`;
``lf_quiet_bad = 0`` switches it off): per lead and block, the share of samples
whose 0.7-10 Hz component stays within ``lf_quiet_level`` x the lead's typical
0.7-10 Hz peak-to-peak (median of the per-block values over block +- 10) of the
block median. Clean ECG (also wide, paced, AF, tachycardia) keeps >= ~0.8 of a
block quiet; motion bursts keep ~0.2-0.6. A block where every lead is bad or
under ``lf_quiet_bad`` (one at least under it) is an excursion block; it becomes
an artifact when half or more of the beats within +-1 block match none of their
3 neighbours each side (mean per-lead correlation >= ``beat_match_corr``,
-200..+300 ms): VT, couplets, bigeminy and paced beats repeat a shape, motion
adds a different swing to every beat. Such spans grow into neighbours that are
weak or nearly excursions (``lf_edge_margin``). The reference window is wider
than the level window, so :meth:`DetectorParams.min_overlap_s` (13 s) sets the
chunk warm-up.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy.ndimage import maximum_filter1d, uniform_filter1d
from scipy.signal import butter, find_peaks, sosfilt, sosfiltfilt

ALGORITHM_VERSION = "2"


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

    def min_overlap_s(self) -> float:
        """Warm-up (s) a chunk needs on each side for seam-exact results: the widest window plus margin."""
        widest = self.level_halfwidth_blocks
        if self.lf_quiet_bad > 0:
            widest = max(widest, self.lf_reference_halfwidth_blocks)
        return max(5.0, (widest + 3) * self.block_s)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["band_hz"] = [float(v) for v in self.band_hz]
        out["hf_band_hz"] = [float(v) for v in self.hf_band_hz]
        out["lf_band_hz"] = [float(v) for v in self.lf_band_hz]
        return out


@dataclass
class ChunkDetections:
    """Detections in one chunk, in absolute sample indices."""

    samples: np.ndarray  # int64, sorted
    support: np.ndarray  # int8 (n_beats, n_leads)
    score: np.ndarray  # float32 fused evidence at each beat
    artifact_blocks: np.ndarray  # bool per block of the absolute grid covered by the chunk
    first_block: int  # absolute index of artifact_blocks[0]
    block_samples: int
    lead_evidence: np.ndarray | None = None  # float32 (n_beats, n_leads): normalized QRS energy x (quality > 0)
    lead_quality: np.ndarray | None = None  # float32 (n_beats, n_leads): quality index q at the beat


def _band_edges(f1: float, f2: float, fs_hz: float) -> tuple[float, float]:
    hi = min(f2, 0.45 * fs_hz)
    return min(f1, 0.5 * hi), hi


@lru_cache(maxsize=32)
def _sos(f1: float, f2: float, fs_hz: float) -> np.ndarray:
    lo, hi = _band_edges(f1, f2, fs_hz)
    return butter(2, [lo / (fs_hz / 2.0), hi / (fs_hz / 2.0)], btype="bandpass", output="sos")


def _block_reduce(values: np.ndarray, offset: int, block: int, how: str) -> np.ndarray:
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


def _sliding(values: np.ndarray, half: int, how: str) -> np.ndarray:
    """Centred sliding median/sum over ``2 * half + 1`` blocks (edges use what exists)."""
    padded = np.concatenate([np.full(half, np.nan), values.astype(np.float64), np.full(half, np.nan)])
    windows = sliding_window_view(padded, 2 * half + 1)
    if how == "median":
        return np.nanmedian(windows, axis=1)
    return np.nansum(windows, axis=1)


def _block_centres_local(offset: int, n: int, block: int, n_blocks: int) -> np.ndarray:
    first = offset // block
    return (np.arange(first, first + n_blocks) * block + (block - 1) / 2.0) - offset


def detect_chunk(
    signal_mv: np.ndarray,
    fs_hz: float,
    offset: int = 0,
    params: DetectorParams | None = None,
    *,
    exclude: np.ndarray | None = None,
) -> ChunkDetections:
    """Detect beats in one chunk ``signal_mv`` (n_samples, n_leads) that starts at absolute sample ``offset``.

    ``exclude`` is a bool mask of leads that must not contribute (flat, NaN, unusable).
    """
    from ecgtrace.tools._beats_excursion import implausible_blocks, lf_quiet_share

    p = params or DetectorParams()
    x = np.asarray(signal_mv, dtype=np.float32)
    if x.ndim == 1:
        x = x[:, None]
    n, n_leads = x.shape
    block = max(int(round(p.block_s * fs_hz)), 1)
    first_block = offset // block
    n_blocks = -(-((offset % block) + n) // block)
    empty = ChunkDetections(np.zeros(0, np.int64), np.zeros((0, n_leads), np.int8), np.zeros(0, np.float32), np.zeros(n_blocks, bool), first_block, block)
    if n < max(int(0.5 * fs_hz), 16):  # too short to hold a QRS and its surroundings
        return empty
    band = _sos(p.band_hz[0], p.band_hz[1], float(fs_hz))
    hf_band = _sos(p.hf_band_hz[0], p.hf_band_hz[1], float(fs_hz))
    # power per Hz in the noise band against power per Hz in the QRS band (white noise: about 1)
    bw_ratio = np.diff(_band_edges(*p.band_hz, fs_hz))[0] / np.diff(_band_edges(*p.hf_band_hz, fs_hz))[0]
    win = max(int(round(p.integration_ms * fs_hz / 1000.0)), 1)
    centres = _block_centres_local(offset, n, block, n_blocks)
    idx = np.arange(n, dtype=np.float64)

    norm_env = np.zeros((n_leads, n), np.float32)
    norm_slope = np.zeros((n_leads, n), np.float32)
    quality = np.zeros((n_leads, n_blocks), np.float32)
    half = p.level_halfwidth_blocks
    lead_bad = np.ones((n_leads, n_blocks), bool)  # per block: lead unusable, noise, or no discrete QRS
    lead_weak = np.ones((n_leads, n_blocks), bool)  # per block: lead shows no sharp QRS in this block alone
    lf_quiet = np.ones((n_leads, n_blocks), np.float32)  # per block: share of quiet low-frequency baseline (motion: low)
    for j in range(n_leads):
        trace = x[:, j]
        bad = ~np.isfinite(trace)
        if bad.all() or (exclude is not None and exclude[j]):
            continue
        if bad.any():
            trace = np.where(bad, np.float32(np.nanmedian(trace)), trace)
        bp = sosfiltfilt(band, trace).astype(np.float32)
        d = np.gradient(bp) * np.float32(fs_hz)
        env = np.sqrt(uniform_filter1d(d * d, win, mode="nearest"))
        emax = _block_reduce(env, offset, block, "max")
        level = _sliding(emax, half, "median")
        # quality: high-frequency share and peakiness, both over the same block window
        hf = sosfilt(hf_band, trace - trace[0]).astype(np.float32)
        hf_blk = _block_reduce(hf * hf, offset, block, "sum")
        bp_blk = _block_reduce(bp * bp, offset, block, "sum")
        counts = _block_reduce(np.ones(n, np.float32), offset, block, "sum")
        env_blk = _block_reduce(env, offset, block, "sum")
        with np.errstate(divide="ignore", invalid="ignore"):
            hf_ratio = np.sqrt(bw_ratio * _sliding(hf_blk, half, "sum") / _sliding(bp_blk, half, "sum"))
            # share of the window where the slope energy is near zero: discrete QRS complexes leave
            # quiet stretches between them even at 170 bpm; noise and flutter waves leave none
            # (relative to each block's own maximum, so that no window depends on another window)
            block_max_s = np.repeat(emax, block)[(offset % block) : (offset % block) + n]
            quiet_blk = _block_reduce((env < p.quiet_level * block_max_s).astype(np.float32), offset, block, "sum")
            quiet = _sliding(quiet_blk, half, "sum") / _sliding(counts, half, "sum")
            ratio_blk = np.sqrt(bw_ratio * hf_blk / bp_blk)
            peakiness_blk = emax / (env_blk / np.maximum(counts, 1.0))
        q_hf = np.clip((p.hf_ratio_bad - hf_ratio) / (p.hf_ratio_bad - p.hf_ratio_good), 0.0, 1.0)
        q_pk = np.clip((quiet - p.quiet_bad) / (p.quiet_good - p.quiet_bad), 0.0, 1.0)
        q = np.nan_to_num(q_hf * q_pk)
        flat = ~(level > 1e-3)  # slope level below 1 mV/s: no QRS can be seen
        unusable_blk = flat | ~(emax > 1e-3)
        if bad.any():
            unusable_blk |= _block_reduce(bad.astype(np.float32), offset, block, "sum") > 0
        q[unusable_blk] = 0.0
        quality[j] = q
        # A lead is bad in a block when it is unusable there, when the block itself looks like white
        # noise, or when the window's quality is nil and the block shows no sharp QRS either (so a
        # clean block next to a noise burst keeps its beats).
        # (only a block with real energy can be noise: a pause between beats is quiet, not noise)
        energetic = bp_blk >= p.block_energy_ratio * _sliding(bp_blk, half, "median")
        noise_blk = ~(ratio_blk < p.block_hf_bad) & energetic
        no_qrs_blk = ~(peakiness_blk >= p.block_peakiness_good)
        if p.lf_quiet_bad > 0:
            lf_quiet[j] = lf_quiet_share(trace, bp, offset, block, n_blocks, float(fs_hz), p)
        lead_bad[j] = unusable_blk | noise_blk | ((q < p.block_quality_low) & no_qrs_blk)
        lead_weak[j] = unusable_blk | noise_blk | no_qrs_blk
        level_s = np.interp(idx, centres, level).astype(np.float32)
        level_s = np.where(level_s > 1e-3, level_s, np.float32(np.inf))
        norm_env[j] = env / level_s
        norm_slope[j] = np.abs(d) / level_s

    q_s = np.stack([np.interp(idx, centres, quality[j]) for j in range(n_leads)]).astype(np.float32)
    q_sum = q_s.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        fused = np.where(q_sum > 0, (q_s * norm_env).sum(axis=0) / q_sum, 0.0).astype(np.float32)
        slope = np.where(q_sum > 0, (q_s * norm_slope).sum(axis=0) / q_sum, 0.0).astype(np.float32)
    weak = lead_weak.all(axis=0)
    artifact_blocks = _grow(lead_bad.all(axis=0), weak, p.artifact_grow_blocks)
    # excursion blocks: every lead bad or moving; they become artifacts unless their beats look like beats
    lead_excursion = lf_quiet < p.lf_quiet_bad
    excursion = (lead_bad | lead_excursion).all(axis=0) & ~artifact_blocks & lead_excursion.any(axis=0)
    excursion_edge = (lead_bad | (lf_quiet < p.lf_quiet_bad + p.lf_edge_margin)).all(axis=0)

    refractory = max(int(round(p.refractory_ms * fs_hz / 1000.0)), 1)
    cand, _ = find_peaks(fused, height=p.threshold * p.searchback_factor, distance=refractory)
    cand_block = (offset + cand) // block - first_block
    cand = cand[~artifact_blocks[cand_block]]
    weight = np.minimum(q_s[:, cand] * p.quality_gain, 1.0)
    evidence = norm_env[:, cand] * weight * (weight >= p.voter_weight)
    beats = _decide(cand, fused, slope, evidence, fs_hz, p)
    if beats.size == 0:
        return ChunkDetections(np.zeros(0, np.int64), np.zeros((0, n_leads), np.int8), np.zeros(0, np.float32), artifact_blocks, first_block, block)
    score = fused[beats]
    weighted = norm_env[:, beats] * (q_s[:, beats] > 0)
    support = (weighted >= p.support_threshold).astype(np.int8).T
    best = np.argmax(weighted, axis=0)
    refined = _refine(x, beats, best, fs_hz, p.refine_ms)
    order = np.argsort(refined, kind="stable")
    refined, support, score = refined[order], support[order], score[order]
    keep = _refractory_keep(refined, score, refractory)
    if excursion.any():
        implausible = implausible_blocks(x, refined, offset, block, first_block, excursion, lead_bad, fs_hz, p)
        artifact_blocks = artifact_blocks | _grow(implausible, weak | excursion_edge, p.artifact_grow_blocks)
    keep &= ~artifact_blocks[(offset + refined) // block - first_block]  # refinement never enters an artifact span
    ev = weighted.T[order][keep].astype(np.float32)
    lq = q_s[:, beats].T[order][keep].astype(np.float32)
    return ChunkDetections(refined[keep] + offset, support[keep], score[keep].astype(np.float32), artifact_blocks, first_block, block, ev, lq)


def _grow(blocks: np.ndarray, weak: np.ndarray, n_grow: int) -> np.ndarray:
    """Grow artifact blocks into neighbouring ``weak`` blocks (no lead shows a sharp QRS: burst edges, holes)."""
    out = blocks.copy()
    for _ in range(n_grow):
        near = np.zeros_like(out)
        near[1:] |= out[:-1]
        near[:-1] |= out[1:]
        out = out | (near & weak)
    return out


def _fusion_rule(evidence: np.ndarray, consensus: float, strong: float) -> np.ndarray:
    """Lead fusion per candidate: ``evidence`` (n_leads, n_cand) is 0 where a lead is left out.

    True when ``min(2, n_active)`` active leads reach ``consensus`` (leads agree)
    or any active lead reaches ``strong`` (one strong lead suffices).
    """
    active = evidence > 0
    need = np.minimum(active.sum(axis=0), 2)
    agree = (evidence >= consensus).sum(axis=0)
    return ((agree >= need) & (need > 0)) | (evidence >= strong).any(axis=0)


def _decide(cand: np.ndarray, fused: np.ndarray, slope: np.ndarray, evidence: np.ndarray, fs_hz: float, p: DetectorParams) -> np.ndarray:
    """Threshold pass with lead fusion and T-wave rejection, then RR search-back."""
    if cand.size == 0:
        return cand.astype(np.int64)
    half = max(int(round(0.06 * fs_hz)), 1)
    cslope = maximum_filter1d(slope, 2 * half + 1, mode="nearest")[cand]  # peak slope within +-60 ms
    cheight = fused[cand]
    twin = p.twave_window_ms * fs_hz / 1000.0
    primary = (cheight >= p.threshold) & _fusion_rule(evidence, p.consensus, p.strong)
    low_thr = p.searchback_factor
    secondary = (cheight >= p.threshold * low_thr) & _fusion_rule(evidence, p.consensus * low_thr, p.strong * low_thr)
    accepted = np.zeros(cand.size, bool)
    last = -1
    for i in np.flatnonzero(primary):
        if last >= 0 and cand[i] - cand[last] < twin and cslope[i] < p.twave_slope_ratio * cslope[last]:
            continue
        accepted[i] = True
        last = i
    # search-back: fill long gaps with the best weaker candidate, repeatedly
    for _ in range(8):
        acc_idx = np.flatnonzero(accepted)
        if acc_idx.size < 3:
            break
        pos = cand[acc_idx]
        rr = np.diff(pos).astype(np.float64)
        local_rr = _local_median_rr(pos, rr, fs_hz)
        added = False
        for g in np.flatnonzero(rr > p.searchback_rr_ratio * local_rr):
            a, b = acc_idx[g], acc_idx[g + 1]
            inner = np.arange(a + 1, b)
            inner = inner[secondary[inner]]
            gap_min = max(0.36 * local_rr[g], p.refractory_ms * fs_hz / 1000.0)
            inner = inner[(cand[inner] - cand[a] >= gap_min) & (cand[b] - cand[inner] >= gap_min)]
            near = cand[inner] - cand[a] < twin
            inner = inner[~near | (cslope[inner] >= p.twave_slope_ratio * cslope[a])]
            if inner.size == 0:
                continue
            best = inner[np.argmax(cheight[inner])]
            accepted[best] = True
            added = True
        if not added:
            break
    return cand[accepted].astype(np.int64)


def _refractory_keep(samples: np.ndarray, score: np.ndarray, refractory: int) -> np.ndarray:
    """Mask keeping, of beats closer than ``refractory`` samples after refinement, the stronger one."""
    keep = np.ones(samples.size, bool)
    close = np.flatnonzero(np.diff(samples) < refractory)
    for i in close:  # few: two refined candidates that met on one QRS
        if not (keep[i] and keep[i + 1]):
            continue
        keep[i + 1 if score[i] >= score[i + 1] else i] = False
    return keep


def _local_median_rr(pos: np.ndarray, rr: np.ndarray, fs_hz: float, half_s: float = 4.0) -> np.ndarray:
    """Median of the other RR intervals whose centres lie within +-half_s of each interval's centre.

    Time-based (not beat-count-based) so that the context, like every other
    window of the detector, is the same in any chunk that covers it.
    """
    mids = (pos[:-1] + pos[1:]) / 2.0
    half = half_s * fs_hz
    lo = np.searchsorted(mids, mids - half, side="left")
    hi = np.searchsorted(mids, mids + half, side="right")
    width = int((hi - lo).max()) if rr.size else 0
    idx = lo[:, None] + np.arange(width)[None, :]
    valid = (idx < hi[:, None]) & (idx != np.arange(rr.size)[:, None])
    vals = np.where(valid, rr[np.minimum(idx, rr.size - 1)], np.nan)
    count = valid.sum(axis=1)
    med = np.full(rr.size, 1.0 * fs_hz)
    enough = count >= 2
    if width and enough.any():
        med[enough] = np.nanmedian(vals[enough], axis=1)
    return med


def _refine(x: np.ndarray, beats: np.ndarray, best: np.ndarray, fs_hz: float, refine_ms: float) -> np.ndarray:
    """Move each beat to the largest |deflection| from the local median baseline on its best lead."""
    n = x.shape[0]
    r = max(int(round(refine_ms * fs_hz / 1000.0)), 1)
    base_half = max(int(round(0.25 * fs_hz)), r)
    offs = np.arange(-base_half, base_half + 1)
    pos = np.clip(beats[:, None] + offs[None, :], 0, n - 1)
    win = x[pos, best[:, None]]
    finite = np.isfinite(win)
    win = np.where(finite.any(axis=1, keepdims=True), win, 0.0)  # a window with no finite sample stays put
    win = np.where(np.isfinite(win), win, np.nan)
    baseline = np.nanmedian(win, axis=1, keepdims=True)
    inner = np.abs(win[:, base_half - r : base_half + r + 1] - baseline)
    inner = np.nan_to_num(inner, nan=-1.0)
    shift = np.argmax(inner, axis=1) - r
    return np.clip(beats + shift, 0, n - 1).astype(np.int64)
