"""AV conduction events from atrial activity: second- and third-degree AV block, non-conducted PACs.

Input: R peaks (samples), P-wave peaks (samples: every atrial activation, e.g.
the ``p`` marks of an annotation file or a P-wave detector's output) and,
optionally, P peaks already known to be non-conducted premature atrial beats
(MIT-BIH ``x``). Rules (``fs_hz`` explicit; times in s unless named):

- A beat's **conducted P** is the latest P peak in ``[R - max_pr_s, R - min_pr_s]``;
  its PR (peak to R) is kept per beat. Any other P peak after the previous
  beat's QRS (``> R_prev + qrs_guard_s``) is **blocked** (no QRS of its own).
- A blocked P is a **non-conducted PAC** (``blocked_pac``) when it comes early:
  its P-P from the previous P is under ``premature_pp_ratio`` x the median P-P
  around it; otherwise it is an on-time sinus P that the AV node dropped.
- Dropped on-time P waves: three or more in a row each with exactly one
  conducted beat between them are **2:1 AV block** (``avb_2to1``) when the
  conducted beats keep one PR (within ``two_to_one_pr_range_ms``, at most one
  beat without a P in reach); a run whose PR drifts is AV dissociation near 2:1
  and is reported as third-degree block. Otherwise a drop whose PR lengthens into it (``>= pr_step_ms`` between the last two
  conducted beats) and shortens after it is **Mobitz I**; a drop with constant PR
  around it (``< pr_step_ms`` each side) is **Mobitz II**; any other drop is left
  unclassified (counted under ``unclassified_drops``). Drops of one type with at
  most ``max_cycle_beats`` conducted beats between them form one episode, from
  the beat before the first drop to the beat after the last.
- **Third-degree AV block** (``avb3``): at least ``avb3_min_beats`` consecutive
  beats, each in a window of 4 beats that holds at least ``avb3_p_ratio`` P waves
  per beat and whose P-to-R distances spread over more than ``avb3_pr_range_ms``
  (no fixed PR: the atria and ventricles beat independently), with P waves at a
  regular rate of at most ``avb3_max_atrial_bpm`` (``avb3_min_regular_share`` 80 % of
  P-P within ``avb3_cycle_tol`` 15 % of one or two median cycles; flutter waves are not
  dissociated sinus P), a regular ventricular (escape) rhythm (80 % of RR within 15 % of
  the median) and atria faster than the ventricles (median P-P under 85 % of the median
  RR: a wave locked 1:1 to the QRS is not AV dissociation). Second-degree drops
  inside it are not reported again.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ecgtrace.tools.af import _runs

DEFAULT_CONDUCTION_PARAMS: dict[str, Any] = {
    "min_pr_s": 0.04,
    "max_pr_s": 0.40,
    "qrs_guard_s": 0.10,
    "premature_pp_ratio": 0.75,
    "pr_step_ms": 12.0,
    "max_cycle_beats": 6,
    "avb3_min_beats": 4,
    "avb3_p_ratio": 1.4,
    "avb3_pr_range_ms": 150.0,
    "two_to_one_pr_range_ms": 40.0,
    "avb3_max_atrial_bpm": 150.0,
    "avb3_cycle_tol": 0.15,
    "avb3_min_regular_share": 0.8,
}


def conducted_p(beats: np.ndarray, p_peaks: np.ndarray, fs_hz: float, p: dict[str, Any]) -> np.ndarray:
    """Index into ``p_peaks`` of each beat's conducted P, or -1."""
    lo = np.searchsorted(p_peaks, beats - p["max_pr_s"] * fs_hz, side="left")
    hi = np.searchsorted(p_peaks, beats - p["min_pr_s"] * fs_hz, side="right")
    return np.where(hi > lo, hi - 1, -1)


def _median_pp(p_peaks: np.ndarray, k: int, half: int = 4) -> float:
    pp = np.diff(p_peaks[max(k - half, 0) : k + half + 1])
    return float(np.median(pp)) if pp.size else float("nan")


