"""Interval and amplitude summaries per lead from a :class:`~ecgtrace.tools._delineation.Delineation`.

Per beat ``k`` (R peak ``b_k``, preceding RR ``rr_k`` in s):
PR = QRS onset - P onset; QRS = QRS offset - onset; QT = T offset - QRS onset;
QTc Bazett = QT / sqrt(rr_k); QTc Fridericia = QT / rr_k^(1/3), all from the
marks in ms (internal-rate resolution, not the record's sample grid). A lead's
value is the median over the beats where the quantity exists, and lists those
beats. The QRS morphology of :mod:`ecgtrace.tools._delineate_waves` is
summarized the same way; its yes/no patterns (``r_notched``, ``rsr_prime`` ...)
as the share of beats that show them (0-1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ecgtrace.tools._delineate_filters import preprocess
from ecgtrace.tools._delineate_waves import MORPHOLOGY
from ecgtrace.tools._delineation import Delineation
from ecgtrace.tools.records import SignalWindow

INTERVALS_MS = ("rr_ms", "pr_ms", "qrs_ms", "qt_ms", "qtc_bazett_ms", "qtc_fridericia_ms")
AMPLITUDES_MV = ("p_amp_mv", "r_amp_mv", "s_amp_mv", "t_amp_mv", "st_j60_mv")
MEDIAN_BEAT_MS = (-350.0, 550.0)
#: Per-beat yes/no morphology (summarized as the share of beats, 0-1) and the units of the others.
MORPHOLOGY_FLAGS = ("r_notched", "qs_pattern", "qr_pattern", "rs_pattern", "monophasic_r", "rsr_prime", "pathological_q")
MORPHOLOGY_NAMES = tuple(k for k in MORPHOLOGY if k != "st_j60_mv") + ("pathological_q",)


@dataclass(frozen=True)
class LeadMeasurements:
    """One lead's summary: ``values[name] = {value, unit, n, sd, beats}`` plus per-beat arrays."""

    lead: str
    values: dict[str, dict[str, Any]]
    per_beat: dict[str, np.ndarray]
    p_wave: dict[str, Any]
    median_beat: dict[str, Any]

    def value(self, name: str) -> float | None:
        return self.values[name]["value"]

    def to_json(self, *, include_median_beat: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"lead": self.lead, **{k: dict(v) for k, v in self.values.items()}, "p_wave": dict(self.p_wave)}
        if include_median_beat:
            out["median_beat"] = dict(self.median_beat)
        return out


@dataclass(frozen=True)
class WindowMeasurements:
    """Measurements of every lead of a window, with the delineation they rest on."""

    fs_hz: float
    sampfrom: int
    n_samples: int
    beat_samples: np.ndarray
    per_lead: dict[str, LeadMeasurements]
    delineation: Delineation
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def provenance(self) -> dict[str, Any]:
        prov = dict(self.delineation.provenance)
        prov["method"] = "ecgtrace.measure.measure_window"
        return prov

    def to_json(self, *, include_median_beat: bool = True, include_fiducials: bool = False) -> dict[str, Any]:
        out = {
            "fs_hz": float(self.fs_hz),
            "t0_s": round(self.sampfrom / self.fs_hz, 6),
            "t1_s": round((self.sampfrom + self.n_samples) / self.fs_hz, 6),
            "sampfrom": int(self.sampfrom),
            "n_samples": int(self.n_samples),
            "beat_samples": [int(b) for b in self.beat_samples],
            "leads": {lead: m.to_json(include_median_beat=include_median_beat) for lead, m in self.per_lead.items()},
            "atrial": dict(self.delineation.atrial),
            "provenance": self.provenance,
        }
        if include_fiducials:
            out["fiducials"] = {lead: f.to_json() for lead, f in self.delineation.per_lead.items()}
        return out


def _summary(values: np.ndarray, beats: np.ndarray, unit: str, decimals: int) -> dict[str, Any]:
    ok = np.isfinite(values)
    if not ok.any():
        return {"value": None, "unit": unit, "n": 0, "sd": None, "beats": []}
    v = values[ok]
    return {
        "value": round(float(np.median(v)), decimals),
        "unit": unit,
        "n": int(v.size),
        "sd": round(float(np.std(v)), decimals) if v.size > 1 else 0.0,
        "beats": [int(b) for b in beats[ok]],
    }


