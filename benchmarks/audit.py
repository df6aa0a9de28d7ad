"""Reasoning-audit throughput against the mock OpenAI server: achieved vs ideal turns/s, and CPU per turn.

The mock server runs in its own process (so its CPU is not billed to the
harness, though on a small machine it shares the cores) and answers every turn
after ``--delay`` seconds (default 50 ms). With ``--concurrency`` requests in
flight (default 32), the ideal rate is concurrency / delay turns per second
(32 / 0.05 s = 640/s); the target is 80% of it. Rows, each examinee in turn:

* ``full, <examinee>`` - ``run_audit`` end to end: LangGraph + SQLite
  checkpoints + the examinee over HTTP + parsing + samples.jsonl;
* ``client only, <examinee>`` - the same requests (same growing histories)
  sent straight from an ``asyncio.gather``: no graph, no checkpoints;
* ``graph only (oracle)`` - the graph and checkpointer with the in-process
  oracle (no HTTP, no delay): the harness's own cost.

``openai`` is ``openai:<model>`` (the SDK's async client), ``langchain-openai``
is ChatOpenAI. CPU per turn is ``time.process_time()`` of this process divided
by turns (all its threads), which a loaded machine inflates far less than wall
time. ``--profile`` adds a table: where the CPU of each full run goes, from
cProfile's self time per function grouped by component (client, graph,
checkpoint, parsing/prompts/scoring, writing, event loop), counted in CPU
time of the main thread (``time.thread_time``), plus the CPU of the other
threads; profiled times are inflated by the profiler, so read them as shares.

    nice -n 10 .venv/bin/python benchmarks/audit.py [--items 100] [--delay 0.05] [--concurrency 32] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ecgtrace.agents.audit.format import load_audit  # noqa: E402
from ecgtrace.agents.exam.examinees import LangChainOpenAIExaminee, OpenAIExaminee, OracleExaminee  # noqa: E402
from ecgtrace.agents.audit.examiner import build_request, format_prompt, plan_turns, render_answer  # noqa: E402
from ecgtrace.graphs.audit_runner import run_audit  # noqa: E402
from ecgtrace.runlog import RunDir  # noqa: E402
from tests.support.audit_items import write_audit  # noqa: E402


def start_server(items: Path, delay: float) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "ecgtrace.agents.exam.mock_server", "--items", str(items), "--delay", str(delay)],
                            stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    return proc, f"http://127.0.0.1:{int(line.split()[1])}/v1"


EXAMINEES = {"openai": OpenAIExaminee, "langchain-openai": LangChainOpenAIExaminee}
#: cProfile self time is billed to the first component whose patterns match ``file:function``.
COMPONENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("client: openai SDK, httpx, aiohttp, ChatOpenAI, tenacity, examinee",
     ("/openai/", "/httpx", "/httpcore", "/aiohttp/", "/langchain_openai/", "/tenacity/", "/h11/", "/anyio/", "/yarl/", "/multidict/",
      "/typing_inspection/", "langchain_core/language_models", "langchain_core/messages", "langchain_core/outputs", "/examinees/",
      "_socket", "_ssl", "socket.py", "ssl.py", "/jiter", "/distro/", "/sniffio/", "/propcache/", "/aiohappyeyeballs/", "/frozenlist/")),
    ("checkpoint: langgraph.checkpoint, sqlite3, msgpack", ("/langgraph/checkpoint/", "sqlite3", "ormsgpack", "audit_runner.py:commit_now")),
    ("graph: langgraph pregel, langchain_core runnables/callbacks", ("/langgraph/", "/langchain_core/", "/langsmith/")),
    ("parsing, prompts, scoring: ecgtrace, pydantic", ("/agents/", "/contracts/", "pydantic", "/tools/", "/graphs/", "/metrics")),
    ("writing: samples.jsonl, results.json", ("/runlog", "/jsonio", "posix.fsync", "/json/", "_json")),
    ("event loop: asyncio, selectors, threads", ("asyncio", "selectors", "select.", "threading", "_queue", "_contextvars", "queue.py",
                                                  "concurrent", "contextlib", "_thread")),
)


def _profiler() -> cProfile.Profile:
    """A profiler that counts the main thread's CPU time (not wall time: waiting in epoll, or for a loaded core, is not billed)."""
    return cProfile.Profile(time.thread_time)


