"""Array kernels of the P-wave search (tools/_holter_p_search.py) against the plain per-beat loops they replace.

The expectations are written here as the straightforward loops (one beat, one
candidate, one lead at a time, numpy's own ``linspace`` and sums): the
vectorised kernels must give the same numbers bit for bit, so the P waves a
record gets do not depend on the implementation.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import butter, fftconvolve, sosfiltfilt

from ecgtrace.tools import _holter_p_search as ks
from ecgtrace.tools.holter_p import DEFAULT_P_PARAMS, _windows

FS_HZ = 250.0
P = dict(DEFAULT_P_PARAMS)


def _signal(n: int, n_leads: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Band-passed noise with a QRS-like bump at each beat (irregular RR, some short), as the search filters it."""
    rng = np.random.default_rng(seed)
    rr = rng.integers(110, 320, size=n // 150)
    beats = np.cumsum(rr) + 20
    beats = beats[beats < n - 5]
    x = rng.normal(0, 0.05, (n, n_leads))
    for b in beats:
        lo, hi = max(b - 8, 0), min(b + 8, n)
        x[lo:hi] += np.hanning(16)[: hi - lo, None] * rng.uniform(0.5, 1.5, n_leads)
    sos = butter(2, [0.5, 25.0], btype="bandpass", fs=FS_HZ, output="sos")
    f = sosfiltfilt(sos, x, axis=0)  # strided as the search gets it
    classes = np.where(rng.random(beats.size) < 0.9, "N", "V")
    return f, beats.astype(np.int64), classes


def _subtract_qrst_loop(f, beats, good, is_n, pr_guess):
    pre, post = int(P["qrst_pre_ms"] * FS_HZ / 1000), int(P["qrst_post_ms"] * FS_HZ / 1000)
    fit = good & (beats - pre >= 0) & (beats + post < f.shape[0])
    res = f.copy()
    template = np.median(np.stack([f[b - pre : b + post] for b in beats[fit]]), axis=0)
    for i in np.flatnonzero(is_n):
        a = beats[i] - pre
        end = post if i + 1 >= beats.size else min(post, int(beats[i + 1] - beats[i]) - pr_guess - int(0.06 * FS_HZ))
        if a < 0 or end <= 0 or beats[i] + end > f.shape[0]:
            continue
        seg, tpl = f[a : beats[i] + end], template[: pre + end]
        tpl = tpl - np.linspace(tpl[0], tpl[-1], tpl.shape[0])
        scale = np.clip((seg * tpl).sum(axis=0) / np.maximum((tpl * tpl).sum(axis=0), 1e-12), 0.6, 1.6)
        res[a : beats[i] + end] -= tpl * scale
    return res


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("layout", ["filtered", "c_contiguous"])
def test_qrst_subtraction_is_the_per_beat_fit(seed, layout):
    f, beats, classes = _signal(20_000, 3, seed)
    f = f if layout == "filtered" else np.ascontiguousarray(f)
    is_n = classes == "N"
    expected = _subtract_qrst_loop(f, beats, is_n, is_n, 40)
    got = ks.subtract_qrst(f, beats, is_n, is_n, FS_HZ, 40, P)
    assert np.array_equal(got, expected)
    assert not np.array_equal(got, f)  # it did subtract


def test_linspace_rows_are_numpys_linspace_including_a_flat_lead():
    rng = np.random.default_rng(5)
    num = rng.integers(2, 40, size=30)
    start = rng.normal(size=3)
    stop = rng.normal(size=(30, 3))
    stop[4, 1] = start[1]  # a flat lead: numpy takes its zero-step branch for that beat
    stop[7] = start + 1e-320  # steps that underflow to 0 (denormal deltas)
    got = ks._linspace_rows(start, stop, num, int(num.max()))
    for i, k in enumerate(num):
        assert np.array_equal(got[:k, i], np.linspace(start, stop[i], k))
        assert not got[k:, i].any()


def _sliding_corr_loop(res, tpl):
    m = tpl.shape[0]
    num = sum(fftconvolve(res[:, j], tpl[::-1, j], mode="same") for j in range(res.shape[1]))
    csum = np.cumsum(np.vstack([np.zeros((1, res.shape[1])), res]), axis=0)
    csq = np.cumsum(np.vstack([np.zeros((1, res.shape[1])), res * res]), axis=0)
    lo = np.clip(np.arange(res.shape[0]) - m // 2, 0, res.shape[0] - m)
    s1, s2 = csum[lo + m] - csum[lo], csq[lo + m] - csq[lo]
    var = np.maximum((s2 - s1 * s1 / m).sum(axis=1), 1e-12)
    energy = float((tpl * tpl).sum())
    return num / np.sqrt(var * energy), num / energy


@pytest.mark.parametrize("n_leads", [1, 2, 3, 7, 9, 12])
def test_sliding_correlation_matches_the_per_lead_formulation(n_leads):
    rng = np.random.default_rng(n_leads)
    res = rng.normal(size=(5_000, n_leads)) * rng.uniform(0.1, 3.0, n_leads)
    res[1000:1100] = 0.0  # a flat stretch: the variance floor
    tpl = rng.normal(size=(31, n_leads))
    for got, expected in zip(ks.sliding_corr(res, tpl), _sliding_corr_loop(res, tpl)):
        assert np.array_equal(got, expected)


def _pick_peaks_loop(corr, scale, allowed, t_zone):
    need = np.where(t_zone, P["t_zone_min_corr"], P["min_corr"])
    cand = np.flatnonzero(allowed & (corr >= need) & (scale >= P["min_scale"]) & (scale <= P["max_scale"]))
    gap = int(P["min_pp_ms"] * FS_HZ / 1000)
    taken = np.zeros(corr.size, bool)
    keep = []
    for c in cand[np.argsort(-corr[cand], kind="stable")]:
        if not taken[max(c - gap + 1, 0) : c + gap].any():
            keep.append(c)
            taken[c] = True
    return np.sort(np.asarray(keep, dtype=np.int64))


@pytest.mark.parametrize("seed", range(6))
def test_peak_picking_is_the_greedy_pass(seed):
    rng = np.random.default_rng(seed)
    n = 6_000
    corr = np.convolve(rng.normal(size=n), np.hanning(25), mode="same")
    corr = 0.75 + 0.25 * corr / np.abs(corr).max()
    corr[100:140] = 0.95  # a plateau: ties go to the earlier sample
    corr[3000:3600:7] = 0.99  # a chain closer than the gap
    scale = rng.uniform(0.3, 2.2, n)
    allowed = rng.random(n) < 0.9
    t_zone = np.zeros(n, bool)
    t_zone[2000:2600] = True
    got = ks.pick_peaks(corr, scale, allowed, t_zone, FS_HZ, P)
    expected = _pick_peaks_loop(corr, scale, allowed, t_zone)
    assert got.dtype == np.int64 and expected.size > 10
    assert np.array_equal(got, expected)


def test_no_candidate_gives_no_peak():
    corr = np.zeros(500)
    assert ks.pick_peaks(corr, corr, np.ones(500, bool), np.zeros(500, bool), FS_HZ, P).size == 0


def test_search_masks_are_the_slices_they_replace():
    n = 3_000
    beats = np.array([-50, 5, 400, 700, 1500, 2950, 3100])  # beats off both ends too
    is_n = np.array([True, True, False, True, True, False, True])
    ok, t_zone = np.ones(n, bool), np.zeros(n, bool)
    t_end = int(P["t_zone_ms"] * FS_HZ / 1000)
    for b in beats[is_n]:
        t_zone[max(b, 0) : max(b + t_end, 0)] = True
    for guard, which in ((P["qrs_guard_ms"], is_n), (P["other_beat_guard_ms"], ~is_n)):
        before, after = (int(v * FS_HZ / 1000) for v in guard)
        for b in beats[which]:
            ok[max(b - before, 0) : max(b + after, 0)] = False
    got_ok, got_t = ks.allowed_masks(n, beats, is_n, FS_HZ, P)
    assert np.array_equal(got_ok, ok) and np.array_equal(got_t, t_zone)


def test_r_alignment_is_the_per_lag_search():
    f, beats, classes = _signal(20_000, 3, 7)
    is_n = classes == "N"
    rng = np.random.default_rng(7)
    jittered = beats + rng.integers(-4, 5, beats.size)  # the detector's jitter, to be undone
    half, lag = int(0.08 * FS_HZ), int(P["align_ms"] * FS_HZ / 1000)
    inside = (jittered - half - lag >= 0) & (jittered + half + lag < f.shape[0])
    tpl = np.median(_windows(f, jittered[is_n & inside], -half, half), axis=0)
    tpl = tpl - tpl.mean(axis=0)
    expected = jittered.copy()
    for i in np.flatnonzero(is_n & inside):
        scores = [(f[jittered[i] + k - half : jittered[i] + k + half] * tpl).sum() for k in range(-lag, lag + 1)]
        expected[i] = jittered[i] + int(np.argmax(scores)) - lag
    got = ks.align_beats(f, jittered, is_n, is_n, FS_HZ, P)
    assert np.array_equal(got, expected)
    assert np.abs(got - beats)[is_n & inside].mean() < np.abs(jittered - beats)[is_n & inside].mean()


def test_windows_keep_their_shape_and_copy():
    x = np.arange(40.0).reshape(20, 2)
    w = _windows(x, np.array([3, 10]), -2, 3)
    assert w.shape == (2, 5, 2) and np.array_equal(w[1, :, 0], x[8:13, 0])
    w[0] = -1
    assert (x >= 0).all()  # a copy: callers may write into it


def test_one_workspace_across_chunks_of_other_sizes_gives_the_same_numbers():
    # the serial 24 h pass reuses one Workspace: a smaller chunk after a larger one (the record's last),
    # then a larger one again, must not see the previous chunk's values
    rng = np.random.default_rng(11)
    work = ks.Workspace()
    for n, n_leads in [(6_000, 3), (2_500, 2), (7_000, 3), (20, 3), (6_000, 9)]:
        res = rng.normal(size=(n, n_leads))
        tpl = rng.normal(size=(31, n_leads))
        for got, expected in zip(ks.sliding_corr(res, tpl, work), _sliding_corr_loop(res, tpl)):
            assert np.array_equal(got, expected)
