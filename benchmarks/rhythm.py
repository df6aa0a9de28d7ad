"""Rhythm-event validation: synthetic schedule counts, MIT-BIH rhythm intervals, LTAFDB AF episodes.

Run from the repository root::

    nice -n 10 .venv/bin/python benchmarks/rhythm.py [--hours 24] [--seed 1] [--detected] [--signal-only]

Tables:

1. Synthetic Holter: event counts per kind from the ``.atr`` reference beat
   stream (and, with ``--detected``, from detected beats: the project's beat
   detector and classifier when present) against the schedule.
2. MIT-BIH (``../shared/data/mitdb``): rhythm events from the reference beats
   and classes against the expert rhythm intervals (AFIB/AFL -> af, VT -> vt,
   SVTA -> svt, B -> v_bigeminy, T -> v_trigeminy): interval Se (a reference
   interval overlapped by an event of the matching kind) and event +P (an event
   overlapping a reference interval of its label).
3. LTAFDB (24 h, 128 Hz, annotation-only): AF episodes from the reference beat
   stream vs the expert AFIB intervals, episode-level and duration-level Se/+P.
4. Holtercare's rhythm vocabulary (``benchmarks/_rhythm_vocab.py``): episode Se
   and +P by duration per event kind on the synthetic holtercare profile
   (reference and, with ``--detected``, signal), MIT-BIH expert escape beats and
   NOD/IVR/VFL/AFL intervals, and VFDB VF/VFL/asystole per record and per half, tuned 418-422 and untuned 423-428
   (``--no-vocab`` skips it; ``--vfdb-only`` prints only VFDB);
   with ``--detected`` also MIT-BIH DS1 (tuned), the DS2 records present and
   CPSC 2021 (untuned) from the signal alone: expert ``x`` (blocked PAC),
   ``(BII``/``(BIII``, ``(NOD``, ``(VFL``, ``(AFL``, ``j``/``E`` against events
   from detected beats, detected P waves and wave spans.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _rhythm_vocab as vocab  # noqa: E402

from ecgtrace.tools.af import detect_af, score_af_episodes
from ecgtrace.tools.annotations import read_reference_annotations
from ecgtrace.tools.rhythm import detect_events

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
LABEL_TO_KIND = {"AFIB": "af", "AFL": "af", "VT": "vt", "SVTA": "svt", "B": "v_bigeminy", "T": "v_trigeminy"}
MITDB_RECORDS = ("100 101 102 104 106 107 108 109 112 114 115 116 118 119 122 124 201 203 205 207 208 209 215 217 220 223 230").split()
LTAFDB_RECORDS = ("00", "01", "03", "05")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def match_beats(ref_samples: np.ndarray, det_samples: np.ndarray, tol: int) -> np.ndarray:
    """For each detected beat, the index of the reference beat within ``tol`` samples, or -1."""
    pos = np.searchsorted(ref_samples, det_samples)
    best = np.full(det_samples.size, -1, dtype=np.int64)
    dist = np.full(det_samples.size, np.inf)
    for cand in (pos - 1, pos):
        ok = (cand >= 0) & (cand < ref_samples.size)
        d = np.where(ok, np.abs(ref_samples[np.clip(cand, 0, ref_samples.size - 1)] - det_samples), np.inf)
        better = d < dist
        dist[better], best[better] = d[better], cand[better]
    best[dist > tol] = -1
    return best


def synthetic_counts(hours: float, seed: int, detected: bool) -> tuple[Table, dict[str, Any]]:
    from ecgtrace.tools.synth import synthesize_holter

    with tempfile.TemporaryDirectory() as tmp:
        synth = synthesize_holter(tmp, hours=hours, seed=seed)
        ref = read_reference_annotations(synth.record_path, "atr")
        columns: dict[str, dict[str, int]] = {}
        t0 = time.perf_counter()
        events = detect_events(ref.beat_samples, ref.beat_classes, ref.fs_hz, beat_source="reference")
        columns["reference beats"] = collections.Counter(e["kind"] for e in events)
        timing = {"reference_events_s": time.perf_counter() - t0}
        if detected:
            columns.update(_detected_columns(synth.record_path, ref, timing))
    sched = collections.Counter(e["kind"] for e in synth.schedule["events"])
    table = Table(title=f"synthetic Holter {hours:g} h seed {seed}: event counts vs schedule")
    table.add_column("kind")
    table.add_column("schedule", justify="right")
    for name in columns:
        table.add_column(name, justify="right")
    kinds = sorted(set(sched) | {k for c in columns.values() for k in c})
    exact = {name: 0 for name in columns}
    for kind in kinds:
        row = [kind, str(sched.get(kind, 0))]
        for name, counts in columns.items():
            ok = counts.get(kind, 0) == sched.get(kind, 0)
            exact[name] += ok
            row.append(f"{counts.get(kind, 0)}" + ("" if ok else " ✗"))
        table.add_row(*row)
    table.add_row("[bold]exact kinds", str(len(kinds)), *(f"{exact[n]}/{len(kinds)}" for n in columns))
    return table, {"schedule": dict(sched), **{n: dict(c) for n, c in columns.items()}, **timing}


def _detected_columns(record_path: Path, ref: Any, timing: dict[str, float]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    try:
        from ecgtrace.tools.beats import detect_beats
    except ImportError:
        return out
    t0 = time.perf_counter()
    table = detect_beats(record_path, chunk_s=600.0, overlap_s=5.0, workers=2)
    timing["detect_beats_s"] = time.perf_counter() - t0
    det = np.asarray(table.samples, dtype=np.int64)
    spans = [(int(a), int(b)) for a, b in table.artifact_spans]
    match = match_beats(ref.beat_samples, det, int(0.15 * ref.fs_hz))
    classes = np.where(match >= 0, ref.beat_classes[np.clip(match, 0, None)], "Q").astype("<U1")
    ev = detect_events(det, classes, ref.fs_hz, artifact_spans=spans, beat_source="detected")
    out["detected beats + ref classes"] = collections.Counter(e["kind"] for e in ev)
    try:
        from ecgtrace.tools.classify import classify_beats
    except ImportError:
        return out
    t0 = time.perf_counter()
    af1 = detect_af(det, ref.fs_hz)
    bc = classify_beats(record_path, det, ref.fs_hz, af_mask=af1.beat_mask, artifact_spans=spans)
    cls = np.asarray(bc.classes).astype("<U1")
    af2 = detect_af(det, ref.fs_hz, beat_classes=cls, p_wave_present=(bc.features or {}).get("p_wave_present"))
    ev = detect_events(det, cls, ref.fs_hz, af=af2, artifact_spans=spans, beat_source="detected")
    timing["classify_events_s"] = time.perf_counter() - t0
    out["detected beats + classes"] = collections.Counter(e["kind"] for e in ev)
    return out


def interval_agreement(events: list[dict[str, Any]], intervals: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per kind: reference intervals hit, reference intervals, events hitting, events."""
    stats: dict[str, dict[str, int]] = {}
    for label, kind in LABEL_TO_KIND.items():
        refs = [iv for iv in intervals if iv["label"] == label]
        s = stats.setdefault(kind, {"ref_hit": 0, "ref": 0, "det_hit": 0, "det": 0})
        s["ref"] += len(refs)
        s["ref_hit"] += sum(any(e["kind"] == kind and e["onset_sample"] <= iv["offset_sample"] and e["offset_sample"] >= iv["onset_sample"] for e in events) for iv in refs)
    for kind in set(LABEL_TO_KIND.values()):
        labels = [lab for lab, k in LABEL_TO_KIND.items() if k == kind]
        dets = [e for e in events if e["kind"] == kind]
        stats[kind]["det"] += len(dets)
        stats[kind]["det_hit"] += sum(any(iv["label"] in labels and e["onset_sample"] <= iv["offset_sample"] and e["offset_sample"] >= iv["onset_sample"] for iv in intervals) for e in dets)
    return stats


