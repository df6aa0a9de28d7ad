"""The CLI never misleads: endpoint preflight, failed runs, reruns with nothing to do, compare warnings, p-values, pipes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ecgtrace.cli import main
from tests.support.mock_openai import MockOpenAI, fixed

FIXTURES = Path(__file__).resolve().parent / "fixtures"
AUDIT = FIXTURES / "audit_small.jsonl"
SECRET = "sk-never-print-this-4242"


def _err_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def _qa_dataset(tmp_path: Path) -> Path:
    (tmp_path / "ds").mkdir(exist_ok=True)
    shutil.copy(FIXTURES / "qa_small.jsonl", tmp_path / "ds" / "qa.jsonl")
    shutil.copytree(FIXTURES / "qa_assets", tmp_path / "ds" / "qa_assets", dirs_exist_ok=True)
    return tmp_path / "ds"


# ------------------------------------------------------------------ preflight

@pytest.mark.parametrize("command", ["audit", "qa-eval"])
def test_unreachable_endpoint_is_one_error_and_writes_nothing(tmp_path, capsys, command):
    with MockOpenAI() as server:  # a port that was listening a moment ago and is now closed
        url = server.url
    data = str(AUDIT) if command == "audit" else str(_qa_dataset(tmp_path))
    run = tmp_path / "run"
    code = main([command, data, "--model", "openai:mock", "--base-url", url, "--modality", "text", "--run", str(run),
                 "--timeout", "3", "--quiet"])
    assert code == 2
    err = _err_line(capsys)
    assert url in err and "cannot reach" in err and "Connection refused" in err
    assert not run.exists()  # nothing written, not even the folder


def test_wrong_model_name_names_the_models_served(tmp_path, capsys):
    with MockOpenAI(models=("smollm2",)) as server:
        url = server.url
        code = main(["audit", str(AUDIT), "--model", "openai:gpt-4o", "--base-url", url, "--modality", "text",
                     "--run", str(tmp_path / "run"), "--quiet"])
        assert server.stats["answers"] == 0 and server.stats["models_requests"] == 1  # refused at the one-token request
    assert code == 2
    err = _err_line(capsys)
    assert "'gpt-4o'" in err and "does not serve" in err and "smollm2" in err and url in err
    assert not (tmp_path / "run").exists()


def test_bad_key_names_the_variable_never_the_key(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ECG_TEST_KEY", SECRET)
    with MockOpenAI(api_key="the-right-key") as server:
        code = main(["qa-eval", str(_qa_dataset(tmp_path)), "--model", "openai:mock", "--base-url", server.url,
                     "--api-key-env", "ECG_TEST_KEY", "--modality", "text", "--run", str(tmp_path / "run"), "--quiet"])
    assert code == 2
    err = _err_line(capsys)
    assert "refused the API key" in err and "$ECG_TEST_KEY" in err and "HTTP 401" in err and SECRET not in err
    assert not (tmp_path / "run").exists()


def test_a_judge_is_checked_too(tmp_path, capsys):
    with MockOpenAI(models=("mock",)) as server:
        code = main(["qa-eval", str(_qa_dataset(tmp_path)), "--model", "openai:mock", "--base-url", server.url, "--modality", "text",
                     "--judge", "openai:no-such-judge", "--run", str(tmp_path / "run"), "--quiet"])
    assert code == 2
    assert "judge openai:no-such-judge" in _err_line(capsys)


def test_debug_ask_checks_the_endpoint(tmp_path, capsys):
    assert main(["audit", str(AUDIT), "--model", "random", "--modality", "text", "--run", str(tmp_path / "run"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["debug", str(tmp_path / "run"), "--ask", "--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1",
                 "--timeout", "2"]) == 2
    assert "cannot reach http://127.0.0.1:9/v1" in capsys.readouterr().err


# ------------------------------------------------------------ run outcomes

def test_a_run_in_which_every_turn_failed_exits_3_with_the_cause(tmp_path, capsys):
    # GET /models answers (the preflight passes), every chat request gets a 500
    with MockOpenAI(models=("mock",), fault_rate=1.0, faults=("500",)) as server:
        code = main(["audit", str(AUDIT), "--model", "openai:mock", "--base-url", server.url, "--modality", "text",
                     "--max-attempts", "1", "--run", str(tmp_path / "run"), "--quiet"])
    assert code == 3
    err = _err_line(capsys)
    assert "every one of the" in err and "nothing was scored" in err and "500" in err and "--retry-errors" in err


def test_some_failed_turns_are_counted_and_retry_errors_asks_them_again(tmp_path, capsys):
    from tests.support.mock_openai import audit_oracle
    from ecgtrace.agents.audit.format import load_audit

    items = load_audit(AUDIT).items
    run = tmp_path / "run"
    args = ["audit", str(AUDIT), "--model", "openai:mock", "--modality", "text", "--max-attempts", "1", "--run", str(run), "--quiet"]
    with MockOpenAI(audit_oracle(items), models=("mock",), fault_rate=0.3, faults=("500",), seed=2) as flaky:
        assert main([*args, "--base-url", flaky.url, "--timeout", "5"]) == 0
    err = capsys.readouterr().err
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    failed = sum(1 for r in rows for t in r["turns"] if t.get("error"))
    with_errors = sum(1 for r in rows if any(t.get("error") for t in r["turns"]))
    assert failed > 0
    assert f"warning: {failed} of " in err and f"({with_errors} samples)" in err and "--retry-errors" in err
    with MockOpenAI(audit_oracle(items), models=("mock",)) as healthy:
        assert main([*args, "--base-url", healthy.url, "--timeout", "6", "--retry-errors"]) == 0
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert not any(t.get("error") for r in rows for t in r["turns"]) and len(rows) == len(items)


def test_qa_eval_retry_errors(tmp_path, capsys):
    ds = _qa_dataset(tmp_path)
    run = tmp_path / "run"
    args = ["qa-eval", str(ds), "--model", "openai:mock", "--modality", "text", "--max-attempts", "1", "--run", str(run), "--quiet"]
    with MockOpenAI(fixed("A"), models=("mock",), fault_rate=0.5, faults=("500",), seed=3) as flaky:
        code = main([*args, "--base-url", flaky.url, "--timeout", "5"])
    err = capsys.readouterr().err
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    errors = sum(1 for r in rows if r["turns"][0].get("error"))
    assert 0 < errors < len(rows) and code == 0 and "--retry-errors" in err
    with MockOpenAI(fixed("A"), models=("mock",)) as healthy:
        assert main([*args, "--base-url", healthy.url, "--timeout", "6", "--retry-errors"]) == 0
        assert healthy.stats["requests"] == errors  # only the failed samples were asked again
    assert "asking %d sample(s) with server errors again" % errors in capsys.readouterr().err


def test_a_rerun_with_nothing_to_do_says_so_and_asks_no_server(tmp_path, capsys):
    run = tmp_path / "run"
    with MockOpenAI(fixed("A"), models=("mock",)) as server:
        args = ["audit", str(AUDIT), "--model", "openai:mock", "--base-url", server.url, "--modality", "text", "--run", str(run)]
        assert main([*args, "--quiet", "--timeout", "5"]) == 0
        before = dict(server.stats)
        results = (run / "results.json").stat().st_mtime_ns
        capsys.readouterr()
        assert main([*args, "--timeout", "6"]) == 0
        assert dict(server.stats) == before  # neither GET /models nor a turn
    err = capsys.readouterr().err
    assert "nothing to do: all 3 samples in" in err and len([l for l in err.splitlines() if l.strip()]) == 1
    assert (run / "results.json").stat().st_mtime_ns == results  # unchanged, not rewritten


# ------------------------------------------------------------------ compare

def test_compare_warns_when_conditions_differ_and_never_prints_p_zero(tmp_path, capsys):
    assert main(["audit", str(AUDIT), "--model", "oracle", "--modality", "text", "--run", str(tmp_path / "a"), "--quiet"]) == 0
    assert main(["audit", str(AUDIT), "--model", "random", "--modality", "text", "--mode", "stop", "--run", str(tmp_path / "b"),
                 "--quiet"]) == 0
    header = json.loads((tmp_path / "b" / "header.json").read_text())  # the fixture has no images: say b was shown them
    header["identity"]["modality"] = "image"
    (tmp_path / "b" / "header.json").write_text(json.dumps(header))
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json"]) == 0
    warnings = json.loads(capsys.readouterr().out)["warnings"]
    assert any("differ in mode (A: teacher, B: stop)" in w for w in warnings)
    assert any("differ in modality (A: text, B: image)" in w for w in warnings)
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert out.count("warning:") == 2 and "mixes conditions" in " ".join(out.split())


def test_p_values_are_never_zero():
    from ecgtrace.commands._output import fmt_p
    from ecgtrace.metrics import mcnemar

    assert fmt_p(0.0) == "< 0.001" and fmt_p(0.0004) == "< 0.001" and fmt_p(0.001) == "0.001" and fmt_p(0.37512) == "0.375"
    tiny = mcnemar(400, 0)  # chi-square p about 1e-88: rounding to 6 decimals would have stored 0
    assert 0.0 < tiny["p_value"] < 1e-80
    exact = mcnemar(24, 0)
    assert exact["method"] == "exact" and exact["p_value"] == pytest.approx(2 * 0.5**24, rel=1e-5)


def test_piped_output_closed_early_gives_no_traceback(tmp_path):
    assert main(["audit", str(AUDIT), "--model", "oracle", "--modality", "text", "--run", str(tmp_path / "a"), "--quiet"]) == 0
    assert main(["audit", str(AUDIT), "--model", "random", "--modality", "text", "--run", str(tmp_path / "b"), "--quiet"]) == 0
    for extra in (["--json"], []):
        proc = subprocess.Popen([sys.executable, "-m", "ecgtrace.cli", "compare", str(tmp_path / "a"), str(tmp_path / "b"), *extra],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "80"})
        proc.stdout.close()  # the reader is gone before the first write, as with `| head -0`
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 1
        assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_a_sigterm_whose_interrupt_was_dropped_still_ends_as_interrupted(monkeypatch, capsys) -> None:
    """SIGTERM raises KeyboardInterrupt wherever the main thread is; where Python drops it (a finalizer, a pool's
    callback; here a bare catch-all) the command would run on and exit 0. main() remembers the signal: exit 130."""
    import signal

    from ecgtrace.commands import info

    def swallowing_run(args) -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        except BaseException:  # noqa: BLE001 - the drop under test
            pass
        return 0

    monkeypatch.setattr(info, "run", swallowing_run)
    assert main(["info", "any-record"]) == 130
    assert "interrupted" in capsys.readouterr().err
    monkeypatch.setattr(info, "run", lambda args: 0)
    assert main(["info", "any-record"]) == 0  # the next call starts clean


def test_a_server_command_stopped_by_sigterm_exits_cleanly(monkeypatch) -> None:
    """mock-server and view stop on Ctrl-C/SIGTERM by design (HANDLES_INTERRUPT): their own exit code stands."""
    import signal

    from ecgtrace.commands import mock_server

    def serve_until_stopped(args) -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        except KeyboardInterrupt:
            pass
        return 0

    assert mock_server.HANDLES_INTERRUPT
    monkeypatch.setattr(mock_server, "run", serve_until_stopped)
    assert main(["mock-server"]) == 0
