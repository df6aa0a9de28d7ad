"""Shared helpers for benchmark scripts: run a callable in a child process and report wall time and peak RSS."""

from __future__ import annotations

import multiprocessing as mp
import resource
import time
from collections.abc import Callable
from typing import Any


def _child(target: Callable[..., Any], args: tuple, queue: mp.Queue) -> None:
    started = time.perf_counter()
    result = target(*args)
    queue.put((time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, result))


def run_measured(target: Callable[..., Any], *args: Any) -> tuple[float, float, Any]:
    """Run ``target(*args)`` in a fresh process; return (wall seconds, peak RSS in MB, result).

    A fresh process makes the peak RSS belong to this call alone (ru_maxrss never goes down).
    ``target`` must be importable (a module-level function).
    """
    ctx = mp.get_context("spawn")
    queue: mp.Queue = ctx.Queue()
    process = ctx.Process(target=_child, args=(target, args, queue))
    process.start()
    wall_s, peak_mb, result = queue.get()
    process.join()
    return wall_s, peak_mb, result
