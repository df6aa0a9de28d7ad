"""``ecgtrace qa-eval DIR/qa.jsonl --model M --run RUNDIR``: score a model on a Holter QA dataset."""

from __future__ import annotations

import argparse

from ecgtrace.commands._model_options import add_model_options

HELP = "Score a model on a QA dataset: closed accuracy, ScoreMAE, timestamp F1, ROUGE-L, report statistics (resumable)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ecgtrace.commands._exam_run import add_retry_option
    from ecgtrace.commands._output import add_json_option

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
    add_retry_option(parser)
    from ecgtrace.commands._exam_shards import add_shard_options

    add_shard_options(parser)
    add_json_option(parser, "results.json")


def run(args: argparse.Namespace) -> int:
    import asyncio

    from ecgtrace.agents.exam.qa_runner import identity_for, run_qa
    from ecgtrace.commands._exam_run import announce, examine, finish, prepare_run
    from ecgtrace.commands._model_options import (ask_at_terminal, check_model_options, make_model, pricing_of, prompt_budget_of,
                                                  report_skipped, run_settings, run_with_progress, text_encoding_of)
    from ecgtrace.commands._output import make_console
    from ecgtrace.contracts.runs import sample_key

    check_model_options(args)
    encoding, pricing = text_encoding_of(args), pricing_of(args)
    console = make_console(stderr=True)
    if args.answers:
        return _score_answers(args, console)
    if not args.model:
        from ecgtrace.errors import EcgTraceError

        raise EcgTraceError("qa-eval needs --model (the model to ask) or --answers (answers given before)")
    examinee = make_model(args)
    qa, items, skipped = _load_items(args, console, reads_ecg=examinee.reads_ecg)
    video = _video_settings(args)
    judge, rubrics = _judge(args)
    identity = identity_for(qa, model=args.model, modality=args.modality, seed=args.seed, max_tokens=args.max_tokens, judge=args.judge,
                            temperature=args.temperature, text_encoding=encoding)
    if video is not None:
        identity["video"] = video.to_json()
    if args.skip_unavailable:
        identity["skip_unavailable"] = True
    if rubrics:
        identity["judge_rubrics"] = sorted({f"{r.id}@{r.version}" for r in rubrics.values()})
    ids = {sample_key(it.id, epoch) for epoch in range(args.epochs) for it in items}
    prepared = prepare_run(args, identity, run_settings(args, qa.path, judge_base_url=args.judge_base_url), kind="qa",
                           item_ids=ids, examinees=[("model", examinee), ("judge", judge)] if judge else [("model", examinee)])
    run_dir = prepared.run_dir
    announce(prepared, args, len(ids), console)
    budget = prompt_budget_of(args, examinee) if prepared.todo else None  # asks the server for its context: only when needed

    def evaluate(on_sample):  # noqa: ANN001, ANN202
        return asyncio.run(run_qa(qa, run_dir, examinee, modality=args.modality, concurrency=args.concurrency, items=items,
                                  judge=judge, rubrics=rubrics, on_sample=on_sample, ask_human=ask_at_terminal(console),
                                  encoding=encoding, budget=budget, epochs=args.epochs, seed=args.seed, pricing=pricing, video=video))

    evaluate = examine(args, prepared, evaluate, command="qa_eval", item_order=[it.id for it in items], examinee=examinee)
    results = run_with_progress(evaluate, console=console, label="qa-eval", total=len(ids), done=prepared.done_before,
                                quiet=args.quiet or examinee.interactive or prepared.todo == 0)
    report_skipped(results, console)  # an error when nothing was asked
    return finish(prepared, ids, results, args, console, print_results, f"{args.model} - {args.modality}")


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

    results = run_with_progress(evaluate, console=console, label="qa-eval --answers", total=total, done=done_before,
                                quiet=args.quiet or args.json)
    print_replayed(results, args, print_results, f"answers from {answers.path}")
    return 0


def print_replayed(results: dict, args: argparse.Namespace, print_results, title: str) -> None:  # noqa: ANN001
    """Results of scored answers as JSON (``--json``) or tables; a missing answer is scored wrong, no server failed."""
    if args.json:
        from ecgtrace.commands._output import print_json

        print_json(results)
    elif not args.quiet:
        print_results(results, title=title)


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