def mitdb_rhythm() -> tuple[Table, dict[str, Any]]:
    total: dict[str, dict[str, int]] = {}
    per_record = {}
    for rec in MITDB_RECORDS:
        path = DATA / "mitdb" / rec
        if not Path(f"{path}.atr").exists():
            continue
        ann = read_reference_annotations(path, "atr")
        events = detect_events(ann.beat_samples, ann.beat_classes, ann.fs_hz, beat_source="reference")
        stats = interval_agreement(events, ann.rhythm_intervals)
        per_record[rec] = stats
        for kind, s in stats.items():
            t = total.setdefault(kind, {"ref_hit": 0, "ref": 0, "det_hit": 0, "det": 0})
            for k, v in s.items():
                t[k] += v
    table = Table(title=f"MIT-BIH ({len(per_record)} records): events from reference beats vs rhythm intervals")
    for col in ("kind", "ref intervals", "Se %", "events", "+P %"):
        table.add_column(col, justify="right" if col != "kind" else "left")
    for kind, t in total.items():
        table.add_row(kind, str(t["ref"]), _pct(t["ref_hit"] / t["ref"] if t["ref"] else None), str(t["det"]), _pct(t["det_hit"] / t["det"] if t["det"] else None))
    return table, {"total": total, "per_record": per_record}


