"""Does a record's reference annotation file belong to its signal? Checked before its beats become ground truth.

A reference ``.atr`` is trusted over every detector, so a wrong one poisons a
whole dataset silently: an empty file (0 beats: "normal sinus rhythm" inside
an AF episode), another record's file copied beside this one, or a file with
one flipped bit (every later annotation shifted). :func:`checked_reference`
reads the file and compares its beats with the project's detector
(:func:`ecgtrace.tools.beats.detect_beats_array`) on a few probe windows spread
over the record (bounded cost whatever the length); a reference that the
signal does not bear out is refused with the agreement measured.

Agreement is EC57-style matching (a reference beat and a detected beat within
:data:`MATCH_TOLERANCE_MS` pair up once): F1 of the pooled probe windows, next
to the F1 of the same beats shifted by half a beat (chance). Measured on the
records of ``../shared/data`` (27 MIT-BIH, 9 CPSC 2021, 1 SVDB, 35 QTDB;
``benchmarks/reference_check.py``; every record tuned: the thresholds were
chosen on them): a record's own file scores F1 >= 0.964 and at least 0.678
above chance; the next record's file (same database) scores F1 <= 0.566 and at
most 0.176 above chance. The thresholds sit between (F1 >= 0.7 and 0.4 above chance).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ecgtrace.errors import AnnotationError
from ecgtrace.tools.records import RecordInfo, read_samples

#: A reference beat and a detected beat closer than this are the same beat (AAMI EC57: 150 ms).
MATCH_TOLERANCE_MS = 150.0
#: Below this pooled F1 the reference does not describe this signal ...
MIN_AGREEMENT_F1 = 0.7
#: ... nor when it agrees no better than itself shifted by half a beat (chance, which is high at fast rates).
MIN_MARGIN_OVER_CHANCE = 0.4
#: Probe windows: this many, this long, evenly spread over the record.
N_PROBES = 6
PROBE_S = 30.0
#: Too few beats in all probes together to judge (asystole, noise): the reference is kept, unchecked.
MIN_BEATS_TO_JUDGE = 20


def match_count(reference: np.ndarray, detected: np.ndarray, tolerance: int) -> int:
    """Beats of ``reference`` paired one-to-one with a beat of ``detected`` within ``tolerance`` samples (both sorted)."""
    i = j = matched = 0
    while i < reference.size and j < detected.size:
        gap = int(detected[j]) - int(reference[i])
        if abs(gap) <= tolerance:
            matched += 1
            i += 1
            j += 1
        elif gap < 0:
            j += 1
        else:
            i += 1
    return matched


def _f1(matched: int, n_ref: int, n_det: int) -> tuple[float, float, float]:
    se = matched / n_ref if n_ref else 0.0
    ppv = matched / n_det if n_det else 0.0
    return (2 * se * ppv / (se + ppv) if se + ppv else 0.0), se, ppv


def _probe_detections(info: RecordInfo, n_probes: int, probe_s: float) -> list[tuple[int, int, np.ndarray]]:
    """``(lo, hi, detected beats)`` of each probe window (beats within 1 s of a window edge left out: detector warm-up)."""
    from ecgtrace.tools.beats import detect_beats_array

    leads = [i for i, name in enumerate(info.leads) if name not in info.unusable_leads] or list(range(len(info.leads)))  # by index: names may repeat
    probe = min(int(round(probe_s * info.fs_hz)), info.n_samples)
    edge = int(round(info.fs_hz)) if probe > 4 * info.fs_hz else 0
    out = []
    for start in np.unique(np.linspace(0, info.n_samples - probe, num=n_probes).astype(np.int64)):
        window = read_samples(info, int(start), int(start) + probe, leads)
        detected = np.sort(detect_beats_array(window.signal_mv, info.fs_hz).samples + int(start))
        lo, hi = int(start) + edge, int(start) + probe - edge
        out.append((lo, hi, detected[(detected >= lo) & (detected < hi)]))
    return out


def reference_agreement(info: RecordInfo, reference_beats: np.ndarray, *, n_probes: int = N_PROBES, probe_s: float = PROBE_S) -> dict[str, Any]:
    """How well reference beats match the detector on probe windows.

    Returns ``{f1, sensitivity, ppv, chance_f1, n_reference, n_detected, windows, tolerance_ms}``;
    ``chance_f1`` is the F1 of the same beats shifted by half their median RR
    (either way, averaged): what a file unrelated to the signal would reach.
    Only the usable leads are read.
    """
    tolerance = int(round(MATCH_TOLERANCE_MS * info.fs_hz / 1000.0))
    beats = np.sort(np.asarray(reference_beats, dtype=np.int64))
    half_rr = int(np.median(np.diff(beats)) // 2) if beats.size > 2 else int(info.fs_hz // 2)
    probes = _probe_detections(info, n_probes, probe_s)
    counts = {shift: [0, 0, 0] for shift in (0, half_rr, -half_rr)}  # matched, reference, detected
    for lo, hi, detected in probes:
        for shift, tally in counts.items():
            moved = beats + shift
            ref_in = moved[(moved >= lo) & (moved < hi)]
            tally[0] += match_count(ref_in, detected, tolerance)
            tally[1] += ref_in.size
            tally[2] += detected.size
    f1, se, ppv = _f1(*counts[0])
    chance = float(np.mean([_f1(*counts[s])[0] for s in (half_rr, -half_rr)]))
    return {"f1": round(f1, 4), "sensitivity": round(se, 4), "ppv": round(ppv, 4), "chance_f1": round(chance, 4),
            "n_reference": int(counts[0][1]), "n_detected": int(counts[0][2]), "windows": len(probes), "tolerance_ms": MATCH_TOLERANCE_MS}


def check_reference_beats(info: RecordInfo, reference_beats: np.ndarray, source: str | os.PathLike[str]) -> dict[str, Any]:
    """Refuse reference beats the signal does not bear out; returns the agreement (see :func:`reference_agreement`).

    Raises:
        AnnotationError: the file holds no beats, or its beats disagree with the
            signal (F1 below :data:`MIN_AGREEMENT_F1`, or less than
            :data:`MIN_MARGIN_OVER_CHANCE` above chance).
    """
    if np.asarray(reference_beats).size == 0:
        raise AnnotationError(f"{source}: holds no beat annotations, so it cannot be this record's reference beats "
                              "(move it away to use the detectors)")
    agreement = reference_agreement(info, reference_beats)
    if agreement["n_reference"] + agreement["n_detected"] < MIN_BEATS_TO_JUDGE:
        return {**agreement, "checked": False}
    if agreement["f1"] < MIN_AGREEMENT_F1 or agreement["f1"] - agreement["chance_f1"] < MIN_MARGIN_OVER_CHANCE:
        raise AnnotationError(
            f"{source}: its beats do not match this record's signal (F1 {agreement['f1']:.2f} against the detector on "
            f"{agreement['windows']} windows, chance {agreement['chance_f1']:.2f}; {agreement['n_reference']} reference vs "
            f"{agreement['n_detected']} detected beats, +-{MATCH_TOLERANCE_MS:g} ms): another record's file, or a corrupt one")
    return {**agreement, "checked": True}


_CHECKED: dict[tuple[Any, ...], dict[str, Any]] = {}


def checked_reference(info: RecordInfo, extension: str = "atr", **kwargs: Any) -> Any:
    """:func:`ecgtrace.tools.annotations.read_reference_annotations` of a signal record, refused when it does not match it.

    The check runs once per process for a given file (keyed on the annotation
    file's and the header's size and modification time); its result is in
    ``reference_agreement_of(info, extension)``.

    Raises:
        AnnotationError: unreadable, empty, or not this record's (:func:`check_reference_beats`).
    """
    from ecgtrace.tools.annotations import read_reference_annotations

    ref = read_reference_annotations(info.path, extension, **kwargs)
    key = _stamp(info, extension)
    if key not in _CHECKED:
        _CHECKED[key] = check_reference_beats(info, ref.beat_samples, f"{info.path}.{extension}")
    return ref


def reference_agreement_of(info: RecordInfo, extension: str = "atr") -> dict[str, Any] | None:
    """The agreement :func:`checked_reference` measured for this file in this process (None: not checked)."""
    return _CHECKED.get(_stamp(info, extension))


def _stamp(info: RecordInfo, extension: str) -> tuple[Any, ...]:
    out: list[Any] = [info.path, extension]
    for path in (Path(f"{info.path}.{extension}"), Path(info.path if info.kind == "edf" else f"{info.path}.hea")):
        try:
            stat = path.stat()
            out += [stat.st_size, stat.st_mtime_ns]
        except OSError:
            out += [None, None]
    return tuple(out)
