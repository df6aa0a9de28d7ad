"""Shortcut probes: can a dataset's closed questions be answered without the ECG?

For every closed question of ``qa.jsonl`` (items with ``options``) and of
``audit.jsonl`` (every turn: initial, criterion, finding, grounding, decision)
three probes are run, per task / stage, per diagnosis / finding, and overall:

* **Answer position**: how often the answer is option A, B, C ... Expected
  counts under a uniform placement are ``sum_q 1/n_q`` per position (questions
  with fewer options contribute to fewer positions); chi-square goodness of
  fit. Groups whose option list is the same fixed list for every question
  (Yes/No, the decision options) are marked ``fixed_options``: there the
  position *is* the answer class, so imbalance means label imbalance.
* **Answer length**: is the answer the longest (shortest) option more often
  than chance? A question whose longest options are ``L_q`` of ``n_q`` hits
  with probability ``|L_q|/n_q`` under chance; the number of hits is
  Poisson-binomial and the one-sided p-value ``P(X >= hits)`` is exact
  (convolution of the binomials of each distinct probability).
* **Text-only prior**: the ``prior`` examinee of
  :mod:`ecgtrace.agents.exam.examinees` (sees option texts only) answers every
  question; its accuracy is tested against chance (``1/n_q``; multi-select:
  ``1/(2^n_q - 1)``, exact set) with the same exact one-sided test.

* **Select all** (multi-select questions only): how often "every option" is
  the exact answer, against ``1/(2^n_q - 1)``. A dataset where findings show in
  every lead lets a text-only model answer lead questions this way; the
  ``prior`` examinee (which picks one option) cannot reveal it.

p-values are Holm-adjusted over every test in the report; a part of the
dataset is **flagged** when an adjusted p is below ``alpha`` (default 0.05):
``position``, ``longest``, ``shortest``, ``prior`` (text-only beats chance) or
``select_all``.
Groups with fewer than :data:`MIN_N` questions are reported but not tested.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from ecgtrace.agents.exam.baselines import chance_of, poisson_binomial_sf
from ecgtrace.errors import EcgTraceError

MIN_N = 5
ALPHA = 0.05
PROBES = ("position", "longest", "shortest", "prior", "select_all")


# ------------------------------------------------------------------ questions

def collect_questions(path: str | Path) -> list[dict[str, Any]]:
    """Closed questions of ``qa.jsonl`` and ``audit.jsonl`` in ``path`` (a folder, or one dataset file of either kind).

    A file's kind is what its items declare (:func:`ecgtrace.contracts.datasets.kind_of_file`);
    each file is read through its contract (:func:`ecgtrace.contracts.load_items`).
    """
    from ecgtrace.contracts.datasets import dataset_file, kind_of_file

    target = Path(path)
    if target.is_file():
        files = [(target, kind_of_file(target))]
    else:
        files = [(dataset_file(target, kind), kind) for kind in ("qa", "audit") if dataset_file(target, kind).is_file()]
    if not files:
        raise EcgTraceError(f"{target}: no qa.jsonl or audit.jsonl found")
    questions: list[dict[str, Any]] = []
    for file, kind in files:
        questions += _audit_questions(file) if kind == "audit" else _qa_questions(file)
    return questions


def _audit_questions(file: Path) -> list[dict[str, Any]]:
    """Every turn of every audit item: each is a closed question."""
    from ecgtrace.agents.audit.examiner import plan_turns
    from ecgtrace.contracts.datasets import load_items

    out = []
    for item in load_items(file, "audit").items:
        for turn in plan_turns(item):
            task = f"audit:{turn['stage']}" + (f":{turn['kind']}" if turn.get("kind") else "")
            out.append({"source": "audit", "id": f"{item.id}#{turn['index']}", "task": task, "finding": item.diagnosis,
                        "options": turn["options"], "answer": turn["answer"], "multi": turn["multi"]})
    return out


def _qa_questions(file: Path) -> list[dict[str, Any]]:
    """The QA items that have options."""
    from ecgtrace.contracts.datasets import load_items

    return [{"source": "qa", "id": item.id, "task": item.task, "finding": item.finding, "options": list(item.options),
             "answer": item.answer, "multi": False} for item in load_items(file, "qa").items if item.options]


# ------------------------------------------------------------------ statistics

def _position(questions: list[dict[str, Any]]) -> dict[str, Any]:
    single = [q for q in questions if not q["multi"]]
    width = max((len(q["options"]) for q in single), default=0)
    observed = np.zeros(width)
    expected = np.zeros(width)
    for q in single:
        observed[q["options"].index(q["answer"])] += 1
        expected[: len(q["options"])] += 1.0 / len(q["options"])
    fixed = len({tuple(q["options"]) for q in single}) == 1 and len(single) > 1
    out: dict[str, Any] = {"n": len(single), "observed": [int(x) for x in observed], "expected": [round(float(x), 3) for x in expected],
                           "fixed_options": fixed, "p": None}
    keep = expected > 0
    if len(single) >= MIN_N and keep.sum() >= 2:
        from scipy.stats import chisquare

        out["statistic"] = round(float(chisquare(observed[keep], expected[keep]).statistic), 6)
        out["p"] = float(chisquare(observed[keep], expected[keep]).pvalue)
    return out


def _length(questions: list[dict[str, Any]], longest: bool) -> dict[str, Any]:
    hits, probs = 0, []
    for q in questions:
        if q["multi"]:
            continue
        lengths = [len(o) for o in q["options"]]
        target = max(lengths) if longest else min(lengths)
        extreme = [o for o, n in zip(q["options"], lengths) if n == target]
        if len(extreme) == len(q["options"]):
            continue  # all options equally long: no information
        probs.append(len(extreme) / len(q["options"]))
        hits += q["answer"] in extreme
    n = len(probs)
    return {"n": n, "hits": hits, "rate": round(hits / n, 6) if n else None, "chance": round(sum(probs) / n, 6) if n else None,
            "p": poisson_binomial_sf(hits, probs) if n >= MIN_N else None}


def _select_all(questions: list[dict[str, Any]]) -> dict[str, Any]:
    multi = [q for q in questions if q["multi"]]
    hits = sum(1 for q in multi if sorted(q["answer"]) == sorted(q["options"]))
    probs = [chance_of(q["options"], multi=True) for q in multi]
    n = len(multi)
    return {"n": n, "hits": hits, "rate": round(hits / n, 6) if n else None, "chance": round(sum(probs) / n, 6) if n else None,
            "p": poisson_binomial_sf(hits, probs) if n >= MIN_N else None}


def prior_answers(questions: list[dict[str, Any]]) -> list[bool]:
    """Whether the ``prior`` examinee (option texts only) answers each question correctly."""
    from ecgtrace.agents.exam.examinees import make_examinee
    from ecgtrace.agents.exam.turns import closed_row, turn_spec

    prior = make_examinee("prior")
    turns = [turn_spec(index=0, stage=q["task"], question="", options=q["options"], answer=q["answer"], multi=q["multi"],
                       sample_id=q["id"]) for q in questions]

    async def answers() -> list[Any]:
        return [await prior.answer([], turn) for turn in turns]

    return [bool(closed_row(turn, "", reply)["correct"]) for turn, reply in zip(turns, asyncio.run(answers()))]


def _prior(questions: list[dict[str, Any]]) -> dict[str, Any]:
    hits = sum(1 for q in questions if q["prior_ok"])
    probs = [chance_of(q["options"], q["multi"]) for q in questions]
    n = len(questions)
    return {"n": n, "correct": hits, "accuracy": round(hits / n, 6) if n else None, "chance": round(sum(probs) / n, 6) if n else None,
            "p": poisson_binomial_sf(hits, probs) if n >= MIN_N else None}


def _holm(pvalues: list[float]) -> list[float]:
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted = [0.0] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def probe(path: str | Path, *, alpha: float = ALPHA) -> dict[str, Any]:
    """Run every probe on the dataset at ``path``; returns plain JSON (see the module docstring)."""
    questions = collect_questions(path)
    if not questions:
        raise EcgTraceError(f"{path}: no closed questions to probe")
    for q, ok in zip(questions, prior_answers(questions)):
        q["prior_ok"] = ok
    groups: list[dict[str, Any]] = []
    for source in sorted({q["source"] for q in questions}):
        mine = [q for q in questions if q["source"] == source]
        parts: list[tuple[str, str, list[dict[str, Any]]]] = [("all", "all", mine)]
        for by in ("task", "finding"):
            buckets: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for q in mine:
                if q.get(by):
                    buckets[str(q[by])].append(q)
            parts += [(by, name, buckets[name]) for name in sorted(buckets)]
        for by, name, qs in parts:
            groups.append({"source": source, "by": by, "group": name, "n": len(qs), "position": _position(qs),
                           "longest": _length(qs, True), "shortest": _length(qs, False), "prior": _prior(qs),
                           "select_all": _select_all(qs)})
    tests = [(g, key) for g in groups for key in PROBES if g[key]["p"] is not None]
    adjusted = _holm([g[key]["p"] for g, key in tests])
    for g in groups:
        g["flags"] = []
    for (g, key), p_adj in zip(tests, adjusted):
        g[key]["p"] = round(g[key]["p"], 8)
        g[key]["p_holm"] = round(p_adj, 8)
        significant = p_adj < alpha
        if key == "prior":
            significant = significant and g[key]["accuracy"] > g[key]["chance"]
        if significant:
            g["flags"].append(key)
    return {"path": str(path), "alpha": alpha, "n_questions": len(questions), "n_tests": len(tests), "groups": groups,
            "flagged": [f"{g['source']}:{g['by']}={g['group']}: {', '.join(g['flags'])}" for g in groups if g["flags"]]}