def components_ms(stats: Any, turns: int, other_threads_s: float = 0.0) -> dict[str, float]:
    """cProfile self time per component, in ms per turn (see :data:`COMPONENTS`); the rest is ``other``.

    ``other_threads_s``: CPU of the process's other threads (aiosqlite's worker, the fsync thread), which the profiler does not see.
    """
    out = {name: 0.0 for name, _ in COMPONENTS} | {"other": 0.0, "other threads: aiosqlite worker, fsync": other_threads_s}
    for (file, _line, function), (_cc, _nc, self_s, _cum, _callers) in stats.stats.items():
        key = f"{file}:{function}"
        name = next((name for name, patterns in COMPONENTS if any(p in key for p in patterns)), "other")
        out[name] += self_s
    return {name: 1000 * seconds / turns for name, seconds in out.items()}


async def bench_full(audit, run_path: Path, url: str, concurrency: int, examinee_name: str,
                     profile: bool = False) -> tuple[int, float, float, dict[str, float] | None]:
    examinee = EXAMINEES[examinee_name]("mock", base_url=url, concurrency=concurrency, timeout_s=30, max_attempts=2)
    warm = [{"role": "user", "content": "warm-up"}]
    await asyncio.gather(*(examinee.answer(warm, {"index": 0}) for _ in range(concurrency)))  # client + connections
    run = RunDir.open(run_path, {"bench": "full"})
    profiler = _profiler() if profile else None
    if profiler is not None:
        profiler.enable()
    wall, cpu, main_cpu = time.perf_counter(), time.process_time(), time.thread_time()
    await run_audit(audit, run, examinee, modality="text", concurrency=concurrency)
    wall, cpu, main_cpu = time.perf_counter() - wall, time.process_time() - cpu, time.thread_time() - main_cpu
    if profiler is not None:
        profiler.disable()
    turns = sum(sum(t["asked"] for t in row["turns"]) for row in run.samples())
    errors = sum(bool(t.get("error")) for row in run.samples() for t in row["turns"])
    if errors:
        print(f"note: {errors} of {turns} turns of the {examinee_name} run ended in an error", file=sys.stderr)
    split = components_ms(pstats.Stats(profiler), turns, max(0.0, cpu - main_cpu)) if profiler is not None else None
    return turns, wall, cpu, split


def replayed_requests(audit) -> list[list[dict]]:
    """The chat requests a teacher-forced run sends, turn by turn (growing history)."""
    requests = []
    for item in audit.items:
        data, history = item.to_json(), []
        for turn in plan_turns(item):
            prompt = format_prompt(turn)
            requests.append(build_request(history, prompt, data, str(audit.base_dir), "text"))
            history += [{"role": "user", "content": prompt}, {"role": "assistant", "content": render_answer(turn)}]
    return requests


async def bench_client_only(url: str, concurrency: int, requests: list[list[dict]], examinee_name: str) -> tuple[int, float, float, None]:
    examinee = EXAMINEES[examinee_name]("mock", base_url=url, concurrency=concurrency, timeout_s=30, max_attempts=2)
    await asyncio.gather(*(examinee.answer(requests[0], {"index": 0}) for _ in range(concurrency)))  # warm connections
    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(examinee.answer(messages, {"index": 0}) for messages in requests))
    return len(requests), time.perf_counter() - wall, time.process_time() - cpu, None


async def bench_graph_only(audit, run_path: Path, concurrency: int, profile: bool = False) -> tuple[int, float, float, dict[str, float] | None]:
    run = RunDir.open(run_path, {"bench": "oracle"})
    profiler = _profiler() if profile else None
    if profiler is not None:
        profiler.enable()
    wall, cpu, main_cpu = time.perf_counter(), time.process_time(), time.thread_time()
    await run_audit(audit, run, OracleExaminee(), modality="text", concurrency=concurrency)
    wall, cpu, main_cpu = time.perf_counter() - wall, time.process_time() - cpu, time.thread_time() - main_cpu
    if profiler is not None:
        profiler.disable()
    turns = sum(len(row["turns"]) for row in run.samples())
    return turns, wall, cpu, components_ms(pstats.Stats(profiler), turns, max(0.0, cpu - main_cpu)) if profiler is not None else None