def ltafdb_af() -> tuple[Table, dict[str, Any]]:
    table = Table(title="LTAFDB: AF episodes from the reference beat stream (fs 128 Hz)")
    for col in ("record", "ref ep", "ref ep ≥30 s", "det ep", "ep Se %", "ep Se ≥30 s %", "ep +P %", "dur Se %", "dur +P %", "ref h", "det h", "time s"):
        table.add_column(col, justify="right")
    results = {}
    agg = {"reference_s": 0.0, "detected_s": 0.0, "overlap_s": 0.0, "ref": 0, "ref_hit": 0, "ref30": 0, "ref30_hit": 0, "det": 0, "det_hit": 0}
    for rec in LTAFDB_RECORDS:
        path = DATA / "ltafdb" / rec
        if not Path(f"{path}.atr").exists():
            continue
        ann = read_reference_annotations(path, "atr", fs_hz=128.0)
        t0 = time.perf_counter()
        af = detect_af(ann.beat_samples, ann.fs_hz, beat_classes=ann.beat_classes)
        dt = time.perf_counter() - t0
        ref = [iv for iv in ann.rhythm_intervals if iv["label"] in ("AFIB", "AFL")]
        s = score_af_episodes(af.episodes, ref)
        s30 = score_af_episodes(af.episodes, ref, min_reference_s=30.0)
        results[rec] = {"all": s, "min30": s30}
        for key in ("reference_s", "detected_s", "overlap_s"):
            agg[key] += s[key]
        agg["ref"] += s["n_reference"]
        agg["ref_hit"] += round((s["episode_se"] or 0) * s["n_reference"])
        agg["ref30"] += s30["n_reference"]
        agg["ref30_hit"] += round((s30["episode_se"] or 0) * s30["n_reference"])
        agg["det"] += s["n_detected"]
        agg["det_hit"] += round((s["episode_ppv"] or 0) * s["n_detected"])
        table.add_row(rec, str(s["n_reference"]), str(s30["n_reference"]), str(s["n_detected"]), _pct(s["episode_se"]), _pct(s30["episode_se"]), _pct(s["episode_ppv"]), _pct(s["duration_se"]), _pct(s["duration_ppv"]), f"{s['reference_s'] / 3600:.2f}", f"{s['detected_s'] / 3600:.2f}", f"{dt:.2f}")
    if agg["ref"]:
        gross = {
            "episode_se": agg["ref_hit"] / agg["ref"], "episode_se_30s": agg["ref30_hit"] / agg["ref30"] if agg["ref30"] else None,
            "episode_ppv": agg["det_hit"] / agg["det"] if agg["det"] else None,
            "duration_se": agg["overlap_s"] / agg["reference_s"], "duration_ppv": agg["overlap_s"] / agg["detected_s"] if agg["detected_s"] else None,
        }
        results["gross"] = gross
        table.add_row("[bold]gross", str(agg["ref"]), str(agg["ref30"]), str(agg["det"]), _pct(gross["episode_se"]), _pct(gross["episode_se_30s"]), _pct(gross["episode_ppv"]), _pct(gross["duration_se"]), _pct(gross["duration_ppv"]), f"{agg['reference_s'] / 3600:.2f}", f"{agg['detected_s'] / 3600:.2f}", "")
    return table, results


