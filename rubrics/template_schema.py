"""QA templates: the YAML schema of the 12 Holtercare-Bench task types and safe formatting.

A template is data: question stems with variants, the answer format, the
distractor rule and the evidence rule. The generating code is the task type's
object in :mod:`ecgtrace.agents.holter.tasks`, keyed by ``task`` (one of
:data:`TASKS`, whose rules are :data:`TASK_RULES`), so a new YAML file with a
new ``id`` and new stems needs no Python. Stems are formatted with :func:`safe_format`: only
plain ``{name}`` fields from a fixed vocabulary, no attribute or index access,
no conversions, no ``eval``.

Example (``rubrics/templates/closed_count.yaml``)::

    id: closed_count
    version: "1"
    task: closed_count
    stems:
      - "{context}How many {event_plural} occur between {t0_ms} ms and {t1_ms} ms ...?"
    answer: {format: integer}
    distractors: {rule: count_offsets, params: {offsets: [-1, 1, 2]}}
    evidence: {rule: event_beats}
"""

from __future__ import annotations

import os
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from ecgtrace.contracts.vocabulary import QA_EVENT_KINDS
from ecgtrace.errors import RubricError
from ecgtrace.rubrics.loading import builtin_dir, load_model, read_yaml, rubric_error


@dataclass(frozen=True)
class TaskRules:
    """What a template of one task type must say: the schema's side of a QA task type.

    Attributes:
        format: ``closed`` (options, one of them the answer), ``open`` or ``report``.
        answer_format: the ``answer.format`` the task's writer produces.
        distractor_rule: the ``distractors.rule`` that fits (``none`` for open and report tasks).
        scopes: the ``scope`` values its planner can place targets for.
        also_formats: other answer formats its writer can produce (the statistics report as JSON or in prose).
        also_rules: other distractor rules its writer follows (closed diagnosis, framed positively or negatively).
    """

    format: Literal["closed", "open", "report"]
    answer_format: str
    distractor_rule: str
    scopes: tuple[str, ...] = ("window",)
    also_formats: tuple[str, ...] = ()
    also_rules: tuple[str, ...] = ()

    @property
    def answer_formats(self) -> tuple[str, ...]:
        return (self.answer_format, *self.also_formats)

    @property
    def distractor_rules(self) -> tuple[str, ...]:
        return (self.distractor_rule, *self.also_rules)


#: The QA task types, in dataset order (the 12 Holtercare-Bench tasks). Registering a task type means a row
#: here (what its templates must say) and a module in :mod:`ecgtrace.agents.holter.tasks` (how it is planned,
#: written, verified, scored and summarized); ``ecgtrace.agents.holter.tasks.check_registry`` fails when the two
#: disagree. The rules live with the schema because rubrics are data and schema, below the agents that read them:
#: a template is validated here without importing any agent.
TASK_RULES: dict[str, TaskRules] = {
    "closed_presence": TaskRules("closed", "yes_no", "yes_no"),
    "closed_count": TaskRules("closed", "integer", "count_offsets", ("window", "record")),
    "closed_timing": TaskRules("closed", "timestamps_ms", "timing_shift"),
    # HR extrema are whole-record questions; a template that leaves scope at its default (window) still asks about the record
    "closed_hr_extremum": TaskRules("closed", "time_ms", "hr_offsets", ("record", "window")),
    # present_labels: the negative framing ("which of the listed diagnoses is not supported"): the window's findings are the
    # distractors and one finding it does not hold is the answer
    "closed_diagnosis": TaskRules("closed", "label", "absent_labels", also_rules=("present_labels",)),
    "open_count": TaskRules("open", "integer", "none", ("window", "record")),
    "open_timing": TaskRules("open", "timestamps_ms", "none"),
    "open_hr_extremum": TaskRules("open", "time_ms", "none", ("record", "window")),
    # the finding of a window, or every finding of a window that holds several (a set of labels)
    "open_diagnosis": TaskRules("open", "label", "none"),
    "open_evidence": TaskRules("open", "text", "none"),
    "report_statistics": TaskRules("report", "report_json", "none", ("record",), also_formats=("text",)),
    "report_summary": TaskRules("report", "text", "none", ("record",)),
}
TASKS: tuple[str, ...] = tuple(TASK_RULES)

