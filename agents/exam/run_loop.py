"""The run loop both examinations share: skip finished samples, a bounded pool of workers, append each once, results.

The reasoning audit (:mod:`ecgtrace.graphs.audit_runner`, which drives the
graph) and the QA runner (:mod:`ecgtrace.agents.exam.qa_runner`) differ only in
how one sample is examined; everything around it is here. A sample is appended
to ``samples.jsonl`` (fsynced, off the event loop, one appender at a time) only
when it is finished, so a rerun skips it and nothing is lost or counted twice.

A sample is one item in one epoch (``--epochs``): :func:`epoch_units` lists
them, each with the row id :func:`ecgtrace.contracts.sample_key` gives. Rows of
samples skipped because they could not be asked (``skipped``: token budget,
text encoding) are checked again on every run, and :func:`write_exam_results`
leaves them out of the metrics and counts them.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ecgtrace.contracts.runs import answered, item_id_of, sample_key

ItemT = TypeVar("ItemT")


def item_id(item: Any) -> str:
    """The id of a contract item or of its plain JSON (of an :class:`EpochUnit`: its row id)."""
    return item["id"] if isinstance(item, dict) else item.id


@dataclass(frozen=True)
class EpochUnit(Generic[ItemT]):
    """One sample: ``item`` asked in ``epoch``; ``id`` is its row id (the item's id in epoch 0)."""

    item: ItemT
    epoch: int = 0

    @property
    def id(self) -> str:
        return sample_key(item_id(self.item), self.epoch)


def epoch_units(items: Sequence[ItemT], epochs: int = 1) -> list[EpochUnit[ItemT]]:
    """Every item in every epoch, epoch 0 of all items first, so a run that stops early holds whole epochs."""
    return [EpochUnit(item, epoch) for epoch in range(max(1, int(epochs))) for item in items]


def worker_count(examinee: Any, concurrency: int) -> int:
    """Samples in flight at once: ``concurrency``, or 1 for an examinee a person answers."""
    return 1 if getattr(examinee, "interactive", False) else max(1, int(concurrency))


async def drain(items: Iterable[ItemT], handle: Callable[[ItemT], Awaitable[None]], workers: int) -> None:
    """Run ``handle(item)`` for every item with at most ``workers`` in flight.

    On any error (or a cancellation such as Ctrl-C) the other workers are
    cancelled and awaited before the error propagates, so no task outlives the
    run and every sample already appended stays on disk.
    """
    queue: asyncio.Queue[ItemT] = asyncio.Queue()
    for item in items:
        queue.put_nowait(item)

    async def worker() -> None:
        while True:
            try:
                item = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            await handle(item)

    tasks = [asyncio.create_task(worker()) for _ in range(min(max(1, workers), queue.qsize()))]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def examine(run: Any, items: Sequence[ItemT], examine_one: Callable[[ItemT], Awaitable[dict[str, Any]]], *, workers: int,
                  on_sample: Callable[[dict[str, Any]], None] | None = None,
                  after_append: Callable[[ItemT], Awaitable[None]] | None = None) -> None:
    """Examine every item of ``items`` not yet finished in ``run`` and append its sample row.

    Rows of skipped samples are dropped first, so those samples are checked again.

    Args:
        run: the open :class:`ecgtrace.runlog.RunDir`.
        examine_one: ``await examine_one(item)`` -> the finished sample's row.
        workers: samples in flight (see :func:`worker_count`).
        on_sample: called with each row appended (progress).
        after_append: awaited once a row is safely on disk (the audit drops the sample's checkpoints then).
    """
    from ecgtrace.contracts.runs import examined_sample

    # checked again: budgets and servers change (a probe row keeps ``skipped`` in its inner sample)
    await asyncio.to_thread(run.drop_samples, lambda row: bool(examined_sample(row).get("skipped")))
    finished = run.finished_ids()
    todo = [item for item in items if item_id(item) not in finished]
    append_lock = asyncio.Lock()  # one appender at a time; the fsync runs off the event loop

    async def handle(item: ItemT) -> None:
        row = await examine_one(item)
        async with append_lock:
            appended = await asyncio.to_thread(run.append_sample, row)
        if appended and on_sample is not None:
            on_sample(row)
        if after_append is not None:
            await after_append(item)

    await drain(todo, handle, workers)


def write_results(run: Any, items: Sequence[Any], summarize: Callable[[list[dict[str, Any]]], dict[str, Any]],
                  **extra: Any) -> dict[str, Any]:
    """Metrics over the finished samples of ``items`` (``summarize(rows)``), written atomically to results.json."""
    wanted = {item_id(it) for it in items}
    rows = [r for r in run.samples() if r["id"] in wanted]
    results = {**extra, "run_id": run.run_id, "n_items": len(items), "n_finished": len(rows), "complete": len(rows) == len(items),
               **summarize(rows)}
    run.write_results(results)
    return results


def write_exam_results(run: Any, items: Sequence[Any], summarize: Callable[[list[dict[str, Any]]], dict[str, Any]], *, epochs: int = 1,
                       headline: Callable[[list[dict[str, Any]]], dict[str, float | None]] | None = None,
                       models: dict[str, str | None] | None = None, pricing: dict[str, dict[str, float]] | None = None,
                       budget: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """An examination's results.json: :func:`write_results` plus what the run controls add.

    The metrics are those of epoch 0 (the dataset's option order) over the
    answered samples; ``n_answered`` and ``skipped`` count and list the samples
    left out (with the ``budget``); ``epochs`` (with ``epochs`` > 1)
    reduces every epoch (:func:`ecgtrace.agents.exam.run_control.epoch_summary`);
    ``usage`` sums tokens and cost per model over every request of the run.
    """
    from ecgtrace.agents.exam.run_control import epoch_summary, usage_summary

    epochs = max(1, int(epochs))
    wanted = {item_id(it) for it in items}
    rows = [r for r in run.samples() if item_id_of(r) in wanted and int(r.get("epoch") or 0) < epochs]
    first = [r for r in rows if not r.get("epoch")]
    skipped = [r for r in first if r.get("skipped")]
    results = {**extra, "run_id": run.run_id, "n_items": len(items), "n_finished": len(first), "n_answered": len(first) - len(skipped),
               "complete": len(rows) == len(items) * epochs, **summarize(answered(first))}
    results["skipped"] = {"n": len(skipped), "by_kind": dict(sorted(Counter(r["skipped"]["kind"] for r in skipped).items())),
                          "ids": sorted(r["id"] for r in skipped), "budget": budget}
    if epochs > 1 and headline is not None:
        results["epochs"] = epoch_summary(answered(rows), epochs, headline)
    results["usage"] = usage_summary(rows, models or {}, pricing)
    run.write_results(results)
    return results
