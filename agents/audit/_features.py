"""Features of one window for the diagnosis graphs: beats + rhythm + delineation.

The beat table (R peaks and AAMI classes) comes from reference annotations when
the record has them, else from the project's detectors; intervals, amplitudes,
QRS morphology and P waves come from :func:`ecgtrace.tools.measure.measure_window`
on the window itself. Every name produced here is declared in
:data:`ecgtrace.rubrics.diagnosis_schema.FEATURES` (same units); a value that
cannot be measured is None, never a guess. Per-lead values are in
:mod:`ecgtrace.agents.audit._features_leads`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ecgtrace.agents.audit._features_leads import (
    MORPHOLOGY_FLAGS, MORPHOLOGY_VALUES, P_PR_TOLERANCE_MS, BeatView, amplitudes_calibrated, beat_lead_values, drop_clipped, drop_small_qrs_widths, drop_uncalibrated,
    lead_features, median, twelve_lead,
)
from ecgtrace.agents.audit._pacing import paced_beats, unit_peak_to_peak
from ecgtrace.jsonio import plain_json
from ecgtrace.tools.clipping import clipped_leads
from ecgtrace.tools.measure import WindowMeasurements, measure_window
from ecgtrace.tools.records import SignalWindow

FEATURES_VERSION = "9"  # 9: measurements by the wave net (measure version 7); a pacing spike may lie 40 ms before the QRS onset;
# 8: a clipped lead (tools.clipping) gives no per-lead feature;
# 7: 7: paced_beat_pct also on records without mV (LUDB), each lead read at 1 mV peak to peak;
# 6: paced_beat_pct from pacing spikes on the signal where no reference symbols exist
PREMATURE_RATIO = 0.85  # RR < 85 % of the reference RR ...
REFERENCE_RRS = 5  # ... the median of the (up to) 5 preceding RR intervals
WIDE_QRS_MS = 120.0
NON_SINUS = ("V", "F", "Q")


@dataclass(frozen=True)
class BeatTable:
    """R peaks (absolute samples) with AAMI classes, original symbols when known, and provenance."""

    samples: np.ndarray
    classes: np.ndarray
    symbols: np.ndarray | None
    provenance: dict[str, Any]
    classes_known: bool = True  # False: R peaks only (classes read as N, class-based features left out)


@dataclass
class WindowFeatures:
    """The feature dict (plain JSON) plus per-beat facts the grounding questions need."""

    features: dict[str, Any]
    beats: list[dict[str, Any]] = field(default_factory=list)
    measure_provenance: dict[str, Any] = field(default_factory=dict)


@dataclass
class Rhythm:
    """RR facts of the window's beats (ms; premature: RR < PREMATURE_RATIO x the preceding median RR)."""

    samples: np.ndarray
    classes: list[str]
    rr_ms: np.ndarray  # RR before each beat (from the beat before the window for the first)
    premature: np.ndarray  # bool, only where a reference RR exists (see early_against_rhythm)
    in_rr_ms: np.ndarray  # RR between beats both inside the window


def _longest_run(classes: list[str], cls: str) -> tuple[int, int]:
    best, best_start, run = 0, -1, 0
    for k, c in enumerate(classes):
        run = run + 1 if c == cls else 0
        if run > best:
            best, best_start = run, k - run + 1
    return best, best_start


def _pattern_cycles(classes: list[str], gap: int) -> int:
    """Longest chain of V beats each separated from the next by exactly ``gap`` non-V beats.

    ``gap=1`` is bigeminy (N V N V ...), ``gap=2`` trigeminy (N N V N N V ...);
    a chain of one V needs a non-V beat before it to count as a cycle.
    """
    v_pos = [k for k, c in enumerate(classes) if c == "V"]
    best = run = 0
    for i, k in enumerate(v_pos):
        if i > 0 and k - v_pos[i - 1] == gap + 1:
            run += 1
        else:
            run = 1 if k >= gap and all(c != "V" for c in classes[k - gap : k]) else 0
        best = max(best, run)
    return best


