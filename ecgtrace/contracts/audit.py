"""The audit item: one multi-turn reasoning examination of one ECG window (a line of ``audit.jsonl``).

The audit-item builder (:mod:`ecgtrace.agents.audit.builder`) builds these;
the reasoning audit reads them through :func:`ecgtrace.contracts.datasets.load_items`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ecgtrace.contracts.common import Provenance, RecordRef, TimeWindow

#: Written as the first field of every audit item; files without it are format 1 (rate named ``fs``).
AUDIT_ITEM_FORMAT = "ecgtrace-audit-item/3"
#: Item formats this version reads (format 1 declares none). Format 3 widened format 2 (every format-2
#: item is a valid format-3 item): the initial question may offer an abstention beside Yes and No
#: (ERB's older files: "I don't know"), finding and decision options may come in any order, and
#: option texts are kept verbatim (lead options such as "Lead V1" beside "V1").
READABLE_AUDIT_FORMATS: tuple[str, ...] = ("ecgtrace-audit-item/2", AUDIT_ITEM_FORMAT)
#: The three options of every decision question, in the order ecgtrace asks them.
DECISION_OPTIONS: tuple[str, str, str] = ("Yes", "No", "Further findings are required to confirm the diagnosis")
YES_NO: tuple[str, str] = ("Yes", "No")


class Question(BaseModel):
    """A closed single-answer question: ``answer`` is one of ``options`` (exact text)."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1)
    options: list[str] = Field(min_length=2)
    answer: str

    @model_validator(mode="after")
    def _answer_is_an_option(self) -> Question:
        if len(set(self.options)) != len(self.options):
            raise ValueError(f"duplicate options in {self.options!r}")
        if self.answer not in self.options:
            raise ValueError(f"answer {self.answer!r} is not one of the options {self.options!r}")
        return self


