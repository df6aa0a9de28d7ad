"""``ecgtrace delineate RECORD``: P/QRS/T marks of a window as a WFDB ``.waves`` file, and per-lead measurements."""

from __future__ import annotations

import argparse

HELP = "Delineate P, QRS and T waves in a window; write DIR/<record>.waves (QTDB convention) and show per-lead intervals."
MAX_WINDOW_S = 600.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("record", help="WFDB record (dir/100 or dir/100.hea) or EDF file")
    parser.add_argument("--t0", type=float, default=0.0, metavar="S", help="window start, s from the record start (default 0)")
    parser.add_argument("--t1", type=float, default=None, metavar="S", help="window end, s (default t0 + 10 s, at most the record end)")
    parser.add_argument("--lead", action="append", default=None, metavar="NAME", help="lead to delineate (repeatable; default all usable leads)")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder for <record>.waves")
    parser.add_argument("--beats", choices=("auto", "atr", "detect"), default="auto", help="R peaks from the record's .atr (auto: when present) or detected in the window")
    parser.add_argument("--json", action="store_true", help="print the per-lead measurements as JSON")


def run(args: argparse.Namespace) -> int:
    import math
    from pathlib import Path

    from ecgtrace.errors import EcgTraceError, WindowError
    from ecgtrace.jsonio import to_json_text
    from ecgtrace.tools._delineate_measures import measure_delineation
    from ecgtrace.tools.measure import delineate, write_waves
    from ecgtrace.tools.records import open_record, read_window

    info = open_record(args.record)
    t0 = float(args.t0)
    t1 = float(args.t1) if args.t1 is not None else min(t0 + 10.0, info.duration_s)
    if not (math.isfinite(t0) and math.isfinite(t1)) or t1 <= t0:
        raise WindowError(f"{info.name}: window [{t0}, {t1}) s is empty; give --t1 greater than --t0")
    if t1 - t0 > MAX_WINDOW_S:
        raise WindowError(f"{info.name}: window of {t1 - t0:.0f} s is longer than {MAX_WINDOW_S:.0f} s; delineate shorter windows")
    leads = args.lead or list(info.usable_leads) or list(info.leads)
    window = read_window(info, t0, t1, leads)
    beats = None
    source = "detected in the window"
    atr = Path(f"{info.path}.atr")
    if args.beats == "atr" and not atr.exists():
        raise EcgTraceError(f"{atr}: no reference beat file; use --beats detect")
    if args.beats in ("auto", "atr") and atr.exists() and info.kind == "wfdb":
        from ecgtrace.tools.reference_check import checked_reference

        beats = checked_reference(info, "atr").beat_samples
        source = "reference .atr"
    delineation = delineate(window, beats)
    if delineation.beat_samples.size == 0:
        raise EcgTraceError(f"{info.name}: no beats in [{t0:g}, {t1:g}) s; nothing to delineate")
    out_dir = Path(args.out)
    if out_dir.exists() and not out_dir.is_dir():
        raise EcgTraceError(f"{out_dir}: --out must be a folder")
    path = write_waves(delineation, out_dir, info.name)
    measurements = measure_delineation(window, delineation)
    payload = {
        "record": info.name,
        "waves_file": str(path),
        "beats_source": source,
        "measurements": measurements.to_json(include_median_beat=False),
    }
    if args.json:
        print(to_json_text(payload, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{info.name} [{t0:g} s, {t1:g} s): {delineation.beat_samples.size} beats ({source})")
    names = ("rr_ms", "pr_ms", "qrs_ms", "qt_ms", "qtc_bazett_ms", "qtc_fridericia_ms", "r_amp_mv", "t_amp_mv", "st_j60_mv")
    table.add_column("lead")
    for name in names:
        table.add_column(name, justify="right")
    table.add_column("P wave")
    for lead, m in measurements.per_lead.items():
        cells = [lead]
        for name in names:
            v = m.values[name]["value"]
            cells.append("-" if v is None else f"{v:g}")
        cells.append("present" if m.p_wave["present"] else "absent")
        table.add_row(*cells)
    console = Console()
    console.print(table)
    console.print(f"wrote {path}")
    return 0