def af_detected_beats() -> Table:
    """AF from the project's detected beats: first pass (RR only) and second pass (classes + P waves)."""
    import wfdb

    from ecgtrace.tools.beats import detect_beats

    try:
        from ecgtrace.tools.classify import classify_beats
    except ImportError:
        classify_beats = None
    table = Table(title="AF duration Se/+P % on records with signals: reference beats (RR only) vs detected beats")
    for col in ("record", "ref beats", "det beats", "ref RR-only", "det RR-only (pass 1)", "det + classes + P (pass 2)"):
        table.add_column(col, justify="right")
    paths = [DATA / "mitdb" / r for r in ("201", "203")] + sorted(p.with_suffix("") for p in (DATA / "cpsc2021").glob("*.hea"))
    for path in paths:
        if not Path(f"{path}.hea").exists():
            continue
        # cpsc2021 puts an annotation on the sample just past the last one: allow it
        ann = read_reference_annotations(path, "atr", n_samples=int(wfdb.rdheader(str(path)).sig_len) + 1)
        det = detect_beats(path, workers=1).samples
        ref = [iv for iv in ann.rhythm_intervals if iv["label"] in ("AFIB", "AFL")]
        cells = []
        af1 = detect_af(det, ann.fs_hz)
        for episodes in (detect_af(ann.beat_samples, ann.fs_hz).episodes, af1.episodes):
            sc = score_af_episodes(episodes, ref)
            cells.append(f"{_pct(sc['duration_se'])} / {_pct(sc['duration_ppv'])}")
        if classify_beats is not None:
            bc = classify_beats(path, det, ann.fs_hz, af_mask=af1.beat_mask)
            af2 = detect_af(det, ann.fs_hz, beat_classes=bc.classes, p_wave_present=bc.features.get("p_wave_present"))
            sc = score_af_episodes(af2.episodes, ref)
            cells.append(f"{_pct(sc['duration_se'])} / {_pct(sc['duration_ppv'])}")
        else:
            cells.append("-")
        table.add_row(path.name, str(ann.beat_samples.size), str(det.size), *cells)
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--detected", action="store_true", help="also count events from detected beats (slow on 24 h)")
    parser.add_argument("--no-vocab", action="store_true", help="skip the Holtercare vocabulary section")
    parser.add_argument("--signal-only", action="store_true",
                        help="only the vocabulary tables from the signal: synthetic holtercare (tuned), MIT-BIH DS1 (tuned), DS2 present and CPSC 2021 (untuned)")
    parser.add_argument("--vfdb-only", action="store_true", help="only the VFDB tables (per record, tuned and untuned halves)")
    args = parser.parse_args(argv)
    console = Console(width=150)
    if args.vfdb_only:
        if not (DATA / "vfdb").is_dir():
            console.print(f"error: {DATA / 'vfdb'} not found")
            return 2
        for t in vocab.vfdb_section(DATA):
            console.print(t)
        return 0
    if args.signal_only:
        for t in (*vocab.synthetic_section(args.hours, args.seed, True), *_signal_tables()):
            console.print(t)
        return 0
    table, _ = synthetic_counts(args.hours, args.seed, args.detected)
    console.print(table)
    if not DATA.is_dir():
        console.print(f"[yellow]{DATA} not found: MIT-BIH, LTAFDB, VFDB tables skipped")
        return 0
    console.print(mitdb_rhythm()[0])
    console.print(ltafdb_af()[0])
    if args.detected:
        console.print(af_detected_beats())
    if not args.no_vocab:
        for t in vocab.synthetic_section(args.hours, args.seed, args.detected):
            console.print(t)
        console.print(vocab.mitdb_section(DATA, tuple(r for r in MITDB_RECORDS if r not in ("102", "104", "107", "217"))))
        for t in vocab.vfdb_section(DATA):
            console.print(t)
        if args.detected:
            for t in _signal_tables():
                console.print(t)
    return 0


def _signal_tables() -> list[Table]:
    """Expert labels vs events from the signal alone: MIT-BIH DS1 (tuned), the DS2 records present and CPSC 2021 (untuned)."""
    from _protocol import DS1_RECORDS, mitdb_status

    shared = sorted(p.stem for p in (DATA / "mitdb").glob("*.hea"))
    ds1 = [DATA / "mitdb" / r for r in shared if r in DS1_RECORDS]
    ds2 = [DATA / "mitdb" / r for r in shared if mitdb_status(r).startswith("DS2")]
    return [vocab.signal_section(ds1, "MIT-BIH DS1 (TUNED)"),
            vocab.signal_section(ds2, f"MIT-BIH DS2 present ({', '.join(p.name for p in ds2)}; untuned)"),
            vocab.signal_section(sorted(p.with_suffix("") for p in (DATA / "cpsc2021").glob("*.hea")), "CPSC 2021 (untuned)")]


if __name__ == "__main__":
    sys.exit(main())
