"""``ecgtrace build RECORD... --out DIR``: verified multimodal QA datasets (the 12 Holtercare-Bench tasks)."""

from __future__ import annotations

import argparse

from ecgtrace.contracts.vocabulary import ASSET_MODALITIES, DETECTED_KINDS

HELP = "Build a verified multimodal QA dataset (12 Holtercare-Bench tasks) from records; rerun to resume."
MODALITIES = ASSET_MODALITIES


#: Exit status of a build whose QA items were written but whose audit items were not (as for records that failed).
AUDIT_FAILED_EXIT = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("records", nargs="+", metavar="RECORD", help="WFDB records (dir/100), EDF files, or annotation-only records (with --fs)")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder (qa.jsonl, assets/, manifest.json)")
    parser.add_argument("--tasks", default=None, help="comma-separated task types (default: all 12)")
    parser.add_argument("--modalities", default="text,image", help="comma-separated: text,image,video (default: text,image)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (same seed -> same bytes)")
    parser.add_argument("--templates", default=None, metavar="DIR", help="template folder (default: the built-in templates)")
    parser.add_argument("--fs", type=float, default=None, metavar="HZ", help="sampling rate of annotation-only records")
    parser.add_argument("--dev-fraction", type=float, default=0.2, help="share of records (not items) in the dev split (default 0.2)")
    parser.add_argument("--jobs", type=int, default=2, help="records built in parallel (default 2; with --executor ray: CPUs of a private Ray)")
    from ecgtrace.executors import executor_arguments

    executor_arguments(parser, what="record")
    parser.add_argument("--retries", type=int, default=2, metavar="N",
                        help="times a failed record (an error, or its worker died) is tried again before it is reported (default 2)")
    parser.add_argument("--paraphrase", action="store_true", help="rewrite question wording with an LLM (OpenAI-compatible, from the environment)")
    parser.add_argument("--no-audit", action="store_true", help="do not write audit.jsonl")
    parser.add_argument("--detected-kinds", choices=DETECTED_KINDS, default=DETECTED_KINDS[0],
                        help="records without a reference .atr: keep only items on event kinds validated from the signal against expert "
                             "annotations (validated, the default; tools/data/signal_trust.json), or every item, each recording the "
                             "verdict on its kinds (all)")
    parser.add_argument("--cache-dir", default=None, metavar="DIR",
                        help="annotation cache folder (default: $ECGTRACE_CACHE, else ~/.cache/ecgtrace or the platform's cache folder)")
    parser.add_argument("--json", action="store_true", help="print the counts (items per task, dropped, audit items) as JSON")


def parse_list(text: str | None, allowed: tuple[str, ...], what: str) -> list[str]:
    from ecgtrace.errors import EcgTraceError

    values = [v.strip() for v in (text or "").split(",") if v.strip()]
    for value in values:
        if value not in allowed:
            raise EcgTraceError(f"--{what}: unknown value {value!r}; choose from {', '.join(allowed)}")
    return values


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ecgtrace.graphs.holter_build import build_dataset
    from ecgtrace.rubrics.template_schema import TASKS

    options = {
        "seed": int(args.seed),
        "tasks": parse_list(args.tasks, TASKS, "tasks"),
        "modalities": parse_list(args.modalities, MODALITIES, "modalities") or ["text", "image"],
        "templates_dir": args.templates,
        "fs_hz": args.fs,
        "paraphrase": bool(args.paraphrase),
        "measure": True,
        "detected_kinds": args.detected_kinds,
    }
    import os

    from ecgtrace.graphs.holter_build import check_build_options

    from ecgtrace.errors import EcgTraceError
    from ecgtrace.executors import make_executor
    from ecgtrace.graphs.holter_build import RunOn

    check_build_options(jobs=args.jobs, dev_fraction=args.dev_fraction, fs_hz=args.fs)
    if args.retries < 0:
        raise EcgTraceError(f"--retries must be 0 or more, got {args.retries}")
    if args.address and args.executor != "ray":
        make_executor(args.executor, address=args.address)  # the one error line for --address without ray
    if args.executor == "ray":
        from ecgtrace.executors.ray_executor import import_ray

        import_ray()  # missing Ray: one error line before anything is checked or written
    jobs = args.jobs
    n_parallel = min(jobs, len(args.records))
    options["render_jobs"] = max(1, (os.cpu_count() or 1) // n_parallel)
    console = Console(stderr=True, emoji=False, highlight=False)
    manifest = build_dataset(args.records, args.out, options, jobs=jobs, console=console, audit=not args.no_audit,
                              dev_fraction=args.dev_fraction, cache_dir=args.cache_dir,
                              run_on=RunOn(args.executor, args.address, args.retries))
    counts = manifest["counts"]
    audit = manifest.get("audit") or {}
    if args.json:
        from ecgtrace.commands._output import print_json

        print_json({"out": str(args.out), "counts": counts, "audit": audit, "qa_changed": manifest.get("qa_changed")})
        return AUDIT_FAILED_EXIT if "error" in audit else 0
    if "error" in audit:
        console.print(f"wrote {counts['items']} items ({counts['dropped']} dropped) to {args.out}/qa.jsonl", soft_wrap=True)
        console.print(f"error: audit.jsonl not written ({audit['error']}); the folder stays unfinished: rerun the same command "
                      "to retry the audit items (the records are reused), or pass --no-audit", soft_wrap=True, markup=False)
        return AUDIT_FAILED_EXIT
    if not manifest.get("qa_changed", True) and (args.no_audit or audit.get("reused")):
        audit_part = "" if args.no_audit else f" and {audit['items']} audit items"
        console.print(f"nothing to do: {args.out} is up to date ({counts['items']} QA items{audit_part}; same records, seed and versions)", soft_wrap=True)
        return 0
    _print_counts(console, counts, audit, args.out)
    return 0


def _print_counts(console, counts: dict, audit: dict, out: str) -> None:  # noqa: ANN001
    from ecgtrace.agents.holter.verifier import UNVALIDATED

    console.print(f"[green]wrote[/] {counts['items']} items ({counts['dropped']} dropped) to {out}/qa.jsonl"
                  + (f" and {audit['items']} audit items to {out}/audit.jsonl" if "items" in audit else ""))
    for task, n in counts["per_task"].items():
        console.print(f"  {task}: {n}")
    unvalidated = counts.get("dropped_reasons", {}).get(UNVALIDATED, 0)
    if unvalidated:
        console.print(f"{unvalidated} items asked about event kinds not validated from the signal (records without a reference .atr; "
                      "reasons in dropped.jsonl; --detected-kinds all keeps them)", soft_wrap=True, markup=False)