def _rate_bpm(samples: np.ndarray, fs_hz: float) -> float | None:
    if samples.size < 2:
        return None
    return 60.0 * fs_hz / float(np.mean(np.diff(samples)))


def early_against_rhythm(early: np.ndarray, rr_ms: np.ndarray, next_rr_ms: np.ndarray, ref_rr_ms: np.ndarray) -> np.ndarray:
    """Premature beats: early by timing *and* out of step with the rhythm after them.

    Sinus arrhythmia shortens the RR gradually, so a beat can come 15 % before the
    median of the RRs before it with no ectopy at all; a premature beat breaks the
    rhythm instead. An early beat stays premature when the RR after it is a pause
    (at least its own RR / PREMATURE_RATIO), when the beat after it is premature
    too (a run; checked from the last beat back), or when the two RRs around it
    add up to about one reference RR (an interpolated beat). Without a following
    beat, timing alone decides.
    """
    out = early.copy()
    for k in range(early.size - 1, -1, -1):
        if not early[k] or not np.isfinite(next_rr_ms[k]):
            continue
        pause = next_rr_ms[k] >= rr_ms[k] / PREMATURE_RATIO
        run = k + 1 < early.size and bool(out[k + 1])
        interpolated = rr_ms[k] + next_rr_ms[k] <= (2.0 - PREMATURE_RATIO) * ref_rr_ms[k]
        out[k] = bool(pause or run or interpolated)
    return out


def _rhythm(window: SignalWindow, table: BeatTable) -> Rhythm:
    """The window's beats with their RRs, using the beats just before the window for the first RRs."""
    fs = float(window.fs_hz)
    all_samples = np.asarray(table.samples, dtype=np.int64)
    inside = np.flatnonzero((all_samples >= window.sampfrom) & (all_samples < window.sampto))
    samples = all_samples[inside]
    rr_ms = np.full(samples.size, np.nan)
    prev_rr_ms = np.full(samples.size, np.nan)
    for k, idx in enumerate(inside):
        if idx >= 1:
            rr_ms[k] = (all_samples[idx] - all_samples[idx - 1]) * 1000.0 / fs
        if idx >= 2:  # reference RR: median of up to REFERENCE_RRS preceding intervals
            prev = np.diff(all_samples[max(idx - 1 - REFERENCE_RRS, 0) : idx])
            prev_rr_ms[k] = float(np.median(prev)) * 1000.0 / fs
    with np.errstate(invalid="ignore"):
        early = (rr_ms < PREMATURE_RATIO * prev_rr_ms) & np.isfinite(prev_rr_ms)
    next_rr_ms = np.full(samples.size, np.nan)
    for k, idx in enumerate(inside):
        if idx + 1 < all_samples.size:
            next_rr_ms[k] = (all_samples[idx + 1] - all_samples[idx]) * 1000.0 / fs
    premature = early_against_rhythm(early, rr_ms, next_rr_ms, prev_rr_ms)
    return Rhythm(samples=samples, classes=[str(c) for c in np.asarray(table.classes)[inside]], rr_ms=rr_ms, premature=premature,
                  in_rr_ms=np.diff(samples) * 1000.0 / fs)


def _rate_features(feats: dict[str, Any], rh: Rhythm) -> None:
    """Heart rate, longest RR and RR irregularity (intervals whose two beats are not V/F/Q)."""
    feats["hr_bpm"] = 60000.0 / float(np.mean(rh.in_rr_ms))
    feats["max_rr_ms"] = float(np.max(rh.in_rr_ms))
    ok = np.array([c not in NON_SINUS for c in rh.classes])
    valid = [rh.in_rr_ms[k - 1] if ok[k] and ok[k - 1] else None for k in range(1, rh.samples.size)]
    diffs = [abs(valid[k] - valid[k - 1]) for k in range(1, len(valid)) if valid[k] is not None and valid[k - 1] is not None]
    good = [v for v in valid if v is not None]
    if len(diffs) >= 2:
        feats["rr_irregularity_pct"] = 100.0 * float(np.mean(diffs)) / float(np.mean(good))


