"""``ecgtrace synth``: write a synthetic Holter record with exact ground truth."""

from __future__ import annotations

import argparse

HELP = "Synthesize a Holter record (WFDB .hea/.dat), its reference .atr and its event schedule."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--hours", type=float, default=24.0, help="duration in hours (0.05-24, default 24)")
    parser.add_argument("--fs", type=float, default=250.0, help="sampling rate in Hz (128-500, default 250)")
    parser.add_argument("--leads", type=int, default=3, choices=(2, 3), help="number of leads (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="random seed; the same seed gives byte-identical files")
    parser.add_argument("--name", default="holter", help="record name (default holter)")
    parser.add_argument("--profile", default="default", choices=("default", "holtercare"),
                        help="event mix: default, or holtercare (adds flutter, VF, asystole, escape rhythms, AV block ...)")
    parser.add_argument("--json", action="store_true", help="print the files written and the event counts as JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    import time

    from rich.console import Console

    from ecgtrace.tools.synth import synthesize_holter

    console = Console(stderr=args.json)
    started = time.perf_counter()
    with console.status(f"synthesizing {args.hours:g} h x {args.leads} leads at {args.fs:g} Hz ..."):
        result = synthesize_holter(args.out, name=args.name, hours=args.hours, fs_hz=args.fs, n_leads=args.leads, seed=args.seed, profile=args.profile)
    elapsed = time.perf_counter() - started
    if args.json:
        from collections import Counter

        from ecgtrace.commands._output import print_json

        schedule = result.schedule
        print_json({"record": str(result.record_path), "schedule": str(result.schedule_path), "seconds": round(elapsed, 2),
                    "hours": schedule["hours"], "fs_hz": schedule["fs_hz"], "leads": schedule["leads"], "n_beats": schedule["n_beats"],
                    "beats_per_symbol": schedule["beats_per_symbol"],
                    "events": dict(sorted(Counter(e["kind"] for e in schedule["events"]).items()))})
        return 0
    print_schedule_summary(console, result.schedule, title=f"{result.record_path} ({elapsed:.1f} s)")
    console.print(f"wrote {result.record_path}.hea/.dat/.atr and {result.schedule_path.name}")
    return 0


def print_schedule_summary(console, schedule: dict, *, title: str) -> None:  # noqa: ANN001
    """Rich table of a synthetic record's beats and events (also used by the demo)."""
    from collections import Counter

    from rich.table import Table

    table = Table(title=title)
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_column("detail")
    table.add_row("duration", f"{schedule['hours']:g} h", f"{schedule['fs_hz']:g} Hz, leads {', '.join(schedule['leads'])}")
    table.add_row("beats", str(schedule["n_beats"]), ", ".join(f"{k} {v}" for k, v in schedule["beats_per_symbol"].items()))
    counts = Counter(event["kind"] for event in schedule["events"])
    for kind, count in sorted(counts.items()):
        rates = [e["rate_bpm"] for e in schedule["events"] if e["kind"] == kind and e["rate_bpm"]]
        detail = f"{min(rates):.0f}-{max(rates):.0f} bpm" if rates else ""
        table.add_row(kind, str(count), detail)
    console.print(table)
