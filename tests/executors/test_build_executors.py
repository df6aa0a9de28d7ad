"""``ecgtrace build`` on the local and the Ray executor: the same bytes, bounded retries, killed workers, reruns that skip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ecgtrace.executors import KILL_ENV, TasksFailedError
from ecgtrace.graphs.holter_build import SHARDS, RunOn, build_dataset
from ecgtrace.graphs.holter_qa import FAIL_ENV

OPTIONS = {"seed": 5, "tasks": ["closed_count", "report_statistics"], "modalities": ["text"], "templates_dir": None,
           "fs_hz": None, "paraphrase": False, "measure": False, "render_jobs": 1}


@pytest.fixture(scope="module")
def two_records(tmp_path_factory):
    from ecgtrace.tools.synth import synthesize_holter

    root = tmp_path_factory.mktemp("records")
    return [str(synthesize_holter(root / f"r{seed}", name=f"holter{seed}", hours=0.1, fs_hz=250.0, n_leads=2, seed=seed).record_path)
            for seed in (3, 4)]


@pytest.fixture(scope="module")
def local_build(two_records, tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    build_dataset(two_records, out, OPTIONS, jobs=2, audit=False)
    return out


def _files(out: Path) -> dict[str, bytes]:
    """Every dataset file by relative path (the working folders .checkpoints, .parts, .shards left out)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and not p.relative_to(out).parts[0].startswith(".")}


def test_local_pool_and_in_process_build_give_the_same_bytes(two_records, local_build, tmp_path):
    build_dataset(two_records, tmp_path, OPTIONS, jobs=1, audit=False)
    assert _files(tmp_path) == _files(local_build)
    rows = [json.loads(line) for line in (local_build / "qa.jsonl").read_text().splitlines()]
    assert {r["record"]["id"] if isinstance(r.get("record"), dict) else r.get("record_id") for r in rows} and len(rows) > 5


def test_ray_build_is_byte_identical_and_a_rerun_skips_finished_records(two_records, local_build, tmp_path, ray_local, monkeypatch):
    build_dataset(two_records, tmp_path, OPTIONS, jobs=2, audit=False, run_on=RunOn("ray"))
    assert _files(tmp_path) == _files(local_build)
    index = json.loads((tmp_path / SHARDS / "index.json").read_text())
    assert sorted(e["label"] for e in index.values()) == sorted(two_records)
    # a rerun submits nothing: a task would now fail on its first node
    monkeypatch.setattr("ecgtrace.graphs.holter_build._run_on_executor", lambda *a, **k: pytest.fail("a finished record was built again"))
    build_dataset(two_records, tmp_path, OPTIONS, jobs=2, audit=False, run_on=RunOn("ray"))
    assert _files(tmp_path) == _files(local_build)


def test_ray_worker_killed_mid_build_is_retried_and_nothing_is_lost(two_records, local_build, tmp_path, ray_local, monkeypatch):
    kills = tmp_path / "kills"
    kills.mkdir()
    monkeypatch.setenv(KILL_ENV, str(kills))  # each record's first attempt kills its Ray worker
    build_dataset(two_records, tmp_path / "out", OPTIONS, jobs=2, audit=False, run_on=RunOn("ray", retries=1))
    assert len(list(kills.iterdir())) == 2
    assert _files(tmp_path / "out") == _files(local_build)


def test_a_record_failing_every_attempt_is_reported_and_a_rerun_resumes_it(two_records, local_build, tmp_path, monkeypatch):
    from ecgtrace.contracts.datasets import UNFINISHED_BUILD

    monkeypatch.setenv(FAIL_ENV, "render")  # the local workers are spawned with this environment
    with pytest.raises(TasksFailedError, match=r"2 of 2 records failed.*injected failure.*after 2 attempts"):
        build_dataset(two_records, tmp_path, OPTIONS, jobs=2, audit=False, run_on=RunOn("local", retries=1))
    assert not (tmp_path / "qa.jsonl").exists() and (tmp_path / UNFINISHED_BUILD).exists()
    assert len(list((tmp_path / ".checkpoints").glob("*.sqlite"))) == 2  # resumable from the render node
    monkeypatch.delenv(FAIL_ENV)
    build_dataset(two_records, tmp_path, OPTIONS, jobs=2, audit=False)
    assert _files(tmp_path) == _files(local_build)
