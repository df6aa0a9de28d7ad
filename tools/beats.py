"""Holter-scale R-peak detection: stream a record in overlapping chunks on several cores.

The per-chunk engine lives in :mod:`ecgtrace.tools._beats_core` (multi-lead
band-pass slope energy, windowed adaptive thresholds, lead fusion by
consensus or one strong lead, T-wave rejection, RR search-back, and placement
within +-50 ms at the same point of the QRS as the other beats of its 60-s block,
:mod:`ecgtrace.tools._beats_fiducial`).

Chunking: :func:`ecgtrace.tools.records.chunk_bounds` gives chunks whose cores
tile the record; each chunk carries ``overlap_s`` of warm-up signal on each
side and keeps only the beats in its core. The detector's adaptive levels are
windowed statistics on an absolute 1 s block grid reaching 2.5 s each side (the
excursion index's reference 10.5 s), so with ``overlap_s >= params.min_overlap_s()``
(raised to it automatically) two chunks see the same evidence around a seam and take
the same decision there: no beat is lost or counted twice. A final guard
merges any pair of beats closer than the refractory period across a seam.
Beats are placed on their QRS per 60-s block of the record's time grid, so
with a ``chunk_s`` that is a whole multiple of 60 s (the default 600 s) every
beat also lies at exactly the sample the whole record gives it; other chunk
lengths may move a beat near a block that straddles a seam by a few samples.

Example:
    >>> table = detect_beats("../shared/data/mitdb/100")            # doctest: +SKIP
    >>> table.times_ms()[:3], table.artifact_spans, table.seams       # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ecgtrace.errors import RecordError
from ecgtrace.workers import worker_pool
from ecgtrace.tools._beats_core import ALGORITHM_VERSION, ChunkDetections, DetectorParams, detect_chunk
from ecgtrace.tools.records import RecordInfo, chunk_bounds, lead_is_unusable, open_record, read_samples

__all__ = ["BeatTable", "DetectorParams", "METHOD", "detect_beats", "detect_beats_array"]

METHOD = "ecgtrace multi-lead QRS detector (5-15 Hz slope energy, windowed adaptive thresholds, lead fusion, search-back)"


@dataclass(frozen=True)
class BeatTable:
    """Detected R peaks of a record or window.

    Attributes:
        samples: R-peak sample indices (int64, sorted, unique), from the start
            of the record (or of the array given to :func:`detect_beats_array`).
        fs_hz: Sampling rate in Hz.
        n_samples: Length of the record (or array) in samples.
        lead_names: Lead names, the columns of ``lead_support``.
        lead_support: int8 ``(n_beats, n_leads)``: 1 where a lead shows this QRS
            (normalized slope energy >= 0.3 of its typical QRS, lead not left out
            by the quality index), 0 otherwise.
        scores: float32 fused evidence per beat, in units of the typical QRS
            (about 1 for an ordinary beat; 0.15-0.3 means a weak, searched-back beat).
        artifact_spans: ``(start_sample, stop_sample)`` half-open spans where
            every lead was unreadable (noise, flat, NaN, no discrete QRS, or a
            low-frequency excursion whose beats do not repeat a shape, i.e.
            electrode motion): no beats are reported inside them.
        seams: Chunk core boundaries (sample indices); evidence close to a seam
            came from two chunks.
        provenance: Plain-JSON ``{source, method, version, params}``.
    """

    samples: np.ndarray
    fs_hz: float
    n_samples: int
    lead_names: tuple[str, ...]
    lead_support: np.ndarray
    scores: np.ndarray
    artifact_spans: list[tuple[int, int]] = field(default_factory=list)
    seams: list[int] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def n_beats(self) -> int:
        return int(self.samples.size)

    def times_ms(self) -> np.ndarray:
        """R-peak times in ms from the start (int64, rounded)."""
        return np.round(self.samples * (1000.0 / self.fs_hz)).astype(np.int64)

    def support_counts(self) -> np.ndarray:
        """Number of leads that show each beat (int64)."""
        return self.lead_support.sum(axis=1).astype(np.int64)

    def to_json(self) -> dict[str, Any]:
        """Plain-JSON summary with every beat (ints and floats only, no numpy scalars)."""
        return {
            "fs_hz": float(self.fs_hz),
            "n_samples": int(self.n_samples),
            "n_beats": self.n_beats,
            "lead_names": list(self.lead_names),
            "samples": [int(s) for s in self.samples],
            "times_ms": [int(t) for t in self.times_ms()],
            "lead_support": [[int(v) for v in row] for row in self.lead_support],
            "scores": [round(float(s), 4) for s in self.scores],
            "artifact_spans": [[int(a), int(b)] for a, b in self.artifact_spans],
            "artifact_spans_ms": [[int(round(a * 1000.0 / self.fs_hz)), int(round(b * 1000.0 / self.fs_hz))] for a, b in self.artifact_spans],
            "seams": [int(s) for s in self.seams],
            "provenance": self.provenance,
        }


@dataclass
class _CorePart:
    index: int
    samples: np.ndarray
    support: np.ndarray
    scores: np.ndarray
    artifact_spans: list[tuple[int, int]]


def _core_part(det: ChunkDetections, index: int, core_start: int, core_stop: int) -> _CorePart:
    keep = (det.samples >= core_start) & (det.samples < core_stop)
    spans = []
    for k in np.flatnonzero(det.artifact_blocks):
        a = (det.first_block + int(k)) * det.block_samples
        a, b = max(a, core_start), min(a + det.block_samples, core_stop)
        if a < b:
            spans.append((a, b))
    return _CorePart(index, det.samples[keep], det.support[keep], det.score[keep], _merge_spans(spans))


def _merge_spans(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((int(a), int(b)))
    return merged


def _unusable_mask(signal_mv: np.ndarray, excluded: Sequence[int]) -> np.ndarray:
    mask = np.array([lead_is_unusable(signal_mv[:, j]) is not None for j in range(signal_mv.shape[1])], dtype=bool)
    mask[list(excluded)] = True
    return mask


def _run_chunk(info: RecordInfo, bounds: tuple[int, int, int, int], index: int, params: DetectorParams, excluded: tuple[int, ...]) -> _CorePart:
    """Worker: read samples ``[start, stop)`` of the record itself and keep the core's beats."""
    start, stop, core_start, core_stop = bounds
    signal = read_samples(info, start, stop).signal_mv
    det = detect_chunk(signal, info.fs_hz, start, params, exclude=_unusable_mask(signal, excluded))
    return _core_part(det, index, core_start, core_stop)


