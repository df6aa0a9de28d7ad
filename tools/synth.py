"""Synthetic Holter records with exact ground truth.

``synthesize_holter`` writes a WFDB record (``NAME.hea`` + format-16
``NAME.dat``), a reference annotation file ``NAME.atr`` (every beat, rhythm
changes as aux notes) and ``NAME.schedule.json`` (every event with its onset,
offset, beat count and rate). Tests check every later tool against them.

Beats are sums of Gaussian waves whose shape depends on the beat class and the
lead, with beat-to-beat jitter; baseline wander, muscle noise, AF fibrillatory
waves and electrode-motion bursts are added on top. A 24 h x 3-lead x 250 Hz
record takes seconds (neurokit2's ECGSYN needs over 13 minutes for one lead),
because waves are stamped with vectorized index arithmetic instead of
integrating a dynamical model.

Wave boundaries are defined as the Gaussian centre +/- 2.5 sigma; with that
definition the intervals in ``schedule["morphology"]`` are exact.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ecgtrace.errors import EcgTraceError, OutputError
from ecgtrace.jsonio import make_folder, to_json_text, write_bytes_atomic, write_text_atomic
from ecgtrace.contracts.vocabulary import note_for
from ecgtrace.tools._synth_schedule import AVB1_PR_MS, NORMAL_PR_MS, PAC_PR_MS, Beat, Event, _Walker, plan_events, walk_timeline
from ecgtrace.tools._synth_holtercare import VFL_SEED_SALT, vfl_wave
from ecgtrace.tools._synth_wfdb import write_annotations, write_header

GENERATOR_VERSION = "1.0"
#: ``default``: the original event mix (byte-identical for a seed); ``holtercare``: adds Holtercare's rhythm vocabulary.
PROFILES = ("default", "holtercare")
LEAD_NAMES = {2: ("MLII", "V1"), 3: ("MLII", "V1", "V5")}
ADC_GAIN = 1000.0  # adu per mV: 1 µV resolution, +/-32 mV range in format 16
QTC_MS = {"N": 400.0, "A": 400.0, "V": 440.0}
BOUNDARY_SIGMAS = 2.5

# (name, centre relative to R in ms, sigma in ms, amplitude per lead MLII/V1/V5 in mV)
_N_QRS = (("Q", -30.0, 6.0, (-0.10, 0.00, -0.12)), ("R", 0.0, 10.0, (1.20, 0.25, 1.50)), ("S", 28.0, 7.0, (-0.25, -0.90, -0.25)))
_V_QRS = (("V1", -10.0, 24.0, (1.50, -1.30, 1.80)), ("V2", 50.0, 12.0, (-0.40, 0.30, -0.50)))
_P_WAVE = {"N": (20.0, (0.15, 0.07, 0.10)), "A": (18.0, (-0.10, 0.08, -0.06))}
_T_WAVE = {"N": (40.0, (0.35, 0.12, 0.40)), "V": (40.0, (-0.50, 0.45, -0.55))}
_QRS_ONSET_MS = {"N": -45.0, "V": -70.0}
_QRS_OFFSET_MS = {"N": 45.5, "V": 80.0}
_F_WAVE_MV = (0.06, 0.10, 0.04)


@dataclass(frozen=True)
class SynthResult:
    """Paths and ground truth of a generated record."""

    record_path: Path  # base path without extension
    schedule: dict[str, Any]
    schedule_path: Path


def morphology_truth() -> dict[str, Any]:
    """Exact wave intervals per beat class (boundaries at centre +/- 2.5 sigma)."""
    p_width = {k: 2 * BOUNDARY_SIGMAS * sigma for k, (sigma, _) in _P_WAVE.items()}
    return {
        "N": {"pr_ms": NORMAL_PR_MS, "qrs_ms": _QRS_OFFSET_MS["N"] - _QRS_ONSET_MS["N"], "qtc_ms": QTC_MS["N"], "p_ms": p_width["N"], "t_ms": 200.0},
        "A": {"pr_ms": PAC_PR_MS, "qrs_ms": _QRS_OFFSET_MS["N"] - _QRS_ONSET_MS["N"], "qtc_ms": QTC_MS["A"], "p_ms": p_width["A"], "t_ms": 200.0},
        "V": {"pr_ms": None, "qrs_ms": _QRS_OFFSET_MS["V"] - _QRS_ONSET_MS["V"], "qtc_ms": QTC_MS["V"], "p_ms": None, "t_ms": 200.0},
        "avb1_pr_ms": AVB1_PR_MS,
        "qt_rule": "qt_ms = qtc_ms * rr_s ** (1/3), rr_s = preceding RR clamped to [0.3, 2.0] s",
        "wave_boundary": "Gaussian centre +/- 2.5 sigma",
    }


def synthesize_holter(
    out_dir: str | os.PathLike[str],
    *,
    name: str = "holter",
    hours: float = 24.0,
    fs_hz: float = 250.0,
    n_leads: int = 3,
    seed: int = 0,
    profile: str = "default",
) -> SynthResult:
    """Generate a synthetic Holter record with its reference annotations and schedule.

    Args:
        out_dir: Folder to write into (created if needed).
        name: Record name (``NAME.hea``, ``NAME.dat``, ``NAME.atr``, ``NAME.schedule.json``).
        hours: Duration in hours, 0.05 (3 min) to 24.
        fs_hz: Sampling rate, 128 to 500 Hz.
        n_leads: 2 (MLII, V1) or 3 (MLII, V1, V5).
        seed: The same seed gives byte-identical files.
        profile: ``"default"`` (the original event mix) or ``"holtercare"``: adds atrial
            flutter, atrial tachycardia, ventricular flutter/fibrillation, asystole, junctional
            and ventricular escape beats and rhythms, AV block (Mobitz I, Mobitz II, 2:1, third
            degree), paired PACs and non-conducted PACs, and writes every P-wave peak to the
            ``.atr`` as a ``p`` mark (see :mod:`ecgtrace.tools._synth_holtercare`).
    """
    if not 0.05 <= hours <= 24.0:
        raise EcgTraceError(f"hours must be between 0.05 and 24, got {hours}")
    if not 128.0 <= fs_hz <= 500.0:
        raise EcgTraceError(f"fs_hz must be between 128 and 500 Hz, got {fs_hz}")
    if n_leads not in LEAD_NAMES:
        raise EcgTraceError(f"n_leads must be 2 or 3, got {n_leads}")
    if not name or any(c in name for c in "/\\. "):
        raise EcgTraceError(f"record name {name!r} must be a plain name without dots, spaces or slashes")
    if profile not in PROFILES:
        raise EcgTraceError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    rng = np.random.default_rng(seed)
    events = plan_events(hours, rng, profile)
    walker = walk_timeline(events, hours, rng)
    beats = walker.beats
    for beat in beats:  # R peaks sit on the sample grid, so schedule times equal annotation times
        beat.t_s = round(beat.t_s * fs_hz) / fs_hz
    n_samples = int(round(hours * 3600.0 * fs_hz))
    leads = LEAD_NAMES[n_leads]
    signal = _render(beats, events, n_samples, fs_hz, n_leads, rng)
    if profile == "holtercare":
        _render_holtercare(signal, walker, fs_hz, rng)
    digital = np.empty((n_samples, n_leads), dtype="<i2")  # format 16: interleaved by sample
    for lead in range(n_leads):
        digital[:, lead] = np.clip(np.rint(signal[lead] * ADC_GAIN), -32767, 32767)
    del signal
    base = make_folder(out_dir) / name
    try:
        return _write_record(base, digital, beats, events, walker, fs_hz, leads, seed, hours, profile, rng)
    except BaseException as exc:  # a full disk or an interruption: no half record (a .dat without its header) stays behind
        for suffix in (".dat", ".hea", ".atr", ".schedule.json"):
            Path(f"{base}{suffix}").unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write {base}: {exc.strerror or exc}") from None
        raise


def _write_record(base: Path, digital: np.ndarray, beats: list[Beat], events: list[Any], walker: Any, fs_hz: float, leads: tuple[str, ...],
                  seed: int, hours: float, profile: str, rng: np.random.Generator) -> SynthResult:
    """Write the record's four files (signal, header, reference annotations, schedule)."""
    n_samples = int(digital.shape[0])
    write_bytes_atomic(f"{base}.dat", digital.tobytes())
    write_header(base, digital, fs_hz, leads, adc_gain=ADC_GAIN, comment=f"ecgtrace synthetic Holter, generator {GENERATOR_VERSION}, seed {seed}", rng=rng)
    write_annotations(base, beats, fs_hz, _QRS_ONSET_MS["N"], walker if profile == "holtercare" else None)
    schedule = {
        "record": base.name,
        "fs_hz": float(fs_hz),
        "n_samples": n_samples,
        "leads": list(leads),
        "seed": int(seed),
        "hours": float(hours),
        "generator": {"method": "ecgtrace.tools.synth", "version": GENERATOR_VERSION},
        "n_beats": len(beats),
        "beats_per_symbol": {s: sum(1 for b in beats if b.symbol == s) for s in (("N", "A", "V") if profile == "default" else ("N", "A", "V", "j", "E"))},
        "events": [_event_json(e, beats) for e in events],
        "morphology": morphology_truth(),
    }
    if profile == "holtercare":
        schedule["profile"] = profile
        schedule["n_p_waves"] = sum(1 for b in beats if b.pr_ms > 0) + len(walker.atrial_waves)
    schedule_path = Path(f"{base}.schedule.json")
    write_text_atomic(schedule_path, to_json_text(schedule, indent=1) + "\n")
    return SynthResult(record_path=base, schedule=schedule, schedule_path=schedule_path)


