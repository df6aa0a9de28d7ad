"""Delineation accuracy against cardiologists' marks: ecgtrace vs neurokit2 ``dwt``.

References (in ``../shared/data``):
* QTDB ``.q1c`` (cardiologist 1, about 30 annotated beats per record, marks
  made looking at both leads). Only the annotated stretches are delineated
  (segments of marks, padded by 2 s). The error of a mark is taken on the lead
  that is closer to it ("best lead", as Martinez et al. 2004 and most QTDB
  papers do); ``--qtdb-lead first`` uses the first lead only. Under each QTDB
  table, the human peer: the second cardiologist's marks (``.q2c``, QRS and T
  only, 11 records) against the first's, scored the same way but with one mark
  per beat and no choice of lead (``_delineation_scoring.second_reader``), and
  every delineator scored against the second cardiologist instead of the first.
* LUDB per-lead files ``data/<n>.<lead>`` (records 1-120 here, 12 leads, 10 s), scored
  per lead and, as the CSE tolerances are defined, on global marks: per beat the
  median of the leads' marks, the cardiologists' and each delineator's alike
  (``global_marks``). Under that table, how far LUDB's own per-lead marks scatter
  around their cross-lead mark (on 61-120: SD about 17 ms for P, 10-11 ms for QRS,
  23 ms for T off): per-lead scores measure that scatter as much as the delineator.

All delineators get the same window and the same R peaks (the project's beat
detector, ``ecgtrace.tools.measure.detect_window_beats``): ecgtrace ("ours": the
wave net's boundaries where it sees the wave, ``delineate(method="wavenet")``),
ecgtrace's rules alone ("rules", ``method="rules"``, the delineator before the
wave net) and neurokit2 ``dwt``. The wave net (``benchmarks/train_wave_net.py``)
and the rules' constants were set on the tuning half only. For each reference
mark the nearest mark of the same type within
``--tol-ms`` (default 150 ms) counts as found; we print the mean and SD of
(detected - reference) in ms and how many reference marks were found (count and share:
a lower SD bought by losing hard marks shows there). The SD
targets are the CSE tolerances (2 SD_CSE): P on 10.2, P off 12.7, QRS on 6.5,
QRS off 11.6, T off 30.6 ms. Under each table, the SD without the paced records
(``paced_records``): LUDB marks a paced QRS onset after the pacing spike, QTDB at
it, and these few records carry most of the QRS spread. Under untuned tables, the SD
without the records read one by one to find a bug (``audit_items.INSPECTED``; LUDB 70,
101, 114, 117), which count as tuned from then on.

    .venv/bin/python benchmarks/delineation.py --limit 5
    nice -n 10 .venv/bin/python benchmarks/delineation.py            # everything
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from ecgtrace.rubrics.diagnosis_features import CSE_TOLERANCE_MS
from ecgtrace.tools.measure import delineate, detect_window_beats
from ecgtrace.tools.records import open_record, read_samples

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _protocol import PACED_RECORDS, QTDB_TUNED  # noqa: E402
from audit_items import INSPECTED  # noqa: E402
from _delineation_intervals import INTERVALS, interval_errors, print_intervals  # noqa: E402
from _delineation_rates import print_rates, run_rates  # noqa: E402
from _delineation_scoring import LABELS, POINTS, Tally, nearest_errors, print_second_reader, reference_marks, second_reader  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
NK_KEYS = {"p_on": "ECG_P_Onsets", "p_off": "ECG_P_Offsets", "qrs_on": "ECG_R_Onsets", "qrs_off": "ECG_R_Offsets", "t_off": "ECG_T_Offsets"}
SHORT = {"ecgtrace": "ours", "ecgtrace rules": "rules", "neurokit2 dwt": "nk dwt"}
DELINEATORS = ("ecgtrace", "ecgtrace rules", "neurokit2 dwt")
LUDB_LEADS = ("i", "ii", "iii", "avr", "avl", "avf", "v1", "v2", "v3", "v4", "v5", "v6")
#: Cross-lead marks: a lead's mark of one beat lies within about 40 ms of the others' (LUDB's own spread), the next
#: beat's 270 ms or more away even at 220 bpm; 100 ms between two marks in a row separates beats.
GLOBAL_GAP_MS = 100.0
REFERENCE_SPREAD = "reference spread"  # not a delineator: LUDB's per-lead marks against their own cross-lead marks


def ours(window, beats, method: str = "wavenet") -> list[dict[str, np.ndarray]]:
    result = delineate(window, beats, method=method)
    return [{k: f.points[k][f.points[k] >= 0] for k in POINTS} for f in result.per_lead.values()]


def ours_rules(window, beats) -> list[dict[str, np.ndarray]]:
    """The delineator's rules alone (its state before the wave net), for the same-run comparison."""
    return ours(window, beats, method="rules")


