"""Per-lead features of a window for the diagnosis graphs: intervals, amplitudes and QRS morphology.

Values are medians over the window's dominant beats (normal, not premature) of
the per-beat measurements of :func:`ecgtrace.tools.measure.measure_window`;
yes/no patterns (notched R, RSR', qR, rS, monophasic R, QS, pathological Q,
slurred S) are true on a lead when at least half of its measured dominant
beats show them. Units are those of
:data:`ecgtrace.rubrics.diagnosis_schema.FEATURES`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ecgtrace.tools.measure import WindowMeasurements

MIN_QRS_MV = 0.15  # QRS widths are read only on leads whose QRS spans at least this (mV) ...
MIN_QRS_SHARE = 0.3  # ... and at least this share of the largest QRS of the window
P_PR_TOLERANCE_MS = 50.0  # a P wave counts when its PR lies within this of the window's median PR
AVF_SCALE = 2.0 / math.sqrt(3.0)  # aVF's lead vector is sqrt(3)/2 as long as lead I's
#: Per-lead amplitude features (mV against a threshold) and window features that compare amplitudes across leads:
#: left out when the record's leads are not in calibrated mV (every lead scaled to the same peak-to-peak).
AMPLITUDE_LEAD_FEATURES = ("r_amp_mv", "s_amp_mv", "qrs_depth_mv", "st_j60_mv", "st_j_mv", "p_amp_mv", "q_amp_mv", "t_amp_mv", "pathological_q")
AMPLITUDE_WINDOW_FEATURES = ("qrs_axis_deg", "sokolow_mv", "cornell_product_mvs")
SAME_PTP_TOLERANCE = 1e-3  # relative: leads whose peak-to-peak all agree this closely were normalized
FLAG_SHARE = 0.5  # a yes/no pattern holds on a lead when this share of its dominant beats show it
#: Per-lead medians of per-beat morphology (tools name -> feature name).
MORPHOLOGY_VALUES = {"q_dur_ms": "q_dur_ms", "q_amp_mv": "q_amp_mv", "r_peak_time_ms": "r_peak_time_ms", "r_dur_ms": "r_dur_ms",
                     "s_dur_ms": "s_dur_ms", "t_amp_mv": "t_amp_mv"}
#: Per-lead yes/no patterns.
MORPHOLOGY_FLAGS = ("r_notched", "rsr_prime", "qr_pattern", "rs_pattern", "monophasic_r", "qs_pattern", "pathological_q", "slurred_s")
#: Per-beat, per-lead values listed in the beat facts.
BEAT_LEAD_VALUES = ("qrs_ms", "q_dur_ms", "q_amp_mv", "r_amp_mv", "s_amp_mv", "r_peak_time_ms", "s_dur_ms", "t_amp_mv", "st_j_mv",
                    "r_notched", "rsr_prime", "pathological_q")


def median(values: Any) -> float | None:
    """Median of the finite values (None when there are none)."""
    arr = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    return float(np.median(arr)) if arr.size else None


def lead_key(name: str) -> str:
    return name.strip().upper()


@dataclass
class BeatView:
    """The window's beats mapped onto the measurement (``order[k]``: index in the measurement, -1: none)."""

    m: WindowMeasurements
    order: np.ndarray
    leads: list[str]

    def values(self, lead: str, name: str) -> np.ndarray:
        """Per-beat values of ``name`` on ``lead`` (NaN where the beat was not measured)."""
        per_beat = self.m.per_lead[lead].per_beat
        if name == "slurred_s":  # S longer than the R before it, or longer than 40 ms (ERB's RBBB criterion)
            s, r = np.asarray(per_beat["s_dur_ms"], dtype=float), np.asarray(per_beat["r_dur_ms"], dtype=float)
            with np.errstate(invalid="ignore"):
                arr = np.where(np.isfinite(s), ((s > 40.0) | ((s > r) & (s > 0))).astype(float), np.nan)
        else:
            arr = np.asarray(per_beat[name], dtype=float)
        return np.array([arr[j] if j >= 0 else np.nan for j in self.order])

    def p_present(self, lead: str) -> np.ndarray:
        flags = self.m.delineation.per_lead[lead].p_present
        return np.array([bool(flags[j]) if j >= 0 else False for j in self.order])


