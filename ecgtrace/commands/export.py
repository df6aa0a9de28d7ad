"""``ecgtrace export FORMAT ...``: a run in another benchmark's result layout (formats: ``ecgtrace.agents.interop.FORMATS``)."""

from __future__ import annotations

import argparse

HELP = "Write a run in another benchmark's result layout, e.g. ecgtrace export erb RUNDIR --out DIR/ (for ERB's own evaluator)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ecgtrace.agents.interop import add_format_parsers

    add_format_parsers(parser, "export")


def run(args: argparse.Namespace) -> int:
    from ecgtrace.agents.interop import run_format

    return run_format(args)
