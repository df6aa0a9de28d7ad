"""Ground-truth fidelity of the audit items: do the diagnosis graphs, run on our measurements, agree with experts?

For every shared record with expert labels (LUDB ludb.csv, PTB-XL human-validated
SCP codes, CinC #Dx SNOMED codes; MIT-BIH .atr beats and rhythms with ``--db``)
and every diagnosis graph, the audit-item builder chooses windows, measures
them, walks the graph and compares its decision with the expert label.

Printed per diagnosis, **separately on expert-positive and expert-negative
windows**: how many were checked and how often the graph agreed, with 95%
Wilson intervals; separately for the records the measurements were tuned on
and the records nothing was tuned on (the fixed split below), so that the
untuned table is the honest one. Targets (untuned records, diagnoses with at
least 10 expert positives): agreement >= 90% on positives and >= 95% on
negatives. For each diagnosis the table also names the criterion where most
disagreements left the expert's path, and why labelled windows were dropped.
Windows whose path hinges on one measurement within its tolerance of a
threshold (``measurement_doubtful:`` drops, decided without the label) are not
checked; the table counts them per expert side with how many the graph would
have got right, so the agreement without that rule can be read off too.
Every doubt rule of the label maps (``label_ambiguous:`` drops: a source's
likelihood below 100, LUDB's rate or PR between two conventions' cut-offs, a
positive beside ectopic beats, an absence beside LBBB or pacing) is then listed
with the windows and records it dropped, so that no agreement is bought with
unseen drops.

Split (fixed): PTB-XL ecg_id 1-150 and LUDB 1-60 are **tuned** (the delineator
and the feature rules were adjusted looking at them); PTB-XL 151-300, LUDB
61-120 and every CinC record are **untuned**. MIT-BIH (DS1, the beat forest's
training set) counts as tuned. Records of the untuned half that were later
looked at one by one to find a bug (``INSPECTED``) count as tuned from then on.

    .venv/bin/python benchmarks/audit_items.py --limit 3          # quick look
    nice -n 10 .venv/bin/python benchmarks/audit_items.py --diagnoses lafb lvh   # some graphs only
    nice -n 10 .venv/bin/python benchmarks/audit_items.py --json out.json
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data"
DBS = ("mitdb", "ludb", "ptbxl", "cinc2021_12lead", "svdb", "cpsc2021")
DEFAULT_DBS = ("ludb", "ptbxl", "cinc2021_12lead")
TARGET_POS, TARGET_NEG, MIN_POSITIVES = 0.90, 0.95, 10
HALVES = ("tuned", "untuned")
#: Untuned-half records whose own feature values were read to find a bug: tuned from then on (issue 13: sinus
#: tachycardia, LUDB's rate convention and CinC/PTB-XL P waves missed by the delineation; left axis deviation,
#: PTB-XL's LAD beyond -30 degrees). PTB-XL 182, 260, 284 and CinC JS20014 were read one by one for issue 13's doubt
#: rules and stay untuned on purpose: nothing was fitted to their values (182/260: no bug found), the sinus-rhythm rule
#: they prompted drops them from the sinus graphs anyway, and moving them would take failures (LVH 284, LAFB JS20014)
#: out of the untuned table. PTB-XL 190 (PACE) was plotted while the pacing-spike rule of issue 13 was sought (its
#: thresholds were then set on ecg_id 1-150 alone): tuned from then on.
INSPECTED: dict[str, frozenset[str]] = {
    "ludb": frozenset({"70", "114", "117", "101"}),  # 101 (AF): its P share read while the wave net's PR fooled the P rule
    "ptbxl": frozenset(f"{n:05d}_{rate}" for n in (164, 190, 222, 279, 266, 269, 282, 285, 286) for rate in ("lr", "hr")),
    "cinc2021_12lead": frozenset({"E07514", "JS20000", "JS20004", "JS20006", "JS20010", "JS20012", "JS20016", "JS20018"}),
}


def _num(path: Path) -> tuple[int, str]:
    digits = re.sub(r"\D", "", path.stem)
    return (int(digits) if digits else 0, path.stem)


def find_records(data: Path, db: str) -> list[Path]:
    """Record base paths of one shared database, in a stable order (PTB-XL: the 500 Hz record where there is one)."""
    folder = data / db
    if db == "ludb":
        return sorted((p.with_suffix("") for p in (folder / "data").glob("*.hea")), key=_num)
    if db == "ptbxl":
        hi = {_num(p)[0]: p.with_suffix("") for p in folder.glob("records500/*/*.hea")}
        lo = {_num(p)[0]: p.with_suffix("") for p in folder.glob("records100/*/*.hea")}
        return [hi.get(k, lo.get(k)) for k in sorted(set(hi) | set(lo))]
    return sorted((p.with_suffix("") for p in folder.glob("*.hea")), key=_num)


def half_of(db: str, record: Path) -> str:
    """``tuned`` or ``untuned`` under the fixed split of the module docstring."""
    number = _num(record)[0]
    if record.name in INSPECTED.get(db, ()):
        return "tuned"
    if db == "ptbxl":
        return "tuned" if number <= 150 else "untuned"
    if db == "ludb":
        return "tuned" if number <= 60 else "untuned"
    if db == "mitdb":
        return "tuned"
    return "untuned"


def _first_departure(path: dict[str, Any], expert: bool) -> str:
    """The criterion where a disagreeing path decided: its last step (present or absent)."""
    steps = path.get("steps") or []
    if not steps:
        return "?"
    last = steps[-1]
    return f"{last['criterion']}{'+' if last['present'] else '-'}"


def doubt_rule(drop_reason: str) -> str | None:
    """The doubt rule behind a ``label_ambiguous:WHY`` drop: WHY up to its first ``:`` (PTB-XL likelihoods pooled); None for other drops."""
    if not drop_reason.startswith("label_ambiguous:"):
        return None
    rule = drop_reason.removeprefix("label_ambiguous:").split(":", 1)[0].strip()
    return re.sub(r"likelihood \d+(\.\d+)?$", "likelihood < 100", rule)


def _cell(k: int, n: int) -> str:
    from ecgtrace.metrics import wilson

    if not n:
        return "-"
    lo, hi = wilson(k, n)
    return f"{100.0 * k / n:5.1f}% ({k}/{n}) [{100 * lo:.0f}-{100 * hi:.0f}]"


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Build every record's items; counts per diagnosis and half."""
    from rich.console import Console

    from ecgtrace.agents.audit.builder import build_record
    from ecgtrace.errors import EcgTraceError
    from ecgtrace.rubrics.diagnosis_schema import load_diagnoses

    console = Console(width=max(Console().width, 190), stderr=True)
    graphs = load_diagnoses()
    if args.diagnoses:
        unknown = sorted(set(args.diagnoses) - set(graphs))
        if unknown:
            raise SystemExit(f"error: unknown diagnosis id(s): {', '.join(unknown)} (known: {', '.join(sorted(graphs))})")
    shown = sorted(args.diagnoses or graphs)  # every graph stays loaded: a finding may walk another graph (LAFB asks LBBB)
    agree: dict[str, dict[str, Counter]] = {h: defaultdict(Counter) for h in HALVES}
    by_db: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    drops: dict[str, dict[str, Counter]] = {h: defaultdict(Counter) for h in HALVES}
    departures: dict[str, dict[str, Counter]] = {h: defaultdict(Counter) for h in HALVES}
    doubts: dict[str, dict[str, Counter]] = {h: defaultdict(Counter) for h in HALVES}  # label-doubt drops (windows) per rule
    doubt_records: dict[str, dict[str, dict[str, set[str]]]] = {h: defaultdict(lambda: defaultdict(set)) for h in HALVES}
    per_record: dict[str, dict[str, Any]] = {}
    disagreements: list[dict[str, Any]] = []
    failures: list[str] = []
    timings: dict[str, float] = {}
    for db in args.db:
        records = find_records(args.data, db)[: args.limit]
        start = time.perf_counter()
        for k, record in enumerate(records, 1):
            console.print(f"[dim]{db} {k}/{len(records)} {record.name}[/dim]", end="\r")
            half = half_of(db, record)
            try:
                built = build_record(record, seed=args.seed, max_per_diagnosis=args.max_per_diagnosis, graphs=graphs, diagnoses=shown)
            except EcgTraceError as exc:
                failures.append(f"{db}/{record.name}: {exc}")
                continue
            for diagnosis, counts in built.agreement.items():
                agree[half][diagnosis].update(counts)
                by_db[diagnosis][f"{db}:{half}"].update(counts)
            for diagnosis, counts in built.drops.items():
                drops[half][diagnosis].update({r: n for r, n in counts.items() if not r.startswith("label_disagrees")})
                for reason, n in counts.items():
                    if (rule := doubt_rule(reason)) is not None:
                        doubts[half][diagnosis][rule] += n
                        doubt_records[half][diagnosis][rule].add(f"{db}/{record.name}")
            per_record[f"{db}/{record.name}"] = {"half": half, "agreement": {g: dict(c) for g, c in built.agreement.items() if c}}
            for d in built.disagreements:
                side = "expert_yes" if d["expert"] else "expert_no"
                departures[half][d["diagnosis"]][f"{side}:{_first_departure(d['path'], d['expert'])}"] += 1
                disagreements.append({**d, "db": db, "half": half})
        timings[db] = round(time.perf_counter() - start, 1)
        console.print(f"{db}: {len(records)} records in {timings[db]} s" + " " * 20)
    return {"graphs": {gid: graphs[gid] for gid in shown}, "agree": agree, "by_db": by_db, "drops": drops, "departures": departures,
            "disagreements": disagreements, "failures": failures, "timings": timings,
            "doubts": doubts, "doubt_records": doubt_records, "per_record": per_record}


