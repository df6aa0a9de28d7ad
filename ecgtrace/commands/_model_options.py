"""Options and steps shared by the commands that examine a model (``audit``, ``qa-eval``).

Declared once: the model and run folder, endpoint, key variable, modality and
request limits (:func:`add_model_options`), and the run controls: the text
encoding, the prompt token budget, which samples and how often, prices
(:func:`add_run_controls`); checked once (:func:`check_model_options`); turned
into an examinee (:func:`make_model`), a text encoding (:func:`text_encoding_of`),
a budget (:func:`prompt_budget_of`), a selection of items (:func:`select`),
prices (:func:`pricing_of`) and the run's resumable settings
(:func:`run_settings`) once; and the run itself is shown the same way
(:func:`run_with_progress`, :func:`ask_at_terminal`, :func:`report_skipped`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ecgtrace.contracts.vocabulary import EXAM_MODALITIES


def add_model_options(parser: argparse.ArgumentParser, *, model_required: bool = True) -> None:
    """Model, run folder, endpoint, key, modality and request limits, declared once for every examining command.

    ``model_required=False``: the command can also score answers given before (``--answers``), without a model.
    """
    from ecgtrace.agents.exam.examinees import describe_specs

    parser.add_argument("--model", required=model_required,
                        help=f"{describe_specs()} (or an installed examinee plugin's name)" + ("" if model_required else "; not with --answers"))
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
    parser.add_argument("--max-rpm", type=float, default=None, metavar="N",
                        help="at most N requests per minute to --model (token bucket, bursts of about a second's worth; default: no limit)")
    parser.add_argument("--max-tpm", type=float, default=None, metavar="N",
                        help="at most N tokens per minute (prompt + answer: estimated when sent, corrected with the server's usage; "
                             "default: no limit)")
    parser.add_argument("--max-reply-chars", type=int, default=None, metavar="N",
                        help="keep at most N characters of each reply (its start and end) in the run and the history re-sent "
                             "to the model; the cut is recorded (default 32000)")
    parser.add_argument("--temperature", type=float, default=None, help="sampling temperature (default: the server's)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random examinee, the --limit sample and the --epochs shuffles (default 0)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or table")
    add_run_controls(parser)


def add_run_controls(parser: argparse.ArgumentParser) -> None:
    """Text encoding, token budget, sample selection, epochs and prices (part of :func:`add_model_options`)."""
    from ecgtrace.contracts.vocabulary import TEXT_ENCODINGS

    text = parser.add_argument_group("ECG as text (--modality text or both)")
    text.add_argument("--text-encoding", choices=TEXT_ENCODINGS, default="raw",
                      help="raw: every sample in mV (a 10 s 3-lead 250 Hz window is ~65k tokens); downsampled: the same at --text-fs; "
                           "compact: integer microvolts, no time column; summary: beat times, RR and per-beat intervals and amplitudes "
                           "per lead (default raw)")
    text.add_argument("--text-fs", type=float, default=None, metavar="HZ", help="sampling rate of downsampled (required) or compact text")
    text.add_argument("--text-leads", default=None, metavar="LEADS", help="only these leads in the text, comma-separated (e.g. II,V5)")
    text.add_argument("--max-prompt-tokens", type=int, default=None, metavar="N",
                      help="skip (with the reason recorded) samples whose requests would exceed N prompt tokens; default: the "
                           "context the server reports, if it reports one, less --max-tokens")
    control = parser.add_argument_group("which samples, how often, at what price")
    control.add_argument("--limit", type=int, default=None, metavar="N",
                         help="N items stratified by diagnosis/task (seeded by --seed); a larger N later adds to the same run folder")
    control.add_argument("--sample-id", action="append", default=None, metavar="ID", help="only this item (repeatable)")
    control.add_argument("--epochs", type=int, default=1, metavar="K",
                         help="ask every item K times, options shuffled from the second time on (position bias; default 1)")
    control.add_argument("--price-in", type=float, default=None, metavar="USD", help="price of 1M prompt tokens of --model")
    control.add_argument("--price-out", type=float, default=None, metavar="USD", help="price of 1M completion tokens of --model")
    control.add_argument("--pricing", default=None, metavar="FILE", help='prices per model: {"<model>": {"in": USD, "out": USD}} (JSON or YAML)')


def check_model_options(args: argparse.Namespace) -> None:
    """One ``error:`` line for a count below 1 or a non-positive timeout, before anything is read or asked."""
    from ecgtrace.errors import EcgTraceError

    import math

    for name, value in (("--concurrency", args.concurrency), ("--limit", args.limit), ("--max-attempts", args.max_attempts),
                        ("--epochs", args.epochs), ("--max-prompt-tokens", args.max_prompt_tokens),
                        ("--max-reply-chars", getattr(args, "max_reply_chars", None))):
        if value is not None and value < 1:
            raise EcgTraceError(f"{name} must be at least 1, got {value}")
    if not (math.isfinite(args.timeout) and args.timeout > 0):  # nan compares False with everything: test finiteness first
        raise EcgTraceError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    if not (math.isfinite(args.backoff) and args.backoff >= 0):
        raise EcgTraceError(f"--backoff must not be negative, got {args.backoff:g}")
    for name in ("max_rpm", "max_tpm"):
        value = getattr(args, name, None)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise EcgTraceError(f"--{name.replace('_', '-')} must be a positive number, got {value:g}")
    if args.temperature is not None and not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise EcgTraceError(f"--temperature must be a number >= 0, got {args.temperature:g}")
    for name, value in (("--price-in", args.price_in), ("--price-out", args.price_out)):
        if value is not None and value < 0:
            raise EcgTraceError(f"{name} must not be negative, got {value:g}")
    if (args.price_in is None) != (args.price_out is None):
        raise EcgTraceError("--price-in and --price-out go together (USD per 1M prompt and completion tokens)")
    encoding = text_encoding_of(args)
    if not encoding.is_asset and args.modality == "image":
        raise EcgTraceError("--text-encoding, --text-fs and --text-leads apply to --modality text or both")


def text_encoding_of(args: argparse.Namespace) -> Any:
    """The run's :class:`ecgtrace.tools.text_encodings.TextEncoding` (one ``error:`` line for a bad choice)."""
    from ecgtrace.tools.text_encodings import text_encoding

    return text_encoding(args.text_encoding, args.text_fs, args.text_leads)


