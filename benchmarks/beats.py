"""Beat detection benchmark: ecgtrace.tools.beats against MIT-BIH .atr beats and the synthetic Holter.

Usage::

    .venv/bin/python benchmarks/beats.py [--records 100,101] [--data ../shared/data] [--no-synth]

Matching is EC57-style: a detected beat matches a reference beat within
+-150 ms (``wfdb.processing.compare_annotations``), over the whole record (no
learning period, no VF exclusion). Reported per record and gross: Se, +P, F1,
median |timing error| of matched beats, and seconds per signal-minute.

Two costs are shown for ecgtrace: ``algo`` runs :func:`detect_beats_array` on the
record already in memory (the same basis as the neurokit2 baseline, which
cleans and detects an in-memory first lead); ``stream`` is the production path,
:func:`detect_beats` on the record path (reading, 600 s chunks, 2 workers).
The neurokit2 baseline is ``nk.ecg_clean`` + ``nk.ecg_findpeaks`` on the first
lead with ``sampling_rate`` passed; its import time is not counted.

MIT-BIH rows are printed twice in one run: with the defaults ("after") and with
the low-frequency excursion index off (``NO_EXCURSION``, the version-1 rule,
"before"); ``--no-before`` skips the second. The synthetic-noise section builds
the 24 h synthetic Holter (seeds ``--noise-seeds``, default 1 and 0) and prints,
per scheduled electrode-motion burst, the share covered by artifact spans
(covered: >= ``--min-cover``), reference/detected/false beats inside it; then
bursts covered, false beats in bursts, missed beats outside bursts and any
artifact span on another scheduled event (pause, VT, AF, tachycardia ...).

Reusable pieces: :func:`evaluate_detection` (one record -> plain dict),
:func:`gross` and :func:`print_detection_table`. Further sections (beat
classification from tools/classify.py) go in :data:`EXTRA_SECTIONS`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from ecgtrace.tools.annotations import read_reference_annotations
from ecgtrace.tools.beats import DetectorParams, detect_beats, detect_beats_array
from ecgtrace.tools.records import open_record, read_samples

MITDB_RECORDS = (
    "100 101 102 104 106 107 108 109 112 114 115 116 118 119 122 124 201 203 205 207 208 209 215 217 220 223 230".split()
)
TOLERANCE_MS = 150.0


def match_beats(ref_samples: np.ndarray, test_samples: np.ndarray, fs_hz: float, tolerance_ms: float = TOLERANCE_MS) -> dict[str, Any]:
    """EC57-style beat matching (wfdb ``compare_annotations``): counts and timing errors in ms."""
    from wfdb import processing

    cmp = processing.compare_annotations(np.asarray(ref_samples), np.asarray(test_samples), int(tolerance_ms * fs_hz / 1000.0))
    matched = cmp.matching_sample_nums >= 0
    err_ms = (np.asarray(test_samples)[cmp.matching_sample_nums[matched]] - np.asarray(ref_samples)[matched]) * 1000.0 / fs_hz
    return {"tp": int(cmp.tp), "fp": int(cmp.fp), "fn": int(cmp.fn), "abs_err_ms": np.abs(err_ms)}


def _rates(tp: int, fp: int, fn: int) -> dict[str, float]:
    se = tp / (tp + fn) if tp + fn else float("nan")
    ppv = tp / (tp + fp) if tp + fp else float("nan")
    f1 = 2 * se * ppv / (se + ppv) if se + ppv else float("nan")
    return {"se": se, "ppv": ppv, "f1": f1}


def _neurokit_first_lead(trace_mv: np.ndarray, fs_hz: float) -> np.ndarray:
    import neurokit2 as nk

    cleaned = nk.ecg_clean(trace_mv, sampling_rate=fs_hz)
    return np.asarray(nk.ecg_findpeaks(cleaned, sampling_rate=fs_hz)["ECG_R_Peaks"], dtype=np.int64)


#: DetectorParams with the low-frequency excursion index switched off (the version-1 artifact rule), for before/after rows.
NO_EXCURSION = DetectorParams(lf_quiet_bad=0.0)


def evaluate_detection(record_name: str, data_dir: str | Path, *, baseline: bool = True, workers: int = 2, record_path: str | Path | None = None, params: DetectorParams | None = None) -> dict[str, Any]:
    """Detect beats in one record and score them against its ``.atr`` beats.

    Args:
        record_name: MIT-BIH record name (``"100"``), looked up as ``data_dir/mitdb/<name>``.
        data_dir: The shared data folder (``../shared/data``).
        baseline: Also run the neurokit2 baseline on the first lead.
        workers: Worker processes for the streamed detection.
        record_path: Use this record base path instead (e.g. a synthetic record).
        params: Detector settings (default :class:`DetectorParams`).

    Returns:
        Plain dict: counts (``tp fp fn``), rates (``se ppv f1``), ``median_err_ms``,
        ``signal_min``, ``algo_s``, ``stream_s``, ``same_as_array`` and, with
        ``baseline``, the same under ``nk_*`` keys.
    """
    path = Path(record_path) if record_path is not None else Path(data_dir) / "mitdb" / record_name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = open_record(path)
    ref = read_reference_annotations(info.path)
    signal = read_samples(info, 0, info.n_samples).signal_mv
    t0 = time.perf_counter()
    table_array = detect_beats_array(signal, info.fs_hz, lead_names=info.leads, params=params)
    algo_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    table = detect_beats(info, workers=workers, params=params)
    stream_s = time.perf_counter() - t0
    m = match_beats(ref.beat_samples, table.samples, info.fs_hz)
    row: dict[str, Any] = {
        "record": record_name,
        "n_ref": int(ref.beat_samples.size),
        "n_det": table.n_beats,
        **{k: m[k] for k in ("tp", "fp", "fn")},
        **_rates(m["tp"], m["fp"], m["fn"]),
        "median_err_ms": float(np.median(m["abs_err_ms"])) if m["abs_err_ms"].size else float("nan"),
        "signal_min": info.n_samples / info.fs_hz / 60.0,
        "algo_s": algo_s,
        "stream_s": stream_s,
        "same_as_array": bool(np.array_equal(table.samples, table_array.samples)),
        "artifact_s": sum(b - a for a, b in table.artifact_spans) / info.fs_hz,
    }
    if baseline:
        lead = int(np.argmax([lead not in info.unusable_leads for lead in info.leads]))
        t0 = time.perf_counter()
        peaks = _neurokit_first_lead(signal[:, lead].astype(np.float64), info.fs_hz)
        row["nk_s"] = time.perf_counter() - t0
        nk = match_beats(ref.beat_samples, peaks, info.fs_hz)
        row.update({f"nk_{k}": nk[k] for k in ("tp", "fp", "fn")})
        row.update({f"nk_{k}": v for k, v in _rates(nk["tp"], nk["fp"], nk["fn"]).items()})
    return row


def gross(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Gross (pooled) totals of :func:`evaluate_detection` rows."""
    out: dict[str, Any] = {"record": "gross", "n_ref": sum(r["n_ref"] for r in rows), "n_det": sum(r["n_det"] for r in rows)}
    for prefix in ("", "nk_"):
        if rows and f"{prefix}tp" in rows[0]:
            counts = {k: sum(r[f"{prefix}{k}"] for r in rows) for k in ("tp", "fp", "fn")}
            out.update({f"{prefix}{k}": v for k, v in counts.items()})
            out.update({f"{prefix}{k}": v for k, v in _rates(**counts).items()})
    for key in ("signal_min", "algo_s", "stream_s", "nk_s", "artifact_s"):
        if rows and key in rows[0]:
            out[key] = sum(r[key] for r in rows)
    out["median_err_ms"] = float(np.median([r["median_err_ms"] for r in rows])) if rows else float("nan")
    out["same_as_array"] = all(r["same_as_array"] for r in rows)
    return out


