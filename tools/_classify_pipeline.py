"""Feature pass over a record or an in-memory signal (internal to :mod:`ecgtrace.tools.classify`).

The record is read chunk by chunk (bounded memory); the dominant template is
re-learned in every chunk from that chunk's regular-RR beats and carried over
to the next chunk when a chunk has too few beats of its own. With workers
(:func:`features_from_record`) the chunks run in parallel against their own
templates and only the carried-over chunks wait for the serial order.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ecgtrace.tools import _classify_features as cf
from ecgtrace.tools.records import RecordInfo, chunk_bounds, iter_chunks, read_samples

#: Template leads whose QRS peak-to-peak is under this (mV) are treated as flat.
FLAT_TEMPLATE_MV = 0.02
#: A beat is a template candidate when its prematurity lies in this range (regular RR).
CANDIDATE_PREMATURITY = (-0.25, 0.08)
#: Defaults for morphology features of beats that have no template to compare with.
_NEUTRAL = {
    "corr_qrs_max": 1.0, "corr_qrs_mean": 1.0, "corr_qrs_min": 1.0, "corr_full_mean": 1.0, "corr_t_mean": 1.0,
    "rmsd_qrs_mean": 0.0, "rmsd_qrs_min": 0.0, "amp_ratio_mean": 1.0, "amp_ratio_max": 1.0,
    "slope_ratio_mean": 1.0, "polarity_agree": 1.0, "qrs_width_ms": 100.0, "template_width_ms": 100.0,
    "width_ratio": 1.0, "p_corr": 0.0, "p_amp_ratio": 1.0, "pre_energy_ratio": 1.0, "shift_ms": 0.0,
    "area_ratio_mean": 1.0, "noise_ratio": 0.0, "sim_frac": 1.0, "clu_prematurity": 0.0,
    "clu_compensatory_ratio": 1.0, "clu_width_ratio": 1.0, "clu_corr_qrs_mean": 1.0, "clu_amp_ratio_mean": 1.0,
    "clu_noise_ratio": 0.0,
    "n_leads_used": 0.0,
}


class FeatureAccumulator:
    """Collects per-beat features chunk by chunk."""

    def __init__(self, beat_samples: np.ndarray, fs_hz: float, lead_usable: np.ndarray):
        self.beat_samples = np.asarray(beat_samples, dtype=np.int64)
        self.fs_hz = float(fs_hz)
        self.lead_usable = np.asarray(lead_usable, dtype=bool)
        self.rr = cf.rr_features(self.beat_samples, self.fs_hz)
        n = self.beat_samples.size
        self.morph = {name: np.full(n, np.nan) for name in cf.MORPH_NAMES + cf.CLUSTER_NAMES}
        self.has_template = np.zeros(n, dtype=bool)
        self.template: np.ndarray | None = None
        self.template_ok: np.ndarray | None = None
        self.n_templates = 0

    def add_chunk(self, signal_mv: np.ndarray, start: int, core_start: int, core_stop: int) -> None:
        """Compute features of the beats whose sample lies in ``[core_start, core_stop)``."""
        lo, hi = np.searchsorted(self.beat_samples, [core_start, core_stop])
        if hi <= lo:
            return
        win, ok = chunk_beat_windows(signal_mv, start, self.beat_samples[lo:hi], self.fs_hz, self.lead_usable)
        own = own_template(win, ok, self.rr["prematurity"][lo:hi], self.lead_usable)
        if own is not None:
            self.template, self.template_ok = own
            self.n_templates += 1
        if self.template is None:
            return
        self.store(lo, hi, chunk_features(win, ok, self.template, self.template_ok, self.rr, lo, hi))

    def store(self, lo: int, hi: int, feats: dict[str, np.ndarray]) -> None:
        """Keep the features of beats ``lo:hi`` (computed against a template)."""
        for name in self.morph:
            self.morph[name][lo:hi] = feats[name]
        self.has_template[lo:hi] = True

    def features(self) -> dict[str, np.ndarray]:
        """All per-beat features; beats without a usable lead keep ``n_leads_used == 0``."""
        out = dict(self.rr)
        for name, values in self.morph.items():
            v = values.copy()
            missing = ~np.isfinite(v)
            if missing.any():
                v[missing] = _NEUTRAL[name]
            out[name] = v
        for name in ("corr_qrs_mean", "width_ratio", "noise_ratio"):
            v = out[name]
            out[f"prev_{name}"] = np.concatenate([v[:1], v[:-1]])
            out[f"next_{name}"] = np.concatenate([v[1:], v[-1:]])
        out["has_template"] = self.has_template.copy()
        return out


def chunk_beat_windows(signal_mv: np.ndarray, start: int, beat_samples: np.ndarray, fs_hz: float, lead_usable: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Band-passed beat windows of one chunk starting at record sample ``start``, and which (beat, lead) are usable."""
    filtered, bad = cf.bandpass(signal_mv, fs_hz)
    win, ok = cf.extract_windows(filtered, bad, beat_samples - start, fs_hz)
    return win, ok & lead_usable[None, :]


