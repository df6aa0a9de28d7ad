"""Typed contracts: the data shapes that cross ecgtrace's layers, as versioned pydantic models.

Writers build these models; readers validate them. Graph state stays plain
JSON (the checkpointer needs it) and is produced from and parsed into these
models at the node boundary. The vocabularies every layer shares (event
kinds, rhythm notes, modalities, stages) live in :mod:`ecgtrace.contracts.vocabulary`.

This package is the floor of the import order: it imports nothing of
ecgtrace but :mod:`ecgtrace.errors` and :mod:`ecgtrace.jsonio`.
"""

from __future__ import annotations

import importlib
from typing import Any

# Lazy, like ``ecgtrace``'s own API: importing the vocabulary (which the CLI's
# command modules do at start-up) must not pay for pydantic.
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("AUDIT_ITEM_FORMAT", "DECISION_OPTIONS", "YES_NO", "Assets", "AuditItem", "Grounding", "Loop", "Question"),
                    "ecgtrace.contracts.audit"),
    **dict.fromkeys(("Evidence", "Provenance", "ProvenanceSource", "RecordRef", "TimeWindow", "provenance"), "ecgtrace.contracts.common"),
    **dict.fromkeys(("ItemSet", "dataset_file", "load_items"), "ecgtrace.contracts.datasets"),
    **dict.fromkeys(("QA_FIELDS", "QA_ITEM_FORMAT", "ItemAssets", "QAItem"), "ecgtrace.contracts.qa"),
    **dict.fromkeys(("RUN_FORMAT", "AuditSample", "QASample", "RunHeader", "SkipRecord", "TurnRow", "answered", "item_id_of", "sample_key",
                     "sample_model"), "ecgtrace.contracts.runs"),
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ecgtrace.contracts' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
