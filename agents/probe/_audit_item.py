"""A counterfactual audit item: the edited window's own reasoning chain, asked in the original's words, and its paired turns.

The chain is what the audit builder would write for the edited window
(:func:`ecgtrace.agents.audit.builder._assemble` on the features measured on
it, the diagnosis graph evaluated on them). Wherever it visits a criterion the
original also visits, the question texts are the original's, so that the only
difference between the two is the evidence:

* initial question, criterion question, finding and decision questions: the
  original's text; the answer is the edited window's (a negated finding
  wording answers the complement);
* grounding questions of a finding present in both: the original's question
  and options, answered from the edited window (a wave option is right when
  it overlaps a correct span by half; a measurement option when it holds the
  value; a lead set recomputed with the rule's margin). After a ``move`` the
  two options that covered the moved beat and its new place are redrawn there.
  A grounding question the edited window cannot answer among those options is
  left out of the counterfactual (and named).

:func:`turn_pairs` lists the turns asked of both, each with what its answer
should do (``change``, ``same``, ``follow``).
"""

from __future__ import annotations

import copy
import re
from types import SimpleNamespace
from typing import Any

from ecgtrace.agents.audit._questions import _overlap, _wave_spans, beat_option_span, decision_answer, pair_text, span_text
from ecgtrace.agents.audit.engine import MissingFeature, feature_in_unit, grounding_leads, lead_values
from ecgtrace.agents.exam._visual_prior import option_range_s
from ecgtrace.contracts.audit import YES_NO, AuditItem
from ecgtrace.rubrics.diagnosis_schema import DiagnosisGraph, GroundingRule, unit_factor

_BIN = re.compile(r"\[(-?[\d.]+)(?:-| to )(-?[\d.]+)\]")


def chain_item(o: dict[str, Any], graph: DiagnosisGraph, graphs: dict[str, DiagnosisGraph], info: Any, wf: Any, path: Any, seed: int,
               beats_provenance: dict[str, Any]) -> dict[str, Any]:
    """The audit item the builder writes for features ``wf`` and ground-truth path ``path`` (lead and measurement questions placed)."""
    import numpy as np

    from ecgtrace.agents.audit._leads import balance_leads
    from ecgtrace.agents.audit._questions import balance_measurement
    from ecgtrace.agents.audit.builder import _assemble

    labels = SimpleNamespace(kind="synthetic" if o["record"]["db"] == "synthetic" else "none", source="computed", method="")
    t0, t1 = o["window"]["t0_s"], o["window"]["t1_s"]
    item = _assemble(graph, info, labels, False, None, wf, path, t0, t1, seed, beats_provenance)
    rng = np.random.default_rng([int(seed), len(o["id"])])
    balance_leads([item], graphs, rng)
    balance_measurement([item], rng)
    item["record"] = copy.deepcopy(o["record"])
    return item


def _rule(crit: Any, kind: str, question: str) -> tuple[int, GroundingRule] | None:
    for r, rule in enumerate(crit.grounding):
        if rule.kind == kind and question in rule.questions:
            return r, rule
    return None


def _lead_rule(o: dict[str, Any], loop: int, crit: Any, question: str) -> tuple[GroundingRule, dict[str, Any]] | None:
    from ecgtrace.agents.audit._leads import _fmt_num

    for entry in o["provenance"]["params"].get("lead_grounding", []):
        if entry["loop"] != loop or entry.get("dropped") or entry.get("chosen") is None:
            continue
        rule = crit.grounding[entry["rule"]]
        cand = entry["candidates"][entry["chosen"]]
        pool = rule.complement_questions if cand["complement"] else rule.questions
        if question in [q.replace("{value}", _fmt_num(cand["value"])) for q in pool]:
            return rule, cand
    return None