def flag(values: np.ndarray) -> bool | None:
    """A yes/no pattern over beats: True when at least FLAG_SHARE of the measured beats show it."""
    ok = np.isfinite(values)
    return None if not ok.any() else bool(np.mean(values[ok] > 0.5) >= FLAG_SHARE)


def lead_features(view: BeatView, dominant: np.ndarray, per_lead: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Fill ``per_lead`` with the per-lead medians and patterns; returns each lead's QRS size (pos + neg, mV)."""
    qrs_size: dict[str, float] = {}
    for lead in view.leads:
        p_ok = dominant & view.p_present(lead)
        per_lead["pr_ms"][lead] = median(view.values(lead, "pr_ms")[p_ok]) if p_ok.sum() >= 2 else None
        per_lead["qrs_ms"][lead] = median(view.values(lead, "qrs_ms")[dominant])
        per_lead["qtc_ms"][lead] = median(view.values(lead, "qtc_bazett_ms")[dominant])
        per_lead["r_amp_mv"][lead] = median(view.values(lead, "r_amp_mv")[dominant])
        s = median(view.values(lead, "s_amp_mv")[dominant])
        per_lead["s_amp_mv"][lead] = None if s is None else -s
        pos, neg = median(view.values(lead, "qrs_pos_mv")[dominant]), median(view.values(lead, "qrs_neg_mv")[dominant])
        per_lead["qrs_net_mv"][lead] = (pos - neg) if pos is not None and neg is not None else None
        per_lead["qrs_depth_mv"][lead] = neg
        qrs_size[lead] = (pos + neg) if pos is not None and neg is not None else 0.0
        per_lead["st_j_mv"][lead] = median(view.values(lead, "st_j_mv")[dominant])
        per_lead["st_j60_mv"][lead] = median(view.values(lead, "st_j60_mv")[dominant])
        per_lead["p_amp_mv"][lead] = median(view.values(lead, "p_amp_mv")[p_ok]) if p_ok.sum() >= 2 else None
        for source, name in MORPHOLOGY_VALUES.items():
            per_lead[name][lead] = median(view.values(lead, source)[dominant])
        for name in MORPHOLOGY_FLAGS:
            per_lead[name][lead] = flag(view.values(lead, name)[dominant])
    return qrs_size


def drop_small_qrs_widths(per_lead: dict[str, dict[str, Any]], qrs_size: dict[str, float]) -> list[str]:
    """A lead whose QRS is tiny gives noise for a width: its ``qrs_ms`` becomes None. Returns the leads kept."""
    amps = {lead: (per_lead["qrs_net_mv"][lead] is not None and qrs_size[lead]) or 0.0 for lead in qrs_size}
    biggest = max(amps.values(), default=0.0)
    kept = []
    for lead, amp in amps.items():
        if amp < max(MIN_QRS_MV, MIN_QRS_SHARE * biggest):
            per_lead["qrs_ms"][lead] = None
        else:
            kept.append(lead)
    return kept


def twelve_lead(feats: dict[str, Any], per_lead: dict[str, dict[str, Any]]) -> None:
    """Frontal axis, Sokolow-Lyon index and Cornell product, where the leads exist."""
    def get(name: str, lead: str) -> float | None:
        return {lead_key(k): v for k, v in per_lead[name].items()}.get(lead_key(lead))

    net_i, net_avf = get("qrs_net_mv", "I"), get("qrs_net_mv", "aVF")
    if net_i is not None and net_avf is not None and (net_i or net_avf):
        # hexaxial: I = E cos(a), aVF = E (sqrt(3)/2) sin(a), so aVF is scaled up by 2/sqrt(3) before the angle
        feats["qrs_axis_deg"] = math.degrees(math.atan2(net_avf * AVF_SCALE, net_i))
    s_v1, r_v5, r_v6 = get("qrs_depth_mv", "V1"), get("r_amp_mv", "V5"), get("r_amp_mv", "V6")
    if s_v1 is not None and (r_v5 is not None or r_v6 is not None):
        feats["sokolow_mv"] = s_v1 + max(v for v in (r_v5, r_v6) if v is not None)
    r_avl, s_v3 = get("r_amp_mv", "aVL"), get("qrs_depth_mv", "V3")
    if r_avl is not None and s_v3 is not None and feats.get("qrs_ms") is not None:
        feats["cornell_product_mvs"] = (r_avl + s_v3) * feats["qrs_ms"] / 1000.0


def amplitudes_calibrated(signal_mv: np.ndarray) -> bool:
    """False when every lead (3 or more) has the same peak-to-peak to within SAME_PTP_TOLERANCE.

    No recorded ECG does that; a database that scaled each lead to a fixed
    size did (all 120 shared LUDB records: every lead exactly 1.000 mV), and its
    amplitudes, ST levels and axis then say nothing in mV.
    """
    x = np.asarray(signal_mv, dtype=float)
    if x.ndim != 2 or x.shape[1] < 3:
        return True
    ptp = np.array([np.ptp(col[np.isfinite(col)]) if np.isfinite(col).any() else np.nan for col in x.T])
    ptp = ptp[np.isfinite(ptp) & (ptp > 0)]
    return not (ptp.size >= 3 and float(np.ptp(ptp)) <= SAME_PTP_TOLERANCE * float(np.median(ptp)))


def drop_uncalibrated(feats: dict[str, Any], per_lead: dict[str, dict[str, Any]]) -> None:
    """Leave out every amplitude-dependent feature (see :func:`amplitudes_calibrated`)."""
    for name in AMPLITUDE_LEAD_FEATURES:
        per_lead[name] = {lead: None for lead in per_lead[name]}
    for name in AMPLITUDE_WINDOW_FEATURES:
        feats[name] = None


def drop_clipped(per_lead: dict[str, dict[str, Any]], clipped: list[str]) -> None:
    """A clipped lead (:func:`ecgtrace.tools.clipping.lead_clipped`) gives no per-lead feature: its amplitudes are the
    amplifier's limit, and its wave shapes and boundaries are cut with them. ``lead_clipped`` says why."""
    for name, values in per_lead.items():
        if name == "lead_clipped":
            continue
        for lead in clipped:
            if lead in values:
                values[lead] = None


def unavailable_because(features: dict[str, Any], lead: str | None) -> str:
    """Suffix for a ``feature_unavailable`` drop: why mV or a lead's values are missing, where the features say (else "")."""
    clipped = {lead_key(k) for k, v in (features.get("per_lead") or {}).get("lead_clipped", {}).items() if v}
    wanted = {lead_key(name) for name in (lead or "").split(",") if name}
    if clipped & wanted:
        return ":lead_clipped"
    if features.get("amplitudes_calibrated") is False:  # mV values of a per-lead normalized record
        return ":amplitudes_not_calibrated"
    return ""


def beat_lead_values(view: BeatView, k: int) -> dict[str, dict[str, float | bool | None]]:
    """Beat ``k``'s per-lead measurements for the beat facts (plain JSON)."""
    out: dict[str, dict[str, float | bool | None]] = {}
    for lead in view.leads:
        row: dict[str, float | bool | None] = {}
        for name in BEAT_LEAD_VALUES:
            v = float(view.values(lead, name)[k])
            if not np.isfinite(v):
                row[name] = None
            elif name in MORPHOLOGY_FLAGS:
                row[name] = bool(v > 0.5)
            else:
                row[name] = round(-v if name == "s_amp_mv" else v, 4)
        out[lead] = row
    return out
