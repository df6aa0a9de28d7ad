"""The feature vocabulary of diagnosis graphs: names, canonical units, scope, unit conversion.

The audit builder (:mod:`ecgtrace.agents.audit._features`) computes exactly
these names in these units; a graph threshold may be written in any unit of the
same family (``2 s`` for ``max_rr_ms``, ``-70 uV`` for ``st_j60_mv``, ``2440
mm*ms`` for ``cornell_product_mvs``) and is converted, never ignored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

#: CSE tolerances for wave boundaries, ms: two standard deviations of the acceptable difference between a program's
#: global marks and the CSE referees' (Willems et al., the CSE working party; the limits IEC 60601-2-51 adopted).
CSE_TOLERANCE_MS: dict[str, float] = {"p_on": 10.2, "p_off": 12.7, "qrs_on": 6.5, "qrs_off": 11.6, "t_off": 30.6}


def interval_sd_ms(*marks: str) -> float:
    """One standard deviation of an interval between CSE marks (ms): the marks' SDs (half their CSE limit) added in quadrature."""
    return math.sqrt(sum((CSE_TOLERANCE_MS[m] / 2.0) ** 2 for m in marks))


# Measurement tolerances (why a ground-truth path whose finding lies within them of its threshold is doubtful):
#   intervals: one SD of the CSE limits of the two marks that bound them (PR 6.0 ms, QRS 6.7 ms, QT 15.6 ms);
#   amplitudes: 0.025 mV (a quarter of a small square at 10 mm/mV) or 5 % of the threshold, whichever is larger;
#   the Cornell product: 8 % (5 % of its voltage with 6.7 ms of a ~100 ms QRS, in quadrature); the axis: 5 degrees;
#   rates and R-R times from R peaks: 1 bpm and 10 ms. Counts, shares and yes/no features are read exactly from the
#   beat table and have none: their doubt is the beat table's (reference or detector), not a margin's.
_INTERVAL_PR_MS = interval_sd_ms("p_on", "qrs_on")
_INTERVAL_QRS_MS = interval_sd_ms("qrs_on", "qrs_off")
_INTERVAL_QT_MS = interval_sd_ms("qrs_on", "t_off")
_QRS_ONSET_MS = CSE_TOLERANCE_MS["qrs_on"] / 2.0
_AMPLITUDE_MV, _AMPLITUDE_PCT = 0.025, 5.0


@dataclass(frozen=True)
class FeatureSpec:
    """One measurable feature: its canonical unit, whether it exists per lead, how exactly it is measured.

    ``scope`` is ``"window"`` (one value for the window), ``"lead"`` (only per
    lead: a predicate must name ``lead`` or ``leads``) or ``"both"``.
    ``tolerance`` (canonical unit) and ``tolerance_pct`` (of a threshold's
    magnitude; the larger one applies, see :func:`feature_tolerance`) say how
    far a measured value may lie from the truth: within that of a threshold, a
    finding's truth is doubtful.
    """

    unit: str
    scope: Literal["window", "lead", "both"]
    description: str
    tolerance: float = 0.0
    tolerance_pct: float = 0.0


