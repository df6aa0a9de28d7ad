"""What every executor shares: tasks, outcomes, bounded retries, shared objects, the kill test hook."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ecgtrace.errors import EcgTraceError

#: Test hook: a folder; every task kills its own worker process (SIGKILL) on its first
#: attempt, leaving a marker file there, so the tests check that a dead worker's task is retried.
KILL_ENV = "ECGTRACE_KILL_TASK_ONCE"


class TasksFailedError(EcgTraceError):
    """Tasks still failed after their retries (the finished ones are kept): exit 3, like a failed examination."""

    exit_code: int = 3


@dataclass(frozen=True)
class Task:
    """One piece of work: ``fn(*args)`` in a worker; ``fn`` is a module-level function (pickled by name).

    ``key`` names the task in outcomes and reports (a record path, a shard);
    ``cpus`` and ``memory_bytes`` are what it needs (Ray schedules by them).
    """

    key: str
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    cpus: float = 1.0
    memory_bytes: int | None = None


@dataclass
class Outcome:
    """How a task ended: ``value`` (its return) or ``error`` (the last attempt's), after ``attempts`` tries."""

    key: str
    value: Any = None
    error: str | None = None
    attempts: int = 1

    @property
    def ok(self) -> bool:
        return self.error is None


def failures_line(failed: list[Outcome]) -> str:
    """One line naming every failed task, its attempts and its last error."""
    return "; ".join(f"{o.key}: {o.error} (after {o.attempts} attempt{'s' * (o.attempts > 1)})" for o in failed)


def describe_error(exc: BaseException) -> str:
    """An exception as one line (Ray wraps a task's error in a long traceback: its last line says it)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"[:400]


def call_task(fn: Callable[..., Any], args: tuple[Any, ...], key: str, kill_dir: str | None, cwd: str | None = None) -> Any:
    """Run ``fn(*args)`` in the worker, in the caller's working folder ``cwd`` (relative record and output
    paths mean there what they meant to the caller), after the :data:`KILL_ENV` hook when a test set it."""
    if cwd and os.getcwd() != cwd:
        os.chdir(cwd)  # a Ray worker starts in a folder of Ray's own
    if kill_dir:
        marker = Path(kill_dir) / hashlib.sha256(key.encode()).hexdigest()[:16]
        if not marker.exists():
            marker.write_text(key, encoding="utf-8")
            os.kill(os.getpid(), signal.SIGKILL)
    return fn(*args)


@dataclass
class Shared:
    """An object every task can call: a manager proxy (``local``) or an actor handle (``ray``). Picklable."""

    kind: str
    handle: Any
    _meta: dict[str, Any] = field(default_factory=dict)

    def call(self, method: str, *args: Any) -> Any:
        """Call ``method(*args)`` on the object and wait for its answer."""
        if self.kind == "ray":
            import ray

            return ray.get(getattr(self.handle, method).remote(*args))
        return getattr(self.handle, method)(*args)

    async def acall(self, method: str, *args: Any) -> Any:
        """The same, awaited without blocking the event loop."""
        if self.kind == "ray":
            return await getattr(self.handle, method).remote(*args)
        return await asyncio.to_thread(getattr(self.handle, method), *args)


class Executor:
    """Runs tasks with bounded retries; subclasses say how one round of attempts runs (:meth:`_round`)."""

    name = "base"
    #: The caller's working folder, where every task runs (set by :meth:`run`).
    cwd: str | None = None

    def run(self, tasks: Iterable[Task], *, retries: int = 2, on_done: Callable[[Outcome], None] | None = None) -> list[Outcome]:
        """Run every task, each up to ``1 + retries`` times; one outcome per task, in the order given.

        ``on_done(outcome)`` is called in this process as each task finishes for
        good (succeeded, or failed its last attempt), so the caller can keep its
        result at once: a build interrupted later loses nothing finished.
        """
        todo = list(tasks)
        order = {t.key: i for i, t in enumerate(todo)}
        if len(order) != len(todo):
            raise ValueError("task keys must be unique")
        attempts = {t.key: 0 for t in todo}
        final: dict[str, Outcome] = {}
        kill_dir = os.environ.get(KILL_ENV) or None
        self.cwd = os.getcwd()
        while todo:
            again = []
            for task, value, error in self._round(todo, kill_dir):
                attempts[task.key] += 1
                if error is not None and attempts[task.key] <= retries:
                    again.append(task)
                    continue
                final[task.key] = Outcome(task.key, value, error, attempts[task.key])
                if on_done is not None:
                    on_done(final[task.key])
            todo = sorted(again, key=lambda t: order[t.key])
        return sorted(final.values(), key=lambda o: order[o.key])

    def _round(self, tasks: list[Task], kill_dir: str | None) -> Iterator[tuple[Task, Any, str | None]]:
        """One attempt of each task: ``(task, value, None)`` or ``(task, None, error)``, in any order."""
        raise NotImplementedError

    def serve(self, factory: Callable[..., Any], *args: Any) -> Shared:
        """``factory(*args)`` made once, where every task of this executor can call it."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop what this executor started (worker processes, managers, a private Ray)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
