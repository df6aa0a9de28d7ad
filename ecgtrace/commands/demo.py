"""``ecgtrace demo``: the main job, end to end, on the built-in synthetic Holter record.

1. synthesize a 24 h, 3-lead Holter record (or reuse the cached one);
2. build the 12-task QA dataset and the audit items (``ecgtrace build``);
3. run the reasoning audit and the QA scoring with the built-in examinees
   (oracle, random, prior) and, with ``--model``, a real endpoint;
4. write HTML reports and print a summary.

Each step is the same code as its own command, so the demo is also the
quickest way to see every command's output. Every step resumes: a second
``ecgtrace demo`` reuses what the first one finished.
"""

from __future__ import annotations

import argparse

from ecgtrace.contracts.vocabulary import EXAM_MODALITIES

HELP = "Run the main job end to end on a built-in synthetic Holter record (synth, build, audit, QA scoring, reports)."

BUILTIN_EXAMINEES = ("oracle", "random", "prior")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="demo-out", help="output folder (default ./demo-out)")
    parser.add_argument("--hours", type=float, default=24.0, help="length of the synthetic record in hours (default 24)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--model", default=None, help="also examine this model, e.g. openai:gpt-4o-mini")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint for --model")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable with the key for --model")
    parser.add_argument("--modality", choices=EXAM_MODALITIES, default="image", help="how the ECG is shown (default image)")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="examine only the first N audit and QA items")
    parser.add_argument("--max-images", type=int, default=24, help="grounding figures per HTML report (default 24)")
    parser.add_argument("--json", action="store_true", help="print the summary (rows and notes) as JSON on stdout; progress goes to stderr")