def _pct(value: float) -> str:
    return "-" if value != value else f"{100 * value:.2f}"


def print_detection_table(rows: list[dict[str, Any]], console: Console, title: str) -> dict[str, Any]:
    """Print per-record rows and the gross line; returns the gross dict."""
    total = gross(rows)
    has_nk = bool(rows) and "nk_tp" in rows[0]
    table = Table(title=title, show_lines=False)
    for col in ("record", "beats", "TP", "FP", "FN", "Se %", "+P %", "F1 %", "|err| ms", "art s", "algo s/min", "stream s/min", "=array"):
        table.add_column(col, justify="right")
    if has_nk:
        for col in ("nk FP", "nk FN", "nk F1 %", "nk s/min"):
            table.add_column(col, justify="right", style="dim")
    for r in [*rows, total]:
        minutes = r["signal_min"]
        cells = [
            str(r["record"]),
            str(r["n_ref"]),
            str(r["tp"]),
            str(r["fp"]),
            str(r["fn"]),
            _pct(r["se"]),
            _pct(r["ppv"]),
            _pct(r["f1"]),
            f"{r['median_err_ms']:.1f}",
            f"{r['artifact_s']:.0f}",
            f"{r['algo_s'] / minutes:.4f}",
            f"{r['stream_s'] / minutes:.4f}",
            "yes" if r["same_as_array"] else "NO",
        ]
        if has_nk:
            cells += [str(r["nk_fp"]), str(r["nk_fn"]), _pct(r["nk_f1"]), f"{r['nk_s'] / minutes:.4f}"]
        table.add_row(*cells, style="bold" if r is total else None)
    console.print(table)
    line = (
        f"gross: Se {_pct(total['se'])}%  +P {_pct(total['ppv'])}%  F1 {_pct(total['f1'])}%  "
        f"algo {total['algo_s'] / total['signal_min']:.4f} s/min  stream {total['stream_s'] / total['signal_min']:.4f} s/min"
    )
    if has_nk:
        ratio = total["algo_s"] / total["nk_s"] if total["nk_s"] else float("nan")
        line += (
            f"\nneurokit2: Se {_pct(total['nk_se'])}%  +P {_pct(total['nk_ppv'])}%  F1 {_pct(total['nk_f1'])}%  "
            f"{total['nk_s'] / total['signal_min']:.4f} s/min  -> cost ratio ecgtrace/neurokit2 {ratio:.2f}x (algo)"
        )
    console.print(line)
    return total


