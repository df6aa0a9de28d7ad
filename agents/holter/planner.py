"""Choose what each template asks about in one record: event kinds, windows, HR extrema.

The planner covers every event kind the record has, balances presence
questions (as many windows without a kind as with it), keeps windows clear of
noise and of events of the asked kind that straddle the window edge, and is
deterministic: every choice comes from ``random.Random`` seeded with
``(seed, record, template)``.
"""

from __future__ import annotations

import random
from typing import Any

from ecgtrace.agents.holter.facts import Facts
from ecgtrace.contracts.vocabulary import COUNTABLE_KINDS, COVERING_KINDS, EPISODE_KINDS, NORMAL
from ecgtrace.contracts.vocabulary import QA_EVENT_KINDS as EVENT_KINDS
from ecgtrace.rubrics.template_schema import QATemplate

#: Kinds a task may target when the template lists none.
TASK_KINDS: dict[str, tuple[str, ...]] = {
    "closed_presence": EVENT_KINDS,
    "closed_diagnosis": EVENT_KINDS,
    "open_diagnosis": EVENT_KINDS,
    "open_evidence": EVENT_KINDS,
    "closed_count": COUNTABLE_KINDS,
    "open_count": COUNTABLE_KINDS,
    "closed_timing": COUNTABLE_KINDS,
    "open_timing": COUNTABLE_KINDS,
}
EDGE_GUARD_MS = 1000
EDGE_BEAT_MS = 300


def rng_for(seed: int, *parts: Any) -> random.Random:
    """A generator seeded by text, stable across processes and Python runs."""
    return random.Random(":".join(str(p) for p in (seed, *parts)))


def plan(facts: Facts, templates: list[QATemplate], seed: int) -> list[dict[str, Any]]:
    """One plan entry per template: ``{template_id, targets: [...]}`` (plain JSON)."""
    entries = []
    for template in templates:
        rng = rng_for(seed, facts.record["db"], facts.record["id"], template.id)
        targets = _targets(facts, template, rng)
        if targets:
            entries.append({"template_id": template.id, "targets": targets})
    return entries


def _kinds(template: QATemplate) -> list[str]:
    allowed = TASK_KINDS.get(template.task, EVENT_KINDS)
    return [k for k in (template.event_kinds or list(allowed)) if k in allowed]


def _targets(facts: Facts, template: QATemplate, rng: random.Random) -> list[dict[str, Any]]:
    task = template.task
    if task.startswith("report_"):
        return [{"scope": "record"}]
    if task.endswith("hr_extremum"):
        return [{"scope": "record", "hr_kind": k} for k in ("max", "min") if facts.hr.get(k)]
    present = [k for k in _kinds(template) if facts.events_of(k)]
    if template.scope == "record":
        return [{"scope": "record", "kind": k} for k in present]
    window_ms = int(template.window_s * 1000)
    targets: list[dict[str, Any]] = []
    for kind in present:
        events = facts.events_of(kind)
        picks = rng.sample(range(len(events)), min(template.max_items, len(events)))
        for index in sorted(picks):
            window = event_window(facts, events[index], window_ms, rng)
            if window is not None:
                targets.append({"scope": "window", "kind": kind, "polarity": "positive", "t0_ms": window[0], "t1_ms": window[1]})
        if task in ("closed_count", "open_count", "closed_timing", "open_timing") and len(events) > 1:
            # one window holding the closest pair of events, so answers are not always 1
            gaps = [(events[i + 1]["offset_ms"] - events[i]["onset_ms"], i) for i in range(len(events) - 1)]
            span, i = min(gaps)
            if span + 2 * EDGE_GUARD_MS < window_ms:
                pair = {**events[i], "offset_ms": events[i + 1]["offset_ms"]}
                window = event_window(facts, pair, window_ms, rng)
                if window is not None:
                    targets.append({"scope": "window", "kind": kind, "polarity": "positive", "t0_ms": window[0], "t1_ms": window[1]})
        if task == "closed_presence" or task in ("closed_count", "open_count"):
            # presence: as many windows without the kind as with it; counts: one window whose answer is 0
            n_neg = sum(1 for t in targets if t["kind"] == kind) if task == "closed_presence" else 1
            for _ in range(n_neg):
                window = free_window(facts, window_ms, rng, avoid_kind=kind)
                if window is not None:
                    targets.append({"scope": "window", "kind": kind, "polarity": "negative", "t0_ms": window[0], "t1_ms": window[1]})
    if task in ("closed_diagnosis", "open_diagnosis"):
        window = free_window(facts, window_ms, rng, avoid_kind=None)
        if window is not None:
            targets.append({"scope": "window", "kind": NORMAL, "polarity": "positive", "t0_ms": window[0], "t1_ms": window[1]})
    return targets


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