def prompt_budget_of(args: argparse.Namespace, examinee: Any) -> Any:
    """The prompt token budget: ``--max-prompt-tokens``, else the context the server reports less the answer's room, else None."""
    import asyncio

    from ecgtrace.agents.exam.budget import prompt_budget

    if args.max_prompt_tokens is not None:
        return prompt_budget(args.max_prompt_tokens)
    context = asyncio.run(examinee.context_tokens()) if hasattr(examinee, "context_tokens") else None
    return prompt_budget(None, context, args.max_tokens)


def pricing_of(args: argparse.Namespace) -> dict[str, dict[str, float]] | None:
    """USD per 1M tokens by model name: ``--pricing FILE``, with ``--price-in``/``--price-out`` for ``--model`` on top."""
    from ecgtrace.agents.exam.run_control import load_pricing

    prices = load_pricing(args.pricing) if args.pricing else {}
    if args.price_in is not None:
        prices[args.model] = {"in": float(args.price_in), "out": float(args.price_out)}
    return prices or None


def select(items: list[Any], args: argparse.Namespace, stratum_of: Callable[[Any], str]) -> list[Any]:
    """The items this run asks: ``--sample-id``, then ``--limit`` stratified by ``stratum_of`` (seeded by ``--seed``)."""
    from ecgtrace.agents.exam.run_control import select_items

    return select_items(items, stratum_of=stratum_of, id_of=lambda it: it.id, seed=args.seed, limit=args.limit, sample_ids=args.sample_id)


def progress_counts(run_dir: Any, items: list[Any], epochs: int) -> tuple[int, int]:
    """``(samples this run covers, samples already answered)``: every item in every epoch; skipped ones are checked again."""
    from ecgtrace.contracts.runs import sample_key

    units = {sample_key(it.id, epoch) for epoch in range(epochs) for it in items}
    return len(units), sum(1 for row in run_dir.samples() if row["id"] in units and not row.get("skipped"))


