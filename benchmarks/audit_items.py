"""Ground-truth fidelity of the audit items: do the diagnosis graphs, run on our measurements, agree with experts?

For every shared record with expert labels (MIT-BIH .atr beats and rhythms,
LUDB ludb.csv, PTB-XL human-validated SCP codes, CinC #Dx SNOMED codes) and
every diagnosis graph, the audit-item builder chooses windows, measures them,
walks the graph and compares its decision with the expert label. Printed per
diagnosis: how many labelled windows were checked, how often the graph agreed
(overall, on expert-positive and on expert-negative windows), how many items
were kept, and why windows were dropped.

    .venv/bin/python benchmarks/audit_items.py --limit 3          # quick look
    nice -n 10 .venv/bin/python benchmarks/audit_items.py --json out.json
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data"
DBS = ("mitdb", "ludb", "ptbxl", "cinc2021_12lead", "svdb", "cpsc2021")
DEFAULT_DBS = ("mitdb", "ludb", "ptbxl", "cinc2021_12lead")


def _num(path: Path) -> tuple[int, str]:
    digits = re.sub(r"\D", "", path.stem)
    return (int(digits) if digits else 0, path.stem)


def find_records(data: Path, db: str) -> list[Path]:
    """Record base paths of one shared database, in a stable order."""
    folder = data / db
    if db == "ludb":
        return sorted((p.with_suffix("") for p in (folder / "data").glob("*.hea")), key=_num)
    if db == "ptbxl":
        hi = {_num(p)[0]: p.with_suffix("") for p in folder.glob("records500/*/*.hea")}
        lo = {_num(p)[0]: p.with_suffix("") for p in folder.glob("records100/*/*.hea")}
        return [hi.get(k, lo.get(k)) for k in sorted(set(hi) | set(lo))]
    return sorted((p.with_suffix("") for p in folder.glob("*.hea")), key=_num)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="shared data folder (default ../shared/data)")
    parser.add_argument("--db", nargs="+", choices=DBS, default=list(DEFAULT_DBS), help="databases to use")
    parser.add_argument("--limit", type=int, default=None, help="at most this many records per database")
    parser.add_argument("--max-per-diagnosis", type=int, default=3, help="positive and negative windows per diagnosis and record")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers as JSON here")
    args = parser.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    from ecgtrace.agents.audit.builder import build_record
    from ecgtrace.errors import EcgTraceError
    from ecgtrace.jsonio import write_json_atomic
    from ecgtrace.rubrics.diagnosis_schema import load_diagnoses

    import os
    import tempfile

    # detected beats are cached by tools.annotate; keep that cache out of the shared data folder
    os.environ.setdefault("ECGTRACE_CACHE", str(Path(tempfile.gettempdir()) / "ecgtrace_bench_cache"))
    console = Console(width=max(Console().width, 190))
    if not args.data.is_dir():
        console.print(f"[red]no shared data at {args.data}[/red]")
        return 2
    graphs = load_diagnoses()
    agree: dict[str, Counter] = defaultdict(Counter)
    by_db: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    drops: dict[str, Counter] = defaultdict(Counter)
    kept: dict[str, Counter] = defaultdict(Counter)
    failures: list[str] = []
    timings: dict[str, float] = {}
    warnings.simplefilter("ignore")
    for db in args.db:
        records = find_records(args.data, db)[: args.limit]
        start = time.perf_counter()
        for k, record in enumerate(records, 1):
            console.print(f"[dim]{db} {k}/{len(records)} {record.name}[/dim]", end="\r")
            try:
                built = build_record(record, seed=args.seed, max_per_diagnosis=args.max_per_diagnosis, graphs=graphs)
            except EcgTraceError as exc:
                failures.append(f"{db}/{record.name}: {exc}")
                continue
            for diagnosis, counts in built.agreement.items():
                agree[diagnosis].update(counts)
                by_db[diagnosis][db].update(counts)
            for diagnosis, counts in built.drops.items():
                drops[diagnosis].update(counts)
            for item in built.items:
                kept[item["diagnosis"]]["positive" if item["label"] else "negative"] += 1
        timings[db] = round(time.perf_counter() - start, 1)
        console.print(f"{db}: {len(records)} records in {timings[db]} s" + " " * 20)

    def pct(a: int, b: int) -> str:
        return f"{100.0 * a / b:5.1f}% ({a}/{b})" if b else "-"

    table = Table(title="Audit items: graph decision on our measurements vs expert labels", show_lines=False)
    for col in ("diagnosis", "set", "checked", "agreement", "expert yes", "expert no", "kept +/-", "per database", "drop reasons (not agreement)"):
        table.add_column(col, overflow="fold")
    total = Counter()
    rows = {}
    for gid in sorted(graphs):
        a = agree.get(gid, Counter())
        total.update(a)
        dbs = ", ".join(f"{db} {c['agreed']}/{c['checked']}" for db, c in sorted(by_db[gid].items()))
        other = {r: n for r, n in drops[gid].items() if not r.startswith("label_disagrees")}
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(other.items(), key=lambda x: -x[1])[:4])
        table.add_row(gid, graphs[gid].set, str(a["checked"]), pct(a["agreed"], a["checked"]), pct(a["expert_yes_agreed"], a["expert_yes"]),
                      pct(a["expert_no_agreed"], a["expert_no"]), f"{kept[gid]['positive']}/{kept[gid]['negative']}", dbs, reasons)
        rows[gid] = {"agreement": dict(a), "per_db": {db: dict(c) for db, c in by_db[gid].items()}, "drops": dict(drops[gid]), "kept": dict(kept[gid])}
    table.add_row("[b]all[/b]", "", str(total["checked"]), pct(total["agreed"], total["checked"]), pct(total["expert_yes_agreed"], total["expert_yes"]),
                  pct(total["expert_no_agreed"], total["expert_no"]), "", "", "")
    console.print(table)
    if failures:
        console.print(f"[yellow]{len(failures)} record(s) failed:[/yellow]")
        for line in failures[:20]:
            console.print(f"  {line}")
    if args.json:
        write_json_atomic(args.json, {"dbs": args.db, "limit": args.limit, "seed": args.seed, "max_per_diagnosis": args.max_per_diagnosis,
                                      "timings_s": timings, "diagnoses": rows, "failures": failures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