#: The feature vocabulary. The audit builder computes exactly these names.
FEATURES: dict[str, FeatureSpec] = {
    # rhythm and beats (beat table: reference annotations or detectors)
    "hr_bpm": FeatureSpec("bpm", "window", "mean heart rate over the window (60000 / mean RR)", tolerance=1.0),
    "n_beats": FeatureSpec("count", "window", "beats in the window"),
    "rr_irregularity_pct": FeatureSpec("%", "window", "mean |successive RR difference| / mean RR between non-ventricular beats"),
    "max_rr_ms": FeatureSpec("ms", "window", "longest RR interval in the window", tolerance=10.0),
    "premature_beat_count": FeatureSpec("count", "window", "beats whose RR is < 85 % of the median of the 5 preceding RRs and that break the rhythm: a pause after them (next RR >= RR / 0.85), a run, or an interpolated beat (sinus arrhythmia's gradual shortening is not premature)"),
    "premature_narrow_count": FeatureSpec("count", "window", "premature beats with a measured QRS <= 120 ms"),
    "premature_wide_count": FeatureSpec("count", "window", "premature beats with a measured QRS > 120 ms"),
    "premature_qrs_ms": FeatureSpec("ms", "both", "median QRS duration of the wide premature beats (of all premature beats when none is wide); per lead: the same beats measured on that lead", tolerance=_INTERVAL_QRS_MS),
    "v_beat_count": FeatureSpec("count", "window", "ventricular ectopic beats (AAMI V)"),
    "s_beat_count": FeatureSpec("count", "window", "supraventricular ectopic beats (AAMI S)"),
    "longest_v_run": FeatureSpec("count", "window", "longest run of consecutive V beats"),
    "v_run_rate_bpm": FeatureSpec("bpm", "window", "rate within the longest V run", tolerance=1.0),
    "longest_s_run": FeatureSpec("count", "window", "longest run of consecutive S beats"),
    "s_run_rate_bpm": FeatureSpec("bpm", "window", "rate within the longest S run", tolerance=1.0),
    "v_bigeminy_cycles": FeatureSpec("count", "window", "V beats in the longest chain where each V follows exactly one non-V beat (N-V-N-V)"),
    "v_trigeminy_cycles": FeatureSpec("count", "window", "V beats in the longest chain where each V follows exactly two non-V beats (N-N-V)"),
    "paced_beat_pct": FeatureSpec("%", "window", "beats marked paced (reference '/' or a pacing spike)"),
    "nonconducted_p_count": FeatureSpec("count", "window", "P waves not followed by a QRS: template-matched P waves between a T end and the next beat's own P wave (tools._atrial)"),
    "long_rr_ratio": FeatureSpec("ratio", "window", "the largest ratio of an RR interval to the RR before it (the candidate dropped beat)"),
    "long_rr_after_premature": FeatureSpec("bool", "window", "the beat that opens that long RR is premature (or classed S or V): a compensatory pause, not a dropped beat"),
    "long_rr_nonconducted_p": FeatureSpec("count", "window", "non-conducted P waves inside that long RR"),
    "atrial_rate_bpm": FeatureSpec("bpm", "window", "60000 / the median P-P interval over every P wave found, conducted or not (P waves hidden in a QRS or T left out)"),
    "atrial_ventricular_ratio": FeatureSpec("ratio", "window", "atrial rate / ventricular rate (about 2 in 2:1 AV block, 1 with every P conducted, 0 when the window shows no P wave at all)"),
    "av_dissociation": FeatureSpec("bool", "window", "P waves in most beats, an atrial rate >= 1.2 x the ventricular rate and a PR interval whose interquartile range exceeds 40 ms"),
    "pr_progression_ms": FeatureSpec("ms", "window", "largest PR increase over consecutive conducted beats before a dropped beat"),
    # morphology and intervals (delineation of the window)
    "p_wave_present_pct": FeatureSpec("%", "both", "non-ventricular beats with a P wave at a consistent PR (within 50 ms of the median); window: P seen in at least half of the leads, per lead: in that lead"),
    "pr_ms": FeatureSpec("ms", "both", "PR interval (median over dominant beats)", tolerance=_INTERVAL_PR_MS),
    "pr_variability_ms": FeatureSpec("ms", "window", "max - min PR over dominant beats", tolerance=_INTERVAL_PR_MS),
    "qrs_ms": FeatureSpec("ms", "both", "QRS duration (median over dominant beats)", tolerance=_INTERVAL_QRS_MS),
    "qtc_ms": FeatureSpec("ms", "both", "QT corrected (Bazett)", tolerance=_INTERVAL_QT_MS),
    "r_amp_mv": FeatureSpec("mV", "lead", "R-wave amplitude", tolerance=_AMPLITUDE_MV, tolerance_pct=_AMPLITUDE_PCT),
    "s_amp_mv": FeatureSpec("mV", "lead", "S-wave depth (positive number)", tolerance=_AMPLITUDE_MV, tolerance_pct=_AMPLITUDE_PCT),
    "qrs_net_mv": FeatureSpec("mV", "lead", "R amplitude minus S depth (QRS polarity)", tolerance=_AMPLITUDE_MV, tolerance_pct=_AMPLITUDE_PCT),
    "p_amp_mv": FeatureSpec("mV", "lead", "signed P-wave peak amplitude (median over dominant beats with a P wave in that lead; negative: inverted P)", tolerance=_AMPLITUDE_MV, tolerance_pct=_AMPLITUDE_PCT),
    "qrs_depth_mv": FeatureSpec("mV", "lead", "largest negative deflection inside the QRS against the PR level (positive number)", tolerance=_AMPLITUDE_MV, tolerance_pct=_AMPLITUDE_PCT),
    "q_dur_ms": FeatureSpec("ms", "lead", "duration of the initial negative wave before the first R (the whole QRS for QS; 0 without a q wave)", tolerance=_QRS_ONSET_MS),
    "q_amp_mv": FeatureSpec("mV", "lead", "depth of that q wave (positive number; 0 without a q wave)", tolerance=_AMPLITUDE_MV, tolerance_pct=_AMPLITUDE_PCT),
    "r_peak_time_ms": FeatureSpec("ms", "lead", "R-peak time: QRS onset to the peak of the last R wave (R' when present)", tolerance=_QRS_ONSET_MS),
    "r_dur_ms": FeatureSpec("ms", "lead", "duration of the first R wave (between its zero crossings)"),
    "s_dur_ms": FeatureSpec("ms", "lead", "duration of the S wave after the first R (0 without an S wave)"),
    "t_amp_mv": FeatureSpec("mV", "lead", "signed T-wave peak amplitude against the PR level (its sign is the T polarity; negative: inverted T)", tolerance=_AMPLITUDE_MV, tolerance_pct=_AMPLITUDE_PCT),
    "r_notched": FeatureSpec("bool", "lead", "the R wave has two peaks with a dip of at least 8 % of its height (0.04 mV) between them, or is M-shaped (R-s-R' with the s under 25 % of the smaller R), in most dominant beats"),
    "rsr_prime": FeatureSpec("bool", "lead", "RSR' pattern: a second positive wave (R', >= 0.05 mV) after the S wave, in most dominant beats"),
    "qr_pattern": FeatureSpec("bool", "lead", "qR pattern: a q wave followed by an R wave larger than the q and any S, in most dominant beats"),
    "rs_pattern": FeatureSpec("bool", "lead", "rS pattern: no q wave, an R wave smaller than the S wave after it, in most dominant beats"),
    "monophasic_r": FeatureSpec("bool", "lead", "monophasic R: no q deeper than 10 % of R, no S deeper than 20 % of R (a discordant ST onset), no R' unless M-shaped, in most dominant beats"),
    "qs_pattern": FeatureSpec("bool", "lead", "QS complex: no positive wave at all, in most dominant beats"),
    "pathological_q": FeatureSpec("bool", "lead", "ERB's pathological Q: QS; or q > 30 ms deeper than 0.075 mV (V1-V4) or than 1/5 of the R (other leads); or a deep S (> 0.5 mV) after a tiny r (< 0.1 mV)"),
    "slurred_s": FeatureSpec("bool", "lead", "broad (slurred) S: S wave longer than the R before it, or longer than 40 ms, in most dominant beats"),
    "premature_qrs_net_mv": FeatureSpec("mV", "lead", "net QRS (largest positive minus largest negative deflection) of the premature beats premature_qrs_ms is read on", tolerance=_AMPLITUDE_MV, tolerance_pct=_AMPLITUDE_PCT),
    "st_j60_mv": FeatureSpec("mV", "lead", "ST level 60 ms after the J point, relative to the PR baseline", tolerance=_AMPLITUDE_MV, tolerance_pct=_AMPLITUDE_PCT),
    "st_j_mv": FeatureSpec("mV", "lead", "level at the J point (QRS offset), relative to the 20 ms before QRS onset", tolerance=_AMPLITUDE_MV, tolerance_pct=_AMPLITUDE_PCT),
    "qrs_axis_deg": FeatureSpec("deg", "window", "frontal QRS axis from net QRS in I and aVF", tolerance=5.0),
    "sokolow_mv": FeatureSpec("mV", "window", "Sokolow-Lyon index S(V1) + max(R(V5), R(V6))", tolerance=_AMPLITUDE_MV, tolerance_pct=_AMPLITUDE_PCT),
    "cornell_product_mvs": FeatureSpec("mV*s", "window", "Cornell product (R(aVL) + S(V3)) x QRS duration", tolerance_pct=8.0),
    "signal_quality": FeatureSpec("bool", "window", "true when the window is clean enough to measure"),
    "lead_clipped": FeatureSpec("bool", "lead", "the lead sits flat at its extreme where the signal went on (an amplifier or ADC limit, tools.clipping): every other feature of that lead is then None"),
    "amplitudes_calibrated": FeatureSpec("bool", "window", "false when every lead has the same peak-to-peak (a per-lead normalized record, e.g. LUDB): mV features and the axis are then None"),
    # another graph's decision, walked by the engine on the same features (the finding names it: diagnosis: lbbb)
    "diagnosis_decision": FeatureSpec("bool", "window", "decision of the graph named by the finding's diagnosis: key, on the same window"),
}