def _class_features(feats: dict[str, Any], rh: Rhythm, table: BeatTable, fs: float, inside_symbols: list[str] | None) -> None:
    """Counts, runs and patterns of beat classes (None when the beat table has no classes)."""
    classes = rh.classes
    feats["v_beat_count"] = sum(1 for c in classes if c == "V")
    feats["s_beat_count"] = sum(1 for c in classes if c == "S")
    for cls, key in (("V", "v"), ("S", "s")):
        run, start = _longest_run(classes, cls)
        feats[f"longest_{key}_run"] = run
        feats[f"{key}_run_rate_bpm"] = _rate_bpm(rh.samples[start : start + run], fs) if run >= 2 else None
    feats["v_bigeminy_cycles"] = _pattern_cycles(classes, 1)
    feats["v_trigeminy_cycles"] = _pattern_cycles(classes, 2)
    if not table.classes_known:
        for name in _CLASS_FEATURES:
            feats[name] = None
    if inside_symbols is not None:
        feats["paced_beat_pct"] = 100.0 * sum(1 for s in inside_symbols if s == "/") / len(inside_symbols)


@dataclass
class Consensus:
    """Per-beat values agreed over the leads: QRS width, PR, and whether a P wave leads the beat."""

    beat_qrs: np.ndarray
    qrs_by_lead: np.ndarray
    p_by_lead: np.ndarray
    pr_by_lead: np.ndarray
    beat_pr: np.ndarray
    detected_p: np.ndarray
    beat_p: np.ndarray
    median_pr: float | None


def _consensus(view: BeatView) -> Consensus:
    """Median QRS and PR per beat over the leads; a P wave counts where half the leads see it at a consistent PR."""
    leads = view.leads
    qrs_by_lead = np.array([view.values(lead, "qrs_ms") for lead in leads])
    beat_qrs = np.array([median(qrs_by_lead[:, k]) or np.nan for k in range(view.order.size)])
    p_by_lead = np.array([view.p_present(lead) for lead in leads])
    pr_by_lead = np.array([view.values(lead, "pr_ms") for lead in leads])
    pr_masked = np.where(p_by_lead, pr_by_lead, np.nan)
    beat_pr = np.array([median(pr_masked[:, k]) if np.isfinite(pr_masked[:, k]).any() else np.nan for k in range(view.order.size)])
    need = max(1, math.ceil(len(leads) / 2))
    detected_p = (p_by_lead.sum(axis=0) >= need) & np.isfinite(beat_pr)
    median_pr = median(beat_pr[detected_p])
    # a P wave at a consistent PR: random deflections (f waves, noise) rarely line up
    with np.errstate(invalid="ignore"):
        beat_p = detected_p & (np.abs(beat_pr - (median_pr if median_pr is not None else 0.0)) <= P_PR_TOLERANCE_MS)
    return Consensus(beat_qrs, qrs_by_lead, p_by_lead, pr_by_lead, beat_pr, detected_p, beat_p, median_pr)


def _qrs_onsets(view: BeatView) -> np.ndarray:
    """Each beat's QRS onset (absolute sample, median over the leads that mark it; NaN where none does)."""
    marks = np.array([[view.m.delineation.per_lead[lead].points["qrs_on"][j] if j >= 0 else -1 for j in view.order] for lead in view.leads], dtype=float)
    marks[marks < 0] = np.nan
    with np.errstate(all="ignore"):
        return np.array([np.nanmedian(col) if np.isfinite(col).any() else np.nan for col in marks.T])


