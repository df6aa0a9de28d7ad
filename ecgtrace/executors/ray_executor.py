"""The Ray executor (``--executor ray``): one Ray task per :class:`~ecgtrace.executors.base.Task`, shared objects as actors.

Tasks declare what they need (``num_cpus``, ``memory`` in bytes), so Ray
places them where that is free. Ray's own retries are off
(``max_retries=0``): :meth:`Executor.run` retries a task that raised and a
task whose worker died alike, with one bound, and reports the rest.

The workers read the records and write into the output folder by the same
paths as this process: on a cluster of several machines those paths must be on
a filesystem every node mounts at the same place (the README says how to set
it up), and every node runs the same ecgtrace version.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ecgtrace.errors import EcgTraceError
from ecgtrace.executors.base import Executor, Shared, Task, call_task, describe_error


def import_ray() -> Any:
    """The ``ray`` module, or one ``error:`` line saying how to install it."""
    try:
        import ray
    except ImportError:
        raise EcgTraceError("--executor ray needs Ray: pip install 'ecgtrace[ray]'") from None
    return ray


class RayExecutor(Executor):
    """Tasks on the Ray cluster at ``address`` (see :func:`ecgtrace.executors.make_executor`).

    A Ray already initialized in this process (a test's, a notebook's) is used
    as it is and left running; one this executor starts is shut down at :meth:`close`.
    """

    name = "ray"

    def __init__(self, *, address: str | None = None, workers: int = 2) -> None:
        ray = import_ray()
        self._started = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
            if address:
                kwargs["address"] = address
            else:
                kwargs["num_cpus"] = max(1, int(workers))
            try:
                ray.init(**kwargs)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise EcgTraceError(f"--executor ray: cannot reach the Ray cluster at {address or 'this machine'} ({describe_error(exc)})") from None
            self._started = True
        self._actors: list[Any] = []
        self._remote = ray.remote(call_task)

    def _largest_node(self, resource: str) -> float:
        """The most of ``resource`` (``CPU``, ``memory``) any one node offers: a task asking more would wait forever."""
        import ray

        return max((n.get("Resources", {}).get(resource, 0.0) for n in ray.nodes() if n.get("Alive")), default=0.0)

    def _round(self, tasks: list[Task], kill_dir: str | None) -> Iterator[tuple[Task, Any, str | None]]:
        import ray

        cpus, memory = self._largest_node("CPU"), self._largest_node("memory")
        refs = {}
        for task in tasks:
            options: dict[str, Any] = {"num_cpus": min(task.cpus, cpus) if cpus else task.cpus, "max_retries": 0,
                                       "retry_exceptions": False, "name": f"ecgtrace:{task.key}"[:120]}
            if task.memory_bytes:
                options["memory"] = int(min(task.memory_bytes, memory) if memory else task.memory_bytes)
            refs[self._remote.options(**options).remote(task.fn, task.args, task.key, kill_dir, self.cwd)] = task
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                try:
                    value = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - a task's failure (raised, or its worker died) is an outcome
                    yield refs[ref], None, describe_error(getattr(exc, "cause", None) or exc)
                else:
                    yield refs[ref], value, None

    def serve(self, factory: Callable[..., Any], *args: Any) -> Shared:
        """An actor holding ``factory(*args)`` (no CPU reserved: it only books; calls are served one at a time)."""
        import ray

        actor = ray.remote(factory).options(num_cpus=0).remote(*args)
        self._actors.append(actor)
        return Shared("ray", actor)

    def close(self) -> None:
        import ray

        for actor in self._actors:
            ray.kill(actor)
        self._actors.clear()
        if self._started and ray.is_initialized():
            ray.shutdown()
            self._started = False