def _wave_answer(options: list[str], target: str, beats: list[dict[str, Any]], window: dict[str, Any]) -> str | None:
    if target == "dropped_beat_pair":
        opener = [b for b in beats if b.get("opens_long_rr")]
        text = pair_text(int(opener[0]["ordinal"])) if opener else None
        return text if text in options else None
    correct, _ = _wave_spans(target, beats)
    correct = [c for c in correct if c[0] >= window["t0_s"] and c[1] <= window["t1_s"]]
    hits = []
    for o in options:
        span = option_range_s(o)
        if span and any(_overlap(span, c) >= 0.5 * min(span[1] - span[0], c[1] - c[0]) for c in correct):
            hits.append(o)
    return hits[0] if len(hits) == 1 else None


def _measurement_answer(options: list[str], rule: GroundingRule, features: dict[str, Any]) -> str | None:
    try:
        value = feature_in_unit(features, rule.feature or "", rule.unit or "")
    except MissingFeature:
        return None
    for o in options:
        m = _BIN.match(o)
        if m and float(m.group(1)) - 1e-9 <= value < float(m.group(2)) - 1e-9:
            return o
    return None


def _lead_answer(options: list[str], rule: GroundingRule, cand: dict[str, Any], features: dict[str, Any]) -> list[str] | None:
    try:
        hits = {h.strip().upper() for h in grounding_leads(rule, features, cand["value"])}
    except MissingFeature:
        return None
    measured = {k.strip().upper(): v for k, v in lead_values(features, rule.feature or "").items()}
    factor = unit_factor(rule.feature or "", rule.unit or "") or 1.0
    threshold, margin = float(cand["value"]) * factor, float(rule.margin or 0.0) * factor
    if any(measured.get(o.strip().upper()) is None or abs(measured[o.strip().upper()] - threshold) < margin for o in options):
        return None
    answer = [o for o in options if (o.strip().upper() in hits) != bool(cand["complement"])]
    return answer or None


def moved_options(options: list[str], o_beats: list[dict[str, Any]], redraw: dict[float, dict[str, Any]],
                  slide: tuple[float, float, float] | None = None) -> list[str] | None:
    """The options with each span that held an original beat in ``redraw`` (its R time, s) redrawn on the edited beat given.

    ``slide`` (``lo_s, hi_s, by_s``): the other spans inside that stretch moved by ``by_s``, with the signal the move slid.
    """
    spans = [option_range_s(o) for o in options]
    if any(s is None for s in spans):
        return None
    out = []
    for span in spans:
        assert span is not None
        hit = [r for r in redraw if span[0] <= r <= span[1]]
        if hit:
            span = beat_option_span(redraw[hit[0]], span[1] - span[0])
        elif slide is not None and slide[0] < span[0] and span[1] < slide[1]:
            span = (span[0] + slide[2], span[1] + slide[2])
        out.append(span)
    texts = [span_text(a, b) for a, b in sorted(out)]
    return texts if len(set(texts)) == len(texts) else None


def reground(g: dict[str, Any], crit: Any, o: dict[str, Any], o_loop: int, wf: Any, move: dict[str, Any] | None) -> tuple[dict[str, Any] | None, str]:
    """The original's grounding question ``g`` answered from the edited window's features: (question, '') or (None, why)."""
    out = copy.deepcopy(g)
    if g["kind"] == "wave":
        found = _rule(crit, "wave", g["question"])
        if found is None:
            return None, "wave_rule_unknown"
        if move is not None:
            options = moved_options(g["options"], move["original_beats"], move["redraw"], move.get("slide"))
            if options is None:
                return None, "wave_options_not_redrawable"
            out["options"] = options
        answer = _wave_answer(out["options"], found[1].target or "", wf.beats, o["window"])
    elif g["kind"] == "measurement":
        found = _rule(crit, "measurement", g["question"])
        answer = None if found is None else _measurement_answer(g["options"], found[1], wf.features)
    else:
        lead = _lead_rule(o, o_loop, crit, g["question"])
        answer = None if lead is None else _lead_answer(g["options"], lead[0], lead[1], wf.features)
    if answer is None:
        return None, f"{g['kind']}_not_answerable_on_edited_window"
    out["answer"] = answer
    return out, ""


