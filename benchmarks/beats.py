"""Beat detection benchmark: ecgtrace and PyPI peer detectors on the same records, in one run.

Usage::

    nice -n 10 .venv/bin/python benchmarks/beats.py                       # every group, default peers
    .venv/bin/python benchmarks/beats.py --groups ds2,svdb --peers sleepecg,gqrs
    .venv/bin/python benchmarks/beats.py --cache /tmp/beats-cache         # reuse peer detections of an earlier run

Protocol (``benchmarks/_protocol.py``): groups are MIT-BIH DS1 (tuned), the
paced MIT-BIH records (tuned), the DS2 records present (100, flagged ``DS2*``),
QTDB records with ``.atr`` beats (untuned unless cut from a shared MIT-BIH
record), SVDB 800 (128 Hz, untuned), CPSC 2021 (200 Hz, paroxysmal AF,
untuned), VFDB (rhythm labels only: beats claimed inside VF/VFL/asystole and
in organised rhythm) and the synthetic record.
A combination row, ``vote(ecgtrace,pantompkins,sleepecg)`` (2 of 3 within
100 ms), is scored beside the detectors whenever its members ran.
Every row says ``tuned`` or ``untuned``; the ``untuned gross`` pools DS2,
QTDB-untuned, SVDB and CPSC 2021 (the issue-14 target: F1 >= 99.75%), and
``strict untuned`` leaves out the DS2* records and those examined for detection (``examined``, sel232).

Matching is EC57-style: a detected beat matches a reference beat within
+-150 ms (``wfdb.processing.compare_annotations``) over the whole record (no
learning period). Jitter is the median |detected - reference| (ms) of all
matched beats of a group. Costs: ``ecgtrace`` is :func:`detect_beats_array` on
the record in memory, all leads (``stream`` is :func:`detect_beats` on the
record path, 2 workers, and must give the same beats); every peer runs in
memory on the first usable lead (they are single-lead detectors) and its
import time is not counted. ``x nk`` is a detector's time over neurokit2's
default (``nk-neurokit``) on the same records.

The synthetic-noise section builds the 24 h synthetic Holter (seeds
``--noise-seeds``) and prints, per scheduled electrode-motion burst, the share
covered by artifact spans, false beats inside it and missed beats elsewhere.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _beat_match import TOLERANCE_MS, match_beats, rates as _rates  # noqa: E402
from _beats_noise import synthetic_noise_section  # noqa: E402
from _peers import PEERS, peer_names, run_peer  # noqa: E402
from _protocol import DS1_RECORDS, DS2_RECORDS, PACED_RECORDS, mitdb_status, qtdb_detection_status  # noqa: E402

from ecgtrace.tools.annotations import read_reference_annotations  # noqa: E402
from ecgtrace.tools.beats import DetectorParams, detect_beats, detect_beats_array  # noqa: E402
from ecgtrace.tools.records import open_record, read_samples  # noqa: E402

OURS = "ecgtrace"
NK_DEFAULT = "nk-neurokit"
GROUPS = ("ds1", "paced", "ds2", "qtdb", "svdb", "cpsc2021", "vfdb", "synth")
#: VFDB rhythm labels in which no discrete QRS exists to detect.
VFDB_NO_QRS = ("VF", "VFL", "ASYS", "NOISE")



@dataclass
class RecordResult:
    """One record: reference beats and, per detector, its beats and seconds."""

    name: str
    status: str
    fs_hz: float
    n_samples: int
    ref: np.ndarray
    found: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    stream_s: float = float("nan")
    same_as_array: bool = True
    artifact_s: float = 0.0
    rhythm: list[dict[str, Any]] = field(default_factory=list)

    @property
    def minutes(self) -> float:
        return self.n_samples / self.fs_hz / 60.0

    def score(self, detector: str) -> dict[str, Any]:
        return match_beats(self.ref, self.found[detector], self.fs_hz)


def _cache_file(cache: Path | None, group: str, name: str) -> Path | None:
    return None if cache is None else cache / f"{group}-{name}.npz"


def _load_cache(path: Path | None) -> dict[str, Any]:
    if path is None or not path.exists():
        return {}
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def evaluate_record(path: Path, name: str, status: str, group: str, detectors: list[str], *, cache: Path | None = None,
                    params: DetectorParams | None = None, stream: bool = True) -> RecordResult:
    """Run ecgtrace and every peer in ``detectors`` on one record (peers from ``cache`` when it has them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = open_record(path)
    ann = read_reference_annotations(info.path)
    signal = read_samples(info, 0, info.n_samples).signal_mv
    res = RecordResult(name, status, info.fs_hz, info.n_samples, ann.beat_samples, rhythm=list(ann.rhythm_intervals))
    t0 = time.perf_counter()
    table = detect_beats_array(signal, info.fs_hz, lead_names=info.leads, params=params)
    res.seconds[OURS], res.found[OURS] = time.perf_counter() - t0, table.samples
    res.artifact_s = sum(b - a for a, b in table.artifact_spans) / info.fs_hz
    if stream:
        t0 = time.perf_counter()
        streamed = detect_beats(info, workers=2, params=params)
        res.stream_s = time.perf_counter() - t0
        res.same_as_array = bool(np.array_equal(streamed.samples, table.samples))
    lead = int(np.argmax([lead not in info.unusable_leads for lead in info.leads]))
    cache_path = _cache_file(cache, group, name)
    cached = _load_cache(cache_path)
    for det in detectors:
        if det in cached:
            res.found[det], res.seconds[det] = cached[det].astype(np.int64), float(cached[f"{det}__s"])
            continue
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                found = run_peer(det, signal[:, lead], info.fs_hz)
            except Exception as exc:  # a peer that fails on a record counts as finding nothing there
                print(f"  {name}: {det} failed ({type(exc).__name__}: {exc}); counted as no beats", file=sys.stderr)
                found = np.zeros(0, np.int64)
        res.seconds[det], res.found[det] = time.perf_counter() - t0, found
        cached[det], cached[f"{det}__s"] = found, np.float64(res.seconds[det])
    if cache_path is not None:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache_path, **{k: v for k, v in cached.items() if k in PEERS or k.split("__")[0] in PEERS})
    add_vote(res)
    return res


