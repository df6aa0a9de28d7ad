"""Graph-level checks of diagnosis graphs: cycles, reachability and references between graphs.

Used by :mod:`ecgtrace.rubrics.diagnosis_schema`; every error names the file, the line and the field.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ecgtrace.errors import RubricError
from ecgtrace.rubrics.diagnosis_features import DECISION_FEATURE
from ecgtrace.rubrics.loading import read_yaml, rubric_error

#: A :class:`ecgtrace.rubrics.diagnosis_schema.DiagnosisGraph` (not imported: that module imports this one).
DiagnosisGraph = Any

Problem = tuple[tuple[Any, ...], str]
DIAGNOSE = "diagnose"
RULE_OUT = "rule_out"
DECISIONS = (DIAGNOSE, RULE_OUT)


def _successors(graph: DiagnosisGraph, cid: str) -> list[str]:
    crit = graph.criteria[cid]
    return [t for t in (crit.if_present, crit.if_absent) if t in graph.criteria]


def reachability_problems(graph: DiagnosisGraph) -> list[Problem]:
    problems: list[Problem] = []
    # cycles: iterative DFS with colours
    colour: dict[str, int] = {}
    for root in graph.criteria:
        if colour.get(root):
            continue
        stack: list[tuple[str, list[str]]] = [(root, _successors(graph, root))]
        trail = [root]
        colour[root] = 1
        while stack:
            node, pending = stack[-1]
            if not pending:
                colour[node] = 2
                stack.pop()
                trail.pop()
                continue
            nxt = pending.pop(0)
            if colour.get(nxt) == 1:
                cycle = trail[trail.index(nxt):] + [nxt]
                problems.append((("criteria", node), f"cycle: {' -> '.join(cycle)}"))
                return problems
            if not colour.get(nxt):
                colour[nxt] = 1
                trail.append(nxt)
                stack.append((nxt, _successors(graph, nxt)))
    seen = {graph.start}
    frontier = [graph.start]
    while frontier:
        for nxt in _successors(graph, frontier.pop()):
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    for cid in graph.criteria:
        if cid not in seen:
            problems.append((("criteria", cid), f"unreachable node: no branch leads to {cid!r} from start {graph.start!r}"))
    decisions = {t for cid in seen for t in (graph.criteria[cid].if_present, graph.criteria[cid].if_absent) if t in DECISIONS}
    if DIAGNOSE not in decisions:
        problems.append((("start",), f"no path from start reaches {DIAGNOSE!r}"))
    return problems


def finding_leaves(node: Any, loc: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """``(location, leaf)`` of every leaf test (a node with a ``feature``) under a finding's ``all``/``any``/``not`` tree."""
    if not isinstance(node, dict):
        return
    for key in ("all", "any"):
        for position, child in enumerate(node.get(key) or []):
            yield from finding_leaves(child, loc + (key, position))
    if "not" in node:
        yield from finding_leaves(node["not"], loc + ("not",))
    if "feature" in node:
        yield loc, node


def diagnosis_references(node: Any, loc: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], str]]:
    """``(location, graph id)`` of every finding leaf under ``node`` that names another diagnosis."""
    return [(where + ("diagnosis",), str(leaf.get("diagnosis"))) for where, leaf in finding_leaves(node, loc) if leaf.get("feature") == DECISION_FEATURE]


def check_references(graphs: dict[str, DiagnosisGraph]) -> None:
    """Every named diagnosis exists in the same folder, and no graph reaches itself through them."""
    edges: dict[str, set[str]] = {}
    for gid, graph in graphs.items():
        edges[gid] = set()
        for cid, crit in graph.criteria.items():
            for loc, target in diagnosis_references(crit.finding, ("criteria", cid, "finding")):
                if target not in graphs or target == gid:
                    _, lines = read_yaml(graph.source or "")
                    why = "names itself" if target == gid else f"names unknown diagnosis {target!r} (graphs: {', '.join(sorted(graphs))})"
                    raise rubric_error(graph.source or gid, lines, loc, why)
                edges[gid].add(target)
        for k, target in enumerate(graph.requires.not_with):
            if target not in graphs or target == gid:
                _, lines = read_yaml(graph.source or "")
                why = "names itself" if target == gid else f"names unknown diagnosis {target!r} (graphs: {', '.join(sorted(graphs))})"
                raise rubric_error(graph.source or gid, lines, ("requires", "not_with", k), why)
            edges[gid].add(target)
    for gid in graphs:  # reference cycles: a depth-first walk from each graph
        stack, seen = [gid], set()
        while stack:
            node = stack.pop()
            for nxt in edges[node]:
                if nxt == gid:
                    raise RubricError(f"{graphs[gid].source}: diagnosis references form a cycle through {node!r} back to {gid!r}")
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
