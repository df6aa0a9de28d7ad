"""Inputs of :func:`ecgtrace.tools.rhythm.detect_events` measured from the signal (no reference annotation).

A user's own recording has no ``.atr`` P marks or rhythm notes. This module
gives :func:`detect_events` what it can read from the signal instead, with the
provenance of each part and, where the signal cannot settle a kind, the reason
it is left out (``undecided``) rather than a guess:

- P-wave peaks and per-beat P presence (:func:`ecgtrace.tools.holter_p.detect_p_waves`):
  AV block (Mobitz I/II, 2:1, third degree), non-conducted PACs, junctional beats.
  Where P waves are not visible (AF, a lead without P), beats count as having a P
  (no junctional call) and no P peak is given there.
- VF/VFL spans (:func:`ecgtrace.tools._rhythm_waves.ventricular_wave_spans`) in
  the detector's artifact spans and in runs of "beats" faster than 200/min
  (:func:`wave_candidate_spans`).
- Long RR gaps and how quiet their signal is (:func:`ecgtrace.tools._rhythm_gaps.measure_gaps`):
  no pause or asystole in a busy gap (missed beats, noise the artifact spans did not cover), and a
  quiet one is a pause even with an artifact span inside (a flat asystole).
- Atrial flutter spans (:func:`ecgtrace.tools._rhythm_flutter.flutter_spans`, on the P-wave
  detector's aligned R fiducials ``r_fiducial``: its QRS-T cancellation needs them), outside
  artifact and VF/VFL spans, with their atrial rate: ``afl`` events; the P-wave kinds
  are not called where an event overlaps them (flutter waves are not P waves; ``undecided`` says so).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ecgtrace.tools._rhythm_flutter import FLUTTER_VERSION, flutter_spans
from ecgtrace.tools._rhythm_gaps import GAPS_VERSION, measure_gaps
from ecgtrace.tools._rhythm_spans import P_WAVE_KINDS  # kinds that need P waves: left out (with the reason) where none are visible
from ecgtrace.tools._rhythm_waves import WAVES_VERSION, ventricular_wave_spans
from ecgtrace.tools.holter_p import detect_p_waves
from ecgtrace.tools.records import RecordInfo, open_record

SIGNAL_INPUTS_VERSION = "4"  # 4: long RR gaps read on the signal (busy: no pause; quiet: a pause despite an artifact span)


def wave_candidate_spans(beat_samples: np.ndarray, fs_hz: float, artifact_spans: Sequence[tuple[int, int]], n_samples: int, *,
                         fast_rr_s: float = 0.30, min_fast_beats: int = 8, pad_s: float = 1.0) -> list[tuple[int, int]]:
    """Where VF/VFL may be: the beat detector's artifact spans, and stretches of ``min_fast_beats`` or more
    "beats" under ``fast_rr_s`` apart (over 200/min: VF waves that the detector took for QRS complexes), merged."""
    beats = np.asarray(beat_samples, dtype=np.int64)
    spans = [(int(a), int(b)) for a, b in artifact_spans]
    if beats.size > 1:
        from ecgtrace.tools.af import _runs

        fast = np.diff(beats) < fast_rr_s * fs_hz
        pad = int(pad_s * fs_hz)
        spans += [(int(beats[a]) - pad, int(beats[b + 1]) + pad) for a, b in _runs(fast) if b - a + 1 >= min_fast_beats]
    merged: list[list[int]] = []
    for a, b in sorted((max(a, 0), min(b, n_samples)) for a, b in spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged if b > a]


def signal_event_inputs(
    record: RecordInfo | str | os.PathLike[str],
    beat_samples: np.ndarray,
    beat_classes: Sequence[str] | np.ndarray,
    *,
    artifact_spans: Sequence[tuple[int, int]] = (),
    p_wave_present: np.ndarray | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    """``{"kwargs": {...for detect_events}, "undecided": [{kinds, reason}], "provenance": {...}}``.

    ``workers``: processes for the P-wave search and the flutter pass's chunk reads (the result does not depend on it).
    ``p_wave_present`` (e.g. the classifier's) is combined with the P-wave
    detector's: a beat lacks a P only when both say so where P waves are visible.
    """
    info = record if isinstance(record, RecordInfo) else open_record(record)
    beats = np.asarray(beat_samples, dtype=np.int64)
    pw = detect_p_waves(info, beats, beat_classes, artifact_spans=artifact_spans, workers=workers)
    present = pw.p_present | ~pw.p_known
    if p_wave_present is not None:
        present = present | np.asarray(p_wave_present, bool)
    undecided = []
    if pw.status != "ok":
        undecided.append({"kinds": list(P_WAVE_KINDS), "reason": f"P waves: {pw.status}",
                          "spans": [[c["start"], c["stop"]] for c in pw.chunks if c["status"] != "ok"]})
    waves = ventricular_wave_spans(info, wave_candidate_spans(beats, info.fs_hz, artifact_spans, info.n_samples))
    excluded = [(int(a), int(b)) for a, b in artifact_spans] + [(int(w["onset_sample"]), int(w["offset_sample"])) for w in waves]
    # the P detector's R fiducials, aligned on each chunk's median QRS: detected-beat jitter (12-20 ms SD) spoils the
    # flutter detector's QRS-T cancellation (the synthetic 4:1 episode: 48 of 312 s found from raw detected beats, all from these)
    flutter = flutter_spans(info, pw.r_fiducial, beat_classes, excluded, workers=workers)
    if flutter:
        undecided.append({"kinds": list(P_WAVE_KINDS), "reason": "inside atrial flutter: flutter waves are not P waves",
                          "spans": [[f["onset_sample"], f["offset_sample"]] for f in flutter]})
    gaps = measure_gaps(info, beats, [(int(w["onset_sample"]), int(w["offset_sample"])) for w in waves])
    busy = [g for g in gaps if g["busy"]]
    if busy:
        undecided.append({"kinds": ["pause", "asystole"], "reason": "the long RR gap swings like a QRS: missed beats or noise, not a pause",
                          "spans": [[g["onset_sample"], g["offset_sample"]] for g in busy]})
    kwargs = {"p_wave_samples": pw.p_samples if pw.p_samples.size else None, "p_wave_present": present, "rhythm_spans": waves + flutter,
              "conduction_beat_samples": pw.r_fiducial, "gaps": gaps}
    prov = {"method": "rhythm_signal.signal_event_inputs", "version": SIGNAL_INPUTS_VERSION, "p_waves": pw.provenance, "p_wave_status": pw.status,
            "waves": {"method": "_rhythm_waves.ventricular_wave_spans", "version": WAVES_VERSION},
            "flutter": {"method": "_rhythm_flutter.flutter_spans", "version": FLUTTER_VERSION},
            "gaps": {"method": "_rhythm_gaps.measure_gaps", "version": GAPS_VERSION}}
    return {"kwargs": kwargs, "undecided": undecided, "provenance": prov, "p_waves": pw}
