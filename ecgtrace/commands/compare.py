"""``ecgtrace compare RUN_A RUN_B``: McNemar tests per metric and stage on the items both runs share."""

from __future__ import annotations

import argparse

HELP = "Compare two audit runs (McNemar per metric and stage) or two QA runs (per task) on their shared items."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", help="first run folder")
    parser.add_argument("run_b", help="second run folder")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ecgtrace.errors import RunError
    from ecgtrace.jsonio import to_json_text
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
    if header_a["identity"].get("dataset_sha256") != header_b["identity"].get("dataset_sha256"):
        result["warning"] = "the runs used different datasets; only items with the same id are paired"
    result["a"] = {"run": str(args.run_a), "model": header_a["identity"].get("model"), "mode": header_a["identity"].get("mode")}
    result["b"] = {"run": str(args.run_b), "model": header_b["identity"].get("model"), "mode": header_b["identity"].get("mode")}
    if args.json:
        print(to_json_text(result, indent=2))
        return 0
    console = Console()
    table = Table(title=escape(f"A = {result['a']['model']} ({args.run_a})  vs  B = {result['b']['model']} ({args.run_b})"))
    for column in ("metric", "n", "acc A", "acc B", "A only", "B only", "test", "p"):
        table.add_column(column, justify="left" if column in ("metric", "test") else "right")
    for key, t in result["tests"].items():
        table.add_row(key, str(t["n"]), f"{100 * t['acc_a']:.1f}%", f"{100 * t['acc_b']:.1f}%", str(t["b"]), str(t["c"]),
                      t["method"], f"{t['p_value']:.4g}", style="bold" if t["p_value"] < 0.05 else None)
    console.print(table)
    console.print(f"shared samples {result['shared_samples']}; only in A {result['only_a']}; only in B {result['only_b']}")
    if "warning" in result:
        console.print(f"[yellow]warning:[/] {result['warning']}")
    return 0
