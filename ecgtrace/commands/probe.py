"""``ecgtrace probe DATASET --model M --run RUNDIR``: counterfactual grounding probes (does the answer follow the evidence?)."""

from __future__ import annotations

import argparse

from ecgtrace.commands._model_options import add_model_options
from ecgtrace.contracts.vocabulary import COUNTERFACTUAL_KINDS, EXAM_MODES

HELP = ("Edit the evidence in the signal (remove, move, swap, control) and check that the model's answer follows it "
        "(sensitivity, grounded accuracy, localization follow, invariance); resumable.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", metavar="DATASET", help="dataset folder holding audit.jsonl and/or qa.jsonl (or one of those files); only read")
    add_model_options(parser)
    from ecgtrace.commands._exam_run import add_retry_option

    add_retry_option(parser)  # the failure report tells the user to rerun with it
    parser.add_argument("--kinds", default=",".join(COUNTERFACTUAL_KINDS), help=f"comma-separated counterfactual kinds (default: {','.join(COUNTERFACTUAL_KINDS)})")
    parser.add_argument("--probe-set", default=None, metavar="DIR",
                        help="folder of the counterfactual set: built there once, reused by later runs with the same dataset and settings "
                             "(default RUNDIR/probe-set)")
    parser.add_argument("--max-per-group", type=int, default=2, metavar="N",
                        help="originals per diagnosis and label, and per QA task and finding (default 2)")
    parser.add_argument("--originals", type=int, default=None, metavar="N", help="at most N originals per dataset file (default: all chosen)")
    parser.add_argument("--only", default=None, metavar="NAMES",
                        help="comma-separated diagnoses (audit) and QA tasks to take originals from, e.g. pvc,sinus_pause,closed_presence")
    parser.add_argument("--probe-seed", type=int, default=0, help="seed of the counterfactual set (default 0; --seed seeds the random examinee)")
    parser.add_argument("--mode", choices=EXAM_MODES, default="teacher", help="audit conversation mode (default teacher)")
    parser.add_argument("--keep-checkpoints", action="store_true", help="keep finished audit samples' threads in RUNDIR/checkpoints.sqlite")
    parser.add_argument("--all", action="store_true", help="also print the per-diagnosis, per-task and per-stage tables")
    from ecgtrace.commands._exam_shards import add_shard_options
    from ecgtrace.commands._output import add_json_option

    add_shard_options(parser)

    add_json_option(parser, "results.json")


def identity_of(probe_ident: dict, args: argparse.Namespace) -> dict:
    """What decides a probe run's results (a rerun with anything else is refused).

    Which originals are asked and how often (``--limit``, ``--sample-id``, ``--epochs``) are not in it: a run folder grows.
    """
    from ecgtrace.agents.audit.examiner import PROMPT_VERSION
    from ecgtrace.agents.exam.qa_runner import QA_PROMPT_VERSION
    from ecgtrace.agents.exam.qa_scoring import SCORING_VERSION
    from ecgtrace.agents.exam.run_control import SHUFFLE_VERSION
    from ecgtrace.agents.probe.metrics import PROBE_METRICS_VERSION
    from ecgtrace.commands._model_options import text_encoding_of

    return {"kind": "probe", "probe_set": probe_ident, "model": args.model, "modality": args.modality, "mode": args.mode, "seed": args.seed,
            "max_tokens": args.max_tokens, "temperature": args.temperature, "prompt_version": PROMPT_VERSION,
            "qa_prompt_version": QA_PROMPT_VERSION, "scoring_version": SCORING_VERSION, "metrics_version": PROBE_METRICS_VERSION,
            "text_encoding": text_encoding_of(args).to_json() if args.modality in ("text", "both") else None, "option_shuffle": SHUFFLE_VERSION}