def _premature_features(feats: dict[str, Any], rh: Rhythm, c: Consensus) -> list[int]:
    """Premature beats, their width; returns the beats ``premature_qrs_ms`` is read on."""
    prem_idx = [k for k in range(rh.samples.size) if rh.premature[k]]
    widths = [c.beat_qrs[k] for k in prem_idx if np.isfinite(c.beat_qrs[k])]
    feats["premature_beat_count"] = len(prem_idx)
    wide_idx = [k for k in prem_idx if np.isfinite(c.beat_qrs[k]) and c.beat_qrs[k] > WIDE_QRS_MS]
    width_idx = wide_idx or [k for k in prem_idx if np.isfinite(c.beat_qrs[k])]
    if not prem_idx or widths:
        feats["premature_wide_count"] = len(wide_idx)
        feats["premature_narrow_count"] = sum(1 for w in widths if w <= WIDE_QRS_MS)
        feats["premature_qrs_ms"] = median(c.beat_qrs[k] for k in width_idx)
    return width_idx


def _dominant(rh: Rhythm) -> np.ndarray:
    """Dominant beats: N and not premature (falling back to any non-V/F/Q, then any non-V beat)."""
    dominant = np.array([c == "N" and not rh.premature[k] for k, c in enumerate(rh.classes)])
    for fallback in (lambda c: c not in NON_SINUS, lambda c: c != "V"):
        if dominant.sum() < 2:
            dominant = np.array([fallback(c) for c in rh.classes])
    return dominant


def _p_wave_features(feats: dict[str, Any], per_lead: dict[str, dict[str, Any]], rh: Rhythm, c: Consensus, leads: list[str]) -> None:
    sinus_like = np.array([cls not in NON_SINUS for cls in rh.classes])
    if not sinus_like.any():
        return
    feats["p_wave_present_pct"] = 100.0 * float(c.beat_p[sinus_like].mean())
    for j, lead in enumerate(leads):  # the same rule read on one lead: a P wave at the window's consistent PR
        with np.errstate(invalid="ignore"):
            lead_p = c.p_by_lead[j] & (np.abs(c.pr_by_lead[j] - c.median_pr) <= P_PR_TOLERANCE_MS) if c.median_pr is not None else np.zeros(rh.samples.size, bool)
        per_lead["p_wave_present_pct"][lead] = 100.0 * float(lead_p[sinus_like].mean())


def _premature_lead_features(view: BeatView, per_lead: dict[str, dict[str, Any]], c: Consensus, width_idx: list[int], kept: list[str]) -> None:
    """Per-lead width and net QRS of the premature beats ``premature_qrs_ms`` is read on."""
    if not width_idx:
        return
    mask = np.zeros(view.order.size, dtype=bool)
    mask[width_idx] = True
    for j, lead in enumerate(view.leads):
        pos, neg = median(view.values(lead, "qrs_pos_mv")[mask]), median(view.values(lead, "qrs_neg_mv")[mask])
        per_lead["premature_qrs_net_mv"][lead] = (pos - neg) if pos is not None and neg is not None else None
        if lead in kept:  # the same small-QRS rule as the dominant width
            per_lead["premature_qrs_ms"][lead] = median(c.qrs_by_lead[j, k] for k in width_idx)


