"""Whole-record annotation speed and memory on a 24 h x 3-lead x 250 Hz synthetic Holter.

Run from the repository root::

    nice -n 10 .venv/bin/python benchmarks/holter.py [--hours 24] [--workers 2] [--reference]

The record is generated into a temporary folder (in a subprocess of its own,
so its memory does not count). :func:`ecgtrace.tools.annotate.annotate_record`
then runs in a fresh subprocess that reports, at the end of each stage, the
wall time and the process's peak RSS so far (``resource.getrusage``,
``ru_maxrss``), plus the peak RSS of its worker processes
(``RUSAGE_CHILDREN``). A forked worker's RSS includes the pages it shares with
its parent, so "self + N x largest worker" is a bound that counts those pages
N + 1 times; a second, untimed run samples the process's RSS plus its workers'
private pages (``_tree_memory.py``: a page shared with the parent counted
once), the memory the machine really holds. A third run reads the
sidecar store. Targets: whole run <= 20 s, peak <= 500 MB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

TARGET_S = 20.0
TARGET_MB = 500.0

_GENERATE = """
import json, resource, sys, time
from ecgtrace.tools.synth import synthesize_holter
t = time.perf_counter()
synthesize_holter(sys.argv[1], name="holter", hours=float(sys.argv[2]), seed=int(sys.argv[3]))
print(json.dumps({"wall_s": time.perf_counter() - t, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

_ANNOTATE = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[7])
from _tree_memory import TreeMemory
def peak_mb(who=resource.RUSAGE_SELF):
    return resource.getrusage(who).ru_maxrss / 1024
def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
tree = TreeMemory(interval_s=0.05) if sys.argv[6] == "1" else None
tree = tree if tree is None or tree.available else None
def mark(stage):
    return (stage, time.perf_counter() - t_start, peak_mb(), peak_mb(resource.RUSAGE_CHILDREN), cpu_s(), tree.take() if tree else None)
t_start = time.perf_counter()
if tree:
    tree.__enter__()
marks = [mark("start")]
from ecgtrace.tools.annotate import annotate_record
marks.append(mark("import"))
seen = set()
def progress(stage, done, total):
    if done >= total and stage not in seen:
        seen.add(stage)
        marks.append(mark(stage))
a = annotate_record(sys.argv[1], cache_dir=sys.argv[2], workers=int(sys.argv[3]), prefer_reference=sys.argv[4] == "1", use_cache=sys.argv[5] == "1", progress=progress)
marks.append(mark("done"))
if tree:
    tree.__exit__()
print(json.dumps({"marks": marks, "timings_s": a.timings_s, "from_cache": a.from_cache, "source": a.provenance["source"],
                  "n_beats": a.summary["n_beats"], "events": a.summary["events"], "tree_peak_mb": tree.peak_mb if tree else None}))
"""


def _run(code: str, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"subprocess failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _detector_available() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(f"ecgtrace.tools.{m}") is not None for m in ("beats", "classify"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reference", action="store_true", help="use .atr beats and classes (skips detection)")
    args = parser.parse_args(argv)
    console = Console(width=140)
    reference = args.reference or not _detector_available()
    if reference and not args.reference:
        console.print("[yellow]beat detector or classifier not available: measuring the reference-beat pipeline")
    with tempfile.TemporaryDirectory() as tmp:
        gen = _run(_GENERATE, tmp, str(args.hours), str(args.seed))
        dat = Path(tmp) / "holter.dat"
        console.print(f"generated {args.hours:g} h x 3 leads x 250 Hz ({dat.stat().st_size / 1e6:.0f} MB .dat) in {gen['wall_s']:.1f} s, peak {gen['peak_mb']:.0f} MB")
        runs = {}
        # the sampler reads every process's page tables 20 times a second: it runs apart from the timed run
        for label, use_cache, sample in (("first run", "0", "0"), ("memory run (sampled)", "0", "1"), ("second run (store)", "1", "0")):
            t0 = time.perf_counter()
            store = Path(tmp) / ("store-memory" if sample == "1" else "store")
            res = _run(_ANNOTATE, str(Path(tmp) / "holter"), str(store), str(args.workers), "1" if reference else "0", use_cache, sample, str(Path(__file__).resolve().parent))
            res["process_s"] = time.perf_counter() - t0
            runs[label] = res
    first = runs["first run"]
    table = Table(title=f"annotate_record, {args.hours:g} h record, {'reference beats' if reference else 'detected beats'}, workers={args.workers}")
    # CPU seconds (user + system, this process) next to wall seconds: on a shared machine the wall time
    # of a stage grows with the other load, its CPU time much less
    for col in ("stage", "stage s", "stage CPU s", "elapsed s", "peak RSS MB (self)", "peak RSS MB (largest worker)", "peak MB, RSS + workers' USS"):
        table.add_column(col, justify="right" if col != "stage" else "left")
    previous, previous_cpu = 0.0, first["marks"][0][4]
    tree_by_stage = {m[0]: m[5] for m in runs["memory run (sampled)"]["marks"]}
    for stage, elapsed, self_mb, child_mb, cpu, _ in first["marks"]:
        tree_mb = tree_by_stage.get(stage)
        table.add_row(stage, f"{elapsed - previous:.2f}", f"{cpu - previous_cpu:.2f}", f"{elapsed:.2f}", f"{self_mb:.0f}", f"{child_mb:.0f}",
                      "-" if tree_mb is None else f"{tree_mb:.0f}")
        previous, previous_cpu = elapsed, cpu
    console.print(table)
    total = first["marks"][-1][1]
    # ru_maxrss of RUSAGE_CHILDREN is the largest single child; with N workers alive at once the
    # concurrent total is bounded by self + N x that (children are counted once reaped, so the last mark holds them)
    marks = {m[0]: m for m in first["marks"]}
    worker_bound = marks["beats"][2] + args.workers * first["marks"][-1][3] if "beats" in marks else 0.0
    peak = max(max(m[2] for m in first["marks"]), worker_bound)
    ok_t = "[green]ok" if total <= TARGET_S else "[red]over"
    tree_peak = runs["memory run (sampled)"]["tree_peak_mb"]
    ok_m = "[green]ok" if peak <= TARGET_MB else "[red]over"
    ok_tree = "[green]ok" if tree_peak is not None and tree_peak <= TARGET_MB else "[red]over"
    tree_text = "not available (needs Linux /proc)" if tree_peak is None else f"{tree_peak:.0f} MB ({ok_tree}[/])"
    console.print(f"whole run {total:.1f} s (target {TARGET_S:g} s: {ok_t}[/]); process incl. start-up {first['process_s']:.1f} s")
    console.print(f"memory, target {TARGET_MB:g} MB: sampled peak of the process's RSS + its workers' private pages {tree_text}; "
                  f"RSS bound self + {args.workers} x largest worker {peak:.0f} MB ({ok_m}[/]: counts the pages a worker shares with its parent once per process)")
    console.print(f"internal timings: " + ", ".join(f"{k} {v:.2f} s" for k, v in first["timings_s"].items()))
    second = runs["second run (store)"]
    console.print(f"second run from store: {second['marks'][-1][1]:.2f} s (from_cache={second['from_cache']}), peak {max(m[2] for m in second['marks']):.0f} MB")
    console.print(f"beats {first['n_beats']}, events " + ", ".join(f"{k} {v}" for k, v in first["events"].items() if v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
