"""The demo's counterfactual-probe step and its summary: does each examinee's answer follow the evidence?

The step runs ``ecgtrace probe`` on a few originals (:data:`PROBE_ONLY`, one per group, :data:`PROBE_ORIGINALS` per
dataset file); the counterfactual set is built once in ``OUT/probe-set`` and shared by every examinee. The summary is
one table (sensitivity, grounded accuracy, localization follow, invariance; a ``chance`` row of a uniform random
answerer) and a note on what oracle, prior and random must score there.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

#: The demo's probe: originals of these diagnoses and QA tasks only, so it stays quick.
PROBE_ONLY = ("pvc", "pac", "sinus_pause", "first_degree_av_block", "closed_presence", "closed_count", "closed_timing")
PROBE_ORIGINALS = 6
METRICS = (("sensitivity", "sens."), ("grounded_accuracy", "grounded"), ("localization_follow", "follow"), ("invariance", "invariance"))
NOTE = ("sens.: the answer changes when the evidence is removed or an opposite window is shown (same question and options); "
        "grounded: right on the original and on its counterfactual; follow: a moved event's span is chosen; invariance: the "
        "answer stays after a control edit (a normal beat replaced by another). oracle must score 100% sensitivity and "
        "invariance, prior (never reads the ECG) 0% sensitivity, random its chance. Intervals and per-kind tables: each "
        "runs/probe-*/report.html.")


def probe_argv(dataset: Path, model: str, args: argparse.Namespace, remote: list[str]) -> list[str]:
    """``ecgtrace probe`` on a few items of the demo's dataset (without ``--run``); the set goes beside the dataset."""
    return ["probe", str(dataset), "--model", model, "--modality", args.modality, "--seed", str(args.seed),
            "--probe-set", str(dataset.parent / "probe-set"), "--only", ",".join(PROBE_ONLY), "--max-per-group", "1",
            "--originals", str(PROBE_ORIGINALS), "--probe-seed", str(args.seed), "--quiet", *remote]


def probe_summary(runs: Path, examinees: list[str], run_name: Any) -> dict[str, Any]:
    """``{"rows": [chance, then each examinee], "note": str}``; each row's metrics are the run's overall values."""
    import json

    overall = {m: json.loads((runs / f"probe-{run_name(m)}" / "results.json").read_text(encoding="utf-8"))["overall"] for m in examinees}
    first = overall[examinees[0]]
    rows = [{"model": "chance", **{k: (first.get(k) or {}).get("chance") for k, _ in METRICS}, "pairs": None}]
    rows += [{"model": m, **{k: (o.get(k) or {}).get("value") for k, _ in METRICS}, "pairs": o.get("n_pairs"),
              "run": str(runs / f"probe-{run_name(m)}")} for m, o in overall.items()]
    return {"rows": rows, "note": NOTE}


def print_probe_summary(console: Any, data: dict[str, Any]) -> None:
    from rich.markup import escape

    from ecgtrace.commands._output import add_columns, fmt_pct, new_table

    table = new_table("does the answer follow the evidence? (counterfactual probes)")
    add_columns(table, ("model", *(h for _, h in METRICS), "pairs"), left=("model",), no_wrap=True)
    for row in data["rows"]:
        table.add_row(escape(row["model"]), *(fmt_pct(row[k]) for k, _ in METRICS), "" if row["pairs"] is None else str(row["pairs"]),
                      style="dim" if row["model"] == "chance" else None)
    console.print(table)
    console.print(escape(data["note"]))
