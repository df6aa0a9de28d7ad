"""Evaluate diagnosis logic graphs on measured features: the ground-truth reasoning path.

Features are a plain dict. Window-level values sit at the top level
(``{"pr_ms": 212.0, "hr_bpm": 71.3}``); per-lead values sit under ``per_lead``
(``{"per_lead": {"st_j60_mv": {"V2": -0.12, "I": 0.01}}}``). A value of None
(or a missing key) means "could not be measured": evaluation raises
:class:`MissingFeature` rather than guessing, and the audit builder drops the
window with that reason. Lead names match case-insensitively (``AVR`` = ``aVR``).

The engine knows nothing about the set a graph belongs to; every rule it
applies comes from the YAML graph (:mod:`ecgtrace.rubrics.diagnosis_schema`).
A finding may name another graph (``{feature: diagnosis_decision, diagnosis: lbbb, op: "==", value: true}``,
ERB's "LBBB present -> No" for the fascicular blocks): that graph is walked on
the same features and its decision is the measured value. A graph's
``requires.not_with`` names graphs beside whose Yes it does not apply at all:
those are walked first, and a Yes raises :class:`NotApplicable` (the builder
drops the window with ``not_applicable:beside_<id>``) instead of a path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ecgtrace.rubrics.diagnosis_schema import DECISION_FEATURE, DIAGNOSE, FEATURES, DiagnosisGraph, GroundingRule, unit_factor

ENGINE_VERSION = "3"  # 3: requires.not_with (a graph does not apply beside another graph's Yes)


class MissingFeature(LookupError):
    """A feature the graph needs is not available for this window."""

    def __init__(self, feature: str, lead: str | None = None) -> None:
        self.feature = feature
        self.lead = lead
        super().__init__(f"{feature}" + (f" in lead {lead}" if lead else ""))


class NotApplicable(LookupError):
    """The graph does not apply to this window: a diagnosis its ``requires.not_with`` names walks to Yes."""

    def __init__(self, diagnosis: str, beside: str) -> None:
        self.diagnosis = diagnosis
        self.beside = beside
        super().__init__(f"{diagnosis} does not apply beside {beside}")

    @property
    def reason(self) -> str:
        return f"not_applicable:beside_{self.beside}"


@dataclass(frozen=True)
class Step:
    """One visited criterion: was its finding present, on which values, where next."""

    criterion: str
    present: bool
    next: str
    values: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"criterion": self.criterion, "present": self.present, "next": self.next, "values": self.values}


@dataclass(frozen=True)
class Path:
    """The ground-truth path through a graph: visited criteria and the final decision."""

    diagnosis: str
    steps: tuple[Step, ...]
    decision: bool

    @property
    def path_id(self) -> str:
        trail = "/".join(f"{s.criterion}{'+' if s.present else '-'}" for s in self.steps)
        return f"{self.diagnosis}:{trail}=>{'yes' if self.decision else 'no'}"

    @property
    def criteria(self) -> list[str]:
        return [s.criterion for s in self.steps]

    def to_json(self) -> dict[str, Any]:
        return {"diagnosis": self.diagnosis, "path_id": self.path_id, "decision": self.decision, "steps": [s.to_json() for s in self.steps]}


def _norm(lead: str) -> str:
    return lead.strip().upper()


def compare(measured: Any, op: str, threshold: Any) -> bool:
    """``measured op threshold`` for the ops a finding may use (``>``, ``>=``, ``<``, ``<=``, ``==``, ``!=``)."""
    if isinstance(threshold, bool):
        measured = bool(measured)
    if op == ">":
        return measured > threshold
    if op == ">=":
        return measured >= threshold
    if op == "<":
        return measured < threshold
    if op == "<=":
        return measured <= threshold
    if op == "==":
        return measured == threshold
    if op == "!=":
        return measured != threshold
    raise ValueError(f"unknown op {op!r}")


def finding_threshold(node: dict[str, Any]) -> Any:
    """A leaf finding's threshold in its feature's canonical unit (a bool stays a bool)."""
    value = node["value"]
    if isinstance(value, bool):
        return value
    factor = unit_factor(node["feature"], str(node.get("unit")))
    if factor is None:
        raise ValueError(f"unit {node.get('unit')!r} does not fit {node['feature']}")
    return float(value) * factor


def _window_value(features: dict[str, Any], name: str) -> Any:
    value = features.get(name)
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        raise MissingFeature(name)
    return value


def lead_values(features: dict[str, Any], name: str) -> dict[str, Any]:
    """Per-lead values of ``name`` that were measured (None and NaN left out)."""
    table = (features.get("per_lead") or {}).get(name) or {}
    return {lead: v for lead, v in table.items() if v is not None and not (isinstance(v, float) and not math.isfinite(v))}


def selected_leads(features: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """The measured values of the leads a leaf test names (``lead``, ``leads`` or all), keyed by the record's lead names.

    Raises:
        MissingFeature: none of them was measured.
    """
    name = node["feature"]
    values = lead_values(features, name)
    by_norm = {_norm(lead): lead for lead in values}
    if "lead" in node:
        wanted = [node["lead"]]
    elif node.get("leads", "all") == "all":
        wanted = list(values)
    else:
        wanted = list(node["leads"])
    chosen = {by_norm[_norm(w)]: values[by_norm[_norm(w)]] for w in wanted if _norm(w) in by_norm}
    if not chosen:
        raise MissingFeature(name, node.get("lead") or ",".join(wanted) or None)
    return chosen


def _kleene(node: dict[str, Any], features: dict[str, Any], record: dict[str, Any] | None, graphs: dict[str, DiagnosisGraph] | None) -> bool:
    """all/any with three-valued logic: a missing child decides nothing when the others already decide.

    ``all`` is False as soon as one child is False, ``any`` True as soon as one is
    True; otherwise a missing child raises :class:`MissingFeature` (never a guess).
    """
    key = "all" if "all" in node else "any"
    decisive = key == "any"  # the value that settles the composite
    missing: MissingFeature | None = None
    for child in node[key]:
        try:
            value = evaluate_predicate(child, features, record, graphs)
        except MissingFeature as exc:
            missing = missing or exc
            continue
        if value is decisive:
            return decisive
    if missing is not None:
        raise missing
    return not decisive


def _builtin_graphs() -> dict[str, DiagnosisGraph]:
    from ecgtrace.rubrics.diagnosis_schema import load_diagnoses

    return load_diagnoses()


def _decision_of(name: str, features: dict[str, Any], graphs: dict[str, DiagnosisGraph] | None) -> bool:
    """Decision of graph ``name`` (from ``graphs``, else the built-in graphs), walked on the same features."""
    pool = graphs if graphs is not None and name in graphs else _builtin_graphs()
    return evaluate(pool[name], features, pool).decision


def _diagnosis_value(node: dict[str, Any], features: dict[str, Any], graphs: dict[str, DiagnosisGraph] | None) -> bool:
    """Decision of the graph a finding names, walked on the same features."""
    return _decision_of(node["diagnosis"], features, graphs)


def evaluate_predicate(node: dict[str, Any], features: dict[str, Any], record: dict[str, Any] | None = None,
                       graphs: dict[str, DiagnosisGraph] | None = None) -> bool:
    """Truth of a finding predicate (leaf or all/any/not composite) on ``features``.

    ``record`` (optional) collects the measured values that decided each leaf;
    ``graphs`` resolves findings that name another diagnosis (default: the built-in graphs).
    """
    if "all" in node or "any" in node:
        return _kleene(node, features, record, graphs)
    if "not" in node:
        return not evaluate_predicate(node["not"], features, record, graphs)
    if node.get("feature") == DECISION_FEATURE:
        decided = _diagnosis_value(node, features, graphs)
        if record is not None:
            record[f"{node['diagnosis']}@decision"] = decided
        return compare(decided, node["op"], bool(node["value"]))
    name, op = node["feature"], node["op"]
    threshold = finding_threshold(node)
    if "lead" not in node and "leads" not in node:
        measured = _window_value(features, name)
        if record is not None:
            record[name] = measured
        return compare(measured, op, threshold)
    chosen = selected_leads(features, node)
    hits = [lead for lead, v in chosen.items() if compare(v, op, threshold)]
    if record is not None:
        record.setdefault(f"{name}@leads", {}).update(chosen)
    if "lead" in node:
        return bool(hits)
    if node.get("quantifier", "any") == "all":
        return len(hits) == len(chosen)
    return len(hits) >= int(node.get("min_leads", 1))


def evaluate(graph: DiagnosisGraph, features: dict[str, Any], graphs: dict[str, DiagnosisGraph] | None = None) -> Path:
    """Walk ``graph`` from its start on ``features`` and return the ground-truth path.

    ``graphs`` resolves findings that name another diagnosis (default: the built-in graphs).

    Raises:
        MissingFeature: a visited criterion (or a graph ``requires.not_with`` names) needs a value the window lacks.
        NotApplicable: a diagnosis ``requires.not_with`` names walks to Yes on the same features.
    """
    for beside in graph.requires.not_with:
        if _decision_of(beside, features, graphs):
            raise NotApplicable(graph.id, beside)
    steps: list[Step] = []
    node = graph.start
    visited: set[str] = set()
    while node in graph.criteria:
        if node in visited:  # validated graphs have no cycles; guard anyway
            raise ValueError(f"{graph.id}: cycle at {node}")
        visited.add(node)
        crit = graph.criteria[node]
        values: dict[str, Any] = {}
        present = evaluate_predicate(crit.finding, features, values, graphs)
        nxt = crit.if_present if present else crit.if_absent
        assert nxt is not None
        steps.append(Step(criterion=node, present=present, next=nxt, values=_plain(values)))
        node = nxt
    return Path(diagnosis=graph.id, steps=tuple(steps), decision=node == DIAGNOSE)


def grounding_leads(rule: GroundingRule, features: dict[str, Any], value: float | None = None) -> list[str]:
    """Leads where a lead-grounding rule's predicate holds (record lead names, input order).

    ``value`` (in the rule's unit) replaces the rule's threshold (one of its ``values``).
    """
    node = {"feature": rule.feature, "op": rule.op, "value": rule.value if value is None else value, "unit": rule.unit, "leads": rule.leads or "all"}
    threshold = finding_threshold(node)
    chosen = selected_leads(features, node)
    return [lead for lead, v in chosen.items() if compare(v, rule.op or ">", threshold)]


def feature_in_unit(features: dict[str, Any], name: str, unit: str) -> float:
    """A window-level feature expressed in ``unit`` (e.g. ``qrs_ms`` in ``s``)."""
    value = float(_window_value(features, name))
    factor = unit_factor(name, unit)
    if factor is None:
        raise ValueError(f"unit {unit!r} does not fit {name} ({FEATURES[name].unit})")
    return value / factor


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict):
            out[key] = _plain(value)
        elif isinstance(value, bool) or value is None or isinstance(value, str):
            out[key] = value
        else:
            out[key] = round(float(value), 4)
    return out
