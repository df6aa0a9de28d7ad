"""The signal side of a probe: windows with context, wave marks, and the pipeline's confirmation of an edit.

An edit is made on the item's window plus a few seconds of context on each
side (its restored beats need neighbours; a shifted tail needs signal beyond
the window end), then cut back to the item's window. Whether it did what it
was meant to is asked of the project's own pipeline, run on the original and
on the edited context alike (:func:`confirm`): the beat detector
(:func:`ecgtrace.tools.beats.detect_beats_array`) and the beat classifier
(:mod:`ecgtrace.tools._classify_short` for windows up to a minute, else
:func:`ecgtrace.tools.classify.classify_beats_array`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ecgtrace.tools.records import RecordInfo, SignalWindow, read_samples

#: Context (s) read before and after an item's window for editing and for the pipeline.
CONTEXT_BEFORE_S = 3.0
CONTEXT_AFTER_S = 4.0
#: A detected beat matches a ground-truth beat within this distance (ms).
MATCH_MS = 75.0
#: Beats this close (s) to the context edges are not judged (the detector and classifier see them cut).
EDGE_S = 0.6
#: Beat symbols for classes a counterfactual adds (``paced_beat_pct`` and escape rules read symbols).
SYMBOL_OF_CLASS = {"N": "N", "S": "A", "V": "V", "F": "F", "Q": "Q"}


def context_window(info: RecordInfo, t0_s: float, t1_s: float) -> SignalWindow:
    """The item's window with up to :data:`CONTEXT_BEFORE_S` / :data:`CONTEXT_AFTER_S` of the record around it."""
    a = max(0, int(round((t0_s - CONTEXT_BEFORE_S) * info.fs_hz)))
    b = min(info.n_samples, int(round((t1_s + CONTEXT_AFTER_S) * info.fs_hz)))
    return read_samples(info, a, b)


def crop(window: SignalWindow, sampfrom: int, sampto: int) -> SignalWindow:
    """The part ``[sampfrom, sampto)`` (absolute samples) of a window."""
    a, b = sampfrom - window.sampfrom, sampto - window.sampfrom
    if a < 0 or b > window.signal_mv.shape[0]:
        raise ValueError(f"[{sampfrom}, {sampto}) is not inside the window [{window.sampfrom}, {window.sampto})")
    return SignalWindow(signal_mv=np.asarray(window.signal_mv)[a:b], fs_hz=window.fs_hz, sampfrom=sampfrom, leads=window.leads)


def item_bounds(info: RecordInfo, window: dict[str, Any]) -> tuple[int, int]:
    """The item window in absolute samples (as :func:`ecgtrace.tools.records.read_window` reads it)."""
    a = int(round(float(window["t0_s"]) * info.fs_hz))
    return a, max(int(round(float(window["t1_s"]) * info.fs_hz)), a + 1)


def beat_marks(window: SignalWindow, beat_samples: np.ndarray) -> dict[str, np.ndarray]:
    """Per beat (absolute R peaks), the median over leads of the delineator's marks (absolute samples; -1: none).

    ``p_on`` / ``p_off`` are kept only where at least half of the leads show a P wave.
    """
    from ecgtrace.tools.measure import delineate

    samples = np.asarray(beat_samples, dtype=np.int64)
    d = delineate(window, samples)
    index = {int(b): k for k, b in enumerate(d.beat_samples)}
    out: dict[str, np.ndarray] = {}
    leads = list(d.per_lead.values())
    p_votes = np.sum([lf.p_present for lf in leads], axis=0) if leads else np.zeros(0)
    for name in ("p_on", "p_off", "qrs_on", "qrs_off", "t_peak"):
        values = np.full(samples.size, -1, dtype=np.int64)
        for k, s in enumerate(samples):
            j = index.get(int(s))
            if j is None:
                continue
            marks = [int(lf.points[name][j]) for lf in leads if lf.points[name][j] >= 0]
            if name.startswith("p_") and p_votes[j] * 2 < len(leads):
                continue
            if marks:
                values[k] = int(np.median(marks))
        out[name] = values
    return out


@dataclass(frozen=True)
class PipelineBeats:
    """Beats the project's pipeline finds in a window: absolute samples and AAMI classes."""

    samples: np.ndarray
    classes: np.ndarray
    provenance: dict[str, Any]


