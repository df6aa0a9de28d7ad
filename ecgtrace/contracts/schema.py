"""Plain-JSON data models shared by tools, agents, graphs and the CLI.

Everything here serializes to plain JSON (Python ints, floats, strings, lists
and dicts, never numpy scalars), because these objects travel through
LangGraph state and into JSONL files.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ProvenanceSource = Literal["reference", "detected", "synthetic", "computed"]


class Provenance(BaseModel):
    """Where a label or an answer came from.

    ``source`` is ``reference`` for expert annotations shipped with a record,
    ``synthetic`` for the generator's own schedule, ``detected`` for the
    project's detectors and ``computed`` for values derived from those.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: ProvenanceSource
    method: str
    version: str
    params: dict[str, Any] = Field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class RecordRef(BaseModel):
    """A pointer to a record on disk: what QA and audit items carry instead of samples."""

    model_config = ConfigDict(extra="forbid")

    db: str
    id: str
    path: str
    fs: float
    leads: list[str]
    duration_s: float


class TimeWindow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    t0_s: float
    t1_s: float


class Evidence(BaseModel):
    """The part of the signal an answer rests on."""

    model_config = ConfigDict(extra="forbid")

    lead: str | None = None
    t0_ms: int
    t1_ms: int
    beats: list[int] = Field(default_factory=list)
