"""Run a model over a probe set: every original and its counterfactuals, through the same examination, resumable.

Audit items go through the reasoning-audit graph exactly as in ``ecgtrace
audit`` (one LangGraph thread per item in the run's SQLite checkpointer), QA
items through the QA runner's :func:`~ecgtrace.agents.exam.qa_runner.run_one`;
both share the run loop of :mod:`ecgtrace.agents.exam.run_loop` (skip finished
samples, bounded workers, append once). A ``samples.jsonl`` line is a
:class:`~ecgtrace.contracts.ProbeSample`: the sample row the item would have in
its own run, with its source and role. ``results.json`` holds the paired
metrics of :mod:`ecgtrace.agents.probe.metrics` over the probe set's kept pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ecgtrace.agents.exam import run_loop
from ecgtrace.agents.exam.examinees import Examinee
from ecgtrace.contracts.probe import ProbeSample
from ecgtrace.graphs.audit_runner import _run_sample, sqlite_checkpointer
from ecgtrace.graphs.reasoning_audit import AuditContext, build_graph
from ecgtrace.runlog import RunDir


@dataclass(frozen=True)
class Entry:
    """One item a probe run examines."""

    id: str
    source: str  # audit | qa
    role: str  # original | counterfactual
    item: Any  # AuditItem | QAItem


@dataclass(frozen=True)
class ProbeSet:
    """A loaded probe set: its folder, pairs, and items by source."""

    root: Path
    manifest: dict[str, Any]
    pairs: list[dict[str, Any]]
    audit: list[Any]
    qa: list[Any]

    def entries(self, limit: int | None = None) -> list[Entry]:
        """Originals and their counterfactuals, in pair order; ``limit``: the first N originals (with all their counterfactuals)."""
        kept = [p for p in self.pairs if p["status"] == "kept"]
        originals: list[str] = []
        for p in kept:
            if p["original"] not in originals:
                originals.append(p["original"])
        chosen = set(originals[:limit] if limit else originals)
        wanted = {p["original"] for p in kept if p["original"] in chosen} | {p["id"] for p in kept if p["original"] in chosen}
        out = []
        for source, items in (("audit", self.audit), ("qa", self.qa)):
            cf_ids = {p["id"] for p in kept}
            out += [Entry(it.id, source, "counterfactual" if it.id in cf_ids else "original", it) for it in items if it.id in wanted]
        return out

    def pair_of(self, item_id: str) -> dict[str, Any] | None:
        """Where an examined item's counterpart is (the ``pair`` field of :class:`~ecgtrace.contracts.ProbeSample`)."""
        kept = [p for p in self.pairs if p["status"] == "kept"]
        for p in kept:
            if p["id"] == item_id:
                f = p.get("files") or {}
                return {"probe_set": str(self.root), "pair": p["id"], "kind": p["kind"], "original": p["original"], "image": f.get("image"),
                        "original_image": f.get("original_image"), "window": f.get("window"), "original_window": f.get("original_window"),
                        "edit_spans_ms": (p.get("edit") or {}).get("spans_ms") or []}
        mine = [p for p in kept if p["original"] == item_id]
        if not mine:
            return None
        f = mine[0].get("files") or {}
        return {"probe_set": str(self.root), "counterfactuals": [p["id"] for p in mine], "image": f.get("original_image"), "window": f.get("original_window")}

    def n_options(self) -> dict[tuple[str, int], tuple[int, bool]]:
        """``(item id, turn index) -> (number of options, multi-select)`` for the chance levels."""
        from ecgtrace.agents.audit.examiner import plan_turns

        out: dict[tuple[str, int], tuple[int, bool]] = {}
        for item in self.audit:
            for turn in plan_turns(item):
                out[(item.id, turn["index"])] = (len(turn["options"]), bool(turn["multi"]))
        for item in self.qa:
            out[(item.id, 0)] = (len(item.options or []), False)
        return out


def load_probe_set(root: str | Path) -> ProbeSet:
    """Read a built probe set (manifest, pairs, items through their contracts)."""
    import json

    from ecgtrace.agents.probe.builder import MANIFEST, PAIRS, ProbeSetError
    from ecgtrace.contracts.datasets import dataset_file, load_items
    from ecgtrace.contracts.probe import ProbePair
    from ecgtrace.jsonio import read_jsonl

    folder = Path(root)
    if not (folder / MANIFEST).is_file():
        raise ProbeSetError(f"{folder}: not a probe set (no {MANIFEST})")
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    pairs = [ProbePair.model_validate(p).to_json() for p in read_jsonl(folder / PAIRS)]
    items = {kind: load_items(folder, kind).items if dataset_file(folder, kind).is_file() else [] for kind in ("audit", "qa")}
    return ProbeSet(root=folder, manifest=manifest, pairs=pairs, audit=list(items["audit"]), qa=list(items["qa"]))


async def run_probe(probe: ProbeSet, run: RunDir, examinee: Examinee, *, mode: str = "teacher", modality: str = "text", concurrency: int = 8,
                    limit: int | None = None, on_sample: Callable[[dict[str, Any]], None] | None = None,
                    ask_human: Callable[[dict[str, Any]], str] | None = None, keep_checkpoints: bool = False) -> dict[str, Any]:
    """Run (or resume) the probe; returns the results written to ``results.json``."""
    from ecgtrace.agents.exam.qa_runner import run_one

    entries = probe.entries(limit)
    base_dir = str(probe.root)
    run_cfg = {"mode": mode, "modality": modality, "base_dir": base_dir}
    context = AuditContext(examinee=examinee, base_dir=base_dir)
    async with sqlite_checkpointer(run.checkpoint_path) as saver:
        graph = build_graph(checkpointer=saver)

        async def examine_one(entry: Entry) -> dict[str, Any]:
            if entry.source == "audit":
                row = await _run_sample(graph, run, entry.item, 0, run_cfg, context, ask_human)  # epoch 0: a probe asks each sample once
            else:
                row = await run_one(entry.item, probe.root, examinee, modality, ask_human=ask_human)
            return ProbeSample(id=entry.id, source=entry.source, role=entry.role, sample=row, pair=probe.pair_of(entry.id)).to_json()  # type: ignore[arg-type]

        async def forget(entry: Entry) -> None:
            if entry.source == "audit" and not keep_checkpoints:
                await saver.adelete_thread(run.thread_id(entry.id))

        await run_loop.examine(run, entries, examine_one, workers=run_loop.worker_count(examinee, concurrency), on_sample=on_sample,
                               after_append=forget)
    return write_results(run, probe, entries)


def write_results(run: RunDir, probe: ProbeSet, entries: list[Entry]) -> dict[str, Any]:
    """Paired metrics over the finished samples; written atomically to results.json."""
    from ecgtrace.agents.probe.metrics import summarize_probe

    wanted = {e.id for e in entries}
    pairs = [p for p in probe.pairs if p["id"] in wanted or p["status"] == "dropped" and p["original"] in wanted]
    options = probe.n_options()
    return run_loop.write_results(run, entries, lambda rows: summarize_probe(rows, pairs, options), kind="probe",
                                  probe_set={"path": str(probe.root), "counts": probe.manifest.get("counts"), "kinds": probe.manifest.get("kinds")})
