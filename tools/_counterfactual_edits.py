"""The edits of :mod:`ecgtrace.tools.counterfactual`, written on a :class:`~ecgtrace.tools._counterfactual_canvas.Canvas`.

Positions are local samples (floats for R peaks). Each function checks what it
needs (normal beats around the evidence, a quiet stretch to cut, room for a
moved wave) and raises :class:`EditImpossible` with the reason otherwise; the
public wrappers turn that into :class:`~ecgtrace.tools.counterfactual.CounterfactualError`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ecgtrace.tools._counterfactual_canvas import Canvas
from ecgtrace.tools._counterfactual_waves import TAPER_S, Template, cycle_bounds_s, lowpass, taper


#: Beats between two normal beats are restored at evenly spaced times when that spacing is within this share of the
#: normal RR (a full compensatory pause); otherwise at one normal RR each, and the beats after move (a reset).
EVEN_SPACING_TOLERANCE = 0.10
#: P wave edits: the span taken is the marked P wave plus this margin (s) on each side.
P_MARGIN_S = 0.02
NON_CONDUCTED = ("V", "F", "Q")


class EditImpossible(Exception):
    """This edit cannot be made on this window (reason in the message)."""


def runs_of(indices: list[int]) -> list[list[int]]:
    """Consecutive indices grouped: ``[2, 3, 7]`` -> ``[[2, 3], [7]]``."""
    runs: list[list[int]] = []
    for k in sorted(indices):
        if runs and k == runs[-1][-1] + 1:
            runs[-1].append(k)
        else:
            runs.append([k])
    return runs


def normal_rr(c: Canvas, exclude: set[int]) -> float:
    """Median RR (samples) between consecutive normal beats, none of them in ``exclude``."""
    rrs = [c.r[k + 1] - c.r[k] for k in range(len(c.r) - 1)
           if c.cls[k] == "N" and c.cls[k + 1] == "N" and k not in exclude and k + 1 not in exclude]
    if len(rrs) < 2:  # bigeminy: no two normal beats in a row; a compensatory pause spans two sinus RRs
        rrs = [(c.r[k + 1] - c.r[k - 1]) / 2.0 for k in range(1, len(c.r) - 1) if c.cls[k] != "N" and c.cls[k - 1] == c.cls[k + 1] == "N"]
    if len(rrs) < 2:
        raise EditImpossible("fewer than 2 RR intervals between normal beats to learn the sinus rhythm from")
    return float(np.median(rrs))


#: A beat lends its cycle to the median normal beat only when the beat before it is this much further away than
#: the cycle's start (its T wave has ended), and the beat after it this much further than the cycle's end.
CLEAR_BEFORE_S, CLEAR_AFTER_S = 0.35, 0.12


def normal_template(c: Canvas, rr: float, exclude: set[int]) -> Template:
    """The median normal beat over the cycles of normal beats whose neighbours do not reach into them.

    In bigeminy every normal beat is followed early by an ectopic one: the
    cycle is then shortened to end before the typical next beat.
    """
    pre_s, post_s = cycle_bounds_s(rr / c.fs)
    pre, post = c.samples(pre_s), c.samples(post_s)
    cands = [k for k, cls in enumerate(c.cls) if cls == "N" and k not in exclude]

    def clear(k: int, pre: int, post: int) -> bool:
        return ((k == 0 or c.r[k] - c.r[k - 1] >= pre + c.samples(CLEAR_BEFORE_S))
                and (k == len(c.r) - 1 or c.r[k + 1] - c.r[k] >= post + c.samples(CLEAR_AFTER_S)))

    ok = [k for k in cands if clear(k, pre, post)]
    if len(ok) < 2:
        nexts = [c.r[k + 1] - c.r[k] for k in cands if k + 1 < len(c.r)]
        if nexts:
            post = int(min(post, float(np.median(nexts)) - c.samples(CLEAR_AFTER_S)))
            ok = [k for k in cands if clear(k, pre, post)]
    template = c.template("N", pre, post, exclude, only=ok) if post > c.samples(0.2) else None
    if template is None or template.n_beats < 2:
        raise EditImpossible("fewer than 2 normal beats wholly inside the window to learn the median normal beat from")
    return template


def _neighbours(c: Canvas, beats: list[int], template: Template) -> list[tuple[Template, float, np.ndarray]]:
    return [(template, c.r[k], c.gain(template, [k])) for k in beats if 0 <= k < len(c.r)]


def _ectopic_span(c: Canvas, first: int, last: int) -> tuple[int, int]:
    """The span of beats ``first..last`` (P wave, if any, to T end), short of the beats around them."""
    before = c.r[first] - c.r[first - 1]
    after = c.r[last + 1] - c.r[last]
    return int(round(c.r[first] - min(c.samples(0.25), 0.6 * before))), int(round(c.r[last] + min(c.samples(0.55), 0.8 * after)))


def active_extent(template: Template, level_mv: float = 0.02) -> tuple[int, int]:
    """``(first, last)`` sample offsets from R where the template's waveform exceeds ``level_mv`` in any lead."""
    on = np.flatnonzero(np.abs(template.wave_mv).max(axis=1) > level_mv)
    if not on.size:
        return 0, 0
    return int(on[0]) - template.pre, int(on[-1]) - template.pre