#: The feature of findings that name another diagnosis ({feature: diagnosis_decision, diagnosis: lbbb, op: "==", value: true}).
DECISION_FEATURE = "diagnosis_decision"

#: Unit families: a threshold may use any unit of the feature's family; it is converted.
_UNIT_FACTORS: dict[str, tuple[str, float]] = {
    "ms": ("time", 1.0), "s": ("time", 1000.0),
    "mV": ("voltage", 1.0), "uV": ("voltage", 0.001), "µV": ("voltage", 0.001), "mm": ("voltage", 0.1),
    "bpm": ("rate", 1.0),
    "%": ("fraction", 1.0), "fraction": ("fraction", 100.0),
    "count": ("count", 1.0), "beats": ("count", 1.0),
    "ratio": ("ratio", 1.0),
    "deg": ("angle", 1.0),
    "mV*s": ("voltage_time", 1.0), "mV·s": ("voltage_time", 1.0), "mm*ms": ("voltage_time", 0.0001), "mm·ms": ("voltage_time", 0.0001),
    "bool": ("bool", 1.0),
}

#: Named wave targets the audit builder can localize (time-span grounding).
WAVE_TARGETS: dict[str, str] = {
    "v_beat": "the QRS complex of a ventricular ectopic beat",
    "s_beat": "a supraventricular premature beat",
    "premature_beat": "a premature beat",
    "v_run": "the run of consecutive ventricular beats",
    "s_run": "the run of consecutive supraventricular beats",
    "longest_rr": "the longest RR interval (from one R peak to the next)",
    "pr_interval": "the PR interval of a conducted beat",
    "qrs_complex": "the QRS complex of a dominant beat",
    "paced_beat": "a paced beat",
    "dropped_beat_pair": "the two QRS complexes around the dropped beat (the RR much longer than the one before it), named by their order",
}


def feature_tolerance(feature: str, threshold: float) -> float:
    """How far (canonical unit) a measured ``feature`` may lie from the truth near ``threshold``; 0 when exact."""
    spec = FEATURES[feature]
    return max(spec.tolerance, spec.tolerance_pct / 100.0 * abs(float(threshold)))


def unit_factor(feature: str, unit: str) -> float | None:
    """Factor that converts a threshold in ``unit`` to ``feature``'s unit; None when incompatible."""
    spec = FEATURES[feature]
    if unit not in _UNIT_FACTORS:
        return None
    family, factor = _UNIT_FACTORS[unit]
    canonical_family, canonical_factor = _UNIT_FACTORS[spec.unit]
    if family != canonical_family:
        return None
    return factor / canonical_factor
