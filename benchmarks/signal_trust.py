"""Which event kinds a QA item built from the signal alone may ask about: the signal-trust table.

Run from the repository root::

    nice -n 10 .venv/bin/python benchmarks/signal_trust.py [--tuned] [--write tools/data/signal_trust.json]

A record without a reference ``.atr`` (a user's Holter) gets its beats, classes
and events from the detectors (``agents.holter.annotator.detected_bundle``);
every QA item built on it takes those events as ground truth. This benchmark
builds both bundles of records that *do* have expert annotations and scores,
per QA event kind, the events of the detected bundle against those of the
reference bundle (expert beats and symbols through the same rhythm rules, plus
the expert rhythm notes) -- exactly the disagreement an item from detected
beats would inherit:

* Se: reference events of the kind overlapped by a detected event of the kind
  (beat kinds: onsets within 150 ms);
* +P: detected events of the kind overlapping a reference event of the kind.

A detected event whose subtype the expert's broader note leaves open (a 2:1 AV
block inside ``(BII``) counts on neither side. Beats and runs on either side within 500 ms of the detected bundle's noise
spans are left out: the verifier drops every item whose evidence lies there
(episodes and patterns are kept whole: a window is placed inside them).

Records (``benchmarks/_protocol.py``): scored only (``untuned``) MIT-BIH 100
(``DS2*``), QTDB's untuned excerpts with beat labels, SVDB 800 and CPSC 2021;
QTDB records examined while a detector rule was designed (``DETECTION_EXAMINED``)
are scored in an ``examined`` column that the trust decision never reads;
VFDB 423-428 score only the kinds VFDB labels (VT, VF, VFL, asystole), since it
has no beat labels. ``--tuned`` adds MIT-BIH DS1 and VFDB 418-422 in their own
column; the trust decision never reads it.

``--write PATH`` writes the table the verifier reads (``ecgtrace.tools.signal_trust``),
stamped with every detector version (``annotation_versions()``): a kind is
trusted when its untuned Se and +P are both at least ``MIN_RATE`` over at least
``MIN_EVENTS`` reference and detected events.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _protocol import DETECTION_EXAMINED, DS1_RECORDS, VFDB_SCORED, VFDB_TUNED, qtdb_detection_status  # noqa: E402
from _rhythm_vocab import overlaps  # noqa: E402

from ecgtrace.agents.holter.annotator import detected_bundle, load_record, reference_bundle
from ecgtrace.agents.holter.verifier import NOISE_MARGIN_MS
from ecgtrace.contracts.vocabulary import COVERING_KINDS, KINDS, NOTE_OF, QA_EVENT_KINDS, RHYTHM_NOTES, note_for
from ecgtrace.metrics import wilson
from ecgtrace.tools.signal_trust import MIN_EVENTS, MIN_RATE, KindTrust, verdict, write_trust_table

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
#: Kinds a detected bundle can hold (avb1 comes only from rhythm notes and the synthetic schedule).
SCORED_KINDS = tuple(k for k in QA_EVENT_KINDS if KINDS[k].detected)
#: VFDB labels rhythm only: the kinds its notes decide, and the notes that mean each (VFDB also writes VFIB and ASYS).
VFDB_NOTES = {"vt": (RHYTHM_NOTES["vt"],), "vf": (RHYTHM_NOTES["vf"], "VFIB"), "vfl": (RHYTHM_NOTES["vfl"],), "asystole": ("ASYS",)}


def record_sets(tuned: bool) -> dict[str, list[tuple[Path, str]]]:
    """``{column: [(record path, status)]}`` of the records with expert beat labels, by protocol status."""
    untuned = [(DATA / "mitdb" / "100", "DS2*")]
    qtdb = [p.with_suffix("") for p in sorted((DATA / "qtdb").glob("*.atr"))]
    untuned += [(p, "untuned") for p in qtdb if qtdb_detection_status(p.name) == "untuned"]
    untuned += [(DATA / "svdb" / "800", "untuned")]
    untuned += [(p.with_suffix(""), "untuned") for p in sorted((DATA / "cpsc2021").glob("*.atr"))]
    sets = {"untuned": [(p, s) for p, s in untuned if Path(f"{p}.hea").exists()]}
    # looked at while a detector rule was designed: shown apart, never evidence for trust
    sets["examined"] = [(p, "examined") for p in qtdb if qtdb_detection_status(p.name) == "examined" and Path(f"{p}.hea").exists()]
    if tuned:
        sets["tuned"] = [(DATA / "mitdb" / r, "DS1 tuned") for r in DS1_RECORDS if (DATA / "mitdb" / f"{r}.hea").exists()]
    return sets


def vfdb_sets(tuned: bool) -> dict[str, list[Path]]:
    sets = {"untuned": [DATA / "vfdb" / r for r in sorted(VFDB_SCORED)]}
    if tuned:
        sets["tuned"] = [DATA / "vfdb" / r for r in sorted(VFDB_TUNED)]
    return {k: [p for p in v if Path(f"{p}.hea").exists()] for k, v in sets.items()}


def score_kind(reference: list[dict[str, Any]], detected: list[dict[str, Any]], kind: str) -> list[int]:
    """``[reference found, reference, detected correct, detected]`` of one kind."""
    point = KINDS[kind].span == "beat"
    refs = [e for e in reference if e["kind"] == kind]
    dets = [e for e in detected if e["kind"] == kind]
    return [sum(any(overlaps(r, d, point) for d in dets) for r in refs), len(refs),
            sum(any(overlaps(r, d, point) for r in refs) for d in dets), len(dets)]


def _add(total: dict[str, list[int]], kind: str, cell: list[int]) -> None:
    total[kind] = [x + y for x, y in zip(total.get(kind, [0, 0, 0, 0]), cell)]


def outside_noise(events: list[dict[str, Any]], noise_ms: list[list[int]]) -> list[dict[str, Any]]:
    """Events clear of the detected bundle's noise spans, where the verifier drops every item with evidence.

    Episodes and patterns (AF, bigeminy ...) are kept whole: a window is placed inside one, clear of its noise.
    """
    def clear(e: dict[str, Any]) -> bool:
        return e["kind"] in COVERING_KINDS or not any(a - NOISE_MARGIN_MS <= e["offset_ms"] and e["onset_ms"] <= b + NOISE_MARGIN_MS for a, b in noise_ms)

    return [e for e in events if clear(e)]


def split_unverifiable(events: list[dict[str, Any]], intervals: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Detected events that the expert's broader note covers without naming their subtype, taken out and counted.

    A ``(BII`` note says second-degree AV block of some type; a 2:1 block found inside it is neither confirmed nor
    refuted by the expert (QTDB sel231: eight of them), so it counts on neither side.
    """
    kept, unverifiable = [], {}
    for e in events:
        note = note_for(e["kind"]) if e["kind"] in NOTE_OF else None
        if note and any(iv["label"] == note and iv["onset_ms"] <= e["offset_ms"] and iv["offset_ms"] >= e["onset_ms"] for iv in intervals):
            unverifiable[e["kind"]] = unverifiable.get(e["kind"], 0) + 1
        else:
            kept.append(e)
    return kept, unverifiable


