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
    parser.add_argument("--method", choices=("wavenet", "rules"), default="wavenet",
                        help="boundaries from the learned wave segmenter where it sees the wave (default), or from the rules alone")
    parser.add_argument("--json", action="store_true", help="print the per-lead measurements as JSON")


#: (measurement, column head, decimals): short heads keep the table within 80 columns; the caption spells them out.
COLUMNS = (
    ("rr_ms", "RR", 0), ("pr_ms", "PR", 0), ("qrs_ms", "QRS", 0), ("qt_ms", "QT", 0), ("qtc_bazett_ms", "QTcB", 0),
    ("qtc_fridericia_ms", "QTcF", 0), ("r_amp_mv", "R", 3), ("t_amp_mv", "T", 3), ("st_j60_mv", "ST60", 3),
)
CAPTION = ("ms: RR, PR, QRS and QT intervals, QTc by Bazett (QTcB) and Fridericia (QTcF); mV: R and T amplitudes, "
           "ST level 60 ms after the J point (ST60); P: P wave present. Each value is the median over the window's beats that have it (--json names them).")


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
    delineation = delineate(window, beats, method=args.method)
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
    _print_table(info.name, t0, t1, delineation.beat_samples.size, source, measurements)
    print(f"wrote {path}")
    return 0


def _print_table(name: str, t0: float, t1: float, n_beats: int, source: str, measurements) -> None:  # noqa: ANN001
    from rich.markup import escape

    from ecgtrace.commands._output import add_columns, make_console, new_table

    table = new_table(f"{name} [{t0:g} s, {t1:g} s): {n_beats} beats ({source})", caption=CAPTION)
    add_columns(table, ("lead", *(head for _, head, _ in COLUMNS), "P"), left=("lead", "P"))
    for lead, m in measurements.per_lead.items():
        cells = [escape(str(lead))]
        for key, _, digits in COLUMNS:
            v = m.values[key]["value"]
            cells.append("-" if v is None else f"{v:.{digits}f}")
        cells.append("yes" if m.p_wave["present"] else "no")
        table.add_row(*cells)
    make_console().print(table)
