"""Beat classes (N, S, V, Q) on short records: 10 s 12-lead ECGs with a handful of beats.

The Holter classifier (:mod:`ecgtrace.tools.classify`) learns its dominant
template from at least a dozen regular beats per chunk and feeds a forest
trained on half-hour records; on a 10 s record with 8-15 beats it has no
template and every beat came out ``Q``. Here the dominant morphology is found
among the record's own beats, all leads at once:

1. Each beat's QRS (-100 .. +152 ms around the R peak, 4 ms grid, 0.5-40 Hz
   band-pass) is read on every lead where it lies inside the record, is finite
   and not flat.
2. Beats are compared pairwise: the mean over common leads (weighted by QRS
   size) of the best correlation within +-24 ms of shift.
3. The dominant group is the largest group of look-alikes (similarity >=
   ``SIMILAR``); ties go to the group whose beats are least premature and
   narrowest. Its median beat is the template.
4. Per beat against the template: correlation, QRS width ratio (energy-based
   width, :func:`ecgtrace.tools._classify_features._width_ms`), prematurity
   (RR against the median RR of the record) and P-wave evidence.
5. ``V``: different from the template and wider (or very different); ``S``:
   like the template but premature (outside AF); ``N`` otherwise. AF comes
   first (:func:`ecgtrace.tools.af.detect_af` with short-record settings), and
   inside AF no beat is ``S``.
6. ``Q`` only where the beat cannot be read: inside an artifact span, QRS cut
   by the record edge, or no usable lead; the reason is in ``features["q_reason"]``
   and counted in the provenance.

Thresholds were set on 10 s windows of half of the shared MIT-BIH records
(``benchmarks/classify_short.py`` lists the split and reports the other half).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ecgtrace.errors import EcgTraceError
from ecgtrace.tools import _classify_features as cf

METHOD = "short-record-template-rules"
VERSION = "1"

#: Records up to this long (s) are classified here rather than by the Holter forest.
SHORT_RECORD_S = 60.0
#: At most this many beats (the pairwise comparison grows with the square).
SHORT_MAX_BEATS = 200
#: QRS window (ms relative to the R peak) and the shift search either way (grid steps).
QRS_MS = cf.QRS_MS
P_MS = cf.P_MS
MAX_SHIFT = cf.MAX_SHIFT
GRID_MS = cf.GRID_MS
#: The QRS core that must lie inside the record for a beat to be readable (ms).
CORE_MS = (-60.0, 100.0)
#: Two beats look alike at this mean per-lead QRS correlation.
SIMILAR = 0.85
#: Decision thresholds (see the module docstring; set on the tuning half of MIT-BIH, 10 s windows).
RULES: dict[str, float] = {
    "v_corr_max": 0.80,  # V: correlation with the template below this ...
    "v_width_ratio_min": 1.15,  # ... and QRS at least this much wider
    "v_corr_very_different": 0.50,  # or correlation below this whatever the width
    "v_wide_ratio": 1.45,  # or much wider ...
    "v_wide_corr_max": 0.92,  # ... and not quite the same shape
    "s_prematurity_min": 0.15,  # S: RR at least 15 % shorter than the record's median RR ...
    "s_corr_min": 0.80,  # ... with the dominant QRS shape
    "p_corr_min": 0.5,  # P wave present: pre-QRS segment correlates with the template's ...
    "p_amp_min": 0.4,  # ... at a similar size
    "p_amp_max": 2.5,
}
#: detect_af settings for a 10 s record (the Holter defaults need 30 s episodes and 32-beat windows).
SHORT_AF_PARAMS: dict[str, Any] = {"min_episode_s": 0.0, "merge_gap_s": 0.0, "window_beats": 12}
FLAT_MV = 0.02

_GRID = np.arange(QRS_MS[0] - MAX_SHIFT * GRID_MS, QRS_MS[1] + (MAX_SHIFT + 0.5) * GRID_MS, GRID_MS)
_P_GRID = np.arange(P_MS[0], P_MS[1] + 0.5 * GRID_MS, GRID_MS)
_W = int(round((QRS_MS[1] - QRS_MS[0]) / GRID_MS)) + 1


def is_short(n_samples: int, fs_hz: float, n_beats: int) -> bool:
    """True when a record is short enough for this classifier (duration and beat count)."""
    return 0 < n_beats <= SHORT_MAX_BEATS and n_samples / float(fs_hz) <= SHORT_RECORD_S


def _windows(x: np.ndarray, beats: np.ndarray, fs_hz: float, grid_ms: np.ndarray) -> np.ndarray:
    """(n_beats, n_leads, len(grid)) signal on a ms grid around each beat (edge values held)."""
    t = np.arange(x.shape[0], dtype=np.float64)
    idx = beats[:, None].astype(np.float64) + grid_ms[None, :] * fs_hz / 1000.0
    return np.stack([np.stack([np.interp(row, t, x[:, j]) for j in range(x.shape[1])]) for row in idx]) if beats.size else np.zeros((0, x.shape[1], grid_ms.size))


def _lead_ok(x: np.ndarray, bad: np.ndarray, beats: np.ndarray, fs_hz: float, usable: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ok (n_beats, n_leads), cut (n_beats,))``: readable QRS core per lead; core cut by the record edge."""
    n = x.shape[0]
    lo = beats + int(np.floor(CORE_MS[0] * fs_hz / 1000.0))
    hi = beats + int(np.ceil(CORE_MS[1] * fs_hz / 1000.0))
    cut = (lo < 0) | (hi >= n)
    ok = np.zeros((beats.size, x.shape[1]), dtype=bool)
    for k in range(beats.size):
        a, b = max(int(lo[k]), 0), min(int(hi[k]) + 1, n)
        if cut[k] or b - a < 3:
            continue
        seg_bad = bad[a:b].any(axis=0)
        ptp = np.ptp(x[a:b], axis=0)
        ok[k] = usable & ~seg_bad & (ptp > FLAT_MV)
    return ok, cut