def run(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from ecgtrace.agents.probe.builder import check_kinds, identity
    from ecgtrace.commands._exam_run import announce, examine, finish
    from ecgtrace.commands._model_options import (ask_at_terminal, check_model_options, make_model, pricing_of, prompt_budget_of,
                                                  report_skipped, run_with_progress, text_encoding_of)
    from ecgtrace.commands._output import make_console
    from ecgtrace.contracts.runs import sample_key
    from ecgtrace.errors import EcgTraceError
    from ecgtrace.graphs.probe_runner import run_probe

    check_model_options(args)
    for name, value in (("--max-per-group", args.max_per_group), ("--originals", args.originals)):
        if value is not None and value < 1:
            raise EcgTraceError(f"{name} must be at least 1, got {value}")
    only = [x.strip() for x in (args.only or "").split(",") if x.strip()] or None
    if not Path(args.dataset).exists():
        raise EcgTraceError(f"dataset not found: {args.dataset}")
    kinds = check_kinds([k.strip() for k in args.kinds.split(",") if k.strip()])
    encoding, pricing = text_encoding_of(args), pricing_of(args)
    probe_ident = identity(args.dataset, kinds=kinds, seed=args.probe_seed, max_per_group=args.max_per_group, limit=args.originals, only=only)
    console = make_console(stderr=True)
    examinee = make_model(args)
    prepared, probe, entries = _open_and_build(args, identity_of(probe_ident, args), examinee, console,
                                               dict(kinds=kinds, seed=args.probe_seed, max_per_group=args.max_per_group, limit=args.originals, only=only))
    ids = {sample_key(e.id, epoch) for epoch in range(args.epochs) for e in entries}
    announce(prepared, args, len(ids), console)
    budget = prompt_budget_of(args, examinee) if prepared.todo else None  # asks the server for its context: only when needed

    def probe_now(on_sample):  # noqa: ANN001, ANN202
        return asyncio.run(run_probe(probe, prepared.run_dir, examinee, mode=args.mode, modality=args.modality, concurrency=args.concurrency,
                                     entries=entries, on_sample=on_sample, ask_human=ask_at_terminal(console), keep_checkpoints=args.keep_checkpoints,
                                     encoding=encoding, budget=budget, epochs=args.epochs, seed=args.seed, pricing=pricing))

    to_original = {p["id"]: p["original"] for p in probe.pairs if p["status"] == "kept"}
    probe_now = examine(args, prepared, probe_now, command="probe", item_order=[e.id for e in entries], examinee=examinee,
                        group_of=lambda item_id: to_original.get(item_id, item_id),  # a pair is asked in one shard
                        shard_overrides={"probe_set": str(Path(probe.root).resolve())})  # the set the driver built, not one per shard
    results = run_with_progress(probe_now, console=console, label="probe", total=len(ids), done=prepared.done_before,
                                quiet=args.quiet or examinee.interactive or prepared.todo == 0)
    report_skipped(results, console)  # an error when nothing was asked
    return finish(prepared, ids, results, args, console, lambda res, title: print_results(res, title=title, everything=args.all),
                  f"{args.model} - {args.modality}")


def _open_and_build(args: argparse.Namespace, ident: dict, examinee, console, build: dict):  # noqa: ANN001, ANN202
    """``(prepared run, probe set, entries)``: the set built (or reused) and the run opened after the endpoint check.

    A set that goes into a new run folder (no ``--probe-set``) needs the folder first, so the run is opened
    (after the endpoint check) before the set is built; otherwise the set comes first and the run is opened
    knowing every sample it covers, so a finished run needs no server.
    """
    import dataclasses
    from pathlib import Path

    from ecgtrace.agents.exam.messages import check_modality
    from ecgtrace.agents.probe.builder import build_probe_set
    from ecgtrace.commands._exam_run import prepare_run
    from ecgtrace.commands._model_options import run_settings
    from ecgtrace.contracts.runs import sample_key
    from ecgtrace.errors import EcgTraceError
    from ecgtrace.graphs.probe_runner import load_probe_set, select_originals
    from ecgtrace.runlog import HEADER

    settings = run_settings(args, args.dataset, probe_set=args.probe_set)
    folder = Path(args.probe_set) if args.probe_set else Path(args.run) / "probe-set"
    prepared = None
    if args.probe_set is None and not (Path(args.run) / HEADER).is_file():
        prepared = prepare_run(args, ident, settings, kind="probe", item_ids={"(probe set not built yet)"}, examinees=[("model", examinee)])
    with console.status(f"building the counterfactual set in {folder} (reused when it exists) ...") as status:
        build_probe_set(args.dataset, folder, **build, progress=None if args.quiet else lambda text: status.update(f"counterfactuals: {text}"))
    probe = load_probe_set(folder)
    entries = probe.entries(chosen=select_originals(probe, seed=args.seed, limit=args.limit, sample_ids=args.sample_id))
    if not entries:
        raise EcgTraceError(f"{folder}: no counterfactual was kept (see {folder / 'pairs.jsonl'} for why each was dropped)")
    for entry in entries:
        check_modality(entry.item, probe.root, args.modality)
    ids = {sample_key(e.id, epoch) for epoch in range(args.epochs) for e in entries}
    if prepared is None:
        prepared = prepare_run(args, ident, settings, kind="probe", item_ids=ids, examinees=[("model", examinee)])
    else:
        prepared = dataclasses.replace(prepared, todo=len(ids), done_before=0)
    return prepared, probe, entries


#: The metrics of a probe table, in row order: (key, name).
METRICS = (("sensitivity", "sensitivity"), ("grounded_accuracy", "grounded acc."), ("localization_follow", "loc. follow"),
           ("invariance", "invariance"), ("accuracy_original", "acc. original"), ("accuracy_counterfactual", "acc. counterf."))
#: Printed under every probe table: what each number means and where chance lies.
LEGEND = ("sensitivity: the answer changes when the evidence is removed or the opposite window is shown (same question, same options); "
          "grounded accuracy: right on the original and on its counterfactual; localization follow: the span chosen moves with a moved "
          "event; invariance: the answer stays when a normal beat is replaced by another. Each value has its 95% Wilson interval; the row "
          "under it is chance, the level of a uniform random answerer. An examinee that never reads the ECG scores 0% sensitivity and "
          "100% invariance: only sensitivity and follow well above chance show that the answers rest on the trace.")


def cell(metric: dict) -> str:
    """``83.3% [55-95]``: the value and its Wilson interval; ``-`` without units."""
    if not metric or metric.get("value") is None:
        return "-"
    lo, hi = metric["ci95"]
    return f"{100 * metric['value']:.1f}% [{100 * lo:.0f}-{100 * hi:.0f}]"


def chance_cell(metric: dict) -> str:
    return "-" if not metric or metric.get("chance") is None or metric.get("value") is None else f"{100 * metric['chance']:.1f}%"


def probe_table(blocks: dict, title: str, label: str):  # noqa: ANN201
    """A Rich table: one column per block (kind, source ...), one row per metric with a chance row under it."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(title))
    table.add_column(label, no_wrap=True)
    for name in blocks:
        table.add_column(escape(name), justify="right", no_wrap=True)
    table.add_row("pairs (turns)", *(f"{b['n_pairs']} ({b['n_units']})" for b in blocks.values()))
    for key, name in METRICS:
        table.add_row(name, *(cell(b[key]) for b in blocks.values()))
        if not key.startswith("accuracy"):
            table.add_row("  chance", *(chance_cell(b[key]) for b in blocks.values()), style="dim")
    table.add_row("McNemar p", *(f"{b['mcnemar']['p_value']:.3g}" for b in blocks.values()))
    return table


def print_results(results: dict, title: str = "", everything: bool = False) -> None:
    """The probe tables: by kind and overall; with ``everything`` also by source, stage and group."""
    import sys

    from rich.console import Console

    console = Console(width=None if sys.stdout.isatty() else 120)  # a piped table keeps its columns
    console.print(probe_table({**results["per_kind"], "overall": results["overall"]}, f"counterfactual probes {title}".strip(), "by kind"))
    if everything:
        for key, label in (("per_source", "by source"), ("per_stage", "by stage"), ("per_group", "by group")):
            console.print(probe_table(results[key], f"counterfactual probes {label}", label))
    console.print(LEGEND, highlight=False)
    from ecgtrace.commands._model_options import print_epochs, print_usage

    print_epochs(results, console)
    print_usage(results, console)
    missing = results.get("unpaired") or {}
    if not results.get("complete", True) or missing.get("pairs_not_finished"):
        console.print(f"[yellow]{results['n_finished']} of {results['n_items']} samples finished; rerun to resume[/]")
