"""benchmarks/beats.py's synthetic noise section: electrode-motion bursts of a 24 h synthetic Holter against the artifact spans."""

from __future__ import annotations

import argparse
import tempfile
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from _beat_match import TOLERANCE_MS, match_beats
from ecgtrace.tools.annotations import read_reference_annotations
from ecgtrace.tools.beats import DetectorParams, detect_beats
from ecgtrace.tools.records import open_record

#: DetectorParams with the low-frequency excursion index switched off (the version-1 artifact rule).
NO_EXCURSION = DetectorParams(lf_quiet_bad=0.0)


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
