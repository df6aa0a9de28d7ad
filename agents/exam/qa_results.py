"""Aggregate scored QA samples into ``results.json`` (per task, per finding, overall).

Per task (``per_task[task]``), by family:

* every task: ``n``, ``errors`` (server failures), ``parse_failures``,
  ``mean_score`` (0-100, normal 95 % interval of the mean);
* closed, numeric, timestamps, label: ``accuracy`` (Wilson 95 %), where a
  numeric answer is "correct" within tolerance (0 events for counts, the item's
  ``tolerance_ms`` for times) and a timestamp answer when its F1 is 1;
* numeric: ``score_mae[reference]`` = ``{"mae", "score_mae", "mu", "sigma", "unit", "n"}``
  with ``ScoreMAE = 100 / (1 + exp((MAE - mu) / sigma))`` over the task's items
  (:data:`ecgtrace.agents.exam.qa_scoring.MAE_REFERENCE`);
* timestamps: ``micro`` (pooled TP/FP/FN -> P/R/F1) and ``mean_f1``;
* label and text: ``rouge_l`` (mean ROUGE-L F, 0-1);
* report: ``field_accuracy`` (mean per sample, 0-1), ``fields[name]``
  (Wilson accuracy per statistic), ``completeness``, ``hallucination_rate``
  (samples asserting at least one finding absent from the truth, Wilson);
* judged tasks: ``judge`` = ``{"n", "failures", "score", "bands"}``.

``per_finding`` groups by the item's event kind / diagnosis (when the item
names one): ``n``, ``closed_accuracy``, ``mean_score``. ``overall`` has the same
plus ``usage`` (requests, errors, mean latency, summed server-reported tokens).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from ecgtrace.agents.exam.qa_scoring import MAE_REFERENCE, score_mae
from ecgtrace.metrics import mean_interval, proportion


def _r(x: float) -> float:
    return round(float(x), 6)


def _mean(values: list[float]) -> float | None:
    return _r(sum(values) / len(values)) if values else None


def _task_block(rows: list[dict[str, Any]]) -> dict[str, Any]:
    fam = rows[0].get("family", "text")
    turns = [r["turns"][0] for r in rows]
    block: dict[str, Any] = {
        "family": fam, "n": len(rows),
        "errors": sum(1 for t in turns if t.get("error")),
        "parse_failures": sum(1 for t in turns if not t.get("error") and not t.get("parse_ok")),
        "mean_score": mean_interval([float(r["score"]) for r in rows], 0.0, 100.0),
    }
    if fam in ("closed", "numeric", "timestamps", "label"):
        block["accuracy"] = proportion(sum(1 for r in rows if r.get("correct")), len(rows))
    if fam == "numeric":
        groups: dict[str, list[float]] = defaultdict(list)
        for t in turns:
            groups[t["details"]["reference"]].append(float(t["details"]["error"]))
        block["score_mae"] = {}
        for key, errors in sorted(groups.items()):
            ref = MAE_REFERENCE[key]
            mae = sum(errors) / len(errors)
            block["score_mae"][key] = {"n": len(errors), "mae": _r(mae), "score_mae": _r(score_mae(mae, ref["mu"], ref["sigma"])),
                                       "mu": ref["mu"], "sigma": ref["sigma"], "unit": ref["unit"]}
    if fam == "timestamps":
        tp = sum(t["details"].get("tp", 0) for t in turns)
        fp = sum(t["details"].get("fp", 0) for t in turns)
        fn = sum(t["details"].get("fn", 0) for t in turns)
        precision = tp / (tp + fp) if tp + fp else (1.0 if not fn else 0.0)
        recall = tp / (tp + fn) if tp + fn else 1.0
        f1 = 2 * tp / (2 * tp + fp + fn) if (tp + fp + fn) else 1.0
        block["micro"] = {"tp": tp, "fp": fp, "fn": fn, "precision": _r(precision), "recall": _r(recall), "f1": _r(f1)}
        block["mean_f1"] = mean_interval([float(t["details"].get("f1", 0.0)) for t in turns], 0.0, 1.0)
    if fam in ("label", "text"):
        block["rouge_l"] = mean_interval([float((t["details"].get("rouge_l") or {}).get("f1", 0.0)) for t in turns], 0.0, 1.0)
    if fam == "report":
        details = [t["details"] for t in turns]
        block["field_accuracy"] = mean_interval([float(d.get("field_accuracy") or 0.0) for d in details], 0.0, 1.0)
        block["completeness"] = _mean([float(d.get("completeness") or 0.0) for d in details])
        per_field: dict[str, list[bool]] = defaultdict(list)
        for d in details:
            for name, f in (d.get("fields") or {}).items():
                per_field[name].append(f["status"] == "correct")
        block["fields"] = {name: proportion(sum(v), len(v)) for name, v in sorted(per_field.items())}
        block["hallucination_rate"] = proportion(sum(1 for d in details if d.get("hallucinations")), len(details))
        block["hallucinations"] = dict(sorted(Counter(h for d in details for h in d.get("hallucinations") or []).items()))
    judged = [r["judge"] for r in rows if r.get("judge")]
    if judged:
        ok = [j for j in judged if j.get("ok")]
        block["judge"] = {"n": len(judged), "failures": len(judged) - len(ok),
                          "score": mean_interval([float(j["score"]) for j in ok], 0.0, 100.0),
                          "bands": dict(sorted(Counter(j["band"] for j in ok).items()))}
    return block


def _summary_block(rows: list[dict[str, Any]]) -> dict[str, Any]:
    closed = [r for r in rows if r.get("family") == "closed"]
    return {"n": len(rows), "closed_accuracy": proportion(sum(1 for r in closed if r.get("correct")), len(closed)),
            "mean_score": mean_interval([float(r["score"]) for r in rows], 0.0, 100.0)}


def _usage(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Requests, failures, mean latency and summed server-reported tokens of the model under test."""
    turns = [r["turns"][0] for r in rows]
    latencies = [float(t["latency_ms"]) for t in turns if isinstance(t.get("latency_ms"), int | float)]
    tokens: Counter[str] = Counter()
    for t in turns:
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            value = (t.get("tokens") or {}).get(key) if isinstance(t.get("tokens"), dict) else None
            if isinstance(value, int):
                tokens[key] += value
    return {"requests": len(turns), "errors": sum(1 for t in turns if t.get("error")),
            "mean_latency_ms": _mean(latencies), "tokens": dict(sorted(tokens.items()))}


