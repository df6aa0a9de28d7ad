"""``ecgtrace import FORMAT ...``: another benchmark's data as an ecgtrace dataset (formats: ``ecgtrace.agents.interop.FORMATS``)."""

from __future__ import annotations

import argparse

HELP = "Read another benchmark's data into an ecgtrace dataset, e.g. ecgtrace import erb FILE.jsonl --records DIR --out DATASET/."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ecgtrace.agents.interop import add_format_parsers

    add_format_parsers(parser, "import")


def run(args: argparse.Namespace) -> int:
    from ecgtrace.agents.interop import run_format

    return run_format(args)
