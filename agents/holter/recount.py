"""Recompute findings from the beat table alone (class string and beat times), independently of the event list.

The writer answers from the event list; the verifier's checks
(:mod:`ecgtrace.agents.holter.verifier` and each task type's ``verify``)
compare those answers with what these functions find with their own rules.
"""

from __future__ import annotations

import re

import numpy as np

from ecgtrace.agents.holter.facts import Facts
from ecgtrace.contracts.vocabulary import RHYTHM_NOTES

_PATTERNS = {
    "pac": r"(?<!S)S(?!S)", "v_couplet": r"(?<!V)VV(?!V)", "vt": r"V{3,}", "svt": r"S{3,}",
    "v_bigeminy": r"(?:NV){3,}(?!V)", "v_trigeminy": r"(?:NNV){3,}(?!V)",
}


def recount(facts: Facts, kind: str, i_lo: int = 0, i_hi: int | None = None) -> list[tuple[int, int]] | None:
    """Beat-index spans ``(first, last)`` of ``kind`` found in the beat table, fully inside ``[i_lo, i_hi)``.

    None when the kind has no beat-table definition (rhythm episodes).
    """
    text, beat_ms = facts.class_text, facts.beat_ms
    i_hi = len(text) if i_hi is None else i_hi
    lo, hi = max(i_lo - 8, 0), min(i_hi + 8, len(text))
    if kind in ("v_bigeminy", "v_trigeminy"):  # a chain of at least 3 cycles inside the window
        lo, hi = i_lo, i_hi
    segment = text[lo:hi]
    if kind == "pause":
        rr = np.diff(beat_ms[i_lo:i_hi])
        return [(i_lo + int(i), i_lo + int(i) + 1) for i in np.flatnonzero(rr > 2000)]
    if kind == "pvc":
        patterned = set()
        for pattern_kind in ("v_bigeminy", "v_trigeminy"):
            for m in re.finditer(_PATTERNS[pattern_kind], segment):
                patterned.update(range(lo + m.start(), lo + m.end()))
        spans = [(lo + m.start(), lo + m.start()) for m in re.finditer(r"(?<!V)V(?!V)", segment) if lo + m.start() not in patterned]
    elif kind in _PATTERNS:
        spans = [(lo + m.start(), lo + m.end() - 1) for m in re.finditer(_PATTERNS[kind], segment)]
    else:
        return None
    return [(a, b) for a, b in spans if a >= i_lo and b < i_hi]


def hr_recheck(facts: Facts, kind: str, k: int = 8, max_skipped: int = 4) -> tuple[int, float, float]:
    """(time, value, best value more than 16 s away) of the HR extremum, recomputed from the beat table.

    Valid RRs join two normal beats, last 250-3000 ms and touch no noise span;
    the rate is 60000 * k / (sum of k consecutive valid RRs) when those span at
    most ``k + max_skipped`` beats, stamped at the last beat.
    """
    t = facts.beat_ms
    rr = np.diff(t).astype(float)
    normal = np.frombuffer(facts.class_text.encode("ascii"), dtype="S1") == b"N"
    ok = normal[1:] & normal[:-1] & (rr >= 250) & (rr <= 3000)
    for a, b in facts.noise:
        ok &= ~((t[1:] >= a) & (t[:-1] <= b))
    ends = np.flatnonzero(ok) + 1  # beat index closing each valid RR
    sums = np.convolve(rr[ends - 1], np.ones(k), mode="valid")
    last, first = ends[k - 1:], ends[: ends.size - k + 1] - 1
    keep = (last - first) <= k + max_skipped
    hr, times = 60000.0 * k / sums[keep], t[last[keep]]
    i = int(np.argmax(hr) if kind == "max" else np.argmin(hr))
    far = np.abs(times - times[i]) > 2 * k * 1000
    other = (hr[far].max() if kind == "max" else hr[far].min()) if far.any() else (0.0 if kind == "max" else 1e9)
    return int(times[i]), float(hr[i]), float(other)


def presence(facts: Facts, kind: str, t0: int, t1: int, i0: int, i1: int, spans: list[tuple[int, int]] | None) -> bool | None:
    """Whether ``kind`` is in the window by the beat table, the reference rhythm notes or the rate; None when undecidable."""
    if spans is not None:
        return bool(spans)
    notes = {k: RHYTHM_NOTES[k] for k in ("af", "avb1")}  # episodes whose reference note is the truth; rates are rechecked below
    if kind in notes and facts.source == "reference" and facts.bundle.get("rhythm_intervals"):
        return any(r["label"] == notes[kind] and r["offset_ms"] > t0 and r["onset_ms"] < t1 for r in facts.bundle["rhythm_intervals"])
    rr = np.diff(facts.beat_ms[i0:i1]).astype(float)
    if kind in ("sinus_tachycardia", "sinus_bradycardia") and rr.size >= 3 and set(facts.class_text[i0:i1]) <= {"N"}:
        rate = 60000.0 / float(np.median(rr))
        return rate > 100 if kind == "sinus_tachycardia" else rate < 60
    return None