def _cut_point(c: Canvas, lo: float, hi: float, by: int) -> int:
    """Where ``by`` samples can be inserted (or ``-by`` deleted) inside the quiet stretch ``[lo, hi]``."""
    edge = c.edge()
    need = abs(by) + 2 * edge if by < 0 else 2 * edge
    if hi - lo < need:
        raise EditImpossible("no quiet stretch long enough to restore the sinus timing")
    at = int(round((lo + hi - (abs(by) if by < 0 else 0)) / 2))
    span = (at, at + abs(by)) if by < 0 else (at - edge, at + edge)
    if not c.quiet(*span):
        raise EditImpossible("the stretch where the timing would be restored is not quiet (a wave lies there)")
    return at


def restore_sinus(c: Canvas, a: int, b: int, run: list[int]) -> None:
    """Remove beats ``run`` (between normal beats ``a`` and ``b``) and put normal beats at the sinus times between ``a`` and ``b``."""
    if a < 0 or b >= len(c.r):
        raise EditImpossible("the evidence lies at the window edge (no normal beat on both sides)")
    if c.cls[a] != "N" or c.cls[b] != "N":
        raise EditImpossible("the beats on either side of the evidence are not both normal")
    rr = normal_rr(c, set(run))
    template = normal_template(c, rr, set(run))
    ra, rb = c.r[a], c.r[b]
    first, last = active_extent(template)
    lo, hi = ra + last, rb + first
    if run:
        start, stop = _ectopic_span(c, run[0], run[-1])
        c.remove(start, stop, _neighbours(c, [a, b], template))
        for k in reversed(run):
            c.drop_beat(k)
        lo, hi = max(lo, start), min(hi, stop)
    elif not c.quiet(int(lo), int(hi)):
        raise EditImpossible("the pause is not a flat stretch (waves inside it)")
    gap = rb - ra
    n_new = max(0, int(round(gap / rr)) - 1)
    gain = c.gain(template, [a, a + 1])  # a + 1 is b once the run is dropped
    if n_new == 0:
        if not 0.8 <= gap / rr <= 1.25:
            raise EditImpossible(f"the RR around the evidence is {gap / rr:.2f} normal RRs: no sinus timing fits")
        return
    spacing = gap / (n_new + 1)
    if abs(spacing / rr - 1.0) <= EVEN_SPACING_TOLERANCE:
        times = [ra + i * spacing for i in range(1, n_new + 1)]
    else:
        by = int(round((n_new + 1) * rr - gap))
        c.shift(_cut_point(c, lo, hi, by), by)
        times = [ra + i * rr for i in range(1, n_new + 1)]
    for t in times:
        c.add(template, t, gain)
        c.add_beat(t, "N")


def _check_move(c: Canvas, s: int, d: int) -> None:
    n = len(c.r)
    if not (1 <= s < n - 1 and 1 <= d < n - 1):
        raise EditImpossible("the ectopic beat and its new place need a beat on both sides inside the window")
    if c.cls[s] == "N" or c.cls[d] != "N":
        raise EditImpossible("move takes an ectopic beat to a normal beat's place")
    if abs(s - d) < 3:
        raise EditImpossible("the new place is too close to the ectopic beat (fewer than 2 beats between them)")
    if any(c.cls[k] != "N" for k in (s - 1, s + 1, d - 1, d + 1)):
        raise EditImpossible("the beats around the ectopic beat and its new place must be normal")


