"""The local executor: worker processes on this machine (:func:`ecgtrace.workers.worker_pool`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import as_completed
from multiprocessing.managers import BaseManager
import os
import threading
from typing import Any

from ecgtrace.executors.base import Executor, Shared, Task, call_task, describe_error


class LocalExecutor(Executor):
    """Up to ``workers`` tasks at once, each attempt in a worker process of its own that dies with this one.

    A process per attempt (started with ``spawn``: nothing of this process's
    threads is forked) tells exactly which task lost its worker (killed, out of
    memory): only that task is charged an attempt, and the others run on.
    """

    name = "local"

    def __init__(self, workers: int = 2, *, start_method: str = "spawn") -> None:
        self.workers = max(1, int(workers))
        self.start_method = start_method
        self._managers: list[Any] = []
        self._pools: set[Any] = set()
        self._lock = threading.Lock()

    def _attempt(self, task: Task, kill_dir: str | None) -> Any:
        from ecgtrace.workers import worker_pool

        with worker_pool(1, start_method=self.start_method) as pool:
            with self._lock:
                self._pools.add(pool)
            try:
                return pool.submit(call_task, task.fn, task.args, task.key, kill_dir, self.cwd).result()
            finally:
                with self._lock:
                    self._pools.discard(pool)

    def _round(self, tasks: list[Task], kill_dir: str | None) -> Iterator[tuple[Task, Any, str | None]]:
        from concurrent.futures import ThreadPoolExecutor

        from ecgtrace.workers import stop_pool

        threads = ThreadPoolExecutor(max_workers=min(self.workers, len(tasks)), thread_name_prefix="ecgtrace-task")
        try:
            futures = {threads.submit(self._attempt, t, kill_dir): t for t in tasks}
            for future in as_completed(futures):
                try:
                    value = future.result()
                except Exception as exc:  # noqa: BLE001 - a task's failure is an outcome, reported by the caller
                    yield futures[future], None, describe_error(exc)
                else:
                    yield futures[future], value, None
        except BaseException:  # interrupted: stop every worker now, so no thread waits on one
            threads.shutdown(wait=False, cancel_futures=True)
            with self._lock:
                for pool in list(self._pools):
                    stop_pool(pool)
            raise
        threads.shutdown(wait=True)

    def serve(self, factory: Callable[..., Any], *args: Any) -> Shared:
        """A manager process holding ``factory(*args)``; its proxy pickles into the workers (same authkey)."""
        import multiprocessing

        manager = _Manager(ctx=multiprocessing.get_context(self.start_method))
        manager.start(initializer=_ignore_interrupts, initargs=(os.getpid(),))
        self._managers.append(manager)
        return Shared("local", manager.shared(factory, *args))  # type: ignore[attr-defined]

    def close(self) -> None:
        for manager in self._managers:
            manager.shutdown()
        self._managers.clear()


def _construct(factory: Callable[..., Any], *args: Any) -> Any:
    return factory(*args)


class _Manager(BaseManager):
    """Serves shared objects (typeid ``shared``: ``factory(*args)`` made in the manager process)."""


_Manager.register("shared", callable=_construct)


def _ignore_interrupts(parent_pid: int) -> None:
    """Manager initializer: Ctrl-C goes to the whole group; the manager leaves it to its parent, which shuts it down.

    It also ends with ``parent_pid``, given by the parent (see :func:`ecgtrace.workers.worker_pool`).
    """
    import signal

    from ecgtrace.workers import die_with_parent

    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
