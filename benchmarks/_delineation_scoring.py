"""How the delineation benchmark scores marks: reference marks from annotation files, nearest-mark errors, tallies.

Also the one human peer the QTDB tables have: QTDB's second cardiologist (``.q2c``: QRS on, QRS off and T off on
11 of the 55 records here) scored against the first (``.q1c``) exactly as a delineator is, nearest mark within the
tolerance. It is one mark per beat with no choice of lead, where a delineator is scored on the better of its two
leads: the comparison favours the delineator, and the tables say so.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from _wave_net_data import wave_marks

#: The marks scored, in table order.
POINTS = ("p_on", "p_off", "qrs_on", "qrs_off", "t_off")
LABELS = {"p_on": "P on", "p_off": "P off", "qrs_on": "QRS on", "qrs_off": "QRS off", "t_off": "T off"}
SECOND_READER = "cardiologist 2"


def reference_marks(base: Path, extension: str) -> dict[str, np.ndarray]:
    """Onsets/offsets of P, QRS and T from a QTDB/LUDB-style annotation file ('(' peak ')'; ``_wave_net_data.wave_marks``)."""
    import wfdb

    ann = wfdb.rdann(str(base), extension)
    marks: dict[str, list[int]] = defaultdict(list)
    for wave, on, off, _ in wave_marks(list(ann.sample), list(ann.symbol)):
        if on is not None:
            marks[f"{wave}_on"].append(int(on))
        if off is not None:
            marks[f"{wave}_off"].append(int(off))
    return {k: np.asarray(v, dtype=np.int64) for k, v in marks.items()}


def nearest_errors(ref: np.ndarray, det: np.ndarray, tol: int) -> np.ndarray:
    """Signed error (samples) of the nearest detection per reference mark; NaN when none within tol."""
    err = np.full(ref.size, np.nan)
    if det.size == 0 or ref.size == 0:
        return err
    det = np.sort(det)
    idx = np.clip(np.searchsorted(det, ref), 1, det.size - 1) if det.size > 1 else np.zeros(ref.size, dtype=np.int64)
    cand = np.stack([det[np.maximum(idx - 1, 0)], det[idx]])
    diff = cand - ref[None, :]
    best = diff[np.argmin(np.abs(diff), axis=0), np.arange(ref.size)]
    ok = np.abs(best) <= tol
    err[ok] = best[ok]
    return err


class Tally:
    """One delineator's errors (ms) per mark, pooled and per record, and how many reference marks it was scored on."""

    def __init__(self) -> None:
        self.errors: dict[str, list[float]] = defaultdict(list)
        self.total: dict[str, int] = defaultdict(int)
        self.by_record: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))

    def add(self, point: str, errors_ms: np.ndarray, record: str = "") -> None:
        self.total[point] += errors_ms.size
        found = errors_ms[np.isfinite(errors_ms)].tolist()
        self.errors[point].extend(found)
        self.by_record[record][point].extend(found)

    def row(self, point: str) -> tuple[float, float, float, int]:
        e = np.asarray(self.errors[point])
        n = self.total[point]
        if e.size == 0:
            return float("nan"), float("nan"), 0.0, n
        return float(e.mean()), float(e.std()), e.size / max(n, 1), n

    def sd_without(self, point: str, records: frozenset[str]) -> tuple[float, int]:
        """(SD in ms, number of errors) of ``point`` over the records not in ``records``."""
        e = np.asarray([x for r, marks in self.by_record.items() if r not in records for x in marks.get(point, [])])
        return (float(e.std()) if e.size else float("nan")), int(e.size)

    def sd_only(self, point: str, records: frozenset[str]) -> float:
        """SD in ms of ``point`` over ``records`` only."""
        return self.sd_without(point, frozenset(self.by_record) - records)[0]


def second_reader(folder: Path, records: list[str], tol_ms: float) -> Tally:
    """QTDB's second cardiologist (``.q2c``) against the first (``.q1c``) on those of ``records`` that have both."""
    import wfdb

    tally = Tally()
    for record in records:
        base = folder / record
        if not base.with_suffix(".q2c").exists():
            continue
        fs = float(wfdb.rdheader(str(base)).fs)
        first, second = reference_marks(base, "q1c"), reference_marks(base, "q2c")
        for point in POINTS:
            if point in first and point in second:  # .q2c marks no P wave: P is not scored, not counted as missed
                errors = nearest_errors(first[point], second[point], int(round(tol_ms * fs / 1000.0)))
                tally.add(point, errors * 1000.0 / fs, record)
    return tally


def print_second_reader(tallies: dict[str, Tally], reader: Tally, short: dict[str, str], against_second: dict[str, Tally] | None = None) -> None:
    """Two lines: the second cardiologist's SD per mark beside each delineator's on the same records (best lead);
    with ``against_second``, each delineator's SD against the second cardiologist instead."""
    records = frozenset(reader.by_record)
    if not records:
        return
    scored = [p for p in POINTS if reader.errors[p]]
    cells = [f"{LABELS[p]} {reader.row(p)[1]:.1f} ({len(reader.errors[p])} of {reader.total[p]} marks have one within the tolerance)" for p in scored]
    ours = [f"{short.get(name, name)} " + ", ".join(f"{tally.sd_only(p, records):.1f}" for p in scored) for name, tally in tallies.items()]
    print(f"  {SECOND_READER} (.q2c) against cardiologist 1 on the {len(records)} records with both ({','.join(sorted(records))}), "
          f"one mark per beat, no choice of lead: SD {', '.join(cells)}; on the same records, best of two leads: {'; '.join(ours)}")
    if against_second:
        theirs = [f"{short.get(name, name)} " + ", ".join(f"{tally.row(p)[1]:.1f}" for p in scored) for name, tally in against_second.items()]
        print(f"  the same delineators against cardiologist 2's marks instead (best of two leads): {'; '.join(theirs)}")
