"""Per-lead wave delineation and interval/amplitude measurements on one window.

Only the window is processed (never a whole Holter record). The beats are the
caller's R peaks (reference ``.atr`` or the beat detector) or, when none are
given, the peaks found by a small multi-lead detector inside the window.

* :func:`delineate` -> :class:`Delineation`: per lead and per beat, P onset /
  peak / offset, QRS onset, main QRS peak, QRS offset, T onset / peak / offset
  (absolute sample indices, -1 when absent) and amplitudes in mV.
* :func:`measure_window` -> :class:`WindowMeasurements`: per lead PR, QRS, QT,
  QTc (Bazett, Fridericia), RR (ms); P, R, S, T amplitudes and the ST level at
  J+60 ms (mV); P wave present or absent; the median beat. Each value is the
  median over beats and lists the beats (R-peak sample indices) it came from.
* Multi-lead rules in :func:`delineate`: P waves are kept in every lead when at
  least :data:`P_LEAD_SHARE` of the leads (2 of 12; at least one) show them clearly
  (:func:`~ecgtrace.tools._delineate_p.p_wave_rule`), removed everywhere
  otherwise (AF); with 3+ leads, a boundary more than ``CROSS_LEAD_LIMIT_MS``
  from the median of the leads is moved to that median.
* Beat-to-beat rule (before the cross-lead one): within a lead, P on/off and T
  off of beats of the dominant morphology are pulled towards the running median
  of their distance from R, and replaced by it when they stray
  (:mod:`~ecgtrace.tools._delineate_consistency`).
* :func:`write_waves`: the fiducials as a WFDB annotation file in the QT
  database convention ('(' onset, 'p'/'N'/'t' peak, ')' offset; ``num`` = 0 for
  P, 1 for QRS, 2 for T on the onset/offset marks; ``chan`` = lead index).
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ecgtrace.errors import EcgTraceError
from ecgtrace.jsonio import write_through_temp_folder
from ecgtrace.tools._atrial import atrial_activity
from ecgtrace.tools._delineate import AMPLITUDES, POINTS, SIGNAL_KEYS, DelineationParams, delineate_lead
from ecgtrace.tools._delineate_filters import preprocess
from ecgtrace.tools._delineate_consistency import ConsistencyParams, beat_consistency, drop_impossible_marks, record_gap
from ecgtrace.tools._delineate_p import clear_p_marks, p_wave_rule
from ecgtrace.tools._delineate_measures import LeadMeasurements, WindowMeasurements, measure_delineation
from ecgtrace.tools._delineate_waves import global_j_point, lead_morphology, pathological_q
from ecgtrace.tools._delineation import INTERNAL_FS_HZ, Delineation, LeadFiducials, marks_to_record, to_internal
from ecgtrace.tools._wave_net import WaveNet, load_wave_net, wave_probabilities
from ecgtrace.tools.clipping import clipped_leads
from ecgtrace.tools.records import SignalWindow

# 9: a T end must lie apart from the next QRS onset once both are rounded to the record's rate;
# 8: marks no heart produces (a P mark after its QRS onset, a T mark past the next QRS onset) are dropped, on either method;
# 7: QRS on/off, P on/off and T off from the wave net (tools._wave_net) where it sees the wave (benchmarks/delineation.py);
# 6: a terminal S counts for monophasic_r only as far as the signal comes back up from it by the J point (LBBB's
#    discordant ST is no S wave; benchmarks/audit_items.py LBBB positives tuned 1/5 -> 2/5, untuned 1/4 -> 2/4,
#    negatives and RBBB unchanged);
# 5: P waves kept when 2 of 12 leads show them (was 3); 4: QRS offset from the median beat;
# 3: beat-to-beat template projection of P on/off and T off (_delineate_consistency)
MEASURE_VERSION = "9"
CROSS_LEAD_MIN_LEADS = 3
#: ``delineate(method=...)``: the learned segmenter's boundaries where it sees the wave, or the rules alone.
DELINEATION_METHODS = ("wavenet", "rules")
#: P waves belong to the window's rhythm when at least this share of the leads shows them (2 of 12). A quarter (3 of 12)
#: removed them from sinus tachycardia with P on T, where V1 and V4 still showed them at a steady PR (CinC JS20006).
#: benchmarks/audit_items.py, tuned records: PAC positives 5/11 -> 6/11, AF and third-degree AV block negatives +1 each;
#: untuned: net +1 negative (AF and third-degree +1, PAC -1).
P_LEAD_SHARE = 1.0 / 6.0
CROSS_LEAD_LIMIT_MS = {"p_on": 30.0, "p_off": 16.0, "qrs_on": 6.0, "qrs_off": 6.0, "t_on": 40.0, "t_off": 20.0}  # set on the tuning half
_WAVE_MARKS = (("p_on", "(", 0), ("p_peak", "p", 0), ("p_off", ")", 0), ("qrs_on", "(", 1), ("r_peak", "N", 1), ("qrs_off", ")", 1), ("t_on", "(", 2), ("t_peak", "t", 0), ("t_off", ")", 2))


# --------------------------------------------------------------------------- beats


def detect_r_peaks(signal_mv: np.ndarray, fs_hz: float) -> np.ndarray:
    """R peaks (local sample indices) in a short multi-lead window.

    Slope energy (5-18 Hz band, squared derivative, 100 ms moving mean) is
    normalized per lead and summed; peaks at least 250 ms apart above 30% of the
    window's 99th percentile are beats, each placed on the largest absolute
    deflection of the strongest lead within +-80 ms. Good enough for a 10 s
    window; the Holter detector (:mod:`ecgtrace.tools.beats`) is better on
    long, noisy records.
    """
    from scipy.signal import butter, find_peaks, sosfiltfilt

    x = np.asarray(signal_mv, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    n = x.shape[0]
    if n < int(0.5 * fs_hz):
        return np.zeros(0, dtype=np.int64)
    x = np.where(np.isfinite(x), x, 0.0)
    high = min(18.0, 0.45 * fs_hz)
    bp = sosfiltfilt(butter(2, (5.0, high), btype="bandpass", fs=fs_hz, output="sos"), x, axis=0)
    energy = np.gradient(bp, axis=0) ** 2
    width = max(int(0.1 * fs_hz), 1)
    kernel = np.ones(width) / width
    energy = np.column_stack([np.convolve(energy[:, j], kernel, mode="same") for j in range(x.shape[1])])
    scale = np.percentile(energy, 99, axis=0)
    use = scale > 0
    if not use.any():
        return np.zeros(0, dtype=np.int64)
    fused = (energy[:, use] / scale[use]).sum(axis=1) / use.sum()
    peaks, _ = find_peaks(fused, height=0.3 * np.percentile(fused, 99), distance=max(int(0.25 * fs_hz), 1))
    best = int(np.argmax(np.where(use, scale, 0)))
    y = x[:, best] - np.median(x[:, best])
    half = int(0.08 * fs_hz)
    out = []
    for pk in peaks:
        a, b = max(pk - half, 0), min(pk + half + 1, n)
        out.append(a + int(np.argmax(np.abs(y[a:b]))))
    return np.unique(np.asarray(out, dtype=np.int64))


def detect_window_beats(window: SignalWindow) -> tuple[np.ndarray, str]:
    """R peaks (absolute samples) of a window and the detector used.

    The project's Holter detector (:func:`ecgtrace.tools.beats.detect_beats_array`)
    when it is importable and accepts the window; :func:`detect_r_peaks` otherwise.
    """
    try:
        from ecgtrace.tools.beats import detect_beats_array

        table = detect_beats_array(window.signal_mv, window.fs_hz, lead_names=window.leads)
        return np.asarray(table.samples, dtype=np.int64) + window.sampfrom, "detected: ecgtrace.tools.beats"
    except (ImportError, EcgTraceError, ValueError):
        return detect_r_peaks(window.signal_mv, window.fs_hz) + window.sampfrom, "detected: measure.detect_r_peaks"


def _beats_for(window: SignalWindow, beat_samples: np.ndarray | None) -> tuple[np.ndarray, str]:
    n = window.signal_mv.shape[0]
    if beat_samples is None:
        return detect_window_beats(window)
    beats = np.asarray(beat_samples, dtype=np.int64).ravel()
    beats = np.unique(beats[(beats >= window.sampfrom) & (beats < window.sampfrom + n)])
    return beats, "given"


# --------------------------------------------------------------------------- delineation


def _cross_lead_correction(results: list[dict[str, np.ndarray]], fs_hz: float, voting: list[int]) -> int:
    """Move a lead's boundary that strays from the median of the voting leads back to that median.

    Per beat and boundary type, a mark farther than ``CROSS_LEAD_LIMIT_MS`` from
    the median over the ``voting`` leads that have it is replaced by the median (leads
    keep their own marks otherwise). Returns how many marks moved.
    """
    moved = 0
    for name, limit_ms in CROSS_LEAD_LIMIT_MS.items():
        marks = np.stack([r[name] for r in results]).astype(np.float64)
        marks[marks < 0] = np.nan
        have = np.isfinite(marks[voting]).sum(axis=0)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            med = np.nanmedian(marks[voting], axis=0)
        limit = limit_ms * fs_hz / 1000.0
        stray = np.isfinite(marks) & (np.abs(marks - med[None, :]) > limit) & (have[None, :] >= CROSS_LEAD_MIN_LEADS)
        for j, r in enumerate(results):
            idx = np.flatnonzero(stray[j])
            r[name][idx] = np.round(med[idx]).astype(np.int64)
            moved += idx.size
    return moved


def _p_rule_all_leads(results: list[dict[str, np.ndarray]], fs_hz: float, p: DelineationParams, voting: list[int] | None = None) -> list[dict[str, Any]]:
    """Lead-level P decisions, then the window rule: P waves belong to the rhythm.

    They are kept in every lead when at least :data:`P_LEAD_SHARE` of the ``voting``
    leads (default all; at least one) show them clearly, and removed everywhere otherwise (AF).
    """
    p_waves = [p_wave_rule(res, fs_hz, p) for res in results]
    for res in results:  # kept for the atrial analysis (P waves at a wandering PR are still P waves)
        for name in ("p_on", "p_peak", "p_off"):
            res[f"{name}_found"] = res[name].copy()
    voting = list(range(len(results))) if voting is None else voting
    votes = sum(bool(p_waves[j]["present"]) for j in voting)
    window_p = votes >= max(1, math.ceil(P_LEAD_SHARE * len(voting)))
    for res, pw in zip(results, p_waves):
        pw["window_present"] = bool(window_p)
        if not window_p:
            clear_p_marks(res)
    return p_waves


def _lead_result(lead: str, res: dict[str, np.ndarray], p_wave: dict[str, Any], fs_int: float, window: SignalWindow, j_point: np.ndarray) -> LeadFiducials:
    """One lead's marks back on the record's samples and in ms, with its amplitudes and QRS morphology."""
    points, times = {}, {}
    n_samples = int(np.asarray(window.signal_mv).shape[0])
    for k in POINTS:
        points[k], times[k] = marks_to_record(res[k], fs_int, window.fs_hz, window.sampfrom, n_samples)
    morph = lead_morphology(res["xl"], res["qrs_on"], res["qrs_off"], fs_int, j_point)
    amplitudes = {k: res[k] for k in AMPLITUDES}
    amplitudes["st_j60_mv"] = morph.pop("st_j60_mv")  # read on the baseline-kept signal against the PR level
    morph["pathological_q"] = pathological_q(lead, morph, res["r_amp_mv"], res["s_amp_mv"])
    return LeadFiducials(lead=lead, points=points, amplitudes_mv=amplitudes, p_present=res["p_present"], p_wave=p_wave, times_ms=times, morphology=morph)


def _checked_signal(window: SignalWindow, method: str) -> np.ndarray:
    """The window's (n_samples, leads) signal, or an EcgTraceError naming what is wrong with the request."""
    if method not in DELINEATION_METHODS:
        raise EcgTraceError(f"unknown delineation method {method!r}; use one of {', '.join(DELINEATION_METHODS)}")
    if window.fs_hz <= 0:
        raise EcgTraceError(f"fs_hz must be > 0, got {window.fs_hz}")
    signal = np.asarray(window.signal_mv)
    if signal.ndim != 2 or signal.shape[1] != len(window.leads):
        raise EcgTraceError(f"window signal must be (n_samples, {len(window.leads)} leads), got {signal.shape}")
    return signal


