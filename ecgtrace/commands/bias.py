"""``ecgtrace bias DIR``: shortcut probes on a dataset's closed questions (answer position, length, text-only prior)."""

from __future__ import annotations

import argparse

HELP = "Probe a dataset for shortcuts: answer-position balance, answer-length bias, text-only prior and select-all vs chance."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", metavar="DIR", help="folder holding qa.jsonl and/or audit.jsonl (or one of those files)")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level after Holm correction (default 0.05)")
    parser.add_argument("--json", action="store_true", help="print the full result as JSON instead of tables")
    parser.add_argument("--all", action="store_true", help="show every group, not only the overall rows and flagged groups")


#: The probes in the order rows show them: (key in a group, row label, what the observed value is).
PROBE_ROWS = (
    ("position", "answer position", "answers at A/B/C/..."),
    ("longest", "answer longest", "answer is the longest option"),
    ("shortest", "answer shortest", "answer is the shortest option"),
    ("prior", "text-only prior", "accuracy of the prior examinee (option texts only)"),
    ("select_all", "select all", "multi-select answer is every option"),
)


def _probe_cells(key: str, block: dict) -> tuple[str, str, str]:
    """(observed, chance, Holm-adjusted p) of one probe in one group."""
    from ecgtrace.commands._output import fmt_p, fmt_pct

    p = fmt_p(block.get("p_holm")) if block.get("p") is not None else "-"
    if key == "position":
        observed = "/".join(str(c) for c in block["observed"]) + (" (fixed)" if block["fixed_options"] else "")
        return observed, "even", p
    value = block.get("accuracy") if key == "prior" else block.get("rate")
    return fmt_pct(value), fmt_pct(block.get("chance")), p


def _group_cell(group: dict, source: str):  # noqa: ANN202
    """The group's name (without the source's own prefix) over a dim line with what it groups by and its size."""
    from rich.text import Text

    name = "all questions" if group["by"] == "all" else str(group["group"]).removeprefix(f"{source}:")
    text = Text(name)
    text.append(f"\n{group['by'] + ', ' if group['by'] != 'all' else ''}n={group['n']}", style="dim")
    return text


def run(args: argparse.Namespace) -> int:
    from ecgtrace.agents.exam.bias import probe
    from ecgtrace.errors import EcgTraceError

    if not 0 < args.alpha < 1:
        raise EcgTraceError(f"--alpha must be between 0 and 1, got {args.alpha}")
    result = probe(args.dataset, alpha=args.alpha)
    if args.json:
        from ecgtrace.commands._output import print_json

        print_json(result)
        return 0
    _print_tables(result, args)
    return 0


def _print_tables(result: dict, args: argparse.Namespace) -> None:
    """One table per source; a group is a block of probe rows, so the table stays within 80 columns."""
    from rich.markup import escape

    from ecgtrace.commands._output import add_columns, make_console, new_table

    console = make_console()
    legend = "; ".join(f"{label}: {meaning}" for _, label, meaning in PROBE_ROWS)
    for source in sorted({g["source"] for g in result["groups"]}):
        table = new_table(f"shortcut probes - {source} ({result['n_questions']} closed questions in all)",
                          caption=f"{legend}. chance: what a blind guess scores; p: Holm-adjusted over all "
                                  f"{result['n_tests']} tests (position: chi-square; the others: exact one-sided); (fixed): the same option list everywhere, so position is the answer class.")
        add_columns(table, ("group", "probe", "observed", "chance", "p", "flag"), left=("group", "probe", "observed", "flag"))
        for g in result["groups"]:
            if g["source"] != source or not (args.all or g["by"] == "all" or g["flags"]):
                continue
            for position, (key, label, _) in enumerate(PROBE_ROWS):
                observed, chance, p = _probe_cells(key, g[key])
                flagged = key in g["flags"]
                table.add_row(_group_cell(g, source) if position == 0 else "", label, observed, chance, p,
                              "yes" if flagged else "", style="bold red" if flagged else None)
            table.add_section()
        console.print(table)
    if result["flagged"]:
        console.print(f"[bold red]{len(result['flagged'])} part(s) of the dataset can be answered without the ECG or are unbalanced:[/]")
        for line in result["flagged"]:
            console.print(f"  {line}", markup=False)
    else:
        console.print(f"[green]no shortcut found at alpha {result['alpha']:g} ({result['n_tests']} tests)[/]")
