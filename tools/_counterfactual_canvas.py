"""The working copy of a window being edited: its signal, beats, and every change made to it.

A :class:`Canvas` holds the window's signal (mV, float64), its baseline and
noise level, the beats (local sample positions and classes) and the log of
what was changed. The edits of :mod:`ecgtrace.tools.counterfactual` are
written in terms of five operations:

* :meth:`Canvas.remove` takes a span's own waveform out (the neighbours'
  templates stay) and puts back seeded noise of the same level;
* :meth:`Canvas.add` adds a template (or a beat's own waveform) at an R position;
* :meth:`Canvas.shift` inserts (or deletes) baseline samples at a quiet point,
  moving everything after it; the window keeps its length (the end is cut, or
  filled and marked invalid);
* :meth:`Canvas.drop_beat` / :meth:`Canvas.add_beat` keep the beat list true.

Every operation records its span, so the edit record says where the signal
changed and the joins can be checked for seams.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ecgtrace.tools._counterfactual_waves import (
    TAPER_S, Template, baseline, fill_noise, gain_near, lowpass, median_template, noise_sigma_mv, own_waveform, place,
)
from ecgtrace.tools.records import SignalWindow

#: A stretch is quiet enough to cut when its low-passed signal stays this close to the baseline (mV, every lead).
QUIET_MV = 0.08


@dataclass
class Canvas:
    """A window being edited (local sample indices throughout; see the module docstring)."""

    window: SignalWindow
    r: list[float]
    cls: list[str]
    rng: np.random.Generator
    x: np.ndarray = field(init=False)
    base: np.ndarray = field(init=False)
    sigma_white: np.ndarray = field(init=False)
    sigma_low: np.ndarray = field(init=False)
    spans: list[tuple[int, int]] = field(default_factory=list)
    joins: list[int] = field(default_factory=list)
    shifts: list[tuple[int, int]] = field(default_factory=list)
    removed: list[tuple[float, str]] = field(default_factory=list)  # (position, class) in the timeline before any earlier shift
    added: list[list] = field(default_factory=list)  # [position, class], kept current through later shifts
    valid_to: int = field(init=False)
    ids: list[int] = field(init=False)  # per beat: its index among the window's beats before any edit (-1: added)

    def __post_init__(self) -> None:
        self.ids = list(range(len(self.r)))
        self.x = np.array(self.window.signal_mv, dtype=np.float64)
        self.base = baseline(self.x, self.fs)
        self.sigma_white, self.sigma_low = noise_sigma_mv(self.x, self.fs)
        self.valid_to = self.x.shape[0]

    @property
    def fs(self) -> float:
        return float(self.window.fs_hz)

    @property
    def n(self) -> int:
        return int(self.x.shape[0])

    def samples(self, seconds: float) -> int:
        return int(round(seconds * self.fs))

    # ------------------------------------------------------------------ reading

    def template(self, cls: str, pre: int, post: int, exclude: set[int] = frozenset(), only: list[int] | None = None) -> Template | None:  # type: ignore[assignment]
        """Median beat of class ``cls`` (beats in ``exclude`` left out; ``only``: just these beats) over ``[r - pre, r + post]``."""
        rs = np.array([round(r) for k, (r, c) in enumerate(zip(self.r, self.cls)) if c == cls and k not in exclude and (only is None or k in only)],
                      dtype=np.int64)
        return median_template(self.x, self.base, rs, pre, post, self.fs, cls)

    def gain(self, template: Template, beats: list[int]) -> np.ndarray:
        return gain_near(self.x, self.base, template, [int(round(self.r[k])) for k in beats if 0 <= k < len(self.r)])

    def placed(self, pieces: list[tuple[Template, float, np.ndarray]], start: int, stop: int) -> np.ndarray:
        """The sum of templates ``(template, r, gain)`` over ``[start, stop)``."""
        out = np.zeros((stop - start, self.x.shape[1]))
        for template, r, gain in pieces:
            at, piece = place(template, r, self.n, gain)
            lo, hi = max(at, start), min(at + piece.shape[0], stop)
            if hi > lo:
                out[lo - start : hi - start] += piece[lo - at : hi - at]
        return out

    def waveform(self, start: int, stop: int, keep: list[tuple[Template, float, np.ndarray]]) -> np.ndarray:
        """The own waveform of ``[start, stop)`` with the pieces in ``keep`` left out of it."""
        start, stop = max(0, start), min(self.n, stop)
        return own_waveform(self.x, self.base, start, stop, self.fs, self.placed(keep, start, stop))

    def quiet(self, start: int, stop: int) -> bool:
        """Only baseline in ``[start, stop)`` (no wave): low-passed signal within :data:`QUIET_MV` of the baseline."""
        if stop <= start or start < 0 or stop > self.n:
            return False
        dev = np.abs(lowpass(self.x, self.fs)[start:stop] - self.base[start:stop])
        return bool(np.all(dev.max(axis=0) < np.maximum(QUIET_MV, 4 * self.sigma_low)))

    # ------------------------------------------------------------------ writing

    def remove(self, start: int, stop: int, keep: list[tuple[Template, float, np.ndarray]]) -> None:
        """Take the own waveform of ``[start, stop)`` out and put back noise of the level that went with it."""
        if min(self.n, stop) - max(0, start) >= 4:
            self.take(start, stop, keep)

    def take(self, start: int, stop: int, keep: list[tuple[Template, float, np.ndarray]]) -> np.ndarray:
        """:meth:`remove`, returning the waveform taken out (to be put back elsewhere)."""
        start, stop = max(0, start), min(self.n, stop)
        wave = self.waveform(start, stop, keep)
        self.x[start:stop] += fill_noise(stop - start, self.sigma_low, self.fs, self.rng) - wave
        self._changed(start, stop)
        return wave

    def add(self, template: Template, r: float, gain: np.ndarray | float = 1.0) -> None:
        at, piece = place(template, r, self.n, gain)
        if piece.shape[0]:
            self.x[at : at + piece.shape[0]] += piece
            self._changed(at, at + piece.shape[0])

    def shift(self, at: int, by: int) -> None:
        """Insert ``by`` samples of baseline at ``at`` (``by < 0``: delete ``-by`` samples from ``at`` on); later beats move."""
        if by == 0:
            return
        n = self.n
        if by > 0:
            level = lowpass(self.x, self.fs)[at]
            filler = level + self.rng.standard_normal((by, self.x.shape[1])) * self.sigma_white
            self.x = np.concatenate([self.x[:at], filler, self.x[at:]])[:n]
            self.base = np.concatenate([self.base[:at], np.repeat(self.base[at : at + 1], by, axis=0), self.base[at:]])[:n]
            self.valid_to = min(n, self.valid_to + by)
        else:
            cut = -by
            tail = lowpass(self.x, self.fs)[-1] + self.rng.standard_normal((cut, self.x.shape[1])) * self.sigma_white
            self.x = np.concatenate([self.x[:at], self.x[at + cut :], tail])
            # the two baseline stretches now meeting at ``at`` may sit at different levels (wander): ease the step out
            m, e = max(2, self.samples(0.02)), self.edge()
            step = self.x[at : at + m].mean(axis=0) - self.x[max(0, at - m) : at].mean(axis=0)
            self.x[at : at + e] -= step * (0.5 + 0.5 * np.cos(np.pi * np.arange(min(e, n - at)) / e))[:, None]
            self.base = np.concatenate([self.base[:at], self.base[at + cut :], np.repeat(self.base[-1:], cut, axis=0)])
            self.valid_to = min(self.valid_to, n) - cut
        self.r = [r + by if r >= at else r for r in self.r]
        for entry in self.added:
            entry[0] = entry[0] + by if entry[0] >= at else entry[0]
        self.spans = [(a + by if a >= at else a, b + by if b > at else b) for a, b in self.spans]
        self.joins = [j + by if j >= at else j for j in self.joins]
        self.shifts.append((at, by))
        self._changed(at, at + max(by, 1))

    def drop_beat(self, k: int) -> None:
        self.removed.append((self.r[k], self.cls[k]))
        del self.r[k]
        del self.cls[k]
        del self.ids[k]

    def add_beat(self, r: float, cls: str) -> None:
        k = int(np.searchsorted(np.asarray(self.r), r))
        self.r.insert(k, float(r))
        self.cls.insert(k, cls)
        self.ids.insert(k, -1)
        self.added.append([float(r), cls])

    def _changed(self, start: int, stop: int) -> None:
        self.spans.append((int(start), int(stop)))
        self.joins += [int(start), int(stop)]

    def edge(self) -> int:
        return self.samples(TAPER_S)

    def result_window(self) -> SignalWindow:
        return SignalWindow(signal_mv=self.x.astype(np.float32), fs_hz=self.window.fs_hz, sampfrom=self.window.sampfrom, leads=self.window.leads)

    def merged_spans(self) -> list[tuple[int, int]]:
        out: list[list[int]] = []
        for a, b in sorted(self.spans):
            if out and a <= out[-1][1]:
                out[-1][1] = max(out[-1][1], b)
            else:
                out.append([a, b])
        return [(a, b) for a, b in out]
