"""Step through one sample of a run turn by turn, and re-ask a turn.

The debugger reads a finished run (``samples.jsonl``) and shows each turn: the
question and lettered options, the model's raw and parsed answer, the truth,
and where the chain broke. The header says what kind of run it is.

Re-asking runs the examination's own step, never a copy of it:

- an audit turn goes through the graph's :func:`~ecgtrace.graphs.reasoning_audit.answer_turn`
  with the conversation state just before that turn. When the run kept its
  LangGraph checkpoints (``ecgtrace audit --keep-checkpoints``) that state is
  read from the thread's state history; otherwise the graph's ``plan`` node lays
  the item out again and the turns recorded before it are replayed. The graph
  stores no history of its own (it rebuilds the conversation from the recorded
  turns), so both give the same request.
- a QA item goes through the QA runner's :func:`~ecgtrace.agents.exam.qa_runner.run_one`.

Re-asking never writes to the run: the new answer is only shown beside the old.
"""

from __future__ import annotations

import asyncio
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
        """What the run examines, as its header says (``audit`` or ``qa``)."""
        return self.header["kind"]

    @property
    def turns(self) -> list[dict[str, Any]]:
        return self.row["turns"]

    def broke_at(self) -> int | None:
        """Index of the first wrong turn after the initial question (where the chain broke)."""
        return first_wrong_index(self.turns)


def first_wrong_index(turns: list[dict[str, Any]]) -> int | None:
    """Index of the first wrong asked turn after the initial question (where the chain broke), or None.

    The debugger and the viewer's "first wrong stage" both count this way.
    """
    for position, turn in enumerate(turns):
        if turn.get("stage") == "initial":
            continue
        if turn.get("asked", True) and turn.get("correct") is False:
            return int(turn.get("index", position))
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
    """The options as the examinee saw them, indented for the terminal."""
    from ecgtrace.agents.exam.messages import option_lines

    return "\n".join(f"  {line}" for line in option_lines(options or []))


def _dataset_item(sample: DebugSample) -> tuple[Any, Path]:
    """The run's item for this sample (its contract) and the folder its assets are relative to."""
    from ecgtrace.contracts.datasets import load_items

    dataset = sample.header.get("settings", {}).get("dataset_path")
    if not dataset or not Path(dataset).exists():
        raise RunError(f"{sample.run_dir}: the run's dataset {dataset!r} is not available to rebuild the turn")
    from ecgtrace.contracts.runs import item_id_of

    items = load_items(dataset, sample.kind)
    wanted = item_id_of(sample.row)  # a later epoch's row id carries "#<epoch>"
    for item in items.items:
        if item.id == wanted:
            return item, Path(items.base_dir)
    raise RunError(f"{dataset}: no item {wanted!r}")


def _audit_item(sample: DebugSample) -> tuple[dict[str, Any], Path]:
    """The audit item of this sample as JSON, and its dataset folder."""
    item, base_dir = _dataset_item(sample)
    return item.to_json(), base_dir


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


def _exam_settings(sample: DebugSample) -> dict[str, Any]:
    """How the sample was shown: prompt style, the run's text encoding, the row's epoch and the seed of its option order."""
    identity = sample.header.get("identity", {})
    return {"prompt_style": identity.get("prompt_style") or "lettered", "condensed": bool(identity.get("condensed")),
            "text": identity.get("text_encoding"), "epoch": int(sample.row.get("epoch") or 0), "seed": int(identity.get("seed") or 0)}


def rebuild_state(sample: DebugSample, item: dict[str, Any], base_dir: Path, turn_index: int) -> dict[str, Any]:
    """The audit state right before ``turn_index``: the graph's ``plan`` node, then the turns recorded before it."""
    from ecgtrace.graphs.reasoning_audit import plan

    settings = sample.header.get("settings", {})
    identity = sample.header.get("identity", {})
    mode = identity.get("mode") or settings.get("mode") or sample.row.get("mode") or "teacher"
    modality = identity.get("modality") or settings.get("modality") or "text"
    run = {"mode": mode, "modality": modality, "base_dir": str(base_dir), **_exam_settings(sample)}
    state = plan({"item": item, "run": run})
    if not 0 <= turn_index < len(state["plan"]):
        raise RunError(f"sample {item['id']!r} has turns 0..{len(state['plan']) - 1}, not {turn_index}")
    return {**state, "cursor": turn_index, "turns": list(sample.turns[:turn_index]), "done": False}


async def _reask_audit(sample: DebugSample, turn_index: int, examinee: Any) -> tuple[dict[str, Any], str]:
    from ecgtrace.graphs.reasoning_audit import answer_turn

    state = await _state_from_checkpoints(sample, turn_index)
    source = "LangGraph checkpoint (state history)"
    if state is None:
        item, base_dir = _audit_item(sample)
        state = rebuild_state(sample, item, base_dir, turn_index)
        source = "rebuilt from the recorded turns (run kept no checkpoints)"
    return await answer_turn(state, examinee), source


async def _reask_qa(sample: DebugSample, turn_index: int, examinee: Any) -> tuple[dict[str, Any], str]:
    from ecgtrace.agents.exam.qa_runner import run_one

    if turn_index != 0:
        raise RunError(f"a QA sample has one turn (0), not {turn_index}")
    item, base_dir = _dataset_item(sample)
    from ecgtrace.tools.text_encodings import TextEncoding

    modality = sample.header.get("identity", {}).get("modality") or "text"
    shown = _exam_settings(sample)
    row = await run_one(item, base_dir, examinee, modality, ask_human=getattr(examinee, "ask", None),
                        encoding=TextEncoding.from_json(shown["text"]), epoch=shown["epoch"], seed=shown["seed"])
    return row["turns"][0], "asked again from the dataset item (one request per QA item)"


async def reask_turn(sample: DebugSample, turn_index: int, examinee: Any) -> tuple[dict[str, Any], str]:
    """Ask turn ``turn_index`` again with ``examinee``; return (the new turn record, where the state came from)."""
    if sample.kind == "qa":
        return await _reask_qa(sample, turn_index, examinee)
    return await _reask_audit(sample, turn_index, examinee)


def reask_turn_sync(sample: DebugSample, turn_index: int, examinee: Any) -> tuple[dict[str, Any], str]:
    return asyncio.run(reask_turn(sample, turn_index, examinee))
