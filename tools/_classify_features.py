"""Per-beat features for AAMI beat classification (internal to :mod:`ecgtrace.tools.classify`).

Two kinds of features are computed:

* RR features over the whole beat stream (cheap, global): previous/next RR,
  a local reference RR (median of the surrounding beats), prematurity and the
  compensatory ratio.
* Morphology features per signal chunk, relative to the record's own dominant
  beat (an unsupervised template: the median of the regular-RR beats of the
  chunk that look like each other). No label of the record is used.

Beats are resampled on a fixed millisecond grid, so the features do not depend
on the sampling rate (128 Hz SVDB, 250 Hz Holter, 360 Hz MIT-BIH).
"""

from __future__ import annotations

import numpy as np
from scipy.signal import butter, sosfiltfilt

#: Grid step of the resampled beat windows (ms).
GRID_MS = 4.0
#: Beat window on the grid, relative to the R peak (ms): P wave .. end of T.
WIN_START_MS = -300.0
WIN_STOP_MS = 400.0
#: Sub-windows (ms, relative to R) used for the features.
QRS_MS = (-100.0, 152.0)
P_MS = (-280.0, -80.0)
T_MS = (152.0, 400.0)
#: Alignment search: shifts of up to this many grid steps either way (±24 ms).
MAX_SHIFT = 6
#: Beats per side for the local reference RR (median).
LOCAL_RR_HALF = 10
#: Minimum number of template candidates in a chunk before falling back to the previous template.
MIN_TEMPLATE_BEATS = 12
#: At most this many candidate beats enter a chunk's template median.
TEMPLATE_MAX_BEATS = 240

_OFFSETS_MS = np.arange(WIN_START_MS - MAX_SHIFT * GRID_MS, WIN_STOP_MS + (MAX_SHIFT + 0.5) * GRID_MS, GRID_MS)
_N_WIN = int(round((WIN_STOP_MS - WIN_START_MS) / GRID_MS)) + 1


def _grid_slice(lo_ms: float, hi_ms: float) -> slice:
    return slice(int(round((lo_ms - WIN_START_MS) / GRID_MS)), int(round((hi_ms - WIN_START_MS) / GRID_MS)) + 1)


QRS_SL = _grid_slice(*QRS_MS)
P_SL = _grid_slice(*P_MS)
T_SL = _grid_slice(*T_MS)

#: Names of the per-beat morphology features computed per chunk (all float64).
MORPH_NAMES = (
    "corr_qrs_max", "corr_qrs_mean", "corr_qrs_min",
    "corr_full_mean", "corr_t_mean",
    "rmsd_qrs_mean", "rmsd_qrs_min",
    "amp_ratio_mean", "amp_ratio_max",
    "slope_ratio_mean", "polarity_agree",
    "qrs_width_ms", "template_width_ms", "width_ratio",
    "p_corr", "p_amp_ratio", "pre_energy_ratio",
    "area_ratio_mean", "noise_ratio",
    "shift_ms", "n_leads_used",
)


