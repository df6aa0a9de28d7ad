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


def run(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from rich.console import Console

    from ecgtrace.cli import main as cli
    from ecgtrace.commands.synth import print_schedule_summary
    from ecgtrace.errors import EcgTraceError
    from ecgtrace.tools.synth import load_schedule, synthesize_holter

    console = Console(emoji=False)
    out = Path(args.out)
    base = out / "record" / "holter"
    dataset = out / "dataset"
    runs = out / "runs"
    timings: dict[str, float] = {}

    def step(name: str, argv: list[str]) -> None:
        console.rule(f"[bold]{name}")
        started = time.perf_counter()
        code = cli(argv)
        timings[name] = time.perf_counter() - started
        if code != 0:
            raise EcgTraceError(f"demo step '{name}' failed (exit {code}); fix the error above and run the demo again to resume")

    console.rule("[bold]1. synthetic Holter record")
    started = time.perf_counter()
    schedule = _cached_schedule(base, args.hours, args.seed, load_schedule)
    if schedule is None:
        with console.status(f"synthesizing a {args.hours:g} h, 3-lead, 250 Hz Holter record ..."):
            schedule = synthesize_holter(base.parent, name="holter", hours=args.hours, fs_hz=250.0, n_leads=3, seed=args.seed).schedule
    else:
        console.print(f"reusing the synthetic record in {base.parent}")
    timings["synth"] = time.perf_counter() - started
    print_schedule_summary(console, schedule, title=f"synthetic Holter {base}")

    step("2. build the QA dataset and audit items", ["build", str(base), "--out", str(dataset), "--seed", str(args.seed)])

    examinees = list(BUILTIN_EXAMINEES) + ([args.model] if args.model else [])
    limit = ["--limit", str(args.limit)] if args.limit else []
    for model in examinees:
        remote = ["--base-url", args.base_url, "--api-key-env", args.api_key_env] if model.startswith("openai:") and args.base_url else []
        name = _run_name(model)
        step(f"3. reasoning audit: {model}", ["audit", str(dataset / "audit.jsonl"), "--model", model, "--modality", args.modality,
                                             "--seed", str(args.seed), "--run", str(runs / f"audit-{name}"), "--quiet", *limit, *remote])
        step(f"4. QA scoring: {model}", ["qa-eval", str(dataset / "qa.jsonl"), "--model", model, "--modality", args.modality,
                                        "--seed", str(args.seed), "--run", str(runs / f"qa-{name}"), "--quiet", "--skip-unavailable",
                                        *limit, *remote])
    for model in examinees:
        for kind in ("audit", "qa"):
            step(f"5. report: {kind} {model}", ["report", str(runs / f"{kind}-{_run_name(model)}"), "--max-images", str(args.max_images)])

    _print_summary(console, runs, examinees)
    _print_timings(console, timings)
    focus = runs / f"audit-{_run_name(args.model or 'random')}" / "report.html"
    console.print(f"\nHTML report: [bold]{focus}[/]  (every run folder under {runs} has its own report.html)")
    console.print(f"Step through one sample: ecgtrace debug {focus.parent} --sample <id>")
    return 0


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


def _metric(block: dict, key: str) -> str:
    value = block.get(key)
    if isinstance(value, dict):
        value = value.get("value")
    if value is None:
        return "-"
    return f"{100 * value:.1f}%" if not key.startswith("depth") else f"{value:.2f}"


def _print_summary(console, runs, examinees: list[str]) -> None:  # noqa: ANN001
    import json

    from rich.table import Table

    table = Table(title="how well each examinee reads the ECG")
    for column in ("model", "IDA", "GT-RDA", "Dec.", "Compl.", "Depth", "n", "QA acc.", "QA score", "QA n"):
        table.add_column(column, justify="right", no_wrap=True)
    for model in examinees:
        name = _run_name(model)
        audit = json.loads((runs / f"audit-{name}" / "results.json").read_text())["overall"]
        qa = json.loads((runs / f"qa-{name}" / "results.json").read_text())["overall"]
        score = (qa.get("mean_score") or {}).get("value")
        table.add_row(model, _metric(audit, "ida"), _metric(audit, "gt_rda"), _metric(audit, "decision_acc"), _metric(audit, "completion"),
                      _metric(audit, "depth"),
                      str(audit.get("n", "-")), _metric(qa, "closed_accuracy"),
                      "-" if score is None else f"{score:.1f}", str(qa.get("n", "-")))
    console.print(table)
    console.print("Audit: IDA initial-answer accuracy, GT-RDA the last loop's decision (true history) per sample, Dec. every "
                  "decision turn, Compl. every step right, Depth 0-4 pooled over loops (ERB's definitions). "
                  "QA: closed accuracy and mean score (0-100).\n"
                  "oracle answers from the ground truth (must be 100%); random picks uniformly (chance level); "
                  "prior never sees the ECG (a shortcut probe: it should stay near chance).")


def _print_timings(console, timings: dict[str, float]) -> None:  # noqa: ANN001
    from rich.table import Table

    table = Table(title="demo steps")
    table.add_column("step")
    table.add_column("seconds", justify="right")
    for name, seconds in timings.items():
        table.add_row(name, f"{seconds:.1f}")
    table.add_row("[bold]total", f"[bold]{sum(timings.values()):.1f}")
    console.print(table)
