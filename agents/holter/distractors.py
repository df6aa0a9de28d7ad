"""Distractors as Holtercare-Bench builds them, each checked not to be a correct answer.

* counts: the answer -1, +1, +2, kept >= 0 (``+3``, ``+4`` ... fill in for a negative one);
* event timing: every timestamp -600 ms, every timestamp +800 ms, and one set
  with a different count; a shifted set whose every time still falls on a real
  event of that kind is rejected (other shifts are tried);
* HR extremum: the true time offset by +-500 ms up to +-30 min, kept inside the
  record; an offset whose heart rate ties the extremum is rejected;
* labels: findings absent from the window.

Options are plain texts; :func:`place_answer` puts the answer at a chosen
position so the writer can balance positions across the dataset.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence


def format_ms_list(times_ms: Sequence[int]) -> str:
    """``[1200, 5400]`` -> ``"1200 ms, 5400 ms"`` (``"none"`` when empty)."""
    return ", ".join(f"{int(t)} ms" for t in times_ms) if times_ms else "none"


def count_distractors(answer: int, offsets: Sequence[int] = (-1, 1, 2), n: int = 3) -> list[int]:
    """``answer + offset`` for each offset, kept >= 0 and distinct; larger offsets fill the gaps."""
    values: list[int] = []
    for offset in list(offsets) + list(range(max(offsets, default=0) + 1, max(offsets, default=0) + 2 + n)):
        value = answer + int(offset)
        if value >= 0 and value != answer and value not in values:
            values.append(value)
        if len(values) == n:
            break
    return values


def timing_matches(candidate_ms: Sequence[int], truth_ms: Sequence[int], tol_ms: float) -> bool:
    """A timestamp set is correct when it has the true count and each time is within ``tol_ms`` of its true time."""
    if len(candidate_ms) != len(truth_ms):
        return False
    return all(abs(a - b) <= tol_ms for a, b in zip(sorted(candidate_ms), sorted(truth_ms)))


def _all_on_events(times: Sequence[int], event_ms: Sequence[int], tol_ms: float) -> bool:
    return bool(times) and all(any(abs(t - e) <= tol_ms for e in event_ms) for t in times)


def timing_distractors(
    truth_ms: Sequence[int],
    *,
    event_ms: Sequence[int],
    filler_ms: Sequence[int],
    rng: random.Random,
    shifts_ms: Sequence[int] = (-600, 800),
    tol_ms: float = 150,
    n: int = 3,
) -> list[list[int]]:
    """Timestamp-set distractors for ``truth_ms``.

    Args:
        truth_ms: the true onsets (ms from the recording start).
        event_ms: onsets of every event of that kind in the record: a shifted set
            that lands on real events is rejected.
        filler_ms: candidate times (other beats of the window) for the set with a different count.
        rng: seeded random generator.
        shifts_ms: the shifts tried first; more (-900, +1100, ...) follow if those are rejected.
    """
    truth = sorted(int(t) for t in truth_ms)
    out: list[list[int]] = []

    def ok(candidate: list[int]) -> bool:
        return (bool(candidate) and not timing_matches(candidate, truth, tol_ms) and not _all_on_events(candidate, event_ms, tol_ms)
                and candidate not in out and all(t >= 0 for t in candidate))

    extra_shifts = [s for k in range(1, 8) for s in (-600 - 300 * k, 800 + 300 * k)]
    shifted = 0
    for shift in list(shifts_ms) + extra_shifts:
        if shifted == min(len(shifts_ms), n - 1):
            break
        candidate = [t + int(shift) for t in truth]
        if ok(candidate):
            out.append(candidate)
            shifted += 1
    # one set with a different count: drop one onset, or add a non-event beat time
    changed: list[list[int]] = []
    if len(truth) >= 2:
        changed += [sorted(truth[:k] + truth[k + 1:]) for k in range(len(truth))]
    fillers = [int(f) for f in filler_ms if all(abs(f - t) > tol_ms for t in truth) and all(abs(f - e) > tol_ms for e in event_ms)]
    changed += [sorted(truth + [f]) for f in fillers]
    rng.shuffle(changed)
    for candidate in changed:
        if len(out) >= n:
            break
        if ok(candidate):
            out.append(candidate)
            break
    for shift in extra_shifts:  # top up if a rule could not deliver
        if len(out) >= n:
            break
        candidate = [t + shift for t in truth]
        if ok(candidate):
            out.append(candidate)
    return out


def hr_distractors(
    t_ms: int,
    *,
    duration_ms: int,
    hr_near: Callable[[float, float], tuple[float, float] | None],
    extremum_bpm: float,
    kind: str,
    rng: random.Random,
    offsets_ms: Sequence[int] = (500, 2000, 10000, 60000, 300000, 1800000),
    tol_ms: float = 2000,
    tol_bpm: float = 3.0,
    n: int = 3,
) -> list[int]:
    """Times offset from the HR extremum, each checked not to be (nearly) an extremum itself.

    ``hr_near(t, radius)`` returns the (min, max) HR within ``radius`` ms of ``t``;
    a candidate is rejected when the rate there comes within ``tol_bpm`` of the
    extremum, or when it lies within ``2 * tol_ms`` of the truth or another option.
    """
    signed = [s * int(o) for o in offsets_ms for s in (-1, 1)]
    rng.shuffle(signed)
    signed.sort(key=lambda o: abs(o) < 2 * tol_ms)  # offsets below the answer tolerance only as a last resort
    chosen: list[int] = []
    for offset in signed:
        candidate = int(t_ms + offset)
        if not 0 <= candidate < duration_ms:
            continue
        if any(abs(candidate - c) <= 2 * tol_ms for c in chosen + [t_ms]):
            continue
        rates = hr_near(candidate, tol_ms)
        if rates is None:
            continue
        near = rates[1] if kind == "max" else rates[0]
        if abs(near - extremum_bpm) <= tol_bpm or (kind == "max" and near > extremum_bpm) or (kind == "min" and near < extremum_bpm):
            continue
        chosen.append(candidate)
        if len(chosen) == n:
            break
    return chosen


def label_distractors(answer: str, absent: Sequence[str], rng: random.Random, n: int = 3) -> list[str]:
    """``n`` labels drawn from ``absent`` (findings not in the window), never the answer."""
    pool = sorted({a for a in absent if a != answer})
    rng.shuffle(pool)
    return pool[:n]


def place_answer(answer: str, distractors: Sequence[str], position: int, rng: random.Random) -> list[str]:
    """Options with the distractors shuffled and the answer at ``position`` (taken modulo the option count)."""
    others = list(distractors)
    rng.shuffle(others)
    position %= len(others) + 1
    return others[:position] + [answer] + others[position:]
