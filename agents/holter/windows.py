"""Place clean windows in one record: around an event, away from a kind, and the targets built from them.

A QA task's planner (:mod:`ecgtrace.agents.holter.tasks`) chooses what a
template asks about with these pieces. Windows stay clear of noise and of
events of the asked kind that straddle the window edge, and every choice comes
from ``random.Random`` seeded with ``(seed, record, template)``
(:func:`rng_for`), so a plan is deterministic.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from ecgtrace.agents.holter.facts import Facts
from ecgtrace.contracts.vocabulary import COVERING_KINDS, NORMAL, QA_EVENT_KINDS
from ecgtrace.rubrics.template_schema import QATemplate

EDGE_GUARD_MS = 1000
EDGE_BEAT_MS = 300
#: Windows tried per pair of kinds when looking for windows with several findings.
MAX_PAIR_TRIES = 12

Target = dict[str, Any]


def rng_for(seed: int, *parts: Any) -> random.Random:
    """A generator seeded by text, stable across processes and Python runs."""
    return random.Random(":".join(str(p) for p in (seed, *parts)))


def _clean(facts: Facts, t0: int, t1: int, kind: str | None, margin_ms: int = 500) -> bool:
    """No noise near the window, no ectopic beat at its edges, and no event (of ``kind``, or any) straddling them."""
    if facts.noise_near(t0, t1, margin_ms):
        return False
    for edge in (t0, t1):
        i0, i1 = facts.beat_range(edge - EDGE_BEAT_MS, edge + EDGE_BEAT_MS + 1)
        if any(c != "N" for c in facts.class_text[i0:i1]):
            return False
    for event in facts.events_overlapping(t0 - EDGE_GUARD_MS, t1 + EDGE_GUARD_MS):
        if kind is not None and event["kind"] != kind:
            continue
        inside = event["onset_ms"] >= t0 + EDGE_GUARD_MS // 2 and event["offset_ms"] <= t1 - EDGE_GUARD_MS // 2
        covers = event["onset_ms"] <= t0 - EDGE_GUARD_MS and event["offset_ms"] >= t1 + EDGE_GUARD_MS
        if not inside and not (covers and event["kind"] in COVERING_KINDS):
            return False
    return True


def event_window(facts: Facts, event: dict[str, Any], window_ms: int, rng: random.Random, tries: int = 12) -> tuple[int, int] | None:
    """A clean window holding the event (or lying inside a long episode), at a random offset."""
    duration = facts.duration_ms
    if window_ms >= duration:
        return None
    span = event["offset_ms"] - event["onset_ms"]
    for _ in range(tries):
        if span + 2 * EDGE_GUARD_MS > window_ms:
            if event["kind"] not in COVERING_KINDS:
                return None
            lo, hi = event["onset_ms"] + EDGE_GUARD_MS, event["offset_ms"] - EDGE_GUARD_MS - window_ms
        else:
            lo, hi = event["offset_ms"] + EDGE_GUARD_MS - window_ms, event["onset_ms"] - EDGE_GUARD_MS
        lo, hi = max(lo, 0), min(hi, duration - window_ms)
        if hi < lo:
            return None
        t0 = int(rng.randint(int(lo) // 10, int(hi) // 10) * 10)
        if _clean(facts, t0, t0 + window_ms, None):
            return t0, t0 + window_ms
    return None


def free_window(facts: Facts, window_ms: int, rng: random.Random, avoid_kind: str | None, tries: int = 40) -> tuple[int, int] | None:
    """A clean window without any event of ``avoid_kind`` (``None``: without any event at all)."""
    duration = facts.duration_ms
    if window_ms + 2 * EDGE_GUARD_MS >= duration:
        return None
    for _ in range(tries):
        t0 = rng.randint(EDGE_GUARD_MS // 10, (duration - window_ms - EDGE_GUARD_MS) // 10) * 10
        t1 = t0 + window_ms
        if facts.events_overlapping(t0 - EDGE_GUARD_MS, t1 + EDGE_GUARD_MS, avoid_kind):
            continue
        if facts.noise_near(t0, t1, 500):
            continue
        if avoid_kind is not None and not _clean(facts, t0, t1, None):
            continue
        return t0, t1
    return None


# --------------------------------------------------------------------------- targets


def window_target(kind: str, polarity: str, window: tuple[int, int]) -> Target:
    return {"scope": "window", "kind": kind, "polarity": polarity, "t0_ms": window[0], "t1_ms": window[1]}


def present_kinds(facts: Facts, template: QATemplate, allowed: tuple[str, ...]) -> list[str]:
    """The kinds the template targets (its ``event_kinds``, else ``allowed``) that the record has, in template order."""
    wanted = [k for k in (template.event_kinds or list(allowed)) if k in allowed]
    return [k for k in wanted if facts.events_of(k)]


def record_targets(kinds: list[str]) -> list[Target]:
    """One whole-record target per kind."""
    return [{"scope": "record", "kind": k} for k in kinds]


def _closest_pair_target(facts: Facts, kind: str, events: list[dict[str, Any]], window_ms: int, rng: random.Random) -> list[Target]:
    """One window holding the closest pair of events of ``kind``, so count and onset answers are not always 1."""
    if len(events) < 2:
        return []
    gaps = [(events[i + 1]["offset_ms"] - events[i]["onset_ms"], i) for i in range(len(events) - 1)]
    span, i = min(gaps)
    if span + 2 * EDGE_GUARD_MS >= window_ms:
        return []
    window = event_window(facts, {**events[i], "offset_ms": events[i + 1]["offset_ms"]}, window_ms, rng)
    return [window_target(kind, "positive", window)] if window is not None else []


def window_targets(facts: Facts, template: QATemplate, rng: random.Random, kinds: list[str], *, pairs: bool = False,
                   negatives: Callable[[int], int] | None = None) -> list[Target]:
    """Windows per kind: up to ``max_items`` events each, then (``pairs``) the closest pair, then negatives.

    ``negatives(n)`` is how many windows without the kind follow the ``n``
    windows planned for it so far (presence questions balance them; counts add
    one whose answer is 0).
    """
    window_ms = int(template.window_s * 1000)
    targets: list[Target] = []
    for kind in kinds:
        events = facts.events_of(kind)
        picks = rng.sample(range(len(events)), min(template.max_items, len(events)))
        positives = []
        for index in sorted(picks):
            window = event_window(facts, events[index], window_ms, rng)
            if window is not None:
                positives.append(window_target(kind, "positive", window))
        if pairs:
            positives += _closest_pair_target(facts, kind, events, window_ms, rng)
        targets += positives
        for _ in range(negatives(sum(1 for t in targets if t["kind"] == kind)) if negatives else 0):
            window = free_window(facts, window_ms, rng, avoid_kind=kind)
            if window is not None:
                targets.append(window_target(kind, "negative", window))
    return targets


def normal_target(facts: Facts, template: QATemplate, rng: random.Random) -> list[Target]:
    """One window without any event, whose finding is :data:`~ecgtrace.contracts.vocabulary.NORMAL`."""
    window = free_window(facts, int(template.window_s * 1000), rng, avoid_kind=None)
    return [window_target(NORMAL, "positive", window)] if window is not None else []


def window_kinds(facts: Facts, t0: int, t1: int) -> list[str]:
    """The kinds of every event in or over ``[t0, t1)`` (noise left out), sorted."""
    return sorted({e["kind"] for e in facts.events_overlapping(t0, t1) if e["kind"] != "noise"})


def _pair_window(facts: Facts, a: dict[str, Any], b: dict[str, Any], window_ms: int, rng: random.Random) -> tuple[int, int] | None:
    """A clean window holding both events, or one inside an episode holding the other event."""
    for outer, inner in ((a, b), (b, a)):
        if outer["kind"] in COVERING_KINDS and outer["offset_ms"] - outer["onset_ms"] > window_ms and \
                outer["onset_ms"] < inner["onset_ms"] and inner["offset_ms"] < outer["offset_ms"]:
            window = event_window(facts, inner, window_ms, rng)
            if window is not None and outer["onset_ms"] <= window[0] - EDGE_GUARD_MS and outer["offset_ms"] >= window[1] + EDGE_GUARD_MS:
                return window
            return None
    merged = {"kind": a["kind"], "onset_ms": min(a["onset_ms"], b["onset_ms"]), "offset_ms": max(a["offset_ms"], b["offset_ms"])}
    return event_window(facts, merged, window_ms, rng)


def finding_set_targets(facts: Facts, template: QATemplate, rng: random.Random, *, min_findings: int = 2,
                        allowed: tuple[str, ...] = QA_EVENT_KINDS) -> list[Target]:
    """Clean windows that hold events of at least ``min_findings`` different kinds, all of them QA kinds.

    Every pair of events of different kinds close enough to share a window
    (or an event inside an episode of another kind) is tried; at most
    ``max_items`` windows per set of findings, in time order.
    """
    window_ms = int(template.window_s * 1000)
    wanted = set(template.event_kinds or allowed) & set(allowed)
    events = sorted((e for e in facts.events if e["kind"] in wanted), key=lambda e: (e["onset_ms"], e["kind"]))
    by_set: dict[tuple[str, ...], list[tuple[int, int]]] = {}
    tries: dict[tuple[str, str], int] = {}
    for i, first in enumerate(events):
        reach = first["offset_ms"] + (0 if first["kind"] in COVERING_KINDS and first["offset_ms"] - first["onset_ms"] > window_ms else window_ms)
        for other in events[i + 1:]:
            if other["onset_ms"] > reach:
                break
            pair = (first["kind"], other["kind"])
            if other["kind"] == first["kind"] or tries.get(pair, 0) >= MAX_PAIR_TRIES:  # bounded work on 24 h records
                continue
            tries[pair] = tries.get(pair, 0) + 1
            window = _pair_window(facts, first, other, window_ms, rng)
            if window is None:
                continue
            kinds = tuple(window_kinds(facts, *window))
            if len(kinds) >= min_findings and set(kinds) <= set(allowed) and window not in by_set.setdefault(kinds, []):
                by_set[kinds].append(window)
    targets = []
    for kinds, windows in sorted(by_set.items()):
        picks = sorted(rng.sample(range(len(windows)), min(template.max_items, len(windows))))
        targets += [{"scope": "window", "kind": None, "kinds": list(kinds), "polarity": "positive", "t0_ms": windows[k][0], "t1_ms": windows[k][1]}
                    for k in picks]
    return sorted(targets, key=lambda t: t["t0_ms"])