def synthetic_section(args: argparse.Namespace, console: Console) -> None:
    """Beats on the synthetic Holter (tools/synth.py) against its own .atr, when the generator exists."""
    try:
        from ecgtrace.tools.synth import synthesize_holter
    except ImportError:
        console.print("[yellow]synthetic: ecgtrace.tools.synth not available yet; skipped[/yellow]")
        return
    with tempfile.TemporaryDirectory(prefix="ecgtrace-beats-") as tmp:
        t0 = time.perf_counter()
        result = synthesize_holter(tmp, name="holter", hours=args.synth_hours, fs_hz=250.0, n_leads=3, seed=7)
        console.print(f"synthetic: generated {args.synth_hours:g} h in {time.perf_counter() - t0:.1f} s")
        row = evaluate_detection("synth", args.data, baseline=not args.no_baseline, record_path=result.record_path)
        print_detection_table([row], console, f"Synthetic Holter ({args.synth_hours:g} h, 3 leads, 250 Hz, seed 7) vs its .atr, +-150 ms")


def mitdb_section(args: argparse.Namespace, console: Console) -> None:
    records = [r.strip() for r in args.records.split(",") if r.strip()] if args.records else list(MITDB_RECORDS)
    mitdb = Path(args.data) / "mitdb"
    if not mitdb.is_dir():
        console.print(f"[yellow]MIT-BIH: {mitdb} not found; skipped[/yellow]")
        return
    if not args.no_baseline:
        import neurokit2  # noqa: F401  (import cost kept out of the timings)
    variants = [("", None)] + ([] if args.no_before else [(" - before (excursion index off)", NO_EXCURSION)])
    for label, params in variants:
        rows = []
        for name in records:
            rows.append(evaluate_detection(name, args.data, baseline=not args.no_baseline, params=params))
            console.print(f"  {name}: F1 {_pct(rows[-1]['f1'])}%  artifact {rows[-1]['artifact_s']:.0f} s", highlight=False)
        print_detection_table(rows, console, f"MIT-BIH beat detection ({len(rows)} records, +-150 ms){label}")


def _burst_rows(table: Any, schedule: dict[str, Any], ref_samples: np.ndarray, min_cover: float) -> dict[str, Any]:
    """Per scheduled noise burst: covered share, false beats inside; spans on other events; missed beats outside bursts."""
    fs = table.fs_hz
    spans = np.asarray(table.artifact_spans, dtype=np.float64).reshape(-1, 2) * 1000.0 / fs
    det_ms = table.samples * 1000.0 / fs
    ref_ms = np.asarray(ref_samples) * 1000.0 / fs
    bursts, on_events = [], []
    outside = np.ones(ref_ms.size, bool)
    for e in schedule["events"]:
        on, off = float(e["onset_ms"]), float(e["offset_ms"])
        overlap = float(np.sum(np.clip(np.minimum(spans[:, 1], off) - np.maximum(spans[:, 0], on), 0, None)))
        if e["kind"] == "noise":
            inside = (ref_ms >= on - TOLERANCE_MS) & (ref_ms < off + TOLERANCE_MS)
            outside &= ~inside
            det_in = int(np.count_nonzero((det_ms >= on) & (det_ms < off)))
            n_ref = int(np.count_nonzero((ref_ms >= on) & (ref_ms < off)))
            # false beats: detections inside the burst farther than 150 ms from every reference beat
            near = np.abs(det_ms[(det_ms >= on) & (det_ms < off)][:, None] - ref_ms[None, :]).min(axis=1) > TOLERANCE_MS if det_in and ref_ms.size else np.ones(det_in, bool)
            bursts.append({"onset_s": on / 1000.0, "span_s": (off - on) / 1000.0, "cover": overlap / max(off - on, 1.0), "false": int(np.count_nonzero(near)), "n_ref": n_ref, "n_det": det_in})
        elif overlap > 0:
            on_events.append(f"{e['kind']}@{on / 1000.0:.0f}s ({overlap / 1000.0:.1f} s)")
    out_ref = ref_samples[outside]
    m = match_beats(out_ref, table.samples, fs) if out_ref.size else {"fn": 0}
    return {"bursts": bursts, "covered": sum(b["cover"] >= min_cover for b in bursts), "on_events": on_events, "missed_outside": int(m["fn"]), "ref_outside": int(out_ref.size)}


