"""Annotate a record once and keep the result in a sidecar store, never in graph state.

Ground truth comes from the record's reference annotations when it has them
(``.atr``: beats with AAMI classes and rhythm notes; events and heart rate are
derived from that reference beat stream, provenance ``reference``), else from
the project's detectors (``ecgtrace.tools.annotate.annotate_record``,
provenance ``detected``). The result, a :class:`~ecgtrace.agents.holter.facts.Facts`
bundle (beats, events, noise spans, HR summary, patient), is written as JSON
in the user's cache folder (:func:`bundle_dir`) keyed by (record content hash and
location, annotator and bundle versions, every tool version that shapes the result,
parameters); graph state only carries its path and a small summary.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np

from ecgtrace.contracts.common import RecordRef, provenance
from ecgtrace.contracts.vocabulary import EPISODE_KINDS, RHYTHM_NOTES
from ecgtrace.errors import RecordError
from ecgtrace.jsonio import plain_json, to_json_text, write_json_atomic
from ecgtrace.tools.record_source import RecordSource, resolve_record

ANNOTATOR_VERSION = "1"
#: Layout of the sidecar bundle (2: the record reference names its rate ``fs_hz``); part of the store key.
BUNDLE_FORMAT = "2"
#: Reference rhythm notes that are episodes of an event kind by themselves (not derivable from beats).
RHYTHM_NOTE_KINDS: dict[str, str] = {RHYTHM_NOTES[kind]: kind for kind in sorted(EPISODE_KINDS)}


# --------------------------------------------------------------------------- record reference


def bundle_dir(cache_root: str | os.PathLike[str] | None = None) -> Path:
    """Where annotation bundles live: ``<cache root>/holter`` (default root: the user's ecgtrace cache)."""
    from ecgtrace.tools.annotate import default_cache_dir

    return Path(cache_root if cache_root is not None else default_cache_dir()) / "holter"


def load_record(record: str | os.PathLike[str], *, fs_hz: float | None = None, use_reference: bool = True) -> dict[str, Any]:
    """Validate a record and return its plain-JSON reference (``RecordRef`` fields plus patient and hash).

    ``use_reference=False`` ignores a ``.atr`` beside a signal record: the
    record is then annotated by the detectors, as a user's Holter would be
    (``benchmarks/signal_trust.py`` compares both on expert-annotated records).

    Annotation-only records (LTAFDB, NSR2DB) need ``fs_hz``; their duration is
    taken from the last annotation and they have no leads. The record is
    resolved and hashed by :mod:`ecgtrace.tools.record_source` (the hash is
    memoized per process, so the build's thread identity and this node read
    the bytes once).
    """
    source = resolve_record(record)
    info = _open_signals(source)
    if info is not None:
        annotated = use_reference and source.has_reference() and info.kind == "wfdb"
        if annotated:
            from ecgtrace.tools.reference_check import checked_reference

            checked_reference(info, "atr")  # an empty, foreign or corrupt .atr never becomes ground truth
        ref = {"db": source.db, "id": source.name, "path": str(source.base), "fs_hz": float(info.fs_hz),
               "leads": list(info.usable_leads), "duration_s": round(float(info.duration_s), 6),
               "patient": dict(info.patient), "annotated": annotated}
    else:
        if not source.has_reference():
            raise RecordError(f"{source.base}: neither a readable signal record nor a .atr annotation file")
        from ecgtrace.tools.annotations import read_reference_annotations

        ann = read_reference_annotations(source.base, "atr", fs_hz=fs_hz)
        ref = {"db": source.db, "id": source.name, "path": str(source.base), "fs_hz": float(ann.fs_hz), "leads": [],
               "duration_s": round(ann.n_samples / ann.fs_hz, 6), "patient": {}, "annotated": True}
    ref["hash"] = source.sha256
    return ref


def _open_signals(source: RecordSource) -> Any:
    """The record's header with its leads checked, or None for an annotation-only record."""
    from ecgtrace.tools.records import open_record, require_usable_leads

    if source.kind == "annotations":
        return None
    try:
        return require_usable_leads(open_record(source.base))
    except RecordError as exc:
        if "annotation-only" not in str(exc):
            raise
        return None


# --------------------------------------------------------------------------- annotate


def bundle_key(record_ref: dict[str, Any], params: dict[str, Any]) -> str:
    """The bundle's cache key: record content and location, annotator and bundle versions, every tool version, parameters.

    The location is part of the key because the bundle names the record's path (items, evidence windows and
    assets read the signal through it): two copies of one record's bytes get a bundle each, so deleting
    one copy never leaves the other pointing at a missing record.
    """
    from ecgtrace.tools.annotate import annotation_versions

    location = {k: record_ref[k] for k in ("db", "id", "path")}
    identity = {"record": record_ref["hash"], "location": location, "annotator": ANNOTATOR_VERSION, "bundle": BUNDLE_FORMAT,
                "tools": annotation_versions(), "params": params}
    return hashlib.sha256(to_json_text(identity).encode()).hexdigest()[:20]


def annotate(record_ref: dict[str, Any], cache_dir: str | os.PathLike[str] | None = None, *, fs_hz: float | None = None,
             annotation_store: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Annotate a record (or reuse the sidecar) and return ``{path, source, summary}`` (plain JSON).

    ``cache_dir`` holds the bundles (default :func:`bundle_dir`); ``annotation_store``
    is where :func:`ecgtrace.tools.annotate.annotate_record` keeps detections of
    records without reference annotations (default: its own store in the user cache).
    """
    key = bundle_key(record_ref, {"fs_hz": fs_hz})
    folder = Path(cache_dir) if cache_dir is not None else bundle_dir()
    target = folder / f"{record_ref['id']}-{key}.json"
    if not target.exists():
        bundle = reference_bundle(record_ref, fs_hz) if record_ref.get("annotated") else detected_bundle(record_ref, annotation_store)
        bundle["key"] = key
        write_json_atomic(target, bundle)
    from ecgtrace.agents.holter.facts import load_facts

    facts = load_facts(str(target))
    return {"path": str(target), "source": facts.source, "summary": facts.summary()}


def reference_bundle(record_ref: dict[str, Any], fs_hz: float | None) -> dict[str, Any]:
    from ecgtrace.tools.annotations import read_reference_annotations

    base = Path(record_ref["path"])
    ann = read_reference_annotations(base, "atr", fs_hz=fs_hz if not record_ref["leads"] else None)
    samples = np.asarray(ann.beat_samples, dtype=np.int64)
    classes = np.asarray(ann.beat_classes).astype(str)
    fs = float(ann.fs_hz)
    noise, noise_source = reference_noise_spans(base, fs)
    has_notes = bool(ann.rhythm_intervals)
    from ecgtrace.tools.rhythm import reference_event_inputs

    events = beat_stream_events(samples, classes, fs, int(ann.n_samples), noise, has_rhythm_notes=has_notes, extra=reference_event_inputs(ann))
    events += rhythm_note_events(samples, ann.rhythm_intervals, fs)
    events.sort(key=lambda e: (e["onset_ms"], e["kind"], e["offset_ms"]))
    method = f"annotation file .{ann.extension}; events by rhythm.detect_events + rhythm notes"
    prov = provenance("reference", method, ANNOTATOR_VERSION, {"record": ann.record})
    for event in events:
        derived = (event.get("provenance") or {}).get("method", "rhythm note")
        event["provenance"] = provenance("reference", method, ANNOTATOR_VERSION, {**prov["params"], "derived": derived})
    return _bundle(record_ref, samples, classes, fs, int(ann.n_samples), events, noise, "reference", prov,
                   rhythm_intervals=[{k: v for k, v in r.items() if k in ("label", "onset_ms", "offset_ms")} for r in ann.rhythm_intervals],
                   extra={"noise_source": noise_source, "seams_ms": []})


def detected_bundle(record_ref: dict[str, Any], annotation_store: str | os.PathLike[str] | None) -> dict[str, Any]:
    """The detectors' beats and events (``ecgtrace.tools.annotate``), for records without reference annotations."""
    from ecgtrace.tools.annotate import CHUNK_S, annotate_record

    ann = annotate_record(record_ref["path"], cache_dir=annotation_store, workers=1)
    fs = float(ann.fs_hz)
    samples = np.asarray(ann.beat_samples, dtype=np.int64)
    classes = np.asarray(ann.beat_classes).astype(str)
    events = [plain_json(dict(e)) for e in ann.events if e.get("kind") != "noise"]
    noise = [[int(e["onset_ms"]), int(e["offset_ms"])] for e in ann.events if e.get("kind") == "noise"]
    n_samples = int(ann.n_samples)
    seams = [int(round(k * CHUNK_S * 1000)) for k in range(1, int(n_samples / fs // CHUNK_S) + 1)]
    return _bundle(record_ref, samples, classes, fs, n_samples, events, noise, "detected", plain_json(dict(ann.provenance)), rhythm_intervals=[],
                   extra={"noise_source": "detected", "seams_ms": seams})


def _bundle(record_ref, samples, classes, fs, n_samples, events, noise, source, prov, *, rhythm_intervals, extra) -> dict[str, Any]:  # noqa: ANN001
    from ecgtrace.agents.holter.facts import hr_summary

    beat_ms = np.round(samples * (1000.0 / fs)).astype(np.int64)
    return {
        "version": ANNOTATOR_VERSION,
        "record": RecordRef.model_validate({k: record_ref[k] for k in RecordRef.model_fields}).to_json(),
        "patient": dict(record_ref.get("patient") or {}),
        "source": source,
        "provenance": prov,
        "fs_hz": float(fs),
        "n_samples": int(n_samples),
        "duration_ms": int(round(n_samples * 1000.0 / fs)),
        "beat_samples": [int(s) for s in samples],
        "beat_ms": [int(t) for t in beat_ms],
        "beat_classes": "".join(classes.tolist()),
        "events": plain_json(events),
        "noise_spans_ms": sorted([int(a), int(b)] for a, b in noise),
        "rhythm_intervals": rhythm_intervals,
        "hr": hr_summary(samples, classes, fs, int(round(n_samples * 1000.0 / fs)), sorted([int(a), int(b)] for a, b in noise)),
        **extra,
    }


# --------------------------------------------------------------------------- events from a reference beat stream


def _event(kind: str, beat_ms: np.ndarray, first: int, last: int) -> dict[str, Any]:
    n = last - first + 1
    rate_bpm = 60000.0 * (n - 1) / float(beat_ms[last] - beat_ms[first]) if n > 1 and beat_ms[last] > beat_ms[first] else None
    return {"kind": kind, "onset_ms": int(beat_ms[first]), "offset_ms": int(beat_ms[last]), "n_beats": int(n),
            "rate_bpm": None if rate_bpm is None else round(float(rate_bpm), 1), "first_beat": int(first), "last_beat": int(last)}


#: Kinds taken from ``detect_events`` on the reference beats; rhythm-note kinds come from the notes when the file has any.
_BEAT_KINDS = frozenset({"pac", "pvc", "v_couplet", "s_couplet", "vt", "ivr", "svt", "v_bigeminy", "v_trigeminy", "s_bigeminy", "s_trigeminy", "pause",
                         # from beat symbols, P-wave marks and VF/VFL notes (tools.rhythm.reference_event_inputs)
                         "asystole", "junctional_escape", "ventricular_escape", "junctional_rhythm", "ventricular_escape_rhythm",
                         "avb2_mobitz1", "avb2_mobitz2", "avb_2to1", "avb3", "blocked_pac", "vf", "vfl"})


def beat_stream_events(samples: np.ndarray, classes: np.ndarray, fs_hz: float, n_samples: int, noise_ms: list[list[int]], *, has_rhythm_notes: bool,
                       extra: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``ecgtrace.tools.rhythm.detect_events`` on a reference beat stream (ectopy, runs, pauses).

    AF, first-degree AV block and sinus brady/tachycardia come from the
    reference rhythm notes when the file has rhythm notes at all; otherwise
    the detector's ``af`` and sinus-rate episodes are kept.
    """
    from ecgtrace.tools.rhythm import detect_events

    spans = [(int(a * fs_hz / 1000.0), int(b * fs_hz / 1000.0)) for a, b in noise_ms]
    found = detect_events(samples, classes, fs_hz, artifact_spans=spans, n_samples=n_samples, beat_source="reference", **(extra or {}))
    keep = _BEAT_KINDS if has_rhythm_notes else _BEAT_KINDS | {"af", "sinus_tachycardia", "sinus_bradycardia"}
    return [plain_json(dict(e)) for e in found if e.get("kind") in keep]


def rhythm_note_events(samples: np.ndarray, intervals: list[dict[str, Any]], fs_hz: float) -> list[dict[str, Any]]:
    """Episodes that only rhythm notes reveal (AF, first-degree AV block, sinus brady/tachycardia)."""
    beat_ms = np.round(samples * (1000.0 / fs_hz)).astype(np.int64)
    events = []
    for interval in intervals:
        kind = RHYTHM_NOTE_KINDS.get(interval["label"])
        if kind is None:
            continue
        first = int(np.searchsorted(samples, interval["onset_sample"], side="left"))
        last = int(np.searchsorted(samples, interval["offset_sample"], side="left")) - 1
        if last >= first:
            events.append(_event(kind, beat_ms, first, last))
    return events


def reference_noise_spans(base: Path, fs_hz: float) -> tuple[list[list[int]], str]:
    """Noise spans (ms): the synthetic schedule's ``noise`` events, else ``~`` signal-quality annotations."""
    schedule = Path(f"{base}.schedule.json")
    if schedule.exists():
        import json

        events = json.loads(schedule.read_text(encoding="utf-8")).get("events", [])
        return [[int(e["onset_ms"]), int(e["offset_ms"])] for e in events if e.get("kind") == "noise"], "synthetic schedule"
    import wfdb

    try:
        ann = wfdb.rdann(str(base), "atr")
    except Exception:  # noqa: BLE001 - unreadable files were already reported by read_reference_annotations
        return [], "none"
    spans: list[list[int]] = []
    open_at: int | None = None
    subtypes = ann.subtype if ann.subtype is not None else [0] * len(ann.sample)
    for sample, symbol, subtype in zip(ann.sample, ann.symbol, subtypes):
        t_ms = int(round(int(sample) * 1000.0 / fs_hz))
        if symbol == "~":
            if open_at is not None:
                spans.append([open_at, t_ms])
                open_at = None
            if int(subtype) != 0:
                open_at = t_ms
        elif symbol == "U" and open_at is None:  # unreadable beat
            spans.append([t_ms - 500, t_ms + 500])
    if open_at is not None:
        spans.append([open_at, int(round(int(ann.sample[-1]) * 1000.0 / fs_hz)) + 1000])
    return spans, "'~' annotations"