def beat_record_scores(path: Path, store: Path) -> tuple[dict[str, list[int]], dict[str, int], float]:
    """Per kind, reference bundle vs detected bundle of one record with expert beats; the unverifiable events; the detection seconds."""
    reference = reference_bundle(load_record(path), None)
    t0 = time.perf_counter()
    detected = detected_bundle(load_record(path, use_reference=False), store)
    seconds = time.perf_counter() - t0
    noise = detected["noise_spans_ms"]
    events, unverifiable = split_unverifiable(outside_noise(detected["events"], noise), reference["rhythm_intervals"])
    expert = outside_noise(reference["events"], noise)
    return {kind: score_kind(expert, events, kind) for kind in SCORED_KINDS}, unverifiable, seconds


def vfdb_record_scores(path: Path, store: Path) -> dict[str, list[int]]:
    """VFDB's expert rhythm notes vs the detected bundle, for the kinds the notes decide."""
    from ecgtrace.tools.annotations import read_reference_annotations

    ann = read_reference_annotations(path, "atr")
    reference = [{"kind": kind, "onset_ms": iv["onset_ms"], "offset_ms": iv["offset_ms"]}
                 for iv in ann.rhythm_intervals for kind, notes in VFDB_NOTES.items() if iv["label"] in notes]
    detected = detected_bundle(load_record(path, use_reference=False), store)
    noise = detected["noise_spans_ms"]
    return {kind: score_kind(outside_noise(reference, noise), outside_noise(detected["events"], noise), kind) for kind in VFDB_NOTES}


