"""Read-only view of an annotation bundle (the sidecar written by the annotator).

Nodes get the bundle path from graph state and call :func:`load_facts`, which
caches the parsed bundle per process, so 13 template writers running in
parallel parse a 24 h beat table once.

Heart rate is the Holter 8-beat average of ``ecgtrace.tools.hr`` (valid RRs
between normal beats, artifact spans excluded), stamped at the last beat.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import numpy as np

HR_K_BEATS = 8


def load_facts(path: str) -> Facts:
    """The parsed bundle at ``path`` (cached per process; bundles are immutable once written)."""
    return _load(path)


@functools.lru_cache(maxsize=16)
def _load(path: str) -> Facts:
    with open(path, encoding="utf-8") as handle:
        return Facts(json.load(handle))


def _spans_samples(noise_ms: list[list[int]], fs_hz: float) -> list[tuple[int, int]]:
    return [(int(a * fs_hz / 1000.0), int(b * fs_hz / 1000.0)) for a, b in noise_ms]


def hr_series(samples: np.ndarray, classes: np.ndarray, fs_hz: float, noise_ms: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """``(t_ms, hr_bpm)`` of the Holter 8-beat average (``ecgtrace.tools.hr.average_hr``)."""
    from ecgtrace.tools.hr import average_hr

    series = average_hr(np.asarray(samples, dtype=np.int64), np.asarray(classes), fs_hz, artifact_spans=_spans_samples(noise_ms, fs_hz))
    return np.asarray(series.t_ms, dtype=np.int64), np.asarray(series.hr_bpm, dtype=float)


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value, default=lambda o: o.item() if hasattr(o, "item") else str(o)))


def hr_summary(samples: np.ndarray, classes: np.ndarray, fs_hz: float, duration_ms: int, noise_ms: list[list[int]]) -> dict[str, Any]:
    """Mean/max/min HR, % time above 100 / below 60 bpm (``ecgtrace.tools.hr``) and per-hour summaries."""
    from ecgtrace.tools.hr import hr_summary as tool_summary

    samples = np.asarray(samples, dtype=np.int64)
    n_samples = int(round(duration_ms * fs_hz / 1000.0))
    summary = _json(tool_summary(samples, np.asarray(classes), fs_hz, artifact_spans=_spans_samples(noise_ms, fs_hz), n_samples=n_samples))
    out: dict[str, Any] = {"method": "ecgtrace.tools.hr", "k_beats": HR_K_BEATS, "provenance": summary.get("provenance"),
                           "max": summary["max"] if summary["max"].get("t_ms") is not None else None,
                           "min": summary["min"] if summary["min"].get("t_ms") is not None else None,
                           "mean_hr_bpm": summary.get("mean_hr_bpm"),
                           "pct_time_hr_gt_100": summary.get("tachy_burden_pct"), "pct_time_hr_lt_60": summary.get("brady_burden_pct")}
    beat_ms = np.round(samples * (1000.0 / fs_hz)).astype(np.int64)
    t, hr = hr_series(samples, classes, fs_hz, noise_ms)
    hourly = []
    for h in range(int(np.ceil(duration_ms / 3_600_000.0))):
        t0, t1 = h * 3_600_000, min((h + 1) * 3_600_000, duration_ms)
        n_beats = int(np.count_nonzero((beat_ms >= t0) & (beat_ms < t1)))
        in_hour = hr[(t >= t0) & (t < t1)]
        hourly.append({"hour": h, "t0_ms": int(t0), "t1_ms": int(t1), "beats": n_beats,
                       "mean_hr_bpm": round(60000.0 * n_beats / max(t1 - t0, 1), 1),
                       "min_hr_bpm": round(float(in_hour.min()), 1) if in_hour.size else None,
                       "max_hr_bpm": round(float(in_hour.max()), 1) if in_hour.size else None})
    out["hourly"] = hourly
    return out


class Facts:
    """Accessors over one bundle: beats, events, noise, heart rate."""

    def __init__(self, bundle: dict[str, Any]) -> None:
        self.bundle = bundle
        self.record: dict[str, Any] = bundle["record"]
        self.patient: dict[str, Any] = bundle.get("patient") or {}
        self.source: str = bundle["source"]
        self.provenance: dict[str, Any] = bundle["provenance"]
        self.fs_hz: float = float(bundle["fs_hz"])
        self.duration_ms: int = int(bundle["duration_ms"])
        self.beat_ms = np.asarray(bundle["beat_ms"], dtype=np.int64)
        self.beat_samples = np.asarray(bundle["beat_samples"], dtype=np.int64)
        self.classes = np.frombuffer(bundle["beat_classes"].encode("ascii"), dtype="S1").astype(str) if bundle["beat_classes"] else np.zeros(0, "<U1")
        self.class_text: str = bundle["beat_classes"]
        self.events: list[dict[str, Any]] = bundle["events"]
        self.noise: list[list[int]] = bundle["noise_spans_ms"]
        self.seams_ms: list[int] = bundle.get("seams_ms") or []
        self.hr: dict[str, Any] = bundle["hr"]
        self._hr_t, self._hr_v = hr_series(self.beat_samples, self.classes, self.fs_hz, self.noise)

    # ---- queries
    def events_of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == kind]

    def kinds(self) -> list[str]:
        return sorted({e["kind"] for e in self.events})

    def beat_range(self, t0_ms: float, t1_ms: float) -> tuple[int, int]:
        """Indices ``[i0, i1)`` of the beats with ``t0_ms <= t < t1_ms``."""
        return int(np.searchsorted(self.beat_ms, t0_ms, "left")), int(np.searchsorted(self.beat_ms, t1_ms, "left"))

    def events_overlapping(self, t0_ms: float, t1_ms: float, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events if e["offset_ms"] >= t0_ms and e["onset_ms"] < t1_ms and (kind is None or e["kind"] == kind)]

    def noise_near(self, t0_ms: float, t1_ms: float, margin_ms: float = 0.0) -> list[list[int]]:
        return [s for s in self.noise if s[1] >= t0_ms - margin_ms and s[0] <= t1_ms + margin_ms]

    def hr_at(self, t_ms: float) -> float | None:
        """HR (bpm) of the series point nearest ``t_ms``."""
        if self._hr_t.size == 0:
            return None
        i = int(np.clip(np.searchsorted(self._hr_t, t_ms), 1, self._hr_t.size - 1)) if self._hr_t.size > 1 else 0
        if i > 0 and abs(self._hr_t[i - 1] - t_ms) <= abs(self._hr_t[i] - t_ms):
            i -= 1
        return float(self._hr_v[i])

    def hr_near(self, t_ms: float, radius_ms: float) -> tuple[float, float] | None:
        """(min, max) HR of series points within ``radius_ms`` of ``t_ms``."""
        mask = np.abs(self._hr_t - t_ms) <= radius_ms
        if not mask.any():
            return None
        return float(self._hr_v[mask].min()), float(self._hr_v[mask].max())

    def hr_series(self) -> tuple[np.ndarray, np.ndarray]:
        return self._hr_t, self._hr_v

    def summary(self) -> dict[str, Any]:
        """Small plain-JSON summary for graph state and the planner."""
        counts: dict[str, int] = {}
        for e in self.events:
            counts[e["kind"]] = counts.get(e["kind"], 0) + 1
        return {"source": self.source, "n_beats": int(self.beat_ms.size), "duration_ms": self.duration_ms,
                "event_counts": dict(sorted(counts.items())), "noise_spans": len(self.noise)}
