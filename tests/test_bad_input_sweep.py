"""The sweep of issue 17: every command, given bad files and bad arguments, answers with one ``error:`` line.

No traceback, no misleading success (exit 0), and nothing left in the output
folder. The bad inputs are built here: a missing path, a folder, an empty
file, a FIFO, random bytes, non-UTF-8 text, JSON lines that are no items, and
option values that make no sense (0, negative, nan, out of range).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ecgtrace.cli import main

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _bad_files(root: Path) -> dict[str, Path]:
    root.mkdir()
    files = {"missing": root / "missing.hea", "folder": root / "folder", "empty": root / "empty.jsonl", "fifo": root / "fifo.hea",
             "random": root / "random.dat", "latin1": root / "latin1.jsonl", "not-items": root / "not_items.jsonl"}
    files["folder"].mkdir()
    files["empty"].write_bytes(b"")
    os.mkfifo(files["fifo"])
    files["random"].write_bytes(bytes(range(256)) * 64)
    files["latin1"].write_bytes('{"id": "caf\xe9"}\n'.encode("latin-1"))
    files["not-items"].write_text('{"no": "id"}\n[1, 2]\n"text"\n', encoding="utf-8")
    return files


#: Each command with ``{BAD}`` where the bad file goes and ``{OUT}`` an output folder that must stay empty.
COMMANDS: list[list[str]] = [
    ["info", "{BAD}"],
    ["annotate", "{BAD}", "--out", "{OUT}"],
    ["delineate", "{BAD}", "--out", "{OUT}"],
    ["build", "{BAD}", "--out", "{OUT}"],
    ["templates", "validate", "{BAD}"],
    ["audit", "{BAD}", "--model", "oracle", "--run", "{OUT}"],
    ["qa-eval", "{BAD}", "--model", "oracle", "--run", "{OUT}"],
    ["compare", "{BAD}", "{BAD}"],
    ["report", "{BAD}", "--out", "{OUT}/report.html"],
    ["debug", "{BAD}", "--sample", "x"],
    ["bias", "{BAD}"],
    ["export", "erb", "{BAD}", "--out", "{OUT}"],
    ["view", "{BAD}", "--static", "{OUT}"],
]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refusing an argument: its usage line, exit 2
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def _assert_refused(argv: list[str], code: int, err: str, out: Path) -> None:
    assert code != 0, f"{argv}: exit 0 on bad input"
    assert "Traceback" not in err, f"{argv}: traceback\n{err}"
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and (lines[-1].startswith("error:") or "error:" in lines[-1]), f"{argv}: no error line\n{err}"
    leftovers = [p for p in out.rglob("*") if p.name != ".ecgtrace.lock"] if out.exists() else []
    assert not [p for p in leftovers if p.is_file()], f"{argv}: left {leftovers}"


@pytest.mark.parametrize("template", COMMANDS, ids=lambda t: " ".join(t[:2]).replace("{BAD}", "BAD"))
def test_every_command_refuses_every_bad_file(template, tmp_path, capsys):
    files = _bad_files(tmp_path / "bad")
    for kind, bad in files.items():
        out = tmp_path / f"out-{kind}"
        argv = [a.replace("{BAD}", str(bad)).replace("{OUT}", str(out)) for a in template]
        code, err = _run(argv, capsys)
        _assert_refused(argv, code, err, out)


def _datasets(tmp_path: Path) -> tuple[Path, Path]:
    audit, qa = tmp_path / "audit", tmp_path / "qa"
    audit.mkdir()
    shutil.copy(FIXTURES / "audit_small.jsonl", audit / "audit.jsonl")
    shutil.copytree(FIXTURES / "assets", audit / "assets")
    qa.mkdir()
    shutil.copy(FIXTURES / "qa_small.jsonl", qa / "qa.jsonl")
    shutil.copytree(FIXTURES / "qa_assets", qa / "qa_assets")
    return audit, qa


BAD_OPTIONS: list[tuple[str, ...]] = [
    ("--concurrency", "0"), ("--timeout", "nan"), ("--timeout", "-1"), ("--backoff", "-5"), ("--backoff", "inf"),
    ("--max-attempts", "0"), ("--limit", "0"), ("--max-reply-chars", "0"), ("--temperature", "nan"), ("--epochs", "0"),
]


@pytest.mark.parametrize("option", BAD_OPTIONS, ids=lambda o: " ".join(o))
def test_exam_commands_refuse_bad_options_before_asking(option, tmp_path, capsys):
    audit, qa = _datasets(tmp_path)
    for command, dataset in (("audit", audit), ("qa-eval", qa)):
        out = tmp_path / f"run-{command}"
        argv = [command, str(dataset), "--model", "oracle", "--run", str(out), "--modality", "text", "--quiet", *option]
        code, err = _run(argv, capsys)
        _assert_refused(argv, code, err, out)
        assert not out.exists(), f"{argv}: the run folder was created before the options were checked"


@pytest.mark.parametrize("option", [("--jobs", "0"), ("--dev-fraction", "2"), ("--dev-fraction", "nan"), ("--fs", "-1")],
                         ids=lambda o: " ".join(o))
def test_build_refuses_bad_options_before_any_work(option, tiny_record, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["build", str(tiny_record), "--out", str(out), *option]
    code, err = _run(argv, capsys)
    _assert_refused(argv, code, err, out)
    assert not out.exists()


def test_qa_eval_answers_file_that_is_not_utf8_is_one_error_line(tmp_path, capsys):
    _, qa = _datasets(tmp_path)
    answers = tmp_path / "answers.jsonl"
    answers.write_bytes('{"id": "x"}\n{"id": "caf\xe9"}\n'.encode("latin-1"))
    out = tmp_path / "run"
    argv = ["qa-eval", str(qa), "--answers", str(answers), "--run", str(out), "--modality", "text", "--quiet"]
    code, err = _run(argv, capsys)
    _assert_refused(argv, code, err, out)  # before: UnicodeDecodeError traceback
    assert "answers.jsonl:2: not UTF-8 text" in err