def report_skipped(results: dict[str, Any], console: Any) -> None:
    """One line for samples that were not asked (budget, encoding), with the commonest reason; an error when nothing was asked."""
    from ecgtrace.errors import EcgTraceError

    skipped = results.get("skipped") or {}
    if not skipped.get("n"):
        return
    kinds = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in skipped.get("by_kind", {}).items())
    budget = skipped.get("budget") or {}
    where = f" (budget {budget['max_prompt_tokens']:,} tokens: {budget['source']})" if budget else ""
    if not results.get("n_answered"):
        raise EcgTraceError(f"every one of the {skipped['n']} sample(s) was skipped ({kinds}){where}: nothing was asked; "
                            "try --text-encoding summary or compact, --text-fs, --text-leads, or a larger --max-prompt-tokens "
                            "(the reasons are in samples.jsonl)")
    console.print(f"[yellow]{skipped['n']} sample(s) skipped, not asked ({kinds}){where}; the reasons are in samples.jsonl[/]",
                  highlight=False)


def make_model(args: argparse.Namespace, spec: str | None = None, *, base_url: str | None = None, sampled: bool = True) -> Any:
    """The examinee ``spec`` (default ``--model``) with the command's endpoint and limits.

    ``sampled=False`` leaves ``--temperature`` and ``--max-rpm``/``--max-tpm`` to the model under test
    (a judge keeps the server's temperature and has no limit of its own).
    """
    from ecgtrace.agents.exam.examinees import make_examinee
    from ecgtrace.commands._exam_shards import shard_limiter

    examinee = make_examinee(spec or args.model, seed=args.seed, base_url=base_url or args.base_url, api_key_env=args.api_key_env,
                         timeout_s=args.timeout, concurrency=args.concurrency, max_attempts=args.max_attempts,
                         backoff_s=args.backoff, max_tokens=args.max_tokens, temperature=args.temperature if sampled else None,
                         max_reply_chars=getattr(args, "max_reply_chars", None),
                         max_rpm=getattr(args, "max_rpm", None) if sampled else None,
                         max_tpm=getattr(args, "max_tpm", None) if sampled else None)
    return shard_limiter(examinee) if spec is None else examinee  # in a shard: the run's one rate budget


def run_settings(args: argparse.Namespace, dataset_path: Any, **extra: Any) -> dict[str, Any]:
    """What a run keeps in ``settings`` (may change between resumes; the key's variable name, never the key)."""
    return {"dataset_path": str(dataset_path), "base_url": args.base_url, "api_key_env": args.api_key_env,
            "concurrency": args.concurrency, "timeout_s": args.timeout, "max_attempts": args.max_attempts,
            "backoff_s": args.backoff, "max_prompt_tokens": args.max_prompt_tokens,
            "max_reply_chars": getattr(args, "max_reply_chars", None), "max_rpm": getattr(args, "max_rpm", None),
            "max_tpm": getattr(args, "max_tpm", None), **extra}


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


def print_usage(results: dict[str, Any], console: Any) -> None:
    """``tokens: 12,345 prompt + 678 completion in 40 requests; cost 0.0123 USD`` when the run made requests."""
    usage = results.get("usage") or {}
    if not usage.get("requests"):
        return
    tokens = usage.get("tokens") or {}
    text = f"tokens: {tokens.get('prompt_tokens', 0):,} prompt + {tokens.get('completion_tokens', 0):,} completion in {usage['requests']:,} requests"
    if usage.get("without_usage"):
        text += f" ({usage['without_usage']:,} without usage from the server)"
    if usage.get("cost_usd") is not None:
        text += f"; cost {usage['cost_usd']:.4f} USD"
    console.print(text, highlight=False, markup=False)


def print_epochs(results: dict[str, Any], console: Any) -> None:
    """``3 epochs (options shuffled after the first): ida mean 0.62 (sd 0.03); samples that agree with themselves 81.0%``."""
    block = results.get("epochs")
    if not block:
        return
    means = "; ".join(f"{name} mean {m['value']:.3f}" + (f" (sd {m['sd']:.3f})" if m.get("sd") is not None else "")
                      for name, m in block["mean"].items() if m.get("value") is not None)
    agree = block["agreement"]
    share = f"{100 * agree['samples_agree']:.1f}% of {agree['n_samples']}" if agree.get("samples_agree") is not None else "-"
    console.print(f"{block['epochs']} epochs (options shuffled after the first): {means}; samples that answer alike in every epoch: {share}",
                  highlight=False, markup=False)

