"""``ecgtrace audit DIR/audit.jsonl --model M --run RUNDIR``: turn-by-turn reasoning audit of a model."""

from __future__ import annotations

import argparse

from ecgtrace.contracts.vocabulary import EXAM_MODES

from ecgtrace.commands._model_options import add_model_options

HELP = "Audit a model's ECG reasoning turn by turn (resumable: rerun the same command to continue)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ecgtrace.commands._exam_run import add_retry_option
    from ecgtrace.commands._exam_shards import add_shard_options
    from ecgtrace.commands._output import add_json_option

    parser.add_argument("audit", help="audit.jsonl (or the folder holding it)")
    add_model_options(parser, model_required=False)
    parser.add_argument("--answers", default=None, metavar="RUN",
                        help="score a run's recorded answers again (its folder or samples.jsonl) instead of asking a model, "
                             "e.g. after a scorer fix; JSON Lines of {id, answers: [one per turn]} work too")
    parser.add_argument("--mode", choices=EXAM_MODES, default="teacher",
                        help="teacher: ground truth enters the history after each turn; stop: the chain stops at the first error")
    parser.add_argument("--prompt-style", choices=("lettered", "erb"), default="lettered",
                        help="lettered: options as 'A. ...', answered by letter (default); erb: ERB's layout, full option texts, no letters")
    parser.add_argument("--condensed", action="store_true",
                        help="show a question's options only while it is asked; earlier questions stay in the chat as their text (ERB's condensed chat)")
    add_retry_option(parser)
    add_shard_options(parser)
    parser.add_argument("--keep-checkpoints", action="store_true",
                        help="keep finished samples' LangGraph threads in RUNDIR/checkpoints.sqlite (default: dropped once in samples.jsonl)")
    add_json_option(parser, "results.json")


def run(args: argparse.Namespace) -> int:
    import asyncio

    from ecgtrace.commands._exam_run import announce, examine, finish, prepare_run
    from ecgtrace.commands._model_options import (ask_at_terminal, check_model_options, make_model, pricing_of, prompt_budget_of,
                                                  report_skipped, run_settings, run_with_progress, text_encoding_of)
    from ecgtrace.commands._output import make_console
    from ecgtrace.contracts.runs import sample_key
    from ecgtrace.graphs.audit_runner import run_audit

    check_model_options(args)
    if args.answers:
        return _score_answers(args)
    if not args.model:
        from ecgtrace.errors import EcgTraceError

        raise EcgTraceError("audit needs --model (the model to ask) or --answers (a run's answers, scored again)")
    encoding, pricing = text_encoding_of(args), pricing_of(args)
    audit, items = _load_items(args)
    examinee = make_model(args)
    ids = {sample_key(it.id, epoch) for epoch in range(args.epochs) for it in items}
    console = make_console(stderr=True)
    prepared = prepare_run(args, identity_of(audit, args), run_settings(args, audit.path), kind="audit", item_ids=ids,
                           examinees=[("model", examinee)])
    run_dir = prepared.run_dir
    announce(prepared, args, len(ids), console)
    budget = prompt_budget_of(args, examinee) if prepared.todo else None  # asks the server for its context: only when needed

    def audit_now(on_sample):  # noqa: ANN001, ANN202
        return asyncio.run(run_audit(audit, run_dir, examinee, mode=args.mode, modality=args.modality,
                                     prompt_style=args.prompt_style, condensed=args.condensed, concurrency=args.concurrency, items=items, on_sample=on_sample,
                                     ask_human=ask_at_terminal(console), keep_checkpoints=args.keep_checkpoints,
                                     restart=prepared.retried, encoding=encoding, budget=budget, epochs=args.epochs,
                                     seed=args.seed, pricing=pricing))

    audit_now = examine(args, prepared, audit_now, command="audit", item_order=[it.id for it in items], examinee=examinee)
    results = run_with_progress(audit_now, console=console, label="audit", total=len(ids), done=prepared.done_before,
                                quiet=args.quiet or examinee.interactive or prepared.todo == 0)
    report_skipped(results, console)  # an error when nothing was asked
    style = args.prompt_style + (", condensed" if args.condensed else "")
    return finish(prepared, ids, results, args, console, print_results, f"{args.model} - {args.mode} - {args.modality} - {style}")


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