def run(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from ecgtrace.commands._demo_summary import print_summary, summary
    from ecgtrace.commands._output import make_console, print_json

    console = make_console(stderr=args.json)
    out = Path(args.out)
    base, dataset, runs = out / "record" / "holter", out / "dataset", out / "runs"
    started = time.perf_counter()
    steps = _Steps(console, capture_all=args.json)
    _record_step(steps, base, args)
    _build_step(steps, base, dataset, args)
    examinees = list(BUILTIN_EXAMINEES) + ([args.model] if args.model else [])
    for model in examinees:
        _exam_steps(steps, model, dataset, runs, args)
    for model in examinees:
        for kind in ("audit", "qa"):
            _report_step(steps, runs / f"{kind}-{_run_name(model)}", f"{kind} {model}", args.max_images)
    for line in steps.pending if steps.timings else []:
        console.print(line)
    if not steps.timings:
        console.print(f"nothing to do: reusing the synthetic record, the dataset, {2 * len(examinees)} runs and their reports in "
                      f"{out}, all up to date; the summary below is from the saved results", soft_wrap=True)
    data = summary(runs, dataset, examinees, _run_name)
    if args.json:
        print_json({**data, "timings_s": steps.timings})
        return 0
    print_summary(console, data)
    if steps.timings:
        _print_timings(console, steps.timings)
    else:
        console.print(f"done in {time.perf_counter() - started:.1f} s")
    focus = runs / f"audit-{_run_name(args.model or 'random')}" / "report.html"
    console.print(f"\nHTML report: [bold]{focus}[/]  (every run folder under {runs} has its own report.html)")
    console.print(f"Step through the first sample whose chain broke: ecgtrace debug {focus.parent}")
    return 0


class _Steps:
    """Runs the demo's steps through the CLI; ``timings`` holds only the steps that did work."""

    def __init__(self, console, *, capture_all: bool = False) -> None:  # noqa: ANN001
        self.console = console
        self.capture_all = capture_all  # --json: the steps' own stdout must not mix with the JSON
        self.timings: dict[str, float] = {}
        self.pending: list[str] = []

    def heading(self, name: str) -> None:
        for line in self.pending:  # what was reused is worth saying once other steps do work
            self.console.print(line)
        self.pending.clear()
        self.console.rule(f"[bold]{name}")

    def reused(self, line: str) -> None:
        self.pending.append(line)

    def cli(self, name: str, argv: list[str], *, capture: bool = False) -> str:
        """Run one command; returns its stdout when ``capture`` (stderr, with its progress bars, stays on the terminal)."""
        import contextlib
        import io
        import time

        from ecgtrace.cli import main as cli
        from ecgtrace.errors import EcgTraceError

        buffer = io.StringIO()
        started = time.perf_counter()
        with contextlib.redirect_stdout(buffer) if capture or self.capture_all else contextlib.nullcontext():
            code = cli(argv)
        if code != 0:
            hint = " (a run made from an older dataset is refused: remove the runs folder to start the runs over)" if name[:1] in "34" else ""
            raise EcgTraceError(f"demo step '{name}' failed (exit {code}); fix the error above and run the demo again to resume{hint}")
        self.elapsed = time.perf_counter() - started
        return buffer.getvalue()

    def did(self, name: str, seconds: float) -> None:
        self.timings[name] = seconds


def _record_step(steps: _Steps, base, args: argparse.Namespace) -> None:  # noqa: ANN001
    import time

    from ecgtrace.commands.synth import print_schedule_summary
    from ecgtrace.tools.synth import load_schedule, synthesize_holter

    if _cached_schedule(base, args.hours, args.seed, load_schedule) is not None:
        steps.reused(f"reusing the synthetic record in {base.parent} ({args.hours:g} h, seed {args.seed})")
        return
    steps.heading("1. synthetic Holter record")
    started = time.perf_counter()
    with steps.console.status(f"synthesizing a {args.hours:g} h, 3-lead, 250 Hz Holter record ..."):
        schedule = synthesize_holter(base.parent, name="holter", hours=args.hours, fs_hz=250.0, n_leads=3, seed=args.seed).schedule
    steps.did("synth", time.perf_counter() - started)
    print_schedule_summary(steps.console, schedule, title=f"synthetic Holter {base}")


def _build_step(steps: _Steps, base, dataset, args: argparse.Namespace) -> None:  # noqa: ANN001
    import json

    name = "2. build the QA dataset and audit items"
    fresh = not (dataset / "manifest.json").is_file()
    if fresh:
        steps.heading(name)
    report = json.loads(steps.cli(name, ["build", str(base), "--out", str(dataset), "--seed", str(args.seed), "--json"], capture=True))
    audit = report.get("audit") or {}
    if report.get("qa_changed") or not audit.get("reused"):
        if not fresh:
            steps.heading(name)
        audit_part = f" and {audit['items']} audit items" if "items" in audit else " (audit.jsonl not written: see the warning above)"
        steps.console.print(f"wrote {report['counts']['items']} QA items ({report['counts']['dropped']} dropped){audit_part} to {dataset}")
        steps.did(name, steps.elapsed)
    else:
        steps.reused(f"the dataset in {dataset} is up to date")


def _exam_steps(steps: _Steps, model: str, dataset, runs, args: argparse.Namespace) -> None:  # noqa: ANN001
    limit = ["--limit", str(args.limit)] if args.limit else []
    remote = ["--base-url", args.base_url, "--api-key-env", args.api_key_env] if model.startswith("openai:") and args.base_url else []
    common = ["--model", model, "--modality", args.modality, "--seed", str(args.seed), "--quiet", *limit, *remote]
    for kind, title, argv in (
        ("audit", f"3. reasoning audit: {model}", ["audit", str(dataset / "audit.jsonl"), *common]),
        ("qa", f"4. QA scoring: {model}", ["qa-eval", str(dataset / "qa.jsonl"), *common, "--skip-unavailable"]),
    ):
        run_dir = runs / f"{kind}-{_run_name(model)}"
        before = _samples_state(run_dir)
        if not _looks_complete(run_dir):
            steps.heading(title)
        steps.cli(title, [*argv, "--run", str(run_dir)])
        if _samples_state(run_dir) != before:
            steps.did(title, steps.elapsed)


def _report_step(steps: _Steps, run_dir, label: str, max_images: int) -> None:  # noqa: ANN001
    import json

    name = f"5. report: {label}"
    stamp = run_dir / "report.html"
    key = run_dir / ".demo-report.json"  # the arguments the report was written with
    wanted = {"max_images": max_images, "inputs": _inputs_mtime(run_dir)}
    try:
        current = stamp.is_file() and json.loads(key.read_text()) == wanted and stamp.stat().st_mtime >= wanted["inputs"]
    except (OSError, ValueError):
        current = False
    if current:
        return
    steps.heading(name)
    steps.cli(name, ["report", str(run_dir), "--max-images", str(max_images)])
    from ecgtrace.jsonio import write_json_atomic

    write_json_atomic(key, wanted)
    steps.did(name, steps.elapsed)


def _samples_state(run_dir) -> tuple[int, float] | None:  # noqa: ANN001
    path = run_dir / "samples.jsonl"
    return (path.stat().st_size, path.stat().st_mtime) if path.is_file() else None


def _looks_complete(run_dir) -> bool:  # noqa: ANN001
    import json

    try:
        return bool(json.loads((run_dir / "results.json").read_text()).get("complete"))
    except (OSError, ValueError):
        return False


def _inputs_mtime(run_dir) -> float:  # noqa: ANN001
    """Latest change to what a report is made of: the run's files and the report code itself."""
    from pathlib import Path

    import ecgtrace.views as views

    files = [run_dir / n for n in ("header.json", "samples.jsonl", "results.json")]
    files += list(Path(views.__file__).parent.glob("*.py"))
    return max((f.stat().st_mtime for f in files if f.is_file()), default=0.0)


def _run_name(model: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in model)


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


def _print_timings(console, timings: dict[str, float]) -> None:  # noqa: ANN001
    from ecgtrace.commands._output import add_columns, new_table

    table = new_table("demo steps that did work")
    add_columns(table, ("step", "seconds"), left=("step",))
    for name, seconds in timings.items():
        table.add_row(name, f"{seconds:.1f}")
    table.add_section()
    table.add_row("total", f"{sum(timings.values()):.1f}", style="bold")
    console.print(table)
