"""Holtercare's rhythm vocabulary in ``benchmarks/rhythm.py``: episode Se and +P by duration, per event kind.

Matching: a reference episode is found (Se) when an event of the same kind
overlaps it (point events such as escape beats and non-conducted PACs: an
event within +-``POINT_TOL_MS``); an event is correct (+P) when it overlaps a
reference episode of its kind. Both are broken down by the episode's duration
(``point``, ``< 10 s``, ``10-60 s``, ``>= 60 s``), the reference's for Se and the
event's own for +P.

Sections:

1. Synthetic holtercare profile (untuned: the rules were written from the
   definitions, and the schedule is exact): events from the ``.atr`` reference
   (beats, symbols, P marks, rhythm notes) and from the signal (detected beats,
   classes, P-wave presence, VF/VFL wave spans; no P marks, so AV block is not
   expected there).
2. MIT-BIH expert labels (DS1 records and 100): escape beats ``j``/``E`` and
   ``(NOD``/``(IVR``/``(VFL``/``(AFL`` intervals against events found from the
   reference beat positions and classes *without* their symbols (lateness, P-wave
   presence measured on the signal by tools/classify.py, wave spans).
3. VFDB, split by ``benchmarks/_protocol.py`` (418-422 tuned, 423-428 scored
   only): ``(VF``/``(VFIB``/``(VFL``/``(ASYS``/``(NOISE`` intervals against events from
   detected beats and wave spans, per record and per half; VF|VFIB|VFL also by
   duration (overlap seconds over reference and over event seconds); a VFL
   stretch running into VF counts as one VF|VFIB|VFL episode on both sides.
"""

from __future__ import annotations

import collections
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from ecgtrace.tools._rhythm_escape import DEFAULT_ESCAPE_PARAMS
from ecgtrace.tools.af import _runs
from ecgtrace.tools.annotations import read_reference_annotations
from ecgtrace.tools.rhythm import detect_events, reference_event_inputs

POINT_TOL_MS = 150.0
BINS = ("point", "< 10 s", "10-60 s", ">= 60 s")
VOCAB_KINDS = ("afl", "atrial_tachycardia", "vfl", "vf", "asystole", "junctional_escape", "ventricular_escape", "junctional_rhythm",
               "ventricular_escape_rhythm", "avb2_mobitz1", "avb2_mobitz2", "avb_2to1", "avb3", "s_couplet", "svt", "blocked_pac")
#: Escape beats in a row that make an escape rhythm (the detector's own setting).
ESCAPE_RHYTHM_MIN_BEATS: int = DEFAULT_ESCAPE_PARAMS["escape_rhythm_min_beats"]
#: Expert rhythm labels -> kinds that count as finding them.
LABEL_KINDS = {"NOD": ("junctional_rhythm",), "IVR": ("ivr", "ventricular_escape_rhythm"), "VFL": ("vfl", "vf"), "VF": ("vf", "vfl"),
               "VFIB": ("vf", "vfl"), "AFL": ("afl",), "ASYS": ("asystole",)}


def _bin(duration_ms: float, point: bool) -> str:
    if point:
        return "point"
    return "< 10 s" if duration_ms < 10_000 else ("10-60 s" if duration_ms < 60_000 else ">= 60 s")


def overlaps(a: dict[str, Any], b: dict[str, Any], point: bool) -> bool:
    """Two events match: onsets within ``POINT_TOL_MS`` for point events, else their spans overlap."""
    if point:
        return abs(a["onset_ms"] - b["onset_ms"]) <= POINT_TOL_MS
    return a["onset_ms"] <= b["offset_ms"] and a["offset_ms"] >= b["onset_ms"]


#: Subtypes that are also their parent kind (an atrial tachycardia is an svt, an asystole a pause).
REF_ALIASES = {"svt": ("svt", "atrial_tachycardia"), "pause": ("pause", "asystole"), "VF|VFIB|VFL": ("VF", "VFIB", "VFL")}


#: Union kinds whose touching parts (VFL running into VF) are scored as one episode.
UNION_KINDS = ("VF|VFIB|VFL",)


