"""Reference-annotation check: does a record's own ``.atr`` pass and another record's fail?

Usage::

    nice -n 10 .venv/bin/python benchmarks/reference_check.py
    .venv/bin/python benchmarks/reference_check.py --dbs mitdb,svdb

For every record of ``../shared/data`` with signals and an ``.atr`` holding
beats (MIT-BIH, CPSC 2021, SVDB, QTDB), :func:`ecgtrace.tools.reference_check.reference_agreement`
is measured twice: with the record's own beats, and with the beats of the
next record of the same database (a foreign file; same sampling rate). The
table prints F1, chance F1 (the beats shifted by half a beat) and the margin,
then per database the worst own-file row and the best foreign-file row, and
whether :func:`check_reference_beats` accepted or refused each.

Every row is ``tuned``: the thresholds (F1 >= 0.7, margin >= 0.4) were chosen
looking at these same records; no untuned set of annotated records is left
in ``../shared/data`` for this check, so the separation on new records is not
measured here.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ecgtrace.errors import EcgTraceError
from ecgtrace.tools.annotations import read_reference_annotations
from ecgtrace.tools.records import assess_leads, open_record
from ecgtrace.tools.reference_check import MIN_AGREEMENT_F1, MIN_MARGIN_OVER_CHANCE, reference_agreement

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
DBS = ("mitdb", "cpsc2021", "svdb", "qtdb")


def _records(db: str) -> list[Path]:
    folder = DATA / db
    return sorted(p.with_suffix("") for p in folder.glob("*.atr") if p.with_suffix(".hea").exists())


def _verdict(agreement: dict) -> str:
    ok = agreement["f1"] >= MIN_AGREEMENT_F1 and agreement["f1"] - agreement["chance_f1"] >= MIN_MARGIN_OVER_CHANCE
    if agreement["n_reference"] + agreement["n_detected"] < 20:
        return "unchecked"
    return "accepted" if ok else "refused"


def measure(db: str) -> list[dict]:
    """One row per record: own and foreign agreement."""
    bases = _records(db)
    beats = {}
    for base in bases:
        try:
            beats[base] = read_reference_annotations(base, "atr").beat_samples
        except EcgTraceError:
            continue
    usable = [b for b in bases if b in beats and beats[b].size > 0]
    rows = []
    for index, base in enumerate(usable):
        foreign = usable[(index + 1) % len(usable)]
        if foreign == base:  # a database of one record has no foreign file to offer
            foreign = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            info = assess_leads(open_record(base, check_leads=False))
        if foreign is not None and info.fs_hz != open_record(foreign, check_leads=False).fs_hz:
            foreign = None
        t0 = time.perf_counter()
        own = reference_agreement(info, beats[base])
        other = reference_agreement(info, beats[foreign]) if foreign is not None else None
        rows.append({"db": db, "record": base.name, "foreign": foreign.name if foreign else "-", "own": own, "other": other,
                     "seconds": time.perf_counter() - t0})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dbs", default=",".join(DBS), help="databases under ../shared/data")
    args = parser.parse_args(argv)
    if not DATA.is_dir():
        print(f"skip: {DATA} not found", file=sys.stderr)
        return 0
    console = Console(width=160)
    table = Table(title="reference check: own .atr vs the next record's .atr (all rows tuned)")
    for column in ("db", "record", "own F1", "own chance", "own verdict", "foreign", "foreign F1", "foreign chance", "foreign verdict", "s"):
        table.add_column(column)
    summary = Table(title="per database (all rows tuned)")
    for column in ("db", "records", "worst own F1", "min own margin", "own refused", "best foreign F1", "max foreign margin", "foreign accepted"):
        summary.add_column(column)
    for db in args.dbs.split(","):
        rows = measure(db)
        if not rows:
            continue
        for r in rows:
            o, f = r["own"], r["other"]
            foreign_cells = (f"{f['f1']:.3f}", f"{f['chance_f1']:.3f}", _verdict(f)) if f else ("-", "-", "-")
            table.add_row(db, r["record"], f"{o['f1']:.3f}", f"{o['chance_f1']:.3f}", _verdict(o), r["foreign"],
                          *foreign_cells, f"{r['seconds']:.2f}")
        others = [r["other"] for r in rows if r["other"]]
        summary.add_row(db, str(len(rows)), f"{min(r['own']['f1'] for r in rows):.3f}",
                        f"{min(r['own']['f1'] - r['own']['chance_f1'] for r in rows):.3f}",
                        str(sum(_verdict(r["own"]) == "refused" for r in rows)),
                        f"{max(a['f1'] for a in others):.3f}" if others else "-",
                        f"{max(a['f1'] - a['chance_f1'] for a in others):.3f}" if others else "-",
                        str(sum(_verdict(a) == "accepted" for a in others)) if others else "-")
    console.print(table)
    console.print(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
