"""Every table a command prints is readable in an 80-column terminal: no line wider, no value cut to "…"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ecgtrace.cli import main

FIXTURES = Path(__file__).resolve().parent / "fixtures"
WIDTH = 80


@pytest.fixture(autouse=True)
def eighty_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    monkeypatch.delenv("LINES", raising=False)


def check_80(text: str) -> None:
    assert text.strip(), "the command printed nothing"
    assert "…" not in text, "a value was cut to '…':\n" + text
    # a plain line may run past 80 columns for one long path (wrapping it would break copy and paste); a table row may not
    wide = [line for line in text.splitlines() if len(line) > WIDTH and max(len(token) for token in line.split()) < 40]
    assert not wide, f"lines wider than {WIDTH} columns:\n" + "\n".join(wide)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("width")
    ds = root / "ds"
    ds.mkdir()
    shutil.copy(FIXTURES / "qa_small.jsonl", ds / "qa.jsonl")
    shutil.copytree(FIXTURES / "qa_assets", ds / "qa_assets")
    shutil.copy(FIXTURES / "audit_small.jsonl", ds / "audit.jsonl")
    shutil.copytree(FIXTURES / "assets", ds / "assets")
    out = {"ds": ds}
    for model in ("oracle", "random", "prior"):
        out[f"audit-{model}"] = root / f"audit-{model}"
        assert main(["audit", str(ds / "audit.jsonl"), "--model", model, "--modality", "text", "--run", str(out[f"audit-{model}"]),
                     "--quiet"]) == 0
        out[f"qa-{model}"] = root / f"qa-{model}"
        assert main(["qa-eval", str(ds), "--model", model, "--modality", "text", "--run", str(out[f"qa-{model}"]), "--quiet"]) == 0
    return out


def test_audit_results_at_80(runs, capsys):
    from ecgtrace.commands.audit import print_results

    print_results(json.loads((runs["audit-random"] / "results.json").read_text()), title="random - teacher - text")
    out = capsys.readouterr().out
    check_80(out)
    for column in ("diagnosis", "IDA", "GT-RDA", "Compl.", "Depth", "err", "per-stage accuracy"):
        assert column in out


def test_qa_results_at_80(runs, capsys):
    from ecgtrace.commands.qa_eval import print_results

    results = json.loads((runs["qa-random"] / "results.json").read_text())
    print_results(results, title="random - text")
    out = capsys.readouterr().out
    check_80(out)
    for task in results["per_task"]:
        assert task in out  # whole task names, not "open_ti…"


@pytest.mark.parametrize("argv", [
    ["compare", "{audit-random}", "{audit-prior}"],
    ["compare", "{qa-random}", "{qa-prior}"],
    ["bias", "{ds}", "--all"],
    ["templates", "list"],
    ["debug", "{audit-random}", "--all"],
    ["debug", "{qa-random}", "--all"],
    ["audit", "{ds}/audit.jsonl", "--model", "random", "--modality", "text", "--run", "{audit-random}"],
])
def test_command_output_at_80(runs, capsys, argv):
    argv = [a.format(**{k: str(v) for k, v in runs.items()}) for a in argv]
    assert main(argv) == 0
    captured = capsys.readouterr()
    check_80(captured.out)


def test_record_commands_at_80(synth_record, tmp_path, capsys):
    record = str(synth_record.record_path)
    for argv in (["info", record], ["delineate", record, "--t0", "60", "--out", str(tmp_path / "waves")]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        check_80(out)
    assert "QTcB" in out and "ST60" in out
