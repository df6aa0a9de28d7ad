"""Escape beats and rhythms, asystole and sustained atrial tachycardia from a classified beat stream.

Rules (the synthetic holtercare schedule and MIT-BIH's ``j``/``E`` beats and
``(NOD``/``(IVR`` notes are the arbiters; times in s, rates in bpm):

- **Escape beat**: a beat that ends an RR at least ``escape_rr_ratio`` x the
  median of the 8 RR intervals before it (it is late, not premature) and is
  either ventricular (class V, or symbol ``E``: ``ventricular_escape``) or
  junctional (symbol ``j``, or class N with no P wave when ``p_wave_present``
  is given: ``junctional_escape``). After a premature (V, S, F) beat the RR
  must also outlast the full compensatory pause by the same margin (``late_beats``).
  Reference symbols ``j``/``E`` decide by themselves. An isolated escape beat is an event; 3 or more in a row are a rhythm.
- **Junctional rhythm**: ``escape_rhythm_min_beats`` or more consecutive
  junctional beats (symbol ``j``, or N without P) at ``junctional_min_bpm``-``junctional_max_bpm``.
- **Ventricular escape rhythm**: 3 or more consecutive V beats slower than
  ``ventricular_escape_max_bpm`` (faster V runs are ``ivr``/``vt``).
- **Asystole**: an RR longer than ``asystole_min_s`` (3 s) that overlaps no
  artifact span and no no-QRS rhythm (VF, VFL); it is also a ``pause``.
- **Atrial tachycardia**: an S run that lasts at least ``at_min_s`` (sustained);
  it is also reported as the ``svt`` (or ``s_run``) it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ecgtrace.tools.af import _runs

DEFAULT_ESCAPE_PARAMS: dict[str, Any] = {
    "escape_rr_ratio": 1.4,
    "escape_rhythm_min_beats": 3,
    "junctional_min_bpm": 35.0,
    "junctional_max_bpm": 65.0,
    "ventricular_escape_max_bpm": 50.0,
    "asystole_min_s": 3.0,
    "at_min_s": 30.0,
}


#: A beat is judged late only when an N-to-N RR interval lies among the RR intervals this far before it.
RECENT_NN_RR = 8


def late_beats(samples: np.ndarray, ratio: float, normal: np.ndarray, ectopic: np.ndarray | None = None) -> np.ndarray:
    """True where a beat ends an RR >= ``ratio`` x the median of the (up to) 8 N-to-N RR intervals before it.

    Without an N-to-N interval among the ``RECENT_NN_RR`` RRs before it (ventricular bigeminy) no beat is late.

    A beat that follows an ``ectopic`` (premature) beat ends that beat's compensatory pause: the sinus beat is due a
    full two cycles after the beat before the ectopic, so it is late only when it outlasts that by the same margin,
    ``RR >= (1 + ratio) x median - coupling RR`` (the coupling RR: the one into the ectopic beat).
    """
    from numpy.lib.stride_tricks import sliding_window_view

    n = samples.size
    late = np.zeros(n, bool)
    if n < 3:
        return late
    rr = np.diff(samples).astype(np.float64)
    nn_idx = np.flatnonzero(normal[1:] & normal[:-1])  # RR intervals between two N beats
    if nn_idx.size == 0:
        return late
    nn = rr[nn_idx]
    padded = np.concatenate([np.full(7, np.nan), nn])
    med = np.nanmedian(sliding_window_view(padded, 8), axis=1)  # med[k]: median of NN intervals k-7 .. k
    last = np.searchsorted(nn_idx, np.arange(rr.size), side="left") - 1  # the last NN interval strictly before each RR
    # the sinus cycle is known only from a recent NN interval: in ventricular bigeminy none is left, and a median
    # from before the run says nothing about the cycle now
    ok = (last >= 0) & (np.arange(rr.size) - nn_idx[np.maximum(last, 0)] <= RECENT_NN_RR)
    ref = np.full(rr.size, np.inf)
    ref[ok] = med[last[ok]]
    threshold = ratio * ref
    if ectopic is not None:
        coupling = np.concatenate([[0.0], rr[:-1]])  # the RR before RR j: the interval into beat j
        after = np.asarray(ectopic, bool)[:-1].copy()  # RR j starts at beat j
        after[0] = False  # the first beat's coupling RR is not in the stream: the plain rule decides
        threshold = np.where(after, np.maximum(threshold, (1.0 + ratio) * ref - coupling), threshold)
    late[1:] = rr >= threshold
    return late


def escape_flags(samples: np.ndarray, classes: np.ndarray, symbols: np.ndarray | None, p_wave_present: np.ndarray | None, p: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(junctional, ventricular) escape-type beats: by reference symbol when given, else late V / late N without P."""
    if symbols is not None:
        sym = np.asarray(symbols).astype(str)
        return sym == "j", sym == "E"
    late = late_beats(samples, p["escape_rr_ratio"], classes == "N", ectopic=np.isin(classes, ("V", "S", "F")))
    is_v = classes == "V"
    isolated = is_v & ~np.concatenate([[False], is_v[:-1]]) & ~np.concatenate([is_v[1:], [False]])
    ventricular = late & isolated
    junctional = late & (classes == "N") & (~np.asarray(p_wave_present, bool) if p_wave_present is not None else False)
    return junctional, ventricular


