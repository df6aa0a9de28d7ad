"""Aggregate scored QA samples into ``results.json`` (per task, per finding, overall).

``per_task[task]`` is the task type's summary (:meth:`ecgtrace.agents.holter.tasks.QATask.summarize`;
by default its family's block, defined in :mod:`ecgtrace.agents.exam.qa_families`).
``per_finding`` groups by the item's event kind / diagnosis (when the item
names one): ``n``, ``closed_accuracy``, ``mean_score``. ``overall`` has the same
plus ``usage`` (requests, errors, mean latency, summed server-reported tokens).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from ecgtrace.agents.exam.qa_families import family_block
from ecgtrace.agents.holter.tasks import find_task
from ecgtrace.metrics import mcnemar, mean_interval, proportion


def _r(x: float) -> float:
    return round(float(x), 6)


def _mean(values: list[float]) -> float | None:
    return _r(sum(values) / len(values)) if values else None


def _task_block(task: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    found = find_task(task)
    return found.summarize(rows) if found is not None else family_block(rows)


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
    return {"overall": {**_summary_block(rows), "usage": _usage(rows)}, "per_task": {t: _task_block(t, by_task[t]) for t in sorted(by_task)},
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
