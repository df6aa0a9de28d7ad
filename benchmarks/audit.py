"""Reasoning-audit throughput against the mock OpenAI server.

The mock server runs in its own process (so its CPU is not billed to the
harness) and answers every turn after ``--delay`` seconds (default 50 ms). With
``--concurrency`` requests in flight (default 32), the ideal rate is
concurrency / delay turns per second (32 / 0.05 s = 640/s). Rows:

* ``full`` - ``run_audit`` end to end: LangGraph + SQLite checkpoints +
  ChatOpenAI over HTTP + parsing + samples.jsonl;
* ``chatopenai only`` - the same requests (same growing histories) sent by
  ChatOpenAI straight from an ``asyncio.gather``, no graph, no checkpoints;
* ``graph only (oracle)`` - the graph and checkpointer with the in-process
  oracle (no HTTP, no delay): the harness's own cost.

CPU per turn is ``time.process_time()`` of this process divided by turns.

    nice -n 10 .venv/bin/python benchmarks/audit.py [--items 100] [--delay 0.05] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ecgtrace.agents.audit.format import load_audit  # noqa: E402
from ecgtrace.agents.exam.examinees import OpenAIExaminee, OracleExaminee  # noqa: E402
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


async def bench_full(audit, run_path: Path, url: str, concurrency: int) -> tuple[int, float, float]:
    examinee = OpenAIExaminee("mock", base_url=url, concurrency=concurrency, timeout_s=30, max_attempts=2)
    warm = [{"role": "user", "content": "warm-up"}]
    await asyncio.gather(*(examinee.answer(warm, {"index": 0}) for _ in range(concurrency)))  # client + connections
    run = RunDir.open(run_path, {"bench": "full"})
    wall, cpu = time.perf_counter(), time.process_time()
    await run_audit(audit, run, examinee, modality="text", concurrency=concurrency)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    turns = sum(sum(t["asked"] for t in row["turns"]) for row in run.samples())
    return turns, wall, cpu


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


async def bench_chat_only(url: str, concurrency: int, requests: list[list[dict]]) -> tuple[int, float, float]:
    examinee = OpenAIExaminee("mock", base_url=url, concurrency=concurrency, timeout_s=30, max_attempts=2)
    await asyncio.gather(*(examinee.answer(requests[0], {"index": 0}) for _ in range(concurrency)))  # warm connections
    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(examinee.answer(messages, {"index": 0}) for messages in requests))
    return len(requests), time.perf_counter() - wall, time.process_time() - cpu


async def bench_graph_only(audit, run_path: Path, concurrency: int) -> tuple[int, float, float]:
    run = RunDir.open(run_path, {"bench": "oracle"})
    wall, cpu = time.perf_counter(), time.process_time()
    await run_audit(audit, run, OracleExaminee(), modality="text", concurrency=concurrency)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return sum(len(row["turns"]) for row in run.samples()), wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100, help="audit items (about 10 turns each)")
    parser.add_argument("--delay", type=float, default=0.05, help="mock answer delay (s)")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()

    from rich.console import Console
    from rich.table import Table

    tmp = Path(tempfile.mkdtemp(prefix="ecgtrace-bench-"))
    try:
        audit_path = write_audit(tmp / "data", args.items, seed=3)
        audit = load_audit(audit_path)
        n_turns = sum(len(plan_turns(it)) for it in audit.items)
        proc, url = start_server(audit_path, args.delay)
        try:
            rows = [("full", *asyncio.run(bench_full(audit, tmp / "run-full", url, args.concurrency))),
                    ("chatopenai only", *asyncio.run(bench_chat_only(url, args.concurrency, replayed_requests(audit))))]
        finally:
            proc.kill()
            proc.wait()
        rows.append(("graph only (oracle)", *asyncio.run(bench_graph_only(audit, tmp / "run-oracle", args.concurrency))))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    ideal = args.concurrency / args.delay
    table = Table(title=f"audit throughput: {args.items} items, {n_turns} turns, delay {1000 * args.delay:g} ms, "
                        f"concurrency {args.concurrency}, ideal {ideal:.0f} turns/s, {os.cpu_count()} CPUs")
    for column in ("variant", "turns", "wall s", "turns/s", "% of ideal", "CPU ms/turn", "CPU-bound ceiling turns/s"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for name, turns, wall, cpu in rows:
        rate = turns / wall
        pct = f"{100 * rate / ideal:.1f}%" if name != "graph only (oracle)" else "-"
        table.add_row(name, str(turns), f"{wall:.2f}", f"{rate:.0f}", pct, f"{1000 * cpu / turns:.2f}", f"{turns / cpu:.0f}")
    console = Console()
    console.print(table)
    (_, t_full, w_full, c_full), (_, t_chat, w_chat, c_chat), (_, t_graph, _, c_graph) = rows
    console.print(f"full run vs the same requests sent bare through ChatOpenAI: {100 * (t_full / w_full) / (t_chat / w_chat):.0f}% "
                  f"of its throughput; harness CPU on top of ChatOpenAI {1000 * (c_full / t_full - c_chat / t_chat):.2f} ms/turn "
                  f"(graph + checkpoints alone: {1000 * c_graph / t_graph:.2f} ms/turn)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
