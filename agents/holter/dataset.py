"""Assemble per-record items into the dataset: splits, balanced options, messages, manifest.

Splits are by record, never by item. Closed questions get their options here:
distractors shuffled with a seeded generator and the answer placed so that
each position is used equally often across the dataset (per option count,
positions are dealt in seeded blocks of ``n``). Every field keeps one JSON
type across rows, so ``datasets.load_dataset("json", ...)`` loads the file.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

from ecgtrace.agents.holter.distractors import place_answer
from ecgtrace.agents.holter.assets import build_messages
from ecgtrace.contracts.qa import QAItem
from ecgtrace.errors import EcgTraceError
from ecgtrace.jsonio import safe_join, write_json_atomic, write_jsonl_atomic

DATASET_VERSION = "1"


def assign_splits(record_keys: list[str], seed: int, dev_fraction: float = 0.2) -> dict[str, str]:
    """``{record key: "test"|"dev"}``: ``round(n * dev_fraction)`` records (chosen by a seeded hash) go to dev, the rest to test."""
    order = sorted(record_keys, key=lambda k: hashlib.sha256(f"{seed}:{k}".encode()).hexdigest())
    n_dev = min(int(round(len(order) * dev_fraction)), len(order) - 1) if order else 0
    return {key: ("dev" if i < n_dev else "test") for i, key in enumerate(order)}


def _option_positions(seed: int) -> Callable[[int], int]:
    """Answer positions per option count, dealt in seeded shuffled blocks so each position is used equally often."""
    rng = random.Random(f"{seed}:options")
    dealt: dict[int, list[int]] = {}

    def deal(n: int) -> int:
        if not dealt.get(n):
            block = list(range(n))
            rng.shuffle(block)
            dealt[n] = block
        return dealt[n].pop()

    return deal


def finalize(items: list[dict[str, Any]], out_dir: str | os.PathLike[str], *, seed: int, dev_fraction: float = 0.2) -> list[dict[str, Any]]:
    """Items in id order with split, options and messages, validated as :class:`~ecgtrace.contracts.QAItem`; working keys removed."""
    items = sorted(items, key=lambda it: it["id"])
    duplicates = sorted({a["id"] for a, b in zip(items, items[1:]) if a["id"] == b["id"]})
    if duplicates:
        raise EcgTraceError(f"two records give the same item id {duplicates[0]!r}: records need distinct folder/name pairs")
    splits = assign_splits(sorted({f"{it['record']['db']}/{it['record']['id']}" for it in items}), seed, dev_fraction)
    position = _option_positions(seed)
    out = []
    for item in items:
        row = {k: v for k, v in item.items() if not k.startswith("_")}
        row["split"] = splits[f"{item['record']['db']}/{item['record']['id']}"]
        row["options"] = None
        if item["_format"] == "closed":
            n = len(item["_distractors"]) + 1
            row["options"] = place_answer(item["answer"], item["_distractors"], position(n), random.Random(f"{seed}:{item['id']}"))
        row["modalities"] = item.get("modalities") or {"text": None, "image": [], "video": None}
        row["messages"] = build_messages(row, out_dir, item.get("_context_text"))
        out.append(QAItem.model_validate(row).to_json())
    return out


def write_dataset(items: list[dict[str, Any]], dropped: list[dict[str, Any]], records: list[dict[str, Any]], out_dir: str | os.PathLike[str], *,
                  seed: int, versions: dict[str, Any], dev_fraction: float = 0.2) -> dict[str, Any]:
    """Write ``qa.jsonl``, ``dropped.jsonl`` and ``manifest.json``; return the manifest."""
    rows = finalize(items, out_dir, seed=seed, dev_fraction=dev_fraction)
    write_jsonl_atomic(safe_join(out_dir, "qa.jsonl"), rows)
    write_jsonl_atomic(safe_join(out_dir, "dropped.jsonl"), sorted(dropped, key=lambda d: d["id"]))
    per_task: Counter[str] = Counter(r["task"] for r in rows)
    per_split: Counter[str] = Counter(r["split"] for r in rows)
    positions: Counter[str] = Counter(f"{len(r['options'])}:{r['options'].index(r['answer'])}" for r in rows if r["options"])
    manifest = {
        "dataset_version": DATASET_VERSION,
        "seed": seed,
        "records": sorted(({"db": r["db"], "id": r["id"], "path": r["path"], "sha256": r["hash"], "annotation_source": r.get("source")} for r in records),
                          key=lambda r: (r["db"], r["id"])),
        "versions": versions,
        "counts": {"items": len(rows), "per_task": dict(sorted(per_task.items())), "per_split": dict(sorted(per_split.items())),
                   "per_task_and_split": dict(sorted(Counter(f"{r['task']}/{r['split']}" for r in rows).items())),
                   "answer_positions": dict(sorted(positions.items())), "dropped": len(dropped),
                   "dropped_reasons": dict(sorted(Counter(d["reason"].split(":")[0] for d in dropped).items()))},
    }
    from ecgtrace.agents.exam.text_sizes import text_token_table

    manifest["text_tokens"] = text_token_table(rows, out_dir, has_text=lambda r: bool((r.get("modalities") or {}).get("text")))
    write_json_atomic(safe_join(out_dir, "manifest.json"), manifest)
    return manifest
