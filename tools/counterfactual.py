"""Counterfactual ECG windows: take the evidence out, move it, or change nothing that matters.

Every edit takes a window (:class:`~ecgtrace.tools.records.SignalWindow`, mV),
its beats (absolute R-peak samples and AAMI classes) and a seed, and returns an
:class:`Edited`: the edited window (same start, length and leads, so it is
drawn on the same time axis by the same renderers), the beats after the edit
(the ground truth the pipeline is asked to confirm) and a plain-JSON edit
record (what, where in ms from the record start, which beats, which leads).
Edits are additive and tapered (:mod:`ecgtrace.tools._counterfactual_waves`):
outside the edited spans the signal is bit-identical, and where an edit meets
it the joins are continuous up to the noise level (:func:`seam_ratio`).

Edits (all seeded and deterministic):

* :func:`remove_beats` - ectopic beats (one, or a run) are taken out and the
  record's own median normal beat is put at the expected sinus time(s): a
  full compensatory pause keeps the later beats where they are; after a reset
  (a PAC) baseline is inserted so the next beat comes one RR later;
* :func:`fill_pause` - the missing beat(s) of a long RR are put back;
* :func:`move_beat` - an ectopic beat is moved to a normal beat's place (same
  coupling interval and pause), and the normal beat to the ectopic's;
* :func:`replace_beats` - beats are replaced by a template at the same time:
  a normal beat by the window's median normal beat (a control edit), or a wide
  beat by a narrow template taken from elsewhere in the record;
* :func:`shorten_pr` - each P wave is moved towards its QRS;
* :func:`restore_p_waves` / :func:`remove_p_waves` - P waves are added before
  each QRS (AF questions) or taken away;
* :func:`flatten_st` - the ST segment is brought back to the PR baseline.

Example:
    >>> edited = remove_beats(window, beats, classes, [pvc_index], seed=0)  # doctest: +SKIP
    >>> edited.record["op"], edited.record["beats_removed_ms"]  # doctest: +SKIP
    ('remove_beats', [36310])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ecgtrace.errors import EcgTraceError
from ecgtrace.tools import _counterfactual_edits as ce
from ecgtrace.tools._counterfactual_canvas import Canvas
from ecgtrace.tools._counterfactual_waves import Template, baseline, median_template
from ecgtrace.tools.records import SignalWindow

METHOD = "ecgtrace.tools.counterfactual"
COUNTERFACTUAL_VERSION = "1"
#: An edited window is not kept when a join jumps by more than this many noise sigmas (first differences).
MAX_SEAM_SIGMAS = 6.0

__all__ = ["COUNTERFACTUAL_VERSION", "CounterfactualError", "Edited", "fill_pause", "flatten_st", "load_window", "median_beat", "move_beat", "p_wave_template",
           "remove_beats", "remove_p_waves", "replace_beats", "restore_p_waves", "save_window", "seam_ratio", "shorten_pr"]


class CounterfactualError(EcgTraceError):
    """An edit cannot be made on this window (the reason is the message: no room, no template, evidence at the edge ...)."""


@dataclass(frozen=True)
class Edited:
    """An edited window, its beats after the edit and the edit record (plain JSON)."""

    window: SignalWindow
    beat_samples: np.ndarray
    beat_classes: np.ndarray
    record: dict[str, Any]
    joins: tuple[int, ...]
    valid_to: int  # absolute sample: from here on the window holds filler (a deletion pulled the tail in)
    origin: np.ndarray  # per beat after the edit: its index in the caller's beat arrays, -1 for a beat the edit added


def _canvas(window: SignalWindow, beat_samples: Any, beat_classes: Any, seed: int) -> tuple[Canvas, np.ndarray]:
    samples = np.asarray(beat_samples, dtype=np.int64)
    classes = np.asarray(beat_classes).astype(str)
    if samples.size != classes.size:
        raise CounterfactualError(f"{samples.size} beats but {classes.size} classes")
    inside = (samples >= window.sampfrom) & (samples < window.sampto)
    if not inside.any():
        raise CounterfactualError("no beat inside the window")
    local = (samples[inside] - window.sampfrom).astype(float).tolist()
    return Canvas(window=window, r=local, cls=classes[inside].tolist(), rng=np.random.default_rng(int(seed))), np.flatnonzero(inside)


def _indices(targets: Any, kept: np.ndarray) -> list[int]:
    """Targets given as indices of the caller's beat arrays, as indices among the window's beats."""
    where = {int(g): k for k, g in enumerate(kept)}
    out = []
    for t in np.atleast_1d(np.asarray(targets, dtype=np.int64)).tolist():
        if t not in where:
            raise CounterfactualError(f"beat {t} is not inside the window")
        out.append(where[t])
    return sorted(set(out))


def _finish(c: Canvas, kept: np.ndarray, op: str, seed: int, **details: Any) -> Edited:
    fs, s0 = c.fs, c.window.sampfrom

    def ms(local: float) -> int:
        return int(round((local + s0) * 1000.0 / fs))

    record = {
        "op": op,
        "method": METHOD,
        "version": COUNTERFACTUAL_VERSION,
        "seed": int(seed),
        "spans_ms": [[ms(a), ms(b)] for a, b in c.merged_spans()],
        "beats_removed_ms": [ms(r) for r, _ in sorted(c.removed)],
        "removed_classes": [cls for _, cls in sorted(c.removed)],
        "beats_added_ms": [ms(r) for r, _ in sorted(c.added)],
        "added_classes": [cls for _, cls in sorted(c.added)],
        "shifts_ms": [{"at_ms": ms(a), "by_ms": round(b * 1000.0 / fs, 1)} for a, b in c.shifts],
        "leads": list(c.window.leads) if "leads" not in details else details.pop("leads"),
        "noise_sigma_mv": [round(float(s), 4) for s in c.sigma_white],
        **details,
    }
    samples = np.array([round(r) + s0 for r in c.r], dtype=np.int64)
    return Edited(window=c.result_window(), beat_samples=samples, beat_classes=np.array(c.cls, dtype="<U1"), record=record,
                  joins=tuple(sorted({j + s0 for j in c.joins if 0 < j < c.n})), valid_to=int(c.valid_to + s0),
                  origin=np.array([int(kept[i]) if i >= 0 else -1 for i in c.ids], dtype=np.int64))


def _guard(fn):  # noqa: ANN001, ANN202
    """Edits report an impossible edit as :class:`CounterfactualError` (never an IndexError deep inside)."""
    def wrapped(*args: Any, **kwargs: Any) -> Edited:
        try:
            return fn(*args, **kwargs)
        except ce.EditImpossible as exc:
            raise CounterfactualError(str(exc)) from None
    wrapped.__name__, wrapped.__doc__, wrapped.__wrapped__ = fn.__name__, fn.__doc__, fn  # type: ignore[attr-defined]
    return wrapped


# ------------------------------------------------------------------ beats

@_guard
def remove_beats(window: SignalWindow, beat_samples: Any, beat_classes: Any, targets: Any, *, seed: int = 0) -> Edited:
    """Take beats ``targets`` (indices into ``beat_samples``) out and restore the sinus rhythm around them.

    Consecutive targets are one run. Each run's own waveform is removed (the
    neighbours stay) and the window's median normal beat is placed at the
    expected sinus times between the beats around the run (see the module docstring).
    """
    c, kept = _canvas(window, beat_samples, beat_classes, seed)
    runs = ce.runs_of(_indices(targets, kept))
    for run in reversed(runs):  # the latest first: an earlier shift then carries the later edit along
        ce.restore_sinus(c, run[0] - 1, run[-1] + 1, run)
    return _finish(c, kept, "remove_beats", seed, beats_targeted_ms=[int(round(float(np.asarray(beat_samples)[t]) * 1000.0 / c.fs)) for t in np.atleast_1d(targets)])


@_guard
def fill_pause(window: SignalWindow, beat_samples: Any, beat_classes: Any, opener: int, *, seed: int = 0) -> Edited:
    """Put the missing beat(s) into the long RR that beat ``opener`` (index into ``beat_samples``) opens."""
    c, kept = _canvas(window, beat_samples, beat_classes, seed)
    k = _indices([opener], kept)[0]
    if k + 1 >= len(c.r):
        raise CounterfactualError("the pause is not closed inside the window")
    ce.restore_sinus(c, k, k + 1, [])
    return _finish(c, kept, "fill_pause", seed)


@_guard
def move_beat(window: SignalWindow, beat_samples: Any, beat_classes: Any, source: int, dest: int, *, seed: int = 0) -> Edited:
    """Move the ectopic beat ``source`` to the place of the normal beat ``dest`` (indices into ``beat_samples``).

    The ectopic keeps its coupling interval and its pause (compensatory or
    not); where it was, the sinus rhythm is restored as in :func:`remove_beats`.
    """
    c, kept = _canvas(window, beat_samples, beat_classes, seed)
    s, d = _indices([source, dest], kept) if source < dest else _indices([dest, source], kept)[::-1]
    ce.move(c, s, d)
    return _finish(c, kept, "move_beat", seed, moved_from_ms=int(round(float(np.asarray(beat_samples)[source]) * 1000.0 / c.fs)))


@_guard
def replace_beats(window: SignalWindow, beat_samples: Any, beat_classes: Any, targets: Any, *, template: Template | None = None,
                  new_class: str | None = None, seed: int = 0) -> Edited:
    """Replace beats ``targets`` by ``template`` at the same R times (default: the window's median normal beat, others only).

    With the default template this is the control edit: a normal beat replaced
    by another normal beat changes nothing a reader should see. ``new_class``
    relabels the replaced beats (default: unchanged).
    """
    c, kept = _canvas(window, beat_samples, beat_classes, seed)
    idx = _indices(targets, kept)
    ce.replace(c, idx, template, new_class)
    return _finish(c, kept, "replace_beats", seed, replaced_ms=[int(round((c.r[k] + c.window.sampfrom) * 1000.0 / c.fs)) for k in idx],
                   template="given" if template is not None else "window median normal beat")


# ------------------------------------------------------------------ waves

@_guard
def shorten_pr(window: SignalWindow, beat_samples: Any, beat_classes: Any, p_on: Any, p_off: Any, qrs_on: Any, *, target_pr_ms: float = 160.0,
               seed: int = 0) -> Edited:
    """Move each beat's P wave (``p_on``/``p_off``/``qrs_on``: absolute samples per beat, -1 when absent) so its PR is ``target_pr_ms``."""
    c, kept = _canvas(window, beat_samples, beat_classes, seed)
    marks = ce.local_marks(c, kept, p_on=p_on, p_off=p_off, qrs_on=qrs_on)
    moved = ce.move_p_waves(c, marks, target_pr_ms)
    if not moved:
        raise CounterfactualError("no P wave could be moved (none longer than the target PR, or no room before the QRS)")
    return _finish(c, kept, "shorten_pr", seed, target_pr_ms=float(target_pr_ms), p_waves_moved=moved)


@_guard
def remove_p_waves(window: SignalWindow, beat_samples: Any, beat_classes: Any, p_on: Any, p_off: Any, *, seed: int = 0) -> Edited:
    """Take every marked P wave out (``p_on``/``p_off``: absolute samples per beat, -1 when absent)."""
    c, kept = _canvas(window, beat_samples, beat_classes, seed)
    marks = ce.local_marks(c, kept, p_on=p_on, p_off=p_off)
    n = ce.take_p_waves(c, marks)
    if not n:
        raise CounterfactualError("no P wave marked in the window")
    return _finish(c, kept, "remove_p_waves", seed, p_waves_removed=n)


@_guard
def restore_p_waves(window: SignalWindow, beat_samples: Any, beat_classes: Any, p_template: Template, *, clear_atrial: bool = True,
                    seed: int = 0) -> Edited:
    """Add ``p_template`` (a P wave aligned on its beat's R, from :func:`p_wave_template`) before every non-ventricular QRS.

    ``clear_atrial``: first take the fibrillatory or flutter waves out of the
    baseline between the QRS complexes (an AF window's counterfactual is sinus
    rhythm: P waves on a quiet baseline).
    """
    c, kept = _canvas(window, beat_samples, beat_classes, seed)
    cleared = ce.clear_atrial_activity(c) if clear_atrial else 0
    n = ce.add_p_waves(c, p_template)
    if not n:
        raise CounterfactualError("no beat with room for a P wave")
    return _finish(c, kept, "restore_p_waves", seed, p_waves_added=n, atrial_waves_cleared=bool(cleared))


@_guard
def flatten_st(window: SignalWindow, beat_samples: Any, beat_classes: Any, qrs_on: Any, qrs_off: Any, *, leads: list[str] | None = None,
               min_deviation_mv: float = 0.05, seed: int = 0) -> Edited:
    """Bring the ST segment (J point to T wave) of every beat back to its PR baseline, in ``leads`` (default: all)."""
    c, kept = _canvas(window, beat_samples, beat_classes, seed)
    marks = ce.local_marks(c, kept, qrs_on=qrs_on, qrs_off=qrs_off)
    chosen = [j for j, lead in enumerate(c.window.leads) if leads is None or lead in leads]
    fixed = ce.level_st(c, marks, chosen, min_deviation_mv)
    if not fixed:
        raise CounterfactualError(f"no ST deviation of at least {min_deviation_mv:g} mV to take out")
    return _finish(c, kept, "flatten_st", seed, leads=[c.window.leads[j] for j in sorted(fixed)], st_deviation_mv=fixed_values(fixed, c))


def fixed_values(fixed: dict[int, float], c: Canvas) -> dict[str, float]:
    return {c.window.leads[j]: round(v, 4) for j, v in sorted(fixed.items())}


# ------------------------------------------------------------------ templates and files

def median_beat(window: SignalWindow, beat_samples: Any, beat_classes: Any, *, cls: str = "N") -> Template:
    """The median beat of class ``cls`` in ``window`` (one cycle, P wave to T end; for :func:`replace_beats`).

    Raises CounterfactualError with fewer than 2 such beats wholly inside the window.
    """
    c, _ = _canvas(window, beat_samples, beat_classes, 0)
    try:
        rr = ce.normal_rr(c, set()) if cls == "N" else float(np.median(np.diff(c.r)))
        pre_s, post_s = ce.cycle_bounds_s(rr / c.fs)
    except ce.EditImpossible as exc:
        raise CounterfactualError(str(exc)) from None
    template = c.template(cls, c.samples(pre_s), c.samples(post_s))
    if template is None or template.n_beats < 2:
        raise CounterfactualError(f"fewer than 2 beats of class {cls} wholly inside the window")
    return template


def p_wave_template(window: SignalWindow, beat_samples: Any, beat_classes: Any, qrs_on: Any) -> Template:
    """The median sinus P wave of ``window`` (beats of class N; ``qrs_on`` absolute samples per beat), aligned on R.

    Raises CounterfactualError when the window has fewer than 3 normal beats with a QRS onset.
    """
    samples = np.asarray(beat_samples, dtype=np.int64)
    classes = np.asarray(beat_classes).astype(str)
    on = np.asarray(qrs_on, dtype=np.int64)
    inside = (samples >= window.sampfrom) & (samples < window.sampto) & (classes == "N") & (on >= 0)
    if inside.sum() < 3:
        raise CounterfactualError("fewer than 3 normal beats to learn a P wave from")
    x = np.asarray(window.signal_mv, dtype=np.float64)
    fs = float(window.fs_hz)
    r = samples[inside] - window.sampfrom
    rr = float(np.median(np.diff(samples[inside]))) / fs if inside.sum() > 1 else 0.8
    pre_s, post_s = ce.cycle_bounds_s(rr)
    full = median_template(x, baseline(x, fs), r, int(round(pre_s * fs)), int(round(post_s * fs)), fs, "P")
    if full is None:
        raise CounterfactualError("no normal beat wholly inside the window to learn a P wave from")
    return ce.p_part(full, int(np.median(samples[inside] - on[inside])), fs)


def _step(y: np.ndarray) -> np.ndarray:
    """Per sample k: the first difference at k minus the mean of its neighbours' (a step shows, a slope does not)."""
    d = np.diff(y, axis=0)
    out = np.zeros_like(y)
    out[2:-1] = d[1:-1] - 0.5 * (d[:-2] + d[2:])
    return out


def _aligned(original: SignalWindow, edited: Edited) -> np.ndarray:
    """The original moved by the edit's own shifts (inserted stretches hold the sample at the cut), to compare sample by sample."""
    x = np.asarray(original.signal_mv, dtype=np.float64)
    n, fs, s0 = x.shape[0], float(original.fs_hz), original.sampfrom
    for shift in edited.record.get("shifts_ms", []):
        at = int(round(shift["at_ms"] * fs / 1000.0)) - s0
        by = int(round(shift["by_ms"] * fs / 1000.0))
        if by > 0:
            x = np.concatenate([x[:at], np.repeat(x[at : at + 1], by, axis=0), x[at:]])[:n]
        elif by < 0:
            x = np.concatenate([x[:at], x[at - by :], np.repeat(x[-1:], -by, axis=0)])
    return x


def seam_ratio(original: SignalWindow, edited: Edited) -> float:
    """The largest step the edit makes at its joins, in noise sigmas of the same step statistic on the original (0 without joins).

    A step is a first difference that stands out from its neighbours'
    (:func:`_step`). It is read on what the edit added (the edited window
    minus the original, moved by the edit's own shifts), so a join that lies on
    a steep wave of the trace is no seam; the original's noise sigma is robust
    (1.4826 x MAD), so its QRS complexes do not raise it.
    """
    x = np.asarray(original.signal_mv, dtype=np.float64)
    sx = _step(x)
    sigma = np.median(np.abs(sx - np.median(sx, axis=0)), axis=0) * 1.4826
    sigma[sigma <= 0] = np.inf
    change = _step(np.asarray(edited.window.signal_mv, dtype=np.float64) - _aligned(original, edited))
    worst = 0.0
    for j in edited.joins:
        k = j - original.sampfrom
        if 2 <= k < change.shape[0] - 1 and j < edited.valid_to:
            worst = max(worst, float(np.max(np.abs(change[max(2, k - 1) : k + 2]) / sigma)))
    return worst


def save_window(path: Any, window: SignalWindow, **meta: Any) -> Any:
    """Write a window as ``.npz`` (signal in mV float32, fs_hz, sampfrom, leads, plain-JSON ``meta``), atomically."""
    import io
    import json

    from ecgtrace.jsonio import plain_json, write_bytes_atomic

    buffer = io.BytesIO()
    np.savez_compressed(buffer, signal_mv=np.asarray(window.signal_mv, dtype=np.float32), fs_hz=np.float64(window.fs_hz),
                        sampfrom=np.int64(window.sampfrom), leads=np.array(list(window.leads)), meta=np.array(json.dumps(plain_json(meta), sort_keys=True)))
    return write_bytes_atomic(path, buffer.getvalue())


def load_window(path: Any) -> tuple[SignalWindow, dict[str, Any]]:
    """A window written by :func:`save_window`, and its ``meta``."""
    import json

    try:
        with np.load(path, allow_pickle=False) as data:
            window = SignalWindow(signal_mv=data["signal_mv"], fs_hz=float(data["fs_hz"]), sampfrom=int(data["sampfrom"]),
                                  leads=tuple(str(x) for x in data["leads"]))
            meta = json.loads(str(data["meta"]))
    except (OSError, KeyError, ValueError) as exc:
        raise CounterfactualError(f"{path}: not a counterfactual window file ({exc})") from None
    return window, meta
