"""A bounded pool of asyncio workers shared by the audit and QA runners."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

ItemT = TypeVar("ItemT")


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