def _score_answers(args: argparse.Namespace) -> int:
    """``--answers``: the audit graph again, every turn answered from the recorded replies (no model is asked).

    A run's own answers keep its identity, items, mode, modality, prompt style, seed, text encoding and token
    budget, so its results come back unchanged unless the scoring changed; a turn the recorded chain never
    reached (``stop`` mode, a verdict that changed) gets "no recorded answer".
    """
    import asyncio

    from ecgtrace.agents.audit.format import load_audit
    from ecgtrace.agents.exam.replay import AnswersError, ReplayExaminee, read_answers
    from ecgtrace.commands._model_options import pricing_of, progress_counts, run_settings, run_with_progress, select
    from ecgtrace.commands._output import make_console
    from ecgtrace.commands.qa_eval import _recorded_budget, print_replayed
    from ecgtrace.errors import EcgTraceError
    from ecgtrace.graphs.audit_runner import run_audit
    from ecgtrace.runlog import RunDir
    from ecgtrace.tools.text_encodings import TextEncoding

    if args.model:
        raise EcgTraceError("--answers scores answers given before: it takes no --model")
    audit = load_audit(args.audit)
    answers = read_answers(args.answers, [it.to_json() for it in audit.items])
    if answers.header is not None:
        identity = dict(answers.header["identity"])
        if answers.header.get("kind") != "audit" or identity.get("dataset_sha256") != audit.sha256:
            raise AnswersError(f"--answers {answers.path}: not a run of this audit set (kind {answers.header.get('kind')!r}, "
                               f"dataset {str(identity.get('dataset_sha256'))[:12]}...)")
        if answers.epochs() > 1:
            raise AnswersError(f"--answers {answers.path}: replaying an audit run of {answers.epochs()} epochs is not supported (only --epochs 1)")
        asked = answers.item_ids()
        items = [it for it in audit.items if it.id in asked]
        cfg = {"mode": identity.get("mode", "teacher"), "modality": identity.get("modality", args.modality),
               "prompt_style": identity.get("prompt_style", "lettered"), "condensed": bool(identity.get("condensed")),
               "encoding": TextEncoding.from_json(identity.get("text_encoding")), "seed": int(identity.get("seed") or 0)}
    else:
        items = select(list(audit.items), args, stratum_of=lambda it: it.diagnosis)
        cfg = {"mode": args.mode, "modality": args.modality, "prompt_style": args.prompt_style, "condensed": bool(args.condensed),
               "encoding": TextEncoding(), "seed": args.seed}
        identity = {"dataset_sha256": audit.sha256, "dataset_items": len(audit.items), "model": None, "answers_sha256": answers.sha256,
                    "modality": cfg["modality"], "mode": cfg["mode"], "prompt_style": cfg["prompt_style"], "condensed": cfg["condensed"],
                    "seed": cfg["seed"], "prompt_version": identity_of(audit, args)["prompt_version"]}
    console = make_console(stderr=True)
    run_dir = RunDir.open(args.run, identity, {**run_settings(args, audit.path), "answers": answers.describe()}, kind="audit")
    examinee = ReplayExaminee(answers, name=str(identity.get("model") or "answers"))
    total, done_before = progress_counts(run_dir, items, 1)

    def audit_now(on_sample):  # noqa: ANN001, ANN202
        return asyncio.run(run_audit(audit, run_dir, examinee, concurrency=args.concurrency, items=items, on_sample=on_sample,
                                     keep_checkpoints=args.keep_checkpoints, budget=_recorded_budget(answers), pricing=pricing_of(argparse.Namespace(**{**vars(args), "model": identity.get("model")})), **cfg))

    results = run_with_progress(audit_now, console=console, label="audit --answers", total=total, done=done_before,
                                quiet=args.quiet or args.json)
    print_replayed(results, args, print_results, f"answers from {answers.path} - {cfg['mode']} - {cfg['modality']}")
    return 0


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


def print_results(results: dict, title: str = "", console=None) -> None:  # noqa: ANN001
    """Two tables that fit 80 columns: one row per diagnosis plus overall, then per-stage accuracy."""
    from rich.markup import escape

    from ecgtrace.commands._output import INTERVAL_NOTE, add_columns, make_console, metric_cell, new_table

    console = console or make_console()
    table = new_table(f"reasoning audit {title}".strip(), caption=f"{INTERVAL_NOTE} Dec.: every decision turn. err: turns the server never answered.")
    add_columns(table, ("diagnosis", "n", "IDA", "GT-RDA", "Dec.", "Compl.", "Depth", "err"), left=("diagnosis",))
    blocks = [*results["per_diagnosis"].items(), ("overall", results["overall"])]
    for name, block in blocks:
        if name == "overall":
            table.add_section()
        table.add_row(escape(name), str(block["n"]), metric_cell(block["ida"]), metric_cell(block["gt_rda"]),
                      metric_cell(block.get("decision_acc") or {}), metric_cell(block["completion"]), metric_cell(block["depth"], pct=False), str(block["turns"]["errors"]),
                      style="bold" if name == "overall" else None)
    console.print(table)
    print_stages(results["overall"]["stages"], console)
    from ecgtrace.commands._model_options import print_epochs, print_usage

    print_epochs(results, console)
    print_usage(results, console)
    if not results.get("complete", True):
        console.print(f"[yellow]{results['n_finished']} of {results['n_items']} samples finished; rerun to resume[/]")


def print_stages(stages: dict, console) -> None:  # noqa: ANN001
    from ecgtrace.commands._output import add_columns, fmt_interval, fmt_pct, new_table

    table = new_table("per-stage accuracy (overall)")
    add_columns(table, ("stage", "accuracy", "95% CI", "k/n"), left=("stage",))
    for key, metric in stages.items():
        table.add_row(key, fmt_pct(metric["value"]), fmt_interval(metric), f"{metric.get('k', '-')}/{metric['n']}")
    console.print(table)
