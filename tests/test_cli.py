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


def _model_options(command: str) -> set[str]:
    from ecgtrace.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._subparsers._group_actions).choices[command]
    return {opt for action in sub._actions for opt in action.option_strings}


def test_audit_and_qa_eval_share_their_model_options():
    shared = {"--model", "--run", "--base-url", "--api-key-env", "--modality", "--concurrency", "--timeout", "--max-attempts",
              "--backoff", "--max-tokens", "--temperature", "--limit", "--seed", "--quiet"}
    assert shared <= _model_options("audit") and shared <= _model_options("qa-eval")


def test_qa_eval_sends_temperature_and_keeps_backoff_as_a_setting(tmp_path, monkeypatch):
    from tests.support.mock_openai import MockOpenAI, fixed

    from tests.support.qa_items import copy_small_qa

    copy_small_qa(tmp_path / "ds")
    base = ["qa-eval", str(tmp_path / "ds"), "--model", "openai:mock", "--modality", "text", "--limit", "2", "--quiet"]
    with MockOpenAI(fixed("A")) as server:
        assert main([*base, "--base-url", server.url, "--run", str(tmp_path / "warm"), "--temperature", "0.3",
                     "--backoff", "0.25", "--timeout", "7"]) == 0
        assert all(body["temperature"] == 0.3 for body in server.requests)
        header = json.loads((tmp_path / "warm" / "header.json").read_text())
        assert header["kind"] == "qa" and header["identity"]["temperature"] == 0.3 and header["settings"]["backoff_s"] == 0.25
        sent = len(server.requests)
        assert main([*base, "--base-url", server.url, "--run", str(tmp_path / "plain"), "--timeout", "8"]) == 0
        assert all("temperature" not in body for body in server.requests[sent:])
    assert "temperature" not in json.loads((tmp_path / "plain" / "header.json").read_text())["identity"]  # earlier runs keep their identity
    assert main([*base, "--run", str(tmp_path / "neg"), "--backoff", "-1"]) == 2


def test_debug_shows_where_the_ecg_is_and_view_prints_the_sample_url(tmp_path, capsys, monkeypatch):
    import importlib.util
    from pathlib import Path

    audit = Path(__file__).resolve().parent / "fixtures" / "audit_small.jsonl"
    assert main(["audit", str(audit), "--model", "random", "--modality", "text", "--seed", "3", "--run", str(tmp_path / "run"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["debug", str(tmp_path / "run"), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    text = shown["ecg"]["files"]["text"]
    assert text["exists"] and Path(text["path"]).is_absolute() and text["path"].endswith(f"{shown['sample']['id']}.txt")
    assert shown["ecg"]["record"] == "synth/holter" and shown["broke_at"] is not None  # no --sample: the first broken chain
    sample = shown["sample"]["id"]
    if importlib.util.find_spec("ecgtrace.commands.view") is None:
        assert main(["debug", str(tmp_path / "run"), "--sample", sample, "--view"]) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert f"ecgtrace view {tmp_path / 'run'}" in out and f"?sample={sample}" in out
    else:  # the viewer is installed: it is started on the port whose URL was printed
        import ecgtrace.commands.view as view

        started = {}
        monkeypatch.setattr(view, "run", lambda args: started.update(vars(args)) or 0)
        assert main(["debug", str(tmp_path / "run"), "--sample", sample, "--view"]) == 0
        out = capsys.readouterr().out
        assert f"http://127.0.0.1:{started['port']}/?sample={sample}" in out and started["runs"] == [str(tmp_path / "run")]


def test_synth_json(tmp_path, capsys):
    assert main(["synth", "--out", str(tmp_path), "--hours", "0.05", "--seed", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_beats"] > 100 and out["hours"] == 0.05 and out["record"].endswith("holter")
