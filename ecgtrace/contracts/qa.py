"""The QA item: one Holtercare-Bench-style question about a record (a line of ``qa.jsonl``).

The HolterAgent writes these (:mod:`ecgtrace.agents.holter.dataset`); the QA
runner, the shortcut probes and the report read them through
:func:`ecgtrace.contracts.datasets.load_items`. A closed item's ``answer`` is
exactly one of its ``options`` texts (never a letter); ``answer`` is always a
string; timestamps are ms from the recording start.

Format 1 files (no ``format`` field, the rate named ``fs``, the item's finding
under whichever key its writer chose) are still read: :meth:`QAItem._upgrade_v1`
is the one place that knows the old spellings.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ecgtrace.contracts.common import Evidence, Provenance, RecordRef, TimeWindow

QA_ITEM_FORMAT = "ecgtrace-qa-item/2"

AnswerType = Literal["yes_no", "integer", "timestamps_ms", "time_ms", "label", "text", "report_json"]

#: Top-level keys of a QA item, in the order they are written.
QA_FIELDS: tuple[str, ...] = ("format", "id", "split", "task", "template_id", "finding", "record", "window", "question",
                              "options", "answer", "answer_type", "evidence", "modalities", "messages", "provenance")


class ItemAssets(BaseModel):
    """Files that show an item, relative to the folder holding ``qa.jsonl``."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    image: list[str] = Field(default_factory=list)
    video: str | None = None


#: Ready-to-send OpenAI chat messages: ``{"text": [...], "image": [...]}`` (None where absent), or one list.
Messages = dict[str, list[dict[str, Any]] | None] | list[dict[str, Any]] | None


class QAItem(BaseModel):
    """One QA item. ``finding`` names the event kind or diagnosis the item is about (None for HR and reports)."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["ecgtrace-qa-item/2"] = QA_ITEM_FORMAT
    id: str = Field(min_length=1)
    split: str | None = None
    task: str = Field(min_length=1)
    template_id: str | None = None
    finding: str | None = None
    record: RecordRef | None = None
    window: TimeWindow | None = None
    question: str = Field(min_length=1)
    options: list[str] | None = None
    answer: str
    answer_type: AnswerType | None = None
    evidence: list[Evidence] = Field(default_factory=list)
    modalities: ItemAssets = Field(default_factory=ItemAssets)
    messages: Messages = None
    provenance: Provenance | None = None

    @model_validator(mode="before")
    @classmethod
    def _upgrade_v1(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "format" in data:
            return data
        known = {k: v for k, v in data.items() if k in QA_FIELDS}
        if "finding" not in known:
            known["finding"] = _v1_finding(data)
        if not isinstance(known.get("answer"), str) and "answer" in known:
            known["answer"] = json.dumps(known["answer"], sort_keys=True)
        if known.get("modalities") is None:
            known.pop("modalities", None)
        return known

    @model_validator(mode="after")
    def _answer_is_an_option(self) -> QAItem:
        if self.options is not None:
            if len(self.options) < 2:
                raise ValueError("options must be null or a list of at least 2 option texts")
            if len(set(self.options)) != len(self.options):
                raise ValueError(f"duplicate options in {self.options!r}")
            if self.answer not in self.options:
                raise ValueError(f"answer {self.answer!r} is not one of the options")
        return self

    @property
    def closed(self) -> bool:
        return self.options is not None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def _v1_finding(data: dict[str, Any]) -> str | None:
    """Where format-1 writers put an item's event kind or diagnosis."""
    for key in ("finding", "event_kind", "kind", "diagnosis"):
        if isinstance(data.get(key), str):
            return data[key]
    params = (data.get("provenance") or {}).get("params") or {}
    for key in ("event_kind", "kind", "finding"):
        if isinstance(params.get(key), str):
            return params[key]
    if str(data.get("task", "")).endswith("_diagnosis") and isinstance(data.get("answer"), str):
        return data["answer"]
    return None
