"""Deterministic scoring of one answer to one Holtercare-Bench QA item.

:func:`score_answer` takes a QA item (the ``qa.jsonl`` format of DESIGN.md) and
the model's raw reply and returns a plain-JSON score record. It never raises on
model text. What is computed, by task family:

* **Closed QA** (``options`` is a list): the reply is read with
  :func:`ecgtrace.agents.exam.parsing.parse_answer`; ``correct`` is an exact match;
  ``score`` is 100 or 0.
* **Open numeric** (``answer_type`` ``integer`` or ``time_ms``, or any
  ``*_bpm`` type): the first number of the reply (see :func:`parse_number`,
  :func:`parse_times_ms`) gives an absolute error ``|pred - truth|`` in the
  unit of :data:`MAE_REFERENCE`. A task's aggregate is
  ``ScoreMAE = 100 / (1 + exp((MAE - mu) / sigma))`` over its items; each
  item also carries that formula applied to its own error. An unreadable
  reply, and any error above the cap ``mu + 5 sigma`` (ScoreMAE 0.67), counts
  as the cap, so one absurd number cannot dominate a mean.
* **Open timestamps** (``timestamps_ms``): every time in the reply is matched
  one-to-one to a true time within ``tolerance_ms`` (the item's
  ``provenance.params.tolerance_ms``, default 150 ms); see
  :func:`match_times`. Precision, recall and F1 per item; the task reports
  the micro F1 (pooled TP/FP/FN) and the mean item F1.
* **Open label** (``open_diagnosis``): ``correct`` when the true diagnosis is
  named (synonyms, not negated) and no other abnormal diagnosis is; plus
  ROUGE-L against the label.
* **Free text** (``text``, e.g. ``open_evidence``, ``report_summary``):
  ROUGE-L F-measure (``rouge-score``, stemming on) times 100.
* **Reports**: see :mod:`ecgtrace.agents.exam.report_stats` (statistics extracted
  from the text and compared within tolerances, hallucinated findings).

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
import re
from functools import lru_cache
from typing import Any

from ecgtrace.agents.exam.parsing import is_correct, json_values, parse_answer, strip_thinking

SCORING_VERSION = "1"
DEFAULT_TOLERANCE_MS = 150

#: ScoreMAE reference distributions; see the module docstring for the justification.
MAE_REFERENCE: dict[str, dict[str, Any]] = {
    "count_window": {"mu": 1.0, "sigma": 0.2, "unit": "events"},
    "count_record": {"mu": 0.10, "sigma": 0.02, "unit": "fraction of the true count"},
    "time_record": {"mu": 10.0, "sigma": 2.0, "unit": "s"},
    "hr_bpm": {"mu": 5.0, "sigma": 1.0, "unit": "bpm"},
}
CAP_SIGMAS = 5.0

_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_WORDS = {"zero": 0, "no": 0, "none": 0, "one": 1, "a single": 1, "single": 1, "two": 2, "three": 3, "four": 4,
          "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_UNIT_AFTER = re.compile(r"\s*(?:ms\b|msec|millisecond|s\b|sec|second|min\b|minute|h\b|hr\b|hour|bpm|%|mv\b|mm\b|hz\b)", re.I)
_RANGE_AFTER = re.compile(rf"\s*(?:to|and|-|\u2013)\s*{_NUM}" + _UNIT_AFTER.pattern, re.I)
_MARKER = re.compile(r"(?:final\s+answer|answer|count|total)\s*(?:is|=|:)\s*", re.I)
_TIME_UNIT = re.compile(
    rf"(?P<v>{_NUM})\s*(?P<u>ms\b|msec\w*|milliseconds?|s\b|secs?\b|seconds?|min\b|mins\b|minutes?|h\b|hrs?\b|hours?)", re.I)
_CLOCK = re.compile(r"(?<![\d:.])(\d{1,2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?(?![\d:])")
_UNIT_MS = {"ms": 1.0, "msec": 1.0, "millisecond": 1.0, "s": 1000.0, "sec": 1000.0, "second": 1000.0,
            "min": 60000.0, "minute": 60000.0, "h": 3.6e6, "hr": 3.6e6, "hour": 3.6e6}


def _to_float(token: str) -> float:
    return float(token.replace(",", ""))


def _json_answer(text: str) -> Any:
    for obj in json_values(text, opening="{"):
        if isinstance(obj, dict):
            for key in ("answer", "count", "value", "time_ms", "times_ms", "timestamps_ms"):
                if key in obj:
                    return obj[key]
    return None


def parse_number(text: Any) -> float | None:
    """The count a reply gives, or None.

    Order: a JSON ``{"answer": n}``; a marker (``Answer: 3``); else the first
    number that is not followed by a unit (``ms``, ``s``, ``bpm``, ``%`` ...)
    nor by ``to|and|-`` and a number with a unit (a range), so that "In the
    window from 120000 to 130000 ms there are 3 PVCs" reads 3; when there is
    no digit, number words (``three``; ``no``/``none`` = 0).
    """
    if not isinstance(text, str):
        return None
    body = strip_thinking(text)
    value = _json_answer(body)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        body = value
    marker = _MARKER.search(body)
    spans = [body[marker.end():], body] if marker else [body]
    word_re = re.compile(r"\b(" + "|".join(sorted(_WORDS, key=len, reverse=True)) + r")\b", re.I)
    for span in spans:
        candidates: list[tuple[int, float]] = []
        for match in re.finditer(_NUM, span):
            before = span[max(0, match.start() - 1):match.start()]
            if before and (before.isalnum() or before in ":."):
                continue
            if _UNIT_AFTER.match(span, match.end()) or _RANGE_AFTER.match(span, match.end()):
                continue
            candidates.append((match.start(), _to_float(match.group())))
        if not candidates:
            candidates = [(m.start(), float(_WORDS[m.group(1).lower()])) for m in word_re.finditer(span)]
        if candidates:
            return min(candidates)[1]
    return None


def parse_times_ms(text: Any, *, bare: bool = True) -> list[float]:
    """Every time a reply names, in ms from the recording start, in reply order.

    Times with a unit (``1200 ms``, ``1.2 s``, ``2 min``, ``1 h``) and clock
    times (``00:20:01.500`` = elapsed h:m:s from the start) are read; only when
    there is none are bare numbers read as ms (the questions ask for ms).
    "none" / "no events" gives an empty list. A JSON list under ``answer`` is
    read as ms. ``bare=False`` never reads unitless numbers.
    """
    if not isinstance(text, str):
        return []
    body = strip_thinking(text)
    value = _json_answer(body)
    if isinstance(value, list) and all(isinstance(v, int | float) for v in value):
        return [float(v) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [float(value)]
    if isinstance(value, str):
        body = value
    found: list[tuple[int, float]] = []
    taken: list[tuple[int, int]] = []
    for match in _CLOCK.finditer(body):
        h, m, s, frac = match.groups()
        ms = ((int(h) * 60 + int(m)) * 60 + int(s)) * 1000.0 + (float(f"0.{frac}") * 1000.0 if frac else 0.0)
        found.append((match.start(), ms))
        taken.append(match.span())
    for match in _TIME_UNIT.finditer(body):
        if any(a <= match.start() < b for a, b in taken):
            continue
        unit = match.group("u").lower().rstrip("s") or "s"
        unit = next((k for k in sorted(_UNIT_MS, key=len, reverse=True) if unit.startswith(k)), "ms")
        found.append((match.start(), _to_float(match.group("v")) * _UNIT_MS[unit]))
    if not found and bare:
        for match in re.finditer(_NUM, body):
            before = body[max(0, match.start() - 1):match.start()]
            if before and before.isalnum():
                continue
            found.append((match.start(), _to_float(match.group())))
    return [round(v, 3) for _, v in sorted(found)]


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


# ------------------------------------------------------------------ dispatch

def tolerance_ms(item: dict[str, Any]) -> float:
    params = (item.get("provenance") or {}).get("params") or {}
    tol = params.get("tolerance_ms")
    return float(tol) if isinstance(tol, int | float) else float(DEFAULT_TOLERANCE_MS)


def family(item: dict[str, Any]) -> str:
    """closed | numeric | timestamps | label | text | report."""
    task = str(item.get("task", ""))
    kind = str(item.get("answer_type", ""))
    if item.get("options"):
        return "closed"
    if task.startswith("report_") or kind == "report_json":
        return "report"
    if kind in ("integer", "time_ms") or kind.endswith("_bpm"):
        return "numeric"
    if kind == "timestamps_ms":
        return "timestamps"
    if kind == "label":
        return "label"
    return "text"


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


def score_answer(item: dict[str, Any], raw: Any, *, error: str | None = None) -> dict[str, Any]:
    """Score one reply; returns ``{family, parsed, parse_ok, parse_reason, correct, score, details}``.

    ``correct`` is a bool for closed, numeric (within tolerance: 0 events for
    counts, ``tolerance_ms`` for times), timestamps (F1 == 1) and labels;
    None for free text and reports. ``score`` is 0-100.
    """
    fam = family(item)
    out: dict[str, Any] = {"family": fam, "parsed": None, "parse_ok": False, "parse_reason": None, "correct": None,
                           "score": 0.0, "details": {}}
    if error:
        out["parse_reason"] = "no answer: server error"
    text = raw if isinstance(raw, str) else None
    if fam == "closed":
        if not error:
            parsed = parse_answer(text, list(item["options"]), False)
            out.update(parsed=parsed.value, parse_ok=parsed.ok, parse_reason=parsed.reason or None)
        out["correct"] = bool(out["parse_ok"] and is_correct(out["parsed"], item["answer"]))
        out["score"] = 100.0 if out["correct"] else 0.0
        return out
    if fam == "numeric":
        pred = None
        if not error:
            if item.get("answer_type") == "time_ms":
                times = parse_times_ms(text)
                pred = times[0] if times else None
            else:
                pred = parse_number(text)
        out.update(parsed=pred, parse_ok=pred is not None)
        if pred is None and not error:
            out["parse_reason"] = "no number in the reply"
        details = numeric_error(item, pred)
        truth = details["truth"]
        tol = tolerance_ms(item) if item.get("answer_type") == "time_ms" else 0.0
        out["correct"] = bool(pred is not None and truth is not None and abs(pred - truth) <= tol)
        out["score"] = details["score"]
        out["details"] = {**details, "tolerance": tol}
        return out
    if fam == "timestamps":
        pred_t = parse_times_ms(text) if not error else []
        truth_t = parse_times_ms(str(item.get("answer", "")))
        tol = tolerance_ms(item)
        match = match_times(pred_t, truth_t, tol)
        out.update(parsed=pred_t, parse_ok=not error and text is not None, details={**match, "truth": truth_t})
        out["correct"] = match["f1"] == 1.0 and not error
        out["score"] = round(100.0 * match["f1"], 4) if not error else 0.0
        return out
    if fam == "label":
        from ecgtrace.agents.exam.report_stats import label_verdict

        verdict = label_verdict(text or "", str(item.get("answer", ""))) if not error else {"correct": False, "named": []}
        rl = rouge_l(strip_thinking(text or ""), str(item.get("answer", ""))) if not error else {"f1": 0.0}
        out.update(parsed=verdict.get("named"), parse_ok=bool(text) and not error, correct=bool(verdict["correct"]),
                   score=100.0 if verdict["correct"] else 0.0, details={"rouge_l": rl, **verdict})
        return out
    if fam == "report":
        from ecgtrace.agents.exam.report_stats import score_report

        details = score_report(item, text or "") if not error else {"field_accuracy": 0.0}
        if not str(item.get("answer", "")).lstrip().startswith("{"):
            details["rouge_l"] = rouge_l(strip_thinking(text or ""), str(item.get("answer", ""))) if not error else {"f1": 0.0}
        out.update(parsed=details.get("extracted"), parse_ok=bool(text) and not error, details=details,
                   score=round(100.0 * float(details.get("field_accuracy") or 0.0), 4))
        return out
    rl = rouge_l(strip_thinking(text or ""), str(item.get("answer", ""))) if not error else {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    out.update(parsed=None, parse_ok=bool(text) and not error, details={"rouge_l": rl}, score=round(100.0 * rl["f1"], 4))
    return out
