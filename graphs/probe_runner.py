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
from ecgtrace.agents.exam.budget import PromptBudget
from ecgtrace.agents.exam.examinees import Examinee
from ecgtrace.contracts.probe import ProbeSample
from ecgtrace.contracts.runs import item_id_of
from ecgtrace.graphs.audit_runner import _run_sample, sqlite_checkpointer
from ecgtrace.graphs.reasoning_audit import AuditContext, build_graph
from ecgtrace.runlog import RunDir
from ecgtrace.tools.text_encodings import RAW, TextEncoding


@dataclass(frozen=True)
class Entry:
    """One item a probe run examines."""

    id: str
    source: str  # audit | qa
    role: str  # original | counterfactual
    item: Any  # AuditItem | QAItem
    group: str = ""  # the pair's group (diagnosis, QA task and finding): the stratum of --limit


@dataclass(frozen=True)
class ProbeSet:
    """A loaded probe set: its folder, pairs, and items by source."""

    root: Path
    manifest: dict[str, Any]
    pairs: list[dict[str, Any]]
    audit: list[Any]
    qa: list[Any]

    def originals(self) -> list[Entry]:
        """The originals with a kept counterfactual, in pair order (what ``--limit`` and ``--sample-id`` choose from)."""
        kept = [p for p in self.pairs if p["status"] == "kept"]
        groups = {p["original"]: p["group"] for p in kept}
        order = list(dict.fromkeys(p["original"] for p in kept))
        by_id = {it.id: (source, it) for source, items in (("audit", self.audit), ("qa", self.qa)) for it in items}
        return [Entry(oid, by_id[oid][0], "original", by_id[oid][1], groups[oid]) for oid in order if oid in by_id]

    def entries(self, limit: int | None = None, chosen: list[Entry] | None = None) -> list[Entry]:
        """Originals and their counterfactuals, in item order.

        ``chosen``: these originals (:func:`select_originals`); else the first ``limit`` of :meth:`originals`.
        """
        kept = [p for p in self.pairs if p["status"] == "kept"]
        picked = chosen if chosen is not None else self.originals()[: limit or None]
        ids = {e.id for e in picked}
        wanted = ids | {p["id"] for p in kept if p["original"] in ids}
        cf_ids = {p["id"] for p in kept}
        out = []
        for source, items in (("audit", self.audit), ("qa", self.qa)):
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


def select_originals(probe: ProbeSet, *, seed: int = 0, limit: int | None = None, sample_ids: list[str] | None = None) -> list[Entry]:
    """The originals a run asks (with all their counterfactuals): ``sample_ids``, then ``limit`` stratified by group (seeded).

    The run controls of ``audit`` and ``qa-eval`` (:func:`ecgtrace.agents.exam.run_control.select_items`): a
    larger ``limit`` keeps every original a smaller one chose, so a run folder grows. A counterfactual's id
    picks its original.
    """
    from ecgtrace.agents.exam.run_control import select_items

    to_original = {p["id"]: p["original"] for p in probe.pairs if p["status"] == "kept"}
    ids = list(dict.fromkeys(to_original.get(sid, sid) for sid in sample_ids)) if sample_ids else None
    return select_items(probe.originals(), stratum_of=lambda e: e.group, id_of=lambda e: e.id, seed=seed, limit=limit, sample_ids=ids)