#: Multi-detector vote shown beside the detectors: a beat where at least 2 of these 3 agree within VOTE_TOL_MS
#: (at ecgtrace's position when it has one). Not adopted by default: it loses F1 on the tuned DS1 records.
VOTE_MEMBERS = (OURS, "nk-pantompkins1985", "sleepecg")
VOTE = "vote(ecgtrace,pantompkins,sleepecg)"
VOTE_TOL_MS = 100.0


def vote_beats(lists: list[np.ndarray], fs_hz: float, need: int = 2, tol_ms: float = VOTE_TOL_MS) -> np.ndarray:
    """Beats that ``need`` of the detectors in ``lists`` agree on (clusters within ``tol_ms``); the first list's position wins."""
    if not lists:
        return np.zeros(0, np.int64)
    pos = np.concatenate(lists).astype(np.int64)
    who = np.concatenate([np.full(a.size, k) for k, a in enumerate(lists)])
    order = np.argsort(pos, kind="stable")
    pos, who = pos[order], who[order]
    out: list[int] = []
    tol = tol_ms * fs_hz / 1000.0
    i = 0
    while i < pos.size:
        j = i
        while j + 1 < pos.size and pos[j + 1] - pos[i] <= tol:
            j += 1
        members = who[i : j + 1]
        if np.unique(members).size >= need:
            first = pos[i : j + 1][members == 0]
            out.append(int(first[0]) if first.size else int(np.median(pos[i : j + 1])))
        i = j + 1
    return np.asarray(out, dtype=np.int64)


def add_vote(res: RecordResult) -> None:
    """Add the :data:`VOTE` row to a record when all its members ran (cost: the members' seconds together)."""
    if all(m in res.found for m in VOTE_MEMBERS):
        res.found[VOTE] = vote_beats([res.found[m] for m in VOTE_MEMBERS], res.fs_hz)
        res.seconds[VOTE] = sum(res.seconds[m] for m in VOTE_MEMBERS)


def gross(results: list[RecordResult], detector: str) -> dict[str, Any]:
    """Pooled counts, rates, jitter (median |error| of all matched beats, ms) and seconds of one detector."""
    scores = [r.score(detector) for r in results if detector in r.found]
    counts = {k: sum(s[k] for s in scores) for k in ("tp", "fp", "fn")}
    errs = np.concatenate([s["abs_err_ms"] for s in scores]) if scores else np.zeros(0)
    return {**counts, **_rates(**counts), "jitter_ms": float(np.median(errs)) if errs.size else float("nan"),
            "seconds": sum(r.seconds.get(detector, 0.0) for r in results), "minutes": sum(r.minutes for r in results)}


def _pct(value: float) -> str:
    return "-" if value != value else f"{100 * value:.2f}"