def pipeline_beats(window: SignalWindow) -> PipelineBeats:
    """Detect and classify the beats of a window with the project's own tools (see the module docstring)."""
    from ecgtrace.tools import _classify_short as cs
    from ecgtrace.tools.beats import detect_beats_array
    from ecgtrace.tools.classify import classify_beats_array

    x = np.asarray(window.signal_mv, dtype=np.float32)
    table = detect_beats_array(x, window.fs_hz, lead_names=window.leads)
    local = np.asarray(table.samples, dtype=np.int64)
    if not local.size:
        return PipelineBeats(local + window.sampfrom, np.zeros(0, dtype="<U1"), {"detector": table.provenance})
    if cs.is_short(x.shape[0], window.fs_hz, local.size):
        classes, _, params = cs.classify_short_array(x, window.fs_hz, local)
        how = {"method": cs.METHOD, "version": cs.VERSION}
    else:
        result = classify_beats_array(x, window.fs_hz, local)
        classes, how = result.classes, {"method": result.provenance.get("method"), "version": result.provenance.get("version")}
    return PipelineBeats(local + window.sampfrom, np.asarray(classes).astype("<U1"), {"detector": {"method": table.provenance.get("method"),
                                                                                                      "version": table.provenance.get("version")},
                                                                                         "classifier": how})


def _nearest(samples: np.ndarray, at: int, tol: int) -> int | None:
    if not samples.size:
        return None
    k = int(np.argmin(np.abs(samples - at)))
    return k if abs(int(samples[k]) - at) <= tol else None


def confirm(before_window: SignalWindow, after_window: SignalWindow, before: tuple[np.ndarray, np.ndarray], after: tuple[np.ndarray, np.ndarray],
            origin: np.ndarray, evidence: list[int], changed_spans: list[tuple[int, int]], judged: tuple[int, int],
            may_become: dict[str, tuple[str, ...]] | None = None) -> tuple[str | None, dict[str, Any]]:
    """Does the pipeline see the edit as intended? ``(reason it does not, or None; details)``.

    ``before`` / ``after``: the ground-truth beats (absolute samples, classes)
    of the context before and after the edit; ``origin[i]``: the index in
    ``before`` of after-beat ``i`` (-1 for a beat the edit added);
    ``evidence``: the before-beats the edit is about. Checked, on beats clear
    of the context edges: on the original, the pipeline finds every evidence
    beat with its class; on the edited window it finds every beat, none extra
    inside the changed spans, gives each added beat its intended class and
    every other beat the class it gave that beat on the original. Judged are
    the beats in ``judged`` (absolute samples: the item's window and
    :data:`EDGE_S` around it, never the context's far ends, where the detector
    restarts). ``may_become`` lists class changes the edit implies (restored
    P waves make an early beat an S beat): those are taken from the pipeline
    and reported in ``details["reclassified"]`` (after-beat index -> class).
    """
    fs = float(before_window.fs_hz)
    tol, edge = int(round(MATCH_MS * fs / 1000.0)), int(round(EDGE_S * fs))
    lo, hi = max(before_window.sampfrom + edge, judged[0] - edge), min(before_window.sampto - edge, judged[1] + edge)
    p0, p1 = pipeline_beats(before_window), pipeline_beats(after_window)
    details: dict[str, Any] = {"pipeline": p1.provenance, "n_detected_before": int(p0.samples.size), "n_detected_after": int(p1.samples.size)}
    for k in evidence:
        s = int(before[0][k])
        if not lo <= s < hi:
            continue
        j = _nearest(p0.samples, s, tol)
        if j is None or p0.classes[j] != before[1][k]:
            got = "missed" if j is None else str(p0.classes[j])
            return f"pipeline_misses_evidence_on_original:{before[1][k]}->{got}", details
    for i, s in enumerate(after[0].tolist()):
        if not lo <= s < hi:
            continue
        j = _nearest(p1.samples, s, tol)
        if j is None:
            return "pipeline_beat_not_found_after_edit", details
        want = after[1][i] if origin[i] < 0 else None
        if origin[i] >= 0:
            j0 = _nearest(p0.samples, int(before[0][origin[i]]), tol)
            want = str(p0.classes[j0]) if j0 is not None else None
        if want is not None and p1.classes[j] != want:
            if origin[i] >= 0 and str(p1.classes[j]) in (may_become or {}).get(want, ()):
                details.setdefault("reclassified", {})[str(i)] = str(p1.classes[j])
                continue
            what = "edited_beat" if origin[i] < 0 else "other_beat"
            return f"pipeline_{what}_class:{want}->{p1.classes[j]}", details
    truth = np.asarray(after[0])
    for s in p1.samples.tolist():
        if lo <= s < hi and any(a <= s < b for a, b in changed_spans) and _nearest(truth, s, tol) is None:
            return "pipeline_extra_beat_in_edit", details
    return None, details
