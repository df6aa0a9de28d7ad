"""One examination on several workers: ``--workers N`` (local processes) or ``--executor ray``.

The run's samples are split by item into shards (``crc32(item id) % N``, so
the same item lands in the same shard on a rerun and resumes from its
checkpoint). Each shard is the same command run on a worker with
``--sample-id`` set to its items and ``--run RUN/shards/<k>``: its own run
folder, ``samples.jsonl`` and checkpoint file, so shards never share a writer.
The driver (this process) then merges every shard's finished rows into the
run's ``samples.jsonl`` in a fixed order (epoch, then the run's item order)
and writes ``results.json`` the way a one-process run does, from the same rows.

What the guarantees rest on:

* a worker that dies is retried (:class:`ecgtrace.executors.Executor`); its
  shard resumes from its own checkpoint and skips its finished samples;
* a driver killed with kill -9 takes its local workers with it
  (:mod:`ecgtrace.workers`); the rerun first merges what the shards finished,
  then shards only what is left;
* ``--max-rpm``/``--max-tpm`` are one budget for all shards: a
  :class:`~ecgtrace.agents.exam.rate_limit.Buckets` served by the executor (a
  manager process locally, an actor on Ray), which each shard's examinee books
  through (:func:`shard_limiter`).
"""

from __future__ import annotations

import argparse
import math
import shutil
import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The shard folders inside a run folder.
SHARDS_DIR = "shards"

#: Set in a shard worker: what the driver shares with it (see :func:`in_shard`).
_SHARD: dict[str, Any] = {}


def add_shard_options(parser: argparse.ArgumentParser) -> None:
    """``--workers``, ``--executor``, ``--address`` for an examining command."""
    from ecgtrace.executors import executor_arguments

    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="split the samples into N shards, each in a process of its own with its own checkpoint, merged into "
                             "one run (default 1: one process); --concurrency is shared among them")
    executor_arguments(parser, what="shard of samples")


def wants_shards(args: argparse.Namespace) -> bool:
    """Whether this invocation shards (a shard worker itself never does)."""
    return not in_shard() and (int(getattr(args, "workers", 1) or 1) > 1 or getattr(args, "executor", "local") == "ray")


def in_shard() -> bool:
    """True inside a shard worker (the driver already checked the endpoint)."""
    return bool(_SHARD)


def shard_of(item_id: str, n_shards: int) -> int:
    """The shard of an item: stable across runs and machines (not Python's salted ``hash``)."""
    return zlib.crc32(item_id.encode("utf-8")) % n_shards


class ServedBuckets:
    """The run's :class:`~ecgtrace.agents.exam.rate_limit.Buckets`, served by the executor, booking on the server's own
    clock: shards on other machines never compare clocks."""

    def __init__(self, max_rpm: float | None, max_tpm: float | None) -> None:
        from ecgtrace.agents.exam.rate_limit import Buckets

        self.buckets = Buckets(max_rpm, max_tpm)

    def reserve(self, tokens: float) -> float:
        import time

        return self.buckets.reserve(tokens, time.monotonic())

    def adjust(self, tokens: float) -> None:
        self.buckets.adjust(tokens)


class SharedRateLimit:
    """A :class:`~ecgtrace.agents.exam.rate_limit.RateLimit` that books in the run's :class:`ServedBuckets` (``shared``)."""

    def __init__(self, shared: Any, max_rpm: float | None, max_tpm: float | None) -> None:
        self.shared, self.max_rpm, self.max_tpm = shared, max_rpm, max_tpm

    async def acquire(self, tokens: int) -> float:
        import asyncio

        wait_s = float(await self.shared.acall("reserve", tokens))
        if wait_s > 0:
            await asyncio.sleep(wait_s)
        return wait_s

    async def settle(self, booked: int, usage: dict[str, Any] | None) -> None:
        from ecgtrace.agents.exam.rate_limit import token_correction

        correction = token_correction(booked, usage, self.max_tpm)
        if correction is not None:
            await self.shared.acall("adjust", correction)


def shard_limiter(examinee: Any) -> Any:
    """In a shard worker, point ``examinee``'s rate limiter at the run's shared budget; returns the examinee."""
    shared = _SHARD.get("limiter")
    if shared is not None and hasattr(examinee, "limiter"):
        examinee.limiter = SharedRateLimit(shared, *_SHARD["limits"])
    return examinee