def measure(audit, audit_path: Path, tmp: Path, args: argparse.Namespace) -> list[tuple[str, int, float, float, dict[str, float] | None]]:
    """Every row, each in a fresh event loop; the mock server lives for the HTTP rows only."""
    proc, url = start_server(audit_path, args.delay)
    rows = []
    try:
        requests = replayed_requests(audit)
        for name in EXAMINEES:
            rows.append((f"full, {name}", *asyncio.run(bench_full(audit, tmp / f"run-{name}", url, args.concurrency, name))))
            rows.append((f"client only, {name}", *asyncio.run(bench_client_only(url, args.concurrency, requests, name))))
        if args.profile:  # separate runs: the profiler must not slow the timed ones
            for name in EXAMINEES:
                rows.append((f"profiled full, {name}",
                             *asyncio.run(bench_full(audit, tmp / f"run-prof-{name}", url, args.concurrency, name, profile=True))))
    finally:
        proc.kill()
        proc.wait()
    rows.append(("graph only (oracle)", *asyncio.run(bench_graph_only(audit, tmp / "run-oracle", args.concurrency))))
    if args.profile:
        rows.append(("profiled graph only (oracle)", *asyncio.run(bench_graph_only(audit, tmp / "run-prof-oracle", args.concurrency, True))))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100, help="audit items (about 10 turns each)")
    parser.add_argument("--delay", type=float, default=0.05, help="mock answer delay (s)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--profile", action="store_true", help="also profile each full run and print where its CPU goes")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="ecgtrace-bench-"))
    try:
        audit_path = write_audit(tmp / "data", args.items, seed=3)
        audit = load_audit(audit_path)
        n_turns = sum(len(plan_turns(it)) for it in audit.items)
        rows = measure(audit, audit_path, tmp, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print_tables(rows, args, n_turns)
    return 0


def print_tables(rows: list[tuple[str, int, float, float, dict[str, float] | None]], args: argparse.Namespace, n_turns: int) -> None:
    from rich.console import Console
    from rich.table import Table

    ideal = args.concurrency / args.delay
    table = Table(title=f"audit throughput: {args.items} items, {n_turns} turns, delay {1000 * args.delay:g} ms, "
                        f"concurrency {args.concurrency}, ideal {ideal:.0f} turns/s (target 80%), {os.cpu_count()} CPUs, "
                        f"load {os.getloadavg()[0]:.1f}")
    for column in ("variant", "turns", "wall s", "turns/s", "achieved / ideal", "CPU ms/turn", "CPU-bound ceiling turns/s"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    timed = [r for r in rows if not r[0].startswith("profiled")]
    for name, turns, wall, cpu, _ in timed:
        rate = turns / wall
        ratio = f"{rate / ideal:.2f}" if "oracle" not in name else "-"
        table.add_row(name, str(turns), f"{wall:.2f}", f"{rate:.0f}", ratio, f"{1000 * cpu / turns:.2f}", f"{turns / cpu:.0f}")
    console = Console(width=max(120, Console().width))
    console.print(table)
    by = {r[0]: r for r in timed}
    for name in EXAMINEES:
        (t_full, w_full, c_full), (t_cli, w_cli, c_cli) = by[f"full, {name}"][1:4], by[f"client only, {name}"][1:4]
        console.print(f"{name}: full run {t_full / w_full / ideal:.2f} of ideal, {100 * (t_full / w_full) / (t_cli / w_cli):.0f}% of the "
                      f"bare client's throughput; harness CPU on top of the client {1000 * (c_full / t_full - c_cli / t_cli):.2f} ms/turn")
    profiled = [r for r in rows if r[0].startswith("profiled")]
    if profiled:
        split = Table(title="where the CPU goes (cProfile self CPU time of the main thread, ms per turn; the profiler inflates every figure)")
        split.add_column("component")
        for name, *_ in profiled:
            split.add_column(name.removeprefix("profiled "), justify="right")
        for component in [name for name, _ in COMPONENTS] + ["other", "other threads: aiosqlite worker, fsync"]:
            split.add_row(component, *(f"{r[4][component]:.2f}" for r in profiled))
        split.add_row("total", *(f"{sum(r[4].values()):.2f}" for r in profiled))
        console.print(split)


if __name__ == "__main__":
    sys.exit(main())
