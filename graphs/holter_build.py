"""Build a dataset from many records: one HolterAgent thread per record, bounded parallelism, resume.

Each record runs :func:`ecgtrace.graphs.holter_qa.run_record` in a worker
process (its own SQLite checkpoint file, so no shared writer), then the
per-record parts are assembled into ``qa.jsonl`` and ``manifest.json``
(:mod:`ecgtrace.agents.holter.dataset`). Rerunning the same command resumes crashed
records from their checkpoint and reuses finished ones.
"""

from __future__ import annotations

import importlib.util
import json
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from ecgtrace.graphs.holter_qa import GRAPH_VERSION, BuildOptions, run_record, templates_for


def _versions(options: BuildOptions) -> dict[str, Any]:
    from ecgtrace import __version__
    from ecgtrace.agents.holter import annotator, dataset, assets as modalities, verifier, writer

    versions: dict[str, Any] = {"ecgtrace": __version__, "graph": GRAPH_VERSION, "annotator": annotator.ANNOTATOR_VERSION, "writer": writer.WRITER_VERSION,
                                "verifier": verifier.VERIFIER_VERSION, "modalities": modalities.MODALITIES_VERSION, "dataset": dataset.DATASET_VERSION,
                                "templates": {t.id: t.version for t in templates_for(options).values()}}
    for name, attr in (("rhythm", "RHYTHM_VERSION"), ("hr", "HR_VERSION"), ("render", "RENDER_VERSION")):
        module = importlib.import_module(f"ecgtrace.tools.{name}")
        versions[name] = getattr(module, attr, "?")
    versions["options"] = {k: v for k, v in options.items() if k != "templates_dir"}
    return versions


def _read_bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def _one(record: str, out_dir: str, options: BuildOptions) -> str:
    state = run_record(record, out_dir, options)
    return state["part"]


def build_dataset(records: list[str], out_dir: str | os.PathLike[str], options: BuildOptions, *, jobs: int = 2, console: Any = None,
                  audit: bool = True, dev_fraction: float = 0.2) -> dict[str, Any]:
    """Build (or resume) the dataset of ``records`` into ``out_dir``; returns the manifest.

    The returned manifest also says what this call changed: ``qa_changed`` (whether
    ``qa.jsonl`` or ``manifest.json`` got other bytes) and ``audit``
    (``{"items", "reused"}``, or ``{"error"}``).
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ecgtrace.agents.holter.dataset import write_dataset

    out = str(Path(out_dir).resolve())
    templates_for(options)  # fail early on a bad template or a missing record, before any worker starts
    from ecgtrace.agents.holter.annotator import resolve
    from ecgtrace.errors import RecordError

    for record in records:
        base = resolve(record)
        if not any(Path(f"{base}{ext}").exists() for ext in (".hea", ".atr", ".edf")) and not (base.suffix.lower() in (".edf", ".bdf") and base.exists()):
            raise RecordError(f"{record}: no record here (no .hea, .atr or .edf file)")
    parts: dict[str, str] = {}
    with Progress(TextColumn("[bold]build[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=True, disable=console is None or not console.is_terminal) as progress:
        task = progress.add_task("records", total=len(records))
        if jobs <= 1 or len(records) == 1:
            for record in records:
                progress.update(task, description=f"{record}: load")
                state = run_record(record, out, options, on_stage=lambda node, r=record: progress.update(task, description=f"{r}: {node}"))
                parts[record] = state["part"]
                progress.advance(task)
        else:
            with ProcessPoolExecutor(max_workers=min(jobs, len(records))) as pool:
                futures = {pool.submit(_one, record, out, options): record for record in records}
                for future in as_completed(futures):
                    parts[futures[future]] = future.result()
                    progress.update(task, description=str(futures[future]))
                    progress.advance(task)
    items, dropped, refs = [], [], []
    for record in records:
        part = json.loads(Path(parts[record]).read_text(encoding="utf-8"))
        items += part["items"]
        dropped += part["dropped"]
        refs.append(part["record"])
    before = _read_bytes(Path(out) / "qa.jsonl"), _read_bytes(Path(out) / "manifest.json")
    manifest = write_dataset(items, dropped, refs, out, seed=int(options.get("seed", 0)), versions=_versions(options),
                             dev_fraction=dev_fraction)
    manifest["qa_changed"] = before != (_read_bytes(Path(out) / "qa.jsonl"), _read_bytes(Path(out) / "manifest.json"))
    if audit and importlib.util.find_spec("ecgtrace.agents.audit.builder") is not None:
        manifest["audit"] = _write_audit(refs, out, int(options.get("seed", 0)), console)
    return manifest


def _write_audit(refs: list[dict[str, Any]], out: str, seed: int, console: Any) -> dict[str, Any]:
    """Write ``audit.jsonl`` unless the folder already holds the same build; returns ``{"items", "reused"}`` or ``{"error"}``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ecgtrace.agents.audit.builder import write_audit_dataset
    from ecgtrace.agents.audit.freshness import audit_build_key, current_audit_summary

    usable = [r for r in refs if r.get("leads")]
    key = audit_build_key({r["path"]: r["hash"] for r in usable}, seed=seed)
    current = current_audit_summary(out, key)
    if current is not None:
        return {"items": current["n_items"], "reused": True}
    with Progress(TextColumn("[bold]audit items[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                  TimeElapsedColumn(), console=console, transient=False, disable=console is None) as progress:
        task = progress.add_task("records", total=max(1, len(usable)))

        def show(step: str, done: int, total: int) -> None:
            what = "records measured" if step == "records" else "items rendered (PNG + text)"
            progress.update(task, completed=done, total=max(1, total), description=what)

        try:
            summary = write_audit_dataset([r["path"] for r in usable], out, seed=seed, build_key=key, on_progress=show)
        except Exception as exc:  # noqa: BLE001 - the QA dataset stands on its own; report the audit failure
            if console is not None:
                console.print(f"[yellow]warning:[/] audit.jsonl not written ({type(exc).__name__}: {exc})")
            return {"error": f"{type(exc).__name__}: {exc}"}
    return {"items": summary["n_items"], "reused": False}
