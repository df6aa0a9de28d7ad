"""``ecgtrace qa-eval DIR/qa.jsonl --model M --run RUNDIR``: score a model on a Holter QA dataset."""

from __future__ import annotations

import argparse

from ecgtrace.commands._model_options import add_model_options

HELP = "Score a model on a QA dataset: closed accuracy, ScoreMAE, timestamp F1, ROUGE-L, report statistics (resumable)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("qa", help="qa.jsonl (or the folder holding it)")
    add_model_options(parser)
    parser.add_argument("--judge", default=None, metavar="MODEL",
                        help="LLM judge for free-text and report answers (openai:<model>), scored with rubrics/judges/*.yaml")
    parser.add_argument("--judge-base-url", default=None, help="endpoint of the judge (default: --base-url)")
    parser.add_argument("--judge-rubrics", default=None, metavar="DIR", help="folder of judge rubric YAML files (default: built-in)")
    parser.add_argument("--skip-unavailable", action="store_true",
                        help="leave out items that cannot be shown in --modality (e.g. annotation-only records have no image) instead of stopping")


def run(args: argparse.Namespace) -> int:
    import asyncio

    from rich.console import Console

    from ecgtrace.agents.exam.qa_runner import identity_for, run_qa
    from ecgtrace.commands._model_options import (ask_at_terminal, check_model_options, make_model, pricing_of, prompt_budget_of,
                                                  progress_counts, report_server_failures, report_skipped, run_settings,
                                                  run_with_progress, samples_to_retry, text_encoding_of)
    from ecgtrace.runlog import RunDir

    check_model_options(args)
    encoding, pricing = text_encoding_of(args), pricing_of(args)
    console = Console(stderr=True)
    qa, items, skipped = _load_items(args, console)
    examinee = make_model(args)
    judge, rubrics = _judge(args)
    budget = prompt_budget_of(args, examinee)
    identity = identity_for(qa, model=args.model, modality=args.modality, seed=args.seed, max_tokens=args.max_tokens, judge=args.judge,
                            temperature=args.temperature, text_encoding=encoding)
    if args.skip_unavailable:
        identity["skip_unavailable"] = True
    if rubrics:
        identity["judge_rubrics"] = sorted({f"{r.id}@{r.version}" for r in rubrics.values()})
    run_dir = RunDir.open(args.run, identity, run_settings(args, qa.path, judge_base_url=args.judge_base_url), kind="qa")
    samples_to_retry(run_dir, args, console)
    total, done_before = progress_counts(run_dir, items, args.epochs)

    def evaluate(on_sample):  # noqa: ANN001, ANN202
        return asyncio.run(run_qa(qa, run_dir, examinee, modality=args.modality, concurrency=args.concurrency, items=items,
                                  judge=judge, rubrics=rubrics, on_sample=on_sample, ask_human=ask_at_terminal(console),
                                  encoding=encoding, budget=budget, epochs=args.epochs, seed=args.seed, pricing=pricing))

    results = run_with_progress(evaluate, console=console, label="qa-eval", total=total, done=done_before,
                                quiet=args.quiet or examinee.interactive)
    report_skipped(results, console)  # an error when nothing was asked
    if not args.quiet:
        print_results(results, title=f"{args.model} - {args.modality}")
    report_server_failures(results, console)  # an error when the server answered nothing
    return 0


def _load_items(args: argparse.Namespace, console):  # noqa: ANN001, ANN202
    """The QA set, the items this run asks (``--sample-id``, ``--limit`` by task), and the ids left out because ``--modality`` cannot show them."""
    from ecgtrace.agents.exam.messages import check_modality
    from ecgtrace.commands._model_options import select
    from ecgtrace.contracts.datasets import load_items
    from ecgtrace.errors import EcgTraceError

    qa = load_items(args.qa, "qa")
    chosen = select(list(qa.items), args, stratum_of=lambda it: it.task)
    skipped: set[str] = set()
    for item in chosen:
        try:
            check_modality(item, qa.base_dir, args.modality)
        except EcgTraceError:
            if not args.skip_unavailable:
                raise
            skipped.add(item.id)
    items = [it for it in chosen if it.id not in skipped]
    if not items:
        raise EcgTraceError(f"no item of {qa.path} can be shown with --modality {args.modality}")
    if skipped:
        console.print(f"[yellow]{len(skipped)} item(s) cannot be shown with --modality {args.modality}: left out[/]")
    return qa, items, skipped


