"""``ecgtrace demo``: the main job on the built-in synthetic Holter record."""

from __future__ import annotations

import argparse

HELP = "Run the main job end to end on a built-in synthetic Holter record."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="demo-out", help="output folder (default ./demo-out)")
    parser.add_argument("--hours", type=float, default=1.0, help="length of the synthetic record in hours (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def run(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from rich.console import Console

    from ecgtrace.commands.synth import print_schedule_summary
    from ecgtrace.tools.synth import load_schedule, synthesize_holter

    console = Console()
    out = Path(args.out)
    record_dir = out / "record"
    base = record_dir / "holter"
    started = time.perf_counter()
    cached = _cached_schedule(base, args.hours, args.seed, load_schedule)
    if cached is not None:
        schedule = cached
        console.print(f"reusing the synthetic record in {record_dir}")
    else:
        with console.status(f"synthesizing a {args.hours:g} h, 3-lead, 250 Hz Holter record ..."):
            schedule = synthesize_holter(record_dir, name="holter", hours=args.hours, fs_hz=250.0, n_leads=3, seed=args.seed).schedule
    print_schedule_summary(console, schedule, title=f"synthetic Holter {base} ({time.perf_counter() - started:.1f} s)")
    return 0


def _cached_schedule(base, hours: float, seed: int, load_schedule):  # noqa: ANN001
    """The existing record's schedule when it was made with the same parameters."""
    from ecgtrace.errors import EcgTraceError

    try:
        schedule = load_schedule(base)
    except EcgTraceError:
        return None
    same = schedule.get("hours") == hours and schedule.get("seed") == seed and all(
        base.with_suffix(ext).exists() for ext in (".hea", ".dat", ".atr")
    )
    return schedule if same else None
