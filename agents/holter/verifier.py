"""Check every item against an independent computation and drop what cannot be trusted.

The writer answers from the event list; the verifier recomputes from the beat
table (class string and beat times) with its own rules, and drops an item,
recording why, when:

* the recomputation disagrees with the answer (``recount disagrees``);
* its evidence lies in or near noise/artifact (``evidence in noise``);
* its evidence touches a detector chunk seam (``chunk seam``, detected annotations only);
* an event or ectopic beat straddles the window edge, a window holds more than
  one finding, unclassified beats, or an HR extremum is nearly tied elsewhere
  (``ambiguous ...``);
* a distractor could itself be a correct answer (``distractor ...``);
* the question text shows a missing field (``question ...``).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ecgtrace.agents.holter.distractors import timing_matches
from ecgtrace.agents.holter.facts import Facts
from ecgtrace.agents.holter.report import DIAGNOSIS_LABELS, statistics
from ecgtrace.contracts.vocabulary import COVERING_KINDS, RHYTHM_NOTES, NORMAL

VERIFIER_VERSION = "1"
SEAM_GUARD_MS = 1000
EDGE_BEAT_GUARD_MS = 300
HR_TIE_BPM = 1.0
_PATTERNS = {
    "pac": r"(?<!S)S(?!S)", "v_couplet": r"(?<!V)VV(?!V)", "vt": r"V{3,}", "svt": r"S{3,}",
    "v_bigeminy": r"(?:NV){3,}(?!V)", "v_trigeminy": r"(?:NNV){3,}(?!V)",
}
_BAD_TEXT = re.compile(r"\b(None|none-year|unknown|nan)\b|[{}]|\ba adult")


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


def _hr_recheck(facts: Facts, kind: str, k: int = 8, max_skipped: int = 4) -> tuple[int, float, float]:
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


def _window_checks(facts: Facts, item: dict[str, Any], target: dict[str, Any]) -> str | None:
    t0, t1, kind = int(target["t0_ms"]), int(target["t1_ms"]), target["kind"]
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
    task = item["task"]
    spans = recount(facts, kind, i0, i1) if kind != NORMAL else None
    if task in ("closed_count", "open_count") and spans is not None and len(spans) != item["_truth"]:
        return f"recount disagrees: beat table gives {len(spans)}, events give {item['_truth']}"
    if task in ("closed_timing", "open_timing") and spans is not None:
        onsets = [int(facts.beat_ms[a]) for a, _ in spans]
        if not timing_matches(onsets, item["_truth"], 0):
            return "recount disagrees: onsets from the beat table differ"
    if task == "closed_presence":
        present = _presence(facts, kind, t0, t1, i0, i1, spans)
        if present is not None and present != (item["answer"] == "Yes"):
            return f"recount disagrees: beat table says {kind} {'present' if present else 'absent'}"
    if task in ("closed_diagnosis", "open_diagnosis", "open_evidence"):
        others = {e["kind"] for e in facts.events_overlapping(t0, t1)} - {kind}
        if others:
            return f"ambiguous: several findings in the window ({', '.join(sorted(others | {kind}))})"
        if kind == NORMAL and (set(window_classes) - {"N"}):
            return "recount disagrees: ectopic beats in a normal window"
        if spans is not None and not spans:
            return f"recount disagrees: no {kind} in the beat table"
    return None


def _presence(facts: Facts, kind: str, t0: int, t1: int, i0: int, i1: int, spans: list[tuple[int, int]] | None) -> bool | None:
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


def _distractor_checks(facts: Facts, item: dict[str, Any]) -> str | None:
    distractors = item.get("_distractors")
    if item["_format"] != "closed":
        return None
    if not distractors:
        return "distractor: none could be built"
    if item["answer"] in distractors or len(set(distractors)) != len(distractors):
        return "distractor: equals the answer or repeats"
    task, tol = item["task"], item["provenance"]["params"]["tolerance_ms"]
    if task == "closed_timing":
        target = item["_target"]
        all_onsets = [e["onset_ms"] for e in facts.events_of(target["kind"])]
        for values in item["_distractor_values"]:
            if timing_matches(values, item["_truth"], tol) or all(any(abs(v - e) <= tol for e in all_onsets) for v in values):
                return "distractor: a timestamp set matches real events"
    if task == "closed_hr_extremum":
        kind = item["_target"]["hr_kind"]
        ext = float(facts.hr[kind]["hr_bpm"])
        for t in item["_distractor_values"]:
            rates = facts.hr_near(t, tol)
            near = None if rates is None else (rates[1] if kind == "max" else rates[0])
            if abs(t - item["_truth"]) <= tol or near is None or abs(near - ext) <= HR_TIE_BPM:
                return "distractor: an offset time is as extreme as the answer"
    if task == "closed_diagnosis":
        t0, t1 = item["_target"]["t0_ms"], item["_target"]["t1_ms"]
        present = {DIAGNOSIS_LABELS[e["kind"]] for e in facts.events_overlapping(t0, t1) if e["kind"] in DIAGNOSIS_LABELS}
        if present.intersection(distractors):
            return "distractor: a label present in the window"
    return None


def check_item(facts: Facts, item: dict[str, Any]) -> str | None:
    """Why ``item`` must be dropped, or None to keep it."""
    if _BAD_TEXT.search(item["question"]):
        return "question: shows a missing or placeholder field"
    target = item["_target"]
    margin = 500
    for ev in item["evidence"]:
        if ev["t1_ms"] - ev["t0_ms"] < facts.duration_ms and facts.noise_near(ev["t0_ms"], ev["t1_ms"], margin):
            return "evidence in noise"
        if any(ev["t0_ms"] - SEAM_GUARD_MS <= s <= ev["t1_ms"] + SEAM_GUARD_MS for s in facts.seams_ms):
            return "chunk seam: evidence within 1 s of a detector chunk boundary"
    if target["scope"] == "window":
        if facts.noise_near(target["t0_ms"], target["t1_ms"], margin):
            return "evidence in noise: noise inside the window"
        reason = _window_checks(facts, item, target)
        if reason:
            return reason
    elif item["task"].endswith("hr_extremum"):
        t, value, other = _hr_recheck(facts, target["hr_kind"])
        if abs(t - item["_truth"]) > item["provenance"]["params"]["tolerance_ms"]:
            return f"recount disagrees: HR extremum recomputed at {t} ms"
        if abs(value - other) <= HR_TIE_BPM:
            return f"ambiguous: HR {target['hr_kind']} nearly tied elsewhere ({value:.1f} vs {other:.1f} bpm)"
    elif item["task"] in ("open_count", "closed_count"):
        spans = recount(facts, target["kind"])
        if spans is not None and len(spans) != item["_truth"]:
            return f"recount disagrees: beat table gives {len(spans)}, events give {item['_truth']}"
    elif item["task"].startswith("report_"):
        stats = statistics(facts)
        if stats["total_beats"] != len(facts.class_text) or stats["pvc_total"] != facts.class_text.count("V"):
            return "recount disagrees: report totals"
    return _distractor_checks(facts, item)


def verify(facts: Facts, items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(kept, dropped)``; each dropped entry is ``{id, template_id, task, reason}``."""
    kept, dropped = [], []
    for item in items:
        reason = check_item(facts, item)
        if reason is None:
            kept.append(item)
        else:
            dropped.append({"id": item["id"], "template_id": item["template_id"], "task": item["task"], "reason": reason})
    return kept, dropped