def _best_corr(win: np.ndarray, tmpl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Best correlation per lead over shifts (nb, L, n_shift -> nb, L) and the shift (grid steps) chosen per beat."""
    views = np.lib.stride_tricks.sliding_window_view(win, _W, axis=-1)  # (nb, L, n_shift, W)
    t = tmpl - tmpl.mean(-1, keepdims=True)
    v = views - views.mean(-1, keepdims=True)
    num = (v * t[None, :, None, :]).sum(-1)
    den = np.sqrt((v * v).sum(-1) * (t * t).sum(-1)[None, :, None]) + 1e-9
    return num / den, np.arange(-MAX_SHIFT, MAX_SHIFT + 1)


def _similarity(win: np.ndarray, ok: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """(nb, nb) mean per-lead best-shift QRS correlation over the leads both beats can use."""
    nb = win.shape[0]
    core = win[:, :, MAX_SHIFT : MAX_SHIFT + _W]
    sim = np.full((nb, nb), np.nan)
    for i in range(nb):
        c, shifts = _best_corr(win, core[i])  # every beat against beat i
        w = (ok & ok[i][None, :]) * weight[None, :]
        score = (c * w[:, :, None]).sum(1) / np.maximum(w.sum(1), 1e-9)[:, None] - 0.002 * np.abs(shifts)[None, :]
        sim[i] = np.where(w.sum(1) > 0, score.max(axis=1), np.nan)
    return np.fmin(sim, sim.T)


def _dominant_group(sim: np.ndarray, readable: np.ndarray, prematurity: np.ndarray, width: np.ndarray) -> np.ndarray:
    """Indices of the dominant look-alike group among readable beats."""
    idx = np.flatnonzero(readable)
    if idx.size <= 2:
        return idx
    best, best_key = idx[:1], None
    for i in idx:
        group = idx[np.nan_to_num(sim[i, idx], nan=-1.0) >= SIMILAR]
        key = (group.size, -float(np.mean(np.clip(prematurity[group], 0, None))), -float(np.median(width[group])))
        if best_key is None or key > best_key:
            best, best_key = group, key
    return best


def _align(win: np.ndarray, tmpl: np.ndarray, ok: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each beat's QRS at its best shift against the template, and that shift (grid steps)."""
    c, shifts = _best_corr(win, tmpl)
    w = ok * weight[None, :]
    score = (c * w[:, :, None]).sum(1) / np.maximum(w.sum(1), 1e-9)[:, None] - 0.002 * np.abs(shifts)[None, :]
    k = score.argmax(axis=1) if win.shape[0] else np.zeros(0, dtype=np.int64)
    gather = (MAX_SHIFT + shifts[k])[:, None] + np.arange(_W)[None, :]
    aligned = np.take_along_axis(win, np.broadcast_to(gather[:, None, :], win.shape[:2] + (_W,)), axis=2)
    return aligned, shifts[k]


def _corr_rows(a: np.ndarray, t: np.ndarray) -> np.ndarray:
    a = a - a.mean(-1, keepdims=True)
    t = t - t.mean(-1, keepdims=True)
    return (a * t).sum(-1) / (np.sqrt((a * a).sum(-1) * (t * t).sum(-1)) + 1e-9)


def _weighted(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    s = w.sum(1)
    return np.where(s > 0, (np.nan_to_num(x) * w).sum(1) / np.maximum(s, 1e-9), np.nan)


def short_features(signal_mv: np.ndarray, fs_hz: float, beat_samples: np.ndarray, lead_usable: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per-beat features against the record's own dominant beat (see the module docstring).

    Returns float/bool arrays: the RR features of :func:`ecgtrace.tools._classify_features.rr_features`,
    ``prematurity_record`` (1 - RR / median RR of the record), ``template_corr_mean``,
    ``template_corr_max``, ``qrs_width_ms``, ``template_width_ms``, ``width_ratio``,
    ``p_corr``, ``p_amp_ratio``, ``n_leads_used``, ``in_dominant_group``, ``qrs_cut``.
    """
    x = np.asarray(signal_mv, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    beats = np.asarray(beat_samples, dtype=np.int64)
    nb, n_leads = beats.size, x.shape[1]
    usable = np.ones(n_leads, dtype=bool) if lead_usable is None else np.asarray(lead_usable, dtype=bool)
    filtered, bad = cf.bandpass(x, fs_hz)
    filtered = filtered.astype(np.float64)
    out: dict[str, np.ndarray] = dict(cf.rr_features(beats, fs_hz))
    ok, cut = _lead_ok(filtered, bad, beats, fs_hz, usable)
    win = _windows(filtered, beats, fs_hz, _GRID)
    rr = np.diff(beats) * 1000.0 / fs_hz
    med_rr = float(np.median(rr)) if rr.size else 1000.0
    out["prematurity_record"] = 1.0 - out["rr_prev_ms"] / med_rr if nb > 1 else np.zeros(nb)
    if nb > 1:
        out["prematurity_record"][0] = 0.0  # the first beat has no preceding RR in the record
    readable = ok.any(axis=1)
    core = win[:, :, MAX_SHIFT : MAX_SHIFT + _W]
    size = np.array([np.median(np.ptp(core[ok[:, j], j], axis=-1)) if ok[:, j].any() else 0.0 for j in range(n_leads)])
    weight = size + 1e-6
    ones = np.ones(n_leads)
    width = cf._width_ms(core.astype(np.float32), ones.astype(np.float32), ok) if nb else np.zeros(0)
    sim = _similarity(win, ok, weight) if nb else np.zeros((0, 0))
    group = _dominant_group(sim, readable, out["prematurity_record"], width)
    out["in_dominant_group"] = np.isin(np.arange(nb), group)
    if group.size:
        aligned_group, _ = _align(win[group], core[group[0]], ok[group], weight)
        tmpl = np.median(aligned_group, axis=0)
    else:
        tmpl = np.zeros((n_leads, _W))
    tmpl_ok = np.ptp(tmpl, axis=-1) > FLAT_MV
    aligned, shift = _align(win, tmpl, ok & tmpl_ok[None, :], weight) if nb else (core, np.zeros(0, dtype=np.int64))
    w = (ok & tmpl_ok[None, :]) * weight[None, :]
    corr = _corr_rows(aligned, tmpl[None])
    out["template_corr_mean"] = _weighted(corr, w)
    out["template_corr_max"] = np.where(w.sum(1) > 0, np.where(w > 0, corr, -np.inf).max(axis=1), np.nan) if nb else np.zeros(0)
    t_width = float(cf._width_ms(tmpl[None].astype(np.float32), ones.astype(np.float32), tmpl_ok[None])[0]) if tmpl_ok.any() else float("nan")
    out["qrs_width_ms"] = np.where(readable, cf._width_ms(aligned.astype(np.float32), ones.astype(np.float32), ok & tmpl_ok[None, :]), np.nan) if nb else np.zeros(0)
    out["template_width_ms"] = np.full(nb, t_width)
    out["width_ratio"] = out["qrs_width_ms"] / max(t_width, GRID_MS) if np.isfinite(t_width) else np.full(nb, np.nan)
    out["n_leads_used"] = ok.sum(axis=1).astype(np.float64)
    out["qrs_cut"] = cut
    out.update(_p_evidence(filtered, beats, shift, fs_hz, ok, group, weight))
    return out


def _p_evidence(filtered: np.ndarray, beats: np.ndarray, shift: np.ndarray, fs_hz: float, ok: np.ndarray, group: np.ndarray, weight: np.ndarray) -> dict[str, np.ndarray]:
    """Correlation and size of each beat's pre-QRS segment against the dominant beats' P segment."""
    nb = beats.size
    out = {"p_corr": np.full(nb, np.nan), "p_amp_ratio": np.full(nb, np.nan)}
    lo = beats + int(np.floor(P_MS[0] * fs_hz / 1000.0))
    inside = lo >= 0
    if not nb or not inside[group].any() if group.size else True:
        return out
    centres = beats + np.round(shift * GRID_MS * fs_hz / 1000.0).astype(np.int64)
    seg = _windows(filtered, centres, fs_hz, _P_GRID)
    use = group[inside[group]]
    t_p = np.median(seg[use], axis=0)
    t_ptp = np.ptp(t_p, axis=-1) + 1e-6
    w = ok * (t_ptp / np.maximum(weight, 1e-6))[None, :]
    out["p_corr"] = np.where(inside, _weighted(_corr_rows(seg, t_p[None]), w), np.nan)
    out["p_amp_ratio"] = np.where(inside, _weighted(np.ptp(seg, axis=-1) / t_ptp[None, :], w), np.nan)
    return out


def decide_short(feats: dict[str, np.ndarray], in_af: np.ndarray, in_artifact: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(classes '<U1', q_reason '<U24')`` from :func:`short_features` (see the module docstring)."""
    r = RULES
    nb = feats["rr_prev_ms"].size
    corr, ratio = feats["template_corr_mean"], feats["width_ratio"]
    with np.errstate(invalid="ignore"):
        v = ((corr < r["v_corr_max"]) & (ratio >= r["v_width_ratio_min"])) | (corr < r["v_corr_very_different"])
        v |= (ratio >= r["v_wide_ratio"]) & (corr < r["v_wide_corr_max"])
        s = ~v & (feats["prematurity_record"] >= r["s_prematurity_min"]) & (corr >= r["s_corr_min"]) & ~in_af
    classes = np.where(v, "V", np.where(s, "S", "N")).astype("<U1")
    reason = np.full(nb, "", dtype="<U24")
    reason[feats["n_leads_used"] <= 0] = "no_usable_lead"
    reason[feats["qrs_cut"]] = "qrs_cut_by_record_edge"
    reason[in_artifact] = "artifact_span"
    classes[reason != ""] = "Q"
    return classes, reason


def p_wave_present(feats: dict[str, np.ndarray]) -> np.ndarray:
    """P wave evidence per beat (bool): pre-QRS segment like the dominant beats' P, at a similar size."""
    r = RULES
    with np.errstate(invalid="ignore"):
        return (feats["p_corr"] >= r["p_corr_min"]) & (feats["p_amp_ratio"] >= r["p_amp_min"]) & (feats["p_amp_ratio"] <= r["p_amp_max"])


def classify_short_array(
    signal_mv: np.ndarray,
    fs_hz: float,
    beat_samples: np.ndarray,
    *,
    lead_usable: np.ndarray | None = None,
    af_mask: np.ndarray | None = None,
    in_artifact: np.ndarray | None = None,
    auto_af: bool = True,
) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, Any]]:
    """Classes, per-beat features and provenance params of a short record held in memory.

    Args:
        signal_mv: (n_samples, n_leads) in mV.
        fs_hz: sampling rate (Hz).
        beat_samples: R peaks (sample indices into ``signal_mv``, increasing).
        lead_usable: leads to use (default: all).
        af_mask: bool per beat (True inside AF); None with ``auto_af`` detects AF here.
        in_artifact: bool per beat inside an artifact span (labelled Q).
    """
    from ecgtrace.tools.af import detect_af

    beats = np.asarray(beat_samples, dtype=np.int64)
    nb = beats.size
    for name, mask in (("af_mask", af_mask), ("artifact mask", in_artifact)):
        if mask is not None and np.shape(mask) != (nb,):
            raise EcgTraceError(f"{name} has {np.size(mask)} entries for {nb} beats")
    feats = short_features(signal_mv, fs_hz, beats, lead_usable)
    art = np.zeros(nb, dtype=bool) if in_artifact is None else np.asarray(in_artifact, dtype=bool)
    p_wave = p_wave_present(feats)
    if af_mask is not None:
        in_af, af_source = np.asarray(af_mask, dtype=bool), "given"
    elif auto_af and nb > 2:
        provisional, _ = decide_short(feats, np.zeros(nb, dtype=bool), art)
        provisional = np.where(provisional == "S", "N", provisional)  # S would veto AF (circular)
        known = np.isfinite(feats["p_corr"])
        pw = np.where(known, p_wave.astype(np.float64), np.nan)
        in_af = np.asarray(detect_af(beats, fs_hz, beat_classes=provisional, p_wave_present=pw, **SHORT_AF_PARAMS).beat_mask, dtype=bool)
        af_source = "tools.af.detect_af (short-record settings)"
    else:
        in_af, af_source = np.zeros(nb, dtype=bool), "none"
    classes, reason = decide_short(feats, in_af, art)
    feats["p_wave_present"] = p_wave
    feats["in_af"] = in_af
    feats["in_artifact"] = art
    feats["q_reason"] = reason
    reasons = {str(k): int(v) for k, v in zip(*np.unique(reason[reason != ""], return_counts=True))}
    params = {
        "classifier": METHOD,
        "classifier_version": VERSION,
        "af_mask": af_source,
        "rules": dict(RULES),
        "similar": SIMILAR,
        "n_dominant": int(feats["in_dominant_group"].sum()),
        "q_reasons": reasons,
    }
    return classes, feats, params

