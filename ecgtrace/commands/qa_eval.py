"""``ecgtrace qa-eval DIR/qa.jsonl --model M --run RUNDIR``: score a model on a Holter QA dataset."""

from __future__ import annotations

import argparse

from ecgtrace.commands._model_options import add_model_options

HELP = "Score a model on a QA dataset: closed accuracy, ScoreMAE, timestamp F1, ROUGE-L, report statistics (resumable)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("qa", help="qa.jsonl (or the folder holding it)")
    add_model_options(parser, model_required=False)
    parser.add_argument("--answers", default=None, metavar="FILE",
                        help="score answers given before instead of asking a model: a run folder (or its samples.jsonl: scored again, "
                             "e.g. after a scorer fix), JSON Lines of {id, answer}, or Holtercare-style items (qa_pair.answer)")
    parser.add_argument("--judge", default=None, metavar="MODEL",
                        help="LLM judge for free-text and report answers (openai:<model>), scored with rubrics/judges/*.yaml")
    parser.add_argument("--judge-base-url", default=None, help="endpoint of the judge (default: --base-url)")
    parser.add_argument("--judge-rubrics", default=None, metavar="DIR", help="folder of judge rubric YAML files (default: built-in)")
    parser.add_argument("--video-as", choices=("frames", "video_url"), default="frames",
                        help="--modality video: send frames as images (default; any vision model) or the MP4 as video_url (servers that take video)")
    parser.add_argument("--video-fps", type=float, default=1.0, metavar="F", help="--modality video, frames: frames sent per second of video (default 1)")
    parser.add_argument("--video-frames", type=int, default=8, metavar="N", help="--modality video, frames: at most N frames per item (default 8)")
    parser.add_argument("--skip-unavailable", action="store_true",
                        help="leave out items that cannot be shown in --modality (e.g. annotation-only records have no image) instead of stopping")


def run(args: argparse.Namespace) -> int:
    import asyncio

    from rich.console import Console

    from ecgtrace.agents.exam.qa_runner import identity_for, run_qa
    from ecgtrace.commands._model_options import (ask_at_terminal, check_model_options, make_model, pricing_of, prompt_budget_of,
                                                  progress_counts, report_skipped, run_settings, run_with_progress,
                                                  text_encoding_of)
    from ecgtrace.runlog import RunDir

    check_model_options(args)
    encoding, pricing = text_encoding_of(args), pricing_of(args)
    console = Console(stderr=True)
    if args.answers:
        return _score_answers(args, console)
    if not args.model:
        from ecgtrace.errors import EcgTraceError

        raise EcgTraceError("qa-eval needs --model (the model to ask) or --answers (answers given before)")
    examinee = make_model(args)
    qa, items, skipped = _load_items(args, console, reads_ecg=examinee.reads_ecg)
    video = _video_settings(args)
    judge, rubrics = _judge(args)
    budget = prompt_budget_of(args, examinee)
    identity = identity_for(qa, model=args.model, modality=args.modality, seed=args.seed, max_tokens=args.max_tokens, judge=args.judge,
                            temperature=args.temperature, text_encoding=encoding)
    if video is not None:
        identity["video"] = video.to_json()
    if args.skip_unavailable:
        identity["skip_unavailable"] = True
    if rubrics:
        identity["judge_rubrics"] = sorted({f"{r.id}@{r.version}" for r in rubrics.values()})
    run_dir = RunDir.open(args.run, identity, run_settings(args, qa.path, judge_base_url=args.judge_base_url), kind="qa")
    total, done_before = progress_counts(run_dir, items, args.epochs)

    def evaluate(on_sample):  # noqa: ANN001, ANN202
        return asyncio.run(run_qa(qa, run_dir, examinee, modality=args.modality, concurrency=args.concurrency, items=items,
                                  judge=judge, rubrics=rubrics, on_sample=on_sample, ask_human=ask_at_terminal(console),
                                  encoding=encoding, budget=budget, epochs=args.epochs, seed=args.seed, pricing=pricing, video=video))

    results = run_with_progress(evaluate, console=console, label="qa-eval", total=total, done=done_before,
                                quiet=args.quiet or examinee.interactive)
    report_skipped(results, console)  # an error when nothing was asked
    if not args.quiet:
        print_results(results, title=f"{args.model} - {args.modality}")
    return 0