def synthetic_noise_section(args: argparse.Namespace, console: Console) -> None:
    """Electrode-motion bursts of the 24 h synthetic Holter: covered by an artifact span? false beats? spans on events?"""
    try:
        from ecgtrace.tools.synth import synthesize_holter
    except ImportError:
        console.print("[yellow]synthetic noise: ecgtrace.tools.synth not available yet; skipped[/yellow]")
        return
    seeds = [int(s) for s in args.noise_seeds.split(",") if s.strip()]
    variants = [("after", None)] + ([] if args.no_before else [("before (excursion index off)", NO_EXCURSION)])
    for seed in seeds:
        with tempfile.TemporaryDirectory(prefix="ecgtrace-beats-noise-") as tmp:
            result = synthesize_holter(tmp, name="holter", hours=args.noise_hours, fs_hz=250.0, n_leads=3, seed=seed)
            info = open_record(result.record_path)
            ref = read_reference_annotations(info.path).beat_samples
            for label, params in variants:
                table = detect_beats(info, workers=2, params=params)
                r = _burst_rows(table, result.schedule, ref, args.min_cover)
                t = Table(title=f"Synthetic noise bursts ({args.noise_hours:g} h, seed {seed}, {label}): covered = artifact spans over >= {100 * args.min_cover:.0f}% of the burst")
                for col in ("onset s", "span s", "covered %", "ref beats", "det beats", "false beats"):
                    t.add_column(col, justify="right")
                for b in r["bursts"]:
                    t.add_row(f"{b['onset_s']:.1f}", f"{b['span_s']:.1f}", f"{100 * b['cover']:.0f}", str(b["n_ref"]), str(b["n_det"]), str(b["false"]))
                console.print(t)
                art_s = sum(b - a for a, b in table.artifact_spans) / info.fs_hz
                console.print(
                    f"seed {seed} {label}: bursts covered {r['covered']}/{len(r['bursts'])}, false beats in bursts {sum(b['false'] for b in r['bursts'])}, "
                    f"missed beats outside bursts {r['missed_outside']}/{r['ref_outside']}, artifact {art_s:.0f} s, "
                    f"spans on scheduled events: {', '.join(r['on_events']) or 'none'}",
                    highlight=False,
                )


#: Sections run in order; the classification benchmark (tools/classify.py) appends its own here.
EXTRA_SECTIONS: list[Callable[[argparse.Namespace, Console], None]] = []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", default="", help="comma-separated MIT-BIH records (default: all 27 shared ones)")
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"), help="shared data folder")
    parser.add_argument("--no-baseline", action="store_true", help="skip the neurokit2 baseline")
    parser.add_argument("--no-synth", action="store_true", help="skip the synthetic Holter")
    parser.add_argument("--synth-hours", type=float, default=0.5, help="length of the synthetic record (hours)")
    parser.add_argument("--noise-seeds", default="1,0", help="seeds of the synthetic noise-burst section (empty: skip)")
    parser.add_argument("--noise-hours", type=float, default=24.0, help="length of the noise-burst records (hours)")
    parser.add_argument("--min-cover", type=float, default=0.8, help="share of a burst an artifact span must cover")
    parser.add_argument("--no-before", action="store_true", help="skip the before rows (excursion index off)")
    args = parser.parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 160)
    mitdb_section(args, console)
    if not args.no_synth:
        synthetic_section(args, console)
        if args.noise_seeds.strip():
            synthetic_noise_section(args, console)
    for section in EXTRA_SECTIONS:
        section(args, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
