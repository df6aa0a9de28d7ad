"""Lead-grounding questions that a text-only policy cannot answer ("select all", "select one", "select the first").

Many lead findings hold in every lead (P waves before most QRS, PR > 200 ms,
wide QRS), so "select every offered lead" used to be right on nearly every lead
question. Without changing any ground truth and without inventing leads:

Per question (build time, :func:`lead_entry`):

* offered leads: the rule's ``leads`` (else the record's) where the feature was
  measured, in a seeded random order, so that "select the first option" is one
  random lead;
* candidate thresholds: the rule's ``value`` and its ``values``. A threshold
  with a lead whose value lies within ``margin`` of it (the rule's ``margin``,
  never less than the feature's measurement tolerance,
  :func:`ecgtrace.rubrics.diagnosis_features.feature_tolerance`) is not asked
  (too close to call). Each remaining threshold answers with the set of leads where the
  predicate holds and, when the rule has ``complement_questions``, with the
  complement set (exact: the margin puts every lead clearly on one side).
  Empty sets are not candidates;
* no candidate left: the question is skipped, with reason
  ``near_threshold:<lead>`` or ``empty_lead_set`` in ``grounding_skipped``.

Over a set of items (:func:`balance_leads`, a record's or the final dataset):

1. every question that has a proper-subset candidate gets one: in a seeded
   random order, the candidate whose answer set (per number of offered leads)
   has been given least so far in the set, so answer sets are spread as evenly
   as the signals allow (a "select these leads" policy gains little);
2. the questions whose only candidate is the full set are kept one by one, in a
   seeded random order, while the count ``H`` of full-set answers stays within
   0.5 of its expectation under a uniform draw over the non-empty subsets,
   counted separately for each number ``n`` of offered leads:
   ``E_n = sum 1/(2**n - 1)`` over the kept lead questions with ``n`` leads,
   and a question with ``n`` leads is kept when
   ``H_n + 1 <= E_n + 1/(2**n - 1) + 0.5``; the others are dropped with reason
   ``balance_all_leads``. The full-set share is then about
   1/7 for 3 leads, 1/3 for 2 leads and ~0 for 12 leads, so "select all" sits at
   chance.

Every entry (offered leads, per-lead values, candidates, choice) is kept in the
item's ``provenance.params.lead_grounding``; the set-level pass rebuilds the
lead questions from it, so a record's balance can be redone over a dataset.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from ecgtrace.agents.audit._surface import LONGEST_PAIR_QUESTION, verify_wording
from ecgtrace.agents.audit.engine import MissingFeature, grounding_leads, lead_values
from ecgtrace.rubrics.diagnosis_features import feature_tolerance
from ecgtrace.rubrics.diagnosis_schema import DiagnosisGraph, GroundingRule, unit_factor

SKIP_BALANCE = "balance_all_leads"
ALL_LEADS_SLACK = 0.5  # full-set answers may exceed their uniform-subset expectation by at most this (in questions)


def _fmt_num(x: float) -> str:
    text = f"{round(x, 6):.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def lead_question_text(rule: GroundingRule, value: float, complement: bool, rng: np.random.Generator) -> str:
    """One wording of the rule (its complement wording when ``complement``) with ``{value}`` filled in."""
    pool = rule.complement_questions if complement else rule.questions
    return pool[int(rng.integers(len(pool)))].replace("{value}", _fmt_num(value))


def lead_entry(rule: GroundingRule, features: dict[str, Any], record_leads: list[str], rng: np.random.Generator) -> dict[str, Any]:
    """Offered leads, per-lead values and candidate answers of one lead rule (see the module docstring).

    Raises:
        ValueError: with the skip reason as ``args[0]`` (``feature_unavailable:...``,
            ``too_few_leads``, ``near_threshold:<lead>``, ``empty_lead_set``).
    """
    name = rule.feature or ""
    try:
        grounding_leads(rule, features)
    except MissingFeature as exc:
        raise ValueError(f"feature_unavailable:{exc.feature}") from None
    measured = {lead.strip().upper(): v for lead, v in lead_values(features, name).items()}
    norm = {lead.strip().upper(): lead for lead in record_leads}
    wanted = [x.strip().upper() for x in rule.leads] if rule.leads else list(norm)
    offered = [norm[x] for x in wanted if x in norm and x in measured]  # an unmeasured lead has no ground truth: not offered
    if len(offered) < 2:
        raise ValueError("too_few_leads")
    offered = [offered[int(i)] for i in rng.permutation(len(offered))]
    factor = unit_factor(name, rule.unit or "") or 1.0
    candidates: list[dict[str, Any]] = []
    near: list[str] = []
    for value in [float(rule.value or 0.0), *(float(v) for v in rule.values)]:
        threshold = value * factor
        # the rule's own margin, but never less than the feature's measurement tolerance (the decision findings' doubt)
        margin = max(float(rule.margin or 0.0) * factor, feature_tolerance(name, threshold))
        close = [lead for lead in offered if abs(measured[lead.strip().upper()] - threshold) < margin or measured[lead.strip().upper()] == threshold]
        if close:
            near.extend(c for c in close if c not in near)
            continue
        hits = {h.strip().upper() for h in grounding_leads(rule, features, value)}
        inside = [lead for lead in offered if lead.strip().upper() in hits]
        outside = [lead for lead in offered if lead.strip().upper() not in hits]
        if inside:
            candidates.append({"value": value, "complement": False, "answer": inside})
        if outside and rule.complement_questions:
            candidates.append({"value": value, "complement": True, "answer": outside})
    if not candidates:
        raise ValueError(f"near_threshold:{','.join(near)}" if near else "empty_lead_set")
    return {"options": offered, "values": {lead: measured[lead.strip().upper()] for lead in offered}, "unit": rule.unit,
            "candidates": candidates, "chosen": None, "dropped": None}


def _full_rate(n: int) -> float:
    return 1.0 / (2 ** n - 1)


def balance_leads(items: list[dict[str, Any]], graphs: dict[str, DiagnosisGraph], rng: np.random.Generator) -> None:
    """Choose every lead question's threshold and wording over ``items`` and rebuild them in place (module docstring)."""
    slots = [(n, e) for n, item in enumerate(items) for e in range(len(item["provenance"]["params"].get("lead_grounding", [])))]
    slots = [slots[int(i)] for i in rng.permutation(len(slots))]
    used: Counter = Counter()
    full_only: list[tuple[int, int]] = []
    expected: Counter = Counter()  # per number of offered leads
    for n, e in slots:
        entry = items[n]["provenance"]["params"]["lead_grounding"][e]
        size = len(entry["options"])
        proper = [k for k, c in enumerate(entry["candidates"]) if len(c["answer"]) < size]
        if not proper:
            full_only.append((n, e))
            continue
        order = [proper[int(i)] for i in rng.permutation(len(proper))]
        pick = min(order, key=lambda k: used[(size, tuple(sorted(entry["candidates"][k]["answer"])))])
        used[(size, tuple(sorted(entry["candidates"][pick]["answer"])))] += 1
        entry["chosen"], entry["dropped"] = pick, None
        expected[size] += _full_rate(size)
    hits: Counter = Counter()
    for n, e in full_only:
        entry = items[n]["provenance"]["params"]["lead_grounding"][e]
        size = len(entry["options"])
        p = _full_rate(size)
        if hits[size] + 1 <= expected[size] + p + ALL_LEADS_SLACK:
            hits[size] += 1
            expected[size] += p
            entry["chosen"], entry["dropped"] = 0, None
        else:
            entry["chosen"], entry["dropped"] = None, SKIP_BALANCE
    for item in items:
        _rebuild(item, graphs[item["diagnosis"]], rng)