def summarize_qa(samples: list[dict[str, Any]]) -> dict[str, Any]:
    rows = sorted(samples, key=lambda s: s["id"])
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_finding: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_task[row["task"]].append(row)
        if row.get("finding"):
            by_finding[row["finding"]].append(row)
    return {"overall": {**_summary_block(rows), "usage": _usage(rows)}, "per_task": {t: _task_block(by_task[t]) for t in sorted(by_task)},
            "per_finding": {f: _summary_block(by_finding[f]) for f in sorted(by_finding)}}


def headline_qa(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """The metrics one epoch of a QA run is summed up by (``results["epochs"]``): closed accuracy and mean score."""
    block = _summary_block(sorted(rows, key=lambda s: s["id"]))
    return {"closed_accuracy": block["closed_accuracy"]["value"], "mean_score": block["mean_score"]["value"]}


def write_qa_results(run: Any, items: list[dict[str, Any]]) -> dict[str, Any]:
    """Metrics over the finished samples of ``items``, written atomically to results.json."""
    wanted = {it["id"] for it in items}
    rows = [r for r in run.samples() if r["id"] in wanted]
    results = {"kind": "qa", "run_id": run.run_id, "n_items": len(items), "n_finished": len(rows),
               "complete": len(rows) == len(items), **summarize_qa(rows)}
    run.write_results(results)
    return results


def compare_qa(samples_a: list[dict[str, Any]], samples_b: list[dict[str, Any]]) -> dict[str, Any]:
    """McNemar tests of two QA runs on the items both answered, overall and per task.

    The paired outcome is ``correct`` (closed, numeric within tolerance,
    timestamps with F1 = 1, labels); free-text and report items have no binary
    outcome and are left out. Uses :func:`ecgtrace.metrics.mcnemar`.
    """
    from ecgtrace.metrics import mcnemar

    a = {r["id"]: r for r in samples_a if r.get("correct") is not None}
    b = {r["id"]: r for r in samples_b if r.get("correct") is not None}
    shared = sorted(set(a) & set(b))
    groups: dict[str, list[str]] = defaultdict(list)
    for sid in shared:
        groups["overall"].append(sid)
        groups[f"task:{a[sid]['task']}"].append(sid)
    tests = {}
    for key in ["overall", *sorted(k for k in groups if k != "overall")]:
        ids = groups[key]
        n10 = sum(1 for i in ids if a[i]["correct"] and not b[i]["correct"])
        n01 = sum(1 for i in ids if b[i]["correct"] and not a[i]["correct"])
        tests[key] = {"n": len(ids), "acc_a": _r(sum(bool(a[i]["correct"]) for i in ids) / len(ids)),
                      "acc_b": _r(sum(bool(b[i]["correct"]) for i in ids) / len(ids)), **mcnemar(n10, n01)}
    return {"shared_samples": len(shared), "only_a": len(set(a) - set(b)), "only_b": len(set(b) - set(a)), "tests": tests}
