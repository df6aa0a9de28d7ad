"""The demo's summary: each examinee beside the chance level, and notes whose every claim is checked against the numbers.

* **chance** - what a uniform guess is expected to score on the examined
  items (:mod:`ecgtrace.agents.exam.baselines`), printed as its own row so
  ``random`` (one draw of it) and ``prior`` (a text-only shortcut probe) can be
  read against it.
* **oracle** answers from the ground truth. The note says "100% on every
  metric" only where that is so, and names each metric and task that is not,
  with the reason (ScoreMAE of a perfect answer is below 100 by construction).
* **prior** never sees the ECG: the note tests it against chance per metric
  and explains the protocol's own prior on decisions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ecgtrace.commands._output import fmt_p, fmt_pct

AUDIT_METRICS = (("ida", "IDA"), ("gt_rda", "GT-RDA"), ("decision_acc", "Dec."), ("completion", "Compl."))


def _value(block: dict[str, Any], key: str) -> float | None:
    value = block.get(key)
    return value.get("value") if isinstance(value, dict) else value


def _cell(value: float | None, key: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if key == "depth" else fmt_pct(value)


def _load(run: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from ecgtrace.runlog import load_run_samples

    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    return results, load_run_samples(run)[1]


def _chance(dataset: Path, audit_rows: list[dict[str, Any]], qa_rows: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Chance levels over exactly the items the runs examined."""
    from ecgtrace.agents.audit.format import load_audit
    from ecgtrace.agents.exam.baselines import audit_baselines, qa_baselines
    from ecgtrace.contracts.datasets import load_items

    audit_ids = {r["id"] for r in audit_rows}
    qa_ids = {r["id"] for r in qa_rows}
    audit_items = [it for it in load_audit(dataset / "audit.jsonl").items if it.id in audit_ids]
    qa_items = [it for it in load_items(dataset / "qa.jsonl", "qa").items if it.id in qa_ids]
    return audit_baselines(audit_items), qa_baselines(qa_items)


ROW_KEYS = ("ida", "gt_rda", "decision_acc", "completion", "depth", "n", "qa_closed_accuracy", "qa_mean_score", "qa_n")


def summary(runs: Path, dataset: Path, examinees: list[str], run_name: Any) -> dict[str, Any]:
    """The rows (``chance`` first, then each examinee) and the notes, as plain JSON."""
    loaded = {m: (_load(runs / f"audit-{run_name(m)}"), _load(runs / f"qa-{run_name(m)}")) for m in examinees}
    (_, audit_rows), (_, qa_rows) = loaded[examinees[0]]
    audit_chance, qa_chance = _chance(dataset, audit_rows, qa_rows)
    rows = [{"model": "chance", "ida": audit_chance["ida"], "gt_rda": audit_chance["decision"],
             "decision_acc": audit_chance["decision"], "completion": audit_chance["completion"],
             "depth": None, "n": len(audit_rows), "qa_closed_accuracy": qa_chance["closed_accuracy"], "qa_mean_score": None,
             "qa_n": len(qa_rows)}]
    for model in examinees:
        (audit, _), (qa, _) = loaded[model]
        a, q = audit["overall"], qa["overall"]
        rows.append({"model": model, "ida": _value(a, "ida"), "gt_rda": _value(a, "gt_rda"),
                     "decision_acc": _value(a, "decision_acc"), "completion": _value(a, "completion"),
                     "depth": _value(a, "depth"), "n": a.get("n"), "qa_closed_accuracy": _value(q, "closed_accuracy"),
                     "qa_mean_score": _value(q, "mean_score"), "qa_n": q.get("n"), "runs": {"audit": str(runs / f"audit-{run_name(model)}"),
                                                                                         "qa": str(runs / f"qa-{run_name(model)}")}})
    return {"rows": rows, "notes": notes(loaded, audit_chance, qa_chance),
            "protocol_prior": audit_chance["protocol_prior"]}


