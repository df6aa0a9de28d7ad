"""LUDB's own measurements, read from its cardiologists' wave marks (never from our detectors).

LUDB marks every lead separately: ``(`` onset, the wave symbol (``p``, ``N`` for
QRS, ``t``) at its peak, ``)`` offset. LUDB's statements (sinus brady-/tachycardia,
first-degree AV block) are read against these numbers where the statement and the
graph use cut-offs or tolerances that do not settle each other (label maps
``ludb_rate_doubtful_bpm``, ``ludb_pr_doubtful_ms``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: LUDB's per-lead wave files, in the order their QRS marks are tried for the reference rate.
LUDB_RATE_LEADS = ("ii", "i", "v5", "v2", "iii", "avf", "v1", "v3", "v4", "v6", "avl", "avr")
#: Fewest P-QRS pairs a lead needs for its own PR median (as our per-lead ``pr_ms``: at least two beats).
MIN_PR_PAIRS = 2
#: Version of the reference PR below (provenance of labels dropped on it).
LUDB_PR_VERSION = "1"


def _read_marks(base: Path, lead: str) -> tuple[np.ndarray, list[str]] | None:
    """Samples and symbols of one lead's wave file, or None when it is missing or unreadable."""
    import wfdb

    if not Path(f"{base}.{lead}").is_file():
        return None
    try:
        ann = wfdb.rdann(str(base), lead)
    except (OSError, ValueError):
        return None
    return np.asarray(ann.sample, dtype=np.int64), list(ann.symbol)


def _waves(samples: np.ndarray, symbols: list[str]) -> list[tuple[str, int]]:
    """``(symbol, onset sample)`` of every fully marked wave ``( sym )`` in time order."""
    return [(symbols[k], int(samples[k - 1])) for k in range(1, len(symbols) - 1)
            if symbols[k] in ("p", "N", "t") and symbols[k - 1] == "(" and symbols[k + 1] == ")"]


def ludb_reference_rate_bpm(base: Path, fs_hz: float) -> float | None:
    """Heart rate (bpm) from LUDB's cardiologist QRS peaks (``N`` between ``(`` and ``)``) of the first lead file present.

    None when no wave file has at least two QRS peaks. LUDB's rate statements
    (sinus brady-/tachycardia) are read against this rate, never against ours.
    """
    for lead in LUDB_RATE_LEADS:
        marks = _read_marks(base, lead)
        if marks is None:
            continue
        peaks = np.asarray([s for s, sym in zip(*marks) if sym == "N"], dtype=float)
        if peaks.size >= 2:
            return 60.0 * fs_hz / float(np.mean(np.diff(peaks)))
    return None


def ludb_lead_pr_ms(samples: np.ndarray, symbols: list[str], fs_hz: float) -> list[float]:
    """PR intervals (ms, P onset to QRS onset) of one lead: every marked QRS whose previous marked wave is a P wave."""
    waves = _waves(samples, symbols)
    return [1000.0 * (waves[k][1] - waves[k - 1][1]) / fs_hz for k in range(1, len(waves))
            if waves[k][0] == "N" and waves[k - 1][0] == "p"]


def ludb_reference_pr_ms(base: Path, fs_hz: float) -> float | None:
    """PR interval (ms) from LUDB's P and QRS onset marks, measured as our ``pr_ms`` is: the median over leads of each lead's median.

    A lead counts with at least :data:`MIN_PR_PAIRS` P-QRS pairs; None when no lead has them.
    """
    medians = []
    for lead in LUDB_RATE_LEADS:
        marks = _read_marks(base, lead)
        values = ludb_lead_pr_ms(*marks, fs_hz) if marks is not None else []
        if len(values) >= MIN_PR_PAIRS:
            medians.append(float(np.median(values)))
    return float(np.median(medians)) if medians else None
