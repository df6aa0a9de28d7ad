"""Write QA items for one template and its planned targets; answers are computed, never generated.

Items leave the writer without ``split``, ``modalities`` and ``messages``
(added later) and with closed-question distractors not yet mixed with the
answer: :func:`ecgtrace.agents.holter.dataset.finalize` places answers so that their
positions are balanced across the whole dataset. Keys starting with ``_``
are working data for the verifier and renderer and never reach ``qa.jsonl``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ecgtrace.agents.holter.distractors import count_distractors, format_ms_list, hr_distractors, label_distractors, timing_distractors
from ecgtrace.agents.holter.facts import Facts
from ecgtrace.agents.holter.assets import hourly_text
from ecgtrace.agents.holter.report import DIAGNOSIS_LABELS, LABELS, morphology_clues, rhythm_clues, statistics, summary_text
from ecgtrace.agents.holter.planner import rng_for
from ecgtrace.contracts.vocabulary import COVERING_KINDS, EPISODE_KINDS, NORMAL
from ecgtrace.rubrics.template_schema import QATemplate, safe_format

WRITER_VERSION = "1"
DISPLAY_WINDOW_MS = 10_000
MAX_DISPLAY_WINDOWS = 4
MAX_EVIDENCE_BEATS = 64
#: Findings a beat class can be part of: never offered as a wrong diagnosis when that class is in the window.
RELATED_KINDS = {"V": ("pvc", "v_couplet", "vt", "v_bigeminy", "v_trigeminy"), "S": ("pac", "svt")}


def patient_context(patient: dict[str, Any], duration_ms: int) -> str:
    """``"Holter ECG of a 59-year-old female patient. "``; absent fields are left out, never guessed."""
    kind = "Holter ECG" if duration_ms >= 3_600_000 else "ECG recording"
    age, sex = patient.get("age_years"), patient.get("sex")
    words = []
    if isinstance(age, int) and 0 < age < 130:
        words.append(f"{age}-year-old")
    if sex in ("male", "female"):
        words.append(sex)
    if not words:
        return f"{kind}. "
    return f"{kind} of a {' '.join(words)} patient. "


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "x"


def _event_inside(facts: Facts, kind: str, t0: int, t1: int) -> list[dict[str, Any]]:
    return [e for e in facts.events_of(kind) if e["onset_ms"] >= t0 and e["offset_ms"] < t1]


def _evidence(lead: str | None, t0: int, t1: int, beats: list[int]) -> dict[str, Any]:
    return {"lead": lead, "t0_ms": int(t0), "t1_ms": int(t1), "beats": [int(b) for b in beats]}


def _event_evidence(lead: str | None, event: dict[str, Any]) -> dict[str, Any]:
    """Evidence of one event: its span and beat indices (only the first and last for episodes over ``MAX_EVIDENCE_BEATS``)."""
    first, last = event.get("first_beat"), event.get("last_beat")
    if first is None or last is None:
        beats: list[int] = []
    elif last - first + 1 > MAX_EVIDENCE_BEATS:
        beats = [first, last]
    else:
        beats = list(range(first, last + 1))
    return _evidence(lead, event["onset_ms"], event["offset_ms"], beats)


def _centered(facts: Facts, t0: int, t1: int, length: int = DISPLAY_WINDOW_MS) -> list[int]:
    mid = (t0 + t1) // 2
    start = min(max(mid - length // 2, 0), max(facts.duration_ms - length, 0))
    return [int(start), int(min(start + length, facts.duration_ms))]


def _around(facts: Facts, t_ms: int, rng: Any, length: int = DISPLAY_WINDOW_MS) -> list[int]:
    """A display window holding ``t_ms`` at a random place at least 1 s from either edge."""
    start = t_ms - rng.randint(1000, length - 1000)
    start = min(max(start, 0), max(facts.duration_ms - length, 0))
    return [int(start), int(min(start + length, facts.duration_ms))]


def write_items(facts: Facts, template: QATemplate, targets: list[dict[str, Any]], *, seed: int, measure: bool = True) -> list[dict[str, Any]]:
    """One item per target (a target the task cannot answer yields none)."""
    record = dict(facts.record)
    lead = record["leads"][0] if record["leads"] else None
    context = patient_context(facts.patient, facts.duration_ms)
    items = []
    for k, target in enumerate(targets):
        rng = rng_for(seed, record["db"], record["id"], template.id, k)
        item = _write_one(facts, template, target, rng, lead, measure)
        if item is None:
            continue
        values = {"context": context, "duration_h": f"{facts.duration_ms / 3_600_000:.0f}" if facts.duration_ms >= 3_600_000 else f"{facts.duration_ms / 3_600_000:.1f}",
                  "event": "", "event_plural": "", "t0_ms": "", "t1_ms": "", "t0_s": "", "t1_s": "", "window_s": f"{template.window_s:g}",
                  "hr_kind": "", "diagnosis": "", "lead": lead or "", **item.pop("_values", {})}
        stem = template.stems[rng.randrange(len(template.stems))]
        item.update({
            "id": f"{_slug(record['db'])}-{_slug(record['id'])}-{template.id}-{k:03d}",
            "task": template.task,
            "template_id": template.id,
            "record": record,
            "question": re.sub(r"\s{2,}", " ", safe_format(stem, values)).strip(),
            "answer_type": template.answer.format,
            "provenance": {"source": facts.source, "method": f"ecgtrace.agents.writer:{template.task}", "version": WRITER_VERSION,
                           "params": {"template_id": template.id, "template_version": template.version, "seed": seed,
                                      "annotation": {key: str(facts.provenance.get(key, "")) for key in ("source", "method", "version")}, "tolerance_ms": template.answer.tolerance_ms,
                                      "kind": target.get("kind"), "hr_kind": target.get("hr_kind")}},
            "_target": target,
            "_format": template.format,
        })
        if item["window"] is None:
            spans = ", ".join(f"{a}-{b} ms" for a, b in item["_display_ms"])
            item["_context_text"] = hourly_text(facts) + (f"Attached ECG windows (ms from the recording start): {spans}\n" if spans else "")
        items.append(item)
    return items


def _window_values(t0: int, t1: int, kind: str) -> dict[str, Any]:
    singular, plural = LABELS[kind]
    return {"t0_ms": t0, "t1_ms": t1, "t0_s": f"{t0 / 1000:.3f}", "t1_s": f"{t1 / 1000:.3f}", "event": singular, "event_plural": plural}


def _write_one(facts: Facts, template: QATemplate, target: dict[str, Any], rng: Any, lead: str | None, measure: bool) -> dict[str, Any] | None:
    task = template.task
    tol = template.answer.tolerance_ms
    params = template.distractors.params
    if target["scope"] == "window":
        t0, t1, kind = int(target["t0_ms"]), int(target["t1_ms"]), target["kind"]
        base = {"window": {"t0_s": round(t0 / 1000.0, 3), "t1_s": round(t1 / 1000.0, 3)}, "_display_ms": [[t0, t1]], "_values": _window_values(t0, t1, kind)}
        inside = _event_inside(facts, kind, t0, t1) if kind != NORMAL else []
        covering = [e for e in facts.events_overlapping(t0, t1, kind)] if kind in COVERING_KINDS else []
        if task == "closed_presence":
            present = bool(inside or covering)
            if present != (target["polarity"] == "positive"):
                return None
            i0, i1 = facts.beat_range(t0, t1)
            evidence = [_event_evidence(lead, e) for e in (inside or covering)] or [_evidence(lead, t0, t1, list(range(i0, i1)))]
            return {**base, "answer": "Yes" if present else "No", "_distractors": ["No" if present else "Yes"], "evidence": evidence}
        if task in ("closed_count", "open_count", "closed_timing", "open_timing"):
            if not inside and not (task.endswith("count") and target.get("polarity") == "negative"):
                return None
            evidence = [_event_evidence(lead, e) for e in inside] or [_evidence(lead, t0, t1, list(range(*facts.beat_range(t0, t1))))]
            if task.endswith("count"):
                n = len(inside)
                out = {**base, "answer": str(n), "evidence": evidence, "_truth": n}
                if task.startswith("closed"):
                    out["_distractors"] = [str(v) for v in count_distractors(n, params.get("offsets", (-1, 1, 2)), template.distractors.n)]
                return out
            onsets = sorted(e["onset_ms"] for e in inside)
            out = {**base, "answer": format_ms_list(onsets), "evidence": evidence, "_truth": onsets}
            if task.startswith("closed"):
                i0, i1 = facts.beat_range(t0, t1)
                fillers = [int(t) for t in facts.beat_ms[i0:i1]]
                sets = timing_distractors(onsets, event_ms=[e["onset_ms"] for e in facts.events_of(kind)], filler_ms=fillers, rng=rng,
                                          shifts_ms=params.get("shifts_ms", (-600, 800)), tol_ms=tol, n=template.distractors.n)
                out["_distractors"] = [format_ms_list(s) for s in sets]
                out["_distractor_values"] = sets
            return out
        if task in ("closed_diagnosis", "open_diagnosis", "open_evidence"):
            if kind != NORMAL and not (inside or covering):
                return None
            answer = DIAGNOSIS_LABELS[kind]
            evidence = [_event_evidence(lead, e) for e in (inside or covering)] or [_evidence(lead, t0, t1, list(range(*facts.beat_range(t0, t1))))]
            out = {**base, "answer": answer, "evidence": evidence}
            out["_values"]["diagnosis"] = answer
            if task == "closed_diagnosis":
                present = {e["kind"] for e in facts.events_overlapping(t0, t1)}
                i0, i1 = facts.beat_range(t0, t1)
                related = {k for cls, kinds in RELATED_KINDS.items() if cls in facts.class_text[i0:i1] for k in kinds}
                absent = [DIAGNOSIS_LABELS[k] for k in DIAGNOSIS_LABELS
                          if k not in present | related and k != kind and not (k == NORMAL and kind in EPISODE_KINDS)]
                out["_distractors"] = label_distractors(answer, absent, rng, template.distractors.n)
            if task == "open_evidence":
                event = (inside or covering or [None])[0]
                out["answer"] = evidence_text(facts, answer, event, t0, t1, measure=measure)
            return out
        return None
    # whole-record items
    if task.endswith("hr_extremum"):
        hr_kind = target["hr_kind"]
        ext = facts.hr[hr_kind]
        t_ms = int(ext["t_ms"])
        ev = ext.get("evidence") or {}
        evidence = [_evidence(lead, ev.get("t0_ms", t_ms), ev.get("t1_ms", t_ms), ev.get("beats", []))]
        times = hr_distractors(t_ms, duration_ms=facts.duration_ms, hr_near=facts.hr_near, extremum_bpm=float(ext["hr_bpm"]), kind=hr_kind, rng=rng,
                               offsets_ms=params.get("offsets_ms", (500, 2000, 10000, 60000, 300000, 1800000)), tol_ms=tol, n=template.distractors.n)
        # candidate windows (the truth and the decoy times, each at a random place in its window, in time order) so
        # that the display does not point at the answer
        display = sorted(_around(facts, t, rng) for t in [t_ms, *times])
        out = {"window": None, "answer": f"{t_ms} ms", "evidence": evidence, "_truth": t_ms, "_display_ms": display,
               "_values": {"hr_kind": "maximum" if hr_kind == "max" else "minimum"}}
        if task.startswith("closed"):
            out["_distractors"] = [f"{t} ms" for t in times]
            out["_distractor_values"] = times
        return out
    if task in ("open_count", "closed_count"):
        kind = target["kind"]
        events = facts.events_of(kind)
        singular, plural = LABELS[kind]
        out = {"window": None, "answer": str(len(events)), "evidence": [_event_evidence(lead, e) for e in events], "_truth": len(events),
               "_display_ms": [_centered(facts, e["onset_ms"], e["offset_ms"]) for e in events[:MAX_DISPLAY_WINDOWS]],
               "_values": {"event": singular, "event_plural": plural}}
        if task.startswith("closed"):
            out["_distractors"] = [str(v) for v in count_distractors(len(events), params.get("offsets", (-1, 1, 2)), template.distractors.n)]
        return out
    if task.startswith("report_"):
        stats = statistics(facts)
        answer = json.dumps(stats, sort_keys=True) if task == "report_statistics" else summary_text(stats, facts)
        firsts = [facts.events_of(k)[0] for k in sorted(LABELS) if facts.events_of(k)]
        return {"window": None, "answer": answer, "evidence": [_evidence(lead, 0, facts.duration_ms, [])], "_truth": stats,
                "_display_ms": [_centered(facts, e["onset_ms"], e["offset_ms"]) for e in firsts[:MAX_DISPLAY_WINDOWS]]}
    return None


def evidence_text(facts: Facts, diagnosis: str, event: dict[str, Any] | None, t0: int, t1: int, *, measure: bool = True) -> str:
    """``Finding: ... Rhythm and timing clues: ... Morphology clues: ...`` for one window."""
    rhythm = rhythm_clues(facts, event, t0, t1)
    i0, i1 = facts.beat_range(t0, t1)
    morph: list[str] = []
    if measure and facts.record["leads"]:
        try:
            from ecgtrace.tools.measure import measure_window
            from ecgtrace.tools.records import open_record, read_window

            info = open_record(facts.record["path"], check_leads=False)
            window = read_window(info, t0 / 1000.0, t1 / 1000.0)
            morph = morphology_clues(measure_window(window, facts.beat_samples[i0:i1]), facts.class_text[i0:i1])
        except Exception as exc:  # noqa: BLE001 - a failed measurement leaves the morphology clues out, with the reason
            morph = [f"not measured ({type(exc).__name__})"]
    elif not facts.record["leads"]:
        morph = ["not available (annotation-only record: no samples to measure)"]
    else:
        morph = morphology_clues({}, facts.class_text[i0:i1])
    return (f"Finding: {diagnosis}. Rhythm and timing clues: {'; '.join(rhythm) or 'none'}. "
            f"Morphology clues: {'; '.join(morph) or 'none'}.")
