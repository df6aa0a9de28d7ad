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
best candidate that passes half of every threshold. A beat under 0.12 x the upper
quartile of its neighbours' slope energy on every lead is dropped: a P, T or
noise bump that a pause let through (:mod:`ecgtrace.tools._beats_faint`). Each beat then moves to the
same point of its QRS as the other beats of its 60-s block of the same shape,
within +-50 ms (:mod:`ecgtrace.tools._beats_fiducial`).

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

from dataclasses import dataclass

import numpy as np
from scipy.ndimage import maximum_filter1d, uniform_filter1d
from scipy.signal import find_peaks, sosfilt, sosfiltfilt

from ecgtrace.tools._beats_excursion import implausible_blocks, lf_quiet_share
from ecgtrace.tools._beats_faint import faint_beats
from ecgtrace.tools._beats_fiducial import refine_beats
from ecgtrace.tools._beats_grid import DetectorParams, band_edges, bandpass_sos, block_centres_local, block_reduce, nanmedian_rows, sliding

__all__ = ["ALGORITHM_VERSION", "ChunkDetections", "DetectorParams", "detect_chunk"]

ALGORITHM_VERSION = "4"  # 4: no faint beat (a P, T or noise bump in a pause, _beats_faint); 3: a beat is placed on its QRS as
#                           the other beats of its block are, not at its own largest deflection


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


