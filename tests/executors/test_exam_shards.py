"""``audit``/``qa-eval`` in shards (``--workers N``, ``--executor ray``): one run folder, the same rows and results as one process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ecgtrace.agents.audit.format import load_audit
from ecgtrace.cli import main
from ecgtrace.executors import KILL_ENV
from tests.support.audit_items import write_audit
from tests.support.mock_openai import MockOpenAI, audit_oracle

ROOT = Path(__file__).resolve().parents[2]


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]


def _strip(value):  # noqa: ANN001, ANN202
    """``value`` without what differs between any two runs: request timings, and the mock's reply ids (numbered in arrival order)."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE and not (k == "id" and str(v).startswith("chatcmpl-"))}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _comparable(run: Path) -> list[dict]:
    """The run's rows in id order, timings left out (:func:`_strip`)."""
    return sorted((_strip(r) for r in _rows(run)), key=lambda r: r["id"])


VOLATILE = {"latency_ms", "mean_latency_ms"}


@pytest.fixture(scope="module")
def audit_set(tmp_path_factory):
    return load_audit(write_audit(tmp_path_factory.mktemp("data"), 16, seed=5))


def _audit(audit, server, run: Path, *extra: str) -> int:
    return main(["audit", str(audit.path), "--model", "openai:mock", "--base-url", server.url, "--modality", "text",
                 "--run", str(run), "--concurrency", "8", "--quiet", *extra])


@pytest.fixture(scope="module")
def one_process(audit_set, tmp_path_factory):
    run = tmp_path_factory.mktemp("one") / "run"
    with MockOpenAI(audit_oracle(audit_set.items)) as server:
        assert _audit(audit_set, server, run) == 0
    return run


def test_two_local_shards_give_the_run_of_one_process(audit_set, one_process, tmp_path):
    with MockOpenAI(audit_oracle(audit_set.items)) as server:
        assert _audit(audit_set, server, tmp_path / "run", "--workers", "2") == 0
        asked = server.stats["requests"]
        assert _audit(audit_set, server, tmp_path / "run", "--workers", "2") == 0  # finished: nothing asked again
        assert server.stats["requests"] == asked
    assert (tmp_path / "run" / "results.json").read_bytes() == (one_process / "results.json").read_bytes()
    assert _comparable(tmp_path / "run") == _comparable(one_process)
    assert not (tmp_path / "run" / "shards").exists()  # merged, then dropped
    turns = sum(1 for r in _rows(one_process) for t in r["turns"] if t.get("asked", True))
    assert turns <= asked <= turns + 2  # every turn once, plus the driver's preflight (the shards skip theirs)



def test_ray_shards_give_the_run_of_one_process(audit_set, one_process, tmp_path, ray_local):
    with MockOpenAI(audit_oracle(audit_set.items)) as server:
        assert _audit(audit_set, server, tmp_path / "run", "--executor", "ray", "--workers", "2") == 0
    assert (tmp_path / "run" / "results.json").read_bytes() == (one_process / "results.json").read_bytes()
    assert _comparable(tmp_path / "run") == _comparable(one_process)


def test_a_killed_shard_worker_resumes_its_shard_and_nothing_is_lost(audit_set, one_process, tmp_path, monkeypatch):
    (tmp_path / "kills").mkdir()
    monkeypatch.setenv(KILL_ENV, str(tmp_path / "kills"))  # each shard's first worker dies at once
    with MockOpenAI(audit_oracle(audit_set.items)) as server:
        assert _audit(audit_set, server, tmp_path / "run", "--workers", "2") == 0
    assert len(list((tmp_path / "kills").iterdir())) == 2
    assert (tmp_path / "run" / "results.json").read_bytes() == (one_process / "results.json").read_bytes()
    assert _comparable(tmp_path / "run") == _comparable(one_process)


def test_twenty_percent_faults_in_shards_are_all_recorded(audit_set, tmp_path):
    server = MockOpenAI(audit_oracle(audit_set.items), fault_rate=0.2, faults=("429", "500", "garbage"), seed=4, keep_requests=100_000)
    with server:
        assert _audit(audit_set, server, tmp_path / "run", "--workers", "2", "--max-attempts", "1") == 0
        faults = sum(1 for f in server.faults_log if f)
    rows = _rows(tmp_path / "run")
    assert sorted(r["id"] for r in rows) == sorted(it.id for it in audit_set.items)
    turns = [t for r in rows for t in r["turns"]]
    errors = [t for t in turns if t["error"]]
    bad = [t for t in turns if t["error"] or not t["parse_ok"]]
    assert faults > 0.1 * len(turns) and len(bad) >= faults - 2  # the preflight's request may draw a fault too
    assert all(t["correct"] for t in turns if not t["error"] and t["parse_ok"])
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["overall"]["turns"]["errors"] == len(errors)