def delineators() -> tuple[tuple[str, object], ...]:
    """(name, function) of every delineator compared in one run (looked up at call time: ``--no-nk`` swaps neurokit2 out)."""
    return (("ecgtrace", ours), ("ecgtrace rules", ours_rules), ("neurokit2 dwt", neurokit_dwt))


#: neurokit2 ``dwt`` failures since the last table (reason -> leads): printed once under the table, not once per lead.
NK_FAILURES: Counter[str] = Counter()


def print_nk_failures() -> None:
    for reason, leads in NK_FAILURES.most_common():
        print(f"  neurokit2 dwt failed on {leads} lead window(s) ({reason}): their marks count as not found")
    NK_FAILURES.clear()


def neurokit_dwt(window, beats) -> list[dict[str, np.ndarray]]:
    import neurokit2 as nk

    out = []
    local = beats - window.sampfrom
    for j in range(window.signal_mv.shape[1]):
        marks = {k: np.zeros(0, dtype=np.int64) for k in POINTS}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                clean = nk.ecg_clean(window.signal_mv[:, j].astype(np.float64), sampling_rate=window.fs_hz)
                _, waves = nk.ecg_delineate(clean, rpeaks=local, sampling_rate=window.fs_hz, method="dwt")
            for k, key in NK_KEYS.items():
                v = np.asarray(waves.get(key, []), dtype=np.float64)
                marks[k] = v[np.isfinite(v)].astype(np.int64) + window.sampfrom
        except Exception as exc:  # neurokit2 fails on some windows; count its marks as missing
            NK_FAILURES[f"{type(exc).__name__}: {str(exc)[:80]}"] += 1
        out.append(marks)
    return out


def segments(marks: dict[str, np.ndarray], fs: float, gap_s: float = 3.0) -> list[tuple[int, int]]:
    allm = np.sort(np.concatenate([v for v in marks.values() if v.size])) if marks else np.zeros(0)
    if allm.size == 0:
        return []
    cuts = np.flatnonzero(np.diff(allm) > gap_s * fs)
    starts = np.r_[allm[0], allm[cuts + 1]]
    stops = np.r_[allm[cuts], allm[-1]]
    return list(zip(starts.tolist(), stops.tolist()))


def split_records(data: Path | None = None) -> dict[str, dict[str, list[str]]]:
    """The fixed tuning / untuned split: ``{"qtdb": {"tuning": [...], "untuned": [...]}, "ludb": {...}}``.

    QTDB: the records in sorted order, even positions tune, odd positions are
    reported untouched, except the excerpts of MIT-BIH records the beat detector
    was tuned on (``_protocol.QTDB_TUNED``): they join the tuning half wherever
    they fall. LUDB: records 1-60 tune (the earlier defaults were tuned on 1-40),
    61-120 are untouched.
    """
    data = data or DATA
    qtdb = sorted(p.stem for p in (data / "qtdb").glob("*.q1c"))
    ludb = sorted((p.stem for p in (data / "ludb" / "data").glob("*.hea")), key=int)
    untuned = [r for r in qtdb[1::2] if r not in QTDB_TUNED]
    return {"qtdb": {"tuning": [r for r in qtdb if r not in untuned], "untuned": untuned},
            "ludb": {"tuning": [n for n in ludb if int(n) <= 60], "untuned": [n for n in ludb if int(n) > 60]}}


