"""Speed and memory of the synthetic Holter generator (issue: <= 20 s and <= 1.5 GB for 24 h x 3 leads x 250 Hz).

    python benchmarks/synth.py [--hours 24] [--nk-minutes 2]

Also times neurokit2's ECGSYN on a few minutes of one lead in the same run, as the
reference point: compare the per-signal-hour ratio, not absolute seconds (the
machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import run_measured  # noqa: E402


def synth_job(out_dir: str, hours: float, fs_hz: float, n_leads: int) -> int:
    from ecgtrace.tools.synth import synthesize_holter

    return synthesize_holter(out_dir, hours=hours, fs_hz=fs_hz, n_leads=n_leads, seed=0).schedule["n_beats"]


def ecgsyn_job(minutes: float) -> int:
    import neurokit2 as nk

    return len(nk.ecg_simulate(duration=int(minutes * 60), sampling_rate=250, method="ecgsyn", random_state=0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--fs", type=float, default=250.0)
    parser.add_argument("--leads", type=int, default=3)
    parser.add_argument("--nk-minutes", type=float, default=2.0, help="minutes of ECGSYN to time (0 to skip)")
    args = parser.parse_args()

    from rich.console import Console
    from rich.table import Table

    table = Table(title="synthetic Holter generation")
    for column in ("generator", "signal", "seconds", "s per signal-hour", "peak MB", "beats"):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        wall, peak, beats = run_measured(synth_job, tmp, args.hours, args.fs, args.leads)
        size_mb = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 1e6
    table.add_row("ecgtrace synth", f"{args.hours:g} h x {args.leads} leads @ {args.fs:g} Hz", f"{wall:.1f}", f"{wall / args.hours:.2f}", f"{peak:.0f}", str(beats))
    if args.nk_minutes > 0:
        nk_wall, nk_peak, _ = run_measured(ecgsyn_job, args.nk_minutes)
        table.add_row("neurokit2 ecgsyn", f"{args.nk_minutes:g} min x 1 lead @ 250 Hz", f"{nk_wall:.1f}", f"{nk_wall / (args.nk_minutes / 60):.0f} (at least)", f"{nk_peak:.0f}", "")
    Console().print(table)
    Console().print(f"files written: {size_mb:.0f} MB. Budget: <= 20 s and <= 1500 MB for 24 h x 3 leads x 250 Hz.")


if __name__ == "__main__":
    main()
