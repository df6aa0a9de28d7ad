"""Worker process pools that never outlive the process that started them.

A ``ProcessPoolExecutor`` worker blocks on its task queue; when its parent is
killed (SIGTERM with no handler, kill -9) nothing tells it, and workers were
seen computing on for 98 s, with the forkserver and resource tracker kept
alive by them. Two measures, used by every pool in ecgtrace (annotate's beat
detection, beat features and P-wave search, rendering, the build's per-record
workers):

* :func:`die_with_parent`, the pool initializer: a daemon thread in each
  worker checks once per :data:`PARENT_POLL_S` whether its parent is still the
  process that started it and ends the worker (``os._exit``) once it is not.
  (``prctl(PR_SET_PDEATHSIG)`` is not used: Linux fires it when the *thread*
  that forked the worker ends, and pools fork from helper threads.)
* :func:`worker_pool`: a context manager whose pool, on any error or
  interruption (Ctrl-C, SIGTERM turned into one by the CLI), terminates its
  workers and drops the queued tasks instead of waiting for them.

A pool's workers also run their BLAS single-threaded by default
(``threadpoolctl``): N workers on N cores each with N BLAS threads only spin.
Measured on the classifier's 24 h feature pass (2 cores): serial 5.2 s wall for
10.1 s CPU with OpenBLAS's 2 threads, 5.1 s for 5.0 s CPU with one; two workers
7.2 s with 2 threads each, 3.0 s with one.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any

#: How often a worker checks that its parent is alive (s).
PARENT_POLL_S = 0.5


def _watch_parent(parent_pid: int) -> None:
    while True:
        if os.getppid() != parent_pid:
            os._exit(1)  # orphaned: the work is no longer wanted, and nothing would collect it
        time.sleep(PARENT_POLL_S)


def die_with_parent(parent_pid: int | None = None) -> None:
    """Pool initializer: end this worker as soon as its parent process is gone (see the module docstring).

    The worker also leaves interruptions to its parent: Ctrl-C (sent to the
    whole process group) is ignored here, and SIGTERM (what the parent's pool
    sends to stop it) ends it at once instead of raising in its task.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    pid = parent_pid if parent_pid is not None else os.getppid()
    threading.Thread(target=_watch_parent, args=(pid,), name="ecgtrace-parent-watch", daemon=True).start()


def init_worker(parent_pid: int | None, blas_threads: int | None) -> None:
    """Pool initializer: :func:`die_with_parent`, and BLAS (OpenBLAS, MKL, OpenMP) limited to ``blas_threads`` (None: as is)."""
    die_with_parent(parent_pid)
    if blas_threads is not None:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=blas_threads)  # kept for the worker's life (no restore)


@contextmanager
def worker_pool(max_workers: int, *, start_method: str | None = None, blas_threads: int | None = 1) -> Iterator[ProcessPoolExecutor]:
    """A ``ProcessPoolExecutor`` whose workers die with this process and are stopped at once on an error.

    Args:
        max_workers: worker processes.
        start_method: ``fork``, ``forkserver``, ``spawn`` (None: the platform's default).
        blas_threads: BLAS threads per worker (None leaves the library's default: for a lone worker that may use the cores).
    """
    context = multiprocessing.get_context(start_method) if start_method else None
    method = (context or multiprocessing.get_context()).get_start_method()  # what ProcessPoolExecutor would use
    # a forked or spawned worker is given its parent's pid: one that starts after its parent died would read its
    # ppid as 1 (init) and watch the wrong parent for ever (seen with spawned workers on a loaded machine). A
    # forkserver's workers are the forkserver's children, so they watch the ppid they find.
    initargs = (None if method == "forkserver" else os.getpid(), blas_threads)
    pool = ProcessPoolExecutor(max_workers=max_workers, mp_context=context, initializer=init_worker, initargs=initargs)
    try:
        yield pool
    except BaseException:
        stop_pool(pool)
        raise
    pool.shutdown(wait=True)


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Terminate the pool's workers now and drop its queued tasks (after an error or an interruption)."""
    processes: dict[Any, Any] = dict(getattr(pool, "_processes", None) or {})
    for process in processes.values():
        try:
            process.terminate()
        except (OSError, AttributeError):
            pass
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes.values():
        try:
            process.join(timeout=2)
        except (OSError, AttributeError, AssertionError):
            pass
