"""Where independent pieces of work run: this machine's worker processes (``local``) or a Ray cluster (``ray``).

One interface for the two users of parallel work, the dataset build (one task
per record, :mod:`ecgtrace.graphs.holter_build`) and the examinations (one task
per shard of samples, :mod:`ecgtrace.commands._exam_run`):

* :meth:`Executor.run` runs :class:`Task` objects (a module-level function and
  its picklable arguments, with the CPUs and memory it needs), retries a task
  that raised or whose worker died a bounded number of times, and returns one
  :class:`Outcome` per task, failures included: nothing is lost silently.
* :meth:`Executor.serve` puts one object where every task can call it (a
  :mod:`multiprocessing` manager locally, an actor on Ray): the shared rate
  limit's budget lives there.

Ray is an optional extra (``ecgtrace[ray]``) imported only by
:mod:`ecgtrace.executors.ray_executor`, so the local default never loads it.
"""

from __future__ import annotations

from typing import Any

from ecgtrace.executors.base import KILL_ENV, Executor, Outcome, Shared, Task, TasksFailedError, failures_line

#: The executors a command offers (``--executor``).
EXECUTORS = ("local", "ray")

__all__ = ["EXECUTORS", "KILL_ENV", "Executor", "Outcome", "Shared", "Task", "TasksFailedError", "failures_line", "make_executor"]


def make_executor(name: str = "local", *, workers: int = 2, address: str | None = None) -> Executor:
    """The executor called ``name``: ``local`` (``workers`` processes) or ``ray`` (a cluster at ``address``).

    ``address``: ``auto`` (the cluster ``ray start --head`` started on this
    machine), ``ray://host:10001`` (a remote cluster through Ray Client), or
    None (a private Ray instance on this machine, stopped at :meth:`Executor.close`).

    Raises:
        EcgTraceError: an unknown name, an ``address`` without ``ray``, or Ray missing.
    """
    from ecgtrace.errors import EcgTraceError

    if name not in EXECUTORS:
        raise EcgTraceError(f"--executor: unknown executor {name!r}; choose from {', '.join(EXECUTORS)}")
    if name == "local":
        if address:
            raise EcgTraceError("--address names a Ray cluster: it needs --executor ray")
        from ecgtrace.executors.local import LocalExecutor

        return LocalExecutor(workers)
    from ecgtrace.executors.ray_executor import RayExecutor

    return RayExecutor(address=address, workers=workers)


def executor_arguments(parser: Any, *, what: str) -> None:
    """``--executor`` and ``--address`` on ``parser`` (``what``: what one task is, for the help)."""
    parser.add_argument("--executor", choices=EXECUTORS, default="local",
                        help=f"where the work runs: local worker processes (default) or a Ray cluster, one task per {what} "
                             "(needs the extra: pip install 'ecgtrace[ray]')")
    parser.add_argument("--address", default=None, metavar="ADDR",
                        help="with --executor ray: 'auto' (the cluster `ray start --head` runs here) or ray://HOST:10001 "
                             "(default: a private Ray on this machine)")
