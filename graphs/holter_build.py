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


def _one(record: str, out_dir: str, options: BuildOptions) -> str:
    state = run_record(record, out_dir, options)
    return state["part"]


def build_dataset(records: list[str], out_dir: str | os.PathLike[str], options: BuildOptions, *, jobs: int = 2, console: Any = None,
                  audit: bool = True, dev_fraction: float = 0.2) -> dict[str, Any]:
    """Build (or resume) the dataset of ``records`` into ``out_dir``; returns the manifest."""
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
                  console=console, transient=False, disable=console is None) as progress:
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
    manifest = write_dataset(items, dropped, refs, out, seed=int(options.get("seed", 0)), versions=_versions(options),
                             dev_fraction=dev_fraction)
    if audit and importlib.util.find_spec("ecgtrace.agents.audit.builder") is not None:
        from ecgtrace.agents.audit.builder import write_audit_dataset

        if console is not None:
            console.print("writing audit.jsonl (reasoning-audit items) ...")
        try:
            write_audit_dataset([r["path"] for r in refs if r.get("leads")], out, seed=int(options.get("seed", 0)))
        except Exception as exc:  # noqa: BLE001 - the QA dataset stands on its own; report the audit failure
            if console is not None:
                console.print(f"[yellow]warning:[/] audit.jsonl not written ({type(exc).__name__}: {exc})")
    return manifest
