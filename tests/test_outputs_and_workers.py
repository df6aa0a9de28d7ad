"""Outputs that cannot be written, input folders that must not be, workers that must not outlive their parent (issue 17).

A full disk is simulated by making writes fail with ``OSError(28)`` (a real
one cannot be made here); a read-only folder by a path under a regular file,
which refuses writes even to root (tests run as root, where ``chmod`` does not).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from ecgtrace.cli import main
from tests.support.audit_items import write_audit

FIXTURES = Path(__file__).resolve().parent / "fixtures"
BUILD_FAST = ["--tasks", "closed_presence", "--modalities", "text", "--no-audit"]


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err, err
    return err.splitlines()[-1] if err else ""


def _disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


# ----------------------------------------------------------------- a full disk

def test_a_full_disk_in_synth_leaves_no_half_record(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(os, "fsync", _disk_full)
    assert main(["synth", "--out", str(tmp_path / "rec"), "--hours", "0.05", "--fs", "128", "--leads", "2", "--name", "r"]) == 2
    assert "No space left on device" in _error(capsys)
    assert _tree(tmp_path / "rec") == []  # before: a traceback, and files of a half record


def test_a_full_disk_in_delineate_and_annotate_leaves_no_half_file(tiny_record, tmp_path, monkeypatch, capsys):
    import wfdb

    monkeypatch.setattr(wfdb, "wrann", _disk_full)
    assert main(["delineate", str(tiny_record), "--out", str(tmp_path / "waves"), "--beats", "detect"]) == 2
    assert "No space left on device" in _error(capsys)
    assert _tree(tmp_path / "waves") == []
    assert main(["annotate", str(tiny_record), "--out", str(tmp_path / "ann"), "--cache-dir", str(tmp_path / "cache"), "--workers", "1"]) == 2
    assert "No space left on device" in _error(capsys)
    assert _tree(tmp_path / "ann") == []


def test_a_full_disk_in_audit_and_qa_eval_keeps_the_log_whole(tmp_path, monkeypatch, capsys):
    dataset = write_audit(tmp_path / "ds", 3)
    real_fsync, calls = os.fsync, []

    def fills_up(fd: int) -> None:  # the header and the first sample fit, then the disk is full
        calls.append(fd)
        if len(calls) > 2:
            _disk_full()
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fills_up)
    assert main(["audit", str(dataset), "--model", "oracle", "--run", str(tmp_path / "run"), "--modality", "text", "--quiet",
                 "--concurrency", "1"]) == 2
    assert "No space left on device" in _error(capsys)
    lines = (tmp_path / "run" / "samples.jsonl").read_bytes().split(b"\n")
    assert len(lines) == 2 and lines[-1] == b"" and json.loads(lines[0])["id"]  # the failed append was cut back: no half line
    assert not [p for p in (tmp_path / "run").iterdir() if p.name.endswith(".tmp")]
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert main(["audit", str(dataset), "--model", "oracle", "--run", str(tmp_path / "run"), "--modality", "text", "--quiet"]) == 0
    assert len((tmp_path / "run" / "samples.jsonl").read_text().splitlines()) == 3  # and a rerun resumes
    monkeypatch.setattr(os, "fsync", _disk_full)
    qa = tmp_path / "qa"
    qa.mkdir()
    shutil.copy(FIXTURES / "qa_small.jsonl", qa / "qa.jsonl")
    shutil.copytree(FIXTURES / "qa_assets", qa / "qa_assets")
    assert main(["qa-eval", str(qa), "--model", "oracle", "--run", str(tmp_path / "qa_run"), "--modality", "text", "--quiet"]) == 2
    assert "cannot write" in _error(capsys)


def test_a_full_disk_in_report_leaves_no_partial_report(tmp_path, monkeypatch, capsys):
    assert main(["audit", str(write_audit(tmp_path / "ds", 2)), "--model", "oracle", "--run", str(tmp_path / "run"), "--modality", "text", "--quiet"]) == 0
    listing = _tree(tmp_path / "run")
    monkeypatch.setattr(os, "fsync", _disk_full)
    assert main(["report", str(tmp_path / "run")]) == 2
    assert "report.html: No space left on device" in _error(capsys)
    assert _tree(tmp_path / "run") == listing


def test_a_full_disk_in_build_leaves_nothing_that_passes_for_a_dataset(tiny_record, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(os, "fsync", _disk_full)
    assert main(["build", str(tiny_record), "--out", str(tmp_path / "out"), *BUILD_FAST]) == 2
    assert "No space left on device" in _error(capsys)
    assert not (tmp_path / "out" / "qa.jsonl").exists()


def test_a_full_checkpoint_database_is_one_error_line(tmp_path, monkeypatch, capsys):
    import sqlite3

    import ecgtrace.graphs.audit_runner as runner

    async def full(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(runner, "run_audit", full)
    assert main(["audit", str(write_audit(tmp_path / "ds", 1)), "--model", "oracle", "--run", str(tmp_path / "run"), "--modality", "text", "--quiet"]) == 2
    assert "database or disk is full" in _error(capsys)


# ----------------------------------------------------------------- folders that cannot be written

def test_output_paths_under_a_file_are_one_error_line_for_every_command(tiny_record, tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    under = str(blocker / "sub")
    dataset = write_audit(tmp_path / "ds", 1)
    assert main(["audit", str(dataset), "--model", "oracle", "--run", str(tmp_path / "run"), "--modality", "text", "--quiet"]) == 0
    qa = tmp_path / "qa"
    qa.mkdir()
    shutil.copy(FIXTURES / "qa_small.jsonl", qa / "qa.jsonl")
    shutil.copytree(FIXTURES / "qa_assets", qa / "qa_assets")
    commands = [["synth", "--out", under, "--hours", "0.05", "--fs", "128"],
                ["delineate", str(tiny_record), "--out", under],
                ["annotate", str(tiny_record), "--out", under, "--cache-dir", str(tmp_path / "cache")],
                ["build", str(tiny_record), "--out", under, *BUILD_FAST],
                ["build", str(tiny_record), "--out", str(tmp_path / "out"), "--cache-dir", under, *BUILD_FAST],
                ["audit", str(dataset), "--model", "oracle", "--run", under, "--modality", "text", "--quiet"],
                ["qa-eval", str(qa), "--model", "oracle", "--run", under, "--modality", "text", "--quiet"],
                ["report", str(tmp_path / "run"), "--out", f"{under}/report.html"]]
    for argv in commands:
        assert main(argv) == 2, argv  # before: PermissionError / NotADirectoryError tracebacks
        line = _error(capsys)
        assert line.startswith("error:") and "Not a directory" in line, (argv, line)
    assert blocker.read_text() == "x" and not (tmp_path / "out" / "qa.jsonl").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="chmod does not stop root; the path-under-a-file test covers read-only folders")
def test_a_read_only_output_folder_is_one_error_line(tmp_path, capsys):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        assert main(["synth", "--out", str(folder / "x"), "--hours", "0.05", "--fs", "128"]) == 2
        assert "Permission denied" in _error(capsys)
    finally:
        folder.chmod(0o700)


# ----------------------------------------------------------------- input folders are never written to

def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()}


def test_no_command_writes_into_the_record_folder(tiny_record, tmp_path, monkeypatch, capsys):
    records = tmp_path / "records"
    records.mkdir()
    for path in tiny_record.parent.glob("tiny.*"):
        shutil.copy2(path, records / path.name)
    base = records / "tiny"
    monkeypatch.delenv("ECGTRACE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    before = _snapshot(records)
    template = str(Path(__file__).resolve().parents[1] / "rubrics" / "templates" / "closed_presence.yaml")
    for argv in (["info", str(base)], ["annotate", str(base), "--out", str(tmp_path / "ann"), "--workers", "1"],
                 ["annotate", str(base), "--out", str(tmp_path / "ann_ref"), "--reference", "--workers", "1"],
                 ["delineate", str(base), "--out", str(tmp_path / "waves")],
                 ["templates", "preview", template, "--record", str(base)],
                 ["build", str(base), "--out", str(tmp_path / "out"), "--tasks", "closed_presence", "--modalities", "text"]):
        assert main(argv) == 0, argv
    capsys.readouterr()
    assert _snapshot(records) == before  # before: <record dir>/.ecgtrace_cache/ appeared
    assert (tmp_path / "xdg" / "ecgtrace" / "annotations").is_dir() and (tmp_path / "xdg" / "ecgtrace" / "holter").is_dir()
    assert not (tmp_path / "home").exists()


# ----------------------------------------------------------------- failed and unfinished builds

def test_one_bad_record_among_two_leaves_no_output_folder(tiny_record, tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    for path in tiny_record.parent.glob("tiny.*"):
        shutil.copy(path, bad / path.name)
    (bad / "tiny.atr").write_bytes(b"")
    assert main(["build", str(tiny_record), str(bad / "tiny"), "--out", str(tmp_path / "out"), *BUILD_FAST]) == 2
    assert "holds no beat annotations" in _error(capsys)
    assert not (tmp_path / "out").exists()  # before: .checkpoints/*.sqlite (70 files) and no dataset


def test_a_build_that_dies_late_says_so_and_resumes(tiny_record, tmp_path, monkeypatch, capsys):
    from ecgtrace.contracts.datasets import UNFINISHED_BUILD
    from ecgtrace.graphs.holter_qa import FAIL_ENV

    out = tmp_path / "out"
    monkeypatch.setenv(FAIL_ENV, "render")
    with pytest.raises(RuntimeError, match="injected failure"):
        main(["build", str(tiny_record), "--out", str(out), *BUILD_FAST])
    state = json.loads((out / UNFINISHED_BUILD).read_text())
    assert state["complete"] is False and "run the same `ecgtrace build` command again" in state["message"]
    assert not (out / "qa.jsonl").exists() and list((out / ".checkpoints").glob("*.sqlite"))
    assert main(["qa-eval", str(out), "--model", "oracle", "--run", str(tmp_path / "run"), "--modality", "text", "--quiet"]) == 2
    assert "holds an unfinished build" in _error(capsys)
    monkeypatch.delenv(FAIL_ENV)
    assert main(["build", str(tiny_record), "--out", str(out), *BUILD_FAST]) == 0
    assert not (out / UNFINISHED_BUILD).exists() and (out / "qa.jsonl").is_file() and (out / "manifest.json").is_file()
    assert main(["qa-eval", str(out), "--model", "oracle", "--run", str(tmp_path / "run"), "--modality", "text", "--quiet"]) == 0


@pytest.mark.parametrize("argv, message", [(["--jobs", "0"], "--jobs must be at least 1"), (["--dev-fraction", "2"], "--dev-fraction is a share"),
                                           (["--dev-fraction", "nan"], "--dev-fraction is a share")])
def test_bad_build_options_are_refused_before_any_work(tiny_record, tmp_path, capsys, argv, message):
    assert main(["build", str(tiny_record), "--out", str(tmp_path / "out"), *BUILD_FAST, *argv]) == 2
    assert message in _error(capsys)
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------- workers die with their parent

def _tagged(tag: str) -> list[int]:
    """Pids of live processes whose environment carries ``tag`` (the command and every process it started)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if tag.encode() in (entry / "environ").read_bytes() and b"State:\tZ" not in (entry / "status").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def _start(argv: list[str], tmp_path: Path) -> tuple[subprocess.Popen, str]:
    tag = f"ECGTRACE_TEST_TAG={uuid.uuid4().hex}"
    env = {**os.environ, tag.split("=")[0]: tag.split("=")[1]}
    process = subprocess.Popen([sys.executable, "-m", "ecgtrace.cli", *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, cwd=tmp_path)
    return process, tag


def _wait_for(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc to find the workers")
def test_sigterm_stops_annotate_and_its_workers(synth_record, tmp_path):
    process, tag = _start(["annotate", str(synth_record.record_path), "--out", str(tmp_path / "ann"), "--workers", "2", "--no-cache",
                           "--cache-dir", str(tmp_path / "cache")], tmp_path)
    try:
        assert _wait_for(lambda: len(_tagged(tag)) >= 3, 60), "the beat-detection workers never started"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 130
        assert "interrupted" in process.stderr.read()
        assert _wait_for(lambda: not _tagged(tag), 10), _tagged(tag)  # before: two workers ran on for 98 s
    finally:
        for pid in _tagged(tag):
            os.kill(pid, signal.SIGKILL)
    assert not (tmp_path / "ann").exists() or _tree(tmp_path / "ann") == []


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc to find the workers")
def test_kill_9_of_build_takes_its_workers_with_it(tiny_record, tiny_record_b, tmp_path):
    process, tag = _start(["build", str(tiny_record), str(tiny_record_b), "--out", str(tmp_path / "out"), "--jobs", "2",
                           "--cache-dir", str(tmp_path / "cache")], tmp_path)
    try:
        assert _wait_for(lambda: len(_tagged(tag)) >= 3, 90), "the build workers never started"
        process.kill()
        process.wait(timeout=10)
        assert _wait_for(lambda: not _tagged(tag), 15), _tagged(tag)  # before: the forkserver and resource tracker lingered
    finally:
        for pid in _tagged(tag):
            os.kill(pid, signal.SIGKILL)
