"""``ecgtrace annotate RECORD --out DIR``: beats, AF, classes, rhythm events and HR for a whole record."""

from __future__ import annotations

import argparse

HELP = "Annotate a record (beats, AF, beat classes, rhythm events, heart rate) and write <record>.ecgtrace + summary JSON."

_STAGES = ("beats", "classify", "af", "rhythm", "hr")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("record", help="WFDB record (dir/100 or dir/100.hea) or EDF file")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder for <record>.ecgtrace and <record>.summary.json")
    parser.add_argument("--no-cache", action="store_true", help="recompute even when the annotation store has this record")
    parser.add_argument("--cache-dir", default=None, metavar="DIR",
                        help="cache folder; the store is its annotations/ (default: $ECGTRACE_CACHE, else ~/.cache/ecgtrace or the platform's cache folder)")
    parser.add_argument("--workers", type=int, default=2, metavar="N",
                        help="processes for beat detection, beat features, the P-wave search and flutter reads (default 2; the result does not depend on it)")
    parser.add_argument("--reference", action="store_true", help="use the record's .atr beats and classes instead of detecting them")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON instead of tables")


def _hms(ms: int | None) -> str:
    if ms is None:
        return "-"
    seconds, millis = divmod(int(ms), 1000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}.{millis:03d}"


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from ecgtrace.errors import EcgTraceError
    from ecgtrace.jsonio import make_folder, to_json_text
    from ecgtrace.tools.annotate import annotate_record, annotation_store_dir, write_wfdb_annotations
    from ecgtrace.tools.records import open_record

    if args.workers < 1:
        raise EcgTraceError(f"--workers must be >= 1, got {args.workers}")
    open_record(args.record, check_leads=False)  # fail on a bad record before drawing progress bars
    make_folder(args.out)  # and on an output folder that cannot be written, before minutes of work
    console = Console(stderr=args.json)
    with Progress(TextColumn("[bold]{task.description:<10}"), BarColumn(), TextColumn("{task.percentage:>5.1f}%"), TimeElapsedColumn(), console=console, transient=args.json, disable=args.json) as bar:
        tasks = {stage: bar.add_task(stage, total=1.0) for stage in _STAGES}

        def progress(stage: str, done: float, total: float) -> None:
            if stage == "cache":
                for task in tasks.values():
                    bar.update(task, completed=1.0, description="cached")
                return
            if stage in tasks and total:
                bar.update(tasks[stage], completed=min(float(done) / float(total), 1.0))

        annotation = annotate_record(args.record, cache_dir=annotation_store_dir(args.cache_dir), use_cache=not args.no_cache, workers=args.workers,
                                     progress=progress, prefer_reference=args.reference)
    paths = write_wfdb_annotations(annotation, args.out)
    if args.json:
        trust = {} if annotation.provenance["source"] != "detected" else {"signal_trust": _trust_of(annotation.summary["events"])}
        print(to_json_text({**annotation.summary, **trust}, indent=2))
        return 0
    _print_summary(console, annotation, paths)
    return 0


def _trust_of(event_counts: dict[str, int]) -> dict[str, dict[str, object]]:
    """The signal-trust verdict on every kind found (``ecgtrace.tools.signal_trust``); noise is no QA kind."""
    from ecgtrace.tools.signal_trust import kind_trust

    verdicts = {kind: kind_trust(kind) for kind, n in event_counts.items() if n and kind != "noise"}
    return {kind: {"trusted": v.trusted, "brief": v.brief, "reason": v.reason} for kind, v in verdicts.items()}


def _print_summary(console, annotation, paths) -> None:  # noqa: ANN001
    from rich.markup import escape
    from rich.table import Table

    s = annotation.summary
    head = Table(title=f"record {escape(str(s['record']))}", show_header=False)
    head.add_row("duration", f"{s['duration_s'] / 3600:.2f} h ({s['duration_s']:.0f} s)")
    head.add_row("rhythm", s["rhythm"])
    head.add_row("source", f"{annotation.provenance['source']} ({'from store' if annotation.from_cache else 'computed now'})")
    head.add_row("written", escape(f"{paths['annotations']}, {paths['summary']}"))
    console.print(head)

    beats = Table(title=f"beats ({s['n_beats']})")
    for cls in s["beats_per_class"]:
        beats.add_column(cls, justify="right")
    beats.add_row(*(f"{n} ({s['beats_per_class_pct'][c]:.2f}%)" for c, n in s["beats_per_class"].items()))
    console.print(beats)

    detected = annotation.provenance["source"] == "detected"
    events = Table(title="events")
    events.add_column("kind")
    events.add_column("count", justify="right")
    events.add_column("first at")
    if detected:  # how far this kind, found from the signal, agrees with expert annotations (benchmarks/signal_trust.py)
        events.add_column("validated from the signal (untuned records)")
    first_at: dict[str, int] = {}
    for e in annotation.events:
        first_at.setdefault(e["kind"], e["onset_ms"])
    trust = _trust_of(s["events"]) if detected else {}
    for kind, count in s["events"].items():
        if count:
            events.add_row(kind, str(count), _hms(first_at.get(kind)), *([trust[kind]["brief"]] if detected else []))
    console.print(events)

    hr = s["hr"]
    rate = Table(title="heart rate", show_header=False)
    rate.add_row("mean", f"{hr['mean_hr_bpm']} bpm" if hr["mean_hr_bpm"] is not None else "-")
    for kind in ("min", "max"):
        e = hr[kind]
        value = f"{e['hr_bpm']:.1f} bpm at {_hms(e['t_ms'])}" if e.get("hr_bpm") is not None else "-"
        rate.add_row(kind, value)
    rate.add_row("> 100 bpm", f"{hr['tachy_burden_pct']}% of analysed time" if hr["tachy_burden_pct"] is not None else "-")
    rate.add_row("< 60 bpm", f"{hr['brady_burden_pct']}% of analysed time" if hr["brady_burden_pct"] is not None else "-")
    rate.add_row("AF burden", f"{s['af']['burden_pct']}% ({s['af']['n_episodes']} episodes)")
    rate.add_row("averaging", escape(str(hr["averaging"])))
    console.print(rate)
    timings = ", ".join(f"{k} {v:.2f} s" for k, v in annotation.timings_s.items())
    console.print(f"[dim]timings: {timings}[/]")