def _delineate_leads(x_int: np.ndarray, fs_int: float, local: np.ndarray, p: DelineationParams, net: WaveNet | None) -> list[dict[str, Any]]:
    """Every lead's rule-based marks, steered by the wave net's probabilities where ``net`` is given."""
    prob = wave_probabilities(x_int, fs_int, net) if net is not None else None
    return [delineate_lead(x_int[:, j], fs_int, local, p, None if prob is None else prob[:, j, :]) for j in range(x_int.shape[1])]


def _drop_working_keys(results: list[dict[str, Any]]) -> None:
    """Remove the per-lead intermediates (signals, search flags) that are not part of a Delineation."""
    for res in results:
        for key in SIGNAL_KEYS + ("p_on_found", "p_peak_found", "p_off_found"):
            res.pop(key, None)


def delineate(
    window: SignalWindow,
    beat_samples: np.ndarray | None = None,
    *,
    params: DelineationParams | None = None,
    cross_lead: bool = True,
    consistency: ConsistencyParams | None = None,
    beat_template: bool = True,
    method: str = "wavenet",
) -> Delineation:
    """Delineate every lead of ``window`` around the beats.

    The window is resampled to ``INTERNAL_FS_HZ`` first (:mod:`ecgtrace.tools._delineation`): the same ECG gives the same marks at 100, 250 or 500 Hz.

    Args:
        window: the signal (mV) and its ``fs_hz``.
        beat_samples: absolute R-peak sample indices (beats outside the window are dropped); None detects them in the window.
        params: delineation constants (defaults tuned on the tuning half of QTDB and LUDB,
            see ``benchmarks/delineation.py``).
        cross_lead: with 3 or more leads, pull a lead's boundary that strays
            from the median of the leads back to it (see ``CROSS_LEAD_LIMIT_MS``).
        consistency: constants of the beat-to-beat template projection
            (:mod:`ecgtrace.tools._delineate_consistency`); ``beat_template=False`` turns it off.
        method: ``"wavenet"`` (default): the boundaries ``params`` names (``net_qrs``, ``net_p``,
            ``net_t``) come from the learned wave segmenter (:mod:`ecgtrace.tools._wave_net`)
            wherever it sees the wave, the rest from the rules; ``"rules"``: the rules alone.
            Either way, a mark no heart produces after the corrections (a P mark after its QRS onset, a T mark
            past the next QRS onset) is dropped, never moved (``params["impossible_marks_dropped"]``).
    """
    signal = _checked_signal(window, method)
    beats, source = _beats_for(window, beat_samples)
    p = params or DelineationParams()
    x_int, fs_int = to_internal(signal, window.fs_hz)
    local = np.round((beats - window.sampfrom) * fs_int / window.fs_hz).astype(np.int64)
    local = np.clip(local, 0, max(x_int.shape[0] - 1, 0))
    net = load_wave_net() if method == "wavenet" else None
    results = _delineate_leads(x_int, fs_int, local, p, net)
    # a clipped lead (tools.clipping) is delineated but has no say in the window's rules: its cut waves are not the heart's
    clipped = clipped_leads(signal, window.fs_hz, window.leads)
    voting = [j for j, lead in enumerate(window.leads) if lead not in clipped] or list(range(len(window.leads)))
    p_waves = _p_rule_all_leads(results, fs_int, p, voting)
    cp = consistency or ConsistencyParams()
    projected = sum(beat_consistency(res, local, fs_int, cp) for res in results) if beat_template else 0
    corrected = _cross_lead_correction(results, fs_int, voting) if cross_lead and len(voting) >= CROSS_LEAD_MIN_LEADS else 0
    impossible = sum(drop_impossible_marks(res, record_gap(fs_int, window.fs_hz)) for res in results)
    j_point = global_j_point(np.stack([results[j]["qrs_off"] for j in voting])) if results else np.zeros(0, dtype=np.int64)
    per_lead = {lead: _lead_result(lead, res, pw, fs_int, window, j_point) for lead, res, pw in zip(window.leads, results, p_waves)}
    atrial = atrial_activity(results, local, fs_int, p_waves)
    _drop_working_keys(results)
    return Delineation(
        fs_hz=float(window.fs_hz),
        sampfrom=int(window.sampfrom),
        n_samples=int(signal.shape[0]),
        leads=tuple(window.leads),
        beat_samples=beats,
        beat_source=source,
        per_lead=per_lead,
        params={"method": method, "wave_net": net.provenance if net is not None else None, "delineation": p.to_json(), "internal_fs_hz": float(fs_int),
                "cross_lead": bool(cross_lead and len(voting) >= CROSS_LEAD_MIN_LEADS), "clipped_leads": list(clipped),
                "cross_lead_corrected": int(corrected), "beat_template": cp.to_json() if beat_template else None, "beat_template_moved": int(projected),
                "impossible_marks_dropped": int(impossible)},
        version=MEASURE_VERSION,
        atrial=atrial,
    )


