"""PR, QRS and QT interval errors on cross-lead marks, beside the measurement tolerances the audit's doubt rule uses.

``benchmarks/delineation.py`` collects them on LUDB (the cardiologists' cross-lead marks against each
delineator's) and prints them under the cross-lead table; the tolerances live with the feature vocabulary
(``rubrics/diagnosis_features.py``): a reasoning path that hinges on a value within them is dropped.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ecgtrace.rubrics.diagnosis_features import FEATURES

#: Intervals between cross-lead marks, (start mark, end mark, longest ms), checked against the measurement tolerances of the
#: features they become (rubrics/diagnosis_features.py: the audit drops a path that hinges on a value within them).
INTERVALS = {"PR": ("p_on", "qrs_on", 400.0), "QRS": ("qrs_on", "qrs_off", 250.0), "QT": ("qrs_on", "t_off", 700.0)}
INTERVAL_FEATURES = {"PR": "pr_ms", "QRS": "qrs_ms", "QT": "qtc_ms"}


def interval_errors(ref_start: np.ndarray, ref_end: np.ndarray, err_start_ms: np.ndarray, err_end_ms: np.ndarray, longest: float) -> np.ndarray:
    """Per reference interval (a start mark and the first end mark after it, at most ``longest`` samples later): the
    delineator's interval minus the reference's (ms), NaN where either mark was not found."""
    out = np.full(ref_start.size, np.nan)
    for i, a in enumerate(ref_start):
        j = int(np.searchsorted(ref_end, a, side="right"))
        if j < ref_end.size and ref_end[j] - a <= longest:
            out[i] = err_end_ms[j] - err_start_ms[i]
    return out


def print_intervals(interval_tallies: dict[str, Any]) -> None:
    """SD of the interval errors on cross-lead marks per delineator, beside the tolerance the audit's doubt rule uses."""
    for interval, feature in INTERVAL_FEATURES.items():
        cells = ", ".join(f"{name} {t.row(interval)[1]:.1f} (n {len(t.errors[interval])})" for name, t in interval_tallies.items())
        print(f"  {interval} interval error SD on cross-lead marks: {cells}; measurement tolerance of {feature}: {FEATURES[feature].tolerance:.1f} ms")