def _assemble(parts: list[_CorePart], n_leads: int, fs_hz: float, seams: list[int], params: DetectorParams) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, int]]]:
    parts = sorted(parts, key=lambda part: part.index)
    samples = np.concatenate([p.samples for p in parts]) if parts else np.zeros(0, np.int64)
    support = np.concatenate([p.support for p in parts]) if parts else np.zeros((0, n_leads), np.int8)
    scores = np.concatenate([p.scores for p in parts]) if parts else np.zeros(0, np.float32)
    spans = _merge_spans([s for p in parts for s in p.artifact_spans])
    if samples.size > 1 and seams:
        # guard: two chunks that disagreed about one beat near a seam -> keep the stronger
        refractory = params.refractory_ms * fs_hz / 1000.0
        seam_arr = np.asarray(seams)
        left, right = samples[:-1], samples[1:]
        straddle = np.searchsorted(seam_arr, left, side="right") != np.searchsorted(seam_arr, right, side="right")
        dup = np.flatnonzero(straddle & (right - left < refractory))
        if dup.size:
            drop = np.where(scores[dup] >= scores[dup + 1], dup + 1, dup)
            keep = np.ones(samples.size, bool)
            keep[drop] = False
            samples, support, scores = samples[keep], support[keep], scores[keep]
    return samples.astype(np.int64), support.astype(np.int8), scores.astype(np.float32), spans


def _provenance(params: DetectorParams, extra: dict[str, Any]) -> dict[str, Any]:
    return {"source": "detected", "method": METHOD, "version": ALGORITHM_VERSION, "params": {**params.to_json(), **extra}}


