"""Diagnosis logic graphs: the YAML schema, its feature vocabulary and graph validation.

A diagnosis graph (``rubrics/diagnoses/<id>.yaml``) is a small directed acyclic
graph of *criteria*. Each criterion states its finding as a predicate over
measured features, with thresholds **and units**::

    finding: {feature: pr_ms, op: ">", value: 200, unit: ms}
    finding:
      all:
        - {feature: qrs_ms, op: ">", value: 120, unit: ms}
        - {feature: qrs_v1_net_mv, lead: V1, op: ">", value: 0, unit: mV}

and two branches, ``if_present`` and ``if_absent``, each naming the next
criterion or one of the decisions ``diagnose`` / ``rule_out``. The evaluation
engine (:mod:`ecgtrace.agents.audit.engine`) walks the graph on a feature
dict and returns the ground-truth path; it does not care which set (ambulatory
or 12-lead) a graph belongs to, so adding a diagnosis is only a YAML file.

Every validation error names the file, the line, the field and the reason::

    rubrics/diagnoses/af.yaml:31: criteria.absent_p.finding.value: threshold 50 has no unit (feature p_wave_present_pct is in %)
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from ecgtrace.errors import RubricError
from ecgtrace.rubrics._graph_checks import DECISIONS, DIAGNOSE, RULE_OUT, check_references, finding_leaves, reachability_problems
from ecgtrace.rubrics.diagnosis_features import DECISION_FEATURE, FEATURES, WAVE_TARGETS, FeatureSpec, unit_factor
from ecgtrace.rubrics.label_map import LabelMap, StatementDoubt, StrictModel
from ecgtrace.rubrics.loading import builtin_dir, load_model, read_yaml, rubric_error

__all__ = [
    "DECISIONS", "DECISION_FEATURE", "DIAGNOSE", "FEATURES", "OPS", "RULE_OUT", "WAVE_TARGETS", "Criterion", "DiagnosisGraph", "FeatureSpec", "GroundingRule",
    "LabelMap", "Requires", "StatementDoubt", "distractor_wordings", "finding_leaves", "graph_problems", "load_diagnoses", "load_diagnosis", "unit_factor", "validate_diagnosis_file",
]

#: Decision targets a branch may name besides a criterion id (DIAGNOSE, RULE_OUT, DECISIONS from _graph_checks).
OPS = (">", ">=", "<", "<=", "==", "!=")


_Strict = StrictModel


class GroundingRule(_Strict):
    """A localization question the builder instantiates on each window.

    ``lead``: the answer is the set of leads where ``feature op value unit``
    holds (multi-select). ``wave``: the answer is the time span of ``target``
    (one of :data:`WAVE_TARGETS`) among decoy spans. ``measurement``: the answer
    is the bin of width ``bin_width`` (in ``unit``) holding the measured ``feature``,
    or, with ``bin_edges`` (ascending, in ``unit``), the bin between two edges as
    ERB draws them: variable widths and open edge bins ("[200ms - 210ms]",
    "Above 240ms", "Below 120ms"), ``n_options`` of them (see
    :mod:`ecgtrace.agents.audit._bins`).

    Lead rules only: a threshold with a lead within ``margin`` (``unit``) of it
    is not asked; ``values`` are other thresholds to ask with (``{value}`` in
    the texts); ``complement_questions`` ask for the leads where the predicate
    does not hold (see :mod:`ecgtrace.agents.audit._leads`).
    """

    kind: Literal["lead", "wave", "measurement"]
    questions: list[str] = Field(min_length=1)
    feature: str | None = None
    op: str | None = None
    value: float | None = None
    unit: str | None = None
    leads: list[str] | None = None
    target: str | None = None
    bin_width: float | None = Field(default=None, gt=0)
    bin_edges: list[float] = Field(default_factory=list)
    n_options: int = Field(default=5, ge=2, le=8)
    margin: float | None = Field(default=None, ge=0)
    values: list[float] = Field(default_factory=list)
    complement_questions: list[str] = Field(default_factory=list)


class Criterion(_Strict):
    """One node: a finding, how to ask about it, and where to go next.

    ``text`` and its ``variants`` are equivalent wordings of the criterion (any
    of them may be the correct option of a criterion-selection question).
    ``questions`` ask whether the finding is present (Yes = present);
    ``negated_questions`` ask the exact complement (Yes = absent), so that the
    builder can balance Yes and No without changing any ground truth.
    Each ``distractors`` entry is one wrong criterion: a text, or a list of
    alternative wordings of it (the builder picks wordings so that the correct
    option is not recognisable by its length).
    """

    text: str = Field(min_length=1)
    variants: list[str] = Field(default_factory=list)
    questions: list[str] = Field(min_length=1)
    negated_questions: list[str] = Field(default_factory=list)
    finding: dict[str, Any]
    distractors: list[Any] = Field(min_length=4)
    grounding: list[GroundingRule] = Field(default_factory=list)
    if_present: str | None = None
    if_absent: str | None = None


class Requires(_Strict):
    """What a window needs before the graph applies to it at all.

    ``not_with``: diagnoses (graph ids in the same folder) beside which the graph's criteria say nothing
    (ST criteria of ischaemia beside complete LBBB or ventricular pacing, whose ST-T changes are secondary):
    where one of them walks to Yes the window is not applicable, and the builder drops it with that reason.
    """

    min_leads: int = Field(default=1, ge=1)
    leads: list[str] = Field(default_factory=list)
    not_with: list[str] = Field(default_factory=list)


class DiagnosisGraph(_Strict):
    """A diagnosis logic graph as read from YAML (see the module docstring)."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    name: str = Field(min_length=1)
    set: str = Field(default="any")
    version: str = "1"
    description: str = ""
    window_s: float = Field(default=10.0, gt=0)
    requires: Requires = Field(default_factory=Requires)
    labels: LabelMap = Field(default_factory=LabelMap)
    questions: list[str] = Field(min_length=1)
    criterion_questions: list[str] = Field(
        default_factory=lambda: ["Which of the following criteria should be checked next to diagnose {name}?"]
    )
    decision_questions: list[str] = Field(
        default_factory=lambda: ["Based on the findings so far, does this ECG show {name}?"]
    )
    start: str
    criteria: dict[str, Criterion] = Field(min_length=1)
    source: str | None = Field(default=None, exclude=True)

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, (int, float)) else value


