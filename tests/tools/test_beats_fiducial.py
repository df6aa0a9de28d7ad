"""Where the detector places a beat on its QRS: the same point on every beat of a chunk's dominant shape."""

from __future__ import annotations

import numpy as np

from ecgtrace.tools._beats_fiducial import refine_beats

FS_HZ = 360.0
RR_S = 0.8


def _wave(t_s: np.ndarray, centre_s: float, amp_mv: float, width_s: float) -> np.ndarray:
    return amp_mv * np.exp(-0.5 * ((t_s - centre_s) / width_s) ** 2)


def _rs_record(n_beats: int = 40, pvc_at: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """An R then an S 40 ms later, of nearly equal size, the larger one alternating beat to beat; R times in samples."""
    n = int((n_beats + 1) * RR_S * FS_HZ)
    t = np.arange(n) / FS_HZ
    x = np.zeros(n)
    r_samples = []
    for k in range(n_beats):
        r_s = (k + 0.5) * RR_S
        if k == pvc_at:  # a wide, negative complex: another shape
            x += _wave(t, r_s, -2.0, 0.035)
        else:
            big = 1.0 + (0.08 if k % 2 else -0.08)
            x += _wave(t, r_s, big, 0.008) + _wave(t, r_s + 0.040, -(2.0 - big), 0.008)
        r_samples.append(int(round(r_s * FS_HZ)))
    return x[:, None], np.asarray(r_samples)


def _largest_deflection(x: np.ndarray, beats: np.ndarray, half: int) -> np.ndarray:
    """The rule the detector used before: each beat's largest |deflection| within +-half samples."""
    return np.asarray([b - half + int(np.argmax(np.abs(x[b - half:b + half + 1, 0]))) for b in beats])


def test_every_beat_of_one_shape_lands_on_the_same_point():
    x, r = _rs_record()
    candidates = r + 7  # the detector's candidate: somewhere between R and S
    placed, _ = refine_beats(x, candidates, np.ones((1, r.size)), FS_HZ, 50.0)
    offsets_ms = (placed - r) * 1000.0 / FS_HZ
    assert np.ptp(offsets_ms) <= 1000.0 / FS_HZ  # one sample at most
    assert abs(np.median(offsets_ms)) <= 3.0 or abs(np.median(offsets_ms) - 40.0) <= 3.0  # on the R or on the S, not between
    old = (_largest_deflection(x, candidates, int(0.05 * FS_HZ)) - r) * 1000.0 / FS_HZ
    assert np.ptp(old) >= 35.0  # the old rule flips between R and S on this record
    _, largest = refine_beats(x, candidates, np.ones((1, r.size)), FS_HZ, 50.0)
    np.testing.assert_array_equal(largest, _largest_deflection(x, candidates, int(0.05 * FS_HZ)))  # ... and is still returned


def test_a_beat_of_another_shape_keeps_its_largest_deflection():
    x, r = _rs_record(pvc_at=20)
    placed, _ = refine_beats(x, r + 5, np.ones((1, r.size)), FS_HZ, 50.0)
    assert abs(placed[20] - r[20]) <= 1  # the PVC's own (negative) peak
    normal = np.delete(placed - r, 20)
    assert np.ptp(normal) <= 1


def test_a_beat_where_the_chunk_lead_is_unusable_is_placed_on_its_own_best_lead():
    x1, r = _rs_record()
    x = np.concatenate([x1, np.roll(x1, 9)], axis=1)  # lead 1: the same beats 25 ms later
    weight = np.ones((2, r.size))
    weight[1] = 0.5  # lead 0 is the chunk's lead
    weight[0, 10] = 0.0  # ... except at beat 10, where only lead 1 is usable
    placed, _ = refine_beats(x, r + 7, weight, FS_HZ, 50.0)
    assert placed[10] in set(_largest_deflection(x[:, 1:], r[10:11] + 7, int(0.05 * FS_HZ)))


def test_a_window_without_a_finite_sample_stays_put():
    x, r = _rs_record()
    x[r[5] - 200:r[5] + 200] = np.nan
    placed, _ = refine_beats(x, r + 7, np.ones((1, r.size)), FS_HZ, 50.0)
    assert placed[5] == r[5] + 7


def test_no_beats():
    x, _ = _rs_record(4)
    assert all(a.size == 0 for a in refine_beats(x, np.zeros(0, np.int64), np.ones((1, 0)), FS_HZ, 50.0))
