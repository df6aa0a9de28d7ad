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