def move(c: Canvas, s: int, d: int) -> None:
    """Move ectopic beat ``s`` to the place of normal beat ``d`` (see :func:`ecgtrace.tools.counterfactual.move_beat`)."""
    _check_move(c, s, d)
    rr = normal_rr(c, {s})
    template = normal_template(c, rr, {s})
    start, stop = _ectopic_span(c, s, s)
    own = c.waveform(start, stop, _neighbours(c, [s - 1, s + 1], template))
    ectopic = Template(wave_mv=own, pre=int(round(c.r[s])) - start, post=stop - 1 - int(round(c.r[s])), n_beats=1, cls=c.cls[s])
    coupling, after = c.r[s] - c.r[s - 1], c.r[s + 1] - c.r[s]
    compensatory = abs((coupling + after) / (2 * rr) - 1.0) <= EVEN_SPACING_TOLERANCE
    cls = c.cls[s]

    def to_dest() -> None:
        r_prev, r_next = c.r[d - 1], c.r[d + 1]
        new_r = r_prev + coupling
        c.remove(int(round(c.r[d] - template.pre)), int(round(c.r[d] + template.post)), _neighbours(c, [d - 1, d + 1], template))
        c.drop_beat(d)
        if not compensatory:
            by = int(round(new_r + after - r_next))
            c.shift(_cut_point(c, new_r + active_extent(ectopic)[1], r_next + active_extent(template)[0], by), by)
        c.add(ectopic, new_r)
        c.add_beat(new_r, cls)

    def from_source() -> None:
        restore_sinus(c, s - 1, s + 1, [s])

    for step in ((to_dest, from_source) if d > s else (from_source, to_dest)):
        step()


def replace(c: Canvas, idx: list[int], template: Template | None, new_class: str | None) -> None:
    """Replace beats ``idx`` by ``template`` (default: the median of the other normal beats) at the same R times."""
    rr = normal_rr(c, set(idx)) if template is None else float(np.median(np.diff(c.r))) if len(c.r) > 1 else c.samples(0.8)
    own = normal_template(c, rr, set(idx)) if template is None else template
    pre_s, post_s = cycle_bounds_s(rr / c.fs)
    pre, post = c.samples(pre_s), c.samples(post_s)
    kinds = {cls: c.template(cls, pre, post) for cls in set(c.cls)}
    for k in idx:
        keep = [(kinds[c.cls[j]], c.r[j], c.gain(kinds[c.cls[j]], [j])) for j in (k - 1, k + 1) if 0 <= j < len(c.r) and kinds.get(c.cls[j])]
        gain = c.gain(own, [j for j in (k - 1, k + 1) if 0 <= j < len(c.r) and c.cls[j] == "N"]) if template is None else 1.0
        c.remove(int(round(c.r[k] - pre)), int(round(c.r[k] + post)), keep)
        c.add(own, c.r[k], gain)
        if new_class:
            c.cls[k] = new_class


# ------------------------------------------------------------------ P waves and ST

def local_marks(c: Canvas, kept: np.ndarray, **marks: Any) -> dict[str, list[int | None]]:
    """Per-beat absolute marks (aligned with the caller's beats; -1 = none) as local samples of the window's beats."""
    out: dict[str, list[int | None]] = {}
    for name, values in marks.items():
        arr = np.asarray(values, dtype=np.int64)
        if arr.size <= int(kept.max()):
            raise EditImpossible(f"{name} has {arr.size} entries, fewer than the beats")
        out[name] = [int(v - c.window.sampfrom) if v >= 0 else None for v in arr[kept]]
    return out


def move_p_waves(c: Canvas, marks: dict[str, list[int | None]], target_pr_ms: float) -> int:
    """Move each marked P wave later so that its PR (P onset to QRS onset) is ``target_pr_ms``; the number moved."""
    margin, moved = c.samples(P_MARGIN_S), 0
    for on, off, qrs in zip(marks["p_on"], marks["p_off"], marks["qrs_on"]):
        if on is None or off is None or qrs is None or off <= on:
            continue
        want = (qrs - on) - c.samples(target_pr_ms / 1000.0)
        shift = min(want, qrs - c.samples(0.008) - (off + margin))
        if want < 2 or shift < 0.5 * want:
            continue
        wave = c.take(on - margin, off + margin, [])
        c.add(Template(wave_mv=wave, pre=0, post=wave.shape[0] - 1, n_beats=1, cls="P"), max(0, on - margin) + shift)
        moved += 1
    return moved


def take_p_waves(c: Canvas, marks: dict[str, list[int | None]]) -> int:
    margin, n = c.samples(P_MARGIN_S), 0
    for on, off in zip(marks["p_on"], marks["p_off"]):
        if on is not None and off is not None and off > on:
            c.remove(on - margin, off + margin, [])
            n += 1
    return n


def add_p_waves(c: Canvas, p_template: Template) -> int:
    """Add the P wave before every beat that is not ventricular, where it clears the previous QRS by 100 ms."""
    n = 0
    for k, r in enumerate(list(c.r)):
        if c.cls[k] in NON_CONDUCTED or r - p_template.pre < 0:
            continue
        if k and r - p_template.pre < c.r[k - 1] + c.samples(0.10):
            continue
        c.add(p_template, r)
        n += 1
    return n


