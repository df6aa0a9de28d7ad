"""Waveform pieces of a counterfactual edit: baseline, templates, a beat's own waveform, noise.

An edit is additive (:mod:`ecgtrace.tools.counterfactual`): the edited window
is the original plus a sum of smooth pieces, each built here and each zero at
its own ends, so nothing but the evidence changes and no seam appears where an
edit meets the untouched signal.

* the **baseline** (two median filters, 200 ms then 600 ms, per lead) is what a
  removed waveform leaves behind;
* a **template** is the median of a class's beats, each beat's cycle taken
  relative to its R peak after the baseline and the straight line between the
  cycle's two ends are removed (so a template starts and ends at 0 mV), with
  raised-cosine ends;
* a beat's **own waveform** is the low-passed (40 Hz) signal over a span minus
  the baseline, the neighbours' templates and the straight line between its
  ends, tapered the same way: subtracting it leaves the baseline, the
  neighbours and the signal's high-frequency noise;
* the low-frequency part of the noise taken away with a waveform is put back as
  seeded noise of the same level (:func:`noise_sigma_mv`), so an edited span is
  not smoother than the rest of the trace.

Everything works on local sample indices of a ``(n_samples, n_leads)`` array in mV.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Low-pass corner (Hz) of extracted waveforms; the noise above it is left in place.
LOWPASS_HZ = 40.0
#: Raised-cosine ramp (s) at both ends of every added or removed piece.
TAPER_S = 0.04
#: Baseline median filters (s), applied one after the other.
BASELINE_FILTERS_S = (0.2, 0.6)


@dataclass(frozen=True)
class Template:
    """A median beat: ``wave_mv[i, j]`` is lead ``j`` at ``i - pre`` samples from the R peak."""

    wave_mv: np.ndarray
    pre: int
    post: int
    n_beats: int
    cls: str

    def r_amplitude_mv(self) -> np.ndarray:
        return self.wave_mv[self.pre]


def lowpass(x: np.ndarray, fs_hz: float, cut_hz: float = LOWPASS_HZ) -> np.ndarray:
    """Zero-phase 4th-order Butterworth low-pass along axis 0 (no-op when ``cut_hz`` reaches Nyquist)."""
    from scipy.signal import butter, sosfiltfilt

    if cut_hz >= 0.45 * fs_hz or x.shape[0] < 30:
        return np.array(x, dtype=np.float64)
    sos = butter(4, cut_hz, btype="low", fs=fs_hz, output="sos")
    return sosfiltfilt(sos, np.asarray(x, dtype=np.float64), axis=0)


def baseline(x: np.ndarray, fs_hz: float) -> np.ndarray:
    """Baseline wander per lead: a 200 ms then a 600 ms median filter (QRS, then P and T removed)."""
    from scipy.ndimage import median_filter

    y = np.asarray(x, dtype=np.float64)
    for width_s in BASELINE_FILTERS_S:
        size = max(3, int(round(width_s * fs_hz)) | 1)
        y = median_filter(y, size=(size, 1), mode="nearest")
    return y


def taper(n: int, edge: int) -> np.ndarray:
    """A window of ``n`` samples: 1 inside, raised-cosine ramps of ``edge`` samples, exactly 0 at both ends."""
    w = np.ones(n)
    edge = int(min(edge, n // 2))
    if edge > 0:
        ramp = 0.5 - 0.5 * np.cos(np.pi * np.arange(edge) / edge)
        w[:edge] = ramp
        w[n - edge:] = ramp[::-1]
    if n:
        w[0] = w[-1] = 0.0
    return w


def _detrend_ends(seg: np.ndarray) -> np.ndarray:
    """``seg`` minus the straight line through its first and last samples (per lead)."""
    n = seg.shape[0]
    if n < 2:
        return seg - seg
    frac = np.linspace(0.0, 1.0, n)[:, None]
    return seg - (seg[:1] + frac * (seg[-1:] - seg[:1]))


def cycle_bounds_s(rr_s: float) -> tuple[float, float]:
    """``(pre, post)`` seconds of a beat's cycle around its R peak: P wave to T end, at most one RR in all."""
    return min(0.30, 0.40 * rr_s), min(0.60, 0.58 * rr_s)


