"""Run folders for the viewer tests: two audit runs and a prior run over one dataset, a QA run, all on the synthetic record.

Run A's script, by construction (items 0-5, one loop each: criterion, finding,
lead, wave and measurement grounding, decision):

* item 0: the initial answer carries :data:`PAYLOAD` (and then the right answer), the wave span is wrong;
* item 1: the finding answer is unreadable ("banana": a parse failure);
* items 2 and 4: the wave span is wrong;
* item 3: the decision got a server error;
* item 5: everything right; its initial *question* carries the payload (item text is escaped too).

Run B is right everywhere except the wave span of items 0 and 1. A wrong wave
span is always the first option that is not the answer, so A and B agree on item 0.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ecgtrace.agents.exam.examinees import make_examinee  # noqa: E402
from ecgtrace.agents.exam.examinees.base import Reply, as_text  # noqa: E402
from tests.support.audit_items import write_audit  # noqa: E402
from tests.support.viewer_runs import PAYLOAD, write_audit_run, write_qa_run  # noqa: E402
from tests.views.test_report_html import Scripted  # noqa: E402  (the report tests' injecting examinee)

N_ITEMS = 6


def _index(turn: dict[str, Any]) -> int:
    return int(turn["sample_id"].rsplit("-", 1)[1])


def _wrong_wave(turn: dict[str, Any]) -> Reply:
    return Reply(raw=next(o for o in turn["options"] if o != turn["answer"]), latency_ms=120.0,
                 usage={"prompt_tokens": 900, "completion_tokens": 12, "total_tokens": 912})


def script_a(turn: dict[str, Any], rng: random.Random) -> Reply:
    i, truth = _index(turn), as_text(turn["answer"])
    usage = {"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010}
    if i == 0 and turn["stage"] == "initial":
        return Reply(raw=f"Answer: {PAYLOAD}\n\nFinal answer: {truth}", reasoning=PAYLOAD, latency_ms=250.0, usage=usage)
    if turn.get("kind") == "wave" and i in (0, 2, 4):
        return _wrong_wave(turn)
    if i == 1 and turn["stage"] == "finding":
        return Reply(raw="banana", latency_ms=80.0, usage=usage)
    if i == 3 and turn["stage"] == "decision":
        return Reply(raw=None, error="HTTP 500 from the server after 4 attempts", latency_ms=3000.0, attempts=4)
    return Reply(raw=truth, latency_ms=100.0, usage=usage)


def script_b(turn: dict[str, Any], rng: random.Random) -> Reply:
    if turn.get("kind") == "wave" and _index(turn) in (0, 1):
        return _wrong_wave(turn)
    return Reply(raw=as_text(turn["answer"]), latency_ms=90.0)


_PRIOR = make_examinee("prior")


def script_prior(turn: dict[str, Any], rng: random.Random) -> Reply:
    """The built-in prior examinee itself (option texts only)."""
    return asyncio.run(_PRIOR.answer([], turn))


@pytest.fixture(scope="session")
def viewer_runs(synth_record, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("viewer")
    dataset = write_audit(base / "dataset", N_ITEMS, seed=1, loops=1)
    rows = [json.loads(line) for line in dataset.read_text().splitlines()]
    for row in rows:
        row["record"]["path"] = str(synth_record.record_path)
        row["record"]["duration_s"] = 1800.0
    rows[5]["initial"]["question"] = f"Does this ECG show {rows[5]['diagnosis']}? {PAYLOAD}"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    price = {"price_in": 2.0, "price_out": 8.0}
    run_a, _ = write_audit_run(base, N_ITEMS, script_a, dataset=dataset, run_name="run_a", model="scripted-a", settings=price)
    run_b, _ = write_audit_run(base, N_ITEMS, script_b, dataset=dataset, run_name="run_b", model="scripted-b")
    prior, _ = write_audit_run(base, N_ITEMS, script_prior, dataset=dataset, run_name="run_prior", model="prior")
    return {"a": run_a, "b": run_b, "prior": prior, "dataset": dataset,
            "qa": write_qa_run(base, str(synth_record.record_path), Scripted)}


def folder_state(*folders: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime in ns) of every file under ``folders``: equal before and after means nothing was written."""
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for folder in folders for p in sorted(Path(folder).rglob("*")) if p.is_file()}