def _run_shard(command: str, options: dict[str, Any], shared: Any, limits: tuple[Any, Any]) -> int:
    """A shard worker: the command itself on the shard's items and folder, quietly (its outcome is the driver's to judge)."""
    import contextlib
    import importlib
    import os

    from ecgtrace.errors import ExamFailedError

    _SHARD.update(limiter=shared, limits=limits)
    module = importlib.import_module(f"ecgtrace.commands.{command}")
    try:  # quiet: the driver speaks for the run (its failed-turn warning counts every shard's rows)
        with open(os.devnull, "w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            return module.run(argparse.Namespace(**options))
    except ExamFailedError:  # every turn of this shard failed: its rows are written; the driver reports the run
        return 3


def merge_shards(run_dir: Any, item_order: list[str], *, skip: frozenset[str] | set[str] = frozenset()) -> int:
    """Append every shard's finished rows the run lacks, ordered by (epoch, item order); returns how many.

    ``skip``: sample ids being asked again (``--retry-errors``): an old shard row must not come back.
    """
    from ecgtrace.contracts.runs import item_id_of
    from ecgtrace.runlog import SAMPLES, sample_rows

    root = Path(run_dir.path) / SHARDS_DIR
    if not root.is_dir():
        return 0
    have = run_dir.finished_ids() | set(skip)
    rank = {iid: i for i, iid in enumerate(item_order)}
    rows: dict[str, dict[str, Any]] = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if not (folder / SAMPLES).is_file():
            continue
        for row in sample_rows(folder / SAMPLES):
            if row["id"] not in have and not row.get("skipped"):
                rows.setdefault(row["id"], row)
    order = sorted(rows.values(), key=lambda r: (int(r.get("epoch") or 0), rank.get(item_id_of(r), len(rank)), r["id"]))
    for row in order:
        run_dir.append_sample(row)
    return len(order)


def run_sharded(args: argparse.Namespace, *, command: str, run_dir: Any, item_order: list[str], retried: set[str],
                finish_now: Callable[[], Any], on_sample: Callable[[dict[str, Any]], None] | None,
                group_of: Callable[[str], str] | None = None, shard_overrides: dict[str, Any] | None = None) -> Any:
    """Examine the unfinished samples of ``item_order`` in shards, merge them, and return ``finish_now()``'s results.

    ``finish_now``: the one-process runner on the merged run (every sample is
    finished, so it asks nothing and writes ``results.json`` from the rows).
    ``group_of``: items that must share a shard map to one key (a probe's
    original and its counterfactuals: ``--sample-id`` of one picks them all);
    default, each item is its own. ``shard_overrides``: options every shard
    gets instead of the driver's (a probe's set folder, built once by the driver).

    Raises:
        TasksFailedError: shards that failed every attempt (what they finished is merged; a rerun resumes the rest).
    """
    from ecgtrace.contracts.runs import sample_key
    from ecgtrace.executors import Task, TasksFailedError, failures_line, make_executor

    merge_shards(run_dir, item_order, skip=retried)  # what a killed run's shards finished
    epochs = max(1, int(getattr(args, "epochs", 1) or 1))
    done = run_dir.finished_ids()
    todo = [iid for iid in item_order if any(sample_key(iid, e) not in done for e in range(epochs))]
    workers = max(1, int(getattr(args, "workers", 1) or 1))
    n_shards = max(1, min(workers, len(todo)))
    shards: dict[int, list[str]] = {}
    for iid in todo:
        shards.setdefault(shard_of(group_of(iid) if group_of else iid, n_shards), []).append(iid)
    if shards:
        with make_executor(args.executor, workers=n_shards, address=getattr(args, "address", None)) as executor:
            limits = (getattr(args, "max_rpm", None), getattr(args, "max_tpm", None))
            shared = None
            if any(limits):
                shared = executor.serve(ServedBuckets, *limits)
            tasks = [Task(f"shard {k}", _run_shard, (command, {**_shard_options(args, run_dir, k, ids, n_shards), **(shard_overrides or {})},
                                                     shared, limits))
                     for k, ids in sorted(shards.items())]
            with _Watch(Path(run_dir.path) / SHARDS_DIR, on_sample):
                outcomes = executor.run(tasks, retries=int(getattr(args, "retries", 2)))
        merge_shards(run_dir, item_order, skip=set())
        failed = [o for o in outcomes if not o.ok]
        if failed:
            raise TasksFailedError(f"{len(failed)} of {len(tasks)} shards failed; their finished samples are in {run_dir.path}: "
                                   f"rerun the same command to resume the rest ({failures_line(failed)})")
    results = finish_now()
    if not getattr(args, "keep_checkpoints", False):
        shutil.rmtree(Path(run_dir.path) / SHARDS_DIR, ignore_errors=True)  # every row is merged: the shards hold nothing more
    return results


def _shard_options(args: argparse.Namespace, run_dir: Any, k: int, ids: list[str], n_shards: int) -> dict[str, Any]:
    """The command's options for shard ``k``: its items, its folder, a share of the concurrency, no sharding, no output."""
    options = dict(vars(args))
    options.pop("func", None)
    options.update(run=str(Path(run_dir.path) / SHARDS_DIR / f"{k:03d}"), sample_id=list(ids), limit=None, workers=1, executor="local",
                   address=None, quiet=True, json=False, retry_errors=False,
                   concurrency=max(1, math.ceil(int(getattr(args, "concurrency", 8) or 8) / n_shards)))
    return options


class _Watch:
    """While shards run, report each row they append (``on_sample``: the progress bar), polling their files."""

    POLL_S = 0.5

    def __init__(self, root: Path, on_sample: Callable[[dict[str, Any]], None] | None) -> None:
        self.root, self.on_sample = root, on_sample
        self.seen: set[str] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="ecgtrace-shard-watch", daemon=True)

    def _loop(self) -> None:
        from ecgtrace.runlog import sample_rows

        while not self.stop.wait(self.POLL_S):
            for path in sorted(self.root.glob("*/samples.jsonl")):
                try:
                    rows = sample_rows(path)
                except Exception:  # noqa: BLE001 - a file being written; the next poll reads it
                    continue
                for row in rows:
                    if row["id"] not in self.seen:
                        self.seen.add(row["id"])
                        self.on_sample(row)  # type: ignore[misc]

    def __enter__(self) -> _Watch:
        if self.on_sample is not None:
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=2)