def junctional_beats(samples: np.ndarray, classes: np.ndarray, symbols: np.ndarray | None, p_wave_present: np.ndarray | None) -> np.ndarray:
    """Beats of junctional origin: symbol ``j``; without symbols, N beats without a P wave (when P evidence exists)."""
    if symbols is not None:
        return np.asarray(symbols).astype(str) == "j"
    if p_wave_present is None:
        return np.zeros(samples.size, bool)
    return (classes == "N") & ~np.asarray(p_wave_present, bool)


def _rate_bpm(samples: np.ndarray, a: int, b: int, fs_hz: float) -> float:
    span = (samples[b] - samples[a]) / fs_hz
    return 60.0 * (b - a) / span if span > 0 else float("inf")


def escape_events(samples: np.ndarray, classes: np.ndarray, fs_hz: float, symbols: np.ndarray | None, p_wave_present: np.ndarray | None, p: dict[str, Any],
                  irregular: np.ndarray | None = None) -> tuple[list[tuple[str, int, int]], np.ndarray]:
    """Escape beats and junctional rhythm as ``(kind, first, last)``; also the mask of beats they use (not PVCs then).

    ``irregular`` (AF, flutter) beats are never escape beats by lateness: a long RR there is the rhythm, not a sinus failure.
    """
    junc_escape, vent_escape = escape_flags(samples, classes, symbols, p_wave_present, p)
    if irregular is not None and symbols is None:
        junc_escape, vent_escape = junc_escape & ~irregular, vent_escape & ~irregular
    junc = junctional_beats(samples, classes, symbols, p_wave_present)
    events: list[tuple[str, int, int]] = []
    used = np.zeros(samples.size, bool)
    lo, hi = p["junctional_min_bpm"], p["junctional_max_bpm"]
    for a, b in _runs(junc):
        if b - a + 1 >= p["escape_rhythm_min_beats"] and lo <= _rate_bpm(samples, a, b, fs_hz) <= hi:
            events.append(("junctional_rhythm", a, b))
            used[a : b + 1] = True
    for kind, flags in (("junctional_escape", junc_escape), ("ventricular_escape", vent_escape)):
        for a, b in _runs(flags & ~used):
            if b == a:  # isolated; runs of escape V beats are ventricular escape rhythm (from the V runs)
                events.append((kind, a, a))
                used[a] = True
    return events, used


def no_escape_mask(samples: np.ndarray, irregular: np.ndarray, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """Beats that are never escape beats by lateness: in AF or flutter, the first beat after them, and a beat
    whose RR touches an artifact span (a long RR there is lost beats, not a sinus failure)."""
    out = irregular.copy()
    out[1:] |= irregular[:-1]
    for a, b in spans:
        i = int(np.searchsorted(samples, b, side="left"))
        lo = int(np.searchsorted(samples, a, side="left"))
        out[lo : min(i + 1, out.size)] = True
    return out
