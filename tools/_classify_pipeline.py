"""Feature pass over a record or an in-memory signal (internal to :mod:`ecgtrace.tools.classify`).

The record is read chunk by chunk (bounded memory); the dominant template is
re-learned in every chunk from that chunk's regular-RR beats and carried over
to the next chunk when a chunk has too few beats of its own.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ecgtrace.tools import _classify_features as cf

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
        filtered, bad = cf.bandpass(signal_mv, self.fs_hz)
        positions = self.beat_samples[lo:hi] - start
        win, ok = cf.extract_windows(filtered, bad, positions, self.fs_hz)
        ok &= self.lead_usable[None, :]
        prem = self.rr["prematurity"][lo:hi]
        cand = (prem > CANDIDATE_PREMATURITY[0]) & (prem < CANDIDATE_PREMATURITY[1])
        tmpl = cf.dominant_template(win, ok, cand)
        if tmpl is None:
            tmpl = cf.dominant_template(win, ok, np.ones(hi - lo, dtype=bool))
        if tmpl is not None:
            tmpl_ok = (np.ptp(tmpl[:, cf.QRS_SL], axis=-1) > FLAT_TEMPLATE_MV) & self.lead_usable
            if tmpl_ok.any():
                self.template, self.template_ok = tmpl, tmpl_ok
                self.n_templates += 1
        if self.template is None:
            return
        feats, b_qrs, lead_w = cf.morphology_features(win, ok, self.template, self.template_ok)
        for name in ("prematurity", "compensatory_ratio"):
            feats[name] = self.rr[name][lo:hi]
        feats.update(cf.cluster_features(b_qrs, lead_w, feats))
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


def features_from_chunks(chunks: Iterable, beat_samples: np.ndarray, fs_hz: float, lead_usable: np.ndarray) -> tuple[dict[str, np.ndarray], int]:
    """Run the accumulator over ``records.Chunk`` objects; returns (features, n_templates)."""
    acc = FeatureAccumulator(beat_samples, fs_hz, lead_usable)
    for chunk in chunks:
        acc.add_chunk(chunk.signal_mv, chunk.start, chunk.core_start, chunk.core_stop)
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
