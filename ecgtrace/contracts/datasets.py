"""Read a dataset file (``audit.jsonl`` or ``qa.jsonl``) into validated items: one loader for both.

Every line is validated against its contract (:class:`~ecgtrace.contracts.AuditItem`
or :class:`~ecgtrace.contracts.QAItem`); an error names the file, the line and
the field. Ids are unique; the file's SHA-256 is part of a run's identity.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

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


#: Present in a dataset folder while ``ecgtrace build`` writes it (and after a build that failed or was killed):
#: its files are not a dataset yet, so readers refuse the folder until a rerun of the build finishes it.
UNFINISHED_BUILD = ".ecgtrace-build.json"


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
    if (target.parent / UNFINISHED_BUILD).exists():
        raise error(f"{target.parent} holds an unfinished build ({UNFINISHED_BUILD}); run the same `ecgtrace build` command "
                    "again to finish it before using the dataset")
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
            raise error(f"{target}:{number}: {_first_problem(exc)}") from None
        item_id = item.id  # type: ignore[attr-defined]
        if item_id in seen:
            raise error(f"{target}:{number}: duplicate id {item_id!r} (first on line {seen[item_id]})")
        seen[item_id] = number
        items.append(item)
    if not items:
        raise error(f"{target}: no {label} items")
    return ItemSet(kind=kind, path=target, base_dir=target.parent, items=items, sha256=hashlib.sha256(data).hexdigest())


def _first_problem(exc: ValidationError) -> str:
    """``field: message (n problem(s))``; a rule about the whole item names no field and keeps only its message."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    message = first["msg"] if where else first["msg"].removeprefix("Value error, ")
    return f"{where + ': ' if where else ''}{message} ({exc.error_count()} problem(s))"


def kind_of_item(obj: dict[str, Any]) -> str:
    """``audit`` or ``qa``: what a dataset line is, from the ``format`` it declares.

    Format 1 lines declare none; of the two contracts only the audit item has
    reasoning ``loops``, so such a line is an audit item exactly when it has them.
    """
    declared = obj.get("format")
    if isinstance(declared, str):
        for kind in DATASET_KINDS:
            if declared in readable_formats(kind):
                return kind
        raise DatasetFormatError(f"unknown item format {declared!r} (this version reads "
                                 f"{', '.join(f for kind in DATASET_KINDS for f in readable_formats(kind))})")
    return "audit" if "loops" in obj else "qa"


def readable_formats(kind: str) -> tuple[str, ...]:
    """The ``format`` values an item of ``kind`` may declare (the model's ``Literal``; format 1 declares none)."""
    import typing

    return tuple(typing.get_args(DATASET_KINDS[kind][1].model_fields["format"].annotation))


def kind_of_file(path: str | Path) -> str:
    """``audit`` or ``qa``: the kind of the dataset file at ``path``, from its first item (:func:`kind_of_item`)."""
    target = Path(path)
    if not target.is_file():
        raise DatasetFormatError(f"dataset file not found: {target}")
    with open(target, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                raise DatasetFormatError(f"{target}:{number}: not valid JSON") from None
            if not isinstance(obj, dict):
                raise DatasetFormatError(f"{target}:{number}: expected a JSON object")
            return kind_of_item(obj)
    raise DatasetFormatError(f"{target}: no items")