class Grounding(BaseModel):
    """A localization question: which lead(s), which time range, which measurement bin.

    ``multi`` questions (lead grounding) take a non-empty list of option texts as
    ``answer`` and are scored as an exact set; the others take one option text.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["lead", "wave", "measurement"]
    question: str = Field(min_length=1)
    options: list[str] = Field(min_length=2)
    answer: str | list[str]
    multi: bool = False

    @model_validator(mode="after")
    def _answer_matches_options(self) -> Grounding:
        if len(set(self.options)) != len(self.options):
            raise ValueError(f"duplicate options in {self.options!r}")
        if self.multi:
            if not isinstance(self.answer, list) or not self.answer:
                raise ValueError("a multi-select grounding answer must be a non-empty list of option texts")
            if len(set(self.answer)) != len(self.answer):
                raise ValueError(f"duplicate answers in {self.answer!r}")
            missing = [a for a in self.answer if a not in self.options]
        else:
            if not isinstance(self.answer, str):
                raise ValueError("a single-answer grounding question needs a string answer (set multi: true for a list)")
            missing = [] if self.answer in self.options else [self.answer]
        if missing:
            raise ValueError(f"answer(s) {missing!r} not among the options {self.options!r}")
        return self


class Loop(BaseModel):
    """One finding on the ground-truth path: criterion -> finding -> grounding -> decision."""

    model_config = ConfigDict(extra="forbid")

    criterion: Question
    finding: Question
    grounding: list[Grounding] = Field(default_factory=list)
    decision: Question

    @model_validator(mode="after")
    def _fixed_option_sets(self) -> Loop:
        if sorted(self.finding.options) != sorted(YES_NO):
            raise ValueError(f"finding options must be {list(YES_NO)!r} (in any order)")
        if sorted(self.decision.options) != sorted(DECISION_OPTIONS):
            raise ValueError(f"decision options must be {list(DECISION_OPTIONS)!r} (in any order)")
        return self


class Assets(BaseModel):
    """Files that show the examinee the ECG window, relative to the audit.jsonl folder."""

    model_config = ConfigDict(extra="forbid")

    image: str | None = None
    text: str | None = None


class AuditItem(BaseModel):
    """One reasoning-audit sample (one line of ``audit.jsonl``).

    Format (JSON, one object per line; unknown keys are rejected)::

        {"format": "ecgtrace-audit-item/3",                              # format 2 files are read too; format 1 has none
         "id": str (unique in the file),
         "record": {"db", "id", "path", "fs_hz", "leads", "duration_s"}, # ecgtrace.contracts.RecordRef (format 1: "fs")
         "window": {"t0_s", "t1_s"} | null,                              # seconds from record start
         "diagnosis": str (e.g. "af"), "label": bool (diagnosis present), "path_id": str,
         "initial": {"question", "options": ["Yes", "No", ...], "answer": "Yes" | "No"},
         "loops": [                                                      # >= 1, in asking order
           {"criterion": {"question", "options": [5 texts], "answer"},
            "finding":   {"question", "options": ["Yes", "No"] (any order), "answer"},
            "grounding": [{"kind": "lead" | "wave" | "measurement", "question",
                           "options": [...], "answer": str | [str, ...], "multi": bool}],
            "decision":  {"question",
                          "options": ["Yes", "No", "Further findings are required to confirm the diagnosis"] (any order),
                          "answer"}}],
         "assets": {"image": "assets/<id>.png" | null, "text": "assets/<id>.txt" | null},
         "provenance": {"source", "method", "version", "params"}}       # ecgtrace.contracts.Provenance

    Every ``answer`` is the exact text of one option (a list of option texts for
    ``multi`` grounding, scored as an exact set). Wave options read like
    ``"[5.62s - 5.81s]"`` (or, for a dropped beat, ``"[6th QRS wave - 7th QRS wave]"``),
    measurement options like ``"[200-210] ms"`` or ERB's ``"[230ms - 240ms]"`` and
    ``"Above 240ms"``, lead options are lead names (``"II"``, ``"V1"``) or ERB's
    ``"Lead V1"`` (:func:`ecgtrace.contracts.vocabulary.lead_of_option` reads either).
    Texts are scored exactly as written. Criterion questions conventionally have 5
    options (not enforced); finding and decision option sets are fixed
    (:data:`YES_NO`, :data:`DECISION_OPTIONS`, in any order); the initial question
    offers Yes and No and may offer an abstention besides (its answer is Yes or No).
    Asset paths are relative to the folder holding ``audit.jsonl`` and may not leave it.
    """

    model_config = ConfigDict(extra="forbid")

    format: Literal["ecgtrace-audit-item/2", "ecgtrace-audit-item/3"] = AUDIT_ITEM_FORMAT
    id: str = Field(min_length=1)
    record: RecordRef
    window: TimeWindow | None = None
    diagnosis: str = Field(min_length=1)
    label: bool
    path_id: str
    initial: Question
    loops: list[Loop] = Field(min_length=1)
    assets: Assets = Field(default_factory=Assets)
    provenance: Provenance

    @model_validator(mode="after")
    def _initial_is_yes_no(self) -> AuditItem:
        if not set(YES_NO) <= set(self.initial.options) or self.initial.answer not in YES_NO:
            raise ValueError(f"initial options must include {list(YES_NO)!r} and the answer be one of them")
        if self.format == READABLE_AUDIT_FORMATS[0]:  # a format-2 item keeps format 2's fixed option lists
            fixed = [("initial", self.initial.options, YES_NO)] + [
                (f"loops.{n}.{name}", getattr(loop, name).options, want)
                for n, loop in enumerate(self.loops) for name, want in (("finding", YES_NO), ("decision", DECISION_OPTIONS))]
            for where, got, want in fixed:
                if tuple(got) != want:
                    raise ValueError(f"{where} options must be {list(want)!r} in a {self.format} item")
        for name in ("image", "text"):
            rel = getattr(self.assets, name)
            if rel is not None and (Path(rel).is_absolute() or ".." in Path(rel).parts):
                raise ValueError(f"assets.{name} must be a path inside the audit folder, got {rel!r}")
        return self

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
