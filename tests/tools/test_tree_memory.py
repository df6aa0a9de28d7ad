"""benchmarks/_tree_memory.py: a forked worker's shared pages count once, its own pages count in full."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest

from tests.support.benchmarks import import_benchmark

pytestmark = pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="needs Linux /proc/<pid>/smaps_rollup")


def _memory():
    return import_benchmark("_tree_memory")


def _hold(ready, done, own_mb: int) -> None:
    block = np.ones(own_mb * 2**20 // 8) if own_mb else None  # written: private pages of this worker
    ready.set()
    done.wait(30)
    del block


@pytest.mark.parametrize("own_mb", [0, 64])
def test_worker_pages_counted_once(own_mb: int) -> None:
    mem = _memory()
    inherited = np.ones(96 * 2**20 // 8)  # 96 MB the parent holds and a forked worker maps too (shared)
    ctx = multiprocessing.get_context("fork")
    ready, done = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_hold, args=(ready, done, own_mb))
    before = mem.tree_kb(os.getpid()) / 1024
    child.start()
    try:
        assert ready.wait(30)
        child_rss = mem.rollup_kb(child.pid)["Rss"] / 1024
        added = mem.tree_kb(os.getpid()) / 1024 - before
        assert child_rss > 90 + own_mb  # RSS counts the inherited 96 MB again: the bound's double count
        assert own_mb - 5 < added < own_mb + 25  # the tree adds only what the worker wrote itself
    finally:
        done.set()
        child.join(30)
    del inherited


def test_sampler_keeps_the_peak_of_a_worker_that_has_ended() -> None:
    """A worker writes 80 MB, holds it, and exits: the sampled peak keeps it, the next stage's starts without it.

    (The block lives in a fresh worker so that its pages are new whatever the test process's allocator holds.)
    """
    import time

    mem = _memory()
    ctx = multiprocessing.get_context("fork")
    ready, done = ctx.Event(), ctx.Event()
    with mem.TreeMemory(interval_s=0.01) as tree:
        start = tree.take()
        child = ctx.Process(target=_hold, args=(ready, done, 80))
        child.start()
        assert ready.wait(30)
        deadline = time.monotonic() + 10
        while tree.peak_mb - start < 70 and time.monotonic() < deadline:  # on a loaded machine the sampler may wait its turn
            time.sleep(0.02)
        done.set()
        child.join(30)
        peak = tree.take()
        after = tree.take()
    assert peak - start > 70 and tree.peak_mb >= peak
    assert after < peak - 50  # take() restarts the per-stage peak