def print_records(results: list[RecordResult], console: Console, title: str) -> None:
    """ecgtrace per record, with the best peer's F1 on that record for comparison."""
    t = Table(title=title)
    for col in ("record", "status", "beats", "TP", "FP", "FN", "Se %", "+P %", "F1 %", "jitter ms", "art s", "s/min", "stream s/min", "=array", "best peer F1 %"):
        t.add_column(col, justify="right")
    for r in results:
        s = r.score(OURS)
        rates = _rates(s["tp"], s["fp"], s["fn"])
        peers = {d: _rates(**{k: v for k, v in r.score(d).items() if k != "abs_err_ms"})["f1"] for d in r.found if d not in (OURS, VOTE)}
        best = max(peers, key=lambda d: peers[d]) if peers else None
        t.add_row(r.name, r.status, str(r.ref.size), str(s["tp"]), str(s["fp"]), str(s["fn"]), _pct(rates["se"]), _pct(rates["ppv"]), _pct(rates["f1"]),
                  f"{np.median(s['abs_err_ms']):.1f}" if s["abs_err_ms"].size else "-", f"{r.artifact_s:.0f}", f"{r.seconds[OURS] / r.minutes:.4f}",
                  f"{r.stream_s / r.minutes:.4f}" if r.stream_s == r.stream_s else "-", "yes" if r.same_as_array else "NO",
                  f"{_pct(peers[best])} {best}" if best else "-")
    console.print(t)


def print_detectors(results: list[RecordResult], console: Console, title: str) -> dict[str, dict[str, Any]]:
    """One row per detector: gross Se, +P, F1, jitter, s/min and cost against neurokit2's default."""
    detectors = [d for d in results[0].found] if results else []
    totals = {d: gross(results, d) for d in detectors}
    nk_s = totals.get(NK_DEFAULT, {}).get("seconds", float("nan"))
    t = Table(title=title)
    for col in ("detector", "version", "FP", "FN", "Se %", "+P %", "F1 %", "jitter ms", "s/min", "x nk"):
        t.add_column(col, justify="right")
    for d in sorted(detectors, key=lambda d: (d != OURS, -np.nan_to_num(totals[d]["f1"]))):
        g = totals[d]
        version = PEERS[d].version() if d in PEERS else ("combination" if d == VOTE else "this branch")
        t.add_row(d, version, str(g["fp"]), str(g["fn"]), _pct(g["se"]), _pct(g["ppv"]), _pct(g["f1"]), f"{g['jitter_ms']:.1f}",
                  f"{g['seconds'] / max(g['minutes'], 1e-9):.4f}", f"{g['seconds'] / nk_s:.2f}" if nk_s == nk_s and nk_s > 0 else "-",
                  style="bold" if d == OURS else None)
    console.print(t)
    return totals


def _mitdb_records(args: argparse.Namespace, group: str) -> list[tuple[Path, str, str]]:
    mitdb = Path(args.data) / "mitdb"
    names = {"ds1": DS1_RECORDS, "paced": PACED_RECORDS, "ds2": DS2_RECORDS}[group]
    chosen = [n for n in names if (mitdb / f"{n}.hea").exists() and (not args.records or n in args.records)]
    return [(mitdb / n, n, mitdb_status(n)) for n in chosen]


def _qtdb_records(args: argparse.Namespace) -> list[tuple[Path, str, str]]:
    qtdb = Path(args.data) / "qtdb"
    names = sorted(p.stem for p in qtdb.glob("*.atr")) if qtdb.is_dir() else []
    return [(qtdb / n, n, qtdb_detection_status(n)) for n in names if not args.records or n in args.records]


def group_records(args: argparse.Namespace, group: str) -> list[tuple[Path, str, str]]:
    """(record path, name, status) of one protocol group, as far as ../shared/data holds it."""
    if group in ("ds1", "paced", "ds2"):
        return _mitdb_records(args, group)
    if group == "qtdb":
        return _qtdb_records(args)
    folder = Path(args.data) / group
    names = sorted(p.stem for p in folder.glob("*.hea")) if folder.is_dir() else []
    return [(folder / n, n, "untuned") for n in names if not args.records or n in args.records]


GROUP_TITLES = {"ds1": "MIT-BIH DS1 (tuned)", "paced": "MIT-BIH paced records (tuned)", "ds2": "MIT-BIH DS2 present (DS2*: record 100)",
                "qtdb": "QTDB records with .atr beats (250 Hz)", "svdb": "SVDB (128 Hz, untuned)",
                "cpsc2021": "CPSC 2021 (200 Hz, paroxysmal AF, untuned)"}