@dataclass(frozen=True)
class _Grid:
    """Where a chunk sits on the absolute block grid."""

    offset: int  # absolute index of the chunk's first sample
    n: int  # samples in the chunk
    block: int  # samples per block
    first_block: int
    n_blocks: int
    centres: np.ndarray  # block centres in chunk-local samples
    idx: np.ndarray  # 0 .. n-1 as float64 (interpolation abscissa)

    @classmethod
    def of(cls, offset: int, n: int, fs_hz: float, block_s: float) -> _Grid:
        block = max(int(round(block_s * fs_hz)), 1)
        n_blocks = -(-((offset % block) + n) // block)
        return cls(offset, n, block, offset // block, n_blocks, block_centres_local(offset, n, block, n_blocks), np.arange(n, dtype=np.float64))

    def reduce(self, values: np.ndarray, how: str) -> np.ndarray:
        return block_reduce(values, self.offset, self.block, how)

    def smooth(self, per_block: np.ndarray) -> np.ndarray:
        """Per-block values interpolated to every sample of the chunk."""
        return np.interp(self.idx, self.centres, per_block)


@dataclass
class _LeadEvidence:
    """Per-lead evidence of a chunk (rows are leads; a left-out lead keeps zeros / bad)."""

    norm_env: np.ndarray  # float32 (n_leads, n): slope energy over the lead's typical QRS level
    norm_slope: np.ndarray  # float32 (n_leads, n): |slope| over the same level
    quality: np.ndarray  # float32 (n_leads, n_blocks): signal-quality index q
    lead_bad: np.ndarray  # bool (n_leads, n_blocks): unusable, noise, or no discrete QRS
    lead_weak: np.ndarray  # bool (n_leads, n_blocks): no sharp QRS in this block alone
    lf_quiet: np.ndarray  # float32 (n_leads, n_blocks): share of quiet low-frequency baseline (motion: low)
    env: np.ndarray  # float32 (n_leads, n): slope energy (mV/s), before any level

    @classmethod
    def empty(cls, n_leads: int, n: int, n_blocks: int) -> _LeadEvidence:
        return cls(np.zeros((n_leads, n), np.float32), np.zeros((n_leads, n), np.float32), np.zeros((n_leads, n_blocks), np.float32),
                   np.ones((n_leads, n_blocks), bool), np.ones((n_leads, n_blocks), bool), np.ones((n_leads, n_blocks), np.float32),
                   np.zeros((n_leads, n), np.float32))


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
    Steps: per-lead evidence, lead fusion, artifact and excursion blocks,
    candidate decision, then refinement and the excursion beat check.
    """
    p = params or DetectorParams()
    x = np.asarray(signal_mv, dtype=np.float32)
    if x.ndim == 1:
        x = x[:, None]
    n, n_leads = x.shape
    grid = _Grid.of(offset, n, float(fs_hz), p.block_s)
    if n < max(int(0.5 * fs_hz), 16):  # too short to hold a QRS and its surroundings
        return _no_beats(n_leads, np.zeros(grid.n_blocks, bool), grid)
    ev = _lead_evidence(x, float(fs_hz), grid, p, exclude)
    q_s, fused, slope = _fuse_leads(ev, grid)
    artifact_blocks, weak, excursion, excursion_edge = _artifact_blocks(ev, p)
    refractory = max(int(round(p.refractory_ms * fs_hz / 1000.0)), 1)
    cand, _ = find_peaks(fused, height=p.threshold * p.searchback_factor, distance=refractory)
    cand = cand[~artifact_blocks[(offset + cand) // grid.block - grid.first_block]]
    weight = np.minimum(q_s[:, cand] * p.quality_gain, 1.0)
    evidence = ev.norm_env[:, cand] * weight * (weight >= p.voter_weight)
    beats = _decide(cand, fused, slope, evidence, fs_hz, p)
    beats = beats[~faint_beats(ev.env, q_s[:, beats] > 0, beats, float(fs_hz), p.faint_ratio, p.faint_window_s)]
    if beats.size == 0:
        return _no_beats(n_leads, artifact_blocks, grid)
    return _finish(x, beats, fused, q_s, ev, grid, artifact_blocks, weak, excursion, excursion_edge, float(fs_hz), p)


def _no_beats(n_leads: int, artifact_blocks: np.ndarray, grid: _Grid) -> ChunkDetections:
    return ChunkDetections(np.zeros(0, np.int64), np.zeros((0, n_leads), np.int8), np.zeros(0, np.float32), artifact_blocks, grid.first_block, grid.block)


def _lead_evidence(x: np.ndarray, fs_hz: float, grid: _Grid, p: DetectorParams, exclude: np.ndarray | None) -> _LeadEvidence:
    """Evidence of every lead that is not excluded or all-NaN (NaN samples are filled with the lead's median)."""
    ev = _LeadEvidence.empty(x.shape[1], grid.n, grid.n_blocks)
    for j in range(x.shape[1]):
        trace = x[:, j]
        bad = ~np.isfinite(trace)
        if bad.all() or (exclude is not None and exclude[j]):
            continue
        if bad.any():
            trace = np.where(bad, np.float32(np.nanmedian(trace)), trace)
        _one_lead(trace, bad, fs_hz, grid, p, ev, j)
    return ev


def _one_lead(trace: np.ndarray, bad: np.ndarray, fs_hz: float, grid: _Grid, p: DetectorParams, ev: _LeadEvidence, j: int) -> None:
    """Fill row ``j`` of ``ev``: slope energy and its level, the quality index, bad/weak blocks, LF-quiet share."""
    offset, block, half, n = grid.offset, grid.block, p.level_halfwidth_blocks, grid.n
    bp = sosfiltfilt(bandpass_sos(p.band_hz[0], p.band_hz[1], fs_hz), trace).astype(np.float32)
    d = np.gradient(bp) * np.float32(fs_hz)
    env = np.sqrt(uniform_filter1d(d * d, max(int(round(p.integration_ms * fs_hz / 1000.0)), 1), mode="nearest"))
    emax = grid.reduce(env, "max")
    level = sliding(emax, half, "median")
    # quality: high-frequency share and peakiness, both over the same block window
    # (power per Hz in the noise band against power per Hz in the QRS band: white noise about 1)
    bw_ratio = np.diff(band_edges(*p.band_hz, fs_hz))[0] / np.diff(band_edges(*p.hf_band_hz, fs_hz))[0]
    hf = sosfilt(bandpass_sos(p.hf_band_hz[0], p.hf_band_hz[1], fs_hz), trace - trace[0]).astype(np.float32)
    hf_blk = grid.reduce(hf * hf, "sum")
    bp_blk = grid.reduce(bp * bp, "sum")
    counts = grid.reduce(np.ones(n, np.float32), "sum")
    env_blk = grid.reduce(env, "sum")
    with np.errstate(divide="ignore", invalid="ignore"):
        hf_ratio = np.sqrt(bw_ratio * sliding(hf_blk, half, "sum") / sliding(bp_blk, half, "sum"))
        # share of the window where the slope energy is near zero: discrete QRS complexes leave
        # quiet stretches between them even at 170 bpm; noise and flutter waves leave none
        # (relative to each block's own maximum, so that no window depends on another window)
        block_max_s = np.repeat(emax, block)[(offset % block) : (offset % block) + n]
        quiet_blk = grid.reduce((env < p.quiet_level * block_max_s).astype(np.float32), "sum")
        quiet = sliding(quiet_blk, half, "sum") / sliding(counts, half, "sum")
        ratio_blk = np.sqrt(bw_ratio * hf_blk / bp_blk)
        peakiness_blk = emax / (env_blk / np.maximum(counts, 1.0))
    q_hf = np.clip((p.hf_ratio_bad - hf_ratio) / (p.hf_ratio_bad - p.hf_ratio_good), 0.0, 1.0)
    q_pk = np.clip((quiet - p.quiet_bad) / (p.quiet_good - p.quiet_bad), 0.0, 1.0)
    q = np.nan_to_num(q_hf * q_pk)
    flat = ~(level > 1e-3)  # slope level below 1 mV/s: no QRS can be seen
    unusable_blk = flat | ~(emax > 1e-3)
    if bad.any():
        unusable_blk |= grid.reduce(bad.astype(np.float32), "sum") > 0
    q[unusable_blk] = 0.0
    ev.quality[j] = q
    # A lead is bad in a block when it is unusable there, when the block itself looks like white
    # noise, or when the window's quality is nil and the block shows no sharp QRS either (so a
    # clean block next to a noise burst keeps its beats).
    # (only a block with real energy can be noise: a pause between beats is quiet, not noise)
    energetic = bp_blk >= p.block_energy_ratio * sliding(bp_blk, half, "median")
    noise_blk = ~(ratio_blk < p.block_hf_bad) & energetic
    no_qrs_blk = ~(peakiness_blk >= p.block_peakiness_good)
    if p.lf_quiet_bad > 0:
        ev.lf_quiet[j] = lf_quiet_share(trace, bp, offset, block, grid.n_blocks, fs_hz, p)
    ev.lead_bad[j] = unusable_blk | noise_blk | ((q < p.block_quality_low) & no_qrs_blk)
    ev.lead_weak[j] = unusable_blk | noise_blk | no_qrs_blk
    level_s = grid.smooth(level).astype(np.float32)
    level_s = np.where(level_s > 1e-3, level_s, np.float32(np.inf))
    ev.norm_env[j] = env / level_s
    ev.env[j] = env
    ev.norm_slope[j] = np.abs(d) / level_s


def _fuse_leads(ev: _LeadEvidence, grid: _Grid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Quality per sample ``q_s`` and the quality-weighted fused energy and slope (0 where no lead has quality)."""
    q_s = np.stack([grid.smooth(ev.quality[j]) for j in range(ev.quality.shape[0])]).astype(np.float32)
    q_sum = q_s.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        fused = np.where(q_sum > 0, (q_s * ev.norm_env).sum(axis=0) / q_sum, 0.0).astype(np.float32)
        slope = np.where(q_sum > 0, (q_s * ev.norm_slope).sum(axis=0) / q_sum, 0.0).astype(np.float32)
    return q_s, fused, slope


def _artifact_blocks(ev: _LeadEvidence, p: DetectorParams) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Artifact blocks (every lead bad, grown into weak neighbours), weak blocks, excursion blocks and their edges."""
    weak = ev.lead_weak.all(axis=0)
    artifact_blocks = _grow(ev.lead_bad.all(axis=0), weak, p.artifact_grow_blocks)
    # excursion blocks: every lead bad or moving; they become artifacts unless their beats look like beats
    lead_excursion = ev.lf_quiet < p.lf_quiet_bad
    excursion = (ev.lead_bad | lead_excursion).all(axis=0) & ~artifact_blocks & lead_excursion.any(axis=0)
    excursion_edge = (ev.lead_bad | (ev.lf_quiet < p.lf_quiet_bad + p.lf_edge_margin)).all(axis=0)
    return artifact_blocks, weak, excursion, excursion_edge


def _finish(x: np.ndarray, beats: np.ndarray, fused: np.ndarray, q_s: np.ndarray, ev: _LeadEvidence, grid: _Grid, artifact_blocks: np.ndarray,
            weak: np.ndarray, excursion: np.ndarray, excursion_edge: np.ndarray, fs_hz: float, p: DetectorParams) -> ChunkDetections:
    """Lead support, refinement to the R peak, refractory merge, and the excursion beat-shape check."""
    offset, block, first_block = grid.offset, grid.block, grid.first_block
    score = fused[beats]
    weighted = ev.norm_env[:, beats] * (q_s[:, beats] > 0)
    support = (weighted >= p.support_threshold).astype(np.int8).T
    # which beats survive is decided on each beat's largest deflection (as tuned); where it lies is its fiducial point
    placed, refined = refine_beats(x, beats, weighted, fs_hz, p.refine_ms, offset=offset, block_s=p.fiducial_block_s)
    order = np.argsort(refined, kind="stable")
    refined, placed, support, score = refined[order], placed[order], support[order], score[order]
    keep = _refractory_keep(refined, score, max(int(round(p.refractory_ms * fs_hz / 1000.0)), 1))
    if excursion.any():
        implausible = implausible_blocks(x, refined, offset, block, first_block, excursion, ev.lead_bad, fs_hz, p)
        artifact_blocks = artifact_blocks | _grow(implausible, weak | excursion_edge, p.artifact_grow_blocks)
    keep &= ~artifact_blocks[(offset + refined) // block - first_block]  # refinement never enters an artifact span
    kept = np.flatnonzero(keep)
    kept = kept[np.argsort(placed[kept], kind="stable")]  # fiducial points keep the beats' order (each lies within refine_ms of its candidate)
    lead_ev = weighted.T[order][kept].astype(np.float32)
    lead_q = q_s[:, beats].T[order][kept].astype(np.float32)
    return ChunkDetections(placed[kept] + offset, support[kept], score[kept].astype(np.float32), artifact_blocks, first_block, block, lead_ev, lead_q)


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
        med[enough] = nanmedian_rows(vals[enough])
    return med
