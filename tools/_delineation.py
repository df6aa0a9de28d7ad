"""The delineation result types and the fixed internal rate (shared by :mod:`measure` and its summaries).

Every window is delineated at ``INTERNAL_FS_HZ`` whatever its recording rate:
a 100 Hz PTB-XL record is band-limited resampled to 500 Hz first, so that
filters, slopes and walk-out steps see the same waveform at every rate, and
marks are kept in milliseconds (``times_ms``, sub-sample) as well as in the
record's own samples (``points``, rounded). Intervals are computed from the
millisecond marks, so a QRS duration no longer moves in steps of 10 ms at 100 Hz.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

#: Rate (Hz) every window is delineated at.
INTERNAL_FS_HZ = 500.0


@dataclass(frozen=True)
class LeadFiducials:
    """One lead's marks: ``points[name][k]`` is the absolute sample of beat k's mark (-1: none).

    ``times_ms[name][k]`` is the same mark in ms from the record start (NaN: none),
    at the internal rate's resolution. ``amplitudes_mv`` and ``morphology`` hold
    per-beat values (NaN where not measured; see :mod:`ecgtrace.tools._delineate_waves`).
    """

    lead: str
    points: dict[str, np.ndarray]
    amplitudes_mv: dict[str, np.ndarray]
    p_present: np.ndarray
    p_wave: dict[str, Any] = field(default_factory=dict)  # the lead-level P decision (see _delineate_p.p_wave_rule)
    times_ms: dict[str, np.ndarray] = field(default_factory=dict)
    morphology: dict[str, np.ndarray] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        def num(v: float, nd: int) -> float | None:
            return None if not np.isfinite(v) else round(float(v), nd)

        return {
            "lead": self.lead,
            "points": {k: [int(v) for v in arr] for k, arr in self.points.items()},
            "times_ms": {k: [num(v, 1) for v in arr] for k, arr in self.times_ms.items()},
            "amplitudes_mv": {k: [num(v, 4) for v in arr] for k, arr in self.amplitudes_mv.items()},
            "morphology": {k: [num(v, 4) for v in np.asarray(arr, dtype=float)] for k, arr in self.morphology.items()},
            "p_present": [bool(v) for v in self.p_present],
            "p_wave": dict(self.p_wave),
        }


@dataclass(frozen=True)
class Delineation:
    """Fiducials of every lead of a window, for the beats ``beat_samples`` (absolute)."""

    fs_hz: float
    sampfrom: int
    n_samples: int
    leads: tuple[str, ...]
    beat_samples: np.ndarray
    beat_source: str  # "given" or "detected: <detector>"
    per_lead: dict[str, LeadFiducials]
    params: dict[str, Any] = field(default_factory=dict)
    version: str = "2"
    atrial: dict[str, Any] = field(default_factory=dict)  # P waves found independently of the QRS (see _atrial)

    @property
    def provenance(self) -> dict[str, Any]:
        return {
            "source": "computed",
            "method": "ecgtrace.measure.delineate",
            "version": self.version,
            "params": {"beats": self.beat_source, "fs_hz": float(self.fs_hz), **self.params},
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "fs_hz": float(self.fs_hz),
            "sampfrom": int(self.sampfrom),
            "n_samples": int(self.n_samples),
            "leads": list(self.leads),
            "beat_samples": [int(b) for b in self.beat_samples],
            "per_lead": {lead: f.to_json() for lead, f in self.per_lead.items()},
            "atrial": dict(self.atrial),
            "provenance": self.provenance,
        }


def rate_ratio(fs_hz: float, internal_hz: float = INTERNAL_FS_HZ) -> Fraction:
    """``internal / fs`` as a small fraction (up/down factors of the polyphase resampler)."""
    return Fraction(internal_hz / float(fs_hz)).limit_denominator(1000)


def to_internal(signal_mv: np.ndarray, fs_hz: float, internal_hz: float = INTERNAL_FS_HZ) -> tuple[np.ndarray, float]:
    """``(signal at the internal rate, exact internal rate)``; NaNs are bridged first (linear)."""
    from scipy.signal import resample_poly

    x = np.asarray(signal_mv, dtype=np.float64)
    ratio = rate_ratio(fs_hz, internal_hz)
    if ratio == 1:
        return x.copy(), float(fs_hz)
    x = x.copy()
    for j in range(x.shape[1]):
        bad = ~np.isfinite(x[:, j])
        if bad.any():
            good = np.flatnonzero(~bad)
            x[bad, j] = np.interp(np.flatnonzero(bad), good, x[good, j]) if good.size else 0.0
    up = resample_poly(x, ratio.numerator, ratio.denominator, axis=0, padtype="line")
    return up, float(fs_hz) * ratio.numerator / ratio.denominator


def marks_to_record(marks: np.ndarray, internal_hz: float, fs_hz: float, sampfrom: int, n_samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Internal-rate local marks (-1: none) -> ``(absolute record samples, absolute ms)`` of a window of ``n_samples``.

    A mark on the window's last internal samples rounds to its last record sample, never past
    it (at 250 Hz read at 500 Hz internally, internal sample 2n - 1 is record sample n - 0.5).
    """
    ok = marks >= 0
    t_ms = np.where(ok, marks * (1000.0 / internal_hz) + sampfrom * 1000.0 / fs_hz, np.nan)
    local = np.minimum(np.round(marks * fs_hz / internal_hz), max(n_samples - 1, 0))
    samples = np.where(ok, local + sampfrom, -1).astype(np.int64)
    return samples, t_ms
