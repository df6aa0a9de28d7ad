"""Doubtful ground truth: a path that hinges on a measurement within its tolerance of a threshold (internal).

A graph's path is the ground truth of every turn of an audit item. When one
measured value lies within its measurement tolerance
(:func:`ecgtrace.rubrics.diagnosis_features.feature_tolerance`) of the
threshold of a finding the graph may visit, and moving that single value to
the threshold's other side (a move no larger than the tolerance) changes the
path, the measurements cannot tell which path is true: the builder drops the
window with the reason :attr:`Doubt.reason` instead of guessing. A value near
a threshold that decides nothing (another lead already settles the finding,
the graph never visits it on either side) is not doubt.

Each value is moved alone: the check asks whether the truth hinges on one
measurement, not on every combination of errors. Findings of graphs that a
finding names (``diagnosis_decision``) or that ``requires.not_with`` names are
checked too, since the same features decide them; a move that makes the graph
not applicable, or that loses a feature, counts as a change.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ecgtrace.agents.audit.engine import MissingFeature, NotApplicable, Path, compare, evaluate, evaluate_predicate, finding_threshold, selected_leads
from ecgtrace.rubrics.diagnosis_features import DECISION_FEATURE, feature_tolerance
from ecgtrace.rubrics.diagnosis_schema import DiagnosisGraph, finding_leaves, load_diagnoses

DOUBT_VERSION = "1"


@dataclass(frozen=True)
class Doubt:
    """The measurement a path hinges on: the first criterion of the path it changes, where the value was read, the value,
    the threshold and the tolerance (canonical units)."""

    criterion: str
    feature: str
    lead: str | None
    measured: float
    threshold: float
    tolerance: float

    @property
    def reason(self) -> str:
        """The builder's drop reason, e.g. ``measurement_doubtful:cornell:cornell_product_mvs``."""
        where = f"@{self.lead}" if self.lead else ""
        return f"measurement_doubtful:{self.criterion}:{self.feature}{where}"


def find_doubt(graph: DiagnosisGraph, features: dict[str, Any], graphs: dict[str, DiagnosisGraph] | None = None) -> Doubt | None:
    """The first measurement within its tolerance of a threshold whose move changes ``graph``'s path; None when none does.

    ``graphs`` resolves findings that name another diagnosis (default: the built-in graphs), as in
    :func:`ecgtrace.agents.audit.engine.evaluate`, which also raises here what it raises there on the unmoved features.
    """
    pool = graphs if graphs is not None else load_diagnoses()
    baseline = evaluate(graph, features, pool)
    tried: set[tuple[str, str | None, float]] = set()
    for leaf in _leaves(graph, pool):
        name, op = leaf["feature"], leaf["op"]
        threshold = finding_threshold(leaf)
        for lead, value in _numeric_values(leaf, features):
            tolerance = feature_tolerance(name, threshold)
            if tolerance <= 0 or abs(value - threshold) > tolerance or (name, lead, threshold) in tried:
                continue
            tried.add((name, lead, threshold))
            moved = _across(value, op, threshold)
            changed = None if moved is None else _changed_criterion(baseline, graph, _with_value(features, name, lead, moved), pool)
            if changed is not None:
                return Doubt(changed, name, lead, float(value), float(threshold), float(tolerance))
    return None


def _changed_criterion(baseline: Path, graph: DiagnosisGraph, moved: dict[str, Any], pool: dict[str, DiagnosisGraph]) -> str | None:
    """The first criterion of ``baseline`` whose finding differs on the moved features (there the paths part), or
    ``not_with:<id>`` when the graph would no longer apply; None when the path is the same."""
    for beside in graph.requires.not_with:
        try:
            if evaluate(pool[beside], moved, pool).decision:
                return f"not_with:{beside}"
        except (MissingFeature, NotApplicable):
            return f"not_with:{beside}"
    for step in baseline.steps:
        try:
            present = evaluate_predicate(graph.criteria[step.criterion].finding, moved, None, pool)
        except (MissingFeature, NotApplicable):  # a graph the finding names lost a feature, or no longer applies
            return step.criterion
        if present != step.present:
            return step.criterion
    return None


def _leaves(graph: DiagnosisGraph, pool: dict[str, DiagnosisGraph]) -> Iterator[dict[str, Any]]:
    """Numeric leaf findings of ``graph`` and of every graph it consults, each graph once."""
    seen: set[str] = set()
    todo = [graph]
    while todo:
        current = todo.pop()
        if current.id in seen:
            continue
        seen.add(current.id)
        todo.extend(pool[g] for g in current.requires.not_with if g in pool)
        for crit in current.criteria.values():
            for _, node in finding_leaves(crit.finding):
                if node.get("feature") == DECISION_FEATURE:
                    if node.get("diagnosis") in pool:
                        todo.append(pool[node["diagnosis"]])
                elif not isinstance(node.get("value"), bool):
                    yield node


def _numeric_values(node: dict[str, Any], features: dict[str, Any]) -> Iterator[tuple[str | None, float]]:
    """(lead or None, value) of every measured number the leaf compares."""
    name = node["feature"]
    if "lead" not in node and "leads" not in node:
        value = features.get(name)
        if _is_number(value):
            yield None, float(value)
        return
    try:
        chosen = selected_leads(features, node)
    except MissingFeature:
        return
    yield from ((lead, float(value)) for lead, value in chosen.items() if _is_number(value))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _across(value: float, op: str, threshold: float) -> float | None:
    """A value at the threshold (or one float step past it) on the other side of ``op`` from ``value``."""
    was = compare(value, op, threshold)
    for candidate in (threshold, math.nextafter(threshold, math.inf), math.nextafter(threshold, -math.inf)):
        if compare(candidate, op, threshold) != was:
            return candidate
    return None


def _with_value(features: dict[str, Any], name: str, lead: str | None, value: float) -> dict[str, Any]:
    """A copy of ``features`` with one value replaced (the rest shared, never modified)."""
    out = dict(features)
    if lead is None:
        out[name] = value
        return out
    per_lead = dict(out.get("per_lead") or {})
    per_lead[name] = {**per_lead.get(name, {}), lead: value}
    out["per_lead"] = per_lead
    return out
