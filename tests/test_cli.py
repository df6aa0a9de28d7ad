"""The command line: fast help, one-line errors, info and synth."""

from __future__ import annotations

import json
import subprocess
import sys

from ecgtrace.cli import main


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ecgtrace.cli", *args], capture_output=True, text=True, timeout=120)


def test_help_does_not_import_heavy_libraries():
    code = (
        "import sys\nfrom ecgtrace.cli import build_parser\nbuild_parser().format_help()\n"
        "heavy = [m for m in ('neurokit2', 'langchain_core', 'langchain_openai', 'langgraph', 'matplotlib', 'wfdb', 'numpy') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_info_json_on_synthetic_record(synth_record, capsys):
    assert main(["info", str(synth_record.record_path), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["header"]["leads"] == ["MLII", "V1", "V5"]
    counts = payload["annotations"]["beats_per_class"]
    assert counts["V"] == synth_record.schedule["beats_per_symbol"]["V"]
    assert counts["S"] == synth_record.schedule["beats_per_symbol"]["A"]


def test_info_on_annotation_only_record(shared_data, capsys):
    assert main(["info", str(shared_data / "ltafdb" / "00"), "--ann", "atr", "--fs", "128", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["annotations"]["n_beats"] > 90_000


def test_bad_input_gives_one_line_and_nonzero_exit(tmp_path):
    result = _run("info", str(tmp_path / "missing"))
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error:")
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_synth_command_writes_record(tmp_path):
    result = _run("synth", "--out", str(tmp_path), "--hours", "0.1", "--fs", "128", "--leads", "2", "--seed", "4", "--name", "tiny")
    assert result.returncode == 0, result.stderr
    for ext in ("hea", "dat", "atr", "schedule.json"):
        assert (tmp_path / f"tiny.{ext}").exists()
    bad = _run("synth", "--out", str(tmp_path), "--hours", "48")
    assert bad.returncode == 2 and "hours must be between" in bad.stderr and "Traceback" not in bad.stderr