def median_template(x: np.ndarray, base: np.ndarray, r_local: np.ndarray, pre: int, post: int, fs_hz: float, cls: str) -> Template | None:
    """The median of the cycles ``[r - pre, r + post]`` of beats ``r_local`` (those wholly inside ``x``); None without any."""
    n = x.shape[0]
    ok = [int(r) for r in r_local if r - pre >= 0 and r + post < n]
    if not ok:
        return None
    segs = np.stack([_detrend_ends(x[r - pre : r + post + 1] - base[r - pre : r + post + 1]) for r in ok])
    wave = np.median(segs, axis=0) * taper(pre + post + 1, int(TAPER_S * fs_hz))[:, None]
    return Template(wave_mv=wave, pre=pre, post=post, n_beats=len(ok), cls=cls)


def place(template: Template, r_local: float, n: int, gain: np.ndarray | float = 1.0) -> tuple[int, np.ndarray]:
    """``(start, piece)``: the template placed with its R peak at ``r_local`` (fractional samples allowed), cut to ``[0, n)``."""
    r0 = int(math.floor(r_local))
    frac = r_local - r0
    wave = template.wave_mv
    if frac > 1e-9:  # sub-sample placement by linear interpolation
        wave = (1.0 - frac) * wave + frac * np.vstack([wave[:1] * 0.0, wave[:-1]])
    start = r0 - template.pre
    lo, hi = max(0, -start), min(wave.shape[0], n - start)
    if hi <= lo:
        return 0, np.zeros((0, wave.shape[1]))
    return start + lo, wave[lo:hi] * np.asarray(gain)


def own_waveform(x: np.ndarray, base: np.ndarray, start: int, stop: int, fs_hz: float, others: np.ndarray | None = None) -> np.ndarray:
    """The waveform over ``[start, stop)`` that removing a beat takes away (see the module docstring).

    ``others`` (same span): the neighbours' template contributions, kept in place.
    """
    seg = lowpass(x, fs_hz)[start:stop] - base[start:stop]
    if others is not None:
        seg = seg - others
    return _detrend_ends(seg) * taper(stop - start, int(TAPER_S * fs_hz))[:, None]


def noise_sigma_mv(x: np.ndarray, fs_hz: float) -> tuple[np.ndarray, np.ndarray]:
    """``(white, low)``: per-lead noise level (mV) of the whole band and of its part below :data:`LOWPASS_HZ`.

    Read from the residual above the corner (robust: 1.4826 x MAD, so QRS
    slopes do not count) and extended to the whole band assuming white noise,
    the model of the synthetic generator's muscle noise.
    """
    nyq = fs_hz / 2.0
    resid = np.asarray(x, dtype=np.float64) - lowpass(x, fs_hz)
    mad = np.median(np.abs(resid - np.median(resid, axis=0)), axis=0) * 1.4826
    share = min(LOWPASS_HZ / nyq, 0.95)
    white = mad / math.sqrt(1.0 - share)
    return white, white * math.sqrt(share)


def fill_noise(n: int, sigma_low: np.ndarray, fs_hz: float, rng: np.random.Generator) -> np.ndarray:
    """Seeded noise below :data:`LOWPASS_HZ` at level ``sigma_low`` per lead, tapered like a removed waveform."""
    raw = rng.standard_normal((n + 64, sigma_low.size))
    low = lowpass(raw, fs_hz)[32 : 32 + n]
    scale = np.std(low, axis=0)
    scale[scale == 0] = 1.0
    return low / scale * sigma_low * taper(n, int(TAPER_S * fs_hz))[:, None]


def gain_near(x: np.ndarray, base: np.ndarray, template: Template, r_neighbours: list[int]) -> np.ndarray:
    """Per-lead amplitude of the neighbouring beats relative to the template (clipped to 0.7-1.3)."""
    ref = template.r_amplitude_mv()
    vals = [(x[r] - base[r]) for r in r_neighbours if 0 <= r < x.shape[0]]
    if not vals:
        return np.ones(ref.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(np.abs(ref) > 0.05, np.mean(vals, axis=0) / ref, 1.0)
    return np.clip(np.nan_to_num(ratio, nan=1.0), 0.7, 1.3)
