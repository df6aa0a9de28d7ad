"""Annotate a whole record: beats -> AF -> classification -> rhythm events -> heart rate.

:func:`annotate_record` runs the pipeline once and keeps the result in a
sidecar store in the user's cache folder, keyed by (record content hash, every
tool version that shapes the result (:func:`annotation_versions`), parameters);
a second call with the same record, tools and parameters reads it back instead
of recomputing. :func:`write_wfdb_annotations` writes ``<record>.ecgtrace`` (a
standard WFDB annotation file: beats N S V F Q, rhythm changes as ``+`` with aux
notes ``(AFIB``, ``(N`` ...) and ``<record>.summary.json``.

Stages:

1. beats: :func:`ecgtrace.tools.beats.detect_beats` (streamed, chunked), or the
   reference ``.atr`` beats and classes with ``prefer_reference=True``.
2. AF, first pass on RR only (classification needs to know where AF is).
3. classification: :func:`ecgtrace.tools.classify.classify_beats` with the AF
   mask (skipped with reference classes).
4. AF, second pass with the classes (ectopic RRs left out) and P-wave presence.
5. rhythm events (:mod:`ecgtrace.tools.rhythm`) and HR (:mod:`ecgtrace.tools.hr`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ecgtrace import __version__
from ecgtrace.contracts.common import provenance
from ecgtrace.errors import EcgTraceError, OutputError, RecordError
from ecgtrace.jsonio import plain_json, write_json_atomic
from ecgtrace.tools import _annotate_store as store
from ecgtrace.tools._annotate_store import default_cache_dir
from ecgtrace.tools._annotate_store import store_dir as annotation_store_dir
from ecgtrace.tools.af import AfResult, af_params, detect_af
from ecgtrace.tools.annotations import AAMI_ORDER
from ecgtrace.tools.hr import hr_params, hr_summary, per_minute_hr
from ecgtrace.tools.record_source import resolve_record
from ecgtrace.tools.records import RecordInfo, assess_leads, open_record, require_usable_leads
from ecgtrace.tools.rhythm import count_events, detect_events, rhythm_params

ANNOTATE_VERSION = "1.0"
#: Default chunking of the beat detector (seconds).
CHUNK_S = 600.0
OVERLAP_S = 5.0

#: ``progress(stage, done, total)``: stage name and completed / total units of that stage.
ProgressFn = Callable[[str, float, float], None]


class AnnotateError(EcgTraceError):
    """The record cannot be annotated (no beat detector and no reference, no beats found)."""


@dataclass
class Annotation:
    """Everything the pipeline computed for one record.

    Arrays (``beat_samples`` int64, ``beat_classes`` '<U1', ``af_mask`` bool)
    stay out of the JSON parts; ``events``, ``hr``, ``hr_per_minute``,
    ``summary``, ``provenance`` and ``timings_s`` are plain JSON.
    """

    record: dict[str, Any]
    fs_hz: float
    n_samples: int
    beat_samples: np.ndarray
    beat_classes: np.ndarray
    af_mask: np.ndarray
    af_episodes: list[dict[str, Any]]
    artifact_spans: list[list[int]]
    events: list[dict[str, Any]]
    hr: dict[str, Any]
    hr_per_minute: list[dict[str, Any]]
    summary: dict[str, Any]
    provenance: dict[str, Any]
    timings_s: dict[str, float] = field(default_factory=dict)
    key: str = ""
    from_cache: bool = False

    @property
    def name(self) -> str:
        return str(self.record.get("name", "record"))

    def beat_times_ms(self) -> np.ndarray:
        return np.round(self.beat_samples * (1000.0 / self.fs_hz)).astype(np.int64)


def _reference_path(base: Path) -> Path | None:
    path = Path(f"{base}.atr")
    return path if path.exists() else None


def _params(prefer_reference: bool, chunk_s: float, overlap_s: float) -> dict[str, Any]:
    def plain(d: dict[str, Any]) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}

    return {"prefer_reference": prefer_reference, "chunk_s": chunk_s, "overlap_s": overlap_s, "af": plain(af_params()), "rhythm": rhythm_params(), "hr": plain(hr_params())}


def _module_version(module_name: str, attr_names: tuple[str, ...]) -> str:
    """A tool's version constant, read when asked (so a changed or monkeypatched constant changes the key)."""
    try:
        module = importlib.import_module(f"ecgtrace.tools.{module_name}")
    except ImportError:
        return "absent"
    for attr in attr_names:
        if hasattr(module, attr):
            return str(getattr(module, attr))
    return "unversioned"