def rr_features(beat_samples: np.ndarray, fs_hz: float) -> dict[str, np.ndarray]:
    """RR features of every beat (ms and ratios, float64).

    ``rr_prev_ms`` of the first beat and ``rr_next_ms`` of the last beat are
    copied from their neighbour; ``local_rr_ms`` is the median RR over about
    ``2 * LOCAL_RR_HALF`` surrounding intervals.
    """
    n = beat_samples.size
    out = {k: np.full(n, np.nan) for k in ("rr_prev_ms", "rr_next_ms", "local_rr_ms", "prematurity", "compensatory_ratio", "rr_next_ratio", "rr_change")}
    if n < 2:
        for k in ("rr_prev_ms", "rr_next_ms", "local_rr_ms"):
            out[k][:] = 1000.0
        out["prematurity"][:] = 0.0
        out["compensatory_ratio"][:] = 1.0
        out["rr_next_ratio"][:] = 1.0
        out["rr_change"][:] = 1.0
        return out
    rr = np.diff(beat_samples.astype(np.float64)) * (1000.0 / fs_hz)
    rr = np.clip(rr, 1.0, None)
    rr_prev = np.concatenate([[rr[0]], rr])
    rr_next = np.concatenate([rr, [rr[-1]]])
    h = LOCAL_RR_HALF
    padded = np.pad(rr, (h, h), mode="reflect" if rr.size > h else "edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * h + 1)
    local_rr = np.median(windows, axis=1)  # one per interval
    local = np.concatenate([[local_rr[0]], local_rr])  # per beat: around its preceding interval
    rr_prev2 = np.concatenate([[rr_prev[0]], rr_prev[:-1]])
    out["rr_prev_ms"] = rr_prev
    out["rr_next_ms"] = rr_next
    out["local_rr_ms"] = local
    out["prematurity"] = 1.0 - rr_prev / local
    out["compensatory_ratio"] = (rr_prev + rr_next) / (2.0 * local)
    out["rr_next_ratio"] = rr_next / local
    out["rr_change"] = rr_prev / rr_prev2
    return out


def bandpass(signal_mv: np.ndarray, fs_hz: float) -> tuple[np.ndarray, np.ndarray]:
    """Band-pass 0.5-40 Hz each lead; NaNs are zero-filled first.

    Returns ``(filtered float32 (n, n_leads), bad bool (n, n_leads))`` where
    ``bad`` marks samples that were not finite.
    """
    x = np.asarray(signal_mv, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    bad = ~np.isfinite(x)
    if bad.any():
        x = np.where(bad, 0.0, x)
    hi = min(40.0, 0.45 * fs_hz)
    sos = butter(2, [0.5, hi], btype="bandpass", fs=fs_hz, output="sos")
    if x.shape[0] > 3 * 13:
        x = sosfiltfilt(sos, x, axis=0)
    else:
        x = x - np.median(x, axis=0)
    return x.astype(np.float32), bad


def extract_windows(filtered: np.ndarray, bad: np.ndarray, positions: np.ndarray, fs_hz: float) -> tuple[np.ndarray, np.ndarray]:
    """Beat windows on the ms grid by linear interpolation.

    Args:
        filtered: (n, n_leads) band-passed signal of a chunk.
        bad: (n, n_leads) mask of non-finite input samples.
        positions: beat positions as sample indices into ``filtered`` (int).
        fs_hz: sampling rate (Hz).

    Returns:
        ``(windows (n_beats, n_leads, n_grid) float32, lead_ok (n_beats, n_leads) bool)``;
        a lead is not ok for a beat when its window touches a bad sample or the
        chunk edge.
    """
    n, n_leads = filtered.shape
    idx = positions[:, None].astype(np.float64) + _OFFSETS_MS[None, :] * (fs_hz / 1000.0)
    lo = np.floor(idx).astype(np.int64)
    frac = (idx - lo).astype(np.float32)
    inside = (lo >= 0) & (lo + 1 < n)
    lo_c = np.clip(lo, 0, n - 2) if n >= 2 else np.zeros_like(lo)
    hi_c = lo_c + 1 if n >= 2 else lo_c
    a = filtered[lo_c]  # (nb, ngrid, L)
    b = filtered[hi_c]
    w = a + (b - a) * frac[:, :, None]
    lead_ok = np.ones((positions.size, n_leads), dtype=bool)
    lead_ok &= inside.all(axis=1)[:, None]
    if bad.any():
        lead_ok &= ~(bad[lo_c] | bad[hi_c]).any(axis=1)
    return np.ascontiguousarray(np.transpose(w, (0, 2, 1))), lead_ok


def _center(x: np.ndarray) -> np.ndarray:
    return x - x.mean(axis=-1, keepdims=True)


def _corr(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Pearson correlation along the last axis; ``t`` broadcasts against ``x``."""
    xc, tc = _center(x), _center(t)
    num = (xc * tc).sum(-1)
    den = np.sqrt((xc * xc).sum(-1) * (tc * tc).sum(-1)) + 1e-9
    return num / den


def dominant_template(win: np.ndarray, ok: np.ndarray, candidates: np.ndarray) -> np.ndarray | None:
    """Median beat of the dominant morphology among ``candidates`` (unsupervised).

    Two passes: the median of the candidate beats, then the median of the
    candidates that correlate best with it (QRS window, averaged over leads).
    Returns (n_leads, n_grid) or None when too few usable beats.
    """
    core = win[:, :, MAX_SHIFT:MAX_SHIFT + _N_WIN]
    use = candidates & ok.any(axis=1)
    if np.count_nonzero(use) < MIN_TEMPLATE_BEATS:
        return None
    idx = np.flatnonzero(use)
    if idx.size > TEMPLATE_MAX_BEATS:  # evenly spaced subset: bounded cost, same median in expectation
        idx = idx[np.linspace(0, idx.size - 1, TEMPLATE_MAX_BEATS).astype(np.int64)]
    sel = core[idx]
    okw = ok[idx]
    tmpl = np.median(sel, axis=0)
    c = _corr(sel[:, :, QRS_SL], tmpl[None, :, QRS_SL])  # (k, L)
    score = np.where(okw, c, np.nan)
    score = np.nanmean(np.where(okw.any(axis=1)[:, None], score, 0.0), axis=1)
    thr = max(np.quantile(score, 0.5), 0.0)
    keep = score >= thr
    if np.count_nonzero(keep) >= MIN_TEMPLATE_BEATS // 2:
        tmpl = np.median(sel[keep], axis=0)
    return tmpl.astype(np.float32)


def _width_ms(qrs: np.ndarray, scale: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Energy-based QRS duration (ms): 5-95 % span of the summed squared slope.

    ``qrs`` (nb, L, W), ``scale`` (L,) per-lead amplitude normaliser.
    """
    d = np.diff(qrs, axis=-1) / scale[None, :, None]
    e = (d * d * ok[:, :, None]).sum(axis=1)  # (nb, W-1)
    cum = np.cumsum(e, axis=1)
    tot = cum[:, -1:] + 1e-12
    cum = cum / tot
    lo = (cum < 0.05).sum(axis=1)
    hi = (cum < 0.95).sum(axis=1)
    return (hi - lo + 1) * GRID_MS


def morphology_features(
    win: np.ndarray, ok: np.ndarray, tmpl: np.ndarray, tmpl_ok: np.ndarray
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Morphology features of beats against the dominant template.

    Args:
        win: (nb, L, n_grid + 2 * MAX_SHIFT) beat windows.
        ok: (nb, L) usable lead per beat.
        tmpl: (L, n_grid) template.
        tmpl_ok: (L,) leads whose template is usable (not flat).

    Returns:
        ``(features, aligned_qrs, ok)``: dict of ``MORPH_NAMES`` -> (nb,) float64 arrays, the
        aligned QRS windows (nb, L, W) and the per-lead weights used (nb, L).
    """
    nb = win.shape[0]
    ok = ok & tmpl_ok[None, :]
    t_qrs = tmpl[:, QRS_SL]
    t_ptp = np.ptp(t_qrs, axis=-1) + 1e-6  # (L,)
    # leads count in proportion to the template's QRS size: a small lead is mostly noise
    leads = _Leads(ok, ok.astype(np.float64) * t_ptp[None, :])
    aligned, best_k = _align_to_template(win, t_qrs, leads)
    b_qrs = aligned[:, :, QRS_SL]
    b_ptp = np.ptp(b_qrs, axis=-1)
    diff = b_qrs - t_qrs[None]
    rmsd = np.sqrt((diff * diff).mean(-1)) / (np.sqrt((t_qrs * t_qrs).mean(-1))[None] + 1e-6)
    b_slope = np.abs(np.diff(b_qrs, axis=-1)).max(-1) / (b_ptp + 1e-6)
    t_slope = np.abs(np.diff(t_qrs, axis=-1)).max(-1) / t_ptp
    r_idx = int(round(-QRS_MS[0] / GRID_MS))
    polarity = (np.sign(b_qrs[:, :, r_idx]) == np.sign(t_qrs[:, r_idx])[None]).astype(np.float64)
    ones = np.ones_like(t_ptp)
    width = _width_ms(b_qrs, ones, ok)
    t_width = float(_width_ms(t_qrs[None], ones, tmpl_ok[None])[0]) if tmpl_ok.any() else float("nan")
    area = np.abs(_center(b_qrs)).sum(-1) / (np.abs(_center(t_qrs)).sum(-1)[None] + 1e-6)
    amp = b_ptp / t_ptp[None]
    some = leads.n_ok > 0
    return {
        **_correlations(aligned, tmpl, leads),
        "rmsd_qrs_mean": leads.mean(rmsd),
        "rmsd_qrs_min": leads.min(rmsd),
        "amp_ratio_mean": leads.mean(amp),
        "amp_ratio_max": leads.max(amp),
        "slope_ratio_mean": leads.mean(b_slope / (t_slope[None] + 1e-9)),
        "polarity_agree": leads.mean(polarity),
        "qrs_width_ms": np.where(some, width, np.nan),
        "template_width_ms": np.full(nb, t_width),
        "width_ratio": np.where(some, width / max(t_width, GRID_MS), np.nan),
        **_p_wave_features(aligned, tmpl, leads, t_ptp),
        "area_ratio_mean": leads.mean(area),
        "noise_ratio": leads.mean(_noise_log_ratio(aligned, tmpl, b_ptp, t_ptp)),
        "shift_ms": best_k * GRID_MS,
        "n_leads_used": leads.n_ok,
    }, b_qrs, leads.weight


class _Leads:
    """Per-beat reductions over the usable leads; the mean is weighted by ``weight`` (nb, L)."""

    def __init__(self, ok: np.ndarray, weight: np.ndarray):
        self.ok, self.weight = ok, weight
        self.n_ok = ok.astype(np.float64).sum(axis=1)
        self.weight_sum = np.maximum(weight.sum(axis=1), 1e-9)

    def mean(self, x: np.ndarray) -> np.ndarray:
        return np.where(self.n_ok > 0, (x * self.weight).sum(axis=1) / self.weight_sum, np.nan)

    def max(self, x: np.ndarray) -> np.ndarray:
        return np.where(self.n_ok > 0, np.where(self.ok, x, -np.inf).max(axis=1), np.nan)

    def min(self, x: np.ndarray) -> np.ndarray:
        return np.where(self.n_ok > 0, np.where(self.ok, x, np.inf).min(axis=1), np.nan)


def _align_to_template(win: np.ndarray, t_qrs: np.ndarray, leads: _Leads) -> tuple[np.ndarray, np.ndarray]:
    """Beat windows (nb, L, n_grid) shifted by up to ``MAX_SHIFT`` grid steps to the best mean QRS correlation with
    the template's QRS ``t_qrs`` (L, W), and the shift of each beat (grid steps).

    All shifts are scored at once on a sliding view: corr = <seg, t_n> / |seg - mean(seg)|, with t_n the centred,
    unit-norm template; a small penalty per step prefers the unshifted beat among equals.
    """
    nb, n_leads, _ = win.shape
    w_len = QRS_SL.stop - QRS_SL.start
    t_c = _center(t_qrs)
    t_n = t_c / (np.sqrt((t_c * t_c).sum(-1, keepdims=True)) + 1e-9)  # (L, W)
    span = win[:, :, QRS_SL.start: QRS_SL.start + 2 * MAX_SHIFT + w_len]
    views = np.lib.stride_tricks.sliding_window_view(span, w_len, axis=-1)  # (nb, L, n_shift, W)
    num = np.einsum("blsw,lw->bls", views, t_n.astype(views.dtype), optimize=True)
    csum = np.concatenate([np.zeros(span.shape[:2] + (1,), span.dtype), np.cumsum(span, axis=-1, dtype=np.float64)], axis=-1)
    csq = np.concatenate([np.zeros(span.shape[:2] + (1,), span.dtype), np.cumsum(span.astype(np.float64) ** 2, axis=-1)], axis=-1)
    s1 = csum[:, :, w_len:] - csum[:, :, :-w_len]
    s2 = csq[:, :, w_len:] - csq[:, :, :-w_len]
    var = np.maximum(s2 - s1 * s1 / w_len, 0.0)
    corr_all = num / (np.sqrt(var) + 1e-9)  # (nb, L, n_shift)
    shifts = np.arange(-MAX_SHIFT, MAX_SHIFT + 1)
    mean_c = (corr_all * leads.weight[:, :, None]).sum(axis=1) / leads.weight_sum[:, None] - 0.002 * np.abs(shifts)[None, :]
    best_k = shifts[mean_c.argmax(axis=1)] if nb else np.zeros(0, dtype=np.int64)
    gather = MAX_SHIFT + best_k[:, None] + np.arange(_N_WIN)[None, :]
    aligned = np.take_along_axis(win, np.broadcast_to(gather[:, None, :], (nb, n_leads, _N_WIN)), axis=2)
    return aligned, best_k


def _correlations(aligned: np.ndarray, tmpl: np.ndarray, leads: _Leads) -> dict[str, np.ndarray]:
    """Correlation with the template: QRS (max, mean, min over leads), QRS to end of T, and T alone."""
    c_qrs = _corr(aligned[:, :, QRS_SL], tmpl[None, :, QRS_SL])
    return {
        "corr_qrs_max": leads.max(c_qrs),
        "corr_qrs_mean": leads.mean(c_qrs),
        "corr_qrs_min": leads.min(c_qrs),
        "corr_full_mean": leads.mean(_corr(aligned[:, :, QRS_SL.start:], tmpl[None, :, QRS_SL.start:])),
        "corr_t_mean": leads.mean(_corr(aligned[:, :, T_SL], tmpl[None, :, T_SL])),
    }


def _p_wave_features(aligned: np.ndarray, tmpl: np.ndarray, leads: _Leads, t_ptp: np.ndarray) -> dict[str, np.ndarray]:
    """Correlation, amplitude and energy of the pre-QRS segment against the template's.

    Correlation and amplitude are weighted per lead by how visible P is in the template (P size / QRS size).
    """
    b_p = aligned[:, :, P_SL]
    t_p = tmpl[:, P_SL]
    t_p_ptp = np.ptp(t_p, axis=-1) + 1e-6
    p_w = leads.ok.astype(np.float64) * (t_p_ptp / t_ptp)[None]
    p_wsum = p_w.sum(axis=1) + 1e-9
    some = leads.n_ok > 0
    p_c = _corr(b_p, t_p[None])
    p_amp = np.ptp(b_p, axis=-1) / t_p_ptp[None]
    pre_energy = np.sqrt((_center(b_p) ** 2).mean(-1)) / (np.sqrt((_center(t_p) ** 2).mean(-1))[None] + 1e-6)
    return {
        "p_corr": np.where(some, (p_c * p_w).sum(axis=1) / p_wsum, np.nan),
        "p_amp_ratio": np.where(some, (p_amp * p_w).sum(axis=1) / p_wsum, np.nan),
        "pre_energy_ratio": leads.mean(pre_energy),
    }


def _noise_log_ratio(aligned: np.ndarray, tmpl: np.ndarray, b_ptp: np.ndarray, t_ptp: np.ndarray) -> np.ndarray:
    """Log ratio of the window's high-frequency content (second difference, relative to the QRS size) to the
    template's own, per beat and lead (a median template is nearly noise-free, hence the log)."""
    hf = np.sqrt((np.diff(aligned, n=2, axis=-1) ** 2).mean(-1)) / (b_ptp + 1e-6)
    t_hf = np.sqrt((np.diff(tmpl, n=2, axis=-1) ** 2).mean(-1)) / t_ptp
    return np.log((hf + 1e-6) / (t_hf[None] + 1e-6))


#: Per-beat values averaged over a beat's look-alikes in its chunk ("cluster" features).
CLUSTER_OF = ("prematurity", "compensatory_ratio", "width_ratio", "corr_qrs_mean", "amp_ratio_mean", "noise_ratio")
#: Two beats look alike when their mean per-lead QRS correlation is at least this.
CLUSTER_CORR = 0.9
#: At most this many reference beats per chunk for the look-alike search (cost bound).
CLUSTER_MAX_REF = 300
CLUSTER_NAMES = ("sim_frac",) + tuple(f"clu_{name}" for name in CLUSTER_OF)


def cluster_features(b_qrs: np.ndarray, lead_w: np.ndarray, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Unsupervised look-alike features of the beats of one chunk.

    Each beat is compared with up to ``CLUSTER_MAX_REF`` beats of the same chunk;
    ``sim_frac`` is the fraction of them it looks like, and ``clu_<name>`` is the
    mean of ``values[name]`` over its look-alikes (its own value when it has none).
    A noisy normal beat has normal-looking look-alikes; an ectopic beat has ectopic ones.
    """
    nb = b_qrs.shape[0]
    z = _center(b_qrs.astype(np.float32))
    z /= np.sqrt((z * z).sum(-1, keepdims=True)) + 1e-6
    z *= np.sqrt(lead_w.astype(np.float32))[:, :, None]
    w_sum = np.maximum(lead_w.sum(axis=1), 1e-9).astype(np.float32)
    flat = z.reshape(nb, -1)
    ref = np.unique(np.linspace(0, nb - 1, num=min(nb, CLUSTER_MAX_REF)).astype(np.int64)) if nb else np.zeros(0, np.int64)
    sim = (flat @ flat[ref].T) / np.sqrt(w_sum[:, None] * w_sum[ref][None, :])
    alike = (sim >= CLUSTER_CORR).astype(np.float32)
    alike[ref, np.arange(ref.size)] = 0.0  # not oneself
    count = alike.sum(axis=1)
    out = {"sim_frac": count / max(ref.size, 1)}
    for name in CLUSTER_OF:
        v = np.nan_to_num(values[name].astype(np.float32))
        mean = (alike @ v[ref]) / np.maximum(count, 1.0)
        out[f"clu_{name}"] = np.where(count > 0, mean, v).astype(np.float64)
    return out
