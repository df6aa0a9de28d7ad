"""Other benchmarks' formats, in and out: ``ecgtrace import FORMAT ...`` and ``ecgtrace export FORMAT ...``.

:data:`FORMATS` is the one table of formats: a name and the module that reads
and writes it. A format module defines, importing only the standard library at
module level (the CLI builds its parsers from them, and ``ecgtrace --help``
must stay fast; heavy imports go inside the functions):

* ``HELP`` - one line for ``--help``;
* ``add_import_arguments(parser)`` and ``run_import(args) -> dict`` - read the
  format into an ecgtrace dataset folder (``audit.jsonl`` / ``qa.jsonl`` +
  assets) and return a summary whose ``"line"`` is the one-line report;
* ``add_export_arguments(parser)`` and ``run_export(args) -> dict`` - write a
  run folder in the format's result layout (same summary shape).

A format that only reads (or only writes) leaves the other pair out. Adding a
format is one module here plus one line in :data:`FORMATS`; records, 12-lead
assets and provenance helpers shared by formats live in
:mod:`ecgtrace.agents.interop._records`.
"""

from __future__ import annotations

import argparse
import importlib
from types import ModuleType

#: ``name: module`` of every format ``ecgtrace import`` / ``ecgtrace export`` know, in ``--help`` order.
FORMATS: dict[str, str] = {
    "erb": "ecgtrace.agents.interop.erb",
    "holtercare": "ecgtrace.agents.interop.holtercare",
}


def format_module(name: str) -> ModuleType:
    """The module of format ``name`` (see the package docstring)."""
    if name not in FORMATS:
        from ecgtrace.errors import InteropError

        raise InteropError(f"unknown format {name!r} (known: {', '.join(FORMATS)})")
    return importlib.import_module(FORMATS[name])


def formats_for(direction: str) -> dict[str, ModuleType]:
    """``{name: module}`` of the formats that support ``direction`` (``import`` or ``export``)."""
    modules = {name: format_module(name) for name in FORMATS}
    return {name: m for name, m in modules.items() if hasattr(m, f"run_{direction}") and hasattr(m, f"add_{direction}_arguments")}


def add_format_parsers(parser: argparse.ArgumentParser, direction: str) -> None:
    """One sub-command per format that supports ``direction`` (``ecgtrace import erb ...``), with the format's own options."""
    formats = parser.add_subparsers(dest="format", metavar="FORMAT", required=True)
    for name, module in formats_for(direction).items():
        sub = formats.add_parser(name, help=module.HELP, description=module.HELP)
        getattr(module, f"add_{direction}_arguments")(sub)
        sub.set_defaults(_format_run=getattr(module, f"run_{direction}"))


def run_format(args: argparse.Namespace) -> int:
    """Run the chosen format's import or export and print its one-line summary."""
    print(args._format_run(args)["line"])
    return 0
