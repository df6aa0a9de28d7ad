"""Read a dataset file (``audit.jsonl`` or ``qa.jsonl``) into validated items: one loader for both.

Every line is validated against its contract (:class:`~ecgtrace.contracts.AuditItem`
or :class:`~ecgtrace.contracts.QAItem`); an error names the file, the line and
the field. Ids are unique; the file's SHA-256 is part of a run's identity.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel, ValidationError

from ecgtrace.contracts.audit import AuditItem
from ecgtrace.contracts.qa import QAItem
from ecgtrace.errors import AuditFormatError, DatasetFormatError, QAFormatError
from ecgtrace.jsonio import jsonl_records

ItemT = TypeVar("ItemT", bound=BaseModel)

#: ``kind: (default file name, item model, error class, what the file is called in messages)``
DATASET_KINDS: dict[str, tuple[str, type[BaseModel], type[DatasetFormatError], str]] = {
    "audit": ("audit.jsonl", AuditItem, AuditFormatError, "audit"),
    "qa": ("qa.jsonl", QAItem, QAFormatError, "QA"),
}


@dataclass(frozen=True)
class ItemSet(Generic[ItemT]):
    """The items of one dataset file, its folder (asset paths are relative to it) and its content hash."""

    kind: str
    path: Path
    base_dir: Path
    items: list[ItemT]
    sha256: str


def dataset_file(path: str | Path, kind: str) -> Path:
    """The dataset file of ``kind`` at ``path`` (a file, or the folder holding it)."""
    target = Path(path)
    return target / DATASET_KINDS[kind][0] if target.is_dir() else target


def load_items(path: str | Path, kind: str) -> ItemSet:
    """Read and validate a dataset file of ``kind`` (``audit`` or ``qa``).

    Raises:
        AuditFormatError / QAFormatError: missing file, a line that is not JSON
            or does not follow the contract, a duplicate ``id``, no items.
    """
    _, model, error, label = DATASET_KINDS[kind]
    target = dataset_file(path, kind)
    if not target.is_file():
        raise error(f"{label} file not found: {target}")
    data = target.read_bytes()
    items: list[BaseModel] = []
    seen: dict[str, int] = {}
    for number, obj in jsonl_records(data, target, error):
        if not isinstance(obj, dict):
            raise error(f"{target}:{number}: expected a JSON object")
        try:
            item = model.model_validate(obj)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "item"
            raise error(f"{target}:{number}: {where}: {first['msg']} ({exc.error_count()} problem(s))") from None
        item_id = item.id  # type: ignore[attr-defined]
        if item_id in seen:
            raise error(f"{target}:{number}: duplicate id {item_id!r} (first on line {seen[item_id]})")
        seen[item_id] = number
        items.append(item)
    if not items:
        raise error(f"{target}: no {label} items")
    return ItemSet(kind=kind, path=target, base_dir=target.parent, items=items, sha256=hashlib.sha256(data).hexdigest())