def paced_records(data: Path | None = None) -> dict[str, frozenset[str]]:
    """Records with paced beats: QTDB excerpts of the MIT-BIH paced records, LUDB records whose ``ludb.csv`` lists cardiac pacing.

    Their QRS onset is where the two references disagree most: LUDB marks it after the pacing
    spike, QTDB at it; the tables print the SD without them beside the full one.
    """
    import csv

    data = data or DATA
    table = data / "ludb" / "ludb.csv"
    ludb: frozenset[str] = frozenset()
    if table.exists():
        with table.open(newline="", encoding="utf-8") as fh:
            ludb = frozenset(row["ID"].strip() for row in csv.DictReader(fh) if row.get("Cardiac pacing", "").strip())
    return {"qtdb": frozenset(f"sel{r}" for r in PACED_RECORDS), "ludb": ludb}


def run_qtdb(limit: int | None, tol_ms: float, lead_rule: str, tallies: dict[str, Tally], records: list[str] | None = None,
             reference: str = "q1c") -> int:
    """Errors against QTDB's ``reference`` marks (``q1c``: cardiologist 1; ``q2c``: cardiologist 2, 11 records) into ``tallies``."""
    files = sorted((DATA / "qtdb").glob(f"*.{reference}"))
    if records is not None:
        files = [f for f in files if f.stem in records]
    files = files[:limit] if limit else files
    for f in files:
        base = f.with_suffix("")
        info = open_record(base, check_leads=False)
        ref = reference_marks(base, reference)
        fs = info.fs_hz
        tol = int(round(tol_ms * fs / 1000.0))
        for a, b in segments(ref, fs):
            s0, s1 = max(a - int(2 * fs), 0), min(b + int(2 * fs), info.n_samples)
            window = read_samples(info, s0, s1)
            beats = detect_window_beats(window)[0]
            for name, fn in delineators():
                if name not in tallies:
                    continue
                per_lead = fn(window, beats)
                if lead_rule == "first":
                    per_lead = per_lead[:1]
                for point in POINTS:
                    r = ref.get(point, np.zeros(0, dtype=np.int64))
                    r = r[(r >= a) & (r <= b)]
                    errs = np.stack([nearest_errors(r, marks[point], tol) for marks in per_lead])
                    absd = np.where(np.isfinite(errs), np.abs(errs), np.inf)
                    pick = np.argmin(absd, axis=0)
                    best = errs[pick, np.arange(r.size)]
                    tallies[name].add(point, best * 1000.0 / fs, f.stem)
    return len(files)


def global_marks(per_lead: list[np.ndarray], gap: int, min_leads: int) -> np.ndarray:
    """One point's cross-lead marks: every lead's marks pooled, split where two in a row lie more than ``gap``
    samples apart, and the median of each group holding at least ``min_leads`` marks."""
    pooled = np.sort(np.concatenate([np.asarray(m)[np.asarray(m) >= 0] for m in per_lead])) if per_lead else np.zeros(0)
    if pooled.size == 0:
        return pooled
    groups = np.split(pooled, np.flatnonzero(np.diff(pooled) > gap) + 1)
    return np.array([float(np.median(g)) for g in groups if g.size >= min_leads])


