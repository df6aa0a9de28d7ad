"""How the expert labels of each source map onto a diagnosis graph (the ``labels:`` block of its YAML).

Split out of :mod:`ecgtrace.rubrics.diagnosis_schema`, which re-exports
:class:`LabelMap`; the doubt rules (:class:`StatementDoubt`, the LUDB bands)
say where a source's statement does not settle the graph's own definition, so
that the audit drops those windows with a reason instead of scoring them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

__all__ = ["LabelMap", "StatementDoubt", "StrictModel"]


class StrictModel(BaseModel):
    """A YAML model that refuses unknown keys (a misspelt key is an error, never silently ignored)."""

    model_config = ConfigDict(extra="forbid")


class StatementDoubt(StrictModel):
    """Statements beside which a source's positive (or its absence) does not settle the graph's definition (see :class:`LabelMap`)."""

    reason: str = Field(min_length=10)
    scp: list[str] = Field(default_factory=list)
    snomed: list[str] = Field(default_factory=list)
    ludb: list[str] = Field(default_factory=list)


class LabelMap(StrictModel):
    """How expert labels of each source map to this diagnosis (any source may be omitted).

    beat_symbols/min_beats: MIT-BIH style beat symbols (positive when the window
    holds at least ``min_beats`` such beats, or ``min_beat_pct`` % of its beats).
    rhythms: aux rhythm labels; ``rhythm_mode: cover`` is positive when they
    cover >= 80 % of the window, ``contain`` when a whole interval lies inside it
    (short runs such as VT), ``any`` for either; no overlap is negative,
    anything else ambiguous.
    synthetic: schedule event kinds of the synthetic generator.
    scp: PTB-XL SCP codes (likelihood 100 for diagnostic statements, any
    mention for rhythm/form statements; human-validated records only; a
    diagnostic code with a lower likelihood makes the label ambiguous).
    ptbxl_axis: values of PTB-XL's heart_axis column. snomed: CinC #Dx
    codes. ludb: beginnings of LUDB diagnosis lines or of their parts
    (case-insensitive). ``*_ambiguous``: codes or LUDB lines that speak of the
    diagnosis without settling it (a region-free ischemia statement for a
    regional graph): a record with one of them and no positive code is
    ambiguous, its windows dropped with that reason.
    ``ptbxl_axis_ambiguous``: heart_axis values that do not settle the
    graph's threshold (its windows dropped with that reason).
    ``scp_absent_ambiguous``: when set (the reason, as text), a PTB-XL record
    without any of the ``scp`` codes is ambiguous rather than negative (a code
    the database gives only beyond the graph's own threshold).
    ``ludb_rate_doubtful_bpm``: ``[low, high]``: LUDB's rate statements use
    cut-offs other than the graph's; a LUDB record whose rate by LUDB's own
    QRS marks lies in this band is ambiguous either way.
    ``ludb_pr_doubtful_ms``: ``[low, high]``: the same for the PR interval by
    LUDB's own P and QRS onset marks (the cut-off widened by the marks' tolerance).
    ``positive_doubtful_with``: statements (PTB-XL codes, SNOMED codes, LUDB
    line beginnings) that, beside a positive statement of the same source, leave
    it ambiguous: the source describes the underlying rhythm ("sinus
    bradycardia" with premature beats or sinus arrhythmia), the graph the whole
    window (regular RR). Negatives are not touched.
    ``absent_doubtful_with``: the same for negatives: beside these statements
    the source's convention does not apply the graph's criteria (LVH voltage
    criteria with LBBB, ventricular pacing or LAFB), so the diagnosis' absence
    is no negative. Positives are not touched.
    """

    beat_symbols: list[str] = Field(default_factory=list)
    min_beats: int = Field(default=1, ge=1)
    min_beat_pct: float | None = Field(default=None, gt=0, le=100)
    rhythms: list[str] = Field(default_factory=list)
    rhythm_mode: Literal["cover", "contain", "any"] = "cover"
    synthetic: list[str] = Field(default_factory=list)
    scp: list[str] = Field(default_factory=list)
    ptbxl_axis: list[str] = Field(default_factory=list)
    snomed: list[str] = Field(default_factory=list)
    ludb: list[str] = Field(default_factory=list)
    scp_ambiguous: list[str] = Field(default_factory=list)
    snomed_ambiguous: list[str] = Field(default_factory=list)
    ludb_ambiguous: list[str] = Field(default_factory=list)
    ptbxl_axis_ambiguous: list[str] = Field(default_factory=list)
    scp_absent_ambiguous: str | None = None
    ludb_rate_doubtful_bpm: tuple[float, float] | None = None
    ludb_pr_doubtful_ms: tuple[float, float] | None = None
    positive_doubtful_with: StatementDoubt | None = None
    absent_doubtful_with: StatementDoubt | None = None

    @field_validator("ludb_rate_doubtful_bpm", "ludb_pr_doubtful_ms")
    @classmethod
    def _band_ordered(cls, value: tuple[float, float] | None, info: ValidationInfo) -> tuple[float, float] | None:
        if value is not None and not 0 < value[0] < value[1]:
            raise ValueError(f"{info.field_name} must be [low, high] with 0 < low < high, got {list(value)}")
        return value