def run_group(args: argparse.Namespace, console: Console, group: str, detectors: list[str]) -> list[RecordResult]:
    records = group_records(args, group)
    if not records:
        console.print(f"[yellow]{group}: no records under {args.data}; skipped[/yellow]")
        return []
    results = []
    for path, name, status in records:
        results.append(evaluate_record(path, name, status, group, detectors, cache=args.cache, stream=not args.no_stream))
        s = results[-1].score(OURS)
        console.print(f"  {group} {name}: ecgtrace F1 {_pct(_rates(s['tp'], s['fp'], s['fn'])['f1'])}%", highlight=False)
    print_records(results, console, f"{GROUP_TITLES[group]}: ecgtrace per record, +-{TOLERANCE_MS:.0f} ms")
    print_detectors(results, console, f"{GROUP_TITLES[group]}: every detector, same records, same run")
    if group == "qtdb":
        for label, keep in (("QTDB untuned (and examined: _protocol.DETECTION_EXAMINED)", ("untuned", "examined")),
                            ("QTDB tuned (excerpts of shared MIT-BIH records)", ("tuned", "DS2*"))):
            part = [r for r in results if r.status in keep]
            if part:
                print_detectors(part, console, f"{label}: {len(part)} records")
    return results


def vfdb_section(args: argparse.Namespace, console: Console, detectors: list[str]) -> None:
    """VFDB has rhythm labels only: beats each detector claims inside VF/VFL/asystole/noise, and its rate in organised rhythm."""
    records = group_records(args, "vfdb")
    if not records:
        console.print("[yellow]vfdb: not found; skipped[/yellow]")
        return
    rows: dict[str, dict[str, float]] = {}
    no_qrs_min = rhythm_min = 0.0
    for path, name, _ in records:
        r = evaluate_record(path, name, "untuned", "vfdb", detectors, cache=args.cache, stream=False)
        spans = [(iv["onset_sample"], iv["offset_sample"]) for iv in r.rhythm if any(iv["label"].startswith(x) for x in VFDB_NO_QRS)]
        inside = lambda s: np.any([(s >= a) & (s < b) for a, b in spans], axis=0) if spans else np.zeros(s.size, bool)  # noqa: E731
        span_min = sum(b - a for a, b in spans) / r.fs_hz / 60.0
        no_qrs_min += span_min
        rhythm_min += r.minutes - span_min
        for det, found in r.found.items():
            row = rows.setdefault(det, {"in_no_qrs": 0.0, "in_rhythm": 0.0, "seconds": 0.0})
            n_in = int(np.count_nonzero(inside(found)))
            row["in_no_qrs"] += n_in
            row["in_rhythm"] += found.size - n_in
            row["seconds"] += r.seconds[det]
    t = Table(title=f"VFDB ({len(records)} records, untuned; rhythm labels only, no beat reference): {no_qrs_min:.1f} min of VF/VFL/ASYS/NOISE, {rhythm_min:.1f} min of organised rhythm")
    for col in ("detector", "beats/min in VF/VFL/ASYS/NOISE", "beats/min elsewhere", "s/min"):
        t.add_column(col, justify="right")
    for det, row in rows.items():
        t.add_row(det, f"{row['in_no_qrs'] / max(no_qrs_min, 1e-9):.1f}", f"{row['in_rhythm'] / max(rhythm_min, 1e-9):.1f}", f"{row['seconds'] / (no_qrs_min + rhythm_min):.4f}")
    console.print(t)
    console.print("(beats claimed inside VF/VFL/asystole/noise are not QRS complexes; fewer is better there. ecgtrace leaves most of them in artifact spans.)")


def synthetic_section(args: argparse.Namespace, console: Console, detectors: list[str]) -> list[RecordResult]:
    """All detectors on the synthetic Holter (tools/synth.py) against its own .atr."""
    from ecgtrace.tools.synth import synthesize_holter

    with tempfile.TemporaryDirectory(prefix="ecgtrace-beats-") as tmp:
        result = synthesize_holter(tmp, name="holter", hours=args.synth_hours, fs_hz=250.0, n_leads=3, seed=7)
        rows = [evaluate_record(Path(result.record_path), "synth", "untuned", "synth", detectors, stream=not args.no_stream)]
    print_records(rows, console, f"Synthetic Holter ({args.synth_hours:g} h, 3 leads, 250 Hz, seed 7)")
    print_detectors(rows, console, "Synthetic Holter: every detector")
    return rows