def print_summary(console: Any, data: dict[str, Any]) -> None:
    """The table (a chance row, then one row per examinee) and the notes on oracle, random and prior."""
    from rich.markup import escape

    from ecgtrace.commands._output import add_columns, new_table

    table = new_table("how well each examinee reads the ECG")
    add_columns(table, ("model", "IDA", "GT-RDA", "Dec.", "Compl.", "Depth", "n", "QA acc.", "QA score", "QA n"), left=("model",), no_wrap=True)
    for row in data["rows"]:
        score = row["qa_mean_score"]
        table.add_row(escape(row["model"]), _cell(row["ida"]), _cell(row["gt_rda"]), _cell(row.get("decision_acc")),
                      _cell(row["completion"]), _cell(row["depth"], "depth"),
                      str(row["n"] if row["n"] is not None else "-"), _cell(row["qa_closed_accuracy"]),
                      "-" if score is None else f"{score:.1f}", str(row["qa_n"] if row["qa_n"] is not None else "-"),
                      style="dim" if row["model"] == "chance" else None)
    console.print(table)
    console.print("Audit: IDA initial-answer accuracy, GT-RDA the last loop's decision (true history) per sample, Dec. every "
                  "decision turn, Compl. every step right, Depth 0-4 pooled over loops (ERB's definitions). QA: closed accuracy and mean score (0-100). chance: what a uniform guess is expected "
                  "to score on these items.")
    for line in data["notes"]:
        console.print(f"- {escape(line)}")


def notes(loaded: dict[str, Any], audit_chance: dict[str, Any], qa_chance: dict[str, Any]) -> list[str]:
    out = []
    if "oracle" in loaded:
        out.append(oracle_note(loaded["oracle"][0][0], loaded["oracle"][1][0]))
    if "random" in loaded:
        out.append(random_note(loaded["random"][0][0]["overall"], loaded["random"][1][0]["overall"], audit_chance, qa_chance))
    if "prior" in loaded:
        out += prior_notes(loaded["prior"][0][1], loaded["prior"][1][1], loaded["prior"][0][0]["overall"], audit_chance, qa_chance)
    return out


def oracle_note(audit: dict[str, Any], qa: dict[str, Any]) -> str:
    """'100% on every metric' when true; else each metric below it, and why."""
    from ecgtrace.agents.exam.baselines import score_ceiling

    short = []
    for key, label in AUDIT_METRICS:
        value = _value(audit["overall"], key)
        if value is not None and value < 1.0:
            short.append(f"{label} {fmt_pct(value)}")
    if _value(audit["overall"], "depth") not in (None, 4.0):
        short.append(f"Depth {_value(audit['overall'], 'depth'):.2f} of 4")
    if _value(qa["overall"], "closed_accuracy") not in (None, 1.0):
        short.append(f"QA closed accuracy {fmt_pct(_value(qa['overall'], 'closed_accuracy'))}")
    reasons = []
    for task, block in qa.get("per_task", {}).items():
        score = _value(block, "mean_score")
        if score is None or score >= 100.0:
            continue
        ceilings = [f"{key} {v['score_mae']:.1f} (MAE 0, mu {v['mu']:g}, sigma {v['sigma']:g})"
                    for key, v in (block.get("score_mae") or {}).items() if v.get("mae") == 0]
        if ceilings and all(abs(v["score_mae"] - score_ceiling(v["mu"], v["sigma"])) < 0.01 for v in block["score_mae"].values()
                            if v.get("mae") == 0):
            reasons.append(f"{task} ({block['n']} items) scores {score:.1f}: ScoreMAE of an exact answer is "
                           f"100/(1+exp(-mu/sigma)), below 100 by construction: {'; '.join(ceilings)}")
        else:
            reasons.append(f"{task} ({block['n']} items) scores {score:.1f}: the oracle's answers are not all scored right "
                           "there - a scoring bug to report")
    qa_score = _value(qa["overall"], "mean_score")
    if not short and not reasons:
        return "oracle answers from the ground truth and scores 100% on every metric, as it must."
    lines = [f"oracle answers from the ground truth; {', '.join(short) if short else '100% on every audit metric and closed QA item'}"]
    if qa_score is not None and qa_score < 100.0:
        lines.append(f"its QA mean score is {qa_score:.1f}, not 100, because " + "; ".join(reasons))
    if short:
        lines.append("audit or closed QA below 100% means an answer key the scoring does not accept: a bug to report")
    return ". ".join(lines) + "."