def conduction_events(beats: np.ndarray, p_peaks: np.ndarray, fs_hz: float, *, blocked_pac: np.ndarray | None = None, **overrides: Any) -> dict[str, Any]:
    """AV-conduction events; returns ``{"events": [(kind, first_beat, last_beat, extra)], "unclassified_drops": int, "pr_ms": array}``.

    ``first_beat``/``last_beat`` index ``beats``; for ``blocked_pac`` both are the
    beat before the blocked P and ``extra["p_sample"]`` is the P peak.
    """
    p = {**DEFAULT_CONDUCTION_PARAMS, **overrides}
    beats = np.asarray(beats, dtype=np.int64)
    p_peaks = np.unique(np.asarray(p_peaks, dtype=np.int64))
    known_pac = set(np.asarray(blocked_pac if blocked_pac is not None else [], dtype=np.int64).tolist())
    p_peaks = np.union1d(p_peaks, np.asarray(sorted(known_pac), dtype=np.int64))
    out: dict[str, Any] = {"events": [], "unclassified_drops": 0, "pr_ms": np.full(beats.size, np.nan)}
    if beats.size < 3 or p_peaks.size < 2:
        return out
    cond = conducted_p(beats, p_peaks, fs_hz, p)
    pr_ms = np.where(cond >= 0, (beats - p_peaks[np.maximum(cond, 0)]) * 1000.0 / fs_hz, np.nan)
    out["pr_ms"] = pr_ms
    used = np.zeros(p_peaks.size, bool)
    used[cond[cond >= 0]] = True
    if known_pac:  # a P known to be non-conducted never conducts, even close before a QRS
        used[np.isin(p_peaks, np.asarray(sorted(known_pac), dtype=np.int64))] = False
    avb3 = _third_degree(beats, p_peaks, pr_ms, fs_hz, p)
    in_avb3 = np.zeros(beats.size, bool)
    for a, b in avb3:
        in_avb3[a : b + 1] = True
        out["events"].append(("avb3", a, b, {}))
    drops: list[tuple[int, str]] = []  # (index of the beat before the drop, type)
    for k in np.flatnonzero(~used):
        i = int(np.searchsorted(beats, p_peaks[k], side="right")) - 1  # beat before this P
        if i < 0 or i + 1 >= beats.size or p_peaks[k] <= beats[i] + p["qrs_guard_s"] * fs_hz or in_avb3[i] or in_avb3[i + 1]:
            continue
        pp_prev = p_peaks[k] - p_peaks[k - 1] if k > 0 else np.inf
        if int(p_peaks[k]) in known_pac or pp_prev < p["premature_pp_ratio"] * _median_pp(p_peaks, k):
            out["events"].append(("blocked_pac", i, i, {"p_sample": int(p_peaks[k])}))
            continue
        drops.append((i, _drop_type(pr_ms, i, p)))
    _second_degree_episodes(drops, out, p)
    # every third-degree episode (dissociation found by P counts, or near 2:1 by a drifting PR) needs sinus-like atria
    # and a dissociation the two rhythms show: atria faster than a regular escape rhythm
    out["events"] = [e for e in _merge_avb3(out["events"]) if e[0] != "avb3" or _complete_block_rhythms(p_peaks, beats[e[1] : e[2] + 1], fs_hz, p)]
    return out


def _merge_avb3(events: list[tuple[str, int, int, dict[str, Any]]]) -> list[tuple[str, int, int, dict[str, Any]]]:
    """Third-degree episodes that overlap or lie within 3 beats of each other are one block."""
    blocks = sorted((e for e in events if e[0] == "avb3"), key=lambda e: e[1])
    merged: list[list[Any]] = []
    for _, a, b, extra in blocks:
        if merged and a - merged[-1][2] <= 3:
            merged[-1][2] = max(merged[-1][2], b)
        else:
            merged.append(["avb3", a, b, extra])
    return [e for e in events if e[0] != "avb3"] + [tuple(m) for m in merged]  # type: ignore[misc]


def _drop_type(pr_ms: np.ndarray, i: int, p: dict[str, Any]) -> str:
    """Mobitz I (PR lengthens into the drop, shortens after), Mobitz II (constant PR) or unclassified."""
    before, last, after = (pr_ms[i - 1] if i >= 1 else np.nan), pr_ms[i], (pr_ms[i + 1] if i + 1 < pr_ms.size else np.nan)
    if not (np.isfinite(last) and np.isfinite(after)):
        return "unclassified"
    step = p["pr_step_ms"]
    if np.isfinite(before) and last - before >= step and last - after >= step:
        return "avb2_mobitz1"
    if (not np.isfinite(before) or abs(last - before) < step) and abs(after - last) < step:
        return "avb2_mobitz2"
    return "unclassified"


def _second_degree_episodes(drops: list[tuple[int, str]], out: dict[str, Any], p: dict[str, Any]) -> None:
    """Group drops: runs of 1-beat cycles are 2:1 block; others merge by type within ``max_cycle_beats``."""
    idx = [i for i, _ in drops]
    two_to_one = np.zeros(len(drops), bool)
    start = 0
    for j in range(1, len(drops) + 1):
        if j == len(drops) or idx[j] - idx[j - 1] != 1:
            if j - start >= 3:
                two_to_one[start:j] = True
                a, b = idx[start], idx[j - 1] + 1
                pr = out["pr_ms"][a : b + 1]
                # 2:1 conducts every other P with one PR; a PR that drifts (or a beat with no P in reach) is AV
                # dissociation near 2:1: third degree
                steady = np.isfinite(pr).sum() >= pr.size - 1 and np.ptp(pr[np.isfinite(pr)]) <= p["two_to_one_pr_range_ms"]
                kind = "avb_2to1" if steady else "avb3"
                out["events"].append((kind, a, b, {"drops": j - start} if kind == "avb_2to1" else {}))
            start = j
    episode: list[Any] = []
    for j, (i, kind) in enumerate(drops):
        if two_to_one[j]:
            continue
        if kind == "unclassified":
            out["unclassified_drops"] += 1
            continue
        if episode and episode[0] == kind and i - episode[2] <= p["max_cycle_beats"]:
            episode[2], episode[3] = i, episode[3] + 1
            continue
        if episode:
            out["events"].append((episode[0], episode[1], episode[2] + 1, {"drops": episode[3]}))
        episode = [kind, i, i, 1]
    if episode:
        out["events"].append((episode[0], episode[1], episode[2] + 1, {"drops": episode[3]}))


