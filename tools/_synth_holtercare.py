"""Holtercare's rhythm vocabulary in the synthetic Holter (``synthesize_holter(profile="holtercare")``).

Opt-in: the default profile never reaches this module, so its records stay
byte-identical for a seed. Each kind is drawn with exact ground truth:

| kind | what is emitted | .atr |
|---|---|---|
| ``afl`` | flutter waves at 250-330/min, fixed 2:1 or 4:1 conduction (regular QRS, no P) | ``(AFL`` |
| ``atrial_tachycardia`` | >= 30 s of ectopic-P beats (``A``) at 110-150 bpm | ``(AT`` |
| ``vfl`` / ``vf`` | no QRS: 4-5 Hz sine-like waves, cycles varying by 18 % (flutter), or 3-9 Hz irregular waves (fibrillation), 6-14 s | ``(VFL`` / ``(VF`` (rhythm change without beat) |
| ``asystole`` | no QRS and no P for 3.5-6 s (sinus arrest) between two beats | (beats only) |
| ``junctional_escape`` / ``ventricular_escape`` | a sinus pause of 1.5-1.9 s ended by a narrow no-P (``j``) / wide (``E``) beat | ``j`` / ``E`` |
| ``junctional_rhythm`` | ``j`` beats at 42-56 bpm for 20-40 s, no P | ``(NOD`` |
| ``ventricular_escape_rhythm`` | ``E`` beats at 33-40 bpm for 12-25 s, no P | ``(IVR`` |
| ``avb2_mobitz1`` | Wenckebach cycles: PR 180 -> +60/+30/+15 ms, then a P without QRS | ``(BII`` |
| ``avb2_mobitz2`` | constant PR 200 ms, then a P without QRS (3:2 / 4:3 cycles) | ``(BII`` |
| ``avb_2to1`` | every second sinus P without QRS, >= 6 cycles | ``(BII`` |
| ``avb3`` | P waves at 70-90/min dissociated from a narrow escape rhythm at 36-46 bpm | ``(BIII`` |
| ``s_couplet`` | two consecutive premature atrial beats (paired PACs) | ``A A`` |
| ``blocked_pac`` | a premature ectopic P (0.45-0.55 RR) without QRS, then sinus reset | ``x`` |

Every P wave (conducted or not) is written to the ``.atr`` as a ``p`` mark at
its peak (MIT-BIH's P-peak symbol), so AV-conduction rules can be checked
against exact atrial activity. Blocked P waves of ``avb*`` events are listed in
the schedule as ``blocked_p_ms``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ecgtrace.contracts.vocabulary import note_for

from ecgtrace.tools._synth_timing import NORMAL_PR_MS, PAC_PR_MS

# The schedule's walker and event types (tools._synth_schedule._Walker, Event); not imported, because the
# schedule calls into this module.
_Walker = Any
Event = Any

#: Events per 24 h of the holtercare profile, on top of the default ones (at least one each in a record >= 20 min).
HOLTERCARE_EVENTS_PER_DAY: dict[str, int] = {
    "afl": 2,
    "atrial_tachycardia": 3,
    "vfl": 2,
    "vf": 2,
    "asystole": 3,
    "junctional_escape": 6,
    "ventricular_escape": 6,
    "junctional_rhythm": 3,
    "ventricular_escape_rhythm": 2,
    "avb2_mobitz1": 4,
    "avb2_mobitz2": 4,
    "avb_2to1": 3,
    "avb3": 2,
    "s_couplet": 12,
    "blocked_pac": 12,
}
#: Kinds without QRS complexes: the walker leaves a gap, the renderer fills it with waves.
NO_QRS_KINDS = ("vfl", "vf")
#: Pauses of the holtercare profile stay under 3 s, so that every RR over 3 s is a scheduled asystole.
PAUSE_RANGE_S = (2.2, 2.9)

ESCAPE_PR_MS = 0.0
MOBITZ2_PR_MS = 200.0
MOBITZ1_PR_MS = (180.0, 240.0, 270.0, 285.0)  # PR of the conducted beats of one Wenckebach cycle


def event_span_s(kind: str, rng: np.random.Generator, hours: float) -> tuple[float, dict[str, Any]]:
    """Timeline length (s) and parameters of one holtercare event."""
    long_record = hours >= 4
    if kind == "afl":
        ratio = int(rng.choice([2, 4]))
        return (rng.uniform(120, 600) if long_record else rng.uniform(40, 70)), {"flutter_per_min": rng.uniform(250, 330), "conduction": ratio}
    if kind == "atrial_tachycardia":
        return (rng.uniform(60, 300) if long_record else rng.uniform(35, 50)), {"rate_bpm": rng.uniform(110, 150)}
    if kind in NO_QRS_KINDS:
        return rng.uniform(6.0, 14.0), {"amplitude_mv": rng.uniform(0.5, 1.2), "freq_hz": rng.uniform(4.0, 5.0)}
    if kind == "asystole":
        return 9.0, {"asystole_s": rng.uniform(3.5, 6.0)}
    if kind in ("junctional_escape", "ventricular_escape"):
        return 5.0, {"escape_s": rng.uniform(1.5, 1.9)}
    if kind == "junctional_rhythm":
        return rng.uniform(20, 40), {"rate_bpm": rng.uniform(42, 56)}
    if kind == "ventricular_escape_rhythm":
        return rng.uniform(12, 25), {"rate_bpm": rng.uniform(33, 40)}  # RR < 2 s: no pause inside
    if kind in ("avb2_mobitz1", "avb2_mobitz2"):
        cycles, conducted = int(rng.integers(2, 5)), int(rng.integers(3, 5) if kind == "avb2_mobitz1" else rng.integers(2, 4))
        return cycles * (conducted + 1) * 1.0 + 3.0, {"cycles": cycles, "conducted": conducted}  # P-P <= 0.97 s
    if kind == "avb_2to1":
        cycles = int(rng.integers(6, 15))
        return cycles * 2.0 + 3.0, {"cycles": cycles}
    if kind == "avb3":
        return rng.uniform(20, 45), {"atrial_bpm": rng.uniform(70, 90), "rate_bpm": rng.uniform(36, 46)}
    return 4.0, {}  # s_couplet, blocked_pac


def emit_event(w: _Walker, event: Event, base_rr: float) -> None:
    """Emit the beats (and blocked P waves, no-QRS gaps) of one holtercare event."""

    kind, p, rng = event.kind, event.params, w.rng
    note = note_for(kind)  # the .atr note of its beats (ecgtrace.contracts.vocabulary), None for beat events
    if kind == "afl":
        cycle = 60.0 / p["flutter_per_min"]
        w.wave_spans.append(("afl", w.t_s + 0.1, event.start_s + event.span_s, p))
        w.episode(event, lambda: cycle * p["conduction"], "N", note, 0.0)
        w.emit(base_rr * 1.1, "N", "N", NORMAL_PR_MS)
    elif kind == "atrial_tachycardia":
        rr = 60.0 / p["rate_bpm"]
        w.episode(event, lambda: rr * (1.0 + rng.normal(0.0, 0.01)), "A", note, PAC_PR_MS)
        w.emit(base_rr * 1.25, "N", "N", NORMAL_PR_MS)
    elif kind in NO_QRS_KINDS:
        start = w.t_s + 0.45  # the waves start after the T wave of the last beat
        stop = start + event.span_s
        w.marker(start, "+", f"({note}")
        w.wave_spans.append((kind, start, stop, p))
        event.params["onset_s"], event.params["offset_s"] = start, stop
        w.marker(stop, "+", "(N")  # the rhythm interval ends with the waves
        w.t_s = stop
        w.emit(base_rr * 1.2, "N", "N", NORMAL_PR_MS)
    elif kind == "asystole":
        w.emit(w.sinus_rr(60.0 / base_rr), "N", "N", NORMAL_PR_MS, event)
        w.emit(p["asystole_s"], "N", "N", NORMAL_PR_MS, event)
    elif kind in ("junctional_escape", "ventricular_escape"):
        symbol = "j" if kind == "junctional_escape" else "E"
        w.emit(p["escape_s"], symbol, "N", ESCAPE_PR_MS, event)
        w.emit(base_rr, "N", "N", NORMAL_PR_MS)
    elif kind in ("junctional_rhythm", "ventricular_escape_rhythm"):
        symbol = "j" if kind == "junctional_rhythm" else "E"
        rr = 60.0 / p["rate_bpm"]
        w.episode(event, lambda: rr * (1.0 + rng.normal(0.0, 0.01)), symbol, note, ESCAPE_PR_MS)
        w.emit(base_rr * 1.1, "N", "N", NORMAL_PR_MS)
    elif kind in ("avb2_mobitz1", "avb2_mobitz2", "avb_2to1"):
        _second_degree(w, event, base_rr, note)
    elif kind == "avb3":
        _third_degree(w, event, base_rr, note)
    elif kind == "s_couplet":
        w.emit(base_rr * 0.62, "A", "N", PAC_PR_MS, event)
        w.emit(base_rr * 0.64, "A", "N", PAC_PR_MS, event)
        w.emit(base_rr * 1.15, "N", "N", NORMAL_PR_MS)
    elif kind == "blocked_pac":
        # the ectopic P comes at about half an RR; the sinus node resets on it (next P one P-P later)
        p_onset = w.t_s + base_rr * rng.uniform(0.45, 0.55) - 0.045 - PAC_PR_MS / 1000.0
        w.atrial(p_onset, "A", blocked=True, event=event)
        w.emit(p_onset + base_rr * 1.05 + 0.045 + NORMAL_PR_MS / 1000.0 - w.t_s, "N", "N", NORMAL_PR_MS)
    else:  # pragma: no cover - plan_events only draws known kinds
        raise ValueError(f"unknown holtercare event kind {kind}")


def _second_degree(w: _Walker, event: Event, base_rr: float, note: str) -> None:
    """Cycles of conducted beats, each ended by one on-time sinus P without QRS (Mobitz I, Mobitz II or 2:1).

    P onsets march at the sinus P-P; a conducted beat's R peak is its P onset + PR + 45 ms (the
    renderer's QRS onset). The event runs from the beat before the first blocked P to the beat
    after the last one.
    """

    kind, p = event.kind, event.params
    pp = base_rr  # sinus P-P stays regular; only AV conduction fails
    prs = [MOBITZ2_PR_MS] if kind == "avb_2to1" else ([MOBITZ2_PR_MS] * p["conducted"] if kind == "avb2_mobitz2" else list(MOBITZ1_PR_MS[: p["conducted"]]))
    sequence: list[float | None] = []
    for _ in range(p["cycles"]):
        sequence += [*prs, None]
    sequence.append(prs[0])  # the beat after the last blocked P conducts like the first of a cycle; then sinus PR again
    last = w.beats[-1] if w.beats else None
    p_onset = w.t_s - 0.045 - ((last.pr_ms if last is not None and last.pr_ms > 0 else NORMAL_PR_MS) / 1000.0)
    first_drop = None
    for i, pr in enumerate(sequence):
        p_onset += pp
        if pr is None:
            if first_drop is None:
                first_drop = len(w.beats) - 1
            w.atrial(p_onset, "N", blocked=True, event=event)
            continue
        recovering = i == len(sequence) - 1
        w.emit(p_onset + 0.045 + pr / 1000.0 - w.t_s, "N", "N" if recovering else note, pr)
    event.beats.extend(range(first_drop, len(w.beats)))


def _third_degree(w: _Walker, event: Event, base_rr: float, note: str) -> None:
    """Narrow escape rhythm with P waves marching through at their own rate (no fixed PR)."""

    p, rng = event.params, w.rng
    pp, rr = 60.0 / p["atrial_bpm"], 60.0 / p["rate_bpm"]
    start, end = w.t_s, event.start_s + event.span_s
    # P onsets on their own grid, offset from the escape rhythm
    t_p = start + rng.uniform(0.2, 0.6) * pp
    while True:
        if event.beats and w.t_s + rr > end:
            break
        w.emit(rr * (1.0 + rng.normal(0.0, 0.01)), "N", note, 0.0, event)
        while t_p < w.t_s + 0.5:
            # a P buried in the QRS is still atrial activity; it is drawn, and never conducted
            w.atrial(t_p, "N", blocked=True, event=event)
            t_p += pp * (1.0 + rng.normal(0.0, 0.01))
    w.emit(base_rr * 1.1, "N", "N", NORMAL_PR_MS)


#: Cycle-to-cycle spread of ventricular flutter (SD, share of the mean): with 18 % in cycle length and 20 % in size,
#: the waves repeat as exactly as VFDB's expert VFL does (:func:`ecgtrace.tools._rhythm_waves.regularity` over 4 s:
#: median 0.66 on 20 draws, VFDB 418/419 VFL 0.58-0.68); a pure sine reads 1.00, more regular than any recorded VFL.
VFL_CYCLE_SD = 0.18
VFL_AMPLITUDE_SD = 0.2
#: The spread is drawn from its own generator, seeded by the episode's onset: the rest of the record's draws do not move.
VFL_SEED_SALT = 0x5F1


def vfl_wave(n_samples: int, fs_hz: float, freq_hz: float, amplitude_mv: float, rng: np.random.Generator) -> np.ndarray:
    """Ventricular flutter: one sine cycle after another, each of its own length and size (mV, ``n_samples`` long)."""
    out = np.zeros(n_samples, dtype=np.float64)
    i = 0
    while i < n_samples:
        length = max(int(round(fs_hz / freq_hz * (1.0 + VFL_CYCLE_SD * rng.standard_normal()))), 3)
        size = amplitude_mv * max(1.0 + VFL_AMPLITUDE_SD * rng.standard_normal(), 0.2)
        cycle = np.sin(2.0 * np.pi * np.arange(length) / length) * size
        out[i : i + length] = cycle[: n_samples - i]
        i += length
    return out
