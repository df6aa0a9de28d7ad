"""Lead-level P-wave decisions of the delineator (see :mod:`ecgtrace.tools._delineate`).

:func:`p_wave_rule` decides from one lead's per-beat P candidates whether that
lead shows P waves at all; :func:`clear_p_marks` removes them (the window rule
of :func:`ecgtrace.tools.measure.delineate` does, when too few leads show them).
"""

from __future__ import annotations

import numpy as np

from ecgtrace.tools._delineate import DelineationParams


def clear_p_marks(out: dict[str, np.ndarray]) -> None:
    """Remove every P mark of a lead (in place)."""
    for name in ("p_on", "p_peak", "p_off"):
        out[name][:] = -1
    out["p_present"][:] = False


def p_wave_rule(out: dict[str, np.ndarray], fs_hz: float, p: DelineationParams | None = None) -> dict[str, object]:
    """Decide whether a lead shows P waves.

    Present when P is found in at least ``p_share`` of the narrow-QRS beats, the
    PR interval is stable (interquartile range <= ``p_pr_iqr_ms``) and the P
    waves stand out from the T-P stretch before them (median ratio >=
    ``p_quiet_ratio``; AF f waves do not).
    """
    p = p or DelineationParams()
    ms = 1000.0 / fs_hz
    has_qrs = out["qrs_on"] >= 0
    width = (out["qrs_off"] - out["qrs_on"]) * ms
    # ectopic ventricular beats are wider than the dominant rhythm (which may itself be wide: BBB)
    limit = max(p.wide_qrs_ms, float(np.median(width[has_qrs])) + 30.0) if has_qrs.any() else p.wide_qrs_ms
    narrow = has_qrs & (width <= limit)
    found = out["p_present"] & narrow
    share = float(found.sum() / max(int(narrow.sum()), 1))
    # the rules' own P onsets: the wave net places a P wave where P waves usually sit, so its onsets would give f waves a steady PR
    p_on = out.get("p_on_rule", out["p_on"])
    pr = (out["qrs_on"][found] - p_on[found]) * ms
    iqr = float(np.subtract(*np.percentile(pr, [75, 25]))) if pr.size >= 2 else None
    quiet = out["p_quiet_ratio"][found]
    quiet = quiet[np.isfinite(quiet)]
    quiet_median = float(np.median(quiet)) if quiet.size else None
    # the T-P stretch is not quiet in 2:1 block (it holds the blocked P wave), but f waves never keep one PR beat after beat
    locked = iqr is not None and pr.size >= 4 and iqr <= p.p_pr_iqr_locked_ms
    present = bool(pr.size >= 1 and share >= p.p_share and (iqr is None or iqr <= p.p_pr_iqr_ms)
                   and (quiet_median is None or quiet_median >= p.p_quiet_ratio or locked))
    return {
        "present": present,
        "share_of_beats": round(share, 3),
        "pr_iqr_ms": None if iqr is None else round(iqr, 1),
        "quiet_ratio": None if quiet_median is None else round(quiet_median, 2),
        "rule": (
            f"P found in >= {p.p_share:.0%} of beats with QRS <= max({p.wide_qrs_ms:g} ms, median + 30 ms), PR interquartile range <= "
            f"{p.p_pr_iqr_ms:g} ms, P amplitude >= {p.p_quiet_ratio:g} x the T-P stretch peak-to-peak (or a PR interquartile range <= {p.p_pr_iqr_locked_ms:g} ms)"
        ),
    }
