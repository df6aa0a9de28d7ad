"""Step through one sample of a run turn by turn, and re-ask a turn.

The debugger reads a finished run (``samples.jsonl``) and shows each turn: the
question and lettered options, the model's raw and parsed answer, the truth,
and where the chain broke. To re-ask a turn it needs the conversation state
just before that turn:

- when the run kept its LangGraph checkpoints (``ecgtrace audit
  --keep-checkpoints``), that state is read from the thread's state history;
- otherwise it is rebuilt from the item and the turns recorded before it. The
  audit graph stores no history of its own (it rebuilds the conversation from
  the recorded turns), so both give the same request.

Re-asking never writes to the run: the new answer is only shown beside the old.
"""

from __future__ import annotations

import asyncio
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ecgtrace.errors import RunError


@dataclass
class DebugSample:
    """One finished sample of a run and what is needed to re-ask its turns."""

    run_dir: Path
    header: dict[str, Any]
    row: dict[str, Any]

    @property
    def kind(self) -> str:
        return self.header.get("identity", {}).get("kind", "audit")

    @property
    def turns(self) -> list[dict[str, Any]]:
        return self.row["turns"]

    def broke_at(self) -> int | None:
        """Index of the first wrong turn after the initial question (where the chain broke)."""
        for turn in self.turns:
            if turn.get("stage") == "initial":
                continue
            if turn.get("asked", True) and turn.get("correct") is False:
                return int(turn.get("index", self.turns.index(turn)))
        return None


def load_debug_sample(run_dir: str | Path, sample_id: str) -> DebugSample:
    """Read a run folder and find one sample; a clear error when it is not there."""
    from ecgtrace.runlog import load_run_samples

    header, rows = load_run_samples(run_dir)
    for row in rows:
        if row["id"] == sample_id:
            return DebugSample(Path(run_dir), header, row)
    known = ", ".join(r["id"] for r in rows[:8])
    raise RunError(f"{run_dir}: no finished sample {sample_id!r} (first ids: {known or 'none'})")


def options_text(options: list[str] | None) -> str:
    return "\n".join(f"  {string.ascii_uppercase[i]}. {opt}" for i, opt in enumerate(options or []))


def _audit_item(sample: DebugSample) -> tuple[dict[str, Any], Path]:
    from ecgtrace.agents.audit.format import load_audit

    dataset = sample.header.get("settings", {}).get("dataset_path")
    if not dataset or not Path(dataset).exists():
        raise RunError(f"{sample.run_dir}: the run's dataset {dataset!r} is not available to rebuild the turn")
    audit = load_audit(dataset)
    for item in audit.items:
        if item.id == sample.row["id"]:
            return item.to_json(), Path(audit.base_dir)
    raise RunError(f"{dataset}: no item {sample.row['id']!r}")


async def _state_from_checkpoints(sample: DebugSample, turn_index: int) -> dict[str, Any] | None:
    """The thread's state right before ``turn_index`` was asked, if the checkpoints were kept."""
    checkpoint_db = sample.run_dir / "checkpoints.sqlite"
    if not checkpoint_db.exists():
        return None
    from ecgtrace.graphs.audit_runner import sqlite_checkpointer
    from ecgtrace.graphs.reasoning_audit import build_graph

    config = {"configurable": {"thread_id": f"{sample.header['run_id']}:{sample.row['id']}"}}
    async with sqlite_checkpointer(checkpoint_db) as saver:
        graph = build_graph(checkpointer=saver)
        async for snapshot in graph.aget_state_history(config):
            values = snapshot.values or {}
            if values.get("cursor") == turn_index and "ask" in (snapshot.next or ()):
                return dict(values)
    return None


def rebuild_state(sample: DebugSample, item: dict[str, Any], base_dir: Path, turn_index: int) -> dict[str, Any]:
    """The audit state right before ``turn_index``, rebuilt from the recorded turns."""
    from ecgtrace.agents.audit.examiner import plan_turns

    settings = sample.header.get("settings", {})
    identity = sample.header.get("identity", {})
    mode = identity.get("mode") or settings.get("mode") or sample.row.get("mode") or "teacher"
    modality = identity.get("modality") or settings.get("modality") or "text"
    plan = plan_turns(item)
    if not 0 <= turn_index < len(plan):
        raise RunError(f"sample {item['id']!r} has turns 0..{len(plan) - 1}, not {turn_index}")
    return {
        "item": item,
        "run": {"mode": mode, "modality": modality, "base_dir": str(base_dir)},
        "plan": plan,
        "cursor": turn_index,
        "turns": [t for t in sample.turns[:turn_index]],
        "pending": None,
        "done": False,
    }


async def reask_turn(sample: DebugSample, turn_index: int, examinee: Any) -> tuple[dict[str, Any], str]:
    """Ask turn ``turn_index`` again with ``examinee``; return (the new turn record, where the state came from)."""
    if sample.kind != "audit":
        raise RunError("re-asking is supported for audit runs; for a QA item run `ecgtrace qa-eval --limit` on it")
    from ecgtrace.agents.audit.examiner import build_request, format_prompt, score_reply
    from ecgtrace.graphs.reasoning_audit import history

    state = await _state_from_checkpoints(sample, turn_index)
    source = "LangGraph checkpoint (state history)"
    if state is None:
        item, base_dir = _audit_item(sample)
        state = rebuild_state(sample, item, base_dir, turn_index)
        source = "rebuilt from the recorded turns (run kept no checkpoints)"
    turn = state["plan"][turn_index]
    prompt = format_prompt(turn)
    run = state["run"]
    messages = build_request(history(state), prompt, state["item"], run["base_dir"], run["modality"])
    reply = await examinee.answer(messages, turn)
    return score_reply(turn, prompt, reply.to_json()), source


def reask_turn_sync(sample: DebugSample, turn_index: int, examinee: Any) -> tuple[dict[str, Any], str]:
    return asyncio.run(reask_turn(sample, turn_index, examinee))