def _judge(args: argparse.Namespace):  # noqa: ANN202
    """The LLM judge and its rubrics by task, with ``--judge``; (None, None) without."""
    from pathlib import Path

    from ecgtrace.commands._model_options import make_model

    if not args.judge:
        return None, None
    rubrics = _rubrics(Path(args.judge_rubrics) if args.judge_rubrics else None)
    return make_model(args, args.judge, base_url=args.judge_base_url, sampled=False), rubrics


def _rubrics(folder):  # noqa: ANN001, ANN202
    from ecgtrace.errors import RubricError
    from ecgtrace.rubrics.judge_schema import builtin_rubrics, load_rubric

    if folder is None:
        return builtin_rubrics()
    if not folder.is_dir():
        raise RubricError(f"--judge-rubrics {folder} is not a folder")
    out = {}
    for path in sorted(folder.glob("*.yaml")):
        rubric = load_rubric(path)
        for task in rubric.tasks:
            out[task] = rubric
    if not out:
        raise RubricError(f"--judge-rubrics {folder}: no *.yaml rubric files")
    return out


def main_metric(block: dict) -> tuple[str, str]:
    """(metric name, formatted value [95% CI]) of one per-task block."""
    fam = block["family"]
    if fam == "numeric" and block.get("score_mae"):
        parts = [f"{v['score_mae']:.1f} (MAE {v['mae']:.3g} {v['unit']})" for v in block["score_mae"].values()]
        return "ScoreMAE", "; ".join(parts)
    if fam == "timestamps":
        return "F1 (micro)", f"{100 * block['micro']['f1']:.1f}%  mean {_fmt(block['mean_f1'], pct=True)}"
    if fam == "report":
        return "fields within tolerance", _fmt(block["field_accuracy"], pct=True) + f"  halluc. {_fmt(block['hallucination_rate'], pct=True)}"
    if fam == "text":
        return "ROUGE-L F", _fmt(block["rouge_l"], pct=True)
    return "accuracy", _fmt(block["accuracy"], pct=True)


def _fmt(metric: dict, pct: bool = False) -> str:
    if not metric or metric.get("value") is None:
        return "-"
    k = 100.0 if pct else 1.0
    lo, hi = metric["ci95"]
    unit = "%" if pct else ""
    return f"{k * metric['value']:.1f}{unit} [{k * lo:.1f}, {k * hi:.1f}]"


def print_results(results: dict, title: str = "") -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"QA evaluation {title}".strip())
    for column in ("task", "n", "metric", "value [95% CI]", "mean score", "judge", "errors", "parse fail"):
        table.add_column(column, justify="left" if column in ("task", "metric") else "right")
    for task, block in results["per_task"].items():
        name, value = main_metric(block)
        judge = block.get("judge")
        table.add_row(task, str(block["n"]), name, value, _fmt(block["mean_score"]),
                      _fmt(judge["score"]) if judge else "-", str(block["errors"]), str(block["parse_failures"]))
    overall = results["overall"]
    table.add_row("overall", str(overall["n"]), "closed accuracy", _fmt(overall["closed_accuracy"], pct=True), _fmt(overall["mean_score"]),
                  "", "", "", style="bold")
    console = Console()
    console.print(table)
    from ecgtrace.commands._model_options import print_epochs, print_usage

    print_epochs(results, console)
    print_usage(results, console)
    if results.get("n_finished", 0) < results.get("n_items", 0):
        console.print(f"[yellow]{results['n_finished']} of {results['n_items']} samples finished; rerun to resume[/]")