def _third_degree(beats: np.ndarray, p_peaks: np.ndarray, pr_ms: np.ndarray, fs_hz: float, p: dict[str, Any]) -> list[tuple[int, int]]:
    """Runs of beats whose P waves outnumber them and keep no fixed distance to them."""
    n = beats.size
    prev_p = np.searchsorted(p_peaks, beats, side="left") - 1
    gap_ms = np.where(prev_p >= 0, (beats - p_peaks[np.maximum(prev_p, 0)]) * 1000.0 / fs_hz, np.nan)  # any P before R
    counts = np.diff(np.searchsorted(p_peaks, beats))  # P waves in each RR interval (beat i-1, i]
    flag = np.zeros(n, bool)
    w = 4
    if n <= w:
        return []
    from numpy.lib.stride_tricks import sliding_window_view

    ratio = sliding_window_view(counts, w).sum(axis=1)[: n - w] / w  # RR intervals i-w .. i-1, for i = w .. n-1
    gaps = sliding_window_view(np.nan_to_num(gap_ms, nan=np.nanmedian(gap_ms) if np.isfinite(gap_ms).any() else 0.0), w)[1:]  # beats i-w+1 .. i
    spread = gaps.max(axis=1) - gaps.min(axis=1)
    for i in np.flatnonzero((ratio >= p["avb3_p_ratio"]) & (spread > p["avb3_pr_range_ms"])) + w:
        flag[i - w + 1 : i + 1] = True
    runs: list[list[int]] = []
    for a, b in _runs(flag):
        if runs and a - runs[-1][1] <= 3:  # one or two beats that happen to sit at a normal PR do not end the block
            runs[-1][1] = b
        else:
            runs.append([a, b])
    return [(a, b) for a, b in runs if b - a + 1 >= p["avb3_min_beats"]]


def _regular_cycle(intervals_s: np.ndarray, p: dict[str, Any]) -> float | None:
    """Median cycle (s) of ``intervals_s`` when ``avb3_min_regular_share`` of them lie within ``avb3_cycle_tol`` of one or
    a whole number of median cycles (a P hidden in a QRS spans two), else None."""
    if intervals_s.size < 3:
        return None
    med = float(np.median(intervals_s))
    cycles = intervals_s / med
    on_grid = np.abs(cycles - np.round(cycles).clip(1, None)) <= p["avb3_cycle_tol"]
    return med if np.mean(on_grid) >= p["avb3_min_regular_share"] else None


def _complete_block_rhythms(p_peaks: np.ndarray, beats: np.ndarray, fs_hz: float, p: dict[str, Any]) -> bool:
    """The two rhythms of complete AV block in ``beats`` (R samples of the episode):

    - atria regular at most ``avb3_max_atrial_bpm`` (flutter waves or noise taken for P waves are not);
    - ventricles regular (an escape rhythm: RR within ``avb3_cycle_tol`` of its median; a drop run broken by a PVC is not);
    - atria faster than the ventricles by more than ``avb3_cycle_tol``: a wave locked 1:1 to the QRS (a retrograde P,
      a flutter wave, a T-wave notch taken for a P) has the ventricular rate and is no dissociated sinus P.

    ``avb3_cycle_tol`` and ``avb3_min_regular_share`` (15 %, 80 %) are the regularity tolerances the atrial test used
    before the ventricular tests were added, not fitted to a record.
    """
    start, stop = int(beats[0]), int(beats[-1])
    pp_s = _regular_cycle(np.diff(p_peaks[(p_peaks >= start) & (p_peaks <= stop)]) / fs_hz, p)
    rr = np.diff(beats) / fs_hz
    med_rr = float(np.median(rr)) if rr.size else 0.0
    regular_rr = rr.size >= 3 and np.mean(np.abs(rr / med_rr - 1.0) <= p["avb3_cycle_tol"]) >= p["avb3_min_regular_share"]
    return bool(pp_s is not None and 60.0 / pp_s <= p["avb3_max_atrial_bpm"] and regular_rr and pp_s < (1.0 - p["avb3_cycle_tol"]) * med_rr)
