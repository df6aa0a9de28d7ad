"""Beat matching for the detection benchmarks: EC57-style counts (``wfdb.processing.compare_annotations``) and rates."""

from __future__ import annotations

from typing import Any

import numpy as np

#: Match window for a detected beat around a reference beat (ANSI/AAMI EC57).
TOLERANCE_MS = 150.0


def match_beats(ref_samples: np.ndarray, test_samples: np.ndarray, fs_hz: float, tolerance_ms: float = TOLERANCE_MS) -> dict[str, Any]:
    """EC57-style beat matching (wfdb ``compare_annotations``): counts and timing errors in ms."""
    from wfdb import processing

    ref, test = np.asarray(ref_samples), np.asarray(test_samples)
    if ref.size == 0 or test.size == 0:
        return {"tp": 0, "fp": int(test.size), "fn": int(ref.size), "abs_err_ms": np.zeros(0)}
    cmp = processing.compare_annotations(ref, test, int(tolerance_ms * fs_hz / 1000.0))
    matched = cmp.matching_sample_nums >= 0
    err_ms = (test[cmp.matching_sample_nums[matched]] - ref[matched]) * 1000.0 / fs_hz
    return {"tp": int(cmp.tp), "fp": int(cmp.fp), "fn": int(cmp.fn), "abs_err_ms": np.abs(err_ms)}


def rates(tp: int, fp: int, fn: int) -> dict[str, float]:
    se = tp / (tp + fn) if tp + fn else float("nan")
    ppv = tp / (tp + fp) if tp + fp else float("nan")
    f1 = 2 * se * ppv / (se + ppv) if se + ppv else float("nan")
    return {"se": se, "ppv": ppv, "f1": f1}
