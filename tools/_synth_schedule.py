"""The synthetic Holter schedule: which beat happens when, and why.

The schedule is drawn first, as a list of non-overlapping events on the
timeline; then a single walk over time emits every beat with its class,
rhythm and intervals. The waveform renderer (``tools/synth.py``) only turns
these beats into samples, so the ground truth is exact by construction.

Conventions (they are the arbiter for every detector test):
- ``pac``/``pvc`` are isolated ectopic beats only; ectopics inside couplets,
  runs, bigeminy and trigeminy belong to those events.
- ``onset_ms``/``offset_ms`` are the R-peak times of the first and last beat of
  the event; for a ``pause`` the two beats that bound it; for ``noise`` the
  burst span (beats go on under the noise).
- Sinus rate outside scheduled episodes stays within 62-92 bpm, so no
  unscheduled tachycardia, bradycardia or pause can appear.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ecgtrace.contracts.vocabulary import RHYTHM_NOTES
from ecgtrace.tools import _synth_holtercare as hc
from ecgtrace.tools._synth_holtercare import HOLTERCARE_EVENTS_PER_DAY
from ecgtrace.tools._synth_timing import AVB1_PR_MS, NORMAL_PR_MS, PAC_PR_MS

#: Events per 24 h (at least one of each kind is placed in any record >= 20 min).
EVENTS_PER_DAY: dict[str, int] = {
    "af": 3,
    "avb1": 2,
    "sinus_tachycardia": 6,
    "sinus_bradycardia": 5,
    "v_bigeminy": 6,
    "v_trigeminy": 5,
    "vt": 5,
    "svt": 8,
    "v_couplet": 20,
    "pause": 6,
    "pvc": 300,
    "pac": 150,
    "noise": 24,
}

#: P-wave peak after its onset (s): 2.5 sigma of the Gaussian P wave of tools/synth.py (sigma 20 ms sinus, 18 ms ectopic).
P_PEAK_OFFSET_S = {"N": 0.050, "A": 0.045}


@dataclass
class Beat:
    t_s: float
    symbol: str  # N, A or V
    rhythm: str  # N, AFIB, VT, SVTA, B, T, SBR, STACH, BI
    pr_ms: float  # 0 when there is no P wave
    rr_prev_s: float


@dataclass
class Event:
    kind: str
    start_s: float  # planned start on the timeline
    span_s: float  # planned length on the timeline
    params: dict[str, Any] = field(default_factory=dict)
    beats: list[int] = field(default_factory=list)  # indices of the event's beats

    def to_json(self, beats: list[Beat]) -> dict[str, Any]:
        rates = self.params.get("rate_bpm")
        if "onset_s" in self.params:  # no-QRS episodes (ventricular flutter/fibrillation): timed by their waves
            return {"kind": self.kind, "onset_ms": int(round(self.params["onset_s"] * 1000)), "offset_ms": int(round(self.params["offset_s"] * 1000)),
                    "n_beats": 0, "rate_bpm": None, "first_beat": None, "last_beat": None}
        if self.kind == "blocked_pac":  # timed by the blocked P wave's peak
            t_ms = int(round(self.params["blocked_p_s"][0] * 1000))
            return {"kind": self.kind, "onset_ms": t_ms, "offset_ms": t_ms, "n_beats": 0, "rate_bpm": None, "first_beat": None, "last_beat": None}
        if self.kind == "noise":
            return {
                "kind": "noise",
                "onset_ms": int(round(self.start_s * 1000)),
                "offset_ms": int(round((self.start_s + self.span_s) * 1000)),
                "n_beats": 0,
                "rate_bpm": None,
                "first_beat": None,
                "last_beat": None,
                "amplitude_mv": round(float(self.params["amplitude_mv"]), 3),
            }
        first, last = self.beats[0], self.beats[-1]
        times = [beats[i].t_s for i in self.beats]
        if rates is None and len(times) > 1:
            rates = 60.0 * (len(times) - 1) / (times[-1] - times[0])
        return {
            "kind": self.kind,
            "onset_ms": int(round(beats[first].t_s * 1000)),
            "offset_ms": int(round(beats[last].t_s * 1000)),
            "n_beats": len(self.beats),
            "rate_bpm": None if rates is None else round(float(rates), 1),
            "first_beat": int(first),
            "last_beat": int(last),
        }


def _event_span_s(kind: str, rng: np.random.Generator, hours: float) -> tuple[float, dict[str, Any]]:
    """Timeline length and parameters of one event of ``kind``."""
    long_record = hours >= 4
    if kind == "af":
        return (rng.uniform(300, 1800) if long_record else rng.uniform(60, 120)), {}
    if kind == "avb1":
        return (rng.uniform(600, 2400) if long_record else rng.uniform(90, 150)), {"pr_ms": AVB1_PR_MS + rng.uniform(-15, 15)}
    if kind == "sinus_tachycardia":
        return rng.uniform(45, 240 if long_record else 90), {"rate_bpm": rng.uniform(112, 135)}
    if kind == "sinus_bradycardia":
        return rng.uniform(45, 240 if long_record else 90), {"rate_bpm": rng.uniform(44, 52)}
    if kind in ("v_bigeminy", "v_trigeminy"):
        cycles = int(rng.integers(5, 16) if kind == "v_bigeminy" else rng.integers(4, 11))
        return cycles * (2 if kind == "v_bigeminy" else 3) * 1.0 + 4.0, {"cycles": cycles}
    if kind == "vt":
        return 8.0, {"n_beats": int(rng.integers(3, 9)), "rate_bpm": rng.uniform(140, 185)}
    if kind == "svt":
        return 10.0, {"n_beats": int(rng.integers(3, 13)), "rate_bpm": rng.uniform(145, 185)}
    if kind == "pause":
        return 6.0, {"pause_s": rng.uniform(2.2, 3.2)}
    if kind == "noise":
        return rng.uniform(2.0, 8.0), {"amplitude_mv": rng.uniform(0.6, 1.6)}
    return 4.0, {}  # pac, pvc, v_couplet


def _span_for(kind: str, rng: np.random.Generator, hours: float, profile: str) -> tuple[float, dict[str, Any]]:

    if kind in hc.HOLTERCARE_EVENTS_PER_DAY and (profile == "holtercare" or kind not in EVENTS_PER_DAY):
        return hc.event_span_s(kind, rng, hours)
    span, params = _event_span_s(kind, rng, hours)
    if kind == "pause" and profile == "holtercare":  # same draw, narrower range: RR > 3 s is always a scheduled asystole
        lo, hi = hc.PAUSE_RANGE_S
        params = {"pause_s": lo + (params["pause_s"] - 2.2) * (hi - lo) / 1.0}
    return span, params


def plan_events(hours: float, rng: np.random.Generator, profile: str = "default") -> list[Event]:
    """Place non-overlapping events on the timeline, longest first.

    ``profile="holtercare"`` adds Holtercare's rhythm vocabulary
    (:mod:`ecgtrace.tools._synth_holtercare`); ``"default"`` draws exactly what it always drew.
    """

    duration_s = hours * 3600.0
    guard_s = 12.0  # quiet sinus rhythm between events so each is unambiguous
    placed: list[Event] = []
    per_day = {**EVENTS_PER_DAY, **(HOLTERCARE_EVENTS_PER_DAY if profile == "holtercare" else {})}
    counts = {kind: max(1, int(round(n * hours / 24.0))) for kind, n in per_day.items()}
    order = sorted(counts, key=lambda k: -_span_for(k, np.random.default_rng(0), hours, profile)[0])
    occupied: list[tuple[float, float]] = []
    for kind in order:
        for _ in range(counts[kind]):
            span, params = _span_for(kind, rng, hours, profile)
            for _attempt in range(200):
                start = float(rng.uniform(15.0, max(duration_s - span - 15.0, 16.0)))
                lo, hi = start - guard_s, start + span + guard_s
                if all(hi <= a or lo >= b for a, b in occupied):
                    occupied.append((lo, hi))
                    placed.append(Event(kind, start, span, params))
                    break
    placed.sort(key=lambda e: e.start_s)
    return placed


def sinus_rate_bpm(t_s: float, start_clock_h: float = 9.0) -> float:
    """Circadian sinus rate: about 64 bpm at 04:00, about 88 bpm mid-afternoon."""
    clock_h = (start_clock_h + t_s / 3600.0) % 24.0
    return 76.0 + 12.0 * math.cos(2.0 * math.pi * (clock_h - 16.0) / 24.0)


class _Walker:
    """Walks the timeline once, emitting beats and filling each event's beat list."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.t_s = 0.4
        self.beats: list[Beat] = []
        self.atrial_waves: list[tuple[float, str]] = []  # P onsets (s) of P waves without QRS, with their shape (N or A)
        self.markers: list[tuple[float, str, str]] = []  # annotation-only entries: (time s, symbol, aux note)
        self.wave_spans: list[tuple[str, float, float, dict[str, Any]]] = []  # (kind, start s, stop s, params): flutter/VF waves

    def atrial(self, p_onset_s: float, shape: str, *, blocked: bool, event: Event | None = None) -> None:
        """A P wave without its own QRS (``blocked``: non-conducted), starting at ``p_onset_s``."""
        self.atrial_waves.append((p_onset_s, shape))
        if event is not None and blocked:
            event.params.setdefault("blocked_p_s", []).append(p_onset_s + P_PEAK_OFFSET_S[shape])

    def marker(self, t_s: float, symbol: str, aux: str) -> None:
        self.markers.append((t_s, symbol, aux))

    def emit(self, rr_s: float, symbol: str, rhythm: str, pr_ms: float, event: Event | None = None) -> None:
        self.t_s += rr_s
        self.beats.append(Beat(self.t_s, symbol, rhythm, pr_ms, rr_s))
        if event is not None:
            event.beats.append(len(self.beats) - 1)

    def sinus_rr(self, rate_bpm: float) -> float:
        return 60.0 / rate_bpm * (1.0 + self.rng.normal(0.0, 0.015))

    def episode(self, event: Event, rr_draw, symbol: str, rhythm: str, pr_ms: float) -> None:  # noqa: ANN001
        """Beats until the event's planned span is used up (at least one beat)."""
        end = event.start_s + event.span_s
        while True:
            rr = rr_draw()
            if event.beats and self.t_s + rr > end:
                return
            self.emit(rr, symbol, rhythm, pr_ms, event)

    def event(self, event: Event, base_rr: float) -> None:

        kind, p, rng, emit = event.kind, event.params, self.rng, self.emit
        if kind in hc.HOLTERCARE_EVENTS_PER_DAY:
            hc.emit_event(self, event, base_rr)
        elif kind == "pac":
            emit(base_rr * 0.62, "A", "N", PAC_PR_MS, event)
            emit(base_rr * 1.12, "N", "N", NORMAL_PR_MS)  # non-compensatory: the sinus node resets
        elif kind == "pvc":
            emit(base_rr * 0.58, "V", "N", 0.0, event)
            emit(base_rr * 1.42, "N", "N", NORMAL_PR_MS)  # full compensatory pause
        elif kind == "v_couplet":
            emit(base_rr * 0.58, "V", "N", 0.0, event)
            emit(base_rr * 0.62, "V", "N", 0.0, event)
            emit(base_rr * 1.5, "N", "N", NORMAL_PR_MS)
        elif kind in ("vt", "svt"):
            symbol, rhythm, pr = ("V", "VT", 0.0) if kind == "vt" else ("A", "SVTA", PAC_PR_MS)
            rr = 60.0 / p["rate_bpm"]
            for _ in range(p["n_beats"]):
                emit(rr * (1.0 + rng.normal(0.0, 0.01)), symbol, rhythm, pr, event)
            emit(base_rr * 1.3, "N", "N", NORMAL_PR_MS)
        elif kind in ("v_bigeminy", "v_trigeminy"):
            rhythm = RHYTHM_NOTES[kind]
            normals_per_cycle = 1 if kind == "v_bigeminy" else 2
            for _ in range(p["cycles"]):
                for position in range(normals_per_cycle):
                    compensatory = position == 0 and bool(event.beats)
                    emit(base_rr * (1.42 if compensatory else 1.0), "N", rhythm, NORMAL_PR_MS, event)
                emit(base_rr * 0.58, "V", rhythm, 0.0, event)
            emit(base_rr * 1.42, "N", "N", NORMAL_PR_MS)
        elif kind == "pause":
            emit(self.sinus_rr(60.0 / base_rr), "N", "N", NORMAL_PR_MS, event)
            emit(p["pause_s"], "N", "N", NORMAL_PR_MS, event)
        elif kind == "af":
            mean_rr = rng.uniform(0.55, 0.8)

            def af_rr() -> float:
                return float(np.clip(rng.gamma(16.0, mean_rr / 16.0) * rng.choice([0.8, 1.0, 1.25]), 0.36, 1.45))

            self.episode(event, af_rr, "N", "AFIB", 0.0)
            emit(base_rr * 1.1, "N", "N", NORMAL_PR_MS)
        elif kind in ("avb1", "sinus_tachycardia", "sinus_bradycardia"):
            rate = p.get("rate_bpm") or 60.0 / base_rr
            self.episode(event, lambda: self.sinus_rr(rate), "N", RHYTHM_NOTES[kind], p.get("pr_ms", NORMAL_PR_MS))
            emit(base_rr, "N", "N", NORMAL_PR_MS)
        else:  # pragma: no cover - plan_events only draws known kinds
            raise ValueError(f"unknown event kind {kind}")


def walk_beats(events: list[Event], hours: float, rng: np.random.Generator) -> list[Beat]:
    """Emit every beat in time order, filling each event's ``beats`` list."""
    return walk_timeline(events, hours, rng).beats


def walk_timeline(events: list[Event], hours: float, rng: np.random.Generator) -> _Walker:
    """Emit every beat in time order; the walker also holds blocked P waves, markers and wave spans."""
    duration_s = hours * 3600.0
    walker = _Walker(rng)
    queue = [e for e in events if e.kind != "noise"]
    next_event = 0
    while True:
        base_rr = 60.0 / min(max(sinus_rate_bpm(walker.t_s), 62.0), 92.0)
        if next_event < len(queue) and walker.t_s + base_rr >= queue[next_event].start_s:
            walker.event(queue[next_event], base_rr)
            next_event += 1
            continue
        if walker.t_s + base_rr > duration_s - 0.6:
            break
        walker.emit(walker.sinus_rr(60.0 / base_rr), "N", "N", NORMAL_PR_MS)
    return walker
