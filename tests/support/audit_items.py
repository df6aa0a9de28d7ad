"""Programmatic audit items (valid :class:`AuditItem` JSON) for tests and benchmarks.

Every item has a distinct window, so the mock server's oracle can tell items
apart even though question texts repeat. Answers are drawn with a seeded RNG.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from ecgtrace.agents.audit.format import DECISION_OPTIONS, AuditItem

DIAGNOSES = ("af", "avb1", "brady")
LEADS = ["MLII", "V1", "V5"]
CRITERIA = ["Irregularly irregular RR intervals", "PR interval > 200 ms", "QRS duration > 120 ms",
            "Heart rate < 60 bpm", "Absent P waves", "ST elevation > 0.1 mV"]


def make_item(index: int, rng: random.Random, *, loops: int | None = None, text_asset: bool = True) -> dict[str, Any]:
    diagnosis = DIAGNOSES[index % len(DIAGNOSES)]
    label = rng.random() < 0.5
    t0 = 10.0 * index
    n_loops = loops if loops is not None else rng.choice((1, 2))
    loop_list = []
    for n in range(n_loops):
        options = rng.sample(CRITERIA, 5)
        last = n == n_loops - 1
        waves = [f"[{t0 + k:.2f}s - {t0 + k + 0.19:.2f}s]" for k in range(4)]
        bins = [f"[{b}-{b + 10}] ms" for b in (160, 180, 200, 240)]
        leads = rng.sample(LEADS, rng.randint(1, 3))
        loop_list.append({
            "criterion": {"question": f"Which criterion supports {diagnosis} (step {n + 1})?", "options": options, "answer": rng.choice(options)},
            "finding": {"question": f"Is finding {n + 1} for {diagnosis} present?", "options": ["Yes", "No"], "answer": rng.choice(["Yes", "No"])},
            "grounding": [
                {"kind": "lead", "question": f"In which lead(s) is finding {n + 1} visible?", "options": list(LEADS),
                 "answer": [lead for lead in LEADS if lead in leads], "multi": True},
                {"kind": "wave", "question": f"Where is the wave of finding {n + 1}?", "options": waves, "answer": rng.choice(waves), "multi": False},
                {"kind": "measurement", "question": f"What is the interval of finding {n + 1}?", "options": bins, "answer": rng.choice(bins), "multi": False},
            ],
            "decision": {"question": f"Can you diagnose {diagnosis} now?", "options": list(DECISION_OPTIONS),
                         "answer": ("Yes" if label else "No") if last else DECISION_OPTIONS[2]},
        })
    item_id = f"{diagnosis}-{index:04d}"
    item = {
        "id": item_id,
        "record": {"db": "synthetic", "id": "holter", "path": "synth/holter", "fs": 250.0, "leads": list(LEADS), "duration_s": 86400.0},
        "window": {"t0_s": t0, "t1_s": t0 + 10.0},
        "diagnosis": diagnosis, "label": label, "path_id": f"{diagnosis}/p{n_loops}",
        "initial": {"question": f"Does this ECG show {diagnosis}?", "options": ["Yes", "No"], "answer": "Yes" if label else "No"},
        "loops": loop_list,
        "assets": {"image": None, "text": f"assets/{item_id}.txt" if text_asset else None},
        "provenance": {"source": "synthetic", "method": "tests.support.audit_items", "version": "1", "params": {"index": index}},
    }
    AuditItem.model_validate(item)
    return item


def write_audit(out_dir: str | Path, n: int, *, seed: int = 0, loops: int | None = None) -> Path:
    """Write ``out_dir/audit.jsonl`` with ``n`` items and a small text asset each; returns the file."""
    out = Path(out_dir)
    (out / "assets").mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    items = [make_item(i, rng, loops=loops) for i in range(n)]
    for item in items:
        (out / item["assets"]["text"]).write_text("time_s,MLII_mV\n0.000,0.010\n0.004,0.012\n", encoding="utf-8")
    path = out / "audit.jsonl"
    path.write_text("".join(json.dumps(item, sort_keys=True) + "\n" for item in items), encoding="utf-8")
    return path
