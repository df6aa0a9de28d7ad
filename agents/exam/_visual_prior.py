"""The visual prior of ``ecgtrace bias``: pick a time option by what the trace shows there, never reading the question.

A model can "ground" a time-range question without knowing what was asked:
when only the correct span holds a QRS complex, "the span with a QRS in it"
is right far above chance. This probe reads the signal the examinee is shown
(the item's text asset, else the record window), finds its R peaks with the
window detector :func:`ecgtrace.tools.measure.detect_r_peaks`, and scores each
option:

* a time range (``[5.62s - 5.81s]``, audit wave grounding): 1 when an R peak
  lies inside it, else 0;
* a set of times (``"176284 ms, 177684 ms"``, QA timing): the share of its
  times within :data:`NEAR_PEAK_MS` of an R peak ("none" scores 0).

It answers with the best-scoring option, ties drawn uniformly with a seed per
question (so a dataset whose every option holds a QRS leaves it at chance).
Questions whose options are not times, or whose signal cannot be read, are not
asked (``None``).
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

#: A time option counts as "on a beat" within this distance of an R peak (ms).
NEAR_PEAK_MS = 100.0
_RANGE = re.compile(r"^\[\s*(-?\d+(?:\.\d+)?)\s*s\s*-\s*(-?\d+(?:\.\d+)?)\s*s\s*\]$")
_TIMES = re.compile(r"^\d+(?:\.\d+)? ms(?:, \d+(?:\.\d+)? ms)*$")
_NONE = ("none", "no events")


def is_time_option(option: str) -> bool:
    """A time range (``[5.62s - 5.81s]``), a set of times (``176284 ms, 177684 ms``) or "none"."""
    text = option.strip()
    return bool(_RANGE.match(text) or _TIMES.match(text)) or text.lower() in _NONE


def option_range_s(option: str) -> tuple[float, float] | None:
    """``"[5.62s - 5.81s]"`` -> (5.62, 5.81); None for any other option text."""
    match = _RANGE.match(option.strip())
    return (float(match.group(1)), float(match.group(2))) if match else None


@lru_cache(maxsize=256)
def _peaks_from_text(path: str, mtime_ns: int) -> tuple[float, ...] | None:
    """R-peak times (s from the record start) of a signal text asset, or None when unreadable or decimated."""
    from ecgtrace.errors import EcgTraceError
    from ecgtrace.tools.measure import detect_r_peaks
    from ecgtrace.tools.render import parse_signal_text

    try:
        parsed = parse_signal_text(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, EcgTraceError):
        return None
    if parsed.decimate != 1 or parsed.signal_mv.shape[0] < 10:
        return None
    window = parsed.to_window()
    local = detect_r_peaks(np.asarray(window.signal_mv, dtype=np.float64), window.fs_hz)
    return tuple(float(parsed.times_s[int(k)]) for k in local)


def signal_peaks(text_asset: Path | None) -> tuple[float, ...] | None:
    """R-peak times (s) of the signal an examinee is shown as text, or None."""
    if text_asset is None or not text_asset.is_file():
        return None
    return _peaks_from_text(str(text_asset), text_asset.stat().st_mtime_ns)


def option_score(option: str, peaks: np.ndarray) -> float | None:
    """What the trace holds at an option: see the module docstring; None when the option is not a time."""
    span = option_range_s(option)
    if span is not None:
        return float(np.any((peaks >= span[0]) & (peaks <= span[1])))
    if option.strip().lower() in _NONE:
        return 0.0
    if not _TIMES.match(option.strip()):
        return None
    times = [float(t.strip().removesuffix(" ms")) for t in option.split(",")]
    near = [bool(peaks.size) and float(np.min(np.abs(peaks * 1000.0 - t))) <= NEAR_PEAK_MS for t in times]
    return sum(near) / len(near)


def visual_choice(question: dict[str, Any], peaks: tuple[float, ...] | None, seed: int = 0) -> str | None:
    """The option the visual prior picks for one closed question (``None``: not a time question, or no signal)."""
    if peaks is None or question.get("multi") or not all(is_time_option(o) for o in question["options"]):
        return None
    arr = np.asarray(peaks, dtype=np.float64)
    scores = [option_score(o, arr) for o in question["options"]]
    if any(s is None for s in scores):
        return None
    best = max(scores)  # type: ignore[type-var]
    ties = [o for o, s in zip(question["options"], scores) if s == best]
    digest = hashlib.sha256(f"{seed}:{question['id']}".encode()).digest()
    return ties[int.from_bytes(digest[:8], "big") % len(ties)]