def _event_json(event: Event, beats: list[Beat]) -> dict[str, Any]:
    row = event.to_json(beats)
    if event.kind in ("pause", "asystole"):
        row["rate_bpm"] = None
        row[f"{event.kind}_ms"] = row["offset_ms"] - row["onset_ms"]
    if "blocked_p_s" in event.params:
        row["blocked_p_ms"] = [int(round(t * 1000)) for t in event.params["blocked_p_s"]]
    if event.kind == "avb1":
        row["pr_ms"] = round(float(event.params["pr_ms"]), 1)
    if note_for(event.kind):
        row["rhythm_note"] = "(" + note_for(event.kind)
    return row


def _render(beats: list[Beat], events: list[Event], n_samples: int, fs_hz: float, n_leads: int, rng: np.random.Generator) -> np.ndarray:
    """Signal in mV, shape (n_leads, n_samples), float32."""
    t_r = np.array([b.t_s for b in beats])
    symbols = np.array([b.symbol for b in beats])
    pr_s = np.array([b.pr_ms for b in beats]) / 1000.0
    rr_prev = np.clip(np.array([b.rr_prev_s for b in beats]), 0.3, 2.0)
    # beat-to-beat variation: overall gain, respiration on the QRS, small timing jitter
    beat_gain = rng.normal(1.0, 0.04, t_r.size) * (1.0 + 0.06 * np.sin(2 * np.pi * 0.25 * t_r + rng.uniform(0, 2 * np.pi)))
    pad = int(math.ceil(4 * 0.05 * fs_hz)) + 2
    signal = np.zeros((n_leads, n_samples + 2 * pad), dtype=np.float32)
    stamp = _Stamper(signal, fs_hz, pad, n_leads)

    is_v = (symbols == "V") | (symbols == "E")  # ventricular escape beats are wide like PVCs
    has_p = pr_s > 0
    for cls, mask in (("N", ~is_v), ("V", is_v)):
        for _, centre_ms, sigma_ms, amps in (_N_QRS if cls == "N" else _V_QRS):
            stamp(t_r[mask] + centre_ms / 1000.0, sigma_ms / 1000.0, beat_gain[mask], amps)
        qrs_onset_s = t_r[mask] + _QRS_ONSET_MS[cls] / 1000.0
        qt_s = QTC_MS[cls] / 1000.0 * np.cbrt(rr_prev[mask])
        sigma_t, amps_t = _T_WAVE[cls]
        stamp(qrs_onset_s + qt_s - BOUNDARY_SIGMAS * sigma_t / 1000.0, sigma_t / 1000.0, beat_gain[mask], amps_t)
    for cls, mask in (("N", has_p & (symbols == "N")), ("A", has_p & (symbols == "A"))):
        sigma_p, amps_p = _P_WAVE[cls]
        p_onset_s = t_r[mask] + _QRS_ONSET_MS["N"] / 1000.0 - pr_s[mask] + rng.normal(0, 0.002, int(mask.sum()))
        stamp(p_onset_s + BOUNDARY_SIGMAS * sigma_p / 1000.0, sigma_p / 1000.0, rng.normal(1.0, 0.05, int(mask.sum())), amps_p)
    signal = signal[:, pad : pad + n_samples]
    _add_noise(signal, beats, events, fs_hz, rng)
    return signal


