"""Plain-JSON models shared by every contract: provenance, record references, windows, evidence.

Everything here serializes to plain JSON (Python ints, floats, strings, lists
and dicts, never numpy scalars), because these objects travel through
LangGraph state and into JSONL files.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: ``reference`` expert annotations, ``synthetic`` the generator's schedule, ``detected`` the project's
#: detectors, ``computed`` values derived from those; ``erb`` / ``holtercare`` items imported from a benchmark.
ProvenanceSource = Literal["reference", "detected", "synthetic", "computed", "erb", "holtercare"]


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


def provenance(source: str, method: str, version: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A validated provenance record as plain JSON: ``{source, method, version, params}``.

    The one way writers build provenance, so a misspelt source or a missing
    version fails where it is written, not where it is read.
    """
    return Provenance(source=source, method=method, version=str(version), params=dict(params or {})).to_json()  # type: ignore[arg-type]


class RecordRef(BaseModel):
    """A pointer to a record on disk: what QA and audit items carry instead of samples."""

    model_config = ConfigDict(extra="forbid")

    db: str
    id: str
    path: str
    fs_hz: float = Field(gt=0)
    leads: list[str]
    duration_s: float = Field(ge=0)

    @model_validator(mode="before")
    @classmethod
    def _v1_fs(cls, data: Any) -> Any:
        """Items written before format 2 named the rate ``fs``."""
        if isinstance(data, dict) and "fs" in data and "fs_hz" not in data:
            data = {("fs_hz" if k == "fs" else k): v for k, v in data.items()}
        return data

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class TimeWindow(BaseModel):
    """A window of a record, in seconds from the record start."""

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
