"""Build a dataset from many records: one HolterAgent thread per record, bounded parallelism, resume.

Each record runs :func:`ecgtrace.graphs.holter_qa.run_record` in a worker
process (its own SQLite checkpoint file, so no shared writer), then the
per-record parts are assembled into ``qa.jsonl`` and ``manifest.json``
(:mod:`ecgtrace.agents.holter.dataset`). Rerunning the same command resumes crashed
records from their checkpoint and reuses finished ones.

Nothing half-done passes for a dataset:

* every record is checked up front (opened, leads probed, reference
  annotations compared with the signal, hashed:
  :func:`ecgtrace.agents.holter.annotator.load_record`), so a bad record fails
  before the output folder is created or any worker starts;
* one build at a time per output folder (:mod:`ecgtrace.folder_lock`);
* while a build runs, and after one that failed or was killed, the folder
  holds :data:`ecgtrace.contracts.datasets.UNFINISHED_BUILD`, which says so and
  makes every dataset reader refuse the folder; it goes only once
  ``qa.jsonl``, ``manifest.json`` and ``audit.jsonl`` are all written, so the
  dataset's files appear together;
* a record whose build fails on its input leaves no checkpoint behind.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ecgtrace.agents.holter.annotator import load_record
from ecgtrace.folder_lock import lock_folder
from ecgtrace.graphs.holter_qa import BuildOptions, build_versions, run_record, templates_for, thread_id
from ecgtrace.jsonio import make_folder

#: Where finished records' parts are kept, content-addressed (:mod:`ecgtrace.executors.shards`).
SHARDS = ".shards"


@dataclass(frozen=True)
class RunOn:
    """Where a build's records run: ``executor`` (``local`` | ``ray``), the Ray ``address``, retries per record."""

    executor: str = "local"
    address: str | None = None
    retries: int = 2



def _one(record: str, out_dir: str, options: BuildOptions, cache_dir: str | None) -> bytes:
    """Build one record in a worker; the bytes of its part (the driver stores them as a shard)."""
    state = run_record(record, out_dir, options, cache_dir=cache_dir)
    return Path(state["part"]).read_bytes()


#: Memory a record's task asks for (bytes): a base plus this many times the record's file size
#: (streamed 10-min chunks, rendering and the float64 copies of the chunk in flight; see PITFALLS.md).
TASK_MEMORY_BASE_BYTES = 512 * 2**20
TASK_MEMORY_PER_FILE_BYTE = 8


def record_memory_bytes(record: str) -> int:
    """What one record's build task declares it needs (see :data:`TASK_MEMORY_PER_FILE_BYTE`)."""
    from ecgtrace.tools.record_source import resolve_record

    size = sum(f.stat().st_size for f in resolve_record(record).files if f.is_file())
    return TASK_MEMORY_BASE_BYTES + TASK_MEMORY_PER_FILE_BYTE * size


