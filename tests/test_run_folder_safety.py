"""Run folders and datasets under attack (issue 17): one process per folder, no symlink followed, bad files named, assets kept in.

Covers: two processes on one ``--run`` folder (and one build folder), symbolic
links inside a run folder, ``samples.jsonl`` as a folder, a corrupt
``checkpoints.sqlite``, sample lines without ``id``, non-UTF-8 bytes in every
JSONL input, the checkpoint file shrinking after a finished run, and asset
paths (a symlinked asset, a symlinked ``assets/`` folder, ``..``) for every reader.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ecgtrace.cli import main
from tests.support.audit_items import write_audit

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _audit_set(folder: Path) -> Path:
    """The fixture audit set (3 items, PNG and text assets) copied to ``folder``."""
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "audit_small.jsonl", folder / "audit.jsonl")
    shutil.copytree(FIXTURES / "assets", folder / "assets")
    return folder


def _qa_set(folder: Path) -> Path:
    from tests.support.qa_items import copy_small_qa

    return copy_small_qa(folder)


def _audit(dataset: Path, run: Path, *extra: str) -> int:
    return main(["audit", str(dataset), "--model", "oracle", "--run", str(run), "--modality", "text", "--quiet", *extra])


@pytest.fixture
def finished_run(tmp_path) -> Path:
    run = tmp_path / "run"
    assert _audit(write_audit(tmp_path / "ds", 3), run) == 0
    return run


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    return err.splitlines()[-1] if err else ""


# ----------------------------------------------------------------- one process per folder

def _hold_lock(folder: Path) -> subprocess.Popen:
    code = ("import sys, time\nfrom ecgtrace.folder_lock import lock_folder\nlock_folder(sys.argv[1], 'folder')\n"
            "print('held', flush=True)\ntime.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_second_process_on_a_run_folder_is_refused_naming_the_holder(tmp_path, capsys):
    dataset = write_audit(tmp_path / "ds", 2)
    run = tmp_path / "run"
    run.mkdir()
    holder = _hold_lock(run)
    try:
        assert _audit(dataset, run) == 2
        assert f"is in use by another ecgtrace process (pid {holder.pid})" in _error(capsys)
        assert sorted(p.name for p in run.iterdir()) == [".ecgtrace.lock"]  # nothing written beside the lock
    finally:
        holder.kill()
        holder.wait()
    assert _audit(dataset, run) == 0  # the kernel dropped the lock with its holder: no stale lock blocks the rerun


def test_two_real_audits_on_one_folder_never_mix(tmp_path):
    dataset = write_audit(tmp_path / "ds", 4)
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "ecgtrace.cli", "audit", str(dataset), "--model", "oracle", "--run", str(run), "--modality", "text", "--quiet"]
    first = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    second = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    results = [(p.wait(timeout=120), p.stderr.read()) for p in (first, second)]
    assert all("Traceback" not in err for _, err in results)
    assert sorted(code for code, _ in results) in ([0, 0], [0, 2])  # one after the other, or the second refused
    refused = [err for code, err in results if code == 2]
    assert all("is in use by another ecgtrace process" in err for err in refused)
    ids = [json.loads(line)["id"] for line in (run / "samples.jsonl").read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 4  # before: 130 lines for 65 ids


def test_a_second_build_into_one_folder_is_refused(tiny_record, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    holder = _hold_lock(out)
    try:
        assert main(["build", str(tiny_record), "--out", str(out), "--tasks", "closed_presence", "--modalities", "text", "--no-audit"]) == 2
        assert f"build output folder {out} is in use by another ecgtrace process (pid {holder.pid})" in _error(capsys)
    finally:
        holder.kill()
        holder.wait()


# ----------------------------------------------------------------- files of a run folder

@pytest.mark.parametrize("name", ["samples.jsonl", "checkpoints.sqlite", "checkpoints.sqlite-wal", "results.json"])
def test_symlinks_inside_a_run_folder_are_refused_for_writes(finished_run, tmp_path, capsys, name):
    outside = tmp_path / "outside"
    target = finished_run / name
    if target.exists():
        shutil.move(target, outside)
    target.symlink_to(outside)
    before = outside.read_bytes() if outside.exists() else None
    assert _audit(tmp_path / "ds" / "audit.jsonl", finished_run) == 2
    assert "is a symbolic link" in _error(capsys)
    assert (outside.read_bytes() if outside.exists() else None) == before  # before: appended to / made a database


def test_append_never_follows_a_symlink(tmp_path):
    from ecgtrace.errors import OutputError
    from ecgtrace.jsonio import append_jsonl

    (tmp_path / "log.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(OutputError, match="symbolic link"):
        append_jsonl(tmp_path / "log.jsonl", {"id": "x"})
    assert not (tmp_path / "elsewhere.jsonl").exists()


def test_samples_jsonl_as_a_folder_is_an_error_for_every_reader(finished_run, tmp_path, capsys):
    (finished_run / "samples.jsonl").unlink()
    (finished_run / "samples.jsonl").mkdir()
    for argv in (["audit", str(tmp_path / "ds"), "--model", "oracle", "--run", str(finished_run), "--modality", "text", "--quiet"],
                 ["report", str(finished_run)], ["compare", str(finished_run), str(finished_run)],
                 ["debug", str(finished_run), "--sample", "af-0000", "--all"], ["view", str(finished_run), "--static", str(tmp_path / "v")]):
        assert main(argv) == 2, argv
        assert "samples.jsonl is not a file" in _error(capsys)


def test_a_corrupt_checkpoint_database_is_named(finished_run, tmp_path, capsys):
    (finished_run / "checkpoints.sqlite").write_bytes(b"this is not a database " * 200)
    assert _audit(tmp_path / "ds" / "audit.jsonl", finished_run, "--retry-errors") == 2
    assert "checkpoints.sqlite: not a usable checkpoint database" in _error(capsys)


def test_sample_lines_without_an_id_are_named_by_every_reader(finished_run, tmp_path, capsys):
    with open(finished_run / "samples.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"turns": []}\n')
    for argv in (["audit", str(tmp_path / "ds"), "--model", "oracle", "--run", str(finished_run), "--modality", "text", "--quiet"],
                 ["report", str(finished_run)], ["compare", str(finished_run), str(finished_run)],
                 ["debug", str(finished_run), "--sample", "af-0000", "--all"], ["view", str(finished_run), "--static", str(tmp_path / "v")]):
        assert main(argv) == 2, argv  # before: KeyError 'id'
        assert "samples.jsonl:4: not a finished sample" in _error(capsys)


def test_non_utf8_bytes_in_every_jsonl_input_name_file_and_line(finished_run, tmp_path, capsys):
    bad_audit = tmp_path / "bad_audit"
    shutil.copytree(tmp_path / "ds", bad_audit)
    with open(bad_audit / "audit.jsonl", "ab") as handle:
        handle.write(b'{"id": "caf\xe9"}\n')
    bad_qa = _qa_set(tmp_path / "bad_qa")
    (bad_qa / "qa.jsonl").write_bytes(b"\xff\xfe" + (bad_qa / "qa.jsonl").read_bytes())
    with open(finished_run / "samples.jsonl", "ab") as handle:
        handle.write(b'{"id": "\xc3\x28", "turns": []}\n{"id": "z", "turns": []}\n')  # not the torn last line
    cases = [(["audit", str(bad_audit), "--model", "oracle", "--run", str(tmp_path / "r1"), "--modality", "text", "--quiet"], "audit.jsonl:4"),
             (["qa-eval", str(bad_qa), "--model", "oracle", "--run", str(tmp_path / "r2"), "--modality", "text", "--quiet"], "qa.jsonl:1"),
             (["bias", str(bad_qa)], "qa.jsonl:1"), (["bias", str(bad_audit)], "audit.jsonl:4"),
             (["report", str(finished_run)], "samples.jsonl:4"), (["compare", str(finished_run), str(finished_run)], "samples.jsonl:4"),
             (["debug", str(finished_run), "--sample", "af-0000", "--all"], "samples.jsonl:4"),
             (["view", str(finished_run), "--static", str(tmp_path / "v")], "samples.jsonl:4")]
    for argv, where in cases:
        assert main(argv) == 2, argv  # before: UnicodeDecodeError tracebacks
        line = _error(capsys)
        assert where in line and "not UTF-8 text" in line, (argv, line)
    assert not (tmp_path / "r1").exists() and not (tmp_path / "r2").exists()


def test_a_torn_multibyte_character_at_the_end_is_a_torn_tail(finished_run, tmp_path):
    with open(finished_run / "samples.jsonl", "ab") as handle:
        handle.write(b'{"id": "caf\xc3')  # killed in the middle of appending "café"
    assert _audit(tmp_path / "ds" / "audit.jsonl", finished_run) == 0
    assert (finished_run / "samples.jsonl").read_bytes().endswith(b"}\n")


def test_checkpoints_shrink_once_the_run_is_finished(tmp_path):
    dataset = _audit_set(tmp_path / "ds")
    for name, extra in (("kept", ("--keep-checkpoints",)), ("shrunk", ())):
        assert main(["audit", str(dataset), "--model", "oracle", "--run", str(tmp_path / name), "--modality", "both",
                     "--sample-id", "af-pos-001", "--sample-id", "af-neg-002", "--quiet", *extra]) == 0
    kept, shrunk = (tmp_path / "kept" / "checkpoints.sqlite").stat().st_size, (tmp_path / "shrunk" / "checkpoints.sqlite").stat().st_size
    with sqlite3.connect(tmp_path / "shrunk" / "checkpoints.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM checkpoints").fetchone() == (0,)
        assert conn.execute("PRAGMA freelist_count").fetchone() == (0,)  # before: every deleted page kept (290 MB for 65 samples)
    assert shrunk <= 32_768 < kept
    assert not (tmp_path / "shrunk" / "checkpoints.sqlite-wal").exists() or (tmp_path / "shrunk" / "checkpoints.sqlite-wal").stat().st_size == 0


# ----------------------------------------------------------------- asset paths stay inside the dataset folder

def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "af-pos-001.txt").write_text("SECRET-CONTENT-OUTSIDE\n", encoding="utf-8")
    shutil.copy(FIXTURES / "assets" / "af-pos-001.png", secret / "af-pos-001.png")
    return secret


@pytest.mark.parametrize("how", ["file", "folder"])
def test_the_audit_refuses_symlinked_assets(tmp_path, capsys, how):
    dataset = _audit_set(tmp_path / "ds")
    secret = _secret(tmp_path)
    if how == "file":
        for name in ("af-pos-001.txt", "af-pos-001.png"):
            (dataset / "assets" / name).unlink()
            (dataset / "assets" / name).symlink_to(secret / name)
    else:
        for path in (dataset / "assets").iterdir():
            if not (secret / path.name).exists():
                shutil.copy(path, secret / path.name)
        shutil.rmtree(dataset / "assets")
        (dataset / "assets").symlink_to(secret, target_is_directory=True)
    for modality in ("text", "image"):
        assert main(["audit", str(dataset), "--model", "oracle", "--run", str(tmp_path / f"run-{modality}"), "--modality", modality,
                     "--sample-id", "af-pos-001", "--quiet"]) == 2
        line = _error(capsys)
        assert "resolves outside the dataset folder" in line and "write" not in line
        assert not (tmp_path / f"run-{modality}").exists()


@pytest.mark.parametrize("how", ["file", "folder", "dotdot"])
def test_qa_eval_refuses_assets_outside_the_dataset_and_says_read(tmp_path, capsys, how):
    dataset = _qa_set(tmp_path / "ds")
    secret = tmp_path / "secret"
    shutil.copytree(FIXTURES / "qa_assets", secret)
    (secret / "w120.txt").write_text("SECRET-CONTENT-OUTSIDE\n", encoding="utf-8")
    if how == "file":
        (dataset / "qa_assets" / "w120.txt").unlink()
        (dataset / "qa_assets" / "w120.txt").symlink_to(secret / "w120.txt")
    elif how == "folder":
        shutil.rmtree(dataset / "qa_assets")
        (dataset / "qa_assets").symlink_to(secret, target_is_directory=True)
    else:
        text = (dataset / "qa.jsonl").read_text(encoding="utf-8").replace('"url": "qa_assets/w120.png"', '"url": "../secret/w120.png"')
        (dataset / "qa.jsonl").write_text(text.replace('"text": "qa_assets/w120.txt"', '"text": "../secret/w120.txt"'), encoding="utf-8")
    for modality in ("text", "image"):
        assert main(["qa-eval", str(dataset), "--model", "oracle", "--run", str(tmp_path / f"run-{modality}"), "--modality", modality,
                     "--quiet"]) == 2
        line = _error(capsys)
        assert "resolves outside the dataset folder" in line and "write" not in line  # before: "refusing to write outside"
        assert not (tmp_path / f"run-{modality}").exists()


def test_the_report_and_the_debugger_do_not_read_an_asset_outside(tmp_path, capsys):
    from ecgtrace.agents.exam.messages import resolve_asset
    from ecgtrace.errors import DatasetFormatError

    dataset = _audit_set(tmp_path / "ds")
    assert main(["audit", str(dataset), "--model", "oracle", "--run", str(tmp_path / "run"), "--modality", "image", "--sample-id", "af-pos-001",
                 "--quiet"]) == 0
    secret = _secret(tmp_path)
    (dataset / "assets" / "af-pos-001.png").unlink()
    (dataset / "assets" / "af-pos-001.png").symlink_to(secret / "af-pos-001.png")
    with pytest.raises(DatasetFormatError, match="outside the dataset folder"):
        resolve_asset(dataset, "assets/af-pos-001.png")
    assert main(["report", str(tmp_path / "run")]) == 0  # the figure goes without the outside image, nothing else changes
    html = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    import base64

    assert base64.b64encode((secret / "af-pos-001.png").read_bytes()[:60]).decode()[:40] not in html
    assert main(["debug", str(tmp_path / "run"), "--sample", "af-pos-001", "--ask", "--model", "oracle"]) == 2
    assert "outside the dataset folder" in _error(capsys)


def test_an_unfinished_build_is_not_read_as_a_dataset(tmp_path, capsys):
    from ecgtrace.contracts.datasets import UNFINISHED_BUILD

    dataset = _qa_set(tmp_path / "ds")
    (dataset / UNFINISHED_BUILD).write_text("{}", encoding="utf-8")
    assert main(["qa-eval", str(dataset), "--model", "oracle", "--run", str(tmp_path / "run"), "--modality", "text", "--quiet"]) == 2
    assert "holds an unfinished build" in _error(capsys)
    assert main(["bias", str(dataset)]) == 2
    assert "holds an unfinished build" in _error(capsys)
    time.sleep(0)  # nothing else to wait for
