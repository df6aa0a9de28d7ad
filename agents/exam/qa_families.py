"""The scoring families of QA items: how one answer is scored, and how a task's scored samples are summarized.

Every QA task type (:mod:`ecgtrace.agents.holter.tasks`) names its family;
:func:`score_family` scores one reply of a family and :func:`family_block`
summarizes a task's samples for ``results.json``. Scoring is deterministic and
never raises on model text. What is computed, by family:

* **Closed QA** (``options`` is a list): the reply is read with
  :func:`ecgtrace.agents.exam.parsing.parse_answer` (a letter, a letter with
  the option's text, the text, a sentence: "D", "D. 1", "The answer is D. 1");
  ``correct`` is an exact match; ``score`` is 100 or 0. A yes/no question asked
  without options (Holtercare's free presence questions) reads Yes or No from
  the reply ("Yes, the rhythm pattern supports ...").
* **Open numeric** (``answer_type`` ``integer`` or ``time_ms``, or any
  ``*_bpm`` type): the first number of the reply (see
  :func:`~ecgtrace.agents.exam.reply_values.parse_number`,
  :func:`~ecgtrace.agents.exam.reply_values.parse_times_ms`) gives an absolute error ``|pred - truth|`` in the
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
* **Open label** (``open_diagnosis``, ``open_multi_diagnosis``): the answer is
  one diagnosis label or a set of them; the findings the reply asserts
  (synonyms, not negated: :mod:`ecgtrace.agents.exam.findings_text`) are
  compared as a set. ``correct`` is the exact-set match, ``score`` is 100 times
  the F1 of the findings (precision: asserted findings that are true, a
  finding compatible with a true one - the PVCs of a couplet - neither counts
  nor costs; recall: true findings asserted); plus ROUGE-L against the label.
* **Free text** (``text``, e.g. ``open_evidence``, ``report_summary``):
  ROUGE-L F-measure (``rouge-score``, stemming on) times 100.
* **Reports**: see :mod:`ecgtrace.agents.exam.report_stats` (statistics extracted
  from the text and compared within tolerances, hallucinated findings).

The ScoreMAE reference error distributions (:data:`MAE_REFERENCE`) and their
justification are in :mod:`ecgtrace.agents.exam._qa_metrics`.

Summaries (``per_task[task]`` in ``results.json``), by family:

* every task: ``n``, ``errors`` (server failures), ``parse_failures``,
  ``mean_score`` (0-100, normal 95 % interval of the mean);
* closed, numeric, timestamps, label: ``accuracy`` (Wilson 95 %), where a
  numeric answer is "correct" within tolerance (0 events for counts, the item's
  ``tolerance_ms`` for times) and a timestamp answer when its F1 is 1;
* numeric: ``score_mae[reference]`` = ``{"mae", "score_mae", "mu", "sigma", "unit", "n"}``
  with ``ScoreMAE = 100 / (1 + exp((MAE - mu) / sigma))`` over the task's items
  (:data:`MAE_REFERENCE`);
* timestamps: ``micro`` (pooled TP/FP/FN -> P/R/F1) and ``mean_f1``;
* label: ``micro`` (pooled TP/FP/FN of findings -> P/R/F1) and ``mean_f1``;
* label and text: ``rouge_l`` (mean ROUGE-L F, 0-1);
* report: ``field_accuracy`` (mean per sample, 0-1), ``fields[name]``
  (Wilson accuracy per statistic), ``completeness``, ``hallucination_rate``
  (samples asserting at least one finding absent from the truth, Wilson);
* judged tasks: ``judge`` = ``{"n", "failures", "score", "bands"}``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from ecgtrace.agents.exam.parsing import is_correct, parse_answer, strip_thinking
from ecgtrace.agents.exam.findings_text import label_verdict
from ecgtrace.agents.exam._qa_metrics import (
    CAP_SIGMAS,
    DEFAULT_TOLERANCE_MS,
    MAE_REFERENCE,
    match_times,
    numeric_error,
    numeric_truth,
    reference_key,
    rouge_l,
    score_mae,
    tolerance_ms,
)
from ecgtrace.agents.exam.report_stats import score_report
from ecgtrace.agents.exam.reply_values import parse_number, parse_times_ms
from ecgtrace.metrics import mean_interval, proportion


def content_family(item: dict[str, Any]) -> str:
    """The family an item's shape implies (closed | numeric | timestamps | label | text | report), for tasks no module registers."""
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




# ------------------------------------------------------------------ scoring one reply, by family

Scored = dict[str, Any]


#: The options of a yes/no question asked without them (Holtercare's free presence questions).
YES_NO = ["Yes", "No"]