def test_sigkill_of_the_driver_then_rerun_gives_the_same_run(audit_set, one_process, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "unused"}
    run = tmp_path / "run"
    with MockOpenAI(audit_oracle(audit_set.items), delay_s=0.05) as server:
        cmd = [sys.executable, "-m", "ecgtrace.cli", "audit", str(audit_set.path), "--model", "openai:mock", "--base-url", server.url,
               "--modality", "text", "--run", str(run), "--concurrency", "4", "--workers", "2", "--quiet"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if sum(len(p.read_bytes().splitlines()) for p in run.glob("shards/*/samples.jsonl")) >= 3:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL and not (run / "results.json").exists()
        time.sleep(1.0)  # the shard workers notice their parent is gone (ecgtrace.workers.PARENT_POLL_S)
        assert main(cmd[3:]) == 0
    ids = [r["id"] for r in _rows(run)]
    assert len(ids) == len(set(ids)) == len(audit_set.items)
    assert (run / "results.json").read_bytes() == (one_process / "results.json").read_bytes()
    assert _comparable(run) == _comparable(one_process)


def test_qa_eval_in_shards_gives_the_run_of_one_process(tmp_path):
    from tests.support.qa_items import copy_small_qa

    dataset = copy_small_qa(tmp_path / "data") / "qa.jsonl"
    runs = {}
    with MockOpenAI("A") as server:  # one fixed reply: some items right, some wrong, all scored
        for name, extra in (("one", []), ("sharded", ["--workers", "2"])):
            runs[name] = tmp_path / name
            assert main(["qa-eval", str(dataset), "--model", "openai:mock", "--base-url", server.url, "--modality", "text",
                         "--run", str(runs[name]), "--quiet", *extra]) == 0
    # QA results report the mean request latency, which differs between any two runs; everything else is equal
    results = {name: json.loads((run / "results.json").read_text()) for name, run in runs.items()}
    assert _strip(results["sharded"]) == _strip(results["one"]) and results["one"]["n_items"] == 13
    assert _comparable(runs["sharded"]) == _comparable(runs["one"]) and len(_rows(runs["one"])) == 13


def _send_times(shared, n: int) -> list[float]:  # noqa: ANN001
    """A shard's requests: each waits for the shared budget, then notes when it went (CLOCK_MONOTONIC is machine-wide)."""
    import asyncio

    from ecgtrace.commands._exam_shards import SharedRateLimit

    limiter = SharedRateLimit(shared, 600, None)

    async def go() -> list[float]:
        times = []
        for _ in range(n):
            await limiter.acquire(10)
            times.append(time.monotonic())
        return times

    return asyncio.run(go())


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_the_rate_budget_is_one_budget_for_every_shard(executor, request):
    """600 rpm = one request per 0.1 s after a 1 s burst (10 requests): 2 shards x 10 requests take >= 0.9 s in all.
    Two private budgets would let all 20 go at once."""
    from ecgtrace.commands._exam_shards import ServedBuckets
    from ecgtrace.executors import Task, make_executor

    if executor == "ray":
        request.getfixturevalue("ray_local")
    with make_executor(executor, workers=2) as ex:
        shared = ex.serve(ServedBuckets, 600, None)
        outcomes = ex.run([Task(f"s{k}", _send_times, (shared, 10)) for k in range(2)], retries=0)
    times = sorted(t for o in outcomes for t in o.value)
    assert len(times) == 20
    assert times[-1] - times[0] >= 0.85
    for k, t in enumerate(times):  # never ahead of the schedule: request k waits for (k - 10) x 0.1 s of budget
        assert t - times[0] >= (k - 10) * 0.1 - 0.05


def test_help_and_the_local_default_never_import_ray(tmp_path):
    code = ("import sys; from ecgtrace.cli import main\n"
            "try:\n    main(['build', '--help'])\nexcept SystemExit:\n    pass\n"
            "from ecgtrace.executors import make_executor, Task\n"
            "with make_executor('local', workers=1) as ex: ex.run([Task('a', len, ('ab',))])\n"
            "assert 'ray' not in sys.modules, 'ray was imported'\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "--executor" in out.stdout and "--address" in out.stdout
