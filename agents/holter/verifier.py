"""Check every item against an independent computation and drop what cannot be trusted.

The writer answers from the event list; the verifier recomputes from the beat
table (class string and beat times, :mod:`ecgtrace.agents.holter.recount`)
with its own rules, and drops an item, recording why, when:

* the recomputation disagrees with the answer (``recount disagrees``; each task
  type's ``verify``);
* its evidence lies in or near noise/artifact (``evidence in noise``);
* its evidence touches a detector chunk seam (``chunk seam``, detected annotations only);
* an event or ectopic beat straddles the window edge, a window holds more than
  one finding, unclassified beats, or an HR extremum is nearly tied elsewhere
  (``ambiguous ...``);
* a distractor could itself be a correct answer (``distractor ...``; each task
  type's ``verify_distractors``);
* the question text shows a missing field or a wrong article ("a 82-year-old") (``question ...``);
* on a record annotated by the detectors (no reference ``.atr``), the item
  asserts the presence or absence of an event kind whose detection from the
  signal is not validated against expert annotations on untuned records
  (``not validated from the signal: <kind>: <measured Se/+P>``; the measured
  table is :mod:`ecgtrace.tools.signal_trust`). ``detected_kinds="all"``
  keeps such items, and each then records the verdict on its kinds.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ecgtrace.agents.holter.facts import Facts
from ecgtrace.agents.holter.tasks import get_task
from ecgtrace.contracts.vocabulary import COVERING_KINDS, DETECTED_KINDS, QA_EVENT_KINDS
from ecgtrace.tools.signal_trust import kind_trust

VERIFIER_VERSION = "2"  # 2: items on detected annotations keep only kinds validated from the signal
#: The reason (before its first ``:``) of an item dropped for a kind not validated from the signal.
UNVALIDATED = "not validated from the signal"
SEAM_GUARD_MS = 1000
EDGE_BEAT_GUARD_MS = 300
NOISE_MARGIN_MS = 500
_BAD_TEXT = re.compile(r"\b(None|none-year|unknown|nan)\b|[{}]|\ba adult|\ba (?:8\d?|11|18)-year-old|\ban (?![8]|11-|18-)\d+-year-old")


def _text_and_evidence_checks(facts: Facts, item: dict[str, Any]) -> str | None:
    """Checks every item gets: its question text, and noise or detector seams near its evidence."""
    if _BAD_TEXT.search(item["question"]):
        return "question: shows a missing or placeholder field, or a wrong article"
    for ev in item["evidence"]:
        if ev["t1_ms"] - ev["t0_ms"] < facts.duration_ms and facts.noise_near(ev["t0_ms"], ev["t1_ms"], NOISE_MARGIN_MS):
            return "evidence in noise"
        if any(ev["t0_ms"] - SEAM_GUARD_MS <= s <= ev["t1_ms"] + SEAM_GUARD_MS for s in facts.seams_ms):
            return "chunk seam: evidence within 1 s of a detector chunk boundary"
    return None


def _window_edge_checks(facts: Facts, target: dict[str, Any]) -> str | None:
    """Checks every window item gets: noise, unclassified beats, ectopy at an edge, events straddling an edge."""
    t0, t1 = int(target["t0_ms"]), int(target["t1_ms"])
    if facts.noise_near(t0, t1, NOISE_MARGIN_MS):
        return "evidence in noise: noise inside the window"
    i0, i1 = facts.beat_range(t0, t1)
    window_classes = facts.class_text[i0:i1]
    if "Q" in window_classes or "F" in window_classes:
        return "ambiguous: unclassified or fusion beats in the window"
    for ms in (t0, t1):
        near = (np.abs(facts.beat_ms - ms) <= EDGE_BEAT_GUARD_MS)
        if any(facts.class_text[j] in "SV" for j in np.flatnonzero(near)):
            return "ambiguous boundary: an ectopic beat at the window edge"
    for event in facts.events_overlapping(t0, t1):
        straddles = event["onset_ms"] < t0 <= event["offset_ms"] or event["onset_ms"] < t1 <= event["offset_ms"]
        if straddles and not (event["kind"] in COVERING_KINDS and event["onset_ms"] < t0 and event["offset_ms"] >= t1):
            return f"ambiguous boundary: a {event['kind']} event straddles the window edge"
    return None


def _distractor_checks(facts: Facts, item: dict[str, Any]) -> str | None:
    """A closed item needs distractors, none equal to the answer or to each other; then its task's own check."""
    if item["_format"] != "closed":
        return None
    distractors = item.get("_distractors")
    if not distractors:
        return "distractor: none could be built"
    if item["answer"] in distractors or len(set(distractors)) != len(distractors):
        return "distractor: equals the answer or repeats"
    return get_task(item["task"]).verify_distractors(facts, item)


def signal_trust_check(facts: Facts, item: dict[str, Any], detected_kinds: str = "validated") -> str | None:
    """On detected annotations: why an item rests on a kind not validated from the signal, or None.

    A kept item records the verdict on every kind it asserts in
    ``provenance.params.signal_trust``; with ``detected_kinds="all"`` no item
    is dropped for it.
    """
    if facts.source != "detected":
        return None
    asserted = get_task(item["task"]).asserted_kinds(item)
    verdicts = [kind_trust(k) for k in sorted(QA_EVENT_KINDS if asserted is None else asserted)]
    untrusted = [v for v in verdicts if not v.trusted]
    if untrusted and detected_kinds != "all":
        more = f" (and {len(untrusted) - 1} more kinds)" if len(untrusted) > 1 else ""
        return f"{UNVALIDATED}: {untrusted[0].kind}: {untrusted[0].reason}{more}"
    item["provenance"]["params"]["signal_trust"] = {v.kind: {"trusted": v.trusted, "reason": v.reason} for v in verdicts}
    return None


def check_item(facts: Facts, item: dict[str, Any], *, detected_kinds: str = "validated") -> str | None:
    """Why ``item`` must be dropped, or None to keep it."""
    target = item["_target"]
    return (signal_trust_check(facts, item, detected_kinds)
            or _text_and_evidence_checks(facts, item)
            or (_window_edge_checks(facts, target) if target["scope"] == "window" else None)
            or get_task(item["task"]).verify(facts, item)
            or _distractor_checks(facts, item))


def verify(facts: Facts, items: list[dict[str, Any]], *, detected_kinds: str = "validated") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(kept, dropped)``; each dropped entry is ``{id, template_id, task, reason}``."""
    if detected_kinds not in DETECTED_KINDS:
        raise ValueError(f"detected_kinds must be one of {', '.join(DETECTED_KINDS)} (got {detected_kinds!r})")
    kept, dropped = [], []
    for item in items:
        reason = check_item(facts, item, detected_kinds=detected_kinds)
        if reason is None:
            kept.append(item)
        else:
            dropped.append({"id": item["id"], "template_id": item["template_id"], "task": item["task"], "reason": reason})
    return kept, dropped
