"""The Holtercare-Bench (Holtercare-23K) format: ``ecgtrace import holtercare`` and ``ecgtrace export holtercare``.

Import reads Holtercare's QA JSON (a list of ``{id, task_type, qa_pair,
tag}``) into an ecgtrace QA dataset (:mod:`ecgtrace.agents.interop._holtercare_import`,
item by item in :mod:`ecgtrace.agents.interop._holtercare_items`); export
writes an ecgtrace QA dataset in Holtercare's format
(:mod:`ecgtrace.agents.interop._holtercare_export`). Holtercare releases no
signals, so imported items are text only: they are scored from answers a
model gave (``ecgtrace qa-eval DATASET --answers ANSWERS``), not asked.

Only the standard library is imported at module level (the CLI builds its
parsers from this module); the work is imported when a command runs.
"""

from __future__ import annotations

import argparse
from typing import Any

HELP = "Holtercare-Bench (Holtercare-23K): its QA JSON files (items without signals)"


def add_import_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="FILE", help="a Holtercare-Bench QA file: a JSON list of {id, task_type, qa_pair, tag} (or JSON Lines)")
    parser.add_argument("--out", required=True, metavar="DATASET", help="dataset folder to write (qa.jsonl, rejected.jsonl, manifest.json)")
    parser.add_argument("--release", default=None, help="the Holtercare release the file comes from, kept in provenance")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N items of the file")


def run_import(args: argparse.Namespace) -> dict[str, Any]:
    from ecgtrace.agents.interop._holtercare_import import import_holtercare
    from ecgtrace.errors import InteropError

    if args.limit is not None and args.limit < 1:
        raise InteropError(f"--limit must be at least 1, got {args.limit}")
    return import_holtercare(args.source, args.out, release=args.release, limit=args.limit)


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", metavar="DATASET", help="an ecgtrace QA dataset (qa.jsonl or the folder holding it)")
    parser.add_argument("--out", required=True, metavar="FILE", help="the Holtercare-Bench JSON file to write")


def run_export(args: argparse.Namespace) -> dict[str, Any]:
    from ecgtrace.agents.interop._holtercare_export import export_holtercare

    return export_holtercare(args.dataset, args.out)