#: Event kinds a template may target (one vocabulary: :mod:`ecgtrace.contracts.vocabulary`).
EVENT_KINDS: tuple[str, ...] = QA_EVENT_KINDS

#: Fields a stem may use; every one is filled by the writer for every item.
PLACEHOLDERS: frozenset[str] = frozenset(
    {"context", "patient", "event", "event_plural", "t0_ms", "t1_ms", "t0_s", "t1_s", "window_s", "duration_h", "hr_kind", "diagnosis", "lead"}
)

_FORMATTER = string.Formatter()


def _checked_stem(stem: str) -> str:
    check_stem(stem)
    return stem


#: A question stem: checked one by one, so an error points at the stem's own line.
Stem = Annotated[str, AfterValidator(_checked_stem)]


class AnswerSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["yes_no", "integer", "timestamps_ms", "time_ms", "label", "text", "report_json"]
    tolerance_ms: int = Field(default=150, ge=0, description="a time answer within this many ms of the truth is correct")


#: The ``distractors.params`` each rule reads (every one a list of non-zero integers); any other key is an error.
RULE_PARAMS: dict[str, tuple[str, ...]] = {"count_offsets": ("offsets",), "hr_offsets": ("offsets_ms",), "timing_shift": ("shifts_ms",),
                                           "absent_labels": ("n_min",)}
#: Parameters that are one whole number from 1 to 6 (the fewest distractors drawn); every other one is a list of offsets.
COUNT_PARAMS: frozenset[str] = frozenset({"n_min"})


class DistractorSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rule: Literal["none", "yes_no", "count_offsets", "timing_shift", "hr_offsets", "absent_labels", "present_labels"]
    n: int = Field(default=3, ge=1, le=6, description="number of distractors (closed questions)")
    params: dict[str, Any] = Field(default_factory=dict, description="per rule, see RULE_PARAMS")

    @model_validator(mode="after")
    def _params_fit_rule(self) -> DistractorSpec:
        known = RULE_PARAMS.get(self.rule, ())
        for name, value in self.params.items():
            if name not in known:
                allowed = f"it reads {', '.join(known)}" if known else "it takes none"
                raise ValueError(f"params.{name}: not a parameter of rule {self.rule!r} ({allowed})")
            if name in COUNT_PARAMS:
                if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= self.n:
                    raise ValueError(f"params.{name}: must be a whole number from 1 to n ({self.n}), got {value!r}")
            elif not isinstance(value, list) or not value or not all(isinstance(v, int) and not isinstance(v, bool) and v for v in value):
                raise ValueError(f"params.{name}: must be a non-empty list of non-zero integers, got {value!r}")
        return self


class EvidenceSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rule: Literal["event_beats", "event_span", "hr_extremum", "window", "record"]
    margin_ms: int = Field(default=500, ge=0, description="noise closer than this to the evidence drops the item")


