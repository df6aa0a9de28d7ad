"""Whole-record statistics, report prose and evidence explanations, computed from a bundle."""

from __future__ import annotations

from typing import Any

import numpy as np

from ecgtrace.agents.holter.facts import Facts
from ecgtrace.contracts.vocabulary import KINDS, NORMAL, NORMAL_DIAGNOSIS, NORMAL_LABELS, QA_EVENT_KINDS

#: Human labels (singular, plural) of each finding.
LABELS: dict[str, tuple[str, str]] = {
    **{k: (KINDS[k].singular, KINDS[k].plural) for k in QA_EVENT_KINDS}, NORMAL: NORMAL_LABELS,
}
#: Diagnosis answers: the label of a window's single finding.
DIAGNOSIS_LABELS: dict[str, str] = {**{k: KINDS[k].diagnosis for k in QA_EVENT_KINDS}, NORMAL: NORMAL_DIAGNOSIS}
#: The other way round: diagnosis label -> kind (``"premature atrial contraction"`` -> ``"pac"``).
KIND_OF_LABEL: dict[str, str] = {label: kind for kind, label in DIAGNOSIS_LABELS.items()}
#: The fields of the statistical overview (the JSON report's keys).
STATISTICS_FIELDS = ("duration_s", "total_beats", "mean_hr_bpm", "max_hr_bpm", "min_hr_bpm", "pct_time_hr_gt_100", "pct_time_hr_lt_60",
                     "pac_total", "pac_pct", "pvc_total", "pvc_pct", "couplets", "runs", "bigeminy_episodes", "trigeminy_episodes", "pauses", "rhythm")
#: The PAC/PVC breakdowns a prose report adds (episode counts): single, paired, runs, bigeminy, trigeminy, non-conducted.
#: Ventricular pairs, bigeminy and trigeminy are ``couplets``, ``bigeminy_episodes`` and ``trigeminy_episodes``.
BREAKDOWN_FIELDS = ("pvc_single", "pvc_runs", "pac_single", "pac_pairs", "pac_runs", "pac_bigeminy", "pac_trigeminy", "pac_nonconducted")
#: Every statistic a report can hold.
REPORT_FIELDS = STATISTICS_FIELDS + BREAKDOWN_FIELDS
#: Rhythm findings a report's rhythm names, in the order it names them (the first four as before the Holtercare vocabulary).
RHYTHM_KINDS = ("af", "avb1", "sinus_tachycardia", "sinus_bradycardia", "afl", "atrial_tachycardia", "avb2_mobitz1", "avb2_mobitz2",
                "avb_2to1", "avb3", "junctional_rhythm", "ventricular_escape_rhythm")


def rhythm_text(facts: Facts) -> str:
    """``"sinus rhythm with episodes of atrial fibrillation and first-degree AV block"``."""
    extras = [LABELS[k][1] for k in RHYTHM_KINDS if facts.events_of(k)]
    dominant = "sinus rhythm"
    af_ms = sum(e["offset_ms"] - e["onset_ms"] for e in facts.events_of("af"))
    if af_ms > 0.5 * facts.duration_ms:
        dominant, extras = "atrial fibrillation", [x for x in extras if "atrial fibrillation" not in x]
    if not extras:
        return dominant
    return dominant + " with " + (", ".join(extras[:-1]) + " and " + extras[-1] if len(extras) > 1 else extras[0])


def statistics(facts: Facts) -> dict[str, Any]:
    """The statistical overview (every field of :data:`STATISTICS_FIELDS`)."""
    n = int(facts.beat_ms.size)
    n_s = int(np.count_nonzero(facts.classes == "S"))
    n_v = int(np.count_nonzero(facts.classes == "V"))
    hr = facts.hr
    count = lambda *kinds: sum(len(facts.events_of(k)) for k in kinds)  # noqa: E731
    return {
        "duration_s": round(facts.duration_ms / 1000.0, 1),
        "total_beats": n,
        "mean_hr_bpm": hr.get("mean_hr_bpm"),
        "max_hr_bpm": (hr.get("max") or {}).get("hr_bpm"),
        "min_hr_bpm": (hr.get("min") or {}).get("hr_bpm"),
        "pct_time_hr_gt_100": hr.get("pct_time_hr_gt_100"),
        "pct_time_hr_lt_60": hr.get("pct_time_hr_lt_60"),
        "pac_total": n_s,
        "pac_pct": round(100.0 * n_s / n, 2) if n else 0.0,
        "pvc_total": n_v,
        "pvc_pct": round(100.0 * n_v / n, 2) if n else 0.0,
        "couplets": count("v_couplet"),
        "runs": count("vt", "svt"),
        "bigeminy_episodes": count("v_bigeminy"),
        "trigeminy_episodes": count("v_trigeminy"),
        "pauses": count("pause"),
        "rhythm": rhythm_text(facts),
    }