def summary(by_group: dict[str, list[RecordResult]], console: Console) -> None:
    """F1 of every detector in every group, the untuned gross (the target) and the cost against neurokit2."""
    untuned = [r for g in ("ds2", "qtdb", "svdb", "cpsc2021") for r in by_group.get(g, []) if r.status in ("untuned", "DS2*", "examined")]
    strict = [r for r in untuned if r.status == "untuned"]
    tuned = [r for g in ("ds1", "paced") for r in by_group.get(g, [])] + [r for r in by_group.get("qtdb", []) if r.status == "tuned"]
    columns = [("tuned: DS1+paced+QTDB-tuned", tuned), ("DS2*: 100", by_group.get("ds2", [])),
               ("QTDB untuned", [r for r in by_group.get("qtdb", []) if r.status in ("untuned", "examined")]), ("SVDB 800", by_group.get("svdb", [])),
               ("CPSC 2021", by_group.get("cpsc2021", [])), ("synthetic", by_group.get("synth", [])), ("UNTUNED gross", untuned), ("strict untuned", strict)]
    columns = [(c, rs) for c, rs in columns if rs]
    if not columns:
        return
    detectors = list(columns[0][1][0].found)
    t = Table(title="Summary: gross F1 % (jitter ms) per detector and group; target F1 >= 99.75 on UNTUNED at <= 2x nk-neurokit's cost")
    for col in ("detector", *[c for c, _ in columns], "untuned x nk"):
        t.add_column(col, justify="right")
    nk = gross(untuned, NK_DEFAULT)["seconds"] if untuned and NK_DEFAULT in untuned[0].found else float("nan")
    for d in detectors:
        cells = []
        for _, rs in columns:
            g = gross(rs, d)
            cells.append(f"{_pct(g['f1'])} ({g['jitter_ms']:.0f})")
        ratio = gross(untuned, d)["seconds"] / nk if untuned and nk == nk and nk > 0 else float("nan")
        t.add_row(d, *cells, f"{ratio:.2f}" if ratio == ratio else "-", style="bold" if d == OURS else None)
    console.print(t)


#: Sections run in order after the detection groups.
EXTRA_SECTIONS: list[Callable[[argparse.Namespace, Console], None]] = []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", default=",".join(GROUPS), help=f"comma-separated groups of {', '.join(GROUPS)}")
    parser.add_argument("--records", default="", help="comma-separated record names to keep (default: all of each group)")
    parser.add_argument("--peers", default="default", help="peer detectors: default, all, none or a comma-separated list of " + ", ".join(PEERS))
    parser.add_argument("--cache", type=Path, default=None, help="folder that keeps peer detections between runs (ecgtrace always runs)")
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"), help="shared data folder")
    parser.add_argument("--no-stream", action="store_true", help="skip the streamed (detect_beats) run of ecgtrace")
    parser.add_argument("--synth-hours", type=float, default=0.5, help="length of the synthetic record (hours)")
    parser.add_argument("--noise-seeds", default="", help="seeds of the 24 h synthetic noise-burst section (e.g. 1,0; empty: skip)")
    parser.add_argument("--noise-hours", type=float, default=24.0, help="length of the noise-burst records (hours)")
    parser.add_argument("--min-cover", type=float, default=0.8, help="share of a burst an artifact span must cover")
    parser.add_argument("--no-before", action="store_true", help="noise section: skip the rows with the excursion index off")
    args = parser.parse_args(argv)
    args.records = {r.strip() for r in args.records.split(",") if r.strip()}
    detectors = [] if args.peers.strip() in ("", "none") else peer_names(args.peers)
    if detectors:
        import neurokit2  # noqa: F401  (import cost kept out of the timings)
    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        parser.error(f"unknown group(s) {', '.join(unknown)}; known: {', '.join(GROUPS)}")
    console = Console(width=None if sys.stdout.isatty() else 200)
    console.print("detectors: ecgtrace (this branch) + " + (", ".join(f"{d} {PEERS[d].version()}" for d in detectors) or "no peers"), highlight=False)
    by_group: dict[str, list[RecordResult]] = {}
    for group in groups:
        if group == "vfdb":
            vfdb_section(args, console, detectors)
        elif group == "synth":
            by_group[group] = synthetic_section(args, console, detectors)
        else:
            by_group[group] = run_group(args, console, group, detectors)
    summary(by_group, console)
    if args.noise_seeds.strip():
        synthetic_noise_section(args, console)
    for section in EXTRA_SECTIONS:
        section(args, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