# ---------------------------------------------------------------- validation

Problem = tuple[tuple[Any, ...], str]


def _check_predicate(node: Any, loc: tuple[Any, ...], problems: list[Problem]) -> None:
    if not isinstance(node, dict):
        problems.append((loc, f"expected a predicate mapping or all/any/not, found {type(node).__name__}"))
        return
    composite = [key for key in ("all", "any", "not") if key in node]
    if composite:
        if len(node) != 1:
            problems.append((loc, f"a composite has exactly one key ({composite[0]}), found {sorted(map(str, node))}"))
            return
        key = composite[0]
        children = node[key]
        if key == "not":
            _check_predicate(children, loc + ("not",), problems)
            return
        if not isinstance(children, list) or not children:
            problems.append((loc + (key,), "expected a non-empty list of predicates"))
            return
        for position, child in enumerate(children):
            _check_predicate(child, loc + (key, position), problems)
        return
    if node.get("feature") == DECISION_FEATURE or "diagnosis" in node:
        extra = sorted(str(k) for k in node if k not in ("feature", "diagnosis", "op", "value"))
        if extra:
            problems.append((loc + (extra[0],), f"a {DECISION_FEATURE} finding has only feature, diagnosis, op and value"))
        elif node.get("feature") != DECISION_FEATURE:
            problems.append((loc + ("feature",), f"a finding that names another diagnosis uses feature {DECISION_FEATURE}"))
        elif not isinstance(node.get("diagnosis"), str) or not node["diagnosis"]:
            problems.append((loc + ("diagnosis",), "diagnosis must name another graph's id"))
        elif not isinstance(node.get("value"), bool) or node.get("op") not in ("==", "!="):
            problems.append((loc + ("value",), f"diagnosis {node['diagnosis']} is decided yes/no: use op == or != with value true/false"))
        return
    allowed = {"feature", "op", "value", "unit", "lead", "leads", "quantifier", "min_leads"}
    unknown = sorted(str(k) for k in node if k not in allowed)
    if unknown:
        problems.append((loc + (unknown[0],), f"unknown key; a predicate has {', '.join(sorted(allowed))} (or all/any/not)"))
        return
    feature = node.get("feature")
    if feature not in FEATURES:
        close = difflib.get_close_matches(str(feature), FEATURES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        problems.append((loc + ("feature",), f"unknown feature {feature!r}{hint}"))
        return
    spec = FEATURES[feature]
    if node.get("op") not in OPS:
        problems.append((loc + ("op",), f"op must be one of {' '.join(OPS)}, found {node.get('op')!r}"))
    if "value" not in node:
        problems.append((loc, "predicate has no value"))
        return
    value = node["value"]
    if spec.unit == "bool":
        if not isinstance(value, bool) or node.get("op") not in ("==", "!="):
            problems.append((loc + ("value",), f"feature {feature} is true/false: use op == or != with value true/false"))
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        problems.append((loc + ("value",), f"threshold must be a number, found {value!r}"))
    elif node.get("unit") in (None, ""):
        problems.append((loc + ("value",), f"threshold {value} has no unit (feature {feature} is in {spec.unit})"))
    elif unit_factor(feature, str(node["unit"])) is None:
        problems.append((loc + ("unit",), f"unit {node['unit']!r} does not fit feature {feature} (measured in {spec.unit})"))
    has_lead = "lead" in node or "leads" in node
    if spec.scope == "lead" and not has_lead:
        problems.append((loc + ("feature",), f"feature {feature} is measured per lead: name lead: X or leads: [..] / all"))
    if spec.scope == "window" and has_lead:
        problems.append((loc + ("lead" if "lead" in node else "leads",), f"feature {feature} has one value per window, not per lead"))
    leads = node.get("leads")
    if leads is not None and leads != "all" and not (isinstance(leads, list) and leads and all(isinstance(x, str) for x in leads)):
        problems.append((loc + ("leads",), "leads must be a non-empty list of lead names or 'all'"))
    if node.get("quantifier", "any") not in ("any", "all"):
        problems.append((loc + ("quantifier",), "quantifier must be any or all"))


def distractor_wordings(entry: Any) -> list[str]:
    """The wordings of one ``distractors`` entry (a text or a list of texts)."""
    return [entry] if isinstance(entry, str) else list(entry)


def _check_wordings(crit: Criterion, loc: tuple[Any, ...], problems: list[Problem]) -> None:
    correct = [crit.text] + list(crit.variants)
    for position, text in enumerate(crit.variants):
        if not text.strip():
            problems.append((loc + ("variants", position), "empty wording"))
        elif text in correct[: position + 1]:
            problems.append((loc + ("variants", position), f"variant repeats the criterion text {text!r}"))
    seen: dict[str, tuple[Any, ...]] = {}
    for position, entry in enumerate(crit.distractors):
        where = loc + ("distractors", position)
        if isinstance(entry, str):
            texts = [entry]
        elif isinstance(entry, list) and entry and all(isinstance(t, str) for t in entry):
            texts = entry
        else:
            problems.append((where, f"a distractor is a text or a non-empty list of alternative wordings (texts), found {entry!r}"))
            continue
        for text in texts:
            if not text.strip():
                problems.append((where, "empty wording"))
            elif text in correct:
                problems.append((where, f"a distractor repeats a wording of the criterion (text or variants): {text!r}"))
            elif text in seen:
                problems.append((where, f"distractors repeat each other ({text!r} also at {'.'.join(map(str, seen[text]))})"))
            else:
                seen[text] = where
    for position, text in enumerate(crit.negated_questions):
        if text in crit.questions:
            problems.append((loc + ("negated_questions", position), f"a negated question repeats a question {text!r}: it must ask the complement"))


def _check_grounding(rule: GroundingRule, loc: tuple[Any, ...], problems: list[Problem]) -> None:
    if rule.kind == "wave":
        if rule.target not in WAVE_TARGETS:
            problems.append((loc + ("target",), f"wave target must be one of {', '.join(WAVE_TARGETS)}, found {rule.target!r}"))
        return
    if rule.feature not in FEATURES:
        problems.append((loc + ("feature",), f"unknown feature {rule.feature!r}"))
        return
    spec = FEATURES[rule.feature]
    if rule.kind == "lead":
        if spec.scope == "window":
            problems.append((loc + ("feature",), f"lead grounding needs a per-lead feature; {rule.feature} has one value per window"))
        predicate = {"feature": rule.feature, "op": rule.op, "value": rule.value, "unit": rule.unit, "leads": "all"}
        _check_predicate(predicate, loc, problems)
        if rule.values and not all("{value}" in q for q in rule.questions + rule.complement_questions):
            problems.append((loc + ("values",), "several thresholds (values) need '{value}' in every question text"))
        if rule.op not in (None, ">", ">=", "<", "<=") and rule.complement_questions:
            problems.append((loc + ("complement_questions",), f"complement questions need an order comparison, found op {rule.op!r}"))
    elif rule.margin is not None or rule.values or rule.complement_questions:
        problems.append((loc + ("kind",), "margin, values and complement_questions apply to lead grounding only"))
    if rule.kind == "measurement":
        if rule.bin_width is None and not rule.bin_edges:
            problems.append((loc + ("bin_width",), "measurement grounding needs bin_width or bin_edges"))
        if rule.bin_edges and (len(rule.bin_edges) < 2 or any(b <= a for a, b in zip(rule.bin_edges, rule.bin_edges[1:]))):
            problems.append((loc + ("bin_edges",), "bin_edges must be at least 2 strictly ascending values"))
        if rule.bin_edges and not 3 <= rule.n_options <= 5:
            problems.append((loc + ("n_options",), f"bins drawn from bin_edges take 3 to 5 options, found {rule.n_options}"))
        if rule.unit in (None, ""):
            problems.append((loc + ("bin_width",), f"bin_width has no unit (feature {rule.feature} is in {spec.unit})"))
        elif unit_factor(rule.feature, rule.unit) is None:
            problems.append((loc + ("unit",), f"unit {rule.unit!r} does not fit feature {rule.feature} (measured in {spec.unit})"))


def graph_problems(graph: DiagnosisGraph) -> list[Problem]:
    """Structural problems of a parsed graph as ``(location, reason)``, in file order."""
    problems: list[Problem] = []
    ids = set(graph.criteria)
    targets_ok = ids | set(DECISIONS)
    if graph.start not in ids:
        problems.append((("start",), f"start names unknown criterion {graph.start!r} (criteria: {', '.join(graph.criteria)})"))
    for cid, crit in graph.criteria.items():
        loc = ("criteria", cid)
        if cid in DECISIONS:
            problems.append((loc, f"{cid!r} is reserved for decisions; rename the criterion"))
        _check_predicate(crit.finding, loc + ("finding",), problems)
        for branch in ("if_present", "if_absent"):
            target = getattr(crit, branch)
            if target is None:
                problems.append((loc, f"missing branch {branch}: name the next criterion, {DIAGNOSE} or {RULE_OUT}"))
            elif target not in targets_ok:
                problems.append((loc + (branch,), f"branch goes to unknown node {target!r} (criteria: {', '.join(graph.criteria)}; decisions: {DIAGNOSE}, {RULE_OUT})"))
        _check_wordings(crit, loc, problems)
        for position, rule in enumerate(crit.grounding):
            _check_grounding(rule, loc + ("grounding", position), problems)
    if problems:
        return problems
    problems.extend(reachability_problems(graph))
    return problems


def load_diagnosis(path: str | os.PathLike[str]) -> DiagnosisGraph:
    """Load and validate one diagnosis graph.

    Raises:
        RubricError: ``file:line: field: reason`` for the first problem (schema,
            unknown feature, threshold without unit, missing branch, unknown
            target, cycle, unreachable node).
    """
    graph = load_model(path, DiagnosisGraph)
    problems = graph_problems(graph)
    if problems:
        _, lines = read_yaml(path)
        loc, message = problems[0]
        raise rubric_error(path, lines, loc, message)
    stem = Path(path).stem
    if graph.id != stem:
        _, lines = read_yaml(path)
        raise rubric_error(path, lines, ("id",), f"id {graph.id!r} must match the file name {stem!r}")
    return graph.model_copy(update={"source": str(path)})


def validate_diagnosis_file(path: str | os.PathLike[str]) -> list[str]:
    """Every problem of one graph file as ``file:line: field: reason`` lines (empty when valid)."""
    try:
        graph = load_model(path, DiagnosisGraph)
    except RubricError as exc:
        return [str(exc)]
    problems = graph_problems(graph)
    if not problems and graph.id != Path(path).stem:
        problems = [(("id",), f"id {graph.id!r} must match the file name {Path(path).stem!r}")]
    if not problems:
        return []
    _, lines = read_yaml(path)
    return [str(rubric_error(path, lines, loc, message)) for loc, message in problems]


def load_diagnoses(dir: str | os.PathLike[str] | None = None) -> dict[str, DiagnosisGraph]:  # noqa: A002 (the documented name)
    """All graphs of a folder (default: the built-in ``rubrics/diagnoses``), keyed by id, sorted.

    Raises:
        RubricError: the folder is missing, or a graph is invalid (``file:line: field: reason``).
    """
    folder = Path(dir) if dir is not None else builtin_dir("diagnoses")
    if not folder.is_dir():
        raise RubricError(f"{folder}: diagnosis folder not found")
    graphs: dict[str, DiagnosisGraph] = {}
    for path in sorted(folder.glob("*.yaml")):
        graph = load_diagnosis(path)
        graphs[graph.id] = graph
    check_references(graphs)
    return graphs