@functools.lru_cache(maxsize=4)
def _file_sha256(path: str, stamp: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _classifier_model_version() -> str:
    """Content hash of the shipped classifier model: retraining it changes the results without a code change."""
    try:
        from ecgtrace.tools._classify_model import MODEL_PATH
    except ImportError:
        return "absent"
    try:
        return _file_sha256(str(MODEL_PATH), MODEL_PATH.stat().st_mtime_ns)
    except OSError:
        return "absent"


def annotation_versions() -> dict[str, str]:
    """Every tool version that shapes an annotation: detector, classifier (code and model), AF, rhythm, HR, reader, pipeline.

    Part of every annotation cache key (this store's and the HolterAgent's
    bundles) and of a build thread's identity, so changing any of them
    recomputes instead of reusing stale annotations.
    """
    return {
        "ecgtrace": __version__,
        "annotate": ANNOTATE_VERSION,
        "annotations": _module_version("annotations", ("ANNOTATIONS_VERSION",)),
        "af": _module_version("af", ("AF_VERSION",)),
        "rhythm": _module_version("rhythm", ("RHYTHM_VERSION",)),
        "rhythm_signal": _module_version("rhythm_signal", ("SIGNAL_INPUTS_VERSION",)),
        "holter_p": _module_version("holter_p", ("HOLTER_P_VERSION",)),
        "rhythm_waves": _module_version("_rhythm_waves", ("WAVES_VERSION",)),
        "hr": _module_version("hr", ("HR_VERSION",)),
        "beats": _module_version("beats", ("BEATS_VERSION", "ALGORITHM_VERSION", "VERSION", "__version__")),
        "classify": _module_version("classify", ("CLASSIFY_VERSION", "VERSION", "__version__")),
        "classify_model": _classifier_model_version(),
    }


def annotate_record(
    path: str | os.PathLike[str],
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    use_cache: bool = True,
    workers: int = 2,
    progress: ProgressFn | None = None,
    prefer_reference: bool = False,
    chunk_s: float = CHUNK_S,
    overlap_s: float = OVERLAP_S,
) -> Annotation:
    """Annotate a record, or read its annotation from the sidecar store.

    Args:
        path: WFDB record (``dir/100``, ``dir/100.hea``) or EDF file.
        cache_dir: Store folder (default ``<user cache>/annotations``, the user
            cache being ``$ECGTRACE_CACHE`` or the platform cache folder, see
            :func:`default_cache_dir`; never the record's folder).
        use_cache: Read an existing entry; a fresh result is written either way.
        workers: Processes for beat detection, the classifier's feature pass, the P-wave search and the flutter pass's
            chunk reads (the result does not depend on it).
        progress: ``progress(stage, done, total)`` callback.
        prefer_reference: Use the record's ``.atr`` beats and classes (source
            ``reference``) instead of detecting them.
        chunk_s, overlap_s: Beat-detection chunk length and overlap (s).

    Raises:
        RecordError: the record cannot be opened.
        AnnotateError: no beat detector is available and no reference, or no beats.
    """
    report = progress or (lambda stage, done, total: None)
    timings: dict[str, float] = {}
    t_start = time.perf_counter()
    info = open_record(path, check_leads=False)  # lead probing only when the pipeline runs
    timings["open"] = time.perf_counter() - t_start
    base = Path(info.path)
    ref_path = _reference_path(base) if prefer_reference else None
    if prefer_reference and ref_path is None:
        raise AnnotateError(f"{base}: prefer_reference needs {base.name}.atr, which does not exist")
    if not ref_path:  # the unusable-lead verdict comes before any work, even hashing (a flat 2e9-sample record)
        t0 = time.perf_counter()
        info = require_usable_leads(assess_leads(info))
        timings["open"] += time.perf_counter() - t0
    t0 = time.perf_counter()
    record_hash = resolve_record(base).sha256
    timings["hash"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    versions = annotation_versions()
    params = _params(prefer_reference, chunk_s, overlap_s)
    key = store.store_key(record_hash, versions, params)
    cache = Path(cache_dir) if cache_dir is not None else annotation_store_dir()
    timings["imports"] = time.perf_counter() - t0
    if use_cache:
        hit = store.load(cache, key)
        if hit is not None:
            report("cache", 1, 1)
            # the store is keyed by content: the cached result is this record's, but its location is the caller's
            return _from_store(hit, key, time.perf_counter() - t_start, location={"path": info.path, "name": info.name})
    result = _run_pipeline(info, base, ref_path, workers, report, timings, chunk_s, overlap_s)
    source = "reference" if ref_path else "detected"
    prov = provenance(source, "ecgtrace.tools.annotate", ANNOTATE_VERSION,
                      {**params, "versions": versions, "record_sha256": record_hash, "store_key": key})
    annotation = _assemble(info, result, prov, timings, key, record_hash)
    _save(cache, key, annotation)
    timings["total"] = time.perf_counter() - t_start
    return annotation


def _save(cache: Path, key: str, annotation: Annotation) -> None:
    t0 = time.perf_counter()
    try:
        store.save(cache, key, {"beat_samples": annotation.beat_samples, "beat_classes": annotation.beat_classes, "af_mask": annotation.af_mask}, _meta(annotation))
    except (OSError, OutputError) as exc:  # an unwritable cache folder must not stop the analysis
        import warnings

        why = exc.strerror if isinstance(exc, OSError) else str(exc)
        warnings.warn(f"{cache}: cannot write the annotation store ({why}); results are not cached", stacklevel=3)
    annotation.timings_s["store"] = time.perf_counter() - t0


def _stage(timings: dict[str, float], name: str, started: float) -> None:
    timings[name] = time.perf_counter() - started


def _detect_or_read_beats(info: RecordInfo, base: Path, ref_path: Path | None, workers: int, report: ProgressFn,
                          chunk_s: float, overlap_s: float) -> tuple[np.ndarray, np.ndarray | None, list[tuple[int, int]], dict[str, Any]]:
    """``(beat samples, classes or None, artifact spans, provenance)``: the reference ``.atr`` beats, else the detector's."""
    if ref_path is not None:
        from ecgtrace.tools.reference_check import checked_reference

        ref = checked_reference(info, "atr", n_samples=info.n_samples)
        return ref.beat_samples, ref.beat_classes, [], ref.provenance
    try:
        from ecgtrace.tools.beats import detect_beats
    except ImportError:
        raise AnnotateError(f"{base}: the beat detector (ecgtrace.tools.beats) is not available; use prefer_reference with an .atr file") from None

    def beats_progress(*args: Any, **_: Any) -> None:
        numbers = [a for a in args if isinstance(a, (int, float))]
        if len(numbers) >= 2:
            report("beats", float(numbers[-2]), float(numbers[-1]))

    table = detect_beats(info, chunk_s=chunk_s, overlap_s=overlap_s, workers=workers, progress=beats_progress)
    artifact_spans = [(int(a), int(b)) for a, b in getattr(table, "artifact_spans", [])]
    return np.asarray(table.samples, dtype=np.int64), None, artifact_spans, dict(getattr(table, "provenance", {}) or {})


def _classify(info: RecordInfo, base: Path, samples: np.ndarray, af_mask: np.ndarray,
              artifact_spans: list[tuple[int, int]], workers: int) -> tuple[np.ndarray, np.ndarray | None, dict[str, Any]]:
    """``(classes, P-wave presence or None, provenance)`` from :func:`ecgtrace.tools.classify.classify_beats`."""
    try:
        from ecgtrace.tools.classify import classify_beats
    except ImportError:
        raise AnnotateError(f"{base}: the beat classifier (ecgtrace.tools.classify) is not available; use prefer_reference with an .atr file") from None
    try:
        bc = classify_beats(info, samples, info.fs_hz, af_mask=af_mask, artifact_spans=artifact_spans, workers=workers)
    except FileNotFoundError as exc:  # an installation without the classifier's model file
        raise AnnotateError(f"{base}: the beat classifier cannot run ({exc.filename or exc}: missing); use prefer_reference with an .atr file") from None
    features = getattr(bc, "features", {}) or {}
    return np.asarray(bc.classes).astype("<U1"), features.get("p_wave_present"), dict(getattr(bc, "provenance", {}) or {})


def _run_pipeline(info: RecordInfo, base: Path, ref_path: Path | None, workers: int, report: ProgressFn, timings: dict[str, float], chunk_s: float, overlap_s: float) -> dict[str, Any]:
    fs = info.fs_hz
    t0 = time.perf_counter()
    samples, classes, artifact_spans, beat_prov = _detect_or_read_beats(info, base, ref_path, workers, report, chunk_s, overlap_s)
    _stage(timings, "beats", t0)
    report("beats", 1, 1)
    if samples.size < 2:
        raise AnnotateError(f"{base}: {samples.size} beats found in {info.duration_s:.1f} s; nothing to annotate")

    t0 = time.perf_counter()
    af1 = detect_af(samples, fs, beat_classes=classes)  # first pass on RR only: the classifier needs to know where AF is
    af_pass1_s = time.perf_counter() - t0
    report("af", 1, 2)

    t0 = time.perf_counter()
    p_wave = None
    class_prov: dict[str, Any] = beat_prov
    if classes is None:
        classes, p_wave, class_prov = _classify(info, base, samples, af1.beat_mask, artifact_spans, workers)
    _stage(timings, "classify", t0)
    report("classify", 1, 1)

    t0 = time.perf_counter()
    af2: AfResult = detect_af(samples, fs, beat_classes=classes, p_wave_present=p_wave)
    timings["af"] = time.perf_counter() - t0 + af_pass1_s
    report("af", 2, 2)

    t0 = time.perf_counter()
    source = "reference" if ref_path is not None else "detected"
    signal_inputs: dict[str, Any] = {"kwargs": {}, "undecided": [], "provenance": None}
    if source == "detected":  # no .atr: P waves (AV block, blocked PACs, junctional beats) and VF/VFL from the signal
        from ecgtrace.tools.rhythm_signal import signal_event_inputs

        signal_inputs = signal_event_inputs(info, samples, classes, artifact_spans=artifact_spans, p_wave_present=p_wave, workers=workers)
    events = detect_events(samples, classes, fs, af=af2, artifact_spans=artifact_spans, n_samples=info.n_samples, beat_source=source, **signal_inputs["kwargs"])
    _stage(timings, "rhythm", t0)
    report("rhythm", 1, 1)

    t0 = time.perf_counter()
    hr = hr_summary(samples, classes, fs, artifact_spans=artifact_spans, af_mask=af2.beat_mask, n_samples=info.n_samples)
    per_minute = per_minute_hr(samples, classes, fs, artifact_spans=artifact_spans, af_mask=af2.beat_mask, n_samples=info.n_samples)
    _stage(timings, "hr", t0)
    report("hr", 1, 1)
    return {
        "samples": samples, "classes": classes, "af": af2, "artifact_spans": artifact_spans, "events": events,
        "hr": hr, "per_minute": per_minute, "beat_provenance": beat_prov, "class_provenance": class_prov,
        "rhythm_inputs": {"provenance": signal_inputs["provenance"], "undecided": signal_inputs["undecided"]},
    }


def _assemble(info: RecordInfo, r: dict[str, Any], provenance: dict[str, Any], timings: dict[str, float], key: str, record_hash: str) -> Annotation:
    from ecgtrace.tools._annotate_summary import build_summary

    af: AfResult = r["af"]
    annotation = Annotation(
        record=info.to_json(), fs_hz=float(info.fs_hz), n_samples=int(info.n_samples),
        beat_samples=np.asarray(r["samples"], dtype=np.int64), beat_classes=np.asarray(r["classes"]).astype("<U1"),
        af_mask=np.asarray(af.beat_mask, dtype=bool), af_episodes=af.episodes,
        artifact_spans=[[int(a), int(b)] for a, b in r["artifact_spans"]], events=r["events"], hr=r["hr"],
        hr_per_minute=r["per_minute"], summary={}, provenance=provenance, timings_s=timings, key=key,
    )
    annotation.provenance["params"]["beats_provenance"] = plain_json(r["beat_provenance"])
    annotation.provenance["params"]["classes_provenance"] = plain_json(r["class_provenance"])
    annotation.provenance["params"]["rhythm_inputs"] = plain_json(r["rhythm_inputs"])  # where events came from, and the kinds left undecided
    annotation.summary = build_summary(annotation, record_hash)
    return annotation


def _meta(a: Annotation) -> dict[str, Any]:
    return {
        "record": a.record, "fs_hz": a.fs_hz, "n_samples": a.n_samples, "af_episodes": a.af_episodes,
        "artifact_spans": a.artifact_spans, "events": a.events, "hr": a.hr, "hr_per_minute": a.hr_per_minute,
        "summary": a.summary, "provenance": a.provenance, "timings_s": {k: round(v, 4) for k, v in a.timings_s.items()},
    }


def _from_store(hit: tuple[dict[str, np.ndarray], dict[str, Any]], key: str, elapsed_s: float, *,
                location: dict[str, str]) -> Annotation:
    arrays, meta = hit
    return Annotation(
        record={**meta["record"], **location}, fs_hz=float(meta["fs_hz"]), n_samples=int(meta["n_samples"]),
        beat_samples=arrays["beat_samples"].astype(np.int64), beat_classes=arrays["beat_classes"].astype("<U1"),
        af_mask=arrays["af_mask"].astype(bool), af_episodes=meta["af_episodes"], artifact_spans=meta["artifact_spans"],
        events=meta["events"], hr=meta["hr"], hr_per_minute=meta["hr_per_minute"], summary=meta["summary"],
        provenance=meta["provenance"], timings_s={"store_read": elapsed_s}, key=key, from_cache=True,
    )


def write_wfdb_annotations(annotation: Annotation, out_dir: str | os.PathLike[str], *, extension: str = "ecgtrace") -> dict[str, Path]:
    """Write ``<record>.<extension>`` (WFDB annotations, reads back with ``wfdb.rdann``) and ``<record>.summary.json``.

    Beats carry their AAMI class as the symbol (N S V F Q); each rhythm change is
    a ``+`` annotation at the first beat of the new rhythm with an aux note
    ``(N``, ``(AFIB``, ``(VT``, ``(SVTA``, ``(B``, ``(T``, ``(SBR``, ``(STACH`` ...
    """
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RecordError(f"{out}: cannot create the output folder ({exc.strerror})") from None
    labels = store.rhythm_labels(annotation.beat_samples.size, annotation.af_mask, annotation.events)
    ann_path = store.write_wfdb(annotation.name, out, annotation.fs_hz, annotation.beat_samples, annotation.beat_classes, labels, extension)
    summary_path = write_json_atomic(out / f"{annotation.name}.summary.json", annotation.summary)
    return {"annotations": ann_path, "summary": summary_path}


__all__ = ["AAMI_ORDER", "Annotation", "AnnotateError", "annotate_record", "annotation_store_dir", "annotation_versions", "count_events",
           "default_cache_dir", "write_wfdb_annotations"]
