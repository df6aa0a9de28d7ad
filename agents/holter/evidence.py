"""What a written item points at: evidence spans, display windows, and the explanation of a window's finding.

Evidence is the part of the signal an answer rests on (a lead, a time span in
ms from the recording start, beat indices). Display windows are the 10 s
windows a whole-record item shows; they never point at the answer alone.
"""

from __future__ import annotations

import random
from typing import Any

from ecgtrace.agents.holter.facts import Facts
from ecgtrace.agents.holter.report import LABELS, morphology_clues, rhythm_clues

DISPLAY_WINDOW_MS = 10_000
MAX_DISPLAY_WINDOWS = 4
MAX_EVIDENCE_BEATS = 64


def evidence_span(lead: str | None, t0: int, t1: int, beats: list[int]) -> dict[str, Any]:
    """``{lead, t0_ms, t1_ms, beats}`` (plain JSON; :class:`ecgtrace.contracts.Evidence`)."""
    return {"lead": lead, "t0_ms": int(t0), "t1_ms": int(t1), "beats": [int(b) for b in beats]}


def event_evidence(lead: str | None, event: dict[str, Any]) -> dict[str, Any]:
    """Evidence of one event: its span and beat indices (only the first and last for episodes over ``MAX_EVIDENCE_BEATS``)."""
    first, last = event.get("first_beat"), event.get("last_beat")
    if first is None or last is None:
        beats: list[int] = []
    elif last - first + 1 > MAX_EVIDENCE_BEATS:
        beats = [first, last]
    else:
        beats = list(range(first, last + 1))
    return evidence_span(lead, event["onset_ms"], event["offset_ms"], beats)


def window_evidence(facts: Facts, lead: str | None, t0: int, t1: int, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events' evidence, else the whole window with every beat in it."""
    return [event_evidence(lead, e) for e in events] or [evidence_span(lead, t0, t1, list(range(*facts.beat_range(t0, t1))))]


def events_inside(facts: Facts, kind: str, t0: int, t1: int) -> list[dict[str, Any]]:
    """Events of ``kind`` that start and end inside ``[t0, t1)``."""
    return [e for e in facts.events_of(kind) if e["onset_ms"] >= t0 and e["offset_ms"] < t1]


def centered_display(facts: Facts, t0: int, t1: int, length: int = DISPLAY_WINDOW_MS) -> list[int]:
    """A display window centered on ``[t0, t1]``, kept inside the record."""
    mid = (t0 + t1) // 2
    start = min(max(mid - length // 2, 0), max(facts.duration_ms - length, 0))
    return [int(start), int(min(start + length, facts.duration_ms))]


def display_around(facts: Facts, t_ms: int, rng: random.Random, length: int = DISPLAY_WINDOW_MS) -> list[int]:
    """A display window holding ``t_ms`` at a random place at least 1 s from either edge."""
    start = t_ms - rng.randint(1000, length - 1000)
    start = min(max(start, 0), max(facts.duration_ms - length, 0))
    return [int(start), int(min(start + length, facts.duration_ms))]


def window_values(t0: int, t1: int, kind: str) -> dict[str, Any]:
    """Stem fields of a window question (times and the event's wording)."""
    singular, plural = LABELS[kind]
    return {"t0_ms": t0, "t1_ms": t1, "t0_s": f"{t0 / 1000:.3f}", "t1_s": f"{t1 / 1000:.3f}", "event": singular, "event_plural": plural}


def evidence_text(facts: Facts, diagnosis: str, event: dict[str, Any] | None, t0: int, t1: int, *, measure: bool = True) -> str:
    """``Finding: ... Rhythm and timing clues: ... Morphology clues: ...`` for one window."""
    rhythm = rhythm_clues(facts, event, t0, t1)
    i0, i1 = facts.beat_range(t0, t1)
    morph: list[str] = []
    if measure and facts.record["leads"]:
        try:
            from ecgtrace.tools.measure import measure_window
            from ecgtrace.tools.record_source import record_info
            from ecgtrace.tools.records import read_window

            window = read_window(record_info(facts.record["path"]), t0 / 1000.0, t1 / 1000.0)
            morph = morphology_clues(measure_window(window, facts.beat_samples[i0:i1]), facts.class_text[i0:i1])
        except Exception as exc:  # noqa: BLE001 - a failed measurement leaves the morphology clues out, with the reason
            morph = [f"not measured ({type(exc).__name__})"]
    elif not facts.record["leads"]:
        morph = ["not available (annotation-only record: no samples to measure)"]
    else:
        morph = morphology_clues({}, facts.class_text[i0:i1])
    return (f"Finding: {diagnosis}. Rhythm and timing clues: {'; '.join(rhythm) or 'none'}. "
            f"Morphology clues: {'; '.join(morph) or 'none'}.")
