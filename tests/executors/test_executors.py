"""Both executors on small functions: outcomes in order, bounded retries, a killed worker retried, shared objects."""

from __future__ import annotations

import pytest

from ecgtrace.errors import EcgTraceError
from ecgtrace.executors import KILL_ENV, Task, make_executor


def square(x: int) -> int:
    return x * x


def fail(x: int) -> int:
    raise ValueError(f"no good: {x}")


class Tally:
    def __init__(self, start: int) -> None:
        self.n = start

    def add(self, k: int) -> int:
        self.n += k
        return self.n


def add_to(shared, k: int) -> int:  # noqa: ANN001
    return shared.call("add", k)


@pytest.fixture(params=["local", "ray"])
def executor(request):
    if request.param == "ray":
        request.getfixturevalue("ray_local")
    with make_executor(request.param, workers=2) as ex:
        yield ex


def test_outcomes_in_task_order_and_failures_reported_after_bounded_retries(executor):
    tasks = [Task(f"t{i}", square, (i,)) for i in range(4)] + [Task("bad", fail, (7,))]
    out = executor.run(tasks, retries=1)
    assert [o.key for o in out] == ["t0", "t1", "t2", "t3", "bad"]
    assert [o.value for o in out[:4]] == [0, 1, 4, 9] and all(o.ok and o.attempts == 1 for o in out[:4])
    assert not out[4].ok and out[4].attempts == 2 and "ValueError: no good: 7" in out[4].error


def test_a_killed_worker_is_retried_and_only_its_task_is_charged(executor, tmp_path, monkeypatch):
    monkeypatch.setenv(KILL_ENV, str(tmp_path))  # every task kills its worker on its first attempt
    out = executor.run([Task(f"k{i}", square, (i,)) for i in range(3)], retries=1)
    assert [(o.value, o.attempts) for o in out] == [(0, 2), (1, 2), (4, 2)]
    assert len(list(tmp_path.iterdir())) == 3


def test_a_served_object_is_one_object_for_every_task(executor):
    shared = executor.serve(Tally, 10)
    values = sorted(o.value for o in executor.run([Task(f"u{i}", add_to, (shared, 1)) for i in range(4)]))
    assert values == [11, 12, 13, 14]
    assert shared.call("add", 0) == 14


def test_unknown_executor_and_address_without_ray_are_one_line_errors():
    with pytest.raises(EcgTraceError, match="unknown executor 'dask'"):
        make_executor("dask")
    with pytest.raises(EcgTraceError, match="--address names a Ray cluster"):
        make_executor("local", address="auto")


def test_tasks_run_in_the_callers_folder_so_relative_paths_mean_the_same(executor, tmp_path, monkeypatch):
    import os

    monkeypatch.chdir(tmp_path)
    out = executor.run([Task("cwd", os.getcwd)])
    assert out[0].value == str(tmp_path)


def test_a_task_asking_more_than_any_node_has_is_placed_on_the_largest(ray_local):
    """A build task asks for its render CPUs; on a 2-CPU Ray, 8 would wait forever: it gets the largest node's CPUs."""
    with make_executor("ray") as ex:
        out = ex.run([Task("big", square, (3,), cpus=8.0, memory_bytes=10**15)], retries=0)
    assert out[0].value == 9
