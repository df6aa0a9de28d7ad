"""Opening an examination run honestly, and saying honestly how it went (``audit``, ``qa-eval``).

* :func:`prepare_run`: a run folder that already holds every wanted sample
  needs nothing from the server (one line says so); anything else first passes
  the endpoint preflight (:func:`ecgtrace.agents.exam.preflight.preflight`),
  so a dead endpoint, a wrong model name or a bad key leaves nothing written -
  not even the run folder. ``--retry-errors`` drops the samples with a server
  error only after that check.
* :func:`check_outcome`: a run in which every asked turn failed is an error
  (exit 3, with the most common cause); a run with some failed turns says how
  many and how to ask them again.
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def add_retry_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--retry-errors", action="store_true",
                        help="on resume, ask again the finished samples that have a server error in any turn (or in the judge's verdict)")


def has_server_error(row: dict[str, Any]) -> bool:
    """True when a turn of the sample (or its judge request) got no answer from the server."""
    from ecgtrace.contracts.runs import examined_sample

    sample = examined_sample(row)  # a probe row keeps its turns in its inner sample
    return any(t.get("error") for t in sample.get("turns", [])) or bool((sample.get("judge") or {}).get("error"))


@dataclass
class PreparedRun:
    """The open run, what it still has to ask, and what the preflight found."""

    run_dir: Any
    todo: int
    done_before: int
    retried: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)


def prepare_run(args: argparse.Namespace, identity: dict[str, Any], settings: dict[str, Any], *, kind: str,
                item_ids: set[str], examinees: list[tuple[str, Any]]) -> PreparedRun:
    """Open ``args.run`` for ``item_ids`` (the sample ids the run covers), checking the endpoint first unless there is nothing to ask.

    Raises:
        RunError: the folder holds another run (checked before the endpoint: it needs no server).
        ModelError: the preflight failed; nothing was written.
    """
    from ecgtrace.agents.exam.preflight import preflight
    from ecgtrace.contracts.runs import examined_sample
    from ecgtrace.runlog import HEADER, RunDir

    root = Path(args.run)
    run_dir = RunDir.open(root, identity, settings, kind=kind) if (root / HEADER).is_file() else None
    finished: set[str] = set()
    retry: set[str] = set()
    if run_dir is not None:
        rows = [row for row in run_dir.samples() if row["id"] in item_ids and not examined_sample(row).get("skipped")]  # skipped: checked again
        finished = {row["id"] for row in rows}
        if getattr(args, "retry_errors", False):
            retry = {row["id"] for row in rows if has_server_error(row)}
        todo = len(item_ids - finished) + len(retry)
        if todo == 0:
            return PreparedRun(run_dir, 0, len(finished))
    from ecgtrace.commands._exam_shards import in_shard

    notes = [] if in_shard() else preflight(examinees)  # a shard's driver checked the endpoint before any shard started
    if run_dir is None:
        run_dir = RunDir.open(root, identity, settings, kind=kind)
    if retry:
        run_dir.drop_samples(lambda row: row["id"] in retry)
    return PreparedRun(run_dir, len(item_ids - finished) + len(retry), len(finished - retry), retry, notes)


def examine(args: argparse.Namespace, run: PreparedRun, runner: Any, *, command: str, item_order: list[str], examinee: Any,
            group_of: Any = None, shard_overrides: dict[str, Any] | None = None) -> Any:
    """``runner(on_sample)`` as given, or, with ``--workers N``/``--executor ray``, the same run in shards
    (:mod:`ecgtrace.commands._exam_shards`) finished by ``runner(None)`` on the merged rows; the results.
    ``group_of`` and ``shard_overrides``: see :func:`~ecgtrace.commands._exam_shards.run_sharded`.

    Raises:
        EcgTraceError: shards asked of an examinee a person answers at this terminal.
    """
    from ecgtrace.commands._exam_shards import run_sharded, wants_shards

    if not wants_shards(args) or run.todo == 0:
        return runner
    if getattr(examinee, "interactive", False):
        from ecgtrace.errors import EcgTraceError

        raise EcgTraceError("--workers/--executor ray: a person answering at this terminal cannot be split into shards")
    return lambda on_sample: run_sharded(args, command=command, run_dir=run.run_dir, item_order=item_order, retried=run.retried,
                                         finish_now=lambda: runner(None), on_sample=on_sample, group_of=group_of,
                                         shard_overrides=shard_overrides)


def nothing_to_do_line(run: PreparedRun, path: str, n_items: int) -> str:
    """The one line of a rerun that asks nothing."""
    from ecgtrace.contracts.runs import examined_sample

    errors = sum(1 for row in run.run_dir.samples() if has_server_error(row) and not examined_sample(row).get("skipped"))
    hint = f"; {errors} of them have server errors: add --retry-errors to ask those again" if errors else ""
    return f"nothing to do: all {n_items} samples in {path} are finished (results.json is up to date){hint}"


def _cause(error: str) -> str:
    """An error without its attempt count (the first 240 characters)."""
    return str(error).split(" after ", 1)[0][:240]


def _kind(cause: str) -> str:
    """A cause with its numbers blanked, so "requested 65271 tokens" and "requested 65304 tokens" count as one."""
    import re

    return re.sub(r"\d+", "#", cause)


class _Causes(Counter):
    """Causes counted by kind; :meth:`most_common` reports the first wording seen of each kind."""

    def __init__(self) -> None:
        super().__init__()
        self.example: dict[str, str] = {}

    def add(self, cause: str) -> None:
        self[_kind(cause)] += 1
        self.example.setdefault(_kind(cause), cause)

    def most_common(self, n: int | None = None) -> list[tuple[str, int]]:  # type: ignore[override]
        return [(self.example[kind], count) for kind, count in super().most_common(n)]


def turn_failures(rows: list[dict[str, Any]]) -> tuple[int, int, int, Counter]:
    """(asked turns, failed turns, samples with a failure, causes) over ``rows``; judge requests count as turns."""
    asked = failed = samples = 0
    causes = _Causes()
    from ecgtrace.contracts.runs import examined_sample

    for row in map(examined_sample, rows):  # a probe row's turns are in its inner sample
        if row.get("skipped"):  # never sent (token budget): counted by the run's skip report, not here
            continue
        errors = [t["error"] for t in row.get("turns", []) if t.get("asked", True) and t.get("error")]
        asked += sum(1 for t in row.get("turns", []) if t.get("asked", True))
        judge = row.get("judge") or {}
        if judge:
            asked += 1
            if judge.get("error"):
                errors.append(judge["error"])
        failed += len(errors)
        samples += bool(errors)
        for error in errors:
            causes.add(_cause(error))
    return asked, failed, samples, causes


def check_outcome(run_dir: Any, item_ids: set[str], console: Any) -> None:
    """Warn about failed turns; raise when every asked turn failed.

    Raises:
        ExamFailedError: no turn of the run got an answer (exit 3).
    """
    from rich.markup import escape

    from ecgtrace.errors import ExamFailedError

    rows = [row for row in run_dir.samples() if row["id"] in item_ids]
    asked, failed, samples, causes = turn_failures(rows)
    if not failed:
        return
    cause, count = causes.most_common(1)[0]
    if failed == asked:
        raise ExamFailedError(f"every one of the {asked} turns of {len(rows)} samples failed, so nothing was scored "
                              f"(most common cause, {count}x: {cause}); fix the endpoint or the request, then rerun the same "
                              "command with --retry-errors")
    console.print(f"[yellow]warning:[/] {failed} of {asked} turns ({samples} samples) got no answer from the server after retries "
                  f"and are scored wrong (most common, {count}x: {escape(cause)}); rerun the same command with --retry-errors "
                  f"to ask those {samples} samples again", soft_wrap=False)


def announce(run: PreparedRun, args: argparse.Namespace, n_items: int, console: Any) -> None:
    """Say what this invocation will do before it does it: samples asked again, or nothing at all."""
    if run.retried:
        console.print(f"asking {len(run.retried)} sample(s) with server errors again")
    if run.todo == 0 and not args.quiet:
        console.print(nothing_to_do_line(run, args.run, n_items), soft_wrap=True)


def finish(run: PreparedRun, item_ids: set[str], results: dict[str, Any], args: argparse.Namespace, console: Any,
           print_results: Any, title: str) -> int:
    """Check the outcome (raises when every turn failed), then print ``results`` as JSON or tables; the exit code."""
    check_outcome(run.run_dir, item_ids, console)
    if args.json:
        from ecgtrace.commands._output import print_json

        print_json(results)
    elif not args.quiet:
        print_results(results, title=title)
    return 0