def _closed(item: dict[str, Any], text: str | None, error: str | None, out: Scored) -> Scored:
    if not error:
        options = list(item.get("options") or (YES_NO if item.get("answer_type") == "yes_no" else [item["answer"]]))
        parsed = parse_answer(text, options, False)
        out.update(parsed=parsed.value, parse_ok=parsed.ok, parse_reason=parsed.reason or None)
    out["correct"] = bool(out["parse_ok"] and is_correct(out["parsed"], item["answer"]))
    out["score"] = 100.0 if out["correct"] else 0.0
    return out


def _numeric(item: dict[str, Any], text: str | None, error: str | None, out: Scored) -> Scored:
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


def _timestamps(item: dict[str, Any], text: str | None, error: str | None, out: Scored) -> Scored:
    pred_t = parse_times_ms(text) if not error else []
    truth_t = parse_times_ms(str(item.get("answer", "")))
    match = match_times(pred_t, truth_t, tolerance_ms(item))
    out.update(parsed=pred_t, parse_ok=not error and text is not None, details={**match, "truth": truth_t})
    out["correct"] = match["f1"] == 1.0 and not error
    out["score"] = round(100.0 * match["f1"], 4) if not error else 0.0
    return out


def _label(item: dict[str, Any], text: str | None, error: str | None, out: Scored) -> Scored:
    verdict = label_verdict(text or "", str(item.get("answer", "")))
    if error:
        verdict = {**verdict, "correct": False, "named": [], "tp": 0, "fp": 0, "fn": verdict["tp"] + verdict["fn"],
                   "precision": 0.0, "recall": 0.0, "f1": 0.0}
    rl = rouge_l(strip_thinking(text or ""), str(item.get("answer", ""))) if not error else {"f1": 0.0}
    out.update(parsed=verdict.get("named"), parse_ok=bool(text) and not error, correct=bool(verdict["correct"]),
               score=round(100.0 * float(verdict["f1"]), 4), details={"rouge_l": rl, **verdict})
    return out


def _report(item: dict[str, Any], text: str | None, error: str | None, out: Scored) -> Scored:
    details = score_report(item, text or "") if not error else {"field_accuracy": 0.0}
    if not str(item.get("answer", "")).lstrip().startswith("{"):
        details["rouge_l"] = rouge_l(strip_thinking(text or ""), str(item.get("answer", ""))) if not error else {"f1": 0.0}
    out.update(parsed=details.get("extracted"), parse_ok=bool(text) and not error, details=details,
               score=round(100.0 * float(details.get("field_accuracy") or 0.0), 4))
    return out