def ectopy_breakdown(facts: Facts) -> dict[str, int]:
    """The PAC/PVC breakdowns (:data:`BREAKDOWN_FIELDS`): isolated beats, pairs, runs, bigeminy and trigeminy episodes, non-conducted PACs."""
    count = lambda *kinds: sum(len(facts.events_of(k)) for k in kinds)  # noqa: E731
    return {"pvc_single": count("pvc"), "pvc_runs": count("vt"), "pac_single": count("pac"), "pac_pairs": count("s_couplet"),
            "pac_runs": count("svt", "s_run"), "pac_bigeminy": count("s_bigeminy"), "pac_trigeminy": count("s_trigeminy"),
            "pac_nonconducted": count("blocked_pac")}


def report_statistics(facts: Facts) -> dict[str, Any]:
    """Every statistic a report holds (:data:`REPORT_FIELDS`), plus the times of the HR extrema (``max_hr_t_ms``, ``min_hr_t_ms``)."""
    hr_max, hr_min = facts.hr.get("max") or {}, facts.hr.get("min") or {}
    return {**statistics(facts), **ectopy_breakdown(facts), "max_hr_t_ms": hr_max.get("t_ms"), "min_hr_t_ms": hr_min.get("t_ms")}


def rhythm_clues(facts: Facts, event: dict[str, Any] | None, t0_ms: int, t1_ms: int) -> list[str]:
    """Rhythm and timing clues for a window's finding, from the beat times and classes."""
    i0, i1 = facts.beat_range(t0_ms, t1_ms)
    beat_ms = facts.beat_ms
    rr = np.diff(beat_ms[max(i0 - 1, 0): i1]).astype(float)
    clues: list[str] = []
    if event is None:
        if rr.size:
            clues.append(f"regular RR intervals (mean {rr.mean():.0f} ms, {60000.0 / rr.mean():.0f} bpm) with no premature beats")
        return clues
    kind, first, last = event["kind"], event.get("first_beat"), event.get("last_beat")
    if kind in ("pac", "pvc", "v_couplet", "vt", "svt") and first is not None and first >= 4:
        base = float(np.median(np.diff(beat_ms[first - 4: first])))
        coupling = float(beat_ms[first] - beat_ms[first - 1])
        clues.append(f"the beat at {int(beat_ms[first])} ms comes early: RR {coupling:.0f} ms against a preceding RR of {base:.0f} ms ({100 * coupling / base:.0f}%)")
        if last is not None and last + 1 < beat_ms.size:
            clues.append(f"the next RR after the ectopy is {float(beat_ms[last + 1] - beat_ms[last]):.0f} ms")
        n = event["n_beats"]
        if n >= 2:
            clues.append(f"{n} consecutive ectopic beats from {event['onset_ms']} ms to {event['offset_ms']} ms" + (f" at {event['rate_bpm']} bpm" if event.get("rate_bpm") else ""))
    elif kind in ("v_bigeminy", "v_trigeminy"):
        pattern = "every second beat" if kind == "v_bigeminy" else "every third beat"
        clues.append(f"{pattern} is premature and ventricular, from {event['onset_ms']} ms to {event['offset_ms']} ms")
    elif kind == "pause":
        clues.append(f"an RR interval of {event['offset_ms'] - event['onset_ms']} ms between the beats at {event['onset_ms']} ms and {event['offset_ms']} ms")
    elif kind == "af" and rr.size > 2:
        clues.append(f"irregularly irregular RR intervals: coefficient of variation {rr.std() / rr.mean():.2f} over {rr.size} intervals, mean {60000.0 / rr.mean():.0f} bpm")
    elif kind in ("sinus_tachycardia", "sinus_bradycardia", "avb1") and rr.size:
        clues.append(f"regular RR intervals of {rr.mean():.0f} ms on average ({60000.0 / rr.mean():.0f} bpm)")
    return clues


def morphology_clues(measurements: Any, classes_in_window: str) -> list[str]:
    """Morphology clues from :func:`ecgtrace.tools.measure.measure_window` output (first lead with values)."""
    clues: list[str] = []
    per_lead = getattr(measurements, "per_lead", None) or {}
    for name, lead in per_lead.items():
        parts = []
        for key, label in (("qrs_ms", "QRS"), ("pr_ms", "PR"), ("qt_ms", "QT"), ("qtc_fridericia_ms", "QTc (Fridericia)")):
            try:
                value = lead.value(key)
            except (KeyError, AttributeError):
                value = None
            if isinstance(value, (int, float)) and np.isfinite(value):
                parts.append(f"{label} {float(value):.0f} ms")
        if parts:
            clues.append(f"lead {name}: median " + ", ".join(parts))
            break
    if "V" in classes_in_window:
        clues.append("the ectopic ventricular beats have a wide QRS with no preceding P wave")
    elif "S" in classes_in_window:
        clues.append("the premature supraventricular beats have a narrow QRS")
    return clues
