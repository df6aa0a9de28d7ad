"""How commands print: consoles, tables that fit an 80-column terminal, metric cells, p-values, JSON.

Every table a command prints goes through :func:`new_table`: no vertical
rules (each column costs two characters, not three) and columns that carry an
answer never cut to "..." (``overflow="fold"``: a value too wide for its column
wraps onto the next line, whole). A metric with its 95% interval is one cell of
two lines (:func:`metric_cell`), so tables stay narrow without losing it.
``--json`` prints the same numbers for scripts (:func:`print_json`).
"""

from __future__ import annotations

import argparse
from typing import Any


def add_json_option(parser: argparse.ArgumentParser, what: str = "the result") -> None:
    parser.add_argument("--json", action="store_true", help=f"print {what} as JSON instead of tables")


def make_console(*, stderr: bool = False) -> Any:
    """A rich console that reads no markup from user text by accident: no emoji codes, no highlighting."""
    from rich.console import Console

    return Console(stderr=stderr, emoji=False, highlight=False)


def print_json(payload: Any) -> None:
    """``payload`` as indented JSON on stdout (numpy values converted)."""
    from ecgtrace.jsonio import to_json_text

    print(to_json_text(payload, indent=2))


def new_table(title: str | None = None, *, caption: str | None = None, **kwargs: Any) -> Any:
    """A table for an 80-column terminal: a heavy rule under the header, no vertical rules."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    return Table(title=escape(title) if title else None, caption=caption, box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
                 caption_justify="left", **kwargs)


def add_columns(table: Any, names: list[str] | tuple[str, ...], *, left: tuple[str, ...] = (), **kwargs: Any) -> None:
    """Columns ``names``; those in ``left`` are left-aligned, the others (numbers) right-aligned; none cuts a value."""
    for name in names:
        table.add_column(name, justify="left" if name in left else "right", overflow="fold", **kwargs)


def fmt_p(p: float | None) -> str:
    """A p-value as people read it: ``< 0.001`` below 0.001 (never ``0``), else three decimals; ``-`` when untested."""
    if p is None:
        return "-"
    if p < 0.001:
        return "< 0.001"
    return f"{p:.3f}"


def fmt_pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def fmt_interval(metric: dict[str, Any] | None, *, pct: bool = True) -> str:
    """``32-81`` (percent, whole numbers) or ``3.1-4.0``: the 95% interval of a metric, short enough for a narrow column."""
    if not metric or metric.get("value") is None or not metric.get("ci95"):
        return ""
    lo, hi = metric["ci95"]
    if pct:
        return f"{100 * lo:.0f}-{100 * hi:.0f}"
    return f"{lo:.1f}-{hi:.1f}"


def metric_cell(metric: dict[str, Any] | None, *, pct: bool = True, digits: int | None = None) -> Any:
    """Value on the first line (``digits`` decimals: 1 for percent, 2 otherwise), its 95% interval dimmed on the second."""
    from rich.text import Text

    if not metric or metric.get("value") is None:
        return Text("-")
    value = fmt_pct(metric["value"], 1 if digits is None else digits) if pct else f"{metric['value']:.{2 if digits is None else digits}f}"
    interval = fmt_interval(metric, pct=pct)
    text = Text(value)
    if interval:
        text.append("\n" + interval, style="dim")
    return text


INTERVAL_NOTE = "Under each value: its 95% interval (Wilson for proportions; normal approximation for means)."
