"""Atrial flutter from the signal: a regular atrial wave at 210-360/min between QRS complexes.

Flutter waves run on without an isoelectric baseline at one rate (Wells 1979
type I: 240-340/min); the ventricles follow at a fixed or regularly varying
ratio (2:1, 4:1, ...). Per window of ``window_s`` (step ``step_s``), per
usable lead, outside artifact and VF/VFL spans:

1. QRS-T cancellation (on the chunk decimated to ``analysis_fs_hz`` and 0.5 Hz
   high-passed): the median QRS-T of a pool of up to ``pool_beats`` earlier N beats
   outside flutter windows (the chunk's own N beats while the pool is short) is
   fitted (least-squares scale) and subtracted from every beat. The pool is used
   because in fixed-ratio flutter the flutter wave is phase-locked to the QRS: a
   template of flutter beats carries the flutter wave and would cancel it. A
   flutter that lasts from the record's start past the first chunk is therefore
   not seen (its template is a flutter template): a known limit.
2. The spectrum (Hann taper, zero-padded to 1024 points) of the residual window gives the
   dominant frequency ``f0`` in ``flutter_band_hz`` (3.5-6 Hz) and the comb share:
   the power within ``peak_halfwidth_hz`` of ``f0`` and of ``2 f0`` over the power in
   ``band_hz`` (an organised sawtooth puts its power on one comb; P and T waves of
   sinus rhythm or atrial tachycardia spread it over every harmonic of the heart
   rate, and AF's fibrillatory waves over a broad band).
3. Ventricular response: every RR of the window is within ``multiple_tol`` of a
   whole number (1-``max_ratio``) of flutter cycles ``1/f0`` (AF's irregular RR is not).

A window is flutter when its best lead passes all four tests: comb share at
least ``min_comb_share``, autocorrelation at one flutter cycle at least ``min_acf``
(:func:`window_features`), residual amplitude (2.8 SD) at least
``min_amplitude_mv``, and a regularly multiple response. Runs of flutter windows
(gaps of ``max_gap_windows`` bridged) lasting at least ``min_s`` are episodes,
each with its median atrial rate (60 ``f0``/min).

What each threshold was set on (all on the synthetic holtercare record, seed 1,
so the synthetic figures are TUNED; windows from its ``.atr`` beats):

- ``min_acf`` 0.38 (the test that separates): the 24 h record's 4:1 episode
  (66/min response, noisier residual) has windows at 0.40-0.58 (5th percentile
  0.40), the 2:1 episode 0.78 and more; sinus tachycardia and bradycardia reach
  0.40, sinus rhythm 0.88 in a rare window (0.1 % of sinus windows pass both
  spectral tests; the run length ``min_s`` removes them).
- ``min_comb_share`` 0.5: a floor, no longer the separating test. It was 0.8 on
  the 4 h record (flutter windows 0.89-0.94, AT, sinus tachycardia and
  first-degree block up to 0.68) and was lowered with the autocorrelation test
  because the 4:1 episode's windows lie at 0.52-0.65; sinus tachycardia reaches
  0.58 and AF 0.91, so the share alone passes them.
- ``multiple_tol`` 0.2 cycle, ``max_ratio`` 6: from the definition (fixed or
  regularly varying conduction); no AF window of the record has a regularly multiple RR.
- ``min_amplitude_mv`` 0.05: does not bind there (every analysed window is
  above 0.09 mV); it keeps flat residuals out.

From raw detected beats (R jitter SD 12-20 ms: weaker QRS-T cancellation) the
4:1 episode's windows fall to share 0.33-0.89 and acf 0.23-0.83 and only 48 s of
its 312 s are found; :func:`ecgtrace.tools.rhythm_signal.signal_event_inputs`
therefore passes the P detector's R fiducials aligned on the median QRS
(``PWaves.r_fiducial``), from which the windows match the reference beats' and
the whole episode is found. MIT-BIH 203 (DS1) has the only flutter notes in
``../shared/data`` (coarse flutter with variable conduction and ectopy): it is
not found by version 1; no untuned record with flutter is present, and no
MIT-BIH or CPSC 2021 record gets a flutter span (from reference or detected beats).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ecgtrace.tools.holter_p import _windows  # one home for beat-centred windows
from ecgtrace.tools.records import RecordInfo, chunk_bounds, read_samples

FLUTTER_VERSION = "1"
DEFAULT_FLUTTER_PARAMS: dict[str, Any] = {
    "window_s": 6.0,
    "step_s": 6.0,
    "chunk_s": 600.0,
    "analysis_fs_hz": 60.0,
    "qrst_ms": (250.0, 500.0),
    "min_template_beats": 30,
    "pool_beats": 300,
    "band_hz": (2.5, 12.0),
    "flutter_band_hz": (3.5, 6.0),
    "peak_halfwidth_hz": 0.25,
    "min_comb_share": 0.5,
    "min_acf": 0.38,
    "min_amplitude_mv": 0.05,
    "multiple_tol": 0.2,
    "max_ratio": 6,
    "min_beats": 4,
    "min_s": 20.0,
    "max_gap_windows": 1,
}


def qrst_template(x: np.ndarray, beats: np.ndarray, pool: np.ndarray | None, pre: int, post: int, min_beats: int) -> np.ndarray | None:
    """Median QRS-T (pre + post, n_leads): of ``pool`` (earlier beats outside flutter) when it has ``min_beats``, else of ``beats``.

    In fixed-ratio flutter the flutter wave is phase-locked to the QRS, so a
    template of flutter beats carries the flutter wave and would cancel it; the
    pool of earlier non-flutter beats does not.
    """
    if pool is not None and pool.shape[0] >= min_beats:
        return np.median(pool, axis=0)
    inside = beats[(beats >= pre) & (beats + post <= x.shape[0])]
    if inside.size < min_beats:
        return None
    return np.median(_windows(x, inside, -pre, post), axis=0)


def cancel_qrst(x: np.ndarray, beats: np.ndarray, template: np.ndarray, pre: int) -> np.ndarray:
    """``x`` minus the template fitted (least-squares scale per beat and lead) to each beat, cut short before the next beat."""
    n, length = x.shape[0], template.shape[0]
    a = beats - pre
    nxt = np.append(beats[1:] - pre, n)
    stop = np.minimum(np.minimum(length, n - a), nxt - a)
    ok = (a >= 0) & (stop > pre)
    a, stop = a[ok], stop[ok]
    if a.size == 0:
        return x.copy()
    # the samples each beat's fit covers, flat: (covered samples,) beat index and template row; the spans never overlap
    first = np.cumsum(stop) - stop  # where each beat's samples start in the flat arrays
    beat_id = np.repeat(np.arange(a.size), stop)
    row = np.arange(beat_id.size) - first[beat_id]
    flat = a[beat_id] + row
    t = template[row]  # (covered, leads)
    xt = np.add.reduceat(x[flat] * t, first, axis=0)  # (beats, leads): <beat, template> over each fitted length
    tt = np.cumsum(template * template, axis=0)[stop - 1]  # (beats, leads): the template's energy over each fitted length
    scale = xt / np.maximum(tt, 1e-12)
    out = x.copy()
    out[flat] -= t * scale[beat_id]
    return out


def window_features(windows: np.ndarray, fs_hz: float, p: dict[str, Any]) -> dict[str, np.ndarray]:
    """Per window of ``windows`` (m, n, n_leads), QRS-T-cancelled, in mV, of its best lead (highest comb share):

    ``f0`` (Hz), ``share`` (0-1: power at ``f0`` and ``2 f0`` over the power in ``band_hz``),
    ``acf`` (the band-limited autocorrelation at one cycle ``1 / f0``, -1 to 1: a wave that
    repeats every cycle; the P waves of sinus rhythm repeat every RR, so their power at
    harmonics of the heart rate that are not multiples of ``f0`` counts against it)
    and ``amp`` (mV, 2.8 x SD: the 5-95 % range of a sine wave).
    """
    m, n, _ = windows.shape
    nfft = max(512, 1 << int(np.ceil(np.log2(n))))
    df = fs_hz / nfft
    v = windows - windows.mean(axis=1, keepdims=True)
    spec = np.abs(np.fft.rfft(v * np.hanning(n)[None, :, None], n=nfft, axis=1)) ** 2
    lo_b, hi_b = int(np.ceil(p["band_hz"][0] / df)), int(np.floor(p["band_hz"][1] / df))
    cum = np.concatenate([np.zeros((m, 1, spec.shape[2])), np.cumsum(spec, axis=1)], axis=1)
    s0, s1 = int(np.ceil(p["flutter_band_hz"][0] / df)), int(np.floor(p["flutter_band_hz"][1] / df))
    k0 = s0 + np.argmax(spec[:, s0 : s1 + 1], axis=1)  # (m, n_leads)
    hw = int(round(p["peak_halfwidth_hz"] / df))

    def power(center: np.ndarray) -> np.ndarray:
        a = np.clip(center - hw, lo_b, hi_b + 1)
        b = np.clip(center + hw + 1, lo_b, hi_b + 1)
        return np.take_along_axis(cum, b[:, None, :], 1)[:, 0] - np.take_along_axis(cum, a[:, None, :], 1)[:, 0]

    total = cum[:, hi_b + 1] - cum[:, lo_b]
    line = power(k0)
    inner = (k0 > s0) & (k0 < s1)  # a maximum on the band's edge is a wave outside it (e.g. the 3rd harmonic of a sinus tachycardia)
    share = np.where((total > 0) & inner, (line + power(2 * k0)) / np.maximum(total, 1e-300), 0.0)
    best = np.argmax(share, axis=1)
    rows = np.arange(m)
    amp = 2.8 * v.std(axis=1)
    band = spec[rows, lo_b : hi_b + 1, best]  # (m, bins) of the best lead
    k_best = k0[rows, best]
    cosine = np.cos(2.0 * np.pi * np.arange(lo_b, hi_b + 1)[None, :] / k_best[:, None])
    acf = (band * cosine).sum(axis=1) / np.maximum(band.sum(axis=1), 1e-300)
    return {"f0": k_best * df, "share": share[rows, best], "amp": amp[rows, best], "acf": acf}


def regular_multiple(rr_s: np.ndarray, f0_hz: float, p: dict[str, Any]) -> bool:
    """Every RR is within ``multiple_tol`` cycles of a whole number 1-``max_ratio`` of flutter cycles."""
    if rr_s.size == 0:
        return False
    cycles = rr_s * f0_hz
    k = np.rint(cycles)
    return bool(np.all((k >= 1) & (k <= p["max_ratio"]) & (np.abs(cycles - k) <= p["multiple_tol"])))


def _mask_spans(n: int, offset: int, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    bad = np.zeros(n, bool)
    for a, b in spans:
        bad[max(int(a) - offset, 0) : max(min(int(b) - offset, n), 0)] = True
    return bad


def _prepare(x: np.ndarray, offset: int, excluded: Sequence[tuple[int, int]], fs_hz: float, p: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, float, int]:
    """Chunk ``x`` decimated (block means of ``q`` samples) and 0.5 Hz high-passed (NaN as 0), and its unusable samples
    (a NaN in the block, or inside an excluded span): ``(y, bad, fs, q)``."""
    from scipy.signal import butter, sosfiltfilt

    q = max(1, int(fs_hz // p["analysis_fs_hz"]))
    n = x.shape[0] // q
    y = x[0 : n * q : q].astype(np.float64)
    for k in range(1, q):
        y += x[k : n * q : q]
    y /= q
    bad = ~np.isfinite(y).all(axis=1) | _mask_spans(n, 0, [((a - offset) // q, -(-(b - offset) // q)) for a, b in excluded])
    y[bad] = 0.0
    fs = fs_hz / q
    if n > 60:
        y = sosfiltfilt(butter(1, 0.5, btype="highpass", fs=fs, output="sos"), y, axis=0)
    return y, bad, fs, q


def _read_prepared(info: RecordInfo, start: int, stop: int, leads: list[int], excluded: Sequence[tuple[int, int]],
                   p: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, float, int]:
    """One chunk read and :func:`_prepare`-d (``excluded``: the spans that touch it); runs in a worker too."""
    return _prepare(read_samples(info, start, stop, leads).signal_mv, start, excluded, info.fs_hz, p)


def _prepared_ahead(info: RecordInfo, bounds: list[tuple[int, int, int, int]], leads: list[int], excluded: Sequence[tuple[int, int]],
                    p: dict[str, Any], workers: int) -> Iterator[tuple[np.ndarray, np.ndarray, float, int]]:
    """:func:`_read_prepared` of each chunk, in order, from ``workers`` processes at most ``2 x workers`` chunks ahead.

    Reading and decimating a chunk do not depend on the others; the template pool,
    which carries from chunk to chunk, stays with the caller. The bound keeps the
    chunks waiting for it to a few MB.
    """
    from ecgtrace.workers import worker_pool

    with worker_pool(min(workers, len(bounds))) as pool:
        pending: deque[Any] = deque()
        for start, stop, _, _ in bounds:
            touching = [(a, b) for a, b in excluded if a < stop and b > start]
            pending.append(pool.submit(_read_prepared, info, start, stop, leads, touching, p))
            if len(pending) > 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def chunk_windows(prepared: tuple[np.ndarray, np.ndarray, float, int], offset: int, beats: np.ndarray, is_n: np.ndarray, core: tuple[int, int],
                  p: dict[str, Any], pool: list[np.ndarray]) -> list[tuple[int, float | None]]:
    """``(window start sample, atrial rate /min or None)`` for each window starting in ``core`` of a chunk starting at ``offset``.

    ``prepared``: the chunk as :func:`_prepare` gives it. ``pool``: QRS-T windows of
    earlier non-flutter N beats (updated in place with this chunk's).
    """
    y, bad, fs, q = prepared
    sel = (beats >= offset) & (beats < offset + q * y.shape[0])
    local, local_n = (beats[sel] - offset) // q, is_n[sel]
    pre, post = int(p["qrst_ms"][0] * fs / 1000.0), int(p["qrst_ms"][1] * fs / 1000.0)
    stacked = np.concatenate(pool) if pool else None
    template = qrst_template(y, local[local_n], stacked, pre, post, p["min_template_beats"])
    if template is None:
        return []
    res = cancel_qrst(y, local, template, pre)
    win, step = int(round(p["window_s"] * fs)), int(round(p["step_s"] * fs))
    starts = [s for s in range(0, y.shape[0] - win + 1, step) if core[0] <= offset + q * s < core[1]]
    rates = _window_rates(res, starts, win, local, local_n, bad, fs, p)
    flutter = np.zeros(y.shape[0], bool)
    for s, rate in zip(starts, rates):
        flutter[s : s + win] |= rate is not None
    out = [(offset + q * s, rate) for s, rate in zip(starts, rates)]
    clean = local[local_n & ~flutter[np.minimum(local, y.shape[0] - 1)] & (local >= pre) & (local + post <= y.shape[0])]
    pool.append(_windows(y, clean[-p["pool_beats"] :], -pre, post))
    while sum(w.shape[0] for w in pool) - pool[0].shape[0] >= p["pool_beats"]:
        pool.pop(0)
    return out


def _window_rates(res: np.ndarray, starts: list[int], win: int, beats: np.ndarray, is_n: np.ndarray, bad: np.ndarray,
                  fs_hz: float, p: dict[str, Any]) -> list[float | None]:
    """Atrial rate (/min) of each flutter window, None elsewhere; windows with a non-N beat, too few beats or a bad sample are not analysed."""
    rates: list[float | None] = [None] * len(starts)
    s = np.asarray(starts, dtype=np.int64)
    lo, hi = np.searchsorted(beats, s), np.searchsorted(beats, s + win)
    not_n = np.concatenate([[0], np.cumsum(~is_n)])
    n_bad = np.concatenate([[0], np.cumsum(bad)])
    ok = (hi - lo >= p["min_beats"]) & (not_n[hi] == not_n[lo]) & (n_bad[np.minimum(s + win, bad.size)] == n_bad[s])
    keep = np.flatnonzero(ok).tolist()
    beat_sets = [beats[lo[i] : hi[i]] for i in keep]
    if not keep:
        return rates
    windows = np.stack([res[starts[i] : starts[i] + win] for i in keep])
    feats = window_features(windows, fs_hz, p)
    f0 = feats["f0"]
    flutter = (feats["share"] >= p["min_comb_share"]) & (feats["acf"] >= p["min_acf"]) & (feats["amp"] >= p["min_amplitude_mv"])
    for j, i in enumerate(keep):
        if flutter[j] and regular_multiple(np.diff(beat_sets[j]) / fs_hz, float(f0[j]), p):
            rates[i] = 60.0 * float(f0[j])
    return rates


def flutter_spans(info: RecordInfo, beat_samples: np.ndarray, beat_classes: Sequence[str] | np.ndarray, excluded_spans: Sequence[tuple[int, int]] = (),
                  *, workers: int = 1, **overrides: Any) -> list[dict[str, Any]]:
    """AFL episodes ``{kind, onset_sample, offset_sample, atrial_rate_bpm, source}`` (samples, half-open).

    ``excluded_spans``: artifact and VF/VFL spans (no window that touches one is
    labelled). Reads the record chunk by chunk (bounded memory). ``workers``:
    processes that read and decimate the chunks ahead (the result does not depend on it).
    """
    p = {**DEFAULT_FLUTTER_PARAMS, **overrides}
    fs = info.fs_hz
    beats = np.asarray(beat_samples, dtype=np.int64)
    is_n = np.asarray(beat_classes).astype("<U1") == "N"
    if is_n.size != beats.size:
        raise ValueError(f"beat_classes has {is_n.size} entries for {beats.size} beats")
    usable = [j for j, lead in enumerate(info.leads) if lead not in info.unusable_leads] or list(range(len(info.leads)))
    win = int(round(p["window_s"] * fs))
    labels: list[tuple[int, float | None]] = []
    if info.n_samples < win:
        return []
    pool: list[np.ndarray] = []
    bounds = chunk_bounds(info.n_samples, int(p["chunk_s"] * fs), win)
    if workers > 1 and len(bounds) > 1:
        chunks = _prepared_ahead(info, bounds, usable, excluded_spans, p, workers)
    else:
        chunks = (_read_prepared(info, start, stop, usable, excluded_spans, p) for start, stop, _, _ in bounds)
    for (start, _stop, c0, c1), ready in zip(bounds, chunks):
        labels += chunk_windows(ready, start, beats, is_n, (c0, c1), p, pool)
    return flutter_episodes(labels, win, fs, p)


def flutter_episodes(labels: list[tuple[int, float | None]], win: int, fs_hz: float, p: dict[str, Any]) -> list[dict[str, Any]]:
    """Runs of flutter windows (up to ``max_gap_windows`` missing windows bridged) of at least ``min_s``, with the median atrial rate."""
    hits = [i for i, (_, rate) in enumerate(labels) if rate is not None]
    out: list[dict[str, Any]] = []
    runs: list[list[int]] = []
    for i in hits:
        if runs and i - runs[-1][-1] <= p["max_gap_windows"] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    for run in runs:
        onset, offset = labels[run[0]][0], labels[run[-1]][0] + win
        if offset - onset < p["min_s"] * fs_hz:
            continue
        rate = float(np.median([labels[i][1] for i in run]))
        out.append({"kind": "afl", "onset_sample": int(onset), "offset_sample": int(offset), "atrial_rate_bpm": round(rate, 1),
                    "source": f"tools._rhythm_flutter v{FLUTTER_VERSION}"})
    return out
