"""Counterfactual probes on built datasets: how many counterfactuals the pipeline kept and why it dropped the rest, and what
the built-in examinees score on them (oracle must reach 100% sensitivity and invariance, prior 0% sensitivity, random chance).

For each dataset folder (``ecgtrace build`` output, or ``ecgtrace demo``'s ``dataset/``) the probe set is built
(:func:`ecgtrace.agents.probe.builder.build_probe_set`, every kind, ``--max-per-group`` originals per diagnosis and
label, per QA task and finding) into a temporary folder, and oracle, prior and random are run on it in the text modality.
Printed: one table of kept / dropped / not-applicable counterfactuals per source and kind with the drop reasons, and one
table of the paired metrics per examinee with the chance level beside them. Label each dataset with what it was made
from (``synthetic`` or a database) and whether anything was tuned on it (MIT-BIH DS1 records are the beat classifier's
training set: **tuned**).

    nice -n 10 .venv/bin/python benchmarks/probe.py synthetic=demo-out/dataset
    nice -n 10 .venv/bin/python benchmarks/probe.py "mitdb 119+208 (tuned)=mitdb-ds" --max-per-group 2
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EXAMINEES = ("oracle", "prior", "random")
METRICS = ("sensitivity", "grounded_accuracy", "localization_follow", "invariance")


def _reason(pair: dict[str, Any]) -> str:
    reason = pair.get("reason") or ""
    return reason.split(":")[0] if reason.startswith(("seam_", "record_unreadable", "pipeline_")) else reason


def count_rows(pairs: list[dict[str, Any]]) -> list[list[str]]:
    """Per source and kind: tried, kept, dropped (attempted), not applicable, and the drop reasons by count."""
    from ecgtrace.contracts.vocabulary import COUNTERFACTUAL_KINDS

    rows = []
    for source in ("audit", "qa"):
        for kind in COUNTERFACTUAL_KINDS:
            mine = [p for p in pairs if p["source"] == source and p["kind"] == kind]
            if not mine:
                continue
            na = [p for p in mine if (p.get("reason") or "").startswith("not_applicable")]
            kept = [p for p in mine if p["status"] == "kept"]
            dropped = [p for p in mine if p["status"] == "dropped" and p not in na]
            reasons = Counter(_reason(p) for p in dropped)
            rows.append([source, kind, str(len(mine)), str(len(kept)), str(len(dropped)), str(len(na)),
                         "; ".join(f"{r} {n}" for r, n in reasons.most_common()) or "-"])
    return rows


def _pct(metric: dict[str, Any] | None, key: str = "value") -> str:
    value = (metric or {}).get(key)
    return "-" if value is None else f"{100 * value:.1f}%"


def probe_dataset(dataset: Path, work: Path, max_per_group: int, seed: int) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], float]:
    """Build the probe set of ``dataset`` in ``work`` and run the built-in examinees; (pairs, overall per examinee, build s)."""
    from ecgtrace.agents.exam.examinees import make_examinee
    from ecgtrace.agents.probe.builder import build_probe_set
    from ecgtrace.graphs.probe_runner import load_probe_set, run_probe
    from ecgtrace.runlog import RunDir

    t0 = time.perf_counter()
    build_probe_set(dataset, work / "probe-set", seed=seed, max_per_group=max_per_group)
    built_s = time.perf_counter() - t0
    probe = load_probe_set(work / "probe-set")
    overall = {}
    for name in EXAMINEES:
        run = RunDir.open(work / f"run-{name}", {"kind": "probe", "model": name, "seed": seed}, kind="probe")
        overall[name] = asyncio.run(run_probe(probe, run, make_examinee(name, seed=seed), modality="text"))["overall"]
    return probe.pairs, overall, built_s


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console
    from rich.table import Table

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="+", metavar="LABEL=DIR", help="dataset folders, each with a label saying what it is")
    parser.add_argument("--max-per-group", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    console = Console(width=160)
    for spec in args.datasets:
        label, _, folder = spec.rpartition("=")
        dataset = Path(folder)
        if not dataset.is_dir():
            print(f"error: {dataset} is not a dataset folder", file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory(prefix="probe-bench-") as tmp:
            pairs, overall, built_s = probe_dataset(dataset, Path(tmp), args.max_per_group, args.seed)
        counts = Table(title=f"counterfactuals kept and dropped: {label or dataset} (probe set built in {built_s:.0f} s)")
        for column in ("source", "kind", "tried", "kept", "dropped", "not applicable", "drop reasons"):
            counts.add_column(column, overflow="fold")
        for row in count_rows(pairs):
            counts.add_row(*row)
        console.print(counts)
        scores = Table(title=f"paired metrics: {label or dataset} (text modality; chance = a uniform random answerer)")
        for column in ("examinee", "pairs", *METRICS):
            scores.add_column(column, justify="right")
        for name, o in overall.items():
            scores.add_row(name, str(o["n_pairs"]), *(_pct(o.get(k)) for k in METRICS))
        first = next(iter(overall.values()))
        scores.add_row("chance", "", *(_pct(first.get(k), "chance") for k in METRICS), style="dim")
        console.print(scores)
    return 0


if __name__ == "__main__":
    sys.exit(main())
