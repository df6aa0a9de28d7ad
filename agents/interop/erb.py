"""The ECG-Reasoning-Benchmark (ERB) format: ``ecgtrace import erb`` and ``ecgtrace export erb``.

Import reads ERB's JSONL (or its older per-sample JSON files) into an
ecgtrace audit dataset (:mod:`ecgtrace.agents.interop._erb_import`); export
writes an audit run in ERB's result layout (:mod:`ecgtrace.agents.interop._erb_export`).
The format itself - key names, question types, diagnoses - is read in
:mod:`ecgtrace.agents.interop._erb_samples`.

Only the standard library is imported at module level (the CLI builds its
parsers from this module); the work is imported when a command runs.
"""

from __future__ import annotations

import argparse
from typing import Any

HELP = "ECG-Reasoning-Benchmark (ERB): its JSONL or per-sample JSON files, PTB-XL and MIMIC-IV-ECG records"
LAYOUTS = ("3x4", "stacked")


def add_import_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="FILE", help="ERB JSONL, a per-sample JSON file, or a folder of them (data/<source>/<dx>/<id>.json)")
    parser.add_argument("--records", action="append", required=True, metavar="DIR",
                        help="folder with PTB-XL (records500/, records100/) or MIMIC-IV-ECG (files/); repeat for both")
    parser.add_argument("--out", required=True, metavar="DATASET", help="dataset folder to write (audit.jsonl, assets/, rejected.jsonl)")
    parser.add_argument("--rate", type=int, choices=(500, 100), default=500,
                        help="PTB-XL records to read: 500 (records500/..._hr, default) or 100 Hz (records100/..._lr)")
    parser.add_argument("--layout", choices=LAYOUTS, default="3x4",
                        help="image: the standard 3x4 print with a lead II rhythm strip (default), or ERB's 12 stacked leads")
    parser.add_argument("--modalities", default="image,text", help="assets to write: image, text or both (default image,text)")
    parser.add_argument("--text-rate", type=float, default=100.0, metavar="HZ",
                        help="rate of the signal-as-text asset, by plain subsampling (default 100 Hz)")
    parser.add_argument("--px-per-mm", type=int, default=10, help="image resolution (default 10 px/mm, 254 dpi)")
    parser.add_argument("--release", default=None, help="the ERB release the file comes from, kept in provenance (e.g. a dataset revision)")
    parser.add_argument("--workers", type=int, default=1, help="processes drawing assets (default 1)")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N samples")


def run_import(args: argparse.Namespace) -> dict[str, Any]:
    from ecgtrace.agents.interop._erb_import import import_erb
    from ecgtrace.agents.interop._records import AssetSettings
    from ecgtrace.errors import InteropError

    modalities = tuple(m.strip() for m in str(args.modalities).split(",") if m.strip())
    unknown = [m for m in modalities if m not in ("image", "text")]
    if unknown or not modalities:
        raise InteropError(f"--modalities takes image and/or text, got {args.modalities!r}")
    for name, value in (("--workers", args.workers), ("--limit", args.limit), ("--px-per-mm", args.px_per_mm)):
        if value is not None and value < (2 if name == "--px-per-mm" else 1):
            raise InteropError(f"{name} is too small: {value}")
    if args.text_rate <= 0:
        raise InteropError(f"--text-rate must be positive, got {args.text_rate:g}")
    settings = AssetSettings(layout=args.layout, text_rate_hz=float(args.text_rate), px_per_mm=int(args.px_per_mm), modalities=modalities)
    return import_erb(args.source, args.records, args.out, rate_hz=args.rate, settings=settings, release=args.release,
                      workers=args.workers, limit=args.limit)


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="RUNDIR", help="an audit run folder (ecgtrace audit --run RUNDIR)")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder to write <model>/<data_source>/<target_dx>/<id>.json into")
    parser.add_argument("--keys", choices=("old", "new"), default="old",
                        help="key names: old (what ERB's evaluator reads, default) or new (the released JSONL's)")
    parser.add_argument("--model-name", default=None, help="name of the <model> folder (default: the run's --model)")
    parser.add_argument("--dataset", default=None, metavar="FILE", help="the audit.jsonl the run used, when it moved since")


def run_export(args: argparse.Namespace) -> dict[str, Any]:
    from ecgtrace.agents.interop._erb_export import export_run

    return export_run(args.run, args.out, keys=args.keys, model_name=args.model_name, dataset=args.dataset)