def _run_records(records: list[str], out: str, options: BuildOptions, cache_dir: str | None, jobs: int, console: Any,
                 run: RunOn) -> dict[str, Path]:
    """``{record: shard of its part}``; finished records (an intact shard under the same thread id) are skipped.

    One job on the local executor builds in this process (with per-stage progress);
    anything else goes through :mod:`ecgtrace.executors`, one task per record,
    each kept as a content-addressed shard the moment it finishes.

    Raises:
        TasksFailedError: records that still failed after ``run.retries`` retries (the others stay stored).
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ecgtrace.executors.shards import ShardStore

    store = ShardStore(Path(out) / SHARDS)
    keys = {record: thread_id(record, options) for record in records}
    shards = {r: p for r in records if (p := store.path_of(keys[r])) is not None}
    todo = [r for r in records if r not in shards]
    with Progress(TextColumn("[bold]build[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=True, disable=console is None or not console.is_terminal) as progress:
        task = progress.add_task("records", total=len(records), completed=len(shards))
        if run.executor == "local" and (jobs <= 1 or len(todo) <= 1):
            for record in todo:
                progress.update(task, description=f"{record}: load")
                state = run_record(record, out, options, cache_dir=cache_dir,
                                   on_stage=lambda node, r=record: progress.update(task, description=f"{r}: {node}"))
                shards[record] = store.put(keys[record], Path(state["part"]).read_bytes(), label=record)
                progress.advance(task)
        elif todo:
            shards.update(_run_on_executor(todo, out, options, cache_dir, jobs, run, store, keys,
                                           lambda r: (progress.update(task, description=r), progress.advance(task))))
    return shards


def _run_on_executor(todo: list[str], out: str, options: BuildOptions, cache_dir: str | None, jobs: int, run: RunOn,
                     store: Any, keys: dict[str, str], advance: Any) -> dict[str, Path]:
    from ecgtrace.executors import Task, TasksFailedError, failures_line, make_executor

    shards: dict[str, Path] = {}

    def keep(outcome: Any) -> None:
        if outcome.ok:
            shards[outcome.key] = store.put(keys[outcome.key], outcome.value, label=outcome.key)
            advance(outcome.key)

    cpus = float(options.get("render_jobs") or 1)
    tasks = [Task(r, _one, (r, out, options, cache_dir), cpus=cpus, memory_bytes=record_memory_bytes(r)) for r in todo]
    with make_executor(run.executor, workers=min(jobs, len(todo)), address=run.address) as executor:
        outcomes = executor.run(tasks, retries=run.retries, on_done=keep)
    failed = [o for o in outcomes if not o.ok]
    if failed:
        raise TasksFailedError(f"{len(failed)} of {len(todo)} records failed, the rest are kept (rerun the same command to build only those): "
                         + failures_line(failed))
    return shards


def _gather(records: list[str], shards: dict[str, Path]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """``(items, dropped, record references)`` of every record's part, in the order the records were given."""
    items, dropped, refs = [], [], []
    for record in records:
        part = json.loads(shards[record].read_text(encoding="utf-8"))
        items += part["items"]
        dropped += part["dropped"]
        refs.append(part["record"])
    return items, dropped, refs


