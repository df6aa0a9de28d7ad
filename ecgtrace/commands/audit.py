"""``ecgtrace audit DIR/audit.jsonl --model M --run RUNDIR``: turn-by-turn reasoning audit of a model."""

from __future__ import annotations

import argparse

from ecgtrace.contracts.vocabulary import EXAM_MODES

from ecgtrace.commands._model_options import add_model_options

HELP = "Audit a model's ECG reasoning turn by turn (resumable: rerun the same command to continue)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("audit", help="audit.jsonl (or the folder holding it)")
    add_model_options(parser)
    parser.add_argument("--mode", choices=EXAM_MODES, default="teacher",
                        help="teacher: ground truth enters the history after each turn; stop: the chain stops at the first error")
    parser.add_argument("--prompt-style", choices=("lettered", "erb"), default="lettered",
                        help="lettered: options as 'A. ...', answered by letter (default); erb: ERB's layout, full option texts, no letters")
    parser.add_argument("--condensed", action="store_true",
                        help="show a question's options only while it is asked; earlier questions stay in the chat as their text (ERB's condensed chat)")
    parser.add_argument("--keep-checkpoints", action="store_true",
                        help="keep finished samples' LangGraph threads in RUNDIR/checkpoints.sqlite (default: dropped once in samples.jsonl)")


def run(args: argparse.Namespace) -> int:
    import asyncio

    from rich.console import Console

    from ecgtrace.commands._model_options import (ask_at_terminal, check_model_options, make_model, pricing_of, prompt_budget_of,
                                                  progress_counts, report_server_failures, report_skipped, run_settings,
                                                  run_with_progress, samples_to_retry, text_encoding_of)
    from ecgtrace.graphs.audit_runner import run_audit
    from ecgtrace.runlog import RunDir

    check_model_options(args)
    encoding, pricing = text_encoding_of(args), pricing_of(args)
    audit, items = _load_items(args)
    examinee = make_model(args)
    budget = prompt_budget_of(args, examinee)
    run_dir = RunDir.open(args.run, identity_of(audit, args), run_settings(args, audit.path), kind="audit")
    console = Console(stderr=True)
    retry = samples_to_retry(run_dir, args, console)
    total, done_before = progress_counts(run_dir, items, args.epochs)

    def audit_now(on_sample):  # noqa: ANN001, ANN202
        return asyncio.run(run_audit(audit, run_dir, examinee, mode=args.mode, modality=args.modality,
                                     prompt_style=args.prompt_style, condensed=args.condensed, concurrency=args.concurrency,
                                     items=items, on_sample=on_sample, ask_human=ask_at_terminal(console),
                                     keep_checkpoints=args.keep_checkpoints, restart=retry, encoding=encoding, budget=budget,
                                     epochs=args.epochs, seed=args.seed, pricing=pricing))

    results = run_with_progress(audit_now, console=console, label="audit", total=total, done=done_before,
                                quiet=args.quiet or examinee.interactive)
    report_skipped(results, console)  # an error when nothing was asked
    if not args.quiet:
        style = args.prompt_style + (", condensed" if args.condensed else "")
        print_results(results, title=f"{args.model} - {args.mode} - {args.modality} - {style}")
    report_server_failures(results, console)  # an error when the server answered nothing
    return 0


def _load_items(args: argparse.Namespace):  # noqa: ANN202
    """The audit set and the items this run asks (``--sample-id``, ``--limit`` by diagnosis), each checked to be showable in ``--modality``."""
    from ecgtrace.agents.audit.examiner import check_assets
    from ecgtrace.agents.audit.format import load_audit
    from ecgtrace.commands._model_options import select

    audit = load_audit(args.audit)
    items = select(list(audit.items), args, stratum_of=lambda it: it.diagnosis)
    for item in items:
        check_assets(item, audit.base_dir, args.modality)
    return audit, items


def identity_of(audit, args: argparse.Namespace) -> dict:  # noqa: ANN001
    """What decides an audit run's per-sample results (a rerun with anything else is refused).

    Which items are asked and how often (``--limit``, ``--sample-id``,
    ``--epochs``) are not in it: a run folder grows.
    """
    from ecgtrace.agents.audit.examiner import PROMPT_VERSION
    from ecgtrace.agents.exam.run_control import SHUFFLE_VERSION
    from ecgtrace.commands._model_options import text_encoding_of

    return {"dataset_sha256": audit.sha256, "dataset_items": len(audit.items), "model": args.model,
            "modality": args.modality, "mode": args.mode, "seed": args.seed,
            "max_tokens": args.max_tokens, "temperature": args.temperature, "prompt_version": PROMPT_VERSION,
            "prompt_style": args.prompt_style, "condensed": bool(args.condensed),
            "text_encoding": text_encoding_of(args).to_json() if args.modality in ("text", "both") else None,
            "option_shuffle": SHUFFLE_VERSION}


def _fmt(metric: dict) -> str:
    if metric.get("value") is None:
        return "-"
    lo, hi = metric["ci95"]
    if "k" in metric:
        return f"{100 * metric['value']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"
    return f"{metric['value']:.2f} [{lo:.2f}, {hi:.2f}]"


def print_results(results: dict, title: str = "") -> None:
    """Rich table: one row per diagnosis plus overall."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ecgtrace.commands._model_options import print_epochs, print_usage

    table = Table(title=escape(f"reasoning audit {title}".strip()))
    for column in ("diagnosis", "n", "IDA", "GT-RDA", "Decision acc.", "Completion", "Depth (0-4)", "errors"):
        table.add_column(column, justify="right" if column != "diagnosis" else "left")
    blocks = [*results["per_diagnosis"].items(), ("overall", results["overall"])]
    for name, block in blocks:
        table.add_row(escape(name), str(block["n"]), _fmt(block["ida"]), _fmt(block["gt_rda"]), _fmt(block.get("decision_acc") or {}),
                      _fmt(block["completion"]), _fmt(block["depth"]), str(block["turns"]["errors"]),
                      style="bold" if name == "overall" else None)
    console = Console()
    console.print(table)
    stages = Table(title="per-stage accuracy (overall)")
    stages.add_column("stage")
    stages.add_column("accuracy [95% CI]", justify="right")
    stages.add_column("n", justify="right")
    for key, metric in results["overall"]["stages"].items():
        stages.add_row(key, _fmt(metric), str(metric["n"]))
    console.print(stages)
    print_epochs(results, console)
    print_usage(results, console)
    if results.get("n_finished", 0) < results.get("n_items", 0):
        console.print(f"[yellow]{results['n_finished']} of {results['n_items']} samples finished; rerun to resume[/]")

