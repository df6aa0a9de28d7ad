"""Judge rubrics: the YAML schema an LLM judge scores free-text answers with.

A rubric is data (``rubrics/judges/<id>.yaml``), loaded with
:func:`ecgtrace.rubrics.loading.load_model` (``yaml.safe_load`` semantics, errors
name file, line and field)::

    id: report_summary
    version: "1"
    tasks: [report_summary]            # QA tasks this rubric judges
    instructions: "You grade ..."      # what the judge is told first
    criteria:                          # scored 0-100 each by the judge; weights sum to 1
      - {id: accuracy, weight: 0.5, description: "Numbers agree with the reference ..."}
      - {id: completeness, weight: 0.3, description: "..."}
      - {id: no_hallucination, weight: 0.2, description: "..."}
    bands:                             # cover 0..100 exactly, no gaps, no overlaps
      - {min: 90, max: 100, label: excellent, description: "..."}
      - {min: 70, max: 89, label: good, description: "..."}
      - {min: 40, max: 69, label: partial, description: "..."}
      - {min: 10, max: 39, label: poor, description: "..."}
      - {min: 0, max: 9, label: wrong, description: "..."}

The overall score is computed by ecgtrace as the weighted sum of the criterion
scores (the judge's own total is kept but not trusted); its band is looked up
in ``bands``.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ecgtrace.errors import RubricError
from ecgtrace.rubrics.loading import builtin_dir, load_model


class Criterion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    weight: float = Field(gt=0, le=1)
    description: str = Field(min_length=1)


class Band(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min: int = Field(ge=0, le=100)
    max: int = Field(ge=0, le=100)
    label: str = Field(min_length=1)
    description: str = Field(min_length=1)

    @model_validator(mode="after")
    def _ordered(self) -> Band:
        if self.min > self.max:
            raise ValueError(f"band {self.label!r}: min {self.min} > max {self.max}")
        return self


class JudgeRubric(BaseModel):
    """One judge rubric file."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    version: str
    tasks: list[str] = Field(min_length=1)
    instructions: str = Field(min_length=1)
    criteria: list[Criterion] = Field(min_length=1)
    bands: list[Band] = Field(min_length=2)

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: object) -> object:
        return str(value) if isinstance(value, int | float) else value

    @model_validator(mode="after")
    def _consistent(self) -> JudgeRubric:
        ids = [c.id for c in self.criteria]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate criterion ids in {ids}")
        total = sum(c.weight for c in self.criteria)
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"criterion weights sum to {total:g}, not 1")
        ordered = sorted(self.bands, key=lambda b: b.min)
        if ordered[0].min != 0 or ordered[-1].max != 100:
            raise ValueError("bands must cover 0..100")
        for low, high in zip(ordered, ordered[1:]):
            if high.min != low.max + 1:
                raise ValueError(f"bands {low.label!r} ({low.min}-{low.max}) and {high.label!r} ({high.min}-{high.max}) leave a gap or overlap")
        return self

    def band_of(self, score: float) -> Band:
        """The band holding ``score`` (rounded to an integer, clipped to 0..100)."""
        value = min(100, max(0, int(round(score))))
        return next(b for b in self.bands if b.min <= value <= b.max)


def load_rubric(path: str | os.PathLike[str]) -> JudgeRubric:
    return load_model(path, JudgeRubric)


def builtin_rubrics() -> dict[str, JudgeRubric]:
    """Every built-in rubric keyed by task (a task named twice is an error)."""
    out: dict[str, JudgeRubric] = {}
    for path in sorted(Path(builtin_dir("judges")).glob("*.yaml")):
        rubric = load_rubric(path)
        for task in rubric.tasks:
            if task in out:
                raise RubricError(f"{path}: task {task!r} already judged by rubric {out[task].id!r}")
            out[task] = rubric
    return out