def _atrial_features(feats: dict[str, Any], m: WindowMeasurements, rh: Rhythm, window: SignalWindow) -> int | None:
    """Non-conducted P waves, atrial rate, AV dissociation and the dropped beat (longest RR against the one before it).

    Returns the index (in the window) of the beat that opens the long RR, or None.
    """
    atrial = m.delineation.atrial
    for name in ("nonconducted_p_count", "atrial_rate_bpm", "av_dissociation"):
        feats[name] = atrial.get(name)
    if feats["atrial_rate_bpm"] is not None and feats.get("hr_bpm"):
        feats["atrial_ventricular_ratio"] = feats["atrial_rate_bpm"] / feats["hr_bpm"]
    elif atrial.get("template_leads") == 0 and not feats.get("p_wave_present_pct"):
        feats["atrial_ventricular_ratio"] = 0.0  # no P wave anywhere in the window (AF, junctional rhythm): none per QRS
    if rh.in_rr_ms.size < 2:
        return None
    ratios = rh.in_rr_ms[1:] / rh.in_rr_ms[:-1]
    k = int(np.argmax(ratios)) + 1  # RR k runs from beat k to beat k + 1
    feats["long_rr_ratio"] = float(ratios[k - 1])
    feats["long_rr_after_premature"] = bool(rh.premature[k] or rh.classes[k] in ("S", "V"))
    if atrial.get("nonconducted_p_count") is not None:
        lo, hi = (rh.samples[k] - window.sampfrom) / window.fs_hz * 1000.0, (rh.samples[k + 1] - window.sampfrom) / window.fs_hz * 1000.0
        feats["long_rr_nonconducted_p"] = sum(1 for t in atrial.get("nonconducted_p_ms", []) if lo < t < hi)
    return k


def window_features(window: SignalWindow, table: BeatTable) -> WindowFeatures:
    """Compute every feature of :data:`FEATURES` that the window supports."""
    fs = float(window.fs_hz)
    rh = _rhythm(window, table)
    feats: dict[str, Any] = {name: None for name in _WINDOW_NAMES}
    per_lead: dict[str, dict[str, Any]] = {name: {} for name in _LEAD_NAMES}
    feats["per_lead"] = per_lead
    feats["n_beats"] = int(rh.samples.size)
    if rh.samples.size < 3:
        return WindowFeatures(features=feats)
    _rate_features(feats, rh)
    m = measure_window(window, rh.samples)
    got = {int(b): k for k, b in enumerate(m.beat_samples)}
    view = BeatView(m=m, order=np.array([got.get(int(b), -1) for b in rh.samples]), leads=list(m.per_lead))
    for name in _LEAD_NAMES:
        per_lead[name] = {lead: None for lead in view.leads}
    c = _consensus(view)
    width_idx = _premature_features(feats, rh, c)
    symbols = [str(s) for s in np.asarray(table.symbols)[np.isin(table.samples, rh.samples)]] if table.symbols is not None else None
    _class_features(feats, rh, table, fs, symbols)
    calibrated = amplitudes_calibrated(window.signal_mv)
    if symbols is None:  # no reference '/' marks: the spikes the signal shows (mV thresholds; a record without mV at 1 mV per lead)
        signal = window.signal_mv if calibrated else unit_peak_to_peak(window.signal_mv)
        feats["paced_beat_pct"] = 100.0 * float(np.mean(paced_beats(signal, fs, _qrs_onsets(view) - window.sampfrom, rh.samples - window.sampfrom)))
    dominant = _dominant(rh)
    _p_wave_features(feats, per_lead, rh, c, view.leads)
    qrs_size = lead_features(view, dominant, per_lead)
    clipped = clipped_leads(window.signal_mv, fs, window.leads)
    per_lead["lead_clipped"] = {lead: lead in clipped for lead in view.leads}
    drop_clipped(per_lead, clipped)
    for name in ("pr_ms", "qtc_ms"):
        feats[name] = median(per_lead[name].values())
    kept = drop_small_qrs_widths(per_lead, qrs_size)
    _premature_lead_features(view, per_lead, c, width_idx, kept)
    qrs_leads = [v for v in per_lead["qrs_ms"].values() if v is not None]
    # QRS is measured where it is widest: the upper quartile of the per-lead values (the max for 2 leads ~ 0.75)
    feats["qrs_ms"] = float(np.percentile(qrs_leads, 75)) if qrs_leads else None
    pr_dom = c.beat_pr[dominant & c.detected_p]
    if pr_dom.size >= 3:
        feats["pr_variability_ms"] = float(np.percentile(pr_dom, 90) - np.percentile(pr_dom, 10))
    twelve_lead(feats, per_lead)
    feats["amplitudes_calibrated"] = calibrated
    if not feats["amplitudes_calibrated"]:
        drop_uncalibrated(feats, per_lead)
    long_k = _atrial_features(feats, m, rh, window)
    feats = _plain(feats)
    beats = _beat_facts(view, rh, c, fs, long_k)
    return WindowFeatures(features=feats, beats=beats, measure_provenance=dict(m.provenance))


