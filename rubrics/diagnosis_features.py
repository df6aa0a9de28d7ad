"""The feature vocabulary of diagnosis graphs: names, canonical units, scope, unit conversion.

The audit builder (:mod:`ecgtrace.agents.audit._features`) computes exactly
these names in these units; a graph threshold may be written in any unit of the
same family (``2 s`` for ``max_rr_ms``, ``-70 uV`` for ``st_j60_mv``, ``2440
mm*ms`` for ``cornell_product_mvs``) and is converted, never ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class FeatureSpec:
    """One measurable feature: its canonical unit and whether it exists per lead.

    ``scope`` is ``"window"`` (one value for the window), ``"lead"`` (only per
    lead: a predicate must name ``lead`` or ``leads``) or ``"both"``.
    """

    unit: str
    scope: Literal["window", "lead", "both"]
    description: str


#: The feature vocabulary. The audit builder computes exactly these names.
FEATURES: dict[str, FeatureSpec] = {
    # rhythm and beats (beat table: reference annotations or detectors)
    "hr_bpm": FeatureSpec("bpm", "window", "mean heart rate over the window (60000 / mean RR)"),
    "n_beats": FeatureSpec("count", "window", "beats in the window"),
    "rr_irregularity_pct": FeatureSpec("%", "window", "mean |successive RR difference| / mean RR between non-ventricular beats"),
    "max_rr_ms": FeatureSpec("ms", "window", "longest RR interval in the window"),
    "premature_beat_count": FeatureSpec("count", "window", "beats whose RR is < 85 % of the median of the 5 preceding RRs and that break the rhythm: a pause after them (next RR >= RR / 0.85), a run, or an interpolated beat (sinus arrhythmia's gradual shortening is not premature)"),
    "premature_narrow_count": FeatureSpec("count", "window", "premature beats with a measured QRS <= 120 ms"),
    "premature_wide_count": FeatureSpec("count", "window", "premature beats with a measured QRS > 120 ms"),
    "premature_qrs_ms": FeatureSpec("ms", "both", "median QRS duration of the wide premature beats (of all premature beats when none is wide); per lead: the same beats measured on that lead"),
    "v_beat_count": FeatureSpec("count", "window", "ventricular ectopic beats (AAMI V)"),
    "s_beat_count": FeatureSpec("count", "window", "supraventricular ectopic beats (AAMI S)"),
    "longest_v_run": FeatureSpec("count", "window", "longest run of consecutive V beats"),
    "v_run_rate_bpm": FeatureSpec("bpm", "window", "rate within the longest V run"),
    "longest_s_run": FeatureSpec("count", "window", "longest run of consecutive S beats"),
    "s_run_rate_bpm": FeatureSpec("bpm", "window", "rate within the longest S run"),
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
    "pr_ms": FeatureSpec("ms", "both", "PR interval (median over dominant beats)"),
    "pr_variability_ms": FeatureSpec("ms", "window", "max - min PR over dominant beats"),
    "qrs_ms": FeatureSpec("ms", "both", "QRS duration (median over dominant beats)"),
    "qtc_ms": FeatureSpec("ms", "both", "QT corrected (Bazett)"),
    "r_amp_mv": FeatureSpec("mV", "lead", "R-wave amplitude"),
    "s_amp_mv": FeatureSpec("mV", "lead", "S-wave depth (positive number)"),
    "qrs_net_mv": FeatureSpec("mV", "lead", "R amplitude minus S depth (QRS polarity)"),
    "p_amp_mv": FeatureSpec("mV", "lead", "signed P-wave peak amplitude (median over dominant beats with a P wave in that lead; negative: inverted P)"),
    "qrs_depth_mv": FeatureSpec("mV", "lead", "largest negative deflection inside the QRS against the PR level (positive number)"),
    "q_dur_ms": FeatureSpec("ms", "lead", "duration of the initial negative wave before the first R (the whole QRS for QS; 0 without a q wave)"),
    "q_amp_mv": FeatureSpec("mV", "lead", "depth of that q wave (positive number; 0 without a q wave)"),
    "r_peak_time_ms": FeatureSpec("ms", "lead", "R-peak time: QRS onset to the peak of the last R wave (R' when present)"),
    "r_dur_ms": FeatureSpec("ms", "lead", "duration of the first R wave (between its zero crossings)"),
    "s_dur_ms": FeatureSpec("ms", "lead", "duration of the S wave after the first R (0 without an S wave)"),
    "t_amp_mv": FeatureSpec("mV", "lead", "signed T-wave peak amplitude against the PR level (its sign is the T polarity; negative: inverted T)"),
    "r_notched": FeatureSpec("bool", "lead", "the R wave has two peaks with a dip of at least 8 % of its height (0.04 mV) between them, or is M-shaped (R-s-R' with the s under 25 % of the smaller R), in most dominant beats"),
    "rsr_prime": FeatureSpec("bool", "lead", "RSR' pattern: a second positive wave (R', >= 0.05 mV) after the S wave, in most dominant beats"),
    "qr_pattern": FeatureSpec("bool", "lead", "qR pattern: a q wave followed by an R wave larger than the q and any S, in most dominant beats"),
    "rs_pattern": FeatureSpec("bool", "lead", "rS pattern: no q wave, an R wave smaller than the S wave after it, in most dominant beats"),
    "monophasic_r": FeatureSpec("bool", "lead", "monophasic R: no q deeper than 10 % of R, no S deeper than 20 % of R (a discordant ST onset), no R' unless M-shaped, in most dominant beats"),
    "qs_pattern": FeatureSpec("bool", "lead", "QS complex: no positive wave at all, in most dominant beats"),
    "pathological_q": FeatureSpec("bool", "lead", "ERB's pathological Q: QS; or q > 30 ms deeper than 0.075 mV (V1-V4) or than 1/5 of the R (other leads); or a deep S (> 0.5 mV) after a tiny r (< 0.1 mV)"),
    "slurred_s": FeatureSpec("bool", "lead", "broad (slurred) S: S wave longer than the R before it, or longer than 40 ms, in most dominant beats"),
    "premature_qrs_net_mv": FeatureSpec("mV", "lead", "net QRS (largest positive minus largest negative deflection) of the premature beats premature_qrs_ms is read on"),
    "st_j60_mv": FeatureSpec("mV", "lead", "ST level 60 ms after the J point, relative to the PR baseline"),
    "st_j_mv": FeatureSpec("mV", "lead", "level at the J point (QRS offset), relative to the 20 ms before QRS onset"),
    "qrs_axis_deg": FeatureSpec("deg", "window", "frontal QRS axis from net QRS in I and aVF"),
    "sokolow_mv": FeatureSpec("mV", "window", "Sokolow-Lyon index S(V1) + max(R(V5), R(V6))"),
    "cornell_product_mvs": FeatureSpec("mV*s", "window", "Cornell product (R(aVL) + S(V3)) x QRS duration"),
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