class _Stamper:
    """Adds one Gaussian wave per beat to every lead, vectorized over beats.

    Beats are stamped in two interleaved halves, so that no two waves in one
    fancy-indexed ``+=`` touch the same sample (a duplicate index would keep
    only one of the writes).
    """

    def __init__(self, signal: np.ndarray, fs_hz: float, pad: int, n_leads: int) -> None:
        self.signal, self.fs_hz, self.pad, self.n_leads = signal, fs_hz, pad, n_leads

    def __call__(self, centre_s: np.ndarray, sigma_s: float, gain: np.ndarray, lead_amps: tuple[float, ...]) -> None:
        half_width = min(int(math.ceil(4.0 * sigma_s * self.fs_hz)), self.pad - 1)
        offsets = np.arange(-half_width, half_width + 1)
        centre = centre_s * self.fs_hz + self.pad
        for parity in (0, 1):
            c = centre[parity::2]
            g = gain[parity::2]
            for start in range(0, c.size, 20000):
                cb, gb = c[start : start + 20000], g[start : start + 20000]
                idx = np.rint(cb).astype(np.int64)[:, None] + offsets
                idx = np.clip(idx, 0, self.signal.shape[1] - 1)
                shape = (np.exp(-0.5 * ((idx - cb[:, None]) / (sigma_s * self.fs_hz)) ** 2) * gb[:, None]).astype(np.float32)
                for lead in range(self.n_leads):
                    if lead_amps[lead]:
                        self.signal[lead, idx] += lead_amps[lead] * shape