class QATemplate(BaseModel):
    """One QA template file."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    version: str
    task: str
    description: str = ""
    scope: Literal["window", "record"] = "window"
    window_s: float = Field(default=10.0, gt=0, le=600)
    event_kinds: list[str] = Field(default_factory=list, description="kinds targeted; empty = every kind the task supports")
    max_items: int = Field(default=4, ge=1, le=1000, description="items per record and event kind")
    stems: list[Stem] = Field(min_length=1)
    answer: AnswerSpec
    distractors: DistractorSpec = Field(default_factory=lambda: DistractorSpec(rule="none"))
    evidence: EvidenceSpec

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, (int, float)) else value

    @field_validator("event_kinds")
    @classmethod
    def _known_kinds(cls, kinds: list[str]) -> list[str]:
        for kind in kinds:
            if kind not in EVENT_KINDS:
                raise ValueError(f"unknown event kind {kind!r}; known: {', '.join(EVENT_KINDS)}")
        return kinds

    @field_validator("task")
    @classmethod
    def _known_task(cls, task: str) -> str:
        if task not in TASK_RULES:
            raise ValueError(f"unknown task {task!r}; known: {', '.join(TASKS)}")
        return task

    @model_validator(mode="after")
    def _fits_task(self) -> QATemplate:
        rules = TASK_RULES[self.task]
        if self.answer.format not in rules.answer_formats:
            wanted = " or ".join(repr(f) for f in rules.answer_formats)
            raise ValueError(f"task {self.task} needs answer.format {wanted}, not {self.answer.format!r}")
        if self.distractors.rule not in rules.distractor_rules:
            wanted = " or ".join(repr(r) for r in rules.distractor_rules)
            raise ValueError(f"task {self.task} needs distractors.rule {wanted}, not {self.distractors.rule!r}")
        if self.scope not in rules.scopes:
            if rules.format == "report":
                raise ValueError(f"task {self.task} is a whole-record report: scope must be 'record'")
            raise ValueError(f"task {self.task} asks about {' or '.join(rules.scopes)} scope, not {self.scope!r}: its planner places no target there")
        return self

    @property
    def format(self) -> str:
        """``closed``, ``open`` or ``report``."""
        return TASK_RULES[self.task].format

    @property
    def rules(self) -> TaskRules:
        return TASK_RULES[self.task]


def check_stem(stem: str) -> list[str]:
    """Field names of a stem; raise ValueError on anything but plain known ``{name}`` fields."""
    names: list[str] = []
    try:
        parsed = list(_FORMATTER.parse(stem))
    except ValueError as exc:
        raise ValueError(f"malformed braces in stem {stem!r} ({exc})") from None
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name.isidentifier():
            raise ValueError(f"field {{{name}}} in stem {stem!r}: only plain names are allowed (no attribute or index access)")
        if spec or conversion:
            raise ValueError(f"field {{{name}}} in stem {stem!r}: format specs and conversions are not allowed")
        if name not in PLACEHOLDERS:
            raise ValueError(f"unknown field {{{name}}} in stem {stem!r}; allowed: {', '.join(sorted(PLACEHOLDERS))}")
        names.append(name)
    return names


def safe_format(stem: str, values: dict[str, Any]) -> str:
    """Fill a stem's ``{name}`` fields from ``values`` (plain names only, values turned into text)."""
    check_stem(stem)
    out: list[str] = []
    for literal, name, _, _ in _FORMATTER.parse(stem):
        out.append(literal)
        if name is not None:
            if name not in values:
                raise ValueError(f"stem {stem!r} needs {{{name}}}, which this item does not provide")
            out.append(str(values[name]))
    return "".join(out)


def load_template(path: str | os.PathLike[str]) -> QATemplate:
    """Load and validate one template file; errors read ``file:line: field: reason``."""
    return load_model(path, QATemplate)


def template_files(directory: str | os.PathLike[str] | None = None) -> list[Path]:
    """YAML template files of ``directory`` (default: the built-in templates), sorted by name."""
    folder = Path(directory) if directory is not None else builtin_dir("templates")
    if not folder.is_dir():
        raise RubricError(f"{folder}: template folder not found")
    return sorted(p for p in folder.iterdir() if p.suffix in {".yaml", ".yml"} and p.is_file())


def load_templates(directory: str | os.PathLike[str] | None = None, *, tasks: list[str] | None = None) -> list[QATemplate]:
    """Every template in ``directory`` (sorted by id); ``tasks`` keeps those of the given task types."""
    templates: list[QATemplate] = []
    seen: dict[str, Path] = {}
    for path in template_files(directory):
        template = load_template(path)
        if template.id in seen:
            _, lines = read_yaml(path)
            raise rubric_error(path, lines, ("id",), f"duplicate template id {template.id!r} (also in {seen[template.id].name})")
        seen[template.id] = path
        templates.append(template)
    if tasks:
        unknown = [t for t in tasks if t not in TASKS]
        if unknown:
            raise RubricError(f"--tasks: unknown task {unknown[0]!r}; known: {', '.join(TASKS)}")
        templates = [t for t in templates if t.task in tasks]
    return sorted(templates, key=lambda t: t.id)


def templates_version(templates: list[QATemplate]) -> dict[str, str]:
    """``{template id: version}`` for the manifest."""
    return {t.id: t.version for t in templates}
