"""Every command in the README runs as written after the quick start.

The README's fenced ``bash`` blocks are read in order and each command is run
with ``bash -c`` in a folder laid out like the repository root (``examples/`` and
``rubrics/`` linked in, ``../shared/data`` where it exists), after making the
record the examples use with ``ecgtrace synth`` (0.2 h instead of 24 h). A command
passes when it exits 0 and prints no traceback and no ``error:`` line.

Commands that are not run are listed in :data:`NOT_RUN` with the reason; each
``ecgtrace`` one among them is still parsed by the real argument parser, so a
renamed or removed option in the README fails here too.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SHARED = ROOT.parent / "shared"
BIN = Path(sys.executable).parent

#: Commands not run (matched by their start), and why. Anything else in a ``bash`` block runs.
NOT_RUN: dict[str, str] = {
    "make demo": "creates .venv and runs the 24 h demo (minutes); tests/test_demo.py runs the demo on a 0.5 h record",
    "make test": "runs this test suite",
    "ecgtrace demo --model openai:": "needs a model behind an OpenAI-compatible endpoint",
    "ecgtrace demo": "a 24 h (or 2 h) record takes minutes; tests/test_demo.py runs the demo on a 0.5 h record",
    "ecgtrace synth --out data/ --hours 24": "24 h take about 13 s and 760 MB; the test makes the same record at 0.2 h first",
    "ecgtrace build ../shared/data/mitdb/100 ../shared/data/mitdb/119": "two 30-min records with video take minutes",
    "ecgtrace build ../shared/data/ltafdb/00": "a 24 h record of 90,000 beats takes minutes",
    "ecgtrace audit dataset/audit.jsonl --model openai:Qwen": "needs a vision model served at 127.0.0.1:8000",
    "ecgtrace qa-eval dataset/qa.jsonl --model openai:gpt-4o-mini": "needs OpenAI's API and a key",
    "ecgtrace probe dataset/ --model openai:gpt-4o-mini": "needs OpenAI's API and a key",
    "ecgtrace debug runs/random --human": "reads your answer at the prompt",
    "ecgtrace debug runs/random --view": "serves the viewer until stopped (tests/test_cli.py checks what it prints)",
    "pip install": "installs packages",
    "ray start": "starts a Ray cluster's daemons that outlive the test; tests/executors/ start a local Ray inside the test "
                 "(ray.init(num_cpus=2)) and check the same build and audit there",
    "ecgtrace audit dataset/audit.jsonl --model openai:mock --base-url http://127.0.0.1:8765/v1 --modality text --run runs/mock-2":
        "the same audit in two shards: tests/executors/test_exam_shards.py runs it against the mock server and compares it with "
        "one process; kept out of this test's 600 s budget",
    "ray stop": "stops the cluster of the line above (not started here)",
    "ecgtrace build data/holter --out dataset-ray/ --executor ray": "needs the ray extra and the cluster `ray start --head` "
                                                                    "starts; tests/executors/test_build_executors.py builds on a local Ray",
    "CMAKE_ARGS=": "compiles llama.cpp for several minutes",
    "langgraph dev": "serves until stopped; needs the langgraph extra (checked by hand, see the report of issue 16)",
    "bash examples/local_smollm2.sh": "needs the local-llm extra; tests/test_examples.py runs it where it is installed",
    "ecgtrace import erb": "needs ERB's released JSONL (not in ../shared/data); tests/agents/interop/test_erb_import.py imports "
                           "hand-written ERB files against the PTB-XL records",
    "ecgtrace audit erb-ptbxl/audit.jsonl --model openai:gpt-4o": "needs OpenAI's API, a key and the imported ERB set",
    "ecgtrace export erb runs/erb-4o": "needs the ERB run above; tests/agents/interop/test_erb_export.py exports and re-scores a run",
    "ecgtrace import holtercare": "needs a Holtercare-Bench QA file (not in ../shared/data); tests/agents/interop/test_holtercare.py "
                                  "imports one written in its published shapes",
    "ecgtrace qa-eval hc-test/": "needs the imported Holtercare-Bench set above; tests/agents/interop/test_holtercare.py scores its "
                                 "gold answers, a model's and the oracle's",
    "ecgtrace export holtercare dataset/": "needs the built dataset/ above (not built here); tests/agents/interop/test_holtercare.py "
                                           "exports a built dataset and imports it back",
}
#: Commands that need the public records in ../shared/data (skipped where that folder is absent).
NEEDS_SHARED = "../shared/data"
#: A server started in the background (``&``): started, waited for, and stopped at the README's ``kill %1``.
BACKGROUND = "ecgtrace mock-server"
#: The README's fixed port for the mock server, replaced by a free one.
README_PORT = "8765"


def readme_commands(text: str) -> list[str]:
    """The commands of the ``bash`` blocks, in order: continuation lines joined, comment-only lines dropped."""
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        pending = ""
        for line in block.splitlines():
            pending += line.rstrip()
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            if pending.strip() and not pending.lstrip().startswith("#"):
                commands.append(" ".join(pending.split()))
            pending = ""
    return commands


def _without_comment(command: str) -> str:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=False)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return " ".join(shlex.quote(token) if not re.fullmatch(r"[|&]", token) else token for token in lexer)


def _reason(command: str) -> str | None:
    return next((why for start, why in NOT_RUN.items() if command.startswith(start)), None)


def _parses(command: str) -> None:
    """An ``ecgtrace`` command that is not run must still be accepted by the parser."""
    from ecgtrace.cli import build_parser

    tokens = shlex.split(_without_comment(command))
    while tokens and "=" in tokens[0] and not tokens[0].startswith("-"):
        tokens.pop(0)  # VAR=value prefixes
    if not tokens or tokens[0] != "ecgtrace":
        return
    cut = next((i for i, t in enumerate(tokens) if t in ("|", "&")), len(tokens))
    build_parser().parse_args(tokens[1:cut])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_readme_has_commands():
    commands = readme_commands(README.read_text())
    assert len(commands) > 30
    assert all(start in " ".join(commands) for start in NOT_RUN), "a NOT_RUN entry no longer matches any README command"


def test_every_readme_command_runs_as_written(tmp_path):
    work = tmp_path / "repo"
    work.mkdir()
    for name in ("examples", "rubrics"):
        (work / name).symlink_to(ROOT / name)
    if (SHARED / "data").is_dir():
        (tmp_path / "shared").symlink_to(SHARED)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "80", "ECGTRACE_CACHE": str(tmp_path / "cache")}
    env.pop("OPENAI_API_KEY", None)
    port = str(_free_port())

    def bash(command: str, timeout: int = 300) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=timeout)

    made = bash("ecgtrace synth --out data/ --hours 0.2 --fs 250 --leads 3 --seed 0 --name holter")
    assert made.returncode == 0, made.stderr
    ran, skipped, server = [], [], None
    try:
        for command in readme_commands(README.read_text()):
            reason = _reason(command)
            if reason is None and NEEDS_SHARED in command and not (SHARED / "data").is_dir():
                reason = f"needs {NEEDS_SHARED}, absent here"
            if reason is not None:
                _parses(command)
                skipped.append((command, reason))
                continue
            line = _without_comment(command).replace(README_PORT, port)
            if command.startswith(BACKGROUND):
                _parses(command)
                server = subprocess.Popen(["bash", "-c", f"exec {line.rstrip('& ')}"], cwd=work, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True)
                assert "listening on" in server.stdout.readline()
                ran.append(command)
                continue
            if line.strip() == "kill %1":
                assert server is not None, "kill %1 without a server started before it"
                server.terminate()
                server.wait(timeout=10)
                server = None
                ran.append(command)
                continue
            started = time.perf_counter()
            result = bash(line)
            shown = f"$ {command}\n{result.stdout[-1500:]}\n{result.stderr[-1500:]}"
            assert result.returncode == 0, shown
            assert "Traceback" not in result.stderr and "error:" not in result.stderr, shown
            assert "…" not in result.stdout, f"a value was cut at 80 columns:\n{shown}"
            ran.append(f"{command} ({time.perf_counter() - started:.1f} s)")
    finally:
        if server is not None:
            server.kill()
    # a broken extraction would run few commands; where ../shared/data is absent its commands are skipped, not lost
    absent_data = sum(1 for _, why in skipped if why.startswith(f"needs {NEEDS_SHARED}"))
    assert len(ran) + absent_data >= 25, (ran, skipped)
    print(f"ran {len(ran)} README commands: " + "; ".join(ran))
    print(f"not run: " + "; ".join(f"{c!r} ({why})" for c, why in skipped))


@pytest.mark.parametrize("command", [c for c in readme_commands(README.read_text()) if c.startswith("ecgtrace")])
def test_readme_ecgtrace_commands_parse(command):
    _parses(command)


def test_readme_commands_are_found_in_order():
    commands = readme_commands(README.read_text())
    assert commands.index(next(c for c in commands if c.startswith("ecgtrace synth"))) < commands.index(
        next(c for c in commands if c.startswith("ecgtrace build data/holter")))
    assert shutil.which("bash")
