"""The plain-JSON summary of an annotated record (internal to :mod:`ecgtrace.tools.annotate`).

It holds what a Holter report states: duration, total beats, beats per class
with percentages, mean/min/max HR with the time of each extreme, tachycardia
and bradycardia burdens, event counts (isolated PAC/PVC, couplets, runs,
bigeminy/trigeminy, pauses, AF) and the dominant rhythm.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ecgtrace.tools.annotations import AAMI_ORDER
from ecgtrace.tools.rhythm import count_events


def _rhythm(af_s: float, analysed_s: float) -> str:
    if analysed_s <= 0:
        return "unknown"
    share = af_s / analysed_s
    if share >= 0.95:
        return "atrial fibrillation"
    if share > 0:
        return "sinus rhythm with paroxysmal atrial fibrillation"
    return "sinus rhythm"


def _extreme(e: dict[str, Any]) -> dict[str, Any]:
    evidence = e.get("evidence") or {}
    return {"hr_bpm": e.get("hr_bpm"), "t_ms": e.get("t_ms"), "beat": e.get("beat"), "window_t0_ms": evidence.get("t0_ms"), "window_t1_ms": evidence.get("t1_ms")}


def build_summary(annotation: Any, record_hash: str) -> dict[str, Any]:
    """Summary dict of an :class:`~ecgtrace.tools.annotate.Annotation`."""
    classes = np.asarray(annotation.beat_classes)
    n = int(classes.size)
    per_class = {c: int(np.count_nonzero(classes == c)) for c in AAMI_ORDER}
    duration_s = annotation.n_samples / annotation.fs_hz
    af_s = sum(e["offset_ms"] - e["onset_ms"] for e in annotation.af_episodes) / 1000.0
    events = count_events(annotation.events)
    hr = annotation.hr
    longest_pause = max((e.get("duration_ms", 0) for e in annotation.events if e["kind"] == "pause"), default=None)
    return {
        "record": annotation.record.get("name"),
        "record_path": annotation.record.get("path"),
        "record_sha256": record_hash,
        "fs_hz": annotation.fs_hz,
        "leads": annotation.record.get("leads"),
        "duration_s": round(duration_s, 3),
        "n_beats": n,
        "beats_per_class": per_class,
        "beats_per_class_pct": {c: round(100.0 * k / n, 3) if n else 0.0 for c, k in per_class.items()},
        "pac_total": per_class["S"],
        "pvc_total": per_class["V"],
        "events": events,
        "longest_pause_ms": longest_pause,
        "af": {"n_episodes": len(annotation.af_episodes), "burden_s": round(af_s, 3), "burden_pct": round(100.0 * af_s / duration_s, 3) if duration_s else 0.0},
        "rhythm": _rhythm(af_s, duration_s),
        "hr": {
            "mean_hr_bpm": hr.get("mean_hr_bpm"),
            "min": _extreme(hr.get("min") or {}),
            "max": _extreme(hr.get("max") or {}),
            "tachy_burden_pct": hr.get("tachy_burden_pct"),
            "brady_burden_pct": hr.get("brady_burden_pct"),
            "averaging": hr.get("averaging"),
            "window_beats": hr.get("window_beats"),
        },
        "artifact_s": round(sum(b - a for a, b in annotation.artifact_spans) / annotation.fs_hz, 3),
        "provenance": annotation.provenance,
    }
