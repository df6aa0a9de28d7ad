"""Features of one window for the diagnosis graphs: beats + rhythm + delineation.

The beat table (R peaks and AAMI classes) comes from reference annotations when
the record has them, else from the project's detectors; intervals, amplitudes
and P waves come from :func:`ecgtrace.tools.measure.measure_window` on the
window itself. Every name produced here is declared in
:data:`ecgtrace.rubrics.diagnosis_schema.FEATURES` (same units); a value that
cannot be measured is None, never a guess.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ecgtrace.tools.records import SignalWindow

FEATURES_VERSION = "3"
PREMATURE_RATIO = 0.85  # RR < 85 % of the reference RR ...
REFERENCE_RRS = 5  # ... the median of the (up to) 5 preceding RR intervals
P_PR_TOLERANCE_MS = 50.0
MIN_QRS_MV = 0.15  # QRS widths are read only on leads whose QRS spans at least this (mV) ...
MIN_QRS_SHARE = 0.3  # ... and at least this share of the largest QRS of the window  # a P wave counts when its PR lies within this of the window's median PR
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


def _median(values: Any) -> float | None:
    arr = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    return float(np.median(arr)) if arr.size else None


def _lead_key(name: str) -> str:
    return name.strip().upper()


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


def window_features(window: SignalWindow, table: BeatTable) -> WindowFeatures:
    """Compute every feature of :data:`FEATURES` that the window supports."""
    from ecgtrace.tools.measure import measure_window

    fs = float(window.fs_hz)
    lo, hi = window.sampfrom, window.sampto
    all_samples = np.asarray(table.samples, dtype=np.int64)
    inside = np.flatnonzero((all_samples >= lo) & (all_samples < hi))
    samples = all_samples[inside]
    classes = [str(c) for c in np.asarray(table.classes)[inside]]
    feats: dict[str, Any] = {name: None for name in _WINDOW_NAMES}
    per_lead: dict[str, dict[str, float | None]] = {name: {} for name in _LEAD_NAMES}
    feats["per_lead"] = per_lead
    feats["n_beats"] = int(samples.size)
    if samples.size < 3:
        return WindowFeatures(features=feats)

    # RR with the beats just before the window, so the first beats have a preceding RR
    rr_ms = np.full(samples.size, np.nan)
    prev_rr_ms = np.full(samples.size, np.nan)
    for k, idx in enumerate(inside):
        if idx >= 1:
            rr_ms[k] = (all_samples[idx] - all_samples[idx - 1]) * 1000.0 / fs
        if idx >= 2:  # reference RR: median of up to REFERENCE_RRS preceding intervals
            prev = np.diff(all_samples[max(idx - 1 - REFERENCE_RRS, 0) : idx])
            prev_rr_ms[k] = float(np.median(prev)) * 1000.0 / fs
    with np.errstate(invalid="ignore"):
        premature = rr_ms < PREMATURE_RATIO * prev_rr_ms
    in_rr = np.diff(samples) * 1000.0 / fs  # RR between beats both inside the window
    feats["hr_bpm"] = 60000.0 / float(np.mean(in_rr))
    feats["max_rr_ms"] = float(np.max(in_rr))

    # irregularity over intervals whose both ends are not ventricular/paced/unknown
    ok = np.array([c not in NON_SINUS for c in classes])
    valid_rr = [in_rr[k - 1] if ok[k] and ok[k - 1] else None for k in range(1, samples.size)]
    diffs = [abs(valid_rr[k] - valid_rr[k - 1]) for k in range(1, len(valid_rr)) if valid_rr[k] is not None and valid_rr[k - 1] is not None]
    good = [v for v in valid_rr if v is not None]
    if len(diffs) >= 2:
        feats["rr_irregularity_pct"] = 100.0 * float(np.mean(diffs)) / float(np.mean(good))

    m = measure_window(window, samples)
    leads = list(m.per_lead)
    for name in ("p_wave_present_pct", "premature_qrs_ms", "p_amp_mv", "premature_qrs_net_mv"):  # filled below where measurable
        per_lead[name] = {lead: None for lead in leads}
    got = {int(b): k for k, b in enumerate(m.beat_samples)}
    order = np.array([got.get(int(b), -1) for b in samples])

    def beat_values(lead: str, name: str) -> np.ndarray:
        arr = np.asarray(m.per_lead[lead].per_beat[name], dtype=float)
        return np.array([arr[j] if j >= 0 else np.nan for j in order])

    qrs_by_lead = np.array([beat_values(lead, "qrs_ms") for lead in leads])
    with np.errstate(all="ignore"):
        beat_qrs = np.array([_median(qrs_by_lead[:, k]) or np.nan for k in range(samples.size)])
    p_by_lead = np.array([[bool(m.delineation.per_lead[lead].p_present[j]) if j >= 0 else False for j in order] for lead in leads])
    need = max(1, math.ceil(len(leads) / 2))
    pr_by_lead = np.array([beat_values(lead, "pr_ms") for lead in leads])
    with np.errstate(all="ignore"):
        pr_masked = np.where(p_by_lead, pr_by_lead, np.nan)
        beat_pr = np.array([_median(pr_masked[:, k]) if np.isfinite(pr_masked[:, k]).any() else np.nan for k in range(samples.size)])
    detected_p = (p_by_lead.sum(axis=0) >= need) & np.isfinite(beat_pr)
    median_pr = _median(beat_pr[detected_p])
    # a P wave at a consistent PR: random deflections (f waves, noise) rarely line up
    beat_p = detected_p & (np.abs(beat_pr - (median_pr if median_pr is not None else 0.0)) <= P_PR_TOLERANCE_MS)

    # premature beats and their width
    first_ok = np.isfinite(prev_rr_ms)
    prem_idx = [k for k in range(samples.size) if premature[k] and first_ok[k]]
    widths = [beat_qrs[k] for k in prem_idx if np.isfinite(beat_qrs[k])]
    feats["premature_beat_count"] = len(prem_idx)
    wide_idx = [k for k in prem_idx if np.isfinite(beat_qrs[k]) and beat_qrs[k] > WIDE_QRS_MS]
    width_idx = wide_idx or [k for k in prem_idx if np.isfinite(beat_qrs[k])]  # the beats premature_qrs_ms is read on
    if not prem_idx or widths:
        feats["premature_wide_count"] = len(wide_idx)
        feats["premature_narrow_count"] = sum(1 for w in widths if w <= WIDE_QRS_MS)
        feats["premature_qrs_ms"] = _median(beat_qrs[k] for k in width_idx)

    # class-based counts, runs and patterns
    feats["v_beat_count"] = sum(1 for c in classes if c == "V")
    feats["s_beat_count"] = sum(1 for c in classes if c == "S")
    for cls, key in (("V", "v"), ("S", "s")):
        run, start = _longest_run(classes, cls)
        feats[f"longest_{key}_run"] = run
        feats[f"{key}_run_rate_bpm"] = _rate_bpm(samples[start : start + run], fs) if run >= 2 else None
    feats["v_bigeminy_cycles"] = _pattern_cycles(classes, 1)
    feats["v_trigeminy_cycles"] = _pattern_cycles(classes, 2)
    if not table.classes_known:
        for name in _CLASS_FEATURES:
            feats[name] = None
    if table.symbols is not None:
        symbols = [str(s) for s in np.asarray(table.symbols)[inside]]
        feats["paced_beat_pct"] = 100.0 * sum(1 for s in symbols if s == "/") / len(symbols)

    # dominant beats: not ectopic, not premature
    dominant = np.array([c == "N" and not premature[k] for k, c in enumerate(classes)])
    for fallback in (lambda c: c not in NON_SINUS, lambda c: c != "V"):
        if dominant.sum() < 2:
            dominant = np.array([fallback(c) for c in classes])
    sinus_like = np.array([c not in NON_SINUS for c in classes])
    if sinus_like.any():
        feats["p_wave_present_pct"] = 100.0 * float(beat_p[sinus_like].mean())
        for j, lead in enumerate(leads):  # the same rule read on one lead: a P wave at the window's consistent PR
            with np.errstate(invalid="ignore"):
                lead_p = p_by_lead[j] & (np.abs(pr_by_lead[j] - median_pr) <= P_PR_TOLERANCE_MS) if median_pr is not None else np.zeros(samples.size, bool)
            per_lead["p_wave_present_pct"][lead] = 100.0 * float(lead_p[sinus_like].mean())
    qrs_depth: dict[str, float | None] = {}
    qrs_size: dict[str, float] = {}
    for j, lead in enumerate(leads):
        pr = beat_values(lead, "pr_ms")
        pr_ok = dominant & p_by_lead[j]
        per_lead["pr_ms"][lead] = _median(pr[pr_ok]) if pr_ok.sum() >= 2 else None
        per_lead["qrs_ms"][lead] = _median(beat_values(lead, "qrs_ms")[dominant])
        per_lead["qtc_ms"][lead] = _median(beat_values(lead, "qtc_bazett_ms")[dominant])
        r = _median(beat_values(lead, "r_amp_mv")[dominant])
        s = _median(-beat_values(lead, "s_amp_mv")[dominant])
        per_lead["r_amp_mv"][lead], per_lead["s_amp_mv"][lead] = r, s
        pos, neg, per_lead["st_j_mv"][lead] = _qrs_levels(window, m, j, lead, order, dominant)
        per_lead["qrs_net_mv"][lead] = (pos - neg) if pos is not None and neg is not None else None
        qrs_depth[lead] = neg
        qrs_size[lead] = (pos + neg) if pos is not None and neg is not None else 0.0
        per_lead["st_j60_mv"][lead] = _median(beat_values(lead, "st_j60_mv")[dominant])
        p_ok = dominant & p_by_lead[j]  # signed P amplitude where this lead shows a P wave (its own delineation)
        per_lead["p_amp_mv"][lead] = _median(beat_values(lead, "p_amp_mv")[p_ok]) if p_ok.sum() >= 2 else None
        if width_idx:  # polarity of the premature beats premature_qrs_ms is read on
            wide_mask = np.zeros(samples.size, dtype=bool)
            wide_mask[width_idx] = True
            p_pos, p_neg, _ = _qrs_levels(window, m, j, lead, order, wide_mask)
            per_lead["premature_qrs_net_mv"][lead] = (p_pos - p_neg) if p_pos is not None and p_neg is not None else None
    for name in ("pr_ms", "qtc_ms"):
        feats[name] = _median(per_lead[name].values())
    # a lead whose QRS is tiny (V1 in some Holter records) gives noise for a width: leave it out
    amps = {lead: (per_lead["qrs_net_mv"][lead] is not None and qrs_size[lead]) or 0.0 for lead in leads}
    biggest = max(amps.values(), default=0.0)
    for j, lead in enumerate(leads):
        if amps[lead] < max(MIN_QRS_MV, MIN_QRS_SHARE * biggest):
            per_lead["qrs_ms"][lead] = None
        elif width_idx:  # per-lead width of the premature beats premature_qrs_ms is read on (same small-QRS rule)
            per_lead["premature_qrs_ms"][lead] = _median(qrs_by_lead[j, k] for k in width_idx)
    qrs_leads = [v for v in per_lead["qrs_ms"].values() if v is not None]
    # QRS is measured where it is widest: the upper quartile of the per-lead values (the max for 2 leads ~ 0.75)
    feats["qrs_ms"] = float(np.percentile(qrs_leads, 75)) if qrs_leads else None
    pr_dom = beat_pr[dominant & detected_p]
    if pr_dom.size >= 3:
        feats["pr_variability_ms"] = float(np.percentile(pr_dom, 90) - np.percentile(pr_dom, 10))
    _twelve_lead(feats, per_lead, qrs_depth)

    feats = _plain(feats)
    beats = _beat_facts(m, samples, order, classes, premature & first_ok, beat_qrs, beat_p, rr_ms, leads, fs)
    return WindowFeatures(features=feats, beats=beats, measure_provenance=dict(m.provenance))


def _qrs_levels(window: SignalWindow, m: Any, j: int, lead: str, order: np.ndarray, dominant: np.ndarray) -> tuple[float | None, float | None, float | None]:
    """Medians over dominant beats of: the largest positive and the largest negative
    deflection inside the QRS (mV, both >= 0), and the level at the J point (QRS offset, mV).

    Measured on the raw window against the mean of the 20 ms before QRS onset,
    so a QS complex reads as deeply negative whatever the order of its waves.
    """
    pts = m.delineation.per_lead[lead].points
    x = np.asarray(window.signal_mv[:, j], dtype=float)
    pad = max(int(0.02 * window.fs_hz), 1)
    half = max(int(0.01 * window.fs_hz), 1)
    pos, neg, jpt = [], [], []
    for k, jj in enumerate(order):
        if jj < 0 or not dominant[k]:
            continue
        on, off = int(pts["qrs_on"][jj]) - window.sampfrom, int(pts["qrs_off"][jj]) - window.sampfrom
        if on < pad or off <= on or off + half >= x.size:
            continue
        base = float(np.nanmean(x[on - pad : on + 1]))
        seg = x[on : off + 1] - base
        if np.isfinite(seg).all():
            pos.append(max(float(seg.max()), 0.0))
            neg.append(max(-float(seg.min()), 0.0))
            jpt.append(float(np.mean(x[off - half : off + half + 1])) - base)
    return _median(pos), _median(neg), _median(jpt)


def _twelve_lead(feats: dict[str, Any], per_lead: dict[str, dict[str, float | None]], qrs_depth: dict[str, float | None]) -> None:
    def get(name: str, lead: str) -> float | None:
        table = qrs_depth if name == "qrs_depth" else per_lead[name]
        return {_lead_key(k): v for k, v in table.items()}.get(_lead_key(lead))

    net_i, net_avf = get("qrs_net_mv", "I"), get("qrs_net_mv", "aVF")
    if net_i is not None and net_avf is not None and (net_i or net_avf):
        feats["qrs_axis_deg"] = math.degrees(math.atan2(net_avf, net_i))
    s_v1, r_v5, r_v6 = get("qrs_depth", "V1"), get("r_amp_mv", "V5"), get("r_amp_mv", "V6")
    if s_v1 is not None and (r_v5 is not None or r_v6 is not None):
        feats["sokolow_mv"] = s_v1 + max(v for v in (r_v5, r_v6) if v is not None)
    r_avl, s_v3 = get("r_amp_mv", "aVL"), get("qrs_depth", "V3")
    if r_avl is not None and s_v3 is not None and feats.get("qrs_ms") is not None:
        feats["cornell_product_mvs"] = (r_avl + s_v3) * feats["qrs_ms"] / 1000.0


def _beat_facts(m: Any, samples: np.ndarray, order: np.ndarray, classes: list[str], premature: np.ndarray, beat_qrs: np.ndarray, beat_p: np.ndarray, rr_ms: np.ndarray, leads: list[str], fs: float) -> list[dict[str, Any]]:
    def point(name: str, k: int) -> float | None:
        j = order[k]
        if j < 0:
            return None
        vals = [int(m.delineation.per_lead[lead].points[name][j]) for lead in leads]
        vals = [v for v in vals if v >= 0]
        return round(float(np.median(vals)) / fs, 4) if vals else None

    facts = []
    for k, r in enumerate(samples):
        width = float(beat_qrs[k]) if np.isfinite(beat_qrs[k]) else None
        facts.append({
            "r_s": round(float(r) / fs, 4),
            "cls": classes[k],
            "premature": bool(premature[k]),
            "qrs_ms": None if width is None else round(width, 1),
            "wide": None if width is None else bool(width > WIDE_QRS_MS),
            "p": bool(beat_p[k]),
            "p_on_s": point("p_on", k),
            "qrs_on_s": point("qrs_on", k),
            "qrs_off_s": point("qrs_off", k),
            "rr_ms": None if not np.isfinite(rr_ms[k]) else round(float(rr_ms[k]), 1),
        })
    return facts


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    value = float(obj)
    return round(value, 4) if math.isfinite(value) else None


_WINDOW_NAMES = (
    "hr_bpm", "n_beats", "rr_irregularity_pct", "max_rr_ms", "premature_beat_count", "premature_narrow_count",
    "premature_wide_count", "premature_qrs_ms", "v_beat_count", "s_beat_count", "longest_v_run", "v_run_rate_bpm",
    "longest_s_run", "s_run_rate_bpm", "v_bigeminy_cycles", "v_trigeminy_cycles", "paced_beat_pct",
    "nonconducted_p_count", "pr_progression_ms", "p_wave_present_pct", "pr_ms", "pr_variability_ms", "qrs_ms",
    "qtc_ms", "qrs_axis_deg", "sokolow_mv", "cornell_product_mvs", "signal_quality",
)
_CLASS_FEATURES = (
    "v_beat_count", "s_beat_count", "longest_v_run", "v_run_rate_bpm", "longest_s_run", "s_run_rate_bpm",
    "v_bigeminy_cycles", "v_trigeminy_cycles",
)
_LEAD_NAMES = ("p_wave_present_pct", "premature_qrs_ms", "pr_ms", "qrs_ms", "qtc_ms", "r_amp_mv", "s_amp_mv", "qrs_net_mv", "st_j60_mv", "st_j_mv",
               "p_amp_mv", "premature_qrs_net_mv")