def merge_touching(intervals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Intervals in ms, sorted, with those that overlap or touch merged into one."""
    out: list[dict[str, Any]] = []
    for iv in sorted(intervals, key=lambda r: r["onset_ms"]):
        if out and iv["onset_ms"] <= out[-1]["offset_ms"]:
            out[-1] = {**out[-1], "offset_ms": max(out[-1]["offset_ms"], iv["offset_ms"])}
        else:
            out.append(dict(iv))
    return out


def episode_scores(reference: list[dict[str, Any]], events: list[dict[str, Any]], kinds: dict[str, tuple[str, ...]]) -> dict[str, dict[str, list[int]]]:
    """Per reference kind and duration bin: ``[found, reference, correct events, events]``."""
    out: dict[str, dict[str, list[int]]] = {}
    for ref_kind, det_kinds in kinds.items():
        refs = [r for r in reference if r["kind"] in REF_ALIASES.get(ref_kind, (ref_kind,))]
        dets = [e for e in events if e["kind"] in det_kinds]
        if ref_kind in UNION_KINDS:  # a VFL stretch running into VF is one episode of the union, on both sides
            refs, dets = merge_touching(refs), merge_touching(dets)
        point = ref_kind in ("junctional_escape", "ventricular_escape", "blocked_pac")
        rows = out.setdefault(ref_kind, {b: [0, 0, 0, 0] for b in BINS})
        for r in refs:
            cell = rows[_bin(r["offset_ms"] - r["onset_ms"], point)]
            cell[1] += 1
            cell[0] += any(overlaps(r, e, point) for e in dets)
        for e in dets:
            cell = rows[_bin(e["offset_ms"] - e["onset_ms"], point)]
            cell[3] += 1
            cell[2] += any(overlaps(r, e, point) for r in refs)
    return out


def score_table(title: str, scores: dict[str, dict[str, list[int]]]) -> Table:
    t = Table(title=title)
    t.add_column("kind")
    for b in BINS:
        t.add_column(f"{b}: Se (n)", justify="right")
        t.add_column("+P (n)", justify="right")
    t.add_column("all: Se / +P %", justify="right")
    for kind, rows in scores.items():
        cells = []
        tot = [0, 0, 0, 0]
        for b in BINS:
            f, r, c, d = rows[b]
            tot = [x + y for x, y in zip(tot, rows[b])]
            cells += [f"{100 * f / r:.0f} ({r})" if r else "-", f"{100 * c / d:.0f} ({d})" if d else "-"]
        cells.append(f"{100 * tot[0] / tot[1]:.1f} / {100 * tot[2] / tot[3]:.1f}" if tot[1] and tot[3] else (f"{100 * tot[0] / tot[1]:.1f} / -" if tot[1] else f"- / {100 * tot[2] / tot[3]:.1f}" if tot[3] else "-"))
        t.add_row(kind, *cells)
    return t


def _same(kinds: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    return {k: (k,) for k in kinds}


def detected_events(record_path: Path, *, signal_waves: bool = True) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Events from the signal alone: detected beats, classes, P-wave presence and (optionally) wave spans."""
    from ecgtrace.tools.beats import detect_beats
    from ecgtrace.tools.classify import classify_beats
    from ecgtrace.tools.rhythm_signal import signal_event_inputs

    table = detect_beats(record_path, workers=2)
    spans = [(int(a), int(b)) for a, b in table.artifact_spans]
    bc = classify_beats(record_path, table.samples, table.fs_hz, artifact_spans=spans)
    inputs = signal_event_inputs(record_path, table.samples, bc.classes, artifact_spans=spans, p_wave_present=bc.features["p_wave_present"])
    kwargs = inputs["kwargs"] if signal_waves else {**inputs["kwargs"], "rhythm_spans": []}
    events = detect_events(table.samples, bc.classes, table.fs_hz, artifact_spans=spans, **kwargs)
    return events, {"n_beats": int(table.samples.size), "waves": len(kwargs["rhythm_spans"]), "p_wave_status": inputs["provenance"]["p_wave_status"],
                    "n_p_waves": int(inputs["p_waves"].p_samples.size), "extra": [c.get("extra_p_share") for c in inputs["p_waves"].chunks]}


def synthetic_section(hours: float, seed: int, detected: bool) -> list[Table]:
    from ecgtrace.tools.synth import synthesize_holter

    tables = []
    with tempfile.TemporaryDirectory(prefix="ecgtrace-rhythm-hc-") as tmp:
        synth = synthesize_holter(tmp, hours=hours, seed=seed, profile="holtercare")
        ann = read_reference_annotations(synth.record_path)
        ref = synth.schedule["events"]
        events = detect_events(ann.beat_samples, ann.beat_classes, ann.fs_hz, beat_source="reference", **reference_event_inputs(ann))
        kinds = {**_same(VOCAB_KINDS), "svt": ("svt",)}
        tables.append(score_table(f"synthetic holtercare {hours:g} h seed {seed} (untuned): events from the .atr reference (beats, symbols, P marks, notes)", episode_scores(ref, events, kinds)))
        if detected:
            ev, info = detected_events(synth.record_path)
            tables.append(score_table(f"synthetic holtercare {hours:g} h seed {seed} (TUNED: P-wave, conduction and flutter thresholds were set on it): events from the SIGNAL ({info['n_beats']} detected beats, {info['waves']} wave spans, {info['n_p_waves']} detected P waves)",
                                      episode_scores(ref, ev, kinds)))
    return tables


def escape_points(ann: Any) -> list[dict[str, Any]]:
    """Expert escape beats (``j``/``E``) as point episodes.

    Escape beats in a row of ``ESCAPE_RHYTHM_MIN_BEATS`` or more of the same symbol are an escape rhythm (rhythm.py's
    convention), scored once in the NOD/IVR rows from the expert's notes, not again beat by beat.
    """
    ms = ann.beat_samples * 1000.0 / ann.fs_hz
    sym = np.asarray(ann.beat_symbols).astype(str)
    in_rhythm = np.zeros(sym.size, bool)
    for s in ("j", "E"):
        for a, b in _runs(sym == s):
            in_rhythm[a : b + 1] |= b - a + 1 >= ESCAPE_RHYTHM_MIN_BEATS
    return [{"kind": "junctional_escape" if s == "j" else "ventricular_escape", "onset_ms": float(t), "offset_ms": float(t)}
            for s, t, r in zip(sym, ms, in_rhythm) if s in ("j", "E") and not r]


def _expert_reference(ann: Any) -> list[dict[str, Any]]:
    """Expert escape beats as point episodes (:func:`escape_points`) and labelled rhythm intervals as episodes."""
    out = escape_points(ann)
    out += [{"kind": iv["label"], "onset_ms": iv["onset_ms"], "offset_ms": iv["offset_ms"]} for iv in ann.rhythm_intervals if iv["label"] in LABEL_KINDS]
    return out


def signal_p_wave_present(path: Path, beat_samples: np.ndarray, classified: Any) -> np.ndarray:
    """Per beat: a P wave is present, by ``rhythm_signal.signal_event_inputs`` (the pipeline's P evidence)."""
    from ecgtrace.tools.rhythm_signal import signal_event_inputs

    inputs = signal_event_inputs(path, beat_samples, classified.classes, p_wave_present=classified.features["p_wave_present"])
    return np.asarray(inputs["kwargs"]["p_wave_present"], bool)


def mitdb_section(data: Path, records: tuple[str, ...]) -> Table:
    """Escape beats and rhythms from reference beats and classes without symbols, P presence from the signal
    (the classifier's and the P-wave detector's, combined as in ``tools.annotate``)."""
    from ecgtrace.tools._rhythm_waves import ventricular_wave_spans
    from ecgtrace.tools.classify import classify_beats

    total: dict[str, dict[str, list[int]]] = {}
    kinds = {"junctional_escape": ("junctional_escape",), "ventricular_escape": ("ventricular_escape",),
             **{k: v for k, v in LABEL_KINDS.items() if k in ("NOD", "IVR", "VFL", "AFL")}}
    for rec in records:
        path = data / "mitdb" / rec
        if not Path(f"{path}.atr").exists():
            continue
        ann = read_reference_annotations(path)
        bc = classify_beats(path, ann.beat_samples, ann.fs_hz)
        # P evidence as annotate combines it: a beat lacks a P only when the classifier and the P-wave detector agree
        present = signal_p_wave_present(path, ann.beat_samples, bc)
        gaps = np.flatnonzero(np.diff(ann.beat_samples) > 2.0 * ann.fs_hz)  # no QRS for > 2 s: where VF/VFL can hide
        waves = ventricular_wave_spans(path, [(int(ann.beat_samples[i]) + int(0.3 * ann.fs_hz), int(ann.beat_samples[i + 1]) - int(0.1 * ann.fs_hz)) for i in gaps])
        events = detect_events(ann.beat_samples, ann.beat_classes, ann.fs_hz, beat_source="reference", p_wave_present=present, rhythm_spans=waves)
        for kind, rows in episode_scores(_expert_reference(ann), events, kinds).items():
            acc = total.setdefault(kind, {b: [0, 0, 0, 0] for b in BINS})
            for b in BINS:
                acc[b] = [x + y for x, y in zip(acc[b], rows[b])]
    return score_table(f"MIT-BIH ({len(records)} records: DS1 tuned + 100): expert j/E beats and NOD/IVR/VFL/AFL intervals vs events from reference beats WITHOUT symbols", total)


#: VFDB's expert labels scored here, and the detected kinds that count as finding each (NOISE: the beat detector's
#: artifact spans, which also cover VT and VF it finds no QRS in; scored to show what a ``noise`` event means).
#: VT is scored too: a VT the wave detector drops is only found where the beat detector and the classifier make it a V run.
VFDB_KINDS = {**{k: v for k, v in LABEL_KINDS.items() if k in ("VF", "VFIB", "VFL", "ASYS")}, "VT": ("vt",), "NOISE": ("noise",),
              "VF|VFIB|VFL": ("vf", "vfl")}


def overlap_seconds(reference: list[dict[str, Any]], events: list[dict[str, Any]]) -> tuple[float, float, float]:
    """``(reference s, event s, overlap s)`` of interval lists in ms (overlaps counted once per reference/event pair)."""
    ref_s = sum(r["offset_ms"] - r["onset_ms"] for r in reference) / 1000.0
    ev_s = sum(e["offset_ms"] - e["onset_ms"] for e in events) / 1000.0
    both = sum(max(0.0, min(r["offset_ms"], e["offset_ms"]) - max(r["onset_ms"], e["onset_ms"])) for r in reference for e in events) / 1000.0
    return ref_s, ev_s, both


def vfdb_record_scores(path: Path) -> tuple[dict[str, dict[str, list[int]]], tuple[float, float, float]]:
    """One VFDB record: episode scores per kind and bin, and the VF|VFIB|VFL ``(reference s, event s, overlap s)``."""
    ann = read_reference_annotations(path)
    ref = [{"kind": iv["label"], "onset_ms": iv["onset_ms"], "offset_ms": iv["offset_ms"]} for iv in ann.rhythm_intervals if iv["label"] in VFDB_KINDS]
    events, _ = detected_events(path)
    vf_ref = merge_touching([r for r in ref if r["kind"] in REF_ALIASES["VF|VFIB|VFL"]])
    return episode_scores(ref, events, VFDB_KINDS), overlap_seconds(vf_ref, merge_touching([e for e in events if e["kind"] in ("vf", "vfl")]))


def _pct(num: float, den: float) -> str:
    return f"{100.0 * num / den:.1f}" if den else "-"


def vfdb_section(data: Path) -> list[Table]:
    """VF/VFL/asystole episodes of VFDB against events from the signal: per record (tuned or not), and per half by duration."""
    from _protocol import vfdb_status

    from ecgtrace.tools._rhythm_waves import WAVES_VERSION

    folder = data / "vfdb"
    names = sorted(p.stem for p in folder.glob("*.hea")) if folder.is_dir() else []
    per_record = Table(title="VFDB per record: expert VF|VFIB|VFL episodes vs vf/vfl events from the signal (tuned: 418-422 set wave detector v3 on; "
                      f"this is v{WAVES_VERSION})")
    for col in ("record", "split", "episodes found / ref", "events correct / all", "ref s", "event s", "overlap s", "duration Se %", "duration +P %"):
        per_record.add_column(col, justify="left" if col in ("record", "split") else "right")
    halves: dict[str, dict[str, dict[str, list[int]]]] = {"tuned": {}, "untuned": {}}
    seconds = {"tuned": np.zeros(3), "untuned": np.zeros(3)}
    for rec in names:
        status = vfdb_status(rec)
        scores, secs = vfdb_record_scores(folder / rec)
        for kind, rows in scores.items():
            acc = halves[status].setdefault(kind, {b: [0, 0, 0, 0] for b in BINS})
            for b in BINS:
                acc[b] = [x + y for x, y in zip(acc[b], rows[b])]
        seconds[status] += secs
        per_record.add_row(rec, status, *_vf_cells(scores["VF|VFIB|VFL"], secs))
    for status in ("tuned", "untuned"):
        if status in {vfdb_status(r) for r in names}:
            per_record.add_row(f"all {status}", status, *_vf_cells(halves[status]["VF|VFIB|VFL"], tuple(seconds[status])), style="bold")
    return [per_record, *(score_table(f"VFDB {status} half ({len([r for r in names if vfdb_status(r) == status])} records): "
                                      "expert VF/VFIB/VFL/ASYS/VT/NOISE intervals vs events from the signal", halves[status]) for status in ("tuned", "untuned") if halves[status])]


def _vf_cells(rows: dict[str, list[int]], secs: tuple[float, float, float]) -> list[str]:
    found, ref, correct, events = (sum(rows[b][i] for b in BINS) for i in range(4))
    ref_s, ev_s, both = secs
    return [f"{found} / {ref}", f"{correct} / {events}", f"{ref_s:.0f}", f"{ev_s:.0f}", f"{both:.0f}", _pct(both, ref_s), _pct(both, ev_s)]


#: Expert labels scored against events from the signal alone; a kind with no expert episode in a record still
#: counts its events against +P (MIT-BIH and CPSC label no AV block in these records: every such event is false).
SIGNAL_KINDS = {"blocked_pac": ("blocked_pac",), "BII": ("avb2_mobitz1", "avb2_mobitz2", "avb_2to1"), "BIII": ("avb3",),
                "NOD": ("junctional_rhythm",), "VFL": ("vfl", "vf"), "AFL": ("afl",), "junctional_escape": ("junctional_escape",),
                "ventricular_escape": ("ventricular_escape",), "IVR": ("ivr", "ventricular_escape_rhythm")}


def _signal_reference(ann: Any) -> list[dict[str, Any]]:
    ms = 1000.0 / ann.fs_hz
    out = [{"kind": iv["label"], "onset_ms": iv["onset_ms"], "offset_ms": iv["offset_ms"]} for iv in ann.rhythm_intervals if iv["label"] in SIGNAL_KINDS]
    x = (getattr(ann, "marks", {}) or {}).get("x")
    out += [{"kind": "blocked_pac", "onset_ms": float(t * ms), "offset_ms": float(t * ms)} for t in (x if x is not None else [])]
    return out + escape_points(ann)


def signal_section(paths: list[Path], title: str) -> Table:
    """Expert labels (``x`` as blocked_pac, BII, BIII, NOD, IVR, VFL, AFL, isolated ``j``/``E`` as escape beats) against events from the signal alone (detected beats, P waves, waves)."""
    from ecgtrace.tools.annotations import read_reference_annotations as read

    total: dict[str, dict[str, list[int]]] = {}
    for path in paths:
        if not Path(f"{path}.atr").exists():
            continue
        import wfdb

        ann = read(path, "atr", n_samples=int(wfdb.rdheader(str(path)).sig_len) + 1)
        events, _ = detected_events(path)
        scores = episode_scores(_signal_reference(ann), events, SIGNAL_KINDS)
        for kind, rows in scores.items():
            acc = total.setdefault(kind, {b: [0, 0, 0, 0] for b in BINS})
            for b in BINS:
                acc[b] = [x + y for x, y in zip(acc[b], rows[b])]
    return score_table(f"{title}: {len(paths)} records; expert labels vs events from the SIGNAL (point kinds within {POINT_TOL_MS:g} ms)", total)


def counts_line(events: list[dict[str, Any]]) -> str:
    c = collections.Counter(e["kind"] for e in events)
    return ", ".join(f"{k} {c[k]}" for k in VOCAB_KINDS if c[k])


__all__ = ["counts_line", "episode_scores", "merge_touching", "overlaps", "mitdb_section", "overlap_seconds", "score_table", "signal_section", "synthetic_section", "vfdb_record_scores",
           "vfdb_section"]
