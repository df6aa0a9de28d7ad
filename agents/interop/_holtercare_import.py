"""``ecgtrace import holtercare FILE.json --out DATASET/``: Holtercare-Bench items as an ecgtrace QA dataset.

Items are read in file order (:mod:`ecgtrace.agents.interop._holtercare_items`).
Holtercare's ``id`` is the patient case that all of a case's items share: each
item gets the unique id ``holtercare-<case>-<k>`` (``k`` counts the case's
items in file order) and keeps the case in ``provenance.params.case_id``.
Holtercare publishes no signals: an imported item has ``record: null``, no
assets, and says so in ``provenance.params.signal``; it can be scored from
answers a model already gave (``ecgtrace qa-eval DATASET --answers FILE``),
not asked. The output folder gets ``qa.jsonl``, ``rejected.jsonl`` (index,
case, task type, code, reason and question text of every item left out, so
that answers to them can be recognised and left out when scoring) and ``manifest.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from ecgtrace.agents.interop._holtercare_items import Rejected, read_item
from ecgtrace.contracts.common import provenance
from ecgtrace.contracts.qa import QAItem
from ecgtrace.errors import InteropError
from ecgtrace.jsonio import safe_join, write_json_atomic, write_jsonl_atomic

IMPORT_VERSION = "1"
METHOD = "ecgtrace.agents.interop.holtercare:import"
NO_SIGNAL = "none: Holtercare-Bench releases its QA text without the Holter signals; score answers with qa-eval --answers"


def read_source(path: Path) -> list[Any]:
    """The items of a Holtercare file: a JSON list (as released) or JSON Lines, in file order."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InteropError(f"{path}: not UTF-8 text, so not a Holtercare-Bench JSON file") from None
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InteropError(f"{path}: not valid JSON ({exc})") from None
        return list(data)
    items = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                items.append(json.loads(line))
            except ValueError:
                raise InteropError(f"{path}:{number}: not valid JSON; a Holtercare file is a JSON list or JSON Lines") from None
    if not items:
        raise InteropError(f"{path}: no items")
    return items


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "case"


def _check_out(out: Path, src: Path) -> None:
    if out.exists() and not out.is_dir():
        raise InteropError(f"--out {out} exists and is not a folder")
    if src.resolve().parent == out.resolve() and src.name in ("qa.jsonl", "rejected.jsonl", "manifest.json"):
        raise InteropError(f"--out {out} would overwrite the input file {src}")


def import_holtercare(source: str | os.PathLike[str], out_dir: str | os.PathLike[str], *, release: str | None = None,
                      limit: int | None = None) -> dict[str, Any]:
    """Import a Holtercare-Bench file into ``out_dir``; returns the summary (also ``manifest.json``), with a one-line ``line``.

    Raises:
        InteropError: the file is missing, is not JSON, or no item could be imported.
    """
    src, out = Path(source), Path(out_dir)
    if not src.is_file():
        raise InteropError(f"{src}: no such file")
    _check_out(out, src)
    raw = read_source(src)
    raw = raw[:limit] if limit else raw
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    per_case: Counter[str] = Counter()
    items, rejected = [], []
    for index, obj in enumerate(raw):
        case = str(obj.get("id")) if isinstance(obj, dict) else None
        pair = obj.get("qa_pair") if isinstance(obj, dict) else None
        asked = pair.get("question") if isinstance(pair, dict) and isinstance(pair.get("question"), str) else None
        try:
            read = read_item(obj)
            item_id = f"holtercare-{_slug(read.case_id)}-{per_case[read.case_id]:03d}"
            params = {**read.params, "index": index, "file_sha256": digest, "release": release, "signal": NO_SIGNAL}
            item = QAItem(id=item_id, split=read.split, task=read.task, template_id=f"holtercare:{read.task_type}", finding=read.finding,
                          record=None, window=None, question=read.question, options=read.options, answer=read.answer,
                          answer_type=read.answer_type, provenance=provenance("holtercare", METHOD, IMPORT_VERSION, params))  # type: ignore[arg-type]
        except Rejected as exc:
            rejected.append({"index": index, "case_id": case, "task_type": obj.get("task_type") if isinstance(obj, dict) else None,
                             "code": exc.code, "reason": str(exc), "question": asked})
            continue
        except ValueError as exc:  # the item contract refused it (pydantic's ValidationError is a ValueError)
            rejected.append({"index": index, "case_id": case, "task_type": obj.get("task_type"), "code": "malformed",
                             "reason": str(exc).splitlines()[0][:300], "question": asked})
            continue
        per_case[read.case_id] += 1
        items.append(item.to_json())
    if not items:
        reasons = Counter(r["code"] for r in rejected)
        raise InteropError(f"{src}: no item could be imported ({', '.join(f'{n} {c}' for c, n in sorted(reasons.items()))})")
    return _write(out, src, digest, items, rejected, len(raw), release)


def _write(out: Path, src: Path, digest: str, items: list[dict[str, Any]], rejected: list[dict[str, Any]], n_read: int,
           release: str | None) -> dict[str, Any]:
    write_jsonl_atomic(safe_join(out, "qa.jsonl"), items)
    write_jsonl_atomic(safe_join(out, "rejected.jsonl"), rejected)
    codes = Counter(r["code"] for r in rejected)
    summary = {"source": str(src), "source_sha256": digest, "release": release, "n_read": n_read, "n_items": len(items),
               "n_rejected": len(rejected), "rejected_by_code": dict(sorted(codes.items())),
               "cases": len({i["provenance"]["params"]["case_id"] for i in items}),
               "per_task": dict(sorted(Counter(i["task"] for i in items).items())),
               "per_split": dict(sorted(Counter(str(i["split"]) for i in items).items())),
               "provenance": provenance("computed", METHOD, IMPORT_VERSION, {"release": release})}
    write_json_atomic(safe_join(out, "manifest.json"), summary)
    why = f" ({len(rejected)} rejected: {', '.join(f'{n} {c}' for c, n in sorted(codes.items()))}; see {out / 'rejected.jsonl'})" if rejected else ""
    return {**summary, "line": f"imported {len(items)} Holtercare-Bench items of {summary['cases']} cases into {out / 'qa.jsonl'}{why}"}