def align(c: dict[str, Any], o: dict[str, Any], graph: DiagnosisGraph, wf: Any, *, ground: bool = True,
          move: dict[str, Any] | None = None) -> tuple[dict[tuple, tuple], list[str]]:
    """Put the original's question texts into ``c`` (in place) wherever both chains visit a criterion.

    Returns the map from ``c``'s turn keys to ``o``'s (``("initial",)``,
    ``(stage, loop)``, ``("grounding", loop, position)``) and the grounding
    questions left out, with why.
    """
    c["initial"] = {**copy.deepcopy(o["initial"]), "answer": YES_NO[0] if c["label"] else YES_NO[1]}
    o_steps = o["provenance"]["params"]["path"]["steps"]
    c_steps = c["provenance"]["params"]["path"]["steps"]
    where = {s["criterion"]: i for i, s in enumerate(o_steps)}
    keys: dict[tuple, tuple] = {("initial",): ("initial",)}
    left_out: list[str] = []
    for j, step in enumerate(c_steps):
        i = where.get(step["criterion"])
        if i is None:
            continue
        crit = graph.criteria[step["criterion"]]
        ol, cl = o["loops"][i], c["loops"][j]
        negated = ol["finding"]["question"] in crit.negated_questions
        cl["criterion"] = copy.deepcopy(ol["criterion"])
        cl["finding"] = {"question": ol["finding"]["question"], "options": list(YES_NO), "answer": YES_NO[0] if step["present"] != negated else YES_NO[1]}
        cl["decision"] = {**copy.deepcopy(ol["decision"]), "answer": decision_answer(step["next"])}
        keys.update({("criterion", j): ("criterion", i), ("finding", j): ("finding", i), ("decision", j): ("decision", i)})
        if ground and step["present"] and o_steps[i]["present"]:
            grounding = []
            for gi, g in enumerate(ol["grounding"]):
                q, why = reground(g, crit, o, i, wf, move)
                if q is None:
                    left_out.append(f"{step['criterion']}.{g['kind']}:{why}")
                    continue
                keys[("grounding", j, len(grounding))] = ("grounding", i, gi)
                grounding.append(q)
            cl["grounding"] = grounding
    AuditItem.model_validate(c)
    return keys, left_out


def _turn_keys(item: dict[str, Any]) -> dict[tuple, dict[str, Any]]:
    from ecgtrace.agents.audit.examiner import plan_turns

    out: dict[tuple, dict[str, Any]] = {}
    seen: dict[int, int] = {}
    for turn in plan_turns(item):
        if turn["stage"] == "initial":
            out[("initial",)] = turn
        elif turn["stage"] == "grounding":
            pos = seen.get(turn["loop"], 0)
            seen[turn["loop"]] = pos + 1
            out[("grounding", turn["loop"], pos)] = turn
        else:
            out[(turn["stage"], turn["loop"])] = turn
    return out


def turn_pairs(o: dict[str, Any], c: dict[str, Any], keys: dict[tuple, tuple], kind: str) -> list[dict[str, Any]]:
    """Every turn asked of both items with its expected behaviour (see the module docstring)."""
    o_turns, c_turns = _turn_keys(o), _turn_keys(c)
    pairs = []
    for ck, ok in keys.items():
        if ck not in c_turns or ok not in o_turns:
            continue
        ct, ot = c_turns[ck], o_turns[ok]
        same = sorted(ct["answer"]) == sorted(ot["answer"]) if isinstance(ct["answer"], list) else ct["answer"] == ot["answer"]
        moved = kind == "move" and ct["stage"] == "grounding" and ct["kind"] == "wave"
        expect = "same" if same else ("follow" if moved else "change")
        pairs.append({"stage": ct["stage"], "kind": ct["kind"], "original": ot["index"], "counterfactual": ct["index"], "expect": expect,
                      "original_answer": ot["answer"], "counterfactual_answer": ct["answer"]})
    return sorted(pairs, key=lambda p: p["original"])
