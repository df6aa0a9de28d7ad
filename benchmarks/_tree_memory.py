"""Memory of a process and its workers as the machine sees it: the parent's RSS plus the workers' private pages.

``ru_maxrss`` counts every page a process maps, including the pages a forked
worker shares with its parent (copy-on-write: the libraries and arrays it
inherited). Adding the workers' RSS to the parent's therefore counts those
pages once per process. Here the root process counts all its resident pages
(RSS: libraries it shares with unrelated processes included, so nothing is
flattered) and each descendant only the pages no other process maps
(``Private_Clean + Private_Dirty`` of ``/proc/<pid>/smaps_rollup``, its USS):
a page a worker shares with its parent is counted once. :class:`TreeMemory`
samples that sum every ``interval_s`` in a daemon thread (Linux only); a peak
shorter than the interval can be missed, so the benchmark prints it next to
the ``ru_maxrss`` bound, not instead of it.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (all its threads'), from ``/proc/<pid>/task/*/children``."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue  # the thread or process ended meanwhile
    return out


def rollup_kb(pid: int) -> dict[str, int]:
    """``/proc/<pid>/smaps_rollup`` as ``{field: kB}`` (empty once the process has ended)."""
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            name, _, rest = line.partition(":")
            parts = rest.split()
            if len(parts) == 2 and parts[1] == "kB":
                out[name] = int(parts[0])
    except OSError:
        pass
    return out


def tree_kb(root: int) -> int:
    """RSS of ``root`` plus the private pages (USS) of all its descendants, in kB."""
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        r = rollup_kb(pid)
        total += r.get("Rss", 0) if pid == root else r.get("Private_Clean", 0) + r.get("Private_Dirty", 0)
        todo += _children(pid)
    return total


class TreeMemory:
    """Sampled peak of this process tree's memory (:func:`tree_kb`, MB), overall and since the last :meth:`take`."""

    def __init__(self, interval_s: float = 0.02) -> None:
        self.available = Path(f"/proc/{os.getpid()}/smaps_rollup").exists()
        self.interval_s = interval_s
        self._peak_kb = 0
        self._since_kb = 0
        self._stage = 0  # bumped by take(): a sample begun before it belongs to the stage that ended
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-memory", daemon=True)

    def __enter__(self) -> TreeMemory:
        if self.available:
            self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        root = os.getpid()
        while not self._stop.is_set():
            with self._lock:
                stage = self._stage
            kb = tree_kb(root)
            with self._lock:
                self._peak_kb = max(self._peak_kb, kb)
                if stage == self._stage:
                    self._since_kb = max(self._since_kb, kb)
            time.sleep(self.interval_s)

    def take(self) -> float:
        """Peak MB since the previous call (one more sample first, so a short stage still has one)."""
        kb = tree_kb(os.getpid()) if self.available else 0
        with self._lock:
            since = max(self._since_kb, kb)
            self._peak_kb = max(self._peak_kb, kb)
            self._since_kb = 0
            self._stage += 1
        return since / 1024

    @property
    def peak_mb(self) -> float:
        with self._lock:
            return self._peak_kb / 1024


__all__ = ["TreeMemory", "rollup_kb", "tree_kb"]