def run_ludb(limit: int | None, tol_ms: float, tallies: dict[str, Tally], leads: tuple[str, ...], records: list[str] | None = None,
             global_tallies: dict[str, Tally] | None = None, interval_tallies: dict[str, Tally] | None = None) -> int:
    """Per-lead errors into ``tallies``; with ``global_tallies``, the errors of the cross-lead marks (``global_marks``
    of the cardiologists' and of each delineator's marks over the same leads, marked in at least half of them), and
    with ``interval_tallies`` the errors of the PR, QRS and QT intervals between those marks (:data:`INTERVALS`)."""
    folder = DATA / "ludb" / "data"
    numbers = sorted(int(p.stem) for p in folder.glob("*.hea") if records is None or p.stem in records)
    numbers = numbers[:limit] if limit else numbers
    for number in numbers:
        base = folder / str(number)
        info = open_record(base, check_leads=False)
        fs = info.fs_hz
        tol = int(round(tol_ms * fs / 1000.0))
        window = read_samples(info, 0, info.n_samples)
        beats = detect_window_beats(window)[0]
        names = [n.lower() for n in info.leads]
        results = {name: fn(window, beats) for name, fn in delineators() if name in tallies}
        used = [lead for lead in leads if lead in names and Path(f"{base}.{lead}").exists()]
        refs = {lead: reference_marks(base, lead) for lead in used}
        empty = np.zeros(0, dtype=np.int64)
        for lead in used:
            for name, per_lead in results.items():
                for point in POINTS:
                    tallies[name].add(point, nearest_errors(refs[lead].get(point, empty), per_lead[names.index(lead)][point], tol) * 1000.0 / fs, str(number))
        if global_tallies is None or not used:
            continue
        gap, min_leads = int(round(GLOBAL_GAP_MS * fs / 1000.0)), (len(used) + 1) // 2
        ref_global: dict[str, np.ndarray] = {}
        errors: dict[str, dict[str, np.ndarray]] = defaultdict(dict)
        for point in POINTS:
            ref = ref_global[point] = global_marks([refs[lead].get(point, empty) for lead in used], gap, min_leads)
            for lead in used:  # the cardiologists' own per-lead marks against their cross-lead mark
                global_tallies.setdefault(REFERENCE_SPREAD, Tally()).add(point, -nearest_errors(refs[lead].get(point, empty), np.round(ref).astype(np.int64), tol) * 1000.0 / fs, str(number))
            for name, per_lead in results.items():
                det = global_marks([per_lead[names.index(lead)][point] for lead in used], gap, min_leads)
                errors[name][point] = nearest_errors(ref, np.round(det).astype(np.int64), tol) * 1000.0 / fs
                global_tallies[name].add(point, errors[name][point], str(number))
        if interval_tallies is not None:
            for name in results:
                for interval, (start, end, longest_ms) in INTERVALS.items():
                    interval_tallies.setdefault(name, Tally()).add(interval, interval_errors(ref_global[start], ref_global[end], errors[name][start], errors[name][end],
                                                                                             longest_ms * fs / 1000.0), str(number))
    return len(numbers)


def print_without(tallies: dict[str, Tally], records: frozenset[str], what: str) -> None:
    """One line per delineator: the SD of each mark without ``records`` (the ``what`` records) where any was scored."""
    scored = {r for tally in tallies.values() for r in tally.by_record}
    left_out = sorted(records & scored)
    if not left_out:
        return
    for name, tally in tallies.items():
        cells = [f"{LABELS[p]} {tally.sd_without(p, records)[0]:.1f}" for p in POINTS]
        print(f"  {SHORT.get(name, name)} SD without the {len(left_out)} {what} records ({','.join(left_out)}): {', '.join(cells)}")


def print_notes(tallies: dict[str, Tally], paced: frozenset[str], inspected: frozenset[str]) -> None:
    """The SD lines under a table: without the paced records, and (untuned tables) without the inspected ones."""
    print_without(tallies, paced, "paced")
    print_without(tallies, inspected, "inspected")  # read one by one to find a bug: tuned from then on (audit_items.INSPECTED)


