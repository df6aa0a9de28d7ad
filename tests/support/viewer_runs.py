"""Run folders for the viewer's tests and benchmark, written without a model server or the graph.

Each turn is scored by the audit's own :func:`~ecgtrace.agents.exam.turns.closed_row`
from a scripted reply, so the rows are exactly what ``ecgtrace audit`` keeps;
only the LangGraph loop (slow for 10,000 samples, and not what the viewer
reads) is skipped. Items come from :mod:`tests.support.audit_items`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ecgtrace.agents.audit.examiner import format_prompt, plan_turns
from ecgtrace.agents.exam.examinees.base import Reply, as_text
from ecgtrace.agents.exam.turns import closed_row
from ecgtrace.contracts.datasets import load_items
from ecgtrace.contracts.runs import AuditSample
from ecgtrace.jsonio import write_jsonl_atomic
from ecgtrace.metrics import summarize
from ecgtrace.runlog import RunDir
from tests.support.audit_items import write_audit

#: Markup a hostile model might answer with: none of it may ever run in the viewer.
PAYLOAD = ('<img src=x onerror="window.__pwned=1;document.title=\'PWNED\'"></script><script>window.__pwned=2</script>'
           '<b id=bold-inject>bold</b>')

#: ``reply(turn, rng) -> Reply``: what the scripted model says to one turn spec.
Script = Callable[[dict[str, Any], random.Random], Reply]


def truthful(turn: dict[str, Any], rng: random.Random) -> Reply:
    return Reply(raw=as_text(turn["answer"]), latency_ms=round(rng.uniform(50, 900), 1))


def noisy(accuracy: float = 0.7) -> Script:
    """Right with probability ``accuracy``, else a random other option (multi-select: one option); server usage reported."""
    def reply(turn: dict[str, Any], rng: random.Random) -> Reply:
        options = turn["options"]
        if rng.random() < accuracy:
            choice = as_text(turn["answer"])
        else:
            wrong = [o for o in options if o != turn["answer"] and [o] != turn["answer"]]
            choice = rng.choice(wrong or options)
        prompt = rng.randint(300, 1500)
        completion = rng.randint(1, 40)
        return Reply(raw=choice, latency_ms=round(rng.uniform(80, 2500), 1), meta={"model": "noisy-model"},
                     usage={"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
    return reply


def write_audit_run(base: str | Path, n_items: int, script: Script, *, seed: int = 0, model: str = "scripted", loops: int | None = None,
                    record_path: str | None = None, dataset: Path | None = None, settings: dict[str, Any] | None = None,
                    run_name: str = "run") -> tuple[Path, Path]:
    """Write ``base/dataset/audit.jsonl`` (unless ``dataset`` is given) and the run folder ``base/<run_name>``; returns both paths.

    ``record_path`` points every item at a real record (figures drawn from the signal); windows are 10 s each from t = 0.
    """
    base = Path(base)
    if dataset is None:
        dataset = write_audit(base / "dataset", n_items, seed=seed, loops=loops)
        if record_path is not None:
            rows = [json.loads(line) for line in dataset.read_text().splitlines()]
            for row in rows:
                row["record"]["path"] = record_path
                row["record"]["duration_s"] = 1800.0
            dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items = load_items(dataset, "audit")
    run = RunDir.open(base / run_name, {"dataset_sha256": items.sha256, "model": model, "mode": "teacher", "modality": "text"},
                      {"dataset_path": str(items.path), **(settings or {})})
    rng = random.Random(seed)
    samples = []
    for item in items.items:
        turns = [closed_row(turn, format_prompt(turn), script({**turn, "sample_id": item.id}, rng)) for turn in plan_turns(item)]
        samples.append(AuditSample(id=item.id, diagnosis=item.diagnosis, label=item.label, path_id=item.path_id, mode="teacher",
                                   turns=turns).to_json())
    write_jsonl_atomic(run.samples_path, samples)
    run.write_results({"run_id": run.run_id, "n_items": len(samples), "n_finished": len(samples), "complete": True, **summarize(samples)})
    return run.path, dataset


def write_qa_run(base: str | Path, record_path: str, examinee_for: Callable[[set[str]], Any]) -> Path:
    """The 13-item QA fixture (``tests/fixtures/qa_small.jsonl``, every task family) on ``record_path``, run by the QA runner.

    ``examinee_for(ids)`` builds the examinee; ``ids`` are the items whose answers should carry injected markup
    (the open-evidence and closed-presence tasks). Returns the run folder ``base/qa_run``.
    """
    import asyncio
    import shutil

    from ecgtrace.agents.exam.qa_runner import identity_for, load_qa, run_qa

    root = Path(__file__).resolve().parents[2]
    base = Path(base)
    qa_dir = base / "qa"
    qa_dir.mkdir()
    shutil.copytree(root / "tests" / "fixtures" / "qa_assets", qa_dir / "qa_assets")
    items = [json.loads(line) for line in (root / "tests" / "fixtures" / "qa_small.jsonl").read_text().splitlines()]
    for item in items:
        item["record"]["path"] = record_path
    (qa_dir / "qa.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    qa = load_qa(qa_dir)
    inject = {i["id"] for i in items if i["task"] in ("open_evidence", "closed_presence")}
    run = RunDir.open(base / "qa_run", identity_for(qa, model="scripted", modality="text", seed=0, limit=None, max_tokens=None, judge=None),
                      {"dataset_path": str(qa.path)})
    asyncio.run(run_qa(qa, run, examinee_for(inject), modality="text"))
    return run.path