def _beat_facts(view: BeatView, rh: Rhythm, c: Consensus, fs: float, long_k: int | None) -> list[dict[str, Any]]:
    """Per beat: time, class, timing, width, P wave, median marks over the leads and the per-lead measurements."""
    def point(name: str, k: int) -> float | None:
        j = view.order[k]
        if j < 0:
            return None
        vals = [int(view.m.delineation.per_lead[lead].points[name][j]) for lead in view.leads]
        vals = [v for v in vals if v >= 0]
        return round(float(np.median(vals)) / fs, 4) if vals else None

    facts = []
    for k, r in enumerate(rh.samples):
        width = float(c.beat_qrs[k]) if np.isfinite(c.beat_qrs[k]) else None
        facts.append({
            "r_s": round(float(r) / fs, 4),
            "ordinal": k + 1,
            "cls": rh.classes[k],
            "premature": bool(rh.premature[k]),
            "qrs_ms": None if width is None else round(width, 1),
            "wide": None if width is None else bool(width > WIDE_QRS_MS),
            "p": bool(c.beat_p[k]),
            "p_on_s": point("p_on", k),
            "qrs_on_s": point("qrs_on", k),
            "qrs_off_s": point("qrs_off", k),
            "rr_ms": None if not np.isfinite(rh.rr_ms[k]) else round(float(rh.rr_ms[k]), 1),
            "opens_long_rr": long_k == k,
            "leads": beat_lead_values(view, k),
        })
    return facts


def _plain(obj: Any) -> Any:
    """Plain JSON with floats rounded to 4 decimals (NaN/inf become None)."""
    obj = plain_json(obj)
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, float):
        return round(obj, 4) if math.isfinite(obj) else None
    return obj


_WINDOW_NAMES = (
    "hr_bpm", "n_beats", "rr_irregularity_pct", "max_rr_ms", "premature_beat_count", "premature_narrow_count",
    "premature_wide_count", "premature_qrs_ms", "v_beat_count", "s_beat_count", "longest_v_run", "v_run_rate_bpm",
    "longest_s_run", "s_run_rate_bpm", "v_bigeminy_cycles", "v_trigeminy_cycles", "paced_beat_pct",
    "nonconducted_p_count", "pr_progression_ms", "p_wave_present_pct", "pr_ms", "pr_variability_ms", "qrs_ms",
    "qtc_ms", "qrs_axis_deg", "sokolow_mv", "cornell_product_mvs", "signal_quality",
    "atrial_rate_bpm", "atrial_ventricular_ratio", "av_dissociation", "long_rr_ratio", "long_rr_after_premature", "long_rr_nonconducted_p",
    "amplitudes_calibrated", "diagnosis_decision",  # diagnosis_decision: never measured here: the engine walks the graph a finding names
)
_CLASS_FEATURES = (
    "v_beat_count", "s_beat_count", "longest_v_run", "v_run_rate_bpm", "longest_s_run", "s_run_rate_bpm",
    "v_bigeminy_cycles", "v_trigeminy_cycles",
)
_LEAD_NAMES = ("p_wave_present_pct", "premature_qrs_ms", "pr_ms", "qrs_ms", "qtc_ms", "r_amp_mv", "s_amp_mv", "qrs_net_mv", "qrs_depth_mv",
               "st_j60_mv", "st_j_mv", "p_amp_mv", "premature_qrs_net_mv", *MORPHOLOGY_VALUES.values(), *MORPHOLOGY_FLAGS, "lead_clipped")