#: Atrial activity (f or flutter waves) lies in this band (Hz); it is taken out of the stretches between QRS complexes.
ATRIAL_BAND_HZ = (3.0, 12.0)
#: Half-width (s) around each R peak left as it is when atrial activity is taken out (the QRS and its slopes).
QRS_GUARD_S = 0.08


def clear_atrial_activity(c: Canvas) -> int:
    """Take the fibrillatory (or flutter) waves out of the baseline between QRS complexes; the number of beats kept in place.

    The waves are the signal minus the baseline and each beat's median QRS-T
    (:func:`normal_template` over the window's normal beats, which averages the
    unsynchronized waves out), band-passed to :data:`ATRIAL_BAND_HZ`. They are
    removed between each beat's T wave end and the next QRS (the TQ stretch,
    where they show), with tapered edges; under the QRS-T they are left.
    """
    from scipy.signal import butter, sosfiltfilt

    rr = normal_rr(c, set())
    template = normal_template(c, rr, set())
    beats = _neighbours(c, [k for k, cls in enumerate(c.cls) if cls == "N"], template)
    resid = c.x - c.base - c.placed(beats, 0, c.n)
    sos = butter(2, ATRIAL_BAND_HZ, btype="band", fs=c.fs, output="sos")
    atrial = sosfiltfilt(sos, resid, axis=0)
    keep = np.ones(c.n)
    guard, edge = c.samples(QRS_GUARD_S), c.edge()
    t_end = active_extent(template)[1] + edge
    ramp = 0.5 - 0.5 * np.cos(np.pi * np.arange(edge) / max(edge, 1))
    for k, r in enumerate(c.r):
        nxt = c.r[k + 1] if k + 1 < len(c.r) else c.n + guard
        a, b = int(round(r)) - guard, int(round(min(r + t_end, nxt - guard)))
        keep[max(0, a) : min(c.n, b)] = 0.0
        lo, hi = max(0, a - edge), min(c.n, b + edge)
        if a - edge >= 0:
            keep[lo:a] = np.minimum(keep[lo:a], ramp[::-1][: a - lo])
        if b + edge <= c.n:
            keep[b:hi] = np.minimum(keep[b:hi], ramp[: hi - b])
    c.x -= atrial * keep[:, None]
    c.spans.append((0, c.n))
    return len(c.r)


def p_part(full: Template, r_minus_qrs_on: int, fs_hz: float) -> Template:
    """The part of a median beat before its QRS onset (the P wave and PR segment), with tapered ends."""
    length = full.pre - max(r_minus_qrs_on, 0) - int(round(0.004 * fs_hz))
    if length < int(round(0.06 * fs_hz)):
        raise EditImpossible("the median beat has no room for a P wave before its QRS")
    wave = full.wave_mv[:length] * taper(length, int(TAPER_S * fs_hz))[:, None]
    return Template(wave_mv=wave, pre=full.pre, post=length - 1 - full.pre, n_beats=full.n_beats, cls="P")


def level_st(c: Canvas, marks: dict[str, list[int | None]], leads: list[int], min_dev: float) -> dict[int, float]:
    """Subtract each beat's ST deviation (J+40..80 ms against the PR level) over the ST segment; median deviation per lead changed."""
    low = lowpass(c.x, c.fs)
    ms = c.samples
    devs: dict[int, list[float]] = {}
    beats = [(on, off) for on, off in zip(marks["qrs_on"], marks["qrs_off"]) if on is not None and off is not None]
    for k, (on, j) in enumerate(beats):
        nxt = beats[k + 1][0] if k + 1 < len(beats) else c.n
        end = min(j + ms(0.22), nxt - ms(0.12), c.n)
        if on - ms(0.03) < 0 or end - j < ms(0.10):
            continue
        iso = low[on - ms(0.03) : on - ms(0.01)].mean(axis=0)
        dev = low[j + ms(0.04) : j + ms(0.08)].mean(axis=0) - iso
        shape = np.zeros(end - (j - ms(0.016)))
        up, top = ms(0.016), ms(0.096)
        shape[:up] = 0.5 - 0.5 * np.cos(np.pi * np.arange(up) / up)
        shape[up:top] = 1.0
        down = shape.size - top
        shape[top:] = 0.5 + 0.5 * np.cos(np.pi * np.arange(down) / max(down, 1))
        for lead in leads:
            if abs(dev[lead]) >= min_dev:
                c.x[j - up : end, lead] -= dev[lead] * shape
                devs.setdefault(lead, []).append(float(dev[lead]))
                c.spans.append((j - up, end))
                c.joins += [j - up, end]
    return {lead: float(np.median(v)) for lead, v in devs.items()}
