"""``ecgtrace bias DIR``: shortcut probes on a dataset's closed questions (answer position, length, text-only prior)."""

from __future__ import annotations

import argparse

HELP = "Probe a dataset for shortcuts: answer-position balance, answer-length bias, text-only prior and select-all vs chance."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", metavar="DIR", help="folder holding qa.jsonl and/or audit.jsonl (or one of those files)")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level after Holm correction (default 0.05)")
    parser.add_argument("--json", action="store_true", help="print the full result as JSON instead of tables")
    parser.add_argument("--all", action="store_true", help="show every group, not only the overall rows and flagged groups")


def _p(block: dict) -> str:
    if block.get("p") is None:
        return "-"
    return f"{block['p_holm']:.2g}"


def _rate(value, chance) -> str:  # noqa: ANN001
    if value is None:
        return "-"
    return f"{100 * value:.1f}% ({100 * chance:.1f}%)"


def run(args: argparse.Namespace) -> int:
    import json

    from ecgtrace.agents.exam.bias import probe
    from ecgtrace.errors import EcgTraceError

    if not 0 < args.alpha < 1:
        raise EcgTraceError(f"--alpha must be between 0 and 1, got {args.alpha}")
    result = probe(args.dataset, alpha=args.alpha)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for source in sorted({g["source"] for g in result["groups"]}):
        table = Table(title=f"shortcut probes - {source} ({result['n_questions']} closed questions in all; p Holm-adjusted)")
        for column in ("group", "n", "answer positions (A, B, ...)", "p", "answer longest (chance)", "p", "answer shortest (chance)", "p",
                       "prior acc. (chance)", "p", "select all (chance)", "p", "flags"):
            table.add_column(column, justify="left" if column in ("group", "flags", "answer positions (A, B, ...)") else "right")
        for g in result["groups"]:
            if g["source"] != source or not (args.all or g["by"] == "all" or g["flags"]):
                continue
            pos = g["position"]
            positions = "/".join(str(c) for c in pos["observed"]) + (" [fixed options]" if pos["fixed_options"] else "")
            table.add_row(f"{g['by']}={g['group']}" if g["by"] != "all" else "all", str(g["n"]), positions, _p(pos),
                          _rate(g["longest"]["rate"], g["longest"]["chance"]), _p(g["longest"]),
                          _rate(g["shortest"]["rate"], g["shortest"]["chance"]), _p(g["shortest"]),
                          _rate(g["prior"]["accuracy"], g["prior"]["chance"]), _p(g["prior"]),
                          _rate(g["select_all"]["rate"], g["select_all"]["chance"]), _p(g["select_all"]),
                          ", ".join(g["flags"]) or "", style="bold red" if g["flags"] else None)
        console.print(table)
    if result["flagged"]:
        console.print(f"[bold red]{len(result['flagged'])} part(s) of the dataset can be answered without the ECG or are unbalanced:[/]")
        for line in result["flagged"]:
            console.print(f"  {line}", markup=False)
    else:
        console.print(f"[green]no shortcut found at alpha {result['alpha']:g} ({result['n_tests']} tests)[/]")
    return 0
