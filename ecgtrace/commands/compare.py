"""``ecgtrace compare RUN_A RUN_B``: McNemar tests per metric and stage on the items both runs share."""

from __future__ import annotations

import argparse
from typing import Any

HELP = "Compare two audit runs (McNemar per metric and stage) or two QA runs (per task) on their shared items."

#: Identity fields whose difference makes a paired comparison mix conditions (what each means, for the warning).
CONDITIONS = (
    ("mode", "mode"),
    ("modality", "modality"),
    ("text_encoding", "text encoding"),
    ("dataset_sha256", "dataset (SHA-256)"),
    ("prompt_version", "prompt version"),
    ("scoring_version", "scoring version"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", help="first run folder")
    parser.add_argument("run_b", help="second run folder")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _metrics_version(run: str) -> str | None:
    """The metric definitions' version the run's results.json was computed with (None when absent)."""
    import json
    from pathlib import Path

    try:
        results = json.loads((Path(run) / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return (results.get("provenance") or {}).get("version") or results.get("metrics_version")


def condition_warnings(header_a: dict[str, Any], header_b: dict[str, Any], run_a: str, run_b: str) -> list[str]:
    """One warning per condition in which the two runs differ (mode, modality, dataset, prompt/scoring/metric version)."""
    a, b = header_a.get("identity", {}), header_b.get("identity", {})
    out = []
    for key, label in CONDITIONS:
        if (key in a or key in b) and a.get(key) != b.get(key):
            extra = "; only items with the same id are paired" if key == "dataset_sha256" else ""
            out.append(f"the runs differ in {label} (A: {a.get(key)}, B: {b.get(key)}): the comparison mixes conditions{extra}")
    version_a, version_b = _metrics_version(run_a), _metrics_version(run_b)
    if version_a and version_b and version_a != version_b:
        out.append(f"the runs' results were computed with different metric versions (A: {version_a}, B: {version_b}); "
                   "the tests below recompute both with the installed version")
    return out


def run(args: argparse.Namespace) -> int:
    from ecgtrace.errors import RunError
    from ecgtrace.metrics import compare_runs
    from ecgtrace.runlog import load_run_samples

    from ecgtrace.contracts.runs import answered

    header_a, rows_a = load_run_samples(args.run_a)
    header_b, rows_b = load_run_samples(args.run_b)
    rows_a, rows_b = answered(rows_a), answered(rows_b)  # skipped samples were never asked: nothing to pair
    kind_a = header_a["kind"]  # the header says what each run examined
    kind_b = header_b["kind"]
    if kind_a != kind_b:
        raise RunError(f"cannot compare a {kind_a} run ({args.run_a}) with a {kind_b} run ({args.run_b})")
    if kind_a == "qa":
        from ecgtrace.agents.exam.qa_results import compare_qa

        result = compare_qa(rows_a, rows_b)
    else:
        result = compare_runs(rows_a, rows_b)
    if result["shared_samples"] == 0:
        raise RunError(f"{args.run_a} and {args.run_b} share no finished samples")
    result["warnings"] = condition_warnings(header_a, header_b, args.run_a, args.run_b)
    for side, run, header in (("a", args.run_a, header_a), ("b", args.run_b, header_b)):
        identity = header["identity"]
        result[side] = {"run": str(run), "model": identity.get("model"), "mode": identity.get("mode"), "modality": identity.get("modality")}
    if args.json:
        from ecgtrace.commands._output import print_json

        print_json(result)
        return 0
    _print_table(result, args)
    return 0


def _print_table(result: dict[str, Any], args: argparse.Namespace) -> None:
    from rich.markup import escape

    from ecgtrace.commands._output import add_columns, fmt_p, fmt_pct, make_console, new_table

    console = make_console()
    console.print(f"A = {escape(str(result['a']['model']))} ({escape(str(args.run_a))})\n"
                  f"B = {escape(str(result['b']['model']))} ({escape(str(args.run_b))})")
    for line in result["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(line)}")
    caption = ("A only: units A got right and B wrong; B only: the reverse. test: exact binomial McNemar below 25 discordant "
               "pairs, else chi-square with continuity correction; bold: p < 0.05 (not corrected for the number of rows).")
    table = new_table("McNemar on shared items", caption=caption)
    add_columns(table, ("metric", "n", "acc A", "acc B", "A only", "B only", "test", "p"), left=("metric", "test"))
    for key, t in result["tests"].items():
        shown = key.removeprefix("stage:") if key.startswith("stage:") else key
        if key.startswith("stage:") and not any(k.startswith("stage:") for k in list(result["tests"])[: list(result["tests"]).index(key)]):
            table.add_section()
        table.add_row(escape(shown), str(t["n"]), fmt_pct(t["acc_a"]), fmt_pct(t["acc_b"]), str(t["b"]), str(t["c"]),
                      t["method"], fmt_p(t["p_value"]), style="bold" if t["p_value"] < 0.05 else None)
    console.print(table)
    console.print(f"shared samples {result['shared_samples']}; only in A {result['only_a']}; only in B {result['only_b']}"
                  + ("; the second block is per stage" if any(k.startswith("stage:") for k in result["tests"]) else ""))
