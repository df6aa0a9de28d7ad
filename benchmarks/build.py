"""Full 12-task build of one 24 h synthetic Holter record (text + image), timed per stage.

Usage: ``python benchmarks/build.py [--hours 24] [--seed 3] [--out DIR]``. Target: <= 60 s wall
for the build itself (record synthesis is timed separately and not counted).

``--executor local,ray`` instead builds the record (``--records N`` copies of it under other names)
with ``ecgtrace build``'s dispatch on each executor in turn and prints wall seconds and whether every
dataset file is byte-identical to the first executor's (the Ray executor needs ``ecgtrace[ray]``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--record", default=None, help="an existing record instead of a fresh synthetic one")
    parser.add_argument("--out", default=None)
    parser.add_argument("--modalities", default="text,image")
    parser.add_argument("--executor", default=None, help="comma-separated executors to compare (local,ray) instead of the stage table")
    parser.add_argument("--records", type=int, default=1, help="with --executor: records built (copies of the record)")
    parser.add_argument("--jobs", type=int, default=2, help="with --executor: records in parallel")
    args = parser.parse_args()
    if args.executor:
        return compare_executors(args)

    from rich.console import Console
    from rich.table import Table

    from ecgtrace.agents.holter.dataset import write_dataset
    from ecgtrace.graphs.holter_qa import build_versions as _versions
    from ecgtrace.graphs.holter_qa import graph

    work = Path(args.out or tempfile.mkdtemp(prefix="ecgtrace-bench-"))
    import resource

    def cpu() -> float:
        me = resource.getrusage(resource.RUSAGE_SELF)
        return me.ru_utime + me.ru_stime

    rows: list[tuple[str, float, str]] = []
    cpu_at: dict[str, float] = {}
    record = args.record
    if record is None:
        from ecgtrace.tools.synth import synthesize_holter

        t = time.perf_counter()
        record = str(synthesize_holter(work / "record", name="holter", hours=args.hours, seed=args.seed).record_path)
        rows.append(("(synthesize record, not counted)", time.perf_counter() - t, f"{args.hours:g} h, 3 leads, 250 Hz"))
    options = {"seed": args.seed, "tasks": [], "modalities": args.modalities.split(","), "templates_dir": None, "fs_hz": None, "paraphrase": False, "measure": True,
               "render_jobs": os.cpu_count() or 1}
    state = {"record_path": record, "out_dir": str((work / "dataset").resolve()), "options": options, "items": []}
    start = last = time.perf_counter()
    cpu_last = cpu()
    final: dict = {}
    n_write = 0
    for update in graph.stream(state, {"max_concurrency": 4}, stream_mode="updates"):
        now = time.perf_counter()
        cpu_now = cpu()
        for node, values in update.items():
            key = "write_items (13 Sends)" if node == "write_items" else node
            # render workers run in other processes: their CPU comes back in the state
            cpu_at[key] = cpu_at.get(key, 0.0) + max(cpu_now - cpu_last, float((values or {}).get("render_cpu_s", 0.0)))
            if node == "write_items":
                n_write += 1
                if n_write > 1:
                    rows[-1] = ("write_items (13 Sends)", rows[-1][1] + now - last, f"{n_write} templates")
                else:
                    rows.append(("write_items (13 Sends)", now - last, "1 template"))
            else:
                detail = ""
                if node == "verify":
                    detail = f"{len(values['kept'])} kept, {len(values['dropped'])} dropped"
                if node == "annotate":
                    detail = f"{values['annotation']['summary']['n_beats']} beats, {sum(values['annotation']['summary']['event_counts'].values())} events"
                rows.append((node, now - last, detail))
            final.update(values or {})
        last, cpu_last = now, cpu_now
    t = time.perf_counter()
    import json

    part = json.loads(Path(final["part"]).read_text())
    manifest = write_dataset(part["items"], part["dropped"], [part["record"]], work / "dataset", seed=args.seed, versions=_versions(options))
    rows.append(("assemble qa.jsonl + manifest", time.perf_counter() - t, f"{manifest['counts']['items']} items"))
    cpu_at["assemble qa.jsonl + manifest"] = cpu() - cpu_last
    total = time.perf_counter() - start
    total_cpu = sum(cpu_at.values())
    table = Table(title=f"ecgtrace build benchmark ({args.modalities}) -> {work / 'dataset'}")
    table.add_column("stage")
    table.add_column("wall s", justify="right")
    table.add_column("cpu s", justify="right")
    table.add_column("detail")
    for name, seconds, detail in rows:
        table.add_row(name, f"{seconds:.2f}", f"{cpu_at[name]:.2f}" if name in cpu_at else "", detail)
    table.add_row("[bold]total build[/]", f"[bold]{total:.2f}[/]", f"{total_cpu:.2f}", f"target <= 60 s wall; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    table.caption = "cpu s: this process plus the render workers; wall s inflates when other jobs share the cores"
    Console().print(table)
    return 0


def _dataset_files(out: Path) -> dict[str, bytes]:
    """Every dataset file by relative path (the working folders .checkpoints, .parts, .shards left out)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and not p.relative_to(out).parts[0].startswith(".")}


def compare_executors(args: argparse.Namespace) -> int:
    """Build the same records on each executor; wall seconds and byte identity with the first one's dataset."""
    import shutil

    from rich.console import Console
    from rich.table import Table

    from ecgtrace.graphs.holter_build import RunOn, build_dataset

    work = Path(args.out or tempfile.mkdtemp(prefix="ecgtrace-bench-exec-"))
    record = args.record
    if record is None:
        from ecgtrace.tools.synth import synthesize_holter

        record = str(synthesize_holter(work / "record", name="holter", hours=args.hours, seed=args.seed).record_path)
    records = [record]
    for k in range(1, args.records):  # the same signal under other names: independent tasks of equal size
        folder = work / f"copy{k}"
        folder.mkdir(parents=True, exist_ok=True)
        for f in Path(record).parent.glob(Path(record).name + ".*"):
            shutil.copy(f, folder / f.name)
        records.append(str(folder / Path(record).name))
    n_parallel = min(args.jobs, len(records))
    options = {"seed": args.seed, "tasks": [], "modalities": args.modalities.split(","), "templates_dir": None, "fs_hz": None,
               "paraphrase": False, "measure": True, "render_jobs": max(1, (os.cpu_count() or 1) // n_parallel)}
    table = Table(title=f"ecgtrace build on each executor: {len(records)} x {args.hours:g} h record(s), --jobs {args.jobs}")
    for col in ("executor", "wall s", "items", "files", "identical to first"):
        table.add_column(col, justify="left" if col == "executor" else "right")
    first: dict[str, bytes] | None = None
    for name in args.executor.split(","):
        out = work / f"dataset-{name}"
        start = time.perf_counter()
        manifest = build_dataset(records, out, dict(options), jobs=args.jobs, audit=False, run_on=RunOn(name))
        seconds = time.perf_counter() - start
        files = _dataset_files(out)
        first = files if first is None else first
        same = "yes" if files == first else f"NO ({sum(files.get(k) != v for k, v in first.items())} differ)"
        table.add_row(name, f"{seconds:.1f}", str(manifest["counts"]["items"]), str(len(files)), same)
    table.caption = f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; Ray's wall time includes starting a private Ray"
    Console().print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
