"""What a blind guess, and the protocol's own prior, score on the items a run examined.

The ``random`` examinee is one seeded draw of uniform guessing; its expected
score - *chance* - follows from the options alone: ``1/n`` per single-choice
question, ``1/(2^n - 1)`` per multi-select one (the exact set), the product
over a chain's turns for Completion. The ``prior`` examinee never sees the
ECG; where it beats chance the items carry a shortcut, and the audit protocol
has one by design: in ECG-Reasoning-Benchmark's protocol the decision of every
loop but the last is "Further findings are required to confirm the diagnosis"
(the option that is neither Yes nor No), so a text-only policy that always
picks it scores the share of such decisions, not 1/3. :func:`audit_baselines`
computes both, so every message about a baseline can quote its numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def chance_of(options: list[str], multi: bool = False) -> float:
    """Probability that a uniform guess is exactly right: ``1/n``, or ``1/(2^n - 1)`` for a multi-select question."""
    n = len(options)
    if n == 0:
        return 0.0
    return 1.0 / (2**n - 1) if multi else 1.0 / n


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _continue_option(options: list[str]) -> str | None:
    """The decision option that is neither Yes nor No ("Further findings are required ..."), if there is one."""
    from ecgtrace.contracts.audit import YES_NO

    rest = [o for o in options if o not in YES_NO]
    return rest[0] if len(rest) == 1 else None


def audit_baselines(items: Iterable[Any]) -> dict[str, Any]:
    """Chance levels of IDA, decision accuracy and Completion over audit ``items``, and the protocol's prior on decisions.

    Returns plain JSON: ``ida``, ``decision``, ``completion`` (expected accuracy
    of a uniform guess, or None), ``initial_probs`` and ``decision_probs`` (each
    question's chance, for exact tests) and ``protocol_prior``: ``{"k", "n",
    "value", "option"}``, the decisions whose answer is the continue option.
    """
    from ecgtrace.agents.audit.examiner import plan_turns

    initial, decision, completion = [], [], []
    k_continue = n_decisions = 0
    option = None
    for item in items:
        chain = 1.0
        for turn in plan_turns(item):
            p = chance_of(turn["options"], bool(turn.get("multi")))
            if turn["stage"] == "initial":
                initial.append(p)
                continue
            chain *= p
            if turn["stage"] == "decision":
                decision.append(p)
                n_decisions += 1
                option = _continue_option(turn["options"]) or option
                k_continue += turn["answer"] == _continue_option(turn["options"])
        completion.append(chain)
    prior = {"k": k_continue, "n": n_decisions, "value": k_continue / n_decisions if n_decisions else None, "option": option}
    return {"ida": _mean(initial), "decision": _mean(decision), "completion": _mean(completion), "initial_probs": initial,
            "decision_probs": decision, "protocol_prior": prior}


def qa_baselines(items: Iterable[Any]) -> dict[str, Any]:
    """Chance level of closed accuracy over QA ``items`` (those with options), with each question's chance."""
    probs = [chance_of(list(it.options)) for it in items if getattr(it, "options", None)]
    return {"closed_accuracy": _mean(probs), "closed_probs": probs}


def beats_chance_p(hits: int, probs: list[float]) -> float | None:
    """One-sided exact p that a blind guesser with these per-question chances gets ``hits`` or more right (None: no questions)."""
    if not probs:
        return None
    return poisson_binomial_sf(int(hits), probs)


def score_ceiling(mu: float, sigma: float) -> float:
    """ScoreMAE of a perfect answer (MAE 0): ``100 / (1 + exp(-mu / sigma))``, below 100 by construction."""
    return 100.0 / (1.0 + math.exp(-mu / sigma))


def poisson_binomial_sf(hits: int, probs: list[float]) -> float:
    """``P(X >= hits)`` for X a sum of independent Bernoulli(p_i); exact."""
    if hits <= 0:
        return 1.0
    import numpy as np
    from scipy.stats import binom

    pmf = np.array([1.0])
    counts: dict[float, int] = {}
    for p in probs:
        key = round(float(p), 12)
        counts[key] = counts.get(key, 0) + 1
    for p, n in sorted(counts.items()):
        pmf = np.convolve(pmf, binom.pmf(np.arange(n + 1), n, p))
    return float(min(1.0, max(0.0, pmf[hits:].sum()))) if hits < pmf.size else 0.0