async def run_probe(probe: ProbeSet, run: RunDir, examinee: Examinee, *, mode: str = "teacher", modality: str = "text", concurrency: int = 8,
                    limit: int | None = None, on_sample: Callable[[dict[str, Any]], None] | None = None,
                    ask_human: Callable[[dict[str, Any]], str] | None = None, keep_checkpoints: bool = False,
                    entries: list[Entry] | None = None, encoding: TextEncoding = RAW, budget: PromptBudget | None = None,
                    epochs: int = 1, seed: int = 0, pricing: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:
    """Run (or resume) the probe; returns the results written to ``results.json``.

    ``entries`` (default: :meth:`ProbeSet.entries` of ``limit``) are asked ``epochs`` times, options shuffled
    from epoch 1 on (seeded by ``seed``), the ECG as text in ``encoding``; a sample whose request would not fit
    ``budget`` is skipped with its reason, as in an audit. ``pricing``: USD per 1M tokens, for ``results["usage"]``.
    """
    from ecgtrace.agents.exam.qa_runner import run_one

    entries = entries if entries is not None else probe.entries(limit)
    base_dir = str(probe.root)
    run_cfg = {"mode": mode, "modality": modality, "base_dir": base_dir, "text": encoding.to_json(), "seed": int(seed)}
    context = AuditContext(examinee=examinee, base_dir=base_dir, budget=budget)
    async with sqlite_checkpointer(run.checkpoint_path) as saver:
        graph = build_graph(checkpointer=saver)

        async def examine_one(unit: run_loop.EpochUnit[Entry]) -> dict[str, Any]:
            entry, epoch = unit.item, unit.epoch
            if entry.source == "audit":
                row = await _run_sample(graph, run, entry.item, epoch, run_cfg, context, ask_human)
            else:
                row = await run_one(entry.item, probe.root, examinee, modality, ask_human=ask_human, encoding=encoding, budget=budget,
                                    epoch=epoch, seed=seed)
            return ProbeSample(id=unit.id, epoch=epoch, source=entry.source, role=entry.role, sample=row,  # type: ignore[arg-type]
                               pair=probe.pair_of(entry.id)).to_json()

        async def forget(unit: run_loop.EpochUnit[Entry]) -> None:
            if unit.item.source == "audit" and not keep_checkpoints:
                await saver.adelete_thread(run.thread_id(unit.id))

        await run_loop.examine(run, run_loop.epoch_units(entries, epochs), examine_one, workers=run_loop.worker_count(examinee, concurrency),
                               on_sample=on_sample, after_append=forget)
    models = {"examinee": (run.header.get("identity") or {}).get("model") or getattr(examinee, "name", None)}
    return write_results(run, probe, entries, epochs=epochs, models=models, pricing=pricing, budget=budget.to_json() if budget else None)


HEADLINE = ("sensitivity", "grounded_accuracy", "localization_follow", "invariance")


def write_results(run: RunDir, probe: ProbeSet, entries: list[Entry], *, epochs: int = 1, models: dict[str, str | None] | None = None,
                  pricing: dict[str, dict[str, float]] | None = None, budget: dict[str, Any] | None = None) -> dict[str, Any]:
    """Paired metrics over the finished samples of epoch 0, the epochs reduced, tokens and cost; written atomically to results.json.

    A pair is made of two samples of the same epoch. Samples not asked (token budget, text encoding) are
    counted in ``skipped`` and pair with nothing.
    """
    from collections import Counter

    from ecgtrace.agents.exam.run_control import epoch_summary, usage_summary
    from ecgtrace.agents.probe.metrics import summarize_probe

    wanted = {e.id for e in entries}
    pairs = [p for p in probe.pairs if p["id"] in wanted or p["status"] == "dropped" and p["original"] in wanted]
    options = probe.n_options()
    epochs = max(1, int(epochs))
    rows = [r for r in run.samples() if item_id_of(r) in wanted and int(r.get("epoch") or 0) < epochs]

    def metrics(of: list[dict[str, Any]]) -> dict[str, Any]:  # rows of one epoch, paired by item id
        return summarize_probe([{**r, "id": item_id_of(r)} for r in of if not r["sample"].get("skipped")], pairs, options)

    first = [r for r in rows if not r.get("epoch")]
    skipped = [r for r in first if r["sample"].get("skipped")]
    results = {"kind": "probe", "probe_set": {"path": str(probe.root), "counts": probe.manifest.get("counts"), "kinds": probe.manifest.get("kinds")},
               "run_id": run.run_id, "n_items": len(entries), "n_finished": len(first), "n_answered": len(first) - len(skipped),
               "complete": len(rows) == len(entries) * epochs, **metrics(first)}
    results["skipped"] = {"n": len(skipped), "by_kind": dict(sorted(Counter(r["sample"]["skipped"]["kind"] for r in skipped).items())),
                          "ids": sorted(r["id"] for r in skipped), "budget": budget}
    inner = [r["sample"] for r in rows if not r["sample"].get("skipped")]
    if epochs > 1:
        by_id = {r["id"]: r for r in rows}

        def headline(samples: list[dict[str, Any]]) -> dict[str, float | None]:
            overall = metrics([by_id[s["id"]] for s in samples])["overall"]
            return {name: overall[name]["value"] for name in HEADLINE}

        results["epochs"] = epoch_summary(inner, epochs, headline)
    results["usage"] = usage_summary(inner, models or {}, pricing)
    run.write_results(results)
    return results
