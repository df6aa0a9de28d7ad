"""Heart-rate series, Holter HR summary, burdens and HR extrema from a beat stream.

Holter conventions used here (all parameters in :data:`DEFAULT_HR_PARAMS`):

- Only *valid* RR intervals count: both bounding beats are normal (class not in
  ``exclude_classes``, so ectopic beats and the coupling and compensatory RRs
  around them are left out), the RR lies within ``[rr_min_ms, rr_max_ms]`` and
  does not overlap an artifact span. AF beats are normal beats and count unless
  ``include_af`` is False.
- The averaged HR is the mean of ``window_beats`` (8) consecutive valid RRs,
  ``hr_bpm = 60000 / mean(rr_ms)``. A window may skip at most
  ``max_excluded_rr`` invalid RRs (otherwise it spans too much of the record
  to be an 8-beat average).
- The time of an averaged value is the R peak of the window's last beat
  (``timestamp="last"``) or of its middle beat (``"center"``); the evidence
  window runs from the R peak of the window's first beat to that of its last.
- Burdens are time-weighted: each valid RR counts its duration with the
  averaged HR of the window that ends on it; percentages are of the analysed
  time (the sum of those RRs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ecgtrace.contracts.common import provenance
from ecgtrace.tools.af import as_beat_samples

HR_VERSION = "1.0"

DEFAULT_HR_PARAMS: dict[str, Any] = {
    "window_beats": 8,
    "max_excluded_rr": 4,
    "exclude_classes": ("S", "V", "F", "Q"),
    "rr_min_ms": 250.0,
    "rr_max_ms": 3000.0,
    "include_af": True,
    "tachy_min_bpm": 100.0,
    "brady_max_bpm": 60.0,
    "timestamp": "last",
}


def hr_params(**overrides: Any) -> dict[str, Any]:
    """Defaults merged with ``overrides``; unknown names raise ``TypeError``."""
    unknown = set(overrides) - set(DEFAULT_HR_PARAMS)
    if unknown:
        raise TypeError(f"unknown HR parameter(s): {', '.join(sorted(unknown))}")
    p = {**DEFAULT_HR_PARAMS, **overrides}
    p["exclude_classes"] = tuple(p["exclude_classes"])
    if p["timestamp"] not in ("last", "center"):
        raise ValueError(f"timestamp must be 'last' or 'center', got {p['timestamp']!r}")
    if int(p["window_beats"]) < 1:
        raise ValueError("window_beats must be >= 1")
    return p


def _provenance(p: dict[str, Any], method: str) -> dict[str, Any]:
    return provenance("computed", method, HR_VERSION, {k: (list(v) if isinstance(v, tuple) else v) for k, v in p.items()})


def _ms(sample: int | float, fs_hz: float) -> int:
    return int(round(float(sample) * 1000.0 / fs_hz))


def instantaneous_hr_bpm(beat_samples: np.ndarray, fs_hz: float) -> np.ndarray:
    """HR of the RR interval ending at each beat, in bpm (NaN for the first beat)."""
    samples = as_beat_samples(beat_samples)
    hr = np.full(samples.size, np.nan)
    if samples.size > 1:
        rr = np.diff(samples).astype(np.float64)
        with np.errstate(divide="ignore"):
            hr[1:] = np.where(rr > 0, 60.0 * fs_hz / rr, np.nan)
    return hr


def valid_rr_mask(
    beat_samples: np.ndarray,
    beat_classes: np.ndarray | None,
    fs_hz: float,
    *,
    artifact_spans: Sequence[tuple[int, int]] = (),
    af_mask: np.ndarray | None = None,
    **params: Any,
) -> np.ndarray:
    """True where the RR ending at beat ``i`` counts for HR (see the module conventions)."""
    p = hr_params(**params)
    samples = as_beat_samples(beat_samples)
    n = samples.size
    ok = np.zeros(n, dtype=bool)
    if n < 2:
        return ok
    rr_ms = np.diff(samples) * (1000.0 / fs_hz)
    ok[1:] = (rr_ms >= p["rr_min_ms"]) & (rr_ms <= p["rr_max_ms"])
    if beat_classes is not None:
        bad = np.isin(np.asarray(beat_classes).astype(str), list(p["exclude_classes"]))
        ok[1:] &= ~bad[1:] & ~bad[:-1]
    if af_mask is not None and not p["include_af"]:
        af = np.asarray(af_mask, dtype=bool)
        ok[1:] &= ~af[1:] & ~af[:-1]
    for s0, s1 in artifact_spans:
        # RR (samples[i-1], samples[i]) overlaps [s0, s1) when samples[i] > s0 and samples[i-1] < s1
        lo = int(np.searchsorted(samples, int(s0), side="right"))
        hi = int(np.searchsorted(samples, int(s1), side="left"))
        ok[max(lo, 1) : min(hi + 1, n)] = False
    return ok


@dataclass(frozen=True)
class HrSeries:
    """Averaged HR, one value per window of ``window_beats`` valid RRs.

    ``last_beat[k]`` / ``first_beat[k]`` are the beat indices at the window's
    ends (``first_beat`` is the beat that opens the first RR); ``hr_bpm[k]`` is
    the averaged HR; ``t_ms[k]`` the time stamp (see ``timestamp``).
    """

    first_beat: np.ndarray
    last_beat: np.ndarray
    hr_bpm: np.ndarray
    t_ms: np.ndarray
    window_beats: int
    fs_hz: float


def average_hr(
    beat_samples: np.ndarray,
    beat_classes: np.ndarray | None,
    fs_hz: float,
    *,
    artifact_spans: Sequence[tuple[int, int]] = (),
    af_mask: np.ndarray | None = None,
    **params: Any,
) -> HrSeries:
    """The ``window_beats``-average HR series (Holter 8-beat average by default)."""
    p = hr_params(**params)
    samples = as_beat_samples(beat_samples)
    ok = valid_rr_mask(samples, beat_classes, fs_hz, artifact_spans=artifact_spans, af_mask=af_mask, **params)
    idx = np.flatnonzero(ok)
    w = int(p["window_beats"])
    empty = np.zeros(0, dtype=np.int64)
    if idx.size < w:
        return HrSeries(empty, empty, np.zeros(0), empty, w, float(fs_hz))
    rr = (samples[idx] - samples[idx - 1]).astype(np.float64)
    csum = np.concatenate([[0.0], np.cumsum(rr)])
    mean_rr = (csum[w:] - csum[:-w]) / w
    last = idx[w - 1 :]
    first = idx[: idx.size - w + 1] - 1
    keep = (last - first) <= w + int(p["max_excluded_rr"])
    last, first, mean_rr = last[keep], first[keep], mean_rr[keep]
    hr = 60.0 * fs_hz / mean_rr
    stamp_beat = last if p["timestamp"] == "last" else (first + last + 1) // 2
    t_ms = np.round(samples[stamp_beat] * (1000.0 / fs_hz)).astype(np.int64)
    return HrSeries(first.astype(np.int64), last.astype(np.int64), hr, t_ms, w, float(fs_hz))


def _extremum_from_series(series: HrSeries, samples: np.ndarray, kind: str, fs_hz: float, t0_ms: float | None, t1_ms: float | None) -> dict[str, Any] | None:
    sel = np.ones(series.hr_bpm.size, dtype=bool)
    if t0_ms is not None:
        sel &= samples[series.first_beat] * (1000.0 / fs_hz) >= t0_ms
    if t1_ms is not None:
        sel &= samples[series.last_beat] * (1000.0 / fs_hz) <= t1_ms
    cand = np.flatnonzero(sel)
    if cand.size == 0:
        return None
    values = series.hr_bpm[cand]
    k = int(cand[int(np.argmax(values) if kind == "max" else np.argmin(values))])  # ties: earliest
    first, last = int(series.first_beat[k]), int(series.last_beat[k])
    t_ms = int(series.t_ms[k])
    return {
        "kind": kind,
        "hr_bpm": round(float(series.hr_bpm[k]), 2),
        "t_ms": t_ms,
        "sample": int(round(t_ms * fs_hz / 1000.0)),
        "beat": last,
        "evidence": {
            "lead": None,
            "t0_ms": _ms(samples[first], fs_hz),
            "t1_ms": _ms(samples[last], fs_hz),
            "beats": list(range(first, last + 1)),
        },
    }


def hr_extremum(
    beat_samples: np.ndarray,
    beat_classes: np.ndarray | None,
    fs_hz: float,
    kind: str = "max",
    t0_ms: float | None = None,
    t1_ms: float | None = None,
    *,
    artifact_spans: Sequence[tuple[int, int]] = (),
    af_mask: np.ndarray | None = None,
    **params: Any,
) -> dict[str, Any]:
    """Maximum or minimum averaged HR, optionally within ``[t0_ms, t1_ms]``.

    Only windows lying wholly inside ``[t0_ms, t1_ms]`` are considered.

    Returns:
        Plain JSON ``{kind, hr_bpm, t_ms, sample, beat, evidence{lead, t0_ms,
        t1_ms, beats}, window_beats, provenance}``; ``hr_bpm``/``t_ms`` are None
        when no valid window exists.
    """
    if kind not in ("max", "min"):
        raise ValueError(f"kind must be 'max' or 'min', got {kind!r}")
    p = hr_params(**params)
    samples = as_beat_samples(beat_samples)
    series = average_hr(samples, beat_classes, fs_hz, artifact_spans=artifact_spans, af_mask=af_mask, **params)
    found = _extremum_from_series(series, samples, kind, fs_hz, t0_ms, t1_ms)
    if found is None:
        found = {"kind": kind, "hr_bpm": None, "t_ms": None, "sample": None, "beat": None, "evidence": None}
    found["window_beats"] = int(p["window_beats"])
    found["provenance"] = _provenance(p, "hr.hr_extremum")
    if t0_ms is not None or t1_ms is not None:
        found["provenance"]["params"].update({"t0_ms": t0_ms, "t1_ms": t1_ms})
    return found


def per_minute_hr(
    beat_samples: np.ndarray,
    beat_classes: np.ndarray | None,
    fs_hz: float,
    *,
    n_samples: int | None = None,
    artifact_spans: Sequence[tuple[int, int]] = (),
    af_mask: np.ndarray | None = None,
    **params: Any,
) -> list[dict[str, Any]]:
    """Per-minute HR: ``{minute, t0_ms, t1_ms, hr_mean_bpm, n_rr}`` (mean of valid RRs ending in the minute; None when empty)."""
    samples = as_beat_samples(beat_samples)
    ok = valid_rr_mask(samples, beat_classes, fs_hz, artifact_spans=artifact_spans, af_mask=af_mask, **params)
    end = int(n_samples) if n_samples else (int(samples[-1]) + 1 if samples.size else 0)
    n_min = int(np.ceil(end / (60.0 * fs_hz))) if end else 0
    idx = np.flatnonzero(ok)
    minute = np.floor(samples[idx] / (60.0 * fs_hz)).astype(np.int64)
    rr = (samples[idx] - samples[idx - 1]).astype(np.float64)
    count = np.bincount(minute, minlength=n_min)[:n_min] if idx.size else np.zeros(n_min, dtype=np.int64)
    total = np.bincount(minute, weights=rr, minlength=n_min)[:n_min] if idx.size else np.zeros(n_min)
    rows = []
    for m in range(n_min):
        rows.append({
            "minute": m,
            "t0_ms": m * 60000,
            "t1_ms": min((m + 1) * 60000, _ms(end, fs_hz)),
            "hr_mean_bpm": round(float(60.0 * fs_hz * count[m] / total[m]), 2) if count[m] else None,
            "n_rr": int(count[m]),
        })
    return rows


def hr_summary(
    beat_samples: np.ndarray,
    beat_classes: np.ndarray | None,
    fs_hz: float,
    *,
    artifact_spans: Sequence[tuple[int, int]] = (),
    af_mask: np.ndarray | None = None,
    n_samples: int | None = None,
    **params: Any,
) -> dict[str, Any]:
    """Holter HR summary: mean, min and max (with the R-peak time of each), burdens.

    Returns:
        Plain JSON ``{mean_hr_bpm, min, max, tachy_burden_pct, brady_burden_pct,
        analysed_s, recording_s, n_valid_rr, n_beats, averaging, window_beats,
        provenance}`` where ``min``/``max`` are :func:`hr_extremum` results
        (without their own provenance).
    """
    p = hr_params(**params)
    samples = as_beat_samples(beat_samples)
    ok = valid_rr_mask(samples, beat_classes, fs_hz, artifact_spans=artifact_spans, af_mask=af_mask, **params)
    idx = np.flatnonzero(ok)
    rr = (samples[idx] - samples[idx - 1]).astype(np.float64) if idx.size else np.zeros(0)
    series = average_hr(samples, beat_classes, fs_hz, artifact_spans=artifact_spans, af_mask=af_mask, **params)
    # burden: each valid RR weighted by its duration, labelled with the average HR of the window ending on it
    hr_at = np.full(samples.size, np.nan)
    hr_at[series.last_beat] = series.hr_bpm
    hr_rr = hr_at[idx] if idx.size else np.zeros(0)
    has = np.isfinite(hr_rr)
    analysed = float(rr[has].sum()) if has.any() else 0.0
    tachy = float(rr[has & (hr_rr > p["tachy_min_bpm"])].sum()) if has.any() else 0.0
    brady = float(rr[has & (hr_rr < p["brady_max_bpm"])].sum()) if has.any() else 0.0
    extremes = {}
    for kind in ("min", "max"):
        found = _extremum_from_series(series, samples, kind, fs_hz, None, None)
        extremes[kind] = found if found is not None else {"kind": kind, "hr_bpm": None, "t_ms": None, "sample": None, "beat": None, "evidence": None}
    end = int(n_samples) if n_samples else (int(samples[-1]) + 1 if samples.size else 0)
    return {
        "mean_hr_bpm": round(float(60.0 * fs_hz * rr.size / rr.sum()), 2) if rr.size else None,
        "min": extremes["min"],
        "max": extremes["max"],
        "tachy_burden_pct": round(100.0 * tachy / analysed, 3) if analysed else None,
        "brady_burden_pct": round(100.0 * brady / analysed, 3) if analysed else None,
        "analysed_s": round(analysed / fs_hz, 3),
        "recording_s": round(end / fs_hz, 3),
        "n_valid_rr": int(idx.size),
        "n_beats": int(samples.size),
        "window_beats": int(p["window_beats"]),
        "averaging": (
            f"mean of {int(p['window_beats'])} consecutive valid RR intervals (N-N, no ectopic neighbours, "
            f"{p['rr_min_ms']:g}-{p['rr_max_ms']:g} ms, outside artifacts); time = R peak of the window's "
            f"{'last' if p['timestamp'] == 'last' else 'middle'} beat"
        ),
        "provenance": _provenance(p, "hr.hr_summary"),
    }


def hr_series(
    beat_samples: np.ndarray,
    beat_classes: np.ndarray | None,
    fs_hz: float,
    t0_ms: float | None = None,
    t1_ms: float | None = None,
    *,
    artifact_spans: Sequence[tuple[int, int]] = (),
    af_mask: np.ndarray | None = None,
    **params: Any,
) -> dict[str, Any]:
    """Plain-JSON HR series in ``[t0_ms, t1_ms]``: instantaneous HR of each valid RR and the averaged HR.

    Returns:
        ``{instantaneous: {t_ms, hr_bpm, beat}, averaged: {t_ms, hr_bpm, first_beat, last_beat},
        window_beats, provenance}``; instantaneous values are stamped at the R peak ending the RR.
    """
    p = hr_params(**params)
    samples = as_beat_samples(beat_samples)
    ok = valid_rr_mask(samples, beat_classes, fs_hz, artifact_spans=artifact_spans, af_mask=af_mask, **params)
    t_ms = samples * (1000.0 / fs_hz)
    lo = -np.inf if t0_ms is None else t0_ms
    hi = np.inf if t1_ms is None else t1_ms
    beats = np.flatnonzero(ok & (t_ms >= lo) & (t_ms <= hi))
    inst = instantaneous_hr_bpm(samples, fs_hz)
    series = average_hr(samples, beat_classes, fs_hz, artifact_spans=artifact_spans, af_mask=af_mask, **params)
    keep = (t_ms[series.first_beat] >= lo) & (t_ms[series.last_beat] <= hi) if series.hr_bpm.size else np.zeros(0, dtype=bool)
    return {
        "instantaneous": {
            "t_ms": np.round(t_ms[beats]).astype(np.int64).tolist(),
            "hr_bpm": np.round(inst[beats], 2).tolist(),
            "beat": beats.tolist(),
        },
        "averaged": {
            "t_ms": series.t_ms[keep].tolist(),
            "hr_bpm": np.round(series.hr_bpm[keep], 2).tolist(),
            "first_beat": series.first_beat[keep].tolist(),
            "last_beat": series.last_beat[keep].tolist(),
        },
        "window_beats": int(p["window_beats"]),
        "provenance": _provenance(p, "hr.hr_series"),
    }