def _text(item: dict[str, Any], text: str | None, error: str | None, out: Scored) -> Scored:
    rl = rouge_l(strip_thinking(text or ""), str(item.get("answer", ""))) if not error else {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    out.update(parsed=None, parse_ok=bool(text) and not error, details={"rouge_l": rl}, score=round(100.0 * rl["f1"], 4))
    return out


def score_family(fam: str, item: dict[str, Any], raw: Any, *, error: str | None = None) -> Scored:
    """Score one reply as family ``fam``; returns ``{family, parsed, parse_ok, parse_reason, correct, score, details}``.

    ``correct`` is a bool for closed, numeric (within tolerance: 0 events for
    counts, ``tolerance_ms`` for times), timestamps (F1 == 1) and labels;
    None for free text and reports. ``score`` is 0-100. ``error`` (a server
    failure) scores the reply wrong without reading it.
    """
    out: Scored = {"family": fam, "parsed": None, "parse_ok": False, "parse_reason": None, "correct": None, "score": 0.0, "details": {}}
    if error:
        out["parse_reason"] = "no answer: server error"
    return FAMILIES[fam].score(item, raw if isinstance(raw, str) else None, error, out)


# ------------------------------------------------------------------ summarizing a task's samples, by family

Rows = list[dict[str, Any]]


def _r(x: float) -> float:
    return round(float(x), 6)


def _mean(values: list[float]) -> float | None:
    return _r(sum(values) / len(values)) if values else None


def _turns(rows: Rows) -> list[dict[str, Any]]:
    return [r["turns"][0] for r in rows]


def _accuracy_block(rows: Rows) -> dict[str, Any]:
    return {"accuracy": proportion(sum(1 for r in rows if r.get("correct")), len(rows))}


def _numeric_block(rows: Rows) -> dict[str, Any]:
    groups: dict[str, list[float]] = defaultdict(list)
    for t in _turns(rows):
        groups[t["details"]["reference"]].append(float(t["details"]["error"]))
    score = {}
    for key, errors in sorted(groups.items()):
        ref = MAE_REFERENCE[key]
        mae = sum(errors) / len(errors)
        score[key] = {"n": len(errors), "mae": _r(mae), "score_mae": _r(score_mae(mae, ref["mu"], ref["sigma"])),
                      "mu": ref["mu"], "sigma": ref["sigma"], "unit": ref["unit"]}
    return {**_accuracy_block(rows), "score_mae": score}


def _timestamps_block(rows: Rows) -> dict[str, Any]:
    turns = _turns(rows)
    tp = sum(t["details"].get("tp", 0) for t in turns)
    fp = sum(t["details"].get("fp", 0) for t in turns)
    fn = sum(t["details"].get("fn", 0) for t in turns)
    precision = tp / (tp + fp) if tp + fp else (1.0 if not fn else 0.0)
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * tp / (2 * tp + fp + fn) if (tp + fp + fn) else 1.0
    return {**_accuracy_block(rows), "micro": {"tp": tp, "fp": fp, "fn": fn, "precision": _r(precision), "recall": _r(recall), "f1": _r(f1)},
            "mean_f1": mean_interval([float(t["details"].get("f1", 0.0)) for t in turns], 0.0, 1.0)}


def _rouge_block(rows: Rows) -> dict[str, Any]:
    return {"rouge_l": mean_interval([float((t["details"].get("rouge_l") or {}).get("f1", 0.0)) for t in _turns(rows)], 0.0, 1.0)}


def _label_block(rows: Rows) -> dict[str, Any]:
    details = [t["details"] for t in _turns(rows)]
    tp, fp, fn = (sum(int(d.get(k, 0)) for d in details) for k in ("tp", "fp", "fn"))
    micro = {"tp": tp, "fp": fp, "fn": fn, "precision": _r(tp / (tp + fp)) if tp + fp else 0.0, "recall": _r(tp / (tp + fn)) if tp + fn else 0.0,
             "f1": _r(2 * tp / (2 * tp + fp + fn)) if tp + fp + fn else 0.0}
    return {**_accuracy_block(rows), "micro": micro, "mean_f1": mean_interval([float(d.get("f1", 0.0)) for d in details], 0.0, 1.0),
            **_rouge_block(rows)}


def _report_block(rows: Rows) -> dict[str, Any]:
    details = [t["details"] for t in _turns(rows)]
    per_field: dict[str, list[bool]] = defaultdict(list)
    for d in details:
        for name, f in (d.get("fields") or {}).items():
            per_field[name].append(f["status"] == "correct")
    return {"field_accuracy": mean_interval([float(d.get("field_accuracy") or 0.0) for d in details], 0.0, 1.0),
            "completeness": _mean([float(d.get("completeness") or 0.0) for d in details]),
            "fields": {name: proportion(sum(v), len(v)) for name, v in sorted(per_field.items())},
            "hallucination_rate": proportion(sum(1 for d in details if d.get("hallucinations")), len(details)),
            "hallucinations": dict(sorted(Counter(h for d in details for h in d.get("hallucinations") or []).items()))}


def _judge_block(rows: Rows) -> dict[str, Any]:
    judged = [r["judge"] for r in rows if r.get("judge")]
    if not judged:
        return {}
    ok = [j for j in judged if j.get("ok")]
    return {"judge": {"n": len(judged), "failures": len(judged) - len(ok), "score": mean_interval([float(j["score"]) for j in ok], 0.0, 100.0),
                      "bands": dict(sorted(Counter(j["band"] for j in ok).items()))}}


def family_block(rows: Rows) -> dict[str, Any]:
    """The ``results.json`` block of one task's scored samples (their family is the first row's)."""
    fam = rows[0].get("family", "text")
    turns = _turns(rows)
    block: dict[str, Any] = {
        "family": fam, "n": len(rows),
        "errors": sum(1 for t in turns if t.get("error")),
        "parse_failures": sum(1 for t in turns if not t.get("error") and not t.get("parse_ok")),
        "mean_score": mean_interval([float(r["score"]) for r in rows], 0.0, 100.0),
    }
    family = FAMILIES.get(fam)
    if family is not None:
        block.update(family.summarize(rows))
    block.update(_judge_block(rows))
    return block


class Family:
    """A scoring family: ``score(item, text, error, out)`` for one reply, ``summarize(rows)`` for a task's samples."""

    def __init__(self, score: Callable[[dict[str, Any], str | None, str | None, Scored], Scored], summarize: Callable[[Rows], dict[str, Any]]) -> None:
        self.score = score
        self.summarize = summarize


#: Every scoring family by name.
FAMILIES: dict[str, Family] = {
    "closed": Family(_closed, _accuracy_block),
    "numeric": Family(_numeric, _numeric_block),
    "timestamps": Family(_timestamps, _timestamps_block),
    "label": Family(_label, _label_block),
    "text": Family(_text, _rouge_block),
    "report": Family(_report, _report_block),
}

__all__ = ["CAP_SIGMAS", "DEFAULT_TOLERANCE_MS", "FAMILIES", "MAE_REFERENCE", "YES_NO", "Family", "Scored", "content_family", "family_block", "match_times",
           "numeric_error", "numeric_truth", "reference_key", "rouge_l", "score_family", "score_mae", "tolerance_ms"]
