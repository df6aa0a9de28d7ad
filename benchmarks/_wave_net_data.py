"""Training data of the wave net: cardiologists' wave marks as per-sample labels at 250 Hz (training only).

A label is the set of classes a sample may belong to, as a bit mask
(``NONE`` 1, ``P`` 2, ``QRS`` 4, ``T`` 8): one bit where the cardiologist's marks
settle it, several where they only rule some classes out, all four
(``UNKNOWN``) where nobody marked anything. The loss is the probability the net
gives the allowed set, so what the reference does not say is never guessed and
what it does say is never thrown away.

* LUDB (``data/<n>.<lead>``): per-lead marks of every beat between the first
  and the last mark of the lead; inside that span, what no wave covers is none.
* QTDB (``.q1c``, cardiologist 1, marks made looking at both leads, given to both):
  per annotated beat its P (where marked), QRS and T. QTDB mostly marks no T
  onset: from the QRS end to the T peak is then "none or T" (not QRS: without
  that, a net trained on QTDB is free to stretch the QRS into the ST segment).
  The stretch from one beat's T end to the next beat's P (or QRS) is none where
  the two beats follow each other (RR <= 1.6 x the median: no unmarked beat
  between them) and the next beat has a P mark, or the record marks P on at
  least 80% of its beats; elsewhere it is "none or P" (a missing P mark may be a
  P wave left unmarked: sel36 marks 1 P in 31 beats).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ecgtrace.tools._wave_net import WAVE_NET_FS_HZ, net_signal

NONE, P, QRS, T = 1, 2, 4, 8
UNKNOWN = NONE | P | QRS | T
WAVE_LABEL = {"p": P, "qrs": QRS, "t": T}


@dataclass(frozen=True)
class LabelledLead:
    """One lead at 250 Hz (high-passed, not normalized) and its labels (allowed-class bit masks, uint8)."""

    name: str
    signal: np.ndarray
    labels: np.ndarray


def wave_marks(samples: list[int], symbols: list[str]) -> list[tuple[str, int | None, int | None, int]]:
    """``(wave, onset, offset, peak)`` per marked wave of a QTDB/LUDB-style file ('(' peak ')'); a missing mark is None."""
    out = []
    for k, sym in enumerate(symbols):
        if sym in ("(", ")", "u"):
            continue
        wave = "p" if sym == "p" else "t" if sym == "t" else "qrs"
        on = samples[k - 1] if k > 0 and symbols[k - 1] == "(" else None
        off = samples[k + 1] if k + 1 < len(symbols) and symbols[k + 1] == ")" else None
        out.append((wave, on, off, samples[k]))
    return out


def ludb_labels(n: int, marks: list[tuple[str, int | None, int | None, int]], scale: float) -> np.ndarray:
    """Labels of ``n`` samples from one LUDB lead's marks (``scale``: label rate / mark rate)."""
    labels = np.full(n, UNKNOWN, dtype=np.uint8)
    ends = [s for _, on, off, _ in marks for s in (on, off) if s is not None]
    if not ends:
        return labels
    labels[int(round(min(ends) * scale)) : int(round(max(ends) * scale)) + 1] = NONE
    for wave, on, off, _ in marks:
        if on is not None and off is not None:
            labels[int(round(on * scale)) : int(round(off * scale)) + 1] = WAVE_LABEL[wave]
    return labels


def qtdb_beats(marks: list[tuple[str, int | None, int | None, int]]) -> list[dict]:
    """Per marked QRS: its R, ``qrs`` (on, off), the P before it (on, off) or None, the T after it (on or None, peak, off) or None."""
    beats: list[dict] = []
    pending_p = None
    for wave, on, off, peak in marks:
        if wave == "p":
            pending_p = (on, off) if on is not None and off is not None else None
        elif wave == "qrs":
            if on is not None and off is not None:
                beats.append({"r": peak, "qrs": (on, off), "p": pending_p, "t": None})
            pending_p = None
        elif beats and off is not None and beats[-1]["t"] is None and peak > beats[-1]["qrs"][1]:
            beats[-1]["t"] = (on, peak, off)
    return beats


def qtdb_labels(n: int, beats: list[dict]) -> np.ndarray:
    """Labels of ``n`` samples (QTDB's own rate, 250 Hz) from :func:`qtdb_beats`."""
    labels = np.full(n, UNKNOWN, dtype=np.uint8)
    if not beats:
        return labels
    p_share = float(np.mean([b["p"] is not None for b in beats]))
    rr = np.diff([b["r"] for b in beats])
    median_rr = float(np.median(rr)) if rr.size else np.inf
    for k, beat in enumerate(beats):
        q_on, q_off = beat["qrs"]
        if beat["p"] is not None:
            p_on, p_off = beat["p"]
            labels[p_on : p_off + 1] = P
            labels[p_off + 1 : q_on] = NONE
        labels[q_on : q_off + 1] = QRS
        if beat["t"] is not None:
            t_on, t_peak, t_off = beat["t"]
            if t_on is not None and q_off < t_on <= t_peak:
                labels[q_off + 1 : t_on] = NONE
                labels[t_on : t_off + 1] = T
            else:
                labels[q_off + 1 : t_peak] = NONE | T
                labels[t_peak : t_off + 1] = T
        if k + 1 < len(beats) and beat["t"] is not None and rr[k] <= 1.6 * median_rr:
            nxt = beats[k + 1]
            stop = nxt["p"][0] if nxt["p"] is not None else nxt["qrs"][0]
            labels[beat["t"][2] + 1 : stop] = NONE if nxt["p"] is not None or p_share >= 0.8 else NONE | P
    return labels


def ludb_record(folder: Path, number: str) -> list[LabelledLead]:
    """Every marked lead of LUDB record ``number`` (``folder`` holds ``<n>.hea`` and the per-lead files)."""
    import wfdb

    base = folder / str(number)
    record = wfdb.rdrecord(str(base))
    out = []
    for j, lead in enumerate(record.sig_name):
        if not Path(f"{base}.{lead}").exists():
            continue
        ann = wfdb.rdann(str(base), lead)
        x = net_signal(record.p_signal[:, j], record.fs)
        labels = ludb_labels(x.size, wave_marks(list(ann.sample), list(ann.symbol)), WAVE_NET_FS_HZ / record.fs)
        out.append(LabelledLead(f"ludb/{number}:{lead}", x, labels))
    return out


def qtdb_record(folder: Path, name: str) -> list[LabelledLead]:
    """Both leads of QTDB record ``name``, with the ``.q1c`` labels."""
    import wfdb

    base = folder / name
    record = wfdb.rdrecord(str(base))
    if abs(record.fs - WAVE_NET_FS_HZ) > 1e-6:
        raise ValueError(f"{name}: QTDB labels assume {WAVE_NET_FS_HZ:g} Hz, the record is {record.fs:g} Hz")
    ann = wfdb.rdann(str(base), "q1c")
    labels = qtdb_labels(record.sig_len, qtdb_beats(wave_marks(list(ann.sample), list(ann.symbol))))
    return [LabelledLead(f"qtdb/{name}:{lead}", net_signal(record.p_signal[:, j], record.fs), labels) for j, lead in enumerate(record.sig_name)]