def write_waves(delineation: Delineation, out_dir: str | os.PathLike[str], record: str, extension: str = "waves") -> Path:
    """Write ``out_dir/<record>.<extension>`` (WFDB annotations, QTDB convention); ``chan`` = lead index."""
    import wfdb

    rows = []
    for chan, lead in enumerate(delineation.leads):
        pts = delineation.per_lead[lead].points
        for k in range(delineation.beat_samples.size):
            for wave in (("p_on", "p_peak", "p_off"), ("qrs_on", "r_peak", "qrs_off"), ("t_on", "t_peak", "t_off")):
                if pts[wave[1]][k] < 0:
                    continue
                for name, symbol, num in _WAVE_MARKS:
                    if name in wave and pts[name][k] >= 0:
                        rows.append((int(pts[name][k]), chan, wave.index(name), symbol, num))
    rows.sort()
    if not rows:
        raise EcgTraceError(f"{record}: no waves were delineated in this window; nothing to write")

    def write_into(folder: Path) -> None:
        wfdb.wrann(record, extension, sample=np.array([r[0] for r in rows], dtype=np.int64), symbol=[r[3] for r in rows],
                   subtype=np.zeros(len(rows), dtype=np.int64), chan=np.array([r[1] for r in rows], dtype=np.int64),
                   num=np.array([r[4] for r in rows], dtype=np.int64), fs=delineation.fs_hz, write_dir=str(folder))

    return write_through_temp_folder(Path(out_dir) / f"{record}.{extension}", write_into)  # a full disk leaves no half file


# --------------------------------------------------------------------------- measurements


def measure_identity() -> dict[str, str]:
    """What decides a measurement besides the signal: ``MEASURE_VERSION`` and the shipped wave net's content hash (for cache keys)."""
    return {"measure": MEASURE_VERSION, "wave_net": load_wave_net().sha256[:16]}


def measure_window(window: SignalWindow, beat_samples: np.ndarray | None = None, *, params: DelineationParams | None = None,
                   method: str = "wavenet") -> WindowMeasurements:
    """Delineate the window (``method``: see :func:`delineate`) and summarize each lead (medians over beats, with the beats used)."""
    delineation = delineate(window, beat_samples, params=params, method=method)
    return measure_delineation(window, delineation)


__all__ = [
    "INTERNAL_FS_HZ",
    "Delineation",
    "DelineationParams",
    "LeadFiducials",
    "LeadMeasurements",
    "WindowMeasurements",
    "delineate",
    "detect_r_peaks",
    "detect_window_beats",
    "measure_identity",
    "measure_window",
    "preprocess",
    "write_waves",
]
