"""``ecgtrace export holtercare DATASET/ --out FILE.json``: an ecgtrace QA dataset in Holtercare-Bench's format.

Each item becomes ``{"id", "task_type", "qa_pair": {"question", "answer"}, "tag"}``:

* ``id`` is the patient case: an imported item's own case, else the record
  (``db/id``), which all of a record's items share;
* closed questions carry their options inline, lettered ("... A. 2; B. 0;
  C. 3; D. 1") and are answered with letter and text ("D. 1");
* open answers are sentences as Holtercare writes them
  (:func:`ecgtrace.agents.holter.answer_sentences.holtercare_answer`), or an
  imported item's own answer text; reports are prose;
* ``tag`` is the split (ecgtrace's ``dev`` is Holtercare's ``valid``).

Items of a task Holtercare does not have are left out and counted.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from ecgtrace.agents.holter.answer_sentences import holtercare_answer
from ecgtrace.agents.interop._holtercare_items import TASK_MAP
from ecgtrace.contracts.datasets import load_items
from ecgtrace.errors import InteropError
from ecgtrace.jsonio import write_json_atomic

#: ecgtrace task -> Holtercare task type.
TASK_TYPES: dict[str, str] = {task: task_type for task_type, task in TASK_MAP.items()}
#: ecgtrace split -> Holtercare tag.
TAGS: dict[str, str] = {"dev": "valid", "valid": "valid", "train": "train", "test": "test"}


def inline_options(question: str, options: list[str]) -> str:
    """``"How many? A. 2; B. 0; C. 3; D. 1"``."""
    from ecgtrace.agents.exam.messages import option_lines

    return f"{question.rstrip()} {'; '.join(option_lines(options))}"


def _imported(item: dict[str, Any]) -> dict[str, Any] | None:
    prov = item.get("provenance") or {}
    return prov.get("params") if prov.get("source") == "holtercare" else None


def holtercare_row(item: dict[str, Any]) -> dict[str, Any] | None:
    """One QA item as a Holtercare item, or None for a task Holtercare does not have."""
    task_type = TASK_TYPES.get(str(item.get("task")))
    if task_type is None:
        return None
    params = _imported(item)
    options = item.get("options")
    question = inline_options(item["question"], options) if options else item["question"]
    if params is not None and params.get("answer_text"):  # an imported item keeps Holtercare's own wording
        question, answer = params.get("question_text") or question, params["answer_text"]
    else:
        answer = holtercare_answer(item)
    record = item.get("record") or {}
    case = params["case_id"] if params is not None and params.get("case_id") else f"{record.get('db', 'ecgtrace')}/{record.get('id', item['id'])}"
    return {"id": case, "task_type": task_type, "qa_pair": {"question": question, "answer": answer},
            "tag": TAGS.get(str(item.get("split")), item.get("split"))}


def export_holtercare(dataset: str | os.PathLike[str], out_file: str | os.PathLike[str]) -> dict[str, Any]:
    """Write ``dataset``'s QA items to ``out_file`` (a JSON list, in dataset order); returns a summary with a one-line ``line``.

    Raises:
        InteropError: ``out_file`` is a folder or lies inside the dataset folder, or no item has a Holtercare task type.
    """
    qa = load_items(dataset, "qa")
    out = Path(out_file)
    if out.is_dir():
        raise InteropError(f"--out {out} is a folder; give the JSON file to write")
    if qa.base_dir.resolve() in out.resolve().parents or out.resolve() == qa.path.resolve():
        raise InteropError(f"--out {out} lies inside the dataset folder {qa.base_dir}; input folders are never written to")
    rows, skipped = [], Counter()
    for item in qa.items:
        row = holtercare_row(item.to_json())
        if row is None:
            skipped[item.task] += 1
        else:
            rows.append(row)
    if not rows:
        raise InteropError(f"{qa.path}: no item has one of Holtercare's task types")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out, rows)
    left = f"; left out {sum(skipped.values())} item(s) of tasks Holtercare does not have ({', '.join(sorted(skipped))})" if skipped else ""
    return {"n_items": len(rows), "cases": len({r["id"] for r in rows}), "per_task_type": dict(sorted(Counter(r["task_type"] for r in rows).items())),
            "skipped": dict(skipped), "line": f"wrote {len(rows)} Holtercare-Bench items of {len({r['id'] for r in rows})} cases to {out}{left}"}