def print_table(title: str, tallies: dict[str, Tally]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("point")
    table.add_column("CSE SD", justify="right")
    for name in tallies:
        for col in ("mean", "SD", "found"):
            table.add_column(f"{SHORT.get(name, name)} {col}", justify="right")
    table.add_column("marks", justify="right")
    for point in POINTS:
        cells = [LABELS[point], f"{CSE_TOLERANCE_MS[point]:.1f}"]
        n = 0
        for tally in tallies.values():
            mean, sd, found, n = tally.row(point)
            ok = "[green]" if sd <= CSE_TOLERANCE_MS[point] else "[red]"
            cells += [f"{mean:+.1f}", f"{ok}{sd:.1f}[/]", f"{round(found * n)} ({100 * found:.1f}%)"]
        cells.append(str(n))
        table.add_row(*cells)
    Console(width=200).print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="records per database (quick run)")
    parser.add_argument("--db", choices=("qtdb", "ludb", "both", "rates", "all"), default="all",
                        help="both: QTDB and LUDB; rates: PTB-XL 100 Hz vs 500 Hz; all (default): the three")
    parser.add_argument("--tol-ms", type=float, default=150.0)
    parser.add_argument("--qtdb-lead", choices=("best", "first"), default="best")
    parser.add_argument("--ludb-leads", default=",".join(LUDB_LEADS), help="comma-separated LUDB leads (default: all 12)")
    parser.add_argument("--records", default=None, help="comma-separated QTDB record names (e.g. sel100,sel102)")
    parser.add_argument("--no-nk", action="store_true", help="skip neurokit2 (faster)")
    parser.add_argument("--split", choices=("tuning", "untuned", "both"), default="both",
                        help="which half of the fixed split (split_records) to run; both prints each half on its own")
    args = parser.parse_args(argv)
    if not DATA.exists():
        print(f"no shared data at {DATA}", file=sys.stderr)
        return 2
    names_used = list(DELINEATORS[:2]) if args.no_nk else list(DELINEATORS)  # run_qtdb/run_ludb run only the tallied ones
    results: dict[str, dict[str, Tally]] = {}
    if args.db in ("rates", "all"):
        t = time.perf_counter()
        diffs = run_rates(DATA, args.limit)
        n = len(diffs["qrs_ms"]["record"])
        print_rates(f"PTB-XL, {n} records at both 100 Hz and 500 Hz: 100 Hz minus 500 Hz, own detected beats ({time.perf_counter() - t:.0f} s)", diffs)
    halves = ("tuning", "untuned") if args.split == "both" else (args.split,)
    split = split_records()
    paced = paced_records()
    for db in ("qtdb", "ludb"):
        if args.db not in (db, "both", "all"):
            continue
        for half in halves:
            tallies = {n: Tally() for n in names_used}
            t = time.perf_counter()
            names = split[db][half]
            if db == "qtdb":
                chosen = [r for r in names if r in args.records.split(",")] if args.records else names
                n = run_qtdb(args.limit, args.tol_ms, args.qtdb_lead, tallies, chosen)
                title = f"QTDB q1c, {half} half, {n} records, {args.qtdb_lead} lead, +-{args.tol_ms:g} ms"
            else:
                leads = tuple(x.strip().lower() for x in args.ludb_leads.split(",") if x.strip())
                global_tallies = {n: Tally() for n in names_used}
                interval_tallies: dict[str, Tally] = {}
                n = run_ludb(args.limit, args.tol_ms, tallies, leads, names, global_tallies, interval_tallies)
                title = f"LUDB, {half} half, {n} records, leads {','.join(leads) if len(leads) < 12 else 'all 12'}, +-{args.tol_ms:g} ms"
            print_table(f"{title} ({time.perf_counter() - t:.0f} s)", tallies)
            print_nk_failures()
            print_notes(tallies, paced[db], INSPECTED.get(db, frozenset()) if half == "untuned" else frozenset())
            if db == "qtdb":
                reader = second_reader(DATA / "qtdb", sorted(next(iter(tallies.values())).by_record), args.tol_ms)
                against_second = {name: Tally() for name in tallies}  # the delineators scored against cardiologist 2 instead
                run_qtdb(None, args.tol_ms, args.qtdb_lead, against_second, sorted(reader.by_record), reference="q2c")
                print_second_reader(tallies, reader, SHORT, against_second)
                print_nk_failures()  # those of the pass against cardiologist 2
            if db == "ludb":
                spread = global_tallies.pop(REFERENCE_SPREAD, Tally())
                print_table(f"LUDB, {half} half, cross-lead marks (median over the leads, marked in at least half of them; CSE-style global marks)",
                            global_tallies)
                print("  LUDB's own per-lead marks around their cross-lead mark (per-lead scores include this scatter): SD "
                      + ", ".join(f"{LABELS[p]} {spread.row(p)[1]:.1f}" for p in POINTS))
                print_notes(global_tallies, paced[db], INSPECTED.get(db, frozenset()) if half == "untuned" else frozenset())
                print_intervals(interval_tallies)
                results[f"{db}:{half}:global"] = global_tallies
            results[f"{db}:{half}"] = tallies
    return 0


if __name__ == "__main__":
    sys.exit(main())
