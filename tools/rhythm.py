"""Rhythm events from a classified beat stream: ectopy patterns, runs, pauses, AF, rate episodes.

Input is a beat list (R-peak samples), its AAMI classes (``N S V F Q``) and
the sampling rate; output is a list of plain-JSON event dicts whose ``kind``
names match the synthetic schedule (:mod:`ecgtrace.tools._synth_schedule`), so
counts compare directly.

Conventions (the synthetic schedule is the arbiter):

- ``pvc``/``pac`` are *isolated* ectopic beats only. Ectopic beats inside a
  couplet, a run, bigeminy or trigeminy belong to that event and are not
  counted again as ``pvc``/``pac`` (report totals of ectopic *beats* come from
  the class counts instead).
- A run of exactly 2 consecutive V (S) beats is a ``v_couplet`` (``s_couplet``);
  3 or more V beats at a rate above ``vt_min_rate_bpm`` is ``vt`` (slower: ``ivr``,
  idioventricular rhythm); 3 or more S beats is ``svt`` (rate above
  ``svt_min_rate_bpm``, default 0 = any).
- Bigeminy is a chain of at least ``bigeminy_min_cycles`` cycles ``N X`` (X an
  isolated ectopic, one normal beat between consecutive ectopics); trigeminy a
  chain of at least ``trigeminy_min_cycles`` cycles ``N N X``. The event spans
  from the first normal beat of the first cycle to the last ectopic; an ectopic
  not preceded by its normal beat(s) does not open a cycle (it stays isolated).
- ``pause``: an RR interval longer than ``pause_min_s`` that does not overlap an
  artifact span; the event is bounded by its two beats (``n_beats`` 2).
- ``sinus_tachycardia``/``sinus_bradycardia``: runs of sinus beats (N, outside
  AF, preceded by an N beat) whose running-median (``sinus_median_beats``)
  instantaneous HR is above ``tachy_min_bpm`` / below ``brady_max_bpm``,
  lasting at least ``sinus_min_s``; interruptions shorter than
  ``sinus_merge_gap_s`` are bridged.
- ``af``: the episodes of :func:`ecgtrace.tools.af.detect_af` (run on the beat
  stream with its classes when ``af`` is not given).
- ``noise``: each artifact span (no beats), less the VF/VFL spans inside it and
  not inside a quiet gap (:func:`ecgtrace.tools._rhythm_spans.noise_events`).
- S-beat events inside AF are suppressed (premature atrial beats are not
  defined in AF); P-wave events (AV block, non-conducted PAC, junctional) that
  overlap AF or a given AFL/VFL/VF span anywhere are dropped
  (:mod:`ecgtrace.tools._rhythm_spans`).

Times: ``onset_ms``/``offset_ms`` are the R peaks of the first and last beat of
the event, in ms from the record start.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ecgtrace.contracts.vocabulary import EVENT_KINDS, NOTE_ALIASES, RHYTHM_NOTES
from ecgtrace.tools._rhythm_conduction import DEFAULT_CONDUCTION_PARAMS, conduction_events
from ecgtrace.tools._rhythm_escape import DEFAULT_ESCAPE_PARAMS, escape_events, no_escape_mask
from ecgtrace.tools._rhythm_gaps import is_quiet
from ecgtrace.tools._rhythm_spans import NO_QRS_SPAN_KINDS, SPAN_KINDS, drop_p_wave_events_in_spans, mask_in_spans, noise_events, overlaps_any, span_events
from ecgtrace.tools.af import AfResult, _runs, as_beat_samples, detect_af

RHYTHM_VERSION = "1.5"  # 1.5: no beat is late without a recent N-N interval; 1.4: the beat ending a compensatory pause is no escape beat

DEFAULT_RHYTHM_PARAMS: dict[str, Any] = {
    "vt_min_rate_bpm": 100.0,
    "svt_min_rate_bpm": 0.0,
    "bigeminy_min_cycles": 3,
    "trigeminy_min_cycles": 3,
    "pause_min_s": 2.0,
    "tachy_min_bpm": 100.0,
    "brady_max_bpm": 60.0,
    "sinus_min_s": 30.0,
    "sinus_median_beats": 5,
    "sinus_merge_gap_s": 5.0,
    "suppress_s_in_af": True,
    **DEFAULT_ESCAPE_PARAMS,
    **DEFAULT_CONDUCTION_PARAMS,
}
#: Event kinds whose beats are not sinus beats (they never make sinus tachycardia or bradycardia).
NOT_SINUS_KINDS: frozenset[str] = frozenset({"junctional_escape", "ventricular_escape", "junctional_rhythm", "ventricular_escape_rhythm",
                                             "avb2_mobitz1", "avb2_mobitz2", "avb_2to1", "avb3"})


def rhythm_params(**overrides: Any) -> dict[str, Any]:
    """Defaults merged with ``overrides``; unknown names raise ``TypeError``."""
    unknown = set(overrides) - set(DEFAULT_RHYTHM_PARAMS)
    if unknown:
        raise TypeError(f"unknown rhythm parameter(s): {', '.join(sorted(unknown))}")
    return {**DEFAULT_RHYTHM_PARAMS, **overrides}


def _event(kind: str, samples: np.ndarray, first: int, last: int, fs_hz: float, provenance: dict[str, Any], **extra: Any) -> dict[str, Any]:
    onset, offset = int(samples[first]), int(samples[last])
    n_beats = int(last - first + 1)
    span_s = (offset - onset) / fs_hz
    rate = round(60.0 * (n_beats - 1) / span_s, 1) if n_beats > 1 and span_s > 0 else None
    event = {
        "kind": kind,
        "onset_sample": onset,
        "offset_sample": offset,
        "onset_ms": int(round(onset * 1000.0 / fs_hz)),
        "offset_ms": int(round(offset * 1000.0 / fs_hz)),
        "n_beats": n_beats,
        "rate_bpm": rate,
        "lead": None,
        "first_beat": int(first),
        "last_beat": int(last),
        "provenance": provenance,
    }
    event.update(extra)
    return event


def _ectopic_events(samples: np.ndarray, is_x: np.ndarray, is_n: np.ndarray, fs_hz: float, p: dict[str, Any], prefix: str, prov: dict[str, Any]) -> list[dict[str, Any]]:
    """Runs, couplets, bigeminy/trigeminy and isolated beats of one ectopic class."""
    events: list[dict[str, Any]] = []
    singles: list[int] = []
    for first, last in _runs(is_x):
        length = last - first + 1
        if length == 1:
            singles.append(first)
        elif length == 2:
            events.append(_event(f"{prefix}_couplet", samples, first, last, fs_hz, prov))
        else:
            span_s = (samples[last] - samples[first]) / fs_hz
            rate = 60.0 * (length - 1) / span_s if span_s > 0 else float("inf")
            if prefix == "v":
                kind = "vt" if rate > p["vt_min_rate_bpm"] else ("ivr" if rate >= p["ventricular_escape_max_bpm"] else "ventricular_escape_rhythm")
            else:
                kind = "svt" if rate > p["svt_min_rate_bpm"] else "s_run"
                if span_s >= p["at_min_s"]:  # sustained: also atrial tachycardia (the run stays an svt, like an asystole stays a pause)
                    events.append(_event("atrial_tachycardia", samples, first, last, fs_hz, prov))
            events.append(_event(kind, samples, first, last, fs_hz, prov))
    used: set[int] = set()

    def has_normals(x: int, step: int) -> bool:
        return x - (step - 1) >= 0 and bool(is_n[x - (step - 1) : x].all())

    for step, name, min_cycles in ((2, "bigeminy", p["bigeminy_min_cycles"]), (3, "trigeminy", p["trigeminy_min_cycles"])):
        chain: list[int] = []
        for x in singles + [-10]:  # sentinel closes the last chain
            if x in used:
                x = -10
            ok_link = bool(chain) and x - chain[-1] == step and bool(is_n[chain[-1] + 1 : x].all())
            if ok_link:
                chain.append(x)
                continue
            if chain and not has_normals(chain[0], step):
                chain = chain[1:]  # the first ectopic lacks its normal beats: the chain starts at the next cycle
            if chain:
                first_n = chain[0] - (step - 1)
                if len(chain) >= min_cycles:
                    events.append(_event(f"{prefix}_{name}", samples, first_n, chain[-1], fs_hz, prov, cycles=len(chain)))
                    used.update(chain)
            chain = [x] if x >= 0 else []
    iso = "pvc" if prefix == "v" else "pac"
    events.extend(_event(iso, samples, x, x, fs_hz, prov) for x in singles if x not in used)
    return events


def _sinus_rate_events(samples: np.ndarray, classes: np.ndarray, af_mask: np.ndarray, artifact_spans: Sequence[tuple[int, int]], fs_hz: float, p: dict[str, Any], prov: dict[str, Any]) -> list[dict[str, Any]]:
    from scipy.ndimage import median_filter

    n = samples.size
    if n < 3:
        return []
    sinus = (classes == "N") & ~af_mask
    ok = np.zeros(n, dtype=bool)
    ok[1:] = sinus[1:] & sinus[:-1]
    if artifact_spans:
        for s0, s1 in artifact_spans:
            lo, hi = np.searchsorted(samples, [int(s0), int(s1)])
            ok[max(lo, 1) : min(hi + 1, n)] = False  # beats in the span, and the RR that leaves it
    idx = np.flatnonzero(ok)
    if idx.size < 3:
        return []
    hr = 60.0 * fs_hz / (samples[idx] - samples[idx - 1]).astype(np.float64)
    hr_med = median_filter(hr, size=max(1, min(int(p["sinus_median_beats"]), hr.size)), mode="nearest")
    events: list[dict[str, Any]] = []
    for kind, flag in (("sinus_tachycardia", hr_med > p["tachy_min_bpm"]), ("sinus_bradycardia", hr_med < p["brady_max_bpm"])):
        merged: list[list[int]] = []
        for a, b in _runs(flag):
            first, last = int(idx[a]), int(idx[b])
            if merged and (samples[first] - samples[merged[-1][1]]) / fs_hz < p["sinus_merge_gap_s"]:
                merged[-1][1] = last
            else:
                merged.append([first, last])
        for first, last in merged:
            if (samples[last] - samples[first]) / fs_hz >= p["sinus_min_s"]:
                events.append(_event(kind, samples, first, last, fs_hz, prov))
    return events


def detect_events(
    beat_samples: np.ndarray,
    beat_classes: np.ndarray,
    fs_hz: float,
    *,
    af: AfResult | None = None,
    artifact_spans: Sequence[tuple[int, int]] = (),
    n_samples: int | None = None,
    beat_source: str = "detected",
    beat_symbols: np.ndarray | None = None,
    p_wave_present: np.ndarray | None = None,
    p_wave_samples: np.ndarray | None = None,
    blocked_pac_samples: np.ndarray | None = None,
    rhythm_spans: Sequence[dict[str, Any]] = (),
    conduction_beat_samples: np.ndarray | None = None,
    gaps: Sequence[dict[str, Any]] = (),
    **thresholds: Any,
) -> list[dict[str, Any]]:
    """Detect rhythm events in a classified beat stream.

    Args:
        beat_samples: R-peak sample indices, sorted (int).
        beat_classes: AAMI class per beat (``N S V F Q``).
        fs_hz: Sampling rate of ``beat_samples`` in Hz.
        af: AF result for these beats; when None, :func:`detect_af` is run on the
            beat stream with its classes.
        artifact_spans: ``(start, stop)`` sample spans of noise; pauses that
            overlap one are dropped, RRs that touch one are not used for sinus
            rate, and each span, less the VF/VFL ``rhythm_spans`` in it, is reported
            as a ``noise`` event.
        n_samples: Record length in samples (spans are clipped to it).
        beat_source: ``reference`` or ``detected``: where the beats came from
            (recorded in provenance).
        beat_symbols: Reference beat symbols (MIT-BIH ``j``/``E`` mark junctional and
            ventricular escape beats); without them escape beats are found by
            lateness (:mod:`ecgtrace.tools._rhythm_escape`).
        p_wave_present: Bool per beat (e.g. from ``classify_beats``): N beats without P
            may be junctional.
        p_wave_samples: Every P-wave peak (sample), e.g. an annotation file's ``p``
            marks: enables second/third-degree AV block and non-conducted PACs
            (:mod:`ecgtrace.tools._rhythm_conduction`).
        blocked_pac_samples: P peaks known to be non-conducted PACs (MIT-BIH ``x``).
        rhythm_spans: Episodes known from elsewhere, ``{kind, onset_sample,
            offset_sample}`` with kind in :data:`SPAN_KINDS` (rhythm notes, or a
            wave detector): emitted as events; no pause or asystole inside VF/VFL.
        conduction_beat_samples: Per beat, the R fiducial PR is measured to (e.g.
            :attr:`ecgtrace.tools.holter_p.PWaves.r_fiducial`); default ``beat_samples``.
        gaps: Long RR gaps read on the signal, ``{onset_sample, offset_sample, busy}``
            (:func:`ecgtrace.tools._rhythm_gaps.measure_gaps`): a busy gap is no pause; a quiet
            one is a pause even where an artifact span lies inside it (a flat asystole), and
            such a span is not reported as noise.
        **thresholds: Overrides of :data:`DEFAULT_RHYTHM_PARAMS`.

    Returns:
        Events sorted by onset, each a plain-JSON dict with ``kind, onset_ms,
        offset_ms, onset_sample, offset_sample, n_beats, rate_bpm, lead,
        first_beat, last_beat, provenance`` (bigeminy/trigeminy add ``cycles``).
    """
    p = rhythm_params(**thresholds)
    samples, classes, spans = _checked_stream(beat_samples, beat_classes, fs_hz, artifact_spans, n_samples)
    if af is None:
        af = detect_af(samples, fs_hz, beat_classes=classes)
    af_mask = np.asarray(af.beat_mask, dtype=bool)
    prov = {
        "source": "detected" if beat_source == "detected" else "computed",
        "method": "rhythm.detect_events",
        "version": RHYTHM_VERSION,
        "params": {**p, "beat_source": beat_source, "af": {"method": af.provenance.get("method"), "version": af.provenance.get("version")}},
    }
    known = [dict(r) for r in rhythm_spans if r.get("kind") in SPAN_KINDS]
    no_qrs = [(int(r["onset_sample"]), int(r["offset_sample"])) for r in known if r["kind"] in NO_QRS_SPAN_KINDS]
    known_spans = [(int(r["onset_sample"]), int(r["offset_sample"])) for r in known]
    in_span = mask_in_spans(samples, known_spans)
    events = [_event("af", samples, ep["first_beat"], ep["last_beat"], fs_hz, prov) for ep in af.episodes]
    events += _beat_run_events(samples, classes, af_mask, in_span, spans, beat_symbols, p_wave_present, fs_hz, p, prov)
    events += _pause_events(samples, spans, no_qrs, gaps, fs_hz, p, prov)
    events += span_events(samples, known, fs_hz, prov)
    if p_wave_samples is not None or blocked_pac_samples is not None:
        events += _conduction(samples, conduction_beat_samples, p_wave_samples, blocked_pac_samples, fs_hz, p, prov)
    # in complete AV block the narrow escape rhythm is part of the block, not a separate junctional rhythm
    events = _absorb_escapes_into_avb3(events, samples, fs_hz)
    # no P waves to read in AF, flutter or VF: a P-wave event that overlaps one anywhere is dropped (after the block grew)
    events = drop_p_wave_events_in_spans(events, af_mask | in_span, known_spans)
    # beats of flutter, AV block, escape beats and rhythms are not sinus beats, whatever their class
    not_sinus = af_mask | in_span
    for e in events:
        if e["kind"] in NOT_SINUS_KINDS and e.get("first_beat") is not None:
            not_sinus[e["first_beat"] : e["last_beat"] + 1] = True
    events += _sinus_rate_events(samples, classes, not_sinus, spans, fs_hz, p, prov)
    quiet = [(int(g["onset_sample"]), int(g["offset_sample"])) for g in gaps if is_quiet(g)]
    events += noise_events(samples, spans, no_qrs, quiet, fs_hz, prov)
    events.sort(key=lambda e: (e["onset_sample"], e["offset_sample"], e["kind"]))
    return events


def _checked_stream(beat_samples: np.ndarray, beat_classes: np.ndarray, fs_hz: float, artifact_spans: Sequence[tuple[int, int]],
                    n_samples: int | None) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """Beat samples (int64), one class per beat and the artifact spans clipped to the record; ValueError otherwise."""
    if not fs_hz or fs_hz <= 0:
        raise ValueError(f"fs_hz must be > 0, got {fs_hz!r}")
    samples = as_beat_samples(beat_samples)
    classes = np.asarray(beat_classes).astype("<U1")
    if classes.size != samples.size:
        raise ValueError(f"beat_classes has {classes.size} entries for {samples.size} beats")
    if samples.size > 1 and np.any(np.diff(samples) <= 0):
        raise ValueError("beat_samples must be strictly increasing")
    spans = [(int(a), int(b) if n_samples is None else min(int(b), int(n_samples))) for a, b in artifact_spans]
    return samples, classes, spans


def _beat_run_events(samples: np.ndarray, classes: np.ndarray, af_mask: np.ndarray, in_span: np.ndarray, spans: Sequence[tuple[int, int]],
                     beat_symbols: np.ndarray | None, p_wave_present: np.ndarray | None, fs_hz: float, p: dict[str, Any],
                     prov: dict[str, Any]) -> list[dict[str, Any]]:
    """Escape beats and rhythms, then the V and S beat patterns (runs, couplets, bigeminy ...) of the non-escape beats."""
    is_n = classes == "N"
    is_s = classes == "S"
    if p["suppress_s_in_af"]:
        is_s = is_s & ~af_mask
    # AF and flutter beats lack a P wave for another reason: they count as having one (never junctional)
    p_or_excused = None if p_wave_present is None else np.asarray(p_wave_present, bool) | af_mask | in_span
    escapes, escape_used = escape_events(samples, classes, fs_hz, beat_symbols, p_or_excused, p, irregular=no_escape_mask(samples, af_mask | in_span, spans))
    events = [_event(kind, samples, a, b, fs_hz, prov) for kind, a, b in escapes]
    events += _ectopic_events(samples, (classes == "V") & ~escape_used, is_n, fs_hz, p, "v", prov)
    return events + _ectopic_events(samples, is_s, is_n, fs_hz, p, "s", prov)


def _absorb_escapes_into_avb3(events: list[dict[str, Any]], samples: np.ndarray, fs_hz: float) -> list[dict[str, Any]]:
    """Junctional beats and rhythms inside, or within 2 beats of, a third-degree block are its escape rhythm:
    the block grows over them and they are not reported again."""
    blocks = [e for e in events if e["kind"] == "avb3"]
    if not blocks:
        return events
    out = []
    for e in events:
        if e["kind"] in ("junctional_rhythm", "junctional_escape"):
            host = next((b for b in blocks if e["first_beat"] <= b["last_beat"] + 2 and e["last_beat"] >= b["first_beat"] - 2), None)
            if host is not None:
                first, last = min(host["first_beat"], e["first_beat"]), max(host["last_beat"], e["last_beat"])
                host.update(_event("avb3", samples, first, last, fs_hz, host["provenance"]))
                continue
        out.append(e)
    blocks.sort(key=lambda b: b["first_beat"])
    for prev, nxt in zip(blocks, blocks[1:]):  # blocks that grew into each other are one
        if nxt["first_beat"] - prev["last_beat"] <= 3:
            nxt.update(_event("avb3", samples, prev["first_beat"], max(prev["last_beat"], nxt["last_beat"]), fs_hz, nxt["provenance"]))
            prev["kind"] = None
    return [e for e in out if e["kind"] is not None]


def _pause_events(samples: np.ndarray, spans: Sequence[tuple[int, int]], no_qrs: Sequence[tuple[int, int]], gaps: Sequence[dict[str, Any]],
                  fs_hz: float, p: dict[str, Any], prov: dict[str, Any]) -> list[dict[str, Any]]:
    """Pauses (RR > pause_min_s) and asystole (RR > asystole_min_s, also a pause) outside VF/VFL spans and busy gaps,
    and outside artifact spans unless the signal shows the gap quiet (``gaps``)."""
    events: list[dict[str, Any]] = []
    if samples.size < 2:
        return events
    read = {(int(g["onset_sample"]), int(g["offset_sample"])): g for g in gaps}
    for i in np.flatnonzero(np.diff(samples) > p["pause_min_s"] * fs_hz).tolist():
        a, b = int(samples[i]), int(samples[i + 1])
        gap = read.get((a, b))
        quiet = gap is not None and is_quiet(gap)
        if overlaps_any(a, b, no_qrs) or (gap is not None and gap["busy"]) or (overlaps_any(a, b, spans) and not quiet):
            continue
        duration_ms = int(round((b - a) * 1000.0 / fs_hz))
        events.append(_event("pause", samples, i, i + 1, fs_hz, prov, duration_ms=duration_ms))
        if b - a > p["asystole_min_s"] * fs_hz:
            events.append(_event("asystole", samples, i, i + 1, fs_hz, prov, duration_ms=duration_ms))
    return events


def _conduction(samples: np.ndarray, conduction_beat_samples: np.ndarray | None, p_waves: np.ndarray | None, blocked: np.ndarray | None,
                fs_hz: float, p: dict[str, Any], prov: dict[str, Any]) -> list[dict[str, Any]]:
    """AV-block and non-conducted-PAC events from P-wave peaks (those overlapping AF/flutter/VF are dropped by the caller);
    PR is measured to ``conduction_beat_samples`` (one per beat), else to the beat samples."""
    fiducial = samples if conduction_beat_samples is None else np.asarray(conduction_beat_samples, dtype=np.int64)
    if fiducial.size != samples.size:
        raise ValueError(f"conduction_beat_samples has {fiducial.size} entries for {samples.size} beats")
    keys = DEFAULT_CONDUCTION_PARAMS.keys()
    found = conduction_events(fiducial, np.asarray(p_waves if p_waves is not None else [], dtype=np.int64), fs_hz,
                              blocked_pac=blocked, **{k: p[k] for k in keys})
    out = []
    for kind, a, b, extra in found["events"]:
        if kind == "blocked_pac":
            t = int(extra["p_sample"])
            out.append({"kind": kind, "onset_sample": t, "offset_sample": t, "onset_ms": int(round(t * 1000.0 / fs_hz)), "offset_ms": int(round(t * 1000.0 / fs_hz)),
                        "n_beats": 0, "rate_bpm": None, "lead": None, "first_beat": int(a), "last_beat": int(a), "provenance": prov})
        else:
            out.append(_event(kind, samples, a, b, fs_hz, prov, **extra))
    return out


#: Reference rhythm notes that are episodes given as spans (no beats needed), with their PhysioNet aliases.
NOTE_SPAN_KINDS: dict[str, str] = {**{RHYTHM_NOTES[k]: k for k in SPAN_KINDS}, **{alias: {RHYTHM_NOTES[k]: k for k in SPAN_KINDS}[note] for alias, note in NOTE_ALIASES.items()}}


def reference_event_inputs(ann: Any) -> dict[str, Any]:
    """Keyword arguments of :func:`detect_events` from a :class:`~ecgtrace.tools.annotations.ReferenceAnnotations`.

    Beat symbols (escape beats ``j``/``E``), P-wave peaks (``p`` marks), non-conducted PACs
    (``x`` marks) and the AFL/VFL/VF rhythm intervals of the file.
    """
    spans = [{"kind": NOTE_SPAN_KINDS[iv["label"]], "onset_sample": int(iv["onset_sample"]), "offset_sample": int(iv["offset_sample"]), "source": f"rhythm note ({iv['label']}"}
             for iv in ann.rhythm_intervals if iv["label"] in NOTE_SPAN_KINDS]
    marks = getattr(ann, "marks", {}) or {}
    return {"beat_symbols": ann.beat_symbols, "p_wave_samples": marks.get("p"), "blocked_pac_samples": marks.get("x"), "rhythm_spans": spans}


def count_events(events: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Number of events per kind (every kind of :data:`EVENT_KINDS`, zeros included)."""
    counts = {kind: 0 for kind in EVENT_KINDS}
    for e in events:
        counts[e["kind"]] = counts.get(e["kind"], 0) + 1
    return counts