def _slow_noise(n_samples: int, fs_hz: float, rate_hz: float, rng: np.random.Generator, scale: float) -> np.ndarray:
    """A smooth random curve: random knots at ``rate_hz`` linearly interpolated to ``fs_hz``."""
    n_knots = int(n_samples / fs_hz * rate_hz) + 2
    knots = np.cumsum(rng.normal(0.0, 1.0, n_knots))
    knots = (knots - np.convolve(knots, np.ones(9) / 9, mode="same")) * scale  # keep it bounded
    return np.interp(np.arange(n_samples, dtype=np.float64) * (rate_hz / fs_hz), np.arange(n_knots), knots).astype(np.float32)


def _add_noise(signal: np.ndarray, beats: list[Beat], events: list[Event], fs_hz: float, rng: np.random.Generator) -> None:
    n_leads, n_samples = signal.shape
    t_hours = np.arange(0, n_samples, int(fs_hz * 60)) / fs_hz / 3600.0
    for lead in range(n_leads):
        signal[lead] += _slow_noise(n_samples, fs_hz, 0.5, rng, 0.05)  # baseline wander
        # muscle noise, stronger by day
        envelope = np.interp(np.arange(n_samples) / fs_hz / 3600.0, t_hours, rng.uniform(0.004, 0.02, t_hours.size)).astype(np.float32)
        signal[lead] += rng.standard_normal(n_samples, dtype=np.float32) * envelope
    for event in events:
        if event.kind == "af" and event.beats:
            _add_f_waves(signal, beats[event.beats[0]].t_s - 0.5, beats[event.beats[-1]].t_s + 0.3, fs_hz, rng)
        elif event.kind == "noise":
            _add_motion_burst(signal, event, fs_hz, rng)


