"""Options and steps shared by the commands that examine a model (``audit``, ``qa-eval``).

Declared once: the model and run folder, endpoint, key variable, modality and
request limits (:func:`add_model_options`); checked once
(:func:`check_model_options`); turned into an examinee (:func:`make_model`) and
the run's resumable settings (:func:`run_settings`) once; and the run itself is
shown the same way (:func:`run_with_progress`, :func:`ask_at_terminal`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ecgtrace.contracts.vocabulary import EXAM_MODALITIES


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """Model, run folder, endpoint, key, modality and request limits, declared once for every examining command."""
    from ecgtrace.agents.exam.examinees import describe_specs

    parser.add_argument("--model", required=True, help=f"{describe_specs()} (or an installed examinee plugin's name)")
    parser.add_argument("--run", required=True, metavar="RUNDIR", help="run folder (created; reused to resume)")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="NAME",
                        help="environment variable holding the API key (default OPENAI_API_KEY); the key is never written")
    parser.add_argument("--modality", choices=EXAM_MODALITIES, default="image", help="how the ECG is shown (default image)")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight (default 8)")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="S", help="per-request timeout in seconds (default 120)")
    parser.add_argument("--max-attempts", type=int, default=4, help="tries per request on 429/5xx/timeouts (default 4)")
    parser.add_argument("--backoff", type=float, default=1.0, metavar="S", help="first retry wait in seconds, doubling (default 1)")
    parser.add_argument("--max-tokens", type=int, default=None, help="cap on answer tokens")
    parser.add_argument("--max-reply-chars", type=int, default=None, metavar="N",
                        help="keep at most N characters of each reply (its start and end) in the run and the history re-sent "
                             "to the model; the cut is recorded (default 32000)")
    parser.add_argument("--temperature", type=float, default=None, help="sampling temperature (default: the server's)")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N items")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random examinee (default 0)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or table")


def check_model_options(args: argparse.Namespace) -> None:
    """One ``error:`` line for a count below 1 or a non-positive timeout, before anything is read or asked."""
    from ecgtrace.errors import EcgTraceError

    import math

    for name, value in (("--concurrency", args.concurrency), ("--limit", args.limit), ("--max-attempts", args.max_attempts),
                        ("--max-reply-chars", getattr(args, "max_reply_chars", None))):
        if value is not None and value < 1:
            raise EcgTraceError(f"{name} must be at least 1, got {value}")
    if not (math.isfinite(args.timeout) and args.timeout > 0):  # nan compares False with everything: test finiteness first
        raise EcgTraceError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    if not (math.isfinite(args.backoff) and args.backoff >= 0):
        raise EcgTraceError(f"--backoff must not be negative, got {args.backoff:g}")
    if args.temperature is not None and not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise EcgTraceError(f"--temperature must be a number >= 0, got {args.temperature:g}")


def make_model(args: argparse.Namespace, spec: str | None = None, *, base_url: str | None = None, sampled: bool = True) -> Any:
    """The examinee ``spec`` (default ``--model``) with the command's endpoint and limits.

    ``sampled=False`` leaves ``--temperature`` to the model under test (a judge keeps the server's).
    """
    from ecgtrace.agents.exam.examinees import make_examinee

    return make_examinee(spec or args.model, seed=args.seed, base_url=base_url or args.base_url, api_key_env=args.api_key_env,
                         timeout_s=args.timeout, concurrency=args.concurrency, max_attempts=args.max_attempts,
                         backoff_s=args.backoff, max_tokens=args.max_tokens, temperature=args.temperature if sampled else None,
                         max_reply_chars=getattr(args, "max_reply_chars", None))


def run_settings(args: argparse.Namespace, dataset_path: Any, **extra: Any) -> dict[str, Any]:
    """What a run keeps in ``settings`` (may change between resumes; the key's variable name, never the key)."""
    return {"dataset_path": str(dataset_path), "base_url": args.base_url, "api_key_env": args.api_key_env,
            "concurrency": args.concurrency, "timeout_s": args.timeout, "max_attempts": args.max_attempts,
            "backoff_s": args.backoff, "max_reply_chars": getattr(args, "max_reply_chars", None), **extra}


def ask_at_terminal(console: Any) -> Callable[[dict[str, Any]], str]:
    """A human examinee's prompt: the question (and, on a chain's first turn, the ECG files to open), then a typed answer."""

    def ask(payload: dict[str, Any]) -> str:
        where = f" - turn {payload['turn'] + 1} of {payload['of']}" if "turn" in payload else ""
        console.rule(f"{payload['sample_id']}{where} - {payload['stage']}")
        if payload.get("turn") == 0:
            for kind, path in payload.get("ecg", {}).items():
                console.print(f"ECG {kind}: {path}", markup=False, highlight=False)
        console.print(payload["prompt"], markup=False, highlight=False)
        return console.input("[bold]your answer> [/]")

    return ask


def run_with_progress(run: Callable[[Callable[[dict[str, Any]], None] | None], Any], *, console: Any, label: str, total: int,
                      done: int, quiet: bool) -> Any:
    """``run(on_sample)`` under a progress bar of ``total`` samples (``done`` already finished), or quietly."""
    if quiet:
        return run(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    with Progress(TextColumn(f"[bold]{label}[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("samples"),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=False) as progress:
        task = progress.add_task(label, total=total, completed=done)
        return run(lambda row: progress.advance(task))