def _share(flags: np.ndarray, beats: np.ndarray) -> dict[str, Any]:
    """Share (0-1) of the measured beats that show a yes/no pattern, and the beats that show it."""
    ok = np.isfinite(flags)
    if not ok.any():
        return {"value": None, "unit": "fraction", "n": 0, "sd": None, "beats": []}
    return {"value": round(float(np.mean(flags[ok] > 0.5)), 3), "unit": "fraction", "n": int(ok.sum()), "sd": None,
            "beats": [int(b) for b in beats[ok & (flags > 0.5)]]}


def _per_beat(times_ms: dict[str, np.ndarray], beats: np.ndarray, fs_hz: float) -> dict[str, np.ndarray]:
    """Intervals per beat (ms) from the marks in ms (NaN where a mark is missing)."""
    rr = np.full(beats.size, np.nan)
    if beats.size > 1:
        rr[1:] = np.diff(beats) * (1000.0 / fs_hz)
    qt = times_ms["t_off"] - times_ms["qrs_on"]
    rr_s = rr / 1000.0
    with np.errstate(invalid="ignore"):
        return {
            "rr_ms": rr,
            "pr_ms": times_ms["qrs_on"] - times_ms["p_on"],
            "qrs_ms": times_ms["qrs_off"] - times_ms["qrs_on"],
            "qt_ms": qt,
            "qtc_bazett_ms": qt / np.sqrt(rr_s),
            "qtc_fridericia_ms": qt / np.cbrt(rr_s),
        }


def _median_beat(y: np.ndarray, local_beats: np.ndarray, fs_hz: float) -> dict[str, Any]:
    a_ms, b_ms = MEDIAN_BEAT_MS
    a, b = int(round(a_ms * fs_hz / 1000.0)), int(round(b_ms * fs_hz / 1000.0))
    usable = [int(r) for r in local_beats if r + a >= 0 and r + b < y.size]
    if not usable:
        return {"t0_ms": a_ms, "fs_hz": float(fs_hz), "values_mv": [], "beats": [], "unit": "mV"}
    stack = np.stack([y[r + a : r + b + 1] for r in usable])
    med = np.median(stack, axis=0)
    return {"t0_ms": a_ms, "fs_hz": float(fs_hz), "values_mv": [round(float(v), 4) for v in med], "beats_local": usable, "unit": "mV"}


def measure_delineation(window: SignalWindow, delineation: "Delineation") -> WindowMeasurements:
    """Summaries per lead (see the module docstring)."""
    fs = delineation.fs_hz
    beats = delineation.beat_samples
    local = beats - window.sampfrom
    per_lead = {}
    for j, lead in enumerate(delineation.leads):
        fid = delineation.per_lead[lead]
        per_beat = _per_beat(fid.times_ms, beats, fs)
        values = {}
        for name in INTERVALS_MS:
            values[name] = _summary(per_beat[name], beats, "ms", 1)
        for name in AMPLITUDES_MV:
            per_beat[name] = fid.amplitudes_mv[name]
            values[name] = _summary(fid.amplitudes_mv[name], beats, "mV", 3)
        for name in MORPHOLOGY_NAMES:
            per_beat[name] = fid.morphology[name]
            unit = "fraction" if name in MORPHOLOGY_FLAGS else ("ms" if name.endswith("_ms") else "mV")
            values[name] = _summary(fid.morphology[name], beats, unit, 3) if unit != "fraction" else _share(fid.morphology[name], beats)
        p_wave = dict(fid.p_wave)
        p_wave["beats"] = [int(b) for b in beats[fid.p_present]]
        y = preprocess(np.asarray(window.signal_mv[:, j]), fs)[0]
        med = _median_beat(y, local, fs)
        med["beats"] = [int(b) + window.sampfrom for b in med.pop("beats_local", [])]
        per_lead[lead] = LeadMeasurements(lead=lead, values=values, per_beat=per_beat, p_wave=p_wave, median_beat=med)
    return WindowMeasurements(
        fs_hz=fs,
        sampfrom=int(window.sampfrom),
        n_samples=int(window.signal_mv.shape[0]),
        beat_samples=beats,
        per_lead=per_lead,
        delineation=delineation,
    )
