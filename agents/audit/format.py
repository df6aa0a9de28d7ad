"""Read ``audit.jsonl``: the reasoning audit's dataset loader.

The item itself is a contract (:class:`ecgtrace.contracts.AuditItem`); this
module is the audit's name for the shared loader
(:func:`ecgtrace.contracts.load_items`).
"""

from __future__ import annotations

from pathlib import Path

from ecgtrace.contracts.audit import DECISION_OPTIONS, YES_NO, AuditItem
from ecgtrace.contracts.datasets import ItemSet, load_items
from ecgtrace.errors import AuditFormatError

#: The items of one audit.jsonl, its folder (for assets) and its content hash.
AuditSet = ItemSet

__all__ = ["DECISION_OPTIONS", "YES_NO", "AuditFormatError", "AuditItem", "AuditSet", "load_audit"]


def load_audit(path: str | Path) -> ItemSet[AuditItem]:
    """Read and validate ``audit.jsonl`` (or the folder holding it).

    Raises:
        AuditFormatError: missing file, a line that is not JSON or not an
            :class:`AuditItem`, or a duplicate ``id`` (message names file and line).
    """
    return load_items(path, "audit")
