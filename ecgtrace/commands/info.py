"""``ecgtrace info RECORD``: header summary, beats per AAMI class and rhythm intervals."""

from __future__ import annotations

import argparse

HELP = "Show a record's header, and its beats per AAMI class and rhythm intervals when annotated."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("record", help="WFDB record (dir/100 or dir/100.hea) or EDF file")
    parser.add_argument("--ann", default=None, metavar="EXT", help="annotation extension (default: atr when present)")
    parser.add_argument("--fs", type=float, default=None, help="sampling rate for annotation-only records (Hz)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ecgtrace.jsonio import to_json_text

    summary = _summary(args)
    if args.json:
        print(to_json_text(summary, indent=2))
        return 0
    console = Console()
    if "header" in summary:
        _print_header(console, summary["header"])
    if "annotations" in summary:
        _print_annotations(console, summary["annotations"])
    return 0


def _summary(args: argparse.Namespace) -> dict:
    """``{"header": ..., "annotations": ...}`` (either may be absent: annotation-only records have no header to open)."""
    from pathlib import Path

    from ecgtrace.errors import RecordError
    from ecgtrace.tools.annotations import read_reference_annotations
    from ecgtrace.tools.record_source import resolve_record
    from ecgtrace.tools.records import open_record

    summary: dict = {}
    base: Path
    try:
        info = open_record(args.record)
        summary["header"] = info.to_json()
        base = Path(info.path)
    except RecordError as exc:
        # annotation-only records (LTAFDB, NSR2DB) have no signals to open
        if args.ann is None or "annotation-only" not in str(exc) and "no header" not in str(exc):
            raise
        base = resolve_record(args.record).base
    ext = args.ann
    if ext is None and Path(f"{base}.atr").exists():
        ext = "atr"
    if ext is not None:
        summary["annotations"] = read_reference_annotations(base, ext, fs_hz=args.fs).to_json()
    return summary


def _print_header(console, h: dict) -> None:  # noqa: ANN001
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"record {h['name']} ({h['kind']})", show_header=False)
    table.add_row("sampling rate", f"{h['fs_hz']:g} Hz")
    table.add_row("duration", f"{h['duration_s']:.1f} s ({h['n_samples']} samples)")
    table.add_row("leads", escape(", ".join(f"{lead} [{unit}, gain {gain:g}, fmt {fmt}]" for lead, unit, gain, fmt in zip(h["leads"], h["units"], h["gains"], h["formats"]))))
    if h["unusable_leads"]:
        table.add_row("unusable leads", ", ".join(h["unusable_leads"]), style="yellow")
    if h["patient"]:
        table.add_row("patient", ", ".join(f"{k}={v}" for k, v in h["patient"].items()))
    for comment in h["comments"]:
        table.add_row("comment", escape(comment))
    console.print(table)


def _print_annotations(console, a: dict) -> None:  # noqa: ANN001
    from rich.table import Table

    beats = Table(title=f"beats in .{a['extension']} ({a['n_beats']})")
    for cls in a["beats_per_class"]:
        beats.add_column(cls, justify="right")
    beats.add_row(*(str(n) for n in a["beats_per_class"].values()))
    console.print(beats)
    rhythm = Table(title=f"rhythm intervals ({len(a['rhythm_intervals'])})")
    for column in ("rhythm", "onset", "offset", "duration"):
        rhythm.add_column(column)
    for interval in a["rhythm_intervals"][:200]:
        rhythm.add_row(interval["label"], _hms(interval["onset_ms"]), _hms(interval["offset_ms"]), f"{(interval['offset_ms'] - interval['onset_ms']) / 1000:.1f} s")
    console.print(rhythm)


def _hms(ms: int) -> str:
    seconds, millis = divmod(int(ms), 1000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}.{millis:03d}"
