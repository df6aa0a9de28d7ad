"""``ecgtrace report RUNDIR``: write RUNDIR/report.html, one self-contained HTML file."""

from __future__ import annotations

import argparse

HELP = "Write a run's static HTML report (tables, transcripts, grounding figures) to RUNDIR/report.html."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="RUNDIR", help="an audit or qa-eval run folder")
    parser.add_argument("--out", default=None, help="write the report here instead of RUNDIR/report.html")
    parser.add_argument("--max-images", type=int, default=200, help="at most this many grounding figures (default 200)")
    parser.add_argument("--open", type=int, default=3, metavar="N", help="samples shown expanded at the top (default 3)")


def run(args: argparse.Namespace) -> int:
    from ecgtrace.errors import EcgTraceError
    from ecgtrace.views.report_html import build_report

    if args.max_images < 0 or args.open < 0:
        raise EcgTraceError("--max-images and --open must be >= 0")
    from ecgtrace.commands._output import make_console

    console = make_console(stderr=True)
    with console.status(f"rendering the report of {args.run} (up to {args.max_images} ECG figures) ..."):
        path = build_report(args.run, args.out, max_images=args.max_images, open_samples=args.open)
    size = path.stat().st_size
    print(f"wrote {path} ({size / 1024:.0f} KiB)")
    return 0