def own_template(win: np.ndarray, ok: np.ndarray, prematurity: np.ndarray, lead_usable: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The chunk's dominant template from its regular-RR beats (else from all), with its non-flat leads; None if it has none."""
    cand = (prematurity > CANDIDATE_PREMATURITY[0]) & (prematurity < CANDIDATE_PREMATURITY[1])
    tmpl = cf.dominant_template(win, ok, cand)
    if tmpl is None:
        tmpl = cf.dominant_template(win, ok, np.ones(win.shape[0], dtype=bool))
    if tmpl is None:
        return None
    tmpl_ok = (np.ptp(tmpl[:, cf.QRS_SL], axis=-1) > FLAT_TEMPLATE_MV) & lead_usable
    return (tmpl, tmpl_ok) if tmpl_ok.any() else None


def chunk_features(win: np.ndarray, ok: np.ndarray, template: np.ndarray, template_ok: np.ndarray, rr: dict[str, np.ndarray], lo: int, hi: int) -> dict[str, np.ndarray]:
    """Morphology and cluster features of beats ``lo:hi`` (their windows ``win``) against ``template``."""
    feats, b_qrs, lead_w = cf.morphology_features(win, ok, template, template_ok)
    for name in ("prematurity", "compensatory_ratio"):
        feats[name] = rr[name][lo:hi]
    feats.update(cf.cluster_features(b_qrs, lead_w, feats))
    return feats


def features_from_chunks(chunks: Iterable, beat_samples: np.ndarray, fs_hz: float, lead_usable: np.ndarray) -> tuple[dict[str, np.ndarray], int]:
    """Run the accumulator over ``records.Chunk`` objects; returns (features, n_templates)."""
    acc = FeatureAccumulator(beat_samples, fs_hz, lead_usable)
    for chunk in chunks:
        acc.add_chunk(chunk.signal_mv, chunk.start, chunk.core_start, chunk.core_stop)
    return acc.features(), acc.n_templates


def _chunk_job(info: RecordInfo, bounds: tuple[int, int, int, int], beat_samples: np.ndarray, rr: dict[str, np.ndarray],
               lead_usable: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]] | None:
    """One chunk in a worker: ``(template, its usable leads, features)`` against the chunk's own template, or None without one."""
    start, stop = bounds[0], bounds[1]
    win, ok = chunk_beat_windows(read_samples(info, start, stop).signal_mv, start, beat_samples, info.fs_hz, lead_usable)
    own = own_template(win, ok, rr["prematurity"], lead_usable)
    return None if own is None else (*own, chunk_features(win, ok, *own, rr, 0, beat_samples.size))


def features_from_record(info: RecordInfo, beat_samples: np.ndarray, lead_usable: np.ndarray, *, chunk_s: float, overlap_s: float,
                         workers: int = 1) -> tuple[dict[str, np.ndarray], int]:
    """The feature pass over a record, chunk by chunk; with ``workers`` > 1 the chunks run in that many processes.

    The result does not depend on ``workers``: a worker computes a chunk against
    the chunk's own template, as the serial pass does; a chunk without one (too
    few beats) is computed here afterwards, against the template carried over
    from the latest earlier chunk that had one.
    """
    bounds = chunk_bounds(info.n_samples, max(int(round(chunk_s * info.fs_hz)), 1), int(round(overlap_s * info.fs_hz)))
    if workers <= 1 or len(bounds) <= 1:
        return features_from_chunks(iter_chunks(info, chunk_s=chunk_s, overlap_s=overlap_s), beat_samples, info.fs_hz, lead_usable)
    from ecgtrace.workers import worker_pool

    acc = FeatureAccumulator(beat_samples, info.fs_hz, lead_usable)
    jobs = [(b, *np.searchsorted(acc.beat_samples, [b[2], b[3]])) for b in bounds]
    jobs = [(b, int(lo), int(hi)) for b, lo, hi in jobs if hi > lo]
    rr_of = [{name: acc.rr[name][lo:hi] for name in ("prematurity", "compensatory_ratio")} for _, lo, hi in jobs]
    with worker_pool(min(workers, len(jobs))) as pool:
        results = list(pool.map(_chunk_job, [info] * len(jobs), [b for b, _, _ in jobs], [acc.beat_samples[lo:hi] for _, lo, hi in jobs],
                                rr_of, [acc.lead_usable] * len(jobs)))
    for (b, lo, hi), res in zip(jobs, results):
        if res is not None:
            acc.template, acc.template_ok = res[0], res[1]
            acc.n_templates += 1
            acc.store(lo, hi, res[2])
        elif acc.template is not None:  # no template of its own: the serial pass's carry-over, done here
            win, ok = chunk_beat_windows(read_samples(info, b[0], b[1]).signal_mv, b[0], acc.beat_samples[lo:hi], info.fs_hz, acc.lead_usable)
            acc.store(lo, hi, chunk_features(win, ok, acc.template, acc.template_ok, acc.rr, lo, hi))
    return acc.features(), acc.n_templates


def features_from_array(signal_mv: np.ndarray, fs_hz: float, beat_samples: np.ndarray, chunk_samples: int | None = None) -> tuple[dict[str, np.ndarray], int]:
    """Same pass over an in-memory (n, n_leads) signal."""
    x = np.asarray(signal_mv, dtype=np.float32)
    if x.ndim == 1:
        x = x[:, None]
    n = x.shape[0]
    lead_usable = np.array([_lead_usable(x[:, j]) for j in range(x.shape[1])], dtype=bool)
    acc = FeatureAccumulator(beat_samples, fs_hz, lead_usable)
    step = chunk_samples or n
    overlap = int(round(5.0 * fs_hz))
    for core_start in range(0, max(n, 1), max(step, 1)):
        core_stop = min(core_start + step, n)
        start, stop = max(core_start - overlap, 0), min(core_stop + overlap, n)
        acc.add_chunk(x[start:stop], start, core_start, core_stop)
    return acc.features(), acc.n_templates


def _lead_usable(trace: np.ndarray) -> bool:
    from ecgtrace.tools.records import lead_is_unusable

    return lead_is_unusable(trace) is None