#: Short metric names in the table, and what each means (printed under it).
METRIC_LEGEND = {
    "acc": "accuracy (closed: one option; open diagnosis: the label)",
    "ScoreMAE": "100 / (1 + exp((MAE - mu) / sigma)) per quantity, with its MAE",
    "F1": "timestamp F1 within the tolerance (micro), then the mean per item",
    "fields": "report statistics within tolerance, then the hallucination rate",
    "ROUGE-L": "ROUGE-L F of free text",
}


def main_metric(block: dict) -> tuple[str, str]:
    """(short metric name, value lines) of one per-task block; the names are explained by :data:`METRIC_LEGEND`."""
    from ecgtrace.commands._output import fmt_interval, fmt_pct

    def with_ci(metric: dict) -> str:
        if not metric or metric.get("value") is None:
            return "-"
        return f"{fmt_pct(metric['value'])}\n{fmt_interval(metric)}"

    fam = block["family"]
    if fam == "numeric" and block.get("score_mae"):
        return "ScoreMAE", "\n".join(f"{v['score_mae']:.1f} (MAE {v['mae']:.3g})" for v in block["score_mae"].values())
    if fam == "timestamps":
        return "F1", f"{100 * block['micro']['f1']:.1f}%\nmean {with_ci(block['mean_f1'])}"
    if fam == "report":
        return "fields", f"{with_ci(block['field_accuracy'])}\nhalluc. {fmt_pct((block.get('hallucination_rate') or {}).get('value'))}"
    if fam == "text":
        return "ROUGE-L", with_ci(block["rouge_l"])
    return "acc", with_ci(block["accuracy"])


def _units(results: dict) -> list[str]:
    """``count_window: MAE in events`` for each ScoreMAE quantity in the table."""
    out = {}
    for block in results["per_task"].values():
        for key, v in (block.get("score_mae") or {}).items():
            out[key] = f"{key}: MAE in {v['unit']}"
    return list(out.values())


def print_results(results: dict, title: str = "", console=None) -> None:  # noqa: ANN001
    """One row per task plus overall, 80 columns wide; the judge column only when a judge scored something."""
    from rich.markup import escape
    from rich.text import Text

    from ecgtrace.commands._output import INTERVAL_NOTE, add_columns, make_console, metric_cell, new_table

    console = console or make_console()
    judged = any(block.get("judge") for block in results["per_task"].values())
    columns = ["task", "n", "metric", "value", "score", *(["judge"] if judged else []), "err", "pf"]
    used = sorted({main_metric(block)[0] for block in results["per_task"].values()})
    legend = "; ".join(f"{name}: {METRIC_LEGEND[name]}" for name in used if name in METRIC_LEGEND)
    caption = (f"{legend}. score: mean score 0-100. err: no answer from the server; pf: answer not parsed. "
               f"{INTERVAL_NOTE}" + (f" {'; '.join(_units(results))}." if _units(results) else ""))
    table = new_table(f"QA evaluation {title}".strip(), caption=escape(caption))
    add_columns(table, columns, left=("task", "metric"))
    for task, block in results["per_task"].items():
        name, value = main_metric(block)
        judge = block.get("judge")
        cells = [escape(task), str(block["n"]), name, Text(value), metric_cell(block["mean_score"], pct=False, digits=1)]
        if judged:
            cells.append(metric_cell(judge["score"], pct=False) if judge else Text("-"))
        table.add_row(*cells, str(block["errors"]), str(block["parse_failures"]))
    overall = results["overall"]
    table.add_section()
    table.add_row("overall", str(overall["n"]), "closed acc", metric_cell(overall["closed_accuracy"]),
                  metric_cell(overall["mean_score"], pct=False, digits=1), *([""] if judged else []), "", "", style="bold")
    console.print(table)
    from ecgtrace.commands._model_options import print_epochs, print_usage

    print_epochs(results, console)
    print_usage(results, console)
    if not results.get("complete", True):
        console.print(f"[yellow]{results['n_finished']} of {results['n_items']} samples finished; rerun to resume[/]")
