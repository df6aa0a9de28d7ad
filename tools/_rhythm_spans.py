"""Episodes given as spans (rhythm notes or a wave detector) inside :func:`ecgtrace.tools.rhythm.detect_events`.

AFL, VFL and VF come as ``{kind, onset_sample, offset_sample}`` spans rather than
from the beat classes. They are reported as events, and they bound where the
P-wave kinds (:data:`P_WAVE_KINDS`: AV block, non-conducted PAC, junctional
beats) may be called: in flutter the atrial waves are flutter waves, not P
waves, and in VF/VFL (like AF) there are no P waves to read. A P-wave event
that *overlaps* such a span or an AF beat anywhere, not only at its first or
last beat, is dropped: an AV block whose PR "marches" across a flutter span was
read from flutter waves. The beat detector's artifact spans are reported as
noise only where no VF/VFL span explains them (:func:`noise_events`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: Episode kinds given as spans (rhythm notes or a wave detector): no QRS inside VF/VFL, so no pause there.
SPAN_KINDS: tuple[str, ...] = ("afl", "vfl", "vf")
NO_QRS_SPAN_KINDS: tuple[str, ...] = ("vfl", "vf")
#: Kinds read from P waves: not called where the atrial activity is not P waves (AF, flutter) or not visible (VF/VFL).
P_WAVE_KINDS: tuple[str, ...] = ("avb2_mobitz1", "avb2_mobitz2", "avb_2to1", "avb3", "blocked_pac", "junctional_rhythm", "junctional_escape")


def overlaps_any(a: int, b: int, spans: Sequence[tuple[int, int]]) -> bool:
    """Whether ``[a, b)`` overlaps any of the half-open sample ``spans``."""
    return any(min(b, int(s1)) > max(a, int(s0)) for s0, s1 in spans)


def mask_in_spans(samples: np.ndarray, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """Bool per beat: its sample lies in one of ``spans`` (bounds inclusive)."""
    mask = np.zeros(samples.size, bool)
    for a, b in spans:
        mask |= (samples >= a) & (samples <= b)
    return mask


def span_events(samples: np.ndarray, known: Sequence[dict[str, Any]], fs_hz: float, prov: dict[str, Any]) -> list[dict[str, Any]]:
    """Given episodes (AFL, VFL, VF) as events: bounded by their first and last beat (AFL), or by the span (no QRS)."""
    out = []
    for r in known:
        s0, s1 = int(r["onset_sample"]), int(r["offset_sample"])
        lo, hi = np.searchsorted(samples, [s0, s1])  # beats in [s0, s1): a rhythm note's interval ends where the next begins
        if r["kind"] not in NO_QRS_SPAN_KINDS and hi > lo:
            s0, s1 = int(samples[lo]), int(samples[hi - 1])
        out.append({"kind": r["kind"], "onset_sample": s0, "offset_sample": s1, "onset_ms": int(round(s0 * 1000.0 / fs_hz)),
                    "offset_ms": int(round(s1 * 1000.0 / fs_hz)), "n_beats": int(hi - lo), "rate_bpm": None, "lead": None,
                    "first_beat": int(lo) if hi > lo else None, "last_beat": int(hi - 1) if hi > lo else None,
                    "provenance": {**prov, "span_source": r.get("source", "given")}})
    return out


#: Shortest piece of an artifact span, in seconds, still reported as noise once the VF/VFL spans are cut out of it.
#: Set on VFDB 418-422 (tuned half) against the expert NOISE intervals over 1/2/3/5 s: noise-episode +P 49.8/55.8/56.6/55.9 %,
#: episode Se 35/35/34/34 of 40; 2 s keeps the sensitivity.
NOISE_MIN_PIECE_S = 2.0


def noise_events(samples: np.ndarray, artifact_spans: Sequence[tuple[int, int]], no_qrs_spans: Sequence[tuple[int, int]],
                 quiet_gaps: Sequence[tuple[int, int]], fs_hz: float, prov: dict[str, Any]) -> list[dict[str, Any]]:
    """``noise`` events: the artifact spans (samples, half-open) less what the signal explains otherwise.

    An artifact span inside a quiet gap is the detector's view of a flat asystole: no noise. The VF/VFL spans
    (``no_qrs_spans``) are cut out of the others: the detector finds no QRS in fibrillation either, and a span
    reported as both VF and noise would be counted twice (on VFDB 418, the tuned half, every VFL episode was
    also a noise event). Of a span that was cut, pieces shorter than :data:`NOISE_MIN_PIECE_S` are not reported
    (the detector's margin round the VF/VFL, not noise of its own); an uncut span is reported whatever its length.
    """
    out = []
    min_len = NOISE_MIN_PIECE_S * fs_hz
    for s0, s1 in artifact_spans:
        if any(a <= s0 and s1 <= b for a, b in quiet_gaps):
            continue
        pieces = _subtract((int(s0), int(s1)), no_qrs_spans)
        for a, b in pieces:
            if pieces != [(int(s0), int(s1))] and b - a < min_len:
                continue
            lo, hi = np.searchsorted(samples, [a, b])
            out.append({"kind": "noise", "onset_sample": a, "offset_sample": b, "onset_ms": int(round(a * 1000.0 / fs_hz)),
                        "offset_ms": int(round(b * 1000.0 / fs_hz)), "n_beats": int(hi - lo), "rate_bpm": None, "lead": None,
                        "first_beat": None, "last_beat": None, "provenance": prov})
    return out


def _subtract(span: tuple[int, int], cuts: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of the half-open ``span`` outside every one of the half-open ``cuts``."""
    pieces = [span]
    for c0, c1 in sorted((int(a), int(b)) for a, b in cuts):
        pieces = [part for a, b in pieces for part in ((a, min(b, c0)), (max(a, c1), b)) if part[1] > part[0]]
    return pieces


def drop_p_wave_events_in_spans(events: list[dict[str, Any]], no_p_beats: np.ndarray, spans: Sequence[tuple[int, int]]) -> list[dict[str, Any]]:
    """``events`` without the P-wave kinds that overlap a span (samples, half-open) or hold a beat of ``no_p_beats`` (bool per beat)."""
    cum = np.concatenate([[0], np.cumsum(np.asarray(no_p_beats, bool))])

    def excused(e: dict[str, Any]) -> bool:
        if e.get("first_beat") is not None and cum[e["last_beat"] + 1] > cum[e["first_beat"]]:
            return True
        return any(e["onset_sample"] < int(s1) and e["offset_sample"] >= int(s0) for s0, s1 in spans)

    return [e for e in events if e["kind"] not in P_WAVE_KINDS or not excused(e)]