def collect(tuned: bool, console: Console) -> dict[str, dict[str, Any]]:
    """``{column: {"kinds": {kind: counts}, "databases": {db: {kind: counts}}, "records": [...]}}`` over every record set."""
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp)
        for column, records in record_sets(tuned).items():
            block: dict[str, Any] = out.setdefault(column, {"kinds": {}, "databases": {}, "records": [], "unverifiable": []})
            for path, status in records:
                scores, unverifiable, seconds = beat_record_scores(path, store)
                _add_record(block, path, scores)
                for kind, n in unverifiable.items():
                    block["unverifiable"].append(f"{kind} {n} ({path.parent.name}/{path.name})")
                console.print(f"  {path.parent.name}/{path.name} ({status}): {seconds:.1f} s")
        for column, paths in vfdb_sets(tuned).items():
            for path in paths:
                _add_record(out[column], path, vfdb_record_scores(path, store))
                console.print(f"  vfdb/{path.name} ({column})")
    return out


def _add_record(block: dict[str, Any], path: Path, scores: dict[str, list[int]]) -> None:
    for kind, cell in scores.items():
        _add(block["kinds"], kind, cell)
        _add(block["databases"].setdefault(path.parent.name, {}), kind, cell)
    block["records"].append(f"{path.parent.name}/{path.name}")


def database_table(block: dict[str, Any], kinds: tuple[str, ...] = ("pvc", "pac", "v_couplet", "vt", "af", "pause")) -> Table:
    t = Table(title="Untuned records per database: Se / +P (found/expert, correct/detected)")
    t.add_column("database")
    for kind in kinds:
        t.add_column(kind, justify="right")
    for db, counts in block["databases"].items():
        cells = []
        for kind in kinds:
            f, r, c, d = counts.get(kind, [0, 0, 0, 0])
            cells.append(f"{f}/{r} | {c}/{d}" if r or d else "-")
        t.add_row(db, *cells)
    return t


def _rate(num: int, den: int) -> str:
    if not den:
        return "-"
    lo, hi = wilson(num, den)
    return f"{100 * num / den:.1f} ({num}/{den}) [{100 * lo:.0f}-{100 * hi:.0f}]"


def trust_table(columns: dict[str, dict[str, Any]], verdicts: dict[str, KindTrust]) -> Table:
    t = Table(title="Events from the SIGNAL vs events from the expert annotations, per QA kind (Se / +P, Wilson 95%)")
    t.add_column("kind")
    for column in columns:
        t.add_column(f"{column}: Se", justify="right")
        t.add_column(f"{column}: +P", justify="right")
    t.add_column("trusted for QA")
    for kind in SCORED_KINDS:
        cells = []
        for column in columns:
            f, r, c, d = columns[column]["kinds"].get(kind, [0, 0, 0, 0])
            cells += [_rate(f, r), _rate(c, d)]
        t.add_row(kind, *cells, "yes" if verdicts[kind].trusted else "no")
    return t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuned", action="store_true", help="also score MIT-BIH DS1 and VFDB 418-422 (a column of their own)")
    parser.add_argument("--write", type=Path, help="write the trust table (package data: tools/data/signal_trust.json)")
    parser.add_argument("--json", type=Path, help="also write the counts of every column (plain JSON)")
    args = parser.parse_args(argv)
    console = Console(width=200)
    if not DATA.is_dir():
        console.print(f"error: {DATA} not found (the shared records)")
        return 2
    t0 = time.perf_counter()
    columns = collect(args.tuned, console)
    if args.json:
        args.json.write_text(json.dumps(columns, indent=1), encoding="utf-8")
    counts = {kind: columns["untuned"]["kinds"].get(kind, [0, 0, 0, 0]) for kind in SCORED_KINDS}
    verdicts = {kind: verdict(*cell, kind=kind) for kind, cell in counts.items()}
    console.print(trust_table(columns, verdicts))
    console.print(database_table(columns["untuned"]))
    for name, why in DETECTION_EXAMINED.items():
        console.print(f"examined (shown, never evidence for trust): qtdb/{name}: {why}")
    for column, block in columns.items():
        if block["unverifiable"]:
            console.print(f"{column}: detected events inside an expert note that does not name their subtype, left out: {', '.join(block['unverifiable'])}")
    console.print(f"trusted when untuned Se and +P are both >= {100 * MIN_RATE:.0f}% over >= {MIN_EVENTS} reference and detected events; "
                  f"untuned records: {', '.join(columns['untuned']['records'])}; {time.perf_counter() - t0:.0f} s")
    if args.write:
        write_trust_table(args.write, counts, records=columns["untuned"]["records"],
                          command=f"benchmarks/signal_trust.py --write {args.write}")
        console.print(f"wrote {args.write}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