def print_tables(res: dict[str, Any]) -> list[str]:
    """One table per half; returns the lines naming every untuned diagnosis below target."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(Console().width, 200))
    below: list[str] = []
    for half in HALVES:
        table = Table(title=f"Audit ground truth vs expert labels, {half} records (agreement [95% Wilson interval])")
        for col in ("diagnosis", "expert positive: agreed", "expert negative: agreed", "target", "measurement-doubtful, dropped: +, - (would agree)",
                    "where disagreements stopped", "dropped (not disagreement)"):
            table.add_column(col, overflow="fold")
        total = Counter()
        for gid in sorted(res["graphs"]):
            a = res["agree"][half].get(gid, Counter())
            total.update(a)
            pos_n, pos_k, neg_n, neg_k = a["expert_yes"], a["expert_yes_agreed"], a["expert_no"], a["expert_no_agreed"]
            if pos_n >= MIN_POSITIVES:
                ok = pos_k >= TARGET_POS * pos_n and (neg_n == 0 or neg_k >= TARGET_NEG * neg_n)
                verdict = "[green]met[/green]" if ok else "[red]missed[/red]"
                if not ok and half == "untuned":
                    below.append(f"{gid}: positives {_cell(pos_k, pos_n)}, negatives {_cell(neg_k, neg_n)}")
            else:
                verdict = f"n+ < {MIN_POSITIVES}"
            dep = ", ".join(f"{r} {n}" for r, n in res["departures"][half].get(gid, Counter()).most_common(3))
            drops = ", ".join(f"{r} {n}" for r, n in sorted(res["drops"][half].get(gid, Counter()).items(), key=lambda x: -x[1])[:3])
            table.add_row(gid, _cell(pos_k, pos_n), _cell(neg_k, neg_n), verdict, _doubtful_cell(a), dep, drops)
        table.add_row("[b]all[/b]", _cell(total["expert_yes_agreed"], total["expert_yes"]), _cell(total["expert_no_agreed"], total["expert_no"]), "",
                      _doubtful_cell(total), "", "")
        console.print(table)
    return below


def _doubtful_cell(a: Counter) -> str:
    """Expert-labelled windows dropped because their path hinges on a measurement near a threshold, and how many the graph would have got right."""
    pos, neg = a["doubtful_expert_yes"], a["doubtful_expert_no"]
    if not pos and not neg:
        return ""
    return f"+{pos} ({a['doubtful_expert_yes_agreed']}), -{neg} ({a['doubtful_expert_no_agreed']})"


def print_doubt_drops(res: dict[str, Any]) -> None:
    """Every label-doubt rule with the windows (and records) it dropped, per half and diagnosis: nothing hides behind a drop."""
    print("Labelled windows dropped as 'label doubtful', per rule (windows / records; the expert side where the rule knows it):")
    for half in HALVES:
        for gid in sorted(res["graphs"]):
            for rule, n in sorted(res["doubts"][half].get(gid, Counter()).items(), key=lambda x: (-x[1], x[0])):
                records = len(res["doubt_records"][half][gid][rule])
                print(f"  {half:7s} {gid:22s} {n:4d} windows / {records:3d} records  {rule}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="shared data folder (default ../shared/data)")
    parser.add_argument("--db", nargs="+", choices=DBS, default=list(DEFAULT_DBS), help="databases to use")
    parser.add_argument("--limit", type=int, default=None, help="at most this many records per database")
    parser.add_argument("--max-per-diagnosis", type=int, default=3, help="positive and negative windows per diagnosis and record")
    parser.add_argument("--diagnoses", nargs="+", default=None, help="only these diagnosis ids (graph ids, e.g. lafb lvh)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers (and every disagreement) as JSON here")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"error: no shared data at {args.data}", file=sys.stderr)
        return 2
    # detected beats are cached by tools.annotate; keep that cache out of the shared data folder
    os.environ.setdefault("ECGTRACE_CACHE", str(Path(tempfile.gettempdir()) / "ecgtrace_bench_cache"))
    warnings.simplefilter("ignore")
    res = run(args)
    below = print_tables(res)
    print_doubt_drops(res)
    print(f"Untuned diagnoses with >= {MIN_POSITIVES} expert positives below target (>= {TARGET_POS:.0%} on positives, >= {TARGET_NEG:.0%} on negatives):")
    for line in below or ["none"]:
        print(f"  {line}")
    if res["failures"]:
        print(f"{len(res['failures'])} record(s) failed:")
        for line in res["failures"][:20]:
            print(f"  {line}")
    if args.json:
        from ecgtrace.jsonio import write_json_atomic

        write_json_atomic(args.json, {
            "dbs": args.db, "limit": args.limit, "seed": args.seed, "max_per_diagnosis": args.max_per_diagnosis, "timings_s": res["timings"],
            "agreement": {h: {g: dict(c) for g, c in res["agree"][h].items()} for h in HALVES},
            "per_db": {g: {k: dict(c) for k, c in v.items()} for g, v in res["by_db"].items()},
            "drops": {h: {g: dict(c) for g, c in res["drops"][h].items()} for h in HALVES},
            "doubt_drops": {h: {g: dict(c) for g, c in res["doubts"][h].items()} for h in HALVES},
            "per_record": res["per_record"],
            "disagreements": res["disagreements"], "below_target": below, "failures": res["failures"],
        })
    return 0


if __name__ == "__main__":
    sys.exit(main())