def _within(value: float | None, metric: dict[str, Any] | None, chance: float | None) -> bool | None:
    if value is None or chance is None or not metric or not metric.get("ci95"):
        return None
    lo, hi = metric["ci95"]
    return lo <= chance <= hi


def random_note(audit: dict[str, Any], qa: dict[str, Any], audit_chance: dict[str, Any], qa_chance: dict[str, Any]) -> str:
    """Whether the random draw's 95% intervals hold the chance level, metric by metric."""
    checks = [(label, _value(audit, key), audit.get(key), audit_chance[ck]) for (key, label), ck in
              zip(AUDIT_METRICS, ("ida", "decision", "completion"))]
    checks.append(("QA acc.", _value(qa, "closed_accuracy"), qa.get("closed_accuracy"), qa_chance["closed_accuracy"]))
    outside = [f"{label} {fmt_pct(v)} vs chance {fmt_pct(c)}" for label, v, m, c in checks if _within(v, m, c) is False]
    if outside:
        return ("random picks uniformly (one seeded draw); its 95% interval misses chance on " + ", ".join(outside)
                + ": with this few items a single draw can land there")
    return "random picks uniformly (one seeded draw); its 95% intervals hold the chance level on every metric."


def _hits(rows: list[dict[str, Any]], stage: str) -> tuple[int, int]:
    turns = [t for r in rows for t in r["turns"] if t.get("stage") == stage and t.get("asked", True)]
    return sum(1 for t in turns if t.get("correct")), len(turns)


def prior_notes(audit_rows: list[dict[str, Any]], qa_rows: list[dict[str, Any]], audit: dict[str, Any], audit_chance: dict[str, Any],
                qa_chance: dict[str, Any]) -> list[str]:
    """The prior against chance on IDA, decisions and closed QA (exact one-sided p), and the protocol's prior explained."""
    from ecgtrace.agents.exam.baselines import beats_chance_p

    parts = []
    k, n = _hits(audit_rows, "initial")
    parts.append(_versus("IDA", k, n, audit_chance["ida"], beats_chance_p(k, audit_chance["initial_probs"])))
    k_dec, n_dec = _hits(audit_rows, "decision")
    parts.append(_versus("decisions", k_dec, n_dec, audit_chance["decision"], beats_chance_p(k_dec, audit_chance["decision_probs"])))
    closed = [r for r in qa_rows if r.get("family") == "closed"]
    k_qa = sum(1 for r in closed if r.get("correct"))
    parts.append(_versus("QA closed", k_qa, len(closed), qa_chance["closed_accuracy"], beats_chance_p(k_qa, qa_chance["closed_probs"])))
    out = ["prior never sees the ECG (it picks the longest option text): " + "; ".join(p for p in parts if p)
           + ". p: one-sided exact test against a uniform guess; p < 0.05 would mean the items carry a shortcut"]
    pp = audit_chance["protocol_prior"]
    if pp["n"]:
        out.append(f"decisions have a prior of their own: in the benchmark's protocol the answer of every loop but the last is "
                   f"'{pp['option']}' ({pp['k']} of {pp['n']} decisions here), so always picking it scores {fmt_pct(pp['value'])} "
                   f"without the ECG, against chance {fmt_pct(audit_chance['decision'])}. Read GT-RDA against that, not against 1/3")
    return out


def _versus(label: str, k: int, n: int, chance: float | None, p: float | None) -> str:
    if not n or chance is None:
        return ""
    verdict = "above chance" if p is not None and p < 0.05 else "within chance"
    return f"{label} {fmt_pct(k / n)} ({k}/{n}) vs chance {fmt_pct(chance)}, p {fmt_p(p)}: {verdict}"