def detect_beats(
    record: RecordInfo | str | os.PathLike[str],
    *,
    chunk_s: float = 600.0,
    overlap_s: float = 5.0,
    workers: int = 2,
    progress: Callable[[int, int], Any] | None = None,
    params: DetectorParams | None = None,
) -> BeatTable:
    """Detect every R peak of a record, streaming it in overlapping chunks.

    Args:
        record: A :class:`RecordInfo` or a record path (``dir/100``, an EDF file).
        chunk_s: Core length of each chunk in seconds (memory is bounded by it).
        overlap_s: Warm-up signal on each side of a chunk, seconds. It is
            raised to ``params.min_overlap_s()`` (5 s; more when the excursion
            index's reference window is wider): the detector's windows reach 2.5 s
            (plus the RR context of the search-back), and with less overlap a
            seam may no longer give exactly the one-chunk result.
        workers: Worker processes (``concurrent.futures.ProcessPoolExecutor`` with
            the platform's default start method); each reads its own chunks by
            sample range. 1 (or a single chunk) runs in this process; prefer 1
            when the caller already runs many threads or processes.
        progress: Optional ``progress(done_chunks, total_chunks)`` callback.
        params: Detector settings (defaults: :class:`DetectorParams`).

    Returns:
        A :class:`BeatTable` in absolute sample indices of the record.

    Raises:
        RecordError: the record cannot be opened or read, or chunk sizes are invalid.
    """
    info = record if isinstance(record, RecordInfo) else open_record(record)
    p = params or DetectorParams()
    if not (chunk_s > 0 and overlap_s >= 0):
        raise RecordError(f"{info.name}: chunk_s must be > 0 and overlap_s >= 0 (got {chunk_s}, {overlap_s})")
    chunk_samples = max(int(round(chunk_s * info.fs_hz)), 1)
    overlap_s = max(float(overlap_s), p.min_overlap_s())  # never less warm-up than the widest window needs
    overlap_samples = int(round(overlap_s * info.fs_hz))
    bounds = chunk_bounds(info.n_samples, chunk_samples, overlap_samples)
    excluded = tuple(info.lead_index(lead) for lead in info.unusable_leads)
    total = len(bounds)
    parts: list[_CorePart] = []
    if workers <= 1 or total == 1:
        for index, b in enumerate(bounds):
            parts.append(_run_chunk(info, b, index, p, excluded))
            if progress is not None:
                progress(index + 1, total)
    else:
        with worker_pool(min(workers, total)) as pool:  # workers die with this process, and stop at once on an interruption
            futures = [pool.submit(_run_chunk, info, b, index, p, excluded) for index, b in enumerate(bounds)]
            for done, future in enumerate(as_completed(futures), start=1):
                parts.append(future.result())
                if progress is not None:
                    progress(done, total)
    seams = [int(b[2]) for b in bounds[1:]]
    samples, support, scores, spans = _assemble(parts, len(info.leads), info.fs_hz, seams, p)
    extra = {"record": info.name, "chunk_s": float(chunk_s), "overlap_s": float(overlap_s), "workers": int(workers), "excluded_leads": list(info.unusable_leads)}
    return BeatTable(samples, float(info.fs_hz), int(info.n_samples), tuple(info.leads), support, scores, spans, seams, _provenance(p, extra))


def detect_beats_array(
    signal_mv: np.ndarray,
    fs_hz: float,
    *,
    lead_names: Sequence[str] | None = None,
    params: DetectorParams | None = None,
) -> BeatTable:
    """Detect R peaks in an in-memory window (one chunk, same algorithm as :func:`detect_beats`).

    Meant for windows up to about an hour (working memory is a few float32
    copies of the window per lead); stream longer records with :func:`detect_beats`.

    Args:
        signal_mv: ``(n_samples, n_leads)`` (or 1-D for one lead) in mV; NaN allowed.
        fs_hz: Sampling rate in Hz.
        lead_names: Names of the columns (default ``lead0``, ``lead1`` ...).
        params: Detector settings.

    Returns:
        A :class:`BeatTable` with sample indices relative to ``signal_mv[0]``.
    """
    x = np.asarray(signal_mv, dtype=np.float32)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise RecordError(f"signal_mv must be (n_samples, n_leads) with samples; got shape {np.shape(signal_mv)}")
    if not (np.isfinite(fs_hz) and fs_hz > 0):
        raise RecordError(f"fs_hz must be > 0 Hz, got {fs_hz!r}")
    names = tuple(lead_names) if lead_names is not None else tuple(f"lead{j}" for j in range(x.shape[1]))
    if len(names) != x.shape[1]:
        raise RecordError(f"{len(names)} lead names for {x.shape[1]} leads")
    p = params or DetectorParams()
    det = detect_chunk(x, float(fs_hz), 0, p, exclude=_unusable_mask(x, ()))
    part = _core_part(det, 0, 0, x.shape[0])
    samples, support, scores, spans = _assemble([part], x.shape[1], float(fs_hz), [], p)
    return BeatTable(samples, float(fs_hz), int(x.shape[0]), names, support, scores, spans, [], _provenance(p, {"record": None, "chunk_s": None, "overlap_s": None, "workers": 1}))