def _rebuild(item: dict[str, Any], graph: DiagnosisGraph, rng: np.random.Generator) -> None:
    params = item["provenance"]["params"]
    entries = params.get("lead_grounding", [])
    steps = params["path"]["steps"]
    by_slot = {(en["loop"], en["rule"]): en for en in entries}
    skipped = [s for s in params.get("grounding_skipped", []) if not s.endswith(f".lead:{SKIP_BALANCE}")]
    for j, loop in enumerate(item["loops"]):
        crit = graph.criteria[steps[j]["criterion"]]
        present = bool(steps[j]["present"])
        queue = [g for g in loop["grounding"] if g["kind"] != "lead"]
        out: list[dict[str, Any]] = []
        for r, rule in enumerate(crit.grounding):
            if rule.kind != "lead":
                if queue and queue[0]["kind"] == rule.kind and _asks(queue[0]["question"], rule, crit):
                    out.append(queue.pop(0))
                continue
            entry = by_slot.get((j, r))
            if entry is None:
                continue
            if entry["dropped"]:
                skipped.append(f"{steps[j]['criterion']}.lead:{entry['dropped']}")
                continue
            cand = entry["candidates"][entry["chosen"]]
            answer = [o for o in entry["options"] if o in cand["answer"]]
            text = lead_question_text(rule, cand["value"], cand["complement"], rng)
            out.append({"kind": "lead", "question": text if present else verify_wording(crit, text),
                        "options": list(entry["options"]), "answer": answer, "multi": True})
        loop["grounding"] = out + queue
    params["grounding_skipped"] = skipped


def _asks(question: str, rule: GroundingRule, crit: Any) -> bool:
    """The (wave or measurement) question is one of the rule's wordings, as such or as an absent finding's check."""
    wordings = [*rule.questions, LONGEST_PAIR_QUESTION]
    return question in wordings or question in [verify_wording(crit, q) for q in wordings]