def _add_f_waves(signal: np.ndarray, t0_s: float, t1_s: float, fs_hz: float, rng: np.random.Generator) -> None:
    i0, i1 = max(int(t0_s * fs_hz), 0), min(int(t1_s * fs_hz), signal.shape[1])
    t = np.arange(i1 - i0) / fs_hz
    freq = rng.uniform(5.0, 7.0) + 0.5 * np.sin(2 * np.pi * 0.1 * t)
    wave = np.sin(2 * np.pi * np.cumsum(freq) / fs_hz) * (1.0 + 0.3 * np.sin(2 * np.pi * 0.3 * t))
    for lead in range(signal.shape[0]):
        signal[lead, i0:i1] += (_F_WAVE_MV[lead] * wave).astype(np.float32)


def _add_motion_burst(signal: np.ndarray, event: Event, fs_hz: float, rng: np.random.Generator) -> None:
    i0 = int(event.start_s * fs_hz)
    i1 = min(int((event.start_s + event.span_s) * fs_hz), signal.shape[1])
    t = np.arange(i1 - i0) / fs_hz
    burst = np.zeros(t.size)
    for _ in range(6):
        burst += np.sin(2 * np.pi * rng.uniform(0.7, 9.0) * t + rng.uniform(0, 2 * np.pi))
    burst *= event.params["amplitude_mv"] / max(np.abs(burst).max(), 1e-9)
    for lead in range(signal.shape[0]):
        signal[lead, i0:i1] += (burst * rng.uniform(0.6, 1.2)).astype(np.float32)


def _render_holtercare(signal: np.ndarray, walker: _Walker, fs_hz: float, rng: np.random.Generator) -> None:
    """P waves without QRS, flutter waves (AFL) and ventricular flutter/fibrillation waves, added in place."""
    n_leads, n = signal.shape
    pad = int(math.ceil(4 * 0.05 * fs_hz)) + 2
    if walker.atrial_waves:
        padded = np.zeros((n_leads, n + 2 * pad), dtype=np.float32)
        stamp = _Stamper(padded, fs_hz, pad, n_leads)
        for shape in ("N", "A"):
            onsets = np.array([t for t, s in walker.atrial_waves if s == shape])
            if onsets.size:
                sigma_p, amps_p = _P_WAVE[shape]
                stamp(onsets + BOUNDARY_SIGMAS * sigma_p / 1000.0, sigma_p / 1000.0, np.ones(onsets.size), amps_p)
        signal += padded[:, pad : pad + n]
    for kind, start, stop, p in walker.wave_spans:
        i0, i1 = max(int(start * fs_hz), 0), min(int(stop * fs_hz), n)
        t = np.arange(i1 - i0) / fs_hz
        if kind == "afl":  # sawtooth flutter waves, negative in the inferior lead
            phase = (t * p["flutter_per_min"] / 60.0) % 1.0
            wave = 0.5 - phase
            amps = (0.25, 0.12, 0.15)
        elif kind == "vfl":  # sine-like flutter waves, no distinct QRS, each cycle a little longer or shorter, larger or smaller
            wave = vfl_wave(t.size, fs_hz, p["freq_hz"], p["amplitude_mv"], np.random.default_rng([int(round(start * 1000.0)), VFL_SEED_SALT]))
            amps = (1.0, 0.8, 1.1)
        else:  # vf: irregular waves of changing frequency and size
            freq = 3.0 + 6.0 * np.abs(_slow_noise(t.size, fs_hz, 2.0, rng, 0.5))
            wave = np.sin(2 * np.pi * np.cumsum(np.clip(freq, 3.0, 9.0)) / fs_hz) * p["amplitude_mv"] * (0.5 + np.abs(_slow_noise(t.size, fs_hz, 1.5, rng, 0.6)))
            amps = (1.0, 0.7, 0.9)
        for lead in range(n_leads):
            signal[lead, i0:i1] += (amps[lead] * wave).astype(np.float32)


def load_schedule(record_path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read ``<record>.schedule.json`` written next to a synthetic record."""
    import json

    path = Path(f"{Path(record_path).with_suffix('') if str(record_path).endswith('.hea') else record_path}.schedule.json")
    if not path.exists():
        raise EcgTraceError(f"{path}: no schedule file (not an ecgtrace synthetic record?)")
    return json.loads(path.read_text(encoding="utf-8"))