def _score_answers(args: argparse.Namespace, console) -> int:  # noqa: ANN001
    """``--answers``: score recorded answers through the QA pipeline; no model is asked (a run's judge verdicts are replayed too).

    A run's own answers are scored as that run asked them: its items, epochs, modality, seed (option order), text
    encoding and token budget, so its ``results.json`` comes back byte for byte unless the scoring changed.
    """
    import asyncio

    from ecgtrace.agents.exam.qa_runner import answers_identity, run_qa
    from ecgtrace.agents.exam.replay import ReplayExaminee, ReplayJudge, read_answers
    from ecgtrace.commands._model_options import pricing_of, progress_counts, run_settings, run_with_progress, select
    from ecgtrace.contracts.datasets import load_items
    from ecgtrace.errors import EcgTraceError
    from ecgtrace.runlog import RunDir
    from ecgtrace.tools.text_encodings import TextEncoding

    if args.model:
        raise EcgTraceError("--answers scores answers given before: it takes no --model")
    qa = load_items(args.qa, "qa")
    answers = read_answers(args.answers, [it.to_json() for it in qa.items], dataset_dir=qa.base_dir)
    if answers.left_out and not args.quiet:
        console.print(f"left out {sum(answers.left_out.values())} answer(s) to items not in the dataset: "
                      + ", ".join(f"{n} {why}" for why, n in sorted(answers.left_out.items())))
    if answers.from_run and args.judge:
        raise EcgTraceError("--answers from a run replays that run's judge verdicts: leave out --judge")
    identity = answers_identity(qa, answers, limit=args.limit, judge=args.judge)
    if answers.from_run:
        if args.limit is not None or args.sample_id or args.epochs != 1:
            raise EcgTraceError("--answers from a run scores the samples that run asked: leave out --limit, --sample-id and --epochs")
        asked = answers.item_ids()
        items, epochs, seed = [it for it in qa.items if it.id in asked], answers.epochs(), int(identity.get("seed") or 0)
        modality, encoding = identity.get("modality") or args.modality, TextEncoding.from_json(identity.get("text_encoding"))
    else:
        items, epochs, seed = select(list(qa.items), args, stratum_of=lambda it: it.task), args.epochs, args.seed
        modality, encoding = args.modality, TextEncoding()
    judge, rubrics = (ReplayJudge(answers), _rubrics_of(args)) if answers.from_run and identity.get("judge") else _judge(args)
    if rubrics and identity.get("judge"):
        identity["judge_rubrics"] = sorted({f"{r.id}@{r.version}" for r in rubrics.values()})
    settings = {**run_settings(args, qa.path, judge_base_url=args.judge_base_url), "answers": answers.describe()}
    run_dir = RunDir.open(args.run, identity, settings, kind="qa")
    examinee = ReplayExaminee(answers, name=str(identity.get("model") or "answers"))
    total, done_before = progress_counts(run_dir, items, epochs)

    def evaluate(on_sample):  # noqa: ANN001, ANN202
        return asyncio.run(run_qa(qa, run_dir, examinee, modality=modality, concurrency=args.concurrency, items=items, judge=judge,
                                  rubrics=rubrics, on_sample=on_sample, replay=answers, encoding=encoding, budget=_recorded_budget(answers),
                                  epochs=epochs, seed=seed, pricing=pricing_of(argparse.Namespace(**{**vars(args), "model": identity.get("model")}))))

    results = run_with_progress(evaluate, console=console, label="qa-eval --answers", total=total, done=done_before, quiet=args.quiet)
    if not args.quiet:
        print_results(results, title=f"answers from {answers.path}")
    return 0


def _recorded_budget(answers):  # noqa: ANN001, ANN202
    """The token budget the recorded run checked its prompts against (its results.json), so the replay's results say the same."""
    import json

    from ecgtrace.agents.exam.budget import PromptBudget

    if not answers.from_run or not (answers.path.parent / "results.json").is_file():
        return None
    try:
        recorded = (json.loads((answers.path.parent / "results.json").read_text(encoding="utf-8")).get("skipped") or {}).get("budget")
    except ValueError:
        return None
    return PromptBudget(int(recorded["max_prompt_tokens"]), str(recorded["source"])) if isinstance(recorded, dict) else None


def _rubrics_of(args: argparse.Namespace):  # noqa: ANN202
    from pathlib import Path

    return _rubrics(Path(args.judge_rubrics) if args.judge_rubrics else None)


def _load_items(args: argparse.Namespace, console, *, reads_ecg: bool = True):  # noqa: ANN001, ANN202
    """The QA set, the items this run asks (``--sample-id``, ``--limit`` by task), and the ids left out because ``--modality`` cannot show them.

    ``reads_ecg=False`` (a baseline that never looks at the ECG) takes items without any ECG too, asked by their question alone.
    """
    from ecgtrace.agents.exam.messages import check_modality
    from ecgtrace.agents.exam.video_parts import video_path
    from ecgtrace.commands._model_options import select
    from ecgtrace.contracts.datasets import load_items
    from ecgtrace.errors import EcgTraceError

    qa = load_items(args.qa, "qa")
    chosen = select(list(qa.items), args, stratum_of=lambda it: it.task)
    skipped: set[str] = set()
    for item in chosen:
        try:
            if item.record is None and not item.messages:
                if not reads_ecg:
                    continue
                raise EcgTraceError(f"item {item.id!r} has no ECG to show (record: null, e.g. imported from Holtercare-Bench, "
                                    "which releases no signals): score answers given before with --answers FILE")
            if args.modality == "video":
                video_path(item, qa.base_dir)
            else:
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


def _video_settings(args: argparse.Namespace):  # noqa: ANN202
    """How ``--modality video`` sends the video (None for other modalities)."""
    from ecgtrace.agents.exam.video_parts import VideoSettings
    from ecgtrace.errors import EcgTraceError

    if args.modality != "video":
        return None
    if args.video_fps <= 0 or args.video_frames < 1:
        raise EcgTraceError(f"--video-fps must be positive and --video-frames at least 1, got {args.video_fps:g} and {args.video_frames}")
    return VideoSettings(send=args.video_as, fps=float(args.video_fps), max_frames=int(args.video_frames))


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
    if not results.get("complete", True):
        console.print(f"[yellow]{results['n_finished']} of {results['n_items']} samples finished; rerun to resume[/]")
