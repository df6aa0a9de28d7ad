"""Per-answer metrics of the QA scoring families: time matching, ScoreMAE, ROUGE-L, numeric errors.

:mod:`ecgtrace.agents.exam.qa_families` scores a reply with these and re-exports them.

ScoreMAE reference error distributions (``mu`` = the MAE that scores 50,
``sigma`` = its spread; a perfect answer scores ``100 / (1 + exp(-mu/sigma))``):

* ``count_window`` - events counted in a 10-30 s window, error in events:
  mu = 1, sigma = 0.2. The reference error is that of a reader who picks the
  nearest count distractor the benchmark builds (answer -1/+1): a model whose
  counts are one event off on average is no better than a plausible wrong
  answer and scores 50. MAE 0 -> 99.3, 0.5 -> 92.4, 2 -> 0.7.
* ``count_record`` - episodes counted over a whole recording, error as a
  fraction of the truth ``|pred - truth| / max(truth, 1)``: mu = 0.10,
  sigma = 0.02. Whole-record counts range from 0 to thousands, so an absolute
  error cannot share one scale; 10 % is the disagreement we accept between
  two Holter analyses of one recording. MAE 0 -> 99.3, 0.05 -> 92.4.
* ``time_record`` - HR-extremum time over a recording, error in seconds:
  mu = 10 s, sigma = 2 s. 10 s is one standard strip: a model that finds the
  right strip but not the beat scores 50; the template tolerance (2 s)
  scores 98.2; the benchmark's nearest far distractor (60 s) scores 0.
* ``hr_bpm`` - heart rates, error in bpm: mu = 5 bpm, sigma = 1 bpm, from the
  +-5 bpm accuracy asked of heart-rate meters (ANSI/AAMI EC13).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from ecgtrace.agents.exam.reply_values import parse_number, parse_times_ms

DEFAULT_TOLERANCE_MS = 150

#: ScoreMAE reference distributions; see the module docstring for the justification.
MAE_REFERENCE: dict[str, dict[str, Any]] = {
    "count_window": {"mu": 1.0, "sigma": 0.2, "unit": "events"},
    "count_record": {"mu": 0.10, "sigma": 0.02, "unit": "fraction of the true count"},
    "time_record": {"mu": 10.0, "sigma": 2.0, "unit": "s"},
    "hr_bpm": {"mu": 5.0, "sigma": 1.0, "unit": "bpm"},
}
CAP_SIGMAS = 5.0


def match_times(pred_ms: list[float], true_ms: list[float], tol_ms: float) -> dict[str, Any]:
    """One-to-one matching of predicted to true times within ``+-tol_ms``; P, R, F1.

    Both lists are sorted and walked with two pointers: the earliest unmatched
    prediction is paired with the earliest unmatched truth when they are within
    tolerance, otherwise the earlier of the two is dropped. On a line with a
    symmetric tolerance this greedy gives a maximum matching (an exchange
    argument: pairing the two earliest compatible points never blocks a larger
    matching), i.e. the same TP as an optimal assignment. Duplicated
    predictions match at most one truth each. Empty truth and empty
    prediction give P = R = F1 = 1.
    """
    pred, true = sorted(pred_ms), sorted(true_ms)
    i = j = tp = 0
    pairs = []
    while i < len(pred) and j < len(true):
        if abs(pred[i] - true[j]) <= tol_ms:
            pairs.append([pred[i], true[j]])
            tp += 1
            i += 1
            j += 1
        elif pred[i] < true[j]:
            i += 1
        else:
            j += 1
    fp, fn = len(pred) - tp, len(true) - tp
    if not pred and not true:
        precision = recall = f1 = 1.0
    else:
        precision = tp / len(pred) if pred else 0.0
        recall = tp / len(true) if true else 0.0
        f1 = 2 * tp / (2 * tp + fp + fn)
    return {"tp": tp, "fp": fp, "fn": fn, "precision": round(precision, 6), "recall": round(recall, 6),
            "f1": round(f1, 6), "pairs": pairs, "tolerance_ms": tol_ms}


def score_mae(mae: float, mu: float, sigma: float) -> float:
    """``100 / (1 + exp((mae - mu) / sigma))`` (overflow-safe)."""
    z = (mae - mu) / sigma
    if z > 700:
        return 0.0
    return 100.0 / (1.0 + math.exp(z))


@lru_cache(maxsize=1)
def _rouge():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(prediction: str, reference: str) -> dict[str, float]:
    """ROUGE-L (longest common subsequence of tokens) with ``rouge-score``; values in [0, 1]."""
    score = _rouge().score(reference or "", prediction or "")["rougeL"]
    return {"precision": round(score.precision, 6), "recall": round(score.recall, 6), "f1": round(score.fmeasure, 6)}


def tolerance_ms(item: dict[str, Any]) -> float:
    params = (item.get("provenance") or {}).get("params") or {}
    tol = params.get("tolerance_ms")
    return float(tol) if isinstance(tol, int | float) else float(DEFAULT_TOLERANCE_MS)


def reference_key(item: dict[str, Any]) -> str:
    """Which :data:`MAE_REFERENCE` entry scores a numeric item."""
    kind = str(item.get("answer_type", ""))
    if kind.endswith("_bpm"):
        return "hr_bpm"
    if kind == "time_ms":
        return "time_record"
    return "count_window" if item.get("window") else "count_record"


def numeric_truth(item: dict[str, Any]) -> float | None:
    kind = str(item.get("answer_type", ""))
    answer = item.get("answer")
    if isinstance(answer, int | float) and not isinstance(answer, bool):
        return float(answer)
    if kind == "time_ms":
        times = parse_times_ms(str(answer))
        return times[0] if times else None
    return parse_number(str(answer))


def numeric_error(item: dict[str, Any], pred: float | None) -> dict[str, Any]:
    """Error in the reference unit, capped; the item's own ScoreMAE."""
    key = reference_key(item)
    ref = MAE_REFERENCE[key]
    cap = ref["mu"] + CAP_SIGMAS * ref["sigma"]
    truth = numeric_truth(item)
    if pred is None or truth is None:
        error = cap
    elif key == "time_record":
        error = abs(pred - truth) / 1000.0
    elif key == "count_record":
        error = abs(pred - truth) / max(abs(truth), 1.0)
    else:
        error = abs(pred - truth)
    error = min(error, cap)
    return {"reference": key, "error": round(error, 6), "capped": error >= cap, "truth": truth,
            "score": round(score_mae(error, ref["mu"], ref["sigma"]), 4)}