def _read_bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def _write_audit(refs: list[dict[str, Any]], out: str, seed: int, cache_dir: str | None, console: Any) -> dict[str, Any]:
    """Write ``audit.jsonl`` unless the folder already holds the same build; ``{"items", "reused"}``, or ``{"error"}``.

    A failure does not undo the QA dataset, which is written by then, but the
    folder stays marked unfinished (a rerun retries the audit items, reusing
    every record) and the command exits non-zero (:mod:`ecgtrace.commands.build`).
    """
    if importlib.util.find_spec("ecgtrace.agents.audit.dataset") is None:
        return {}
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ecgtrace.agents.audit.dataset import write_audit_dataset
    from ecgtrace.agents.audit.freshness import audit_build_key, current_audit_summary
    from ecgtrace.tools.annotate import annotation_store_dir

    usable = [r for r in refs if r.get("leads")]
    key = audit_build_key({r["path"]: r["hash"] for r in usable}, seed=seed)
    current = current_audit_summary(out, key)
    if current is not None:
        return {"items": current["n_items"], "reused": True}
    with Progress(TextColumn("[bold]audit items[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                  TimeElapsedColumn(), console=console, transient=False, disable=console is None) as progress:
        task = progress.add_task("records measured", total=max(1, len(usable)))

        def show(step: str, done: int, total: int) -> None:
            what = "records measured" if step == "records" else "items rendered (PNG + text)"
            progress.update(task, completed=done, total=max(1, total), description=what)

        try:
            summary = write_audit_dataset([r["path"] for r in usable], out, seed=seed, cache_dir=annotation_store_dir(cache_dir),
                                          build_key=key, on_progress=show)
        except Exception as exc:  # noqa: BLE001 - the QA dataset is kept; the command reports the audit failure
            return {"error": f"{type(exc).__name__}: {exc}"}
    return {"items": summary["n_items"], "reused": False}


def build_dataset(records: list[str], out_dir: str | os.PathLike[str], options: BuildOptions, *, jobs: int = 2, console: Any = None,
                  audit: bool = True, dev_fraction: float = 0.2, cache_dir: str | os.PathLike[str] | None = None,
                  run_on: RunOn | None = None) -> dict[str, Any]:
    """Build (or resume) the dataset of ``records`` into ``out_dir``; returns the manifest.

    ``cache_dir``: the annotation cache root (default: the user's ecgtrace
    cache, ``$ECGTRACE_CACHE`` or the platform cache folder; never a record's folder).
    The returned manifest also says what this call changed: ``qa_changed`` (whether
    ``qa.jsonl`` or ``manifest.json`` got other bytes) and ``audit``
    (``{"items", "reused"}``, or ``{"error"}``). A rerun on unchanged records,
    seed and versions keeps ``audit.jsonl`` (:mod:`ecgtrace.agents.audit.freshness`).
    ``run_on``: where the records run (default: local worker processes, 2 retries
    per record); the dataset is the same bytes wherever they ran.

    Raises:
        EcgTraceError: a bad template or record (before anything is written),
            a bad ``dev_fraction`` or ``jobs``, or another build holding ``out_dir``.
        TasksFailedError: records that failed every attempt (the finished ones are kept for the rerun).
    """
    from ecgtrace.agents.holter.dataset import write_dataset

    check_build_options(jobs=jobs, dev_fraction=dev_fraction, fs_hz=options.get("fs_hz"))
    out = str(Path(out_dir).resolve())
    cache = None if cache_dir is None else str(Path(cache_dir).resolve())
    templates_for(options)  # fail early on a bad template or record, before any folder or worker exists
    for record in records:
        load_record(record, fs_hz=options.get("fs_hz"))
    make_folder(out)
    with lock_folder(out, "build output folder"):
        state = mark_unfinished(out, records)
        parts = _run_records(records, out, options, cache, jobs, console, run_on or RunOn())
        items, dropped, refs = _gather(records, parts)
        seed = int(options.get("seed", 0))
        before = _read_bytes(Path(out) / "qa.jsonl"), _read_bytes(Path(out) / "manifest.json")
        manifest = write_dataset(items, dropped, refs, out, seed=seed, versions=build_versions(options), dev_fraction=dev_fraction)
        manifest["qa_changed"] = before != (_read_bytes(Path(out) / "qa.jsonl"), _read_bytes(Path(out) / "manifest.json"))
        if audit:
            manifest["audit"] = _write_audit(refs, out, seed, cache, console)
        if "error" not in manifest.get("audit", {}):
            state.unlink()  # every file is there: the folder is a dataset now
    return manifest


def check_build_options(*, jobs: int, dev_fraction: float, fs_hz: float | None = None) -> None:
    """One ``error:`` line for a job count below 1, a dev share outside [0, 1] or a sampling rate that is no rate, before any work.

    ``fs_hz`` (``--fs``, for annotation-only records) was ignored for signal
    records whatever its value; a negative or nan rate is refused for every record.
    """
    import math

    from ecgtrace.errors import EcgTraceError

    if int(jobs) < 1:
        raise EcgTraceError(f"--jobs must be at least 1, got {jobs}")
    if not (math.isfinite(dev_fraction) and 0.0 <= dev_fraction <= 1.0):
        raise EcgTraceError(f"--dev-fraction is a share of the records, between 0 and 1; got {dev_fraction:g}")
    if fs_hz is not None and not (math.isfinite(fs_hz) and fs_hz > 0):
        raise EcgTraceError(f"--fs must be a positive sampling rate in Hz, got {fs_hz:g}")


def mark_unfinished(out: str, records: list[str]) -> Path:
    """Write the folder's unfinished-build note (see the module docstring); returns its path."""
    import datetime as _dt

    from ecgtrace.contracts.datasets import UNFINISHED_BUILD
    from ecgtrace.jsonio import write_json_atomic

    return write_json_atomic(Path(out) / UNFINISHED_BUILD, {
        "format": "ecgtrace-build-state/1", "complete": False, "pid": os.getpid(), "records": [str(r) for r in records],
        "started_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "message": "an unfinished build: run the same `ecgtrace build` command again to resume it (finished records are reused)"})
