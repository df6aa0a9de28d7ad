"""Beat-to-beat template projection: hand-built marks whose true positions are known."""

from __future__ import annotations

import numpy as np

from ecgtrace.tools._delineate_consistency import ConsistencyParams, beat_consistency, dominant_beats, running_median

FS = 500.0
RR = 400  # samples (0.8 s)


def _lead(n_beats: int = 10, ectopic: int | None = None) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """A 40 Hz-like signal of identical narrow QRS (one wide, inverted beat at ``ectopic``) and true marks 40 ms around R."""
    beats = np.arange(1, n_beats + 1) * RR
    t = np.arange((n_beats + 1) * RR + RR, dtype=np.float64)
    xf = np.zeros_like(t)
    for k, b in enumerate(beats):
        if k == ectopic:
            xf += -0.8 * np.exp(-0.5 * ((t - b) / 20.0) ** 2)
        else:
            xf += 1.0 * np.exp(-0.5 * ((t - b) / 5.0) ** 2) - 0.2 * np.exp(-0.5 * ((t - b - 12) / 4.0) ** 2)
    res = {"xf": xf}
    for name, rel in (("p_on", -80), ("p_off", -40), ("qrs_on", -20), ("qrs_off", 20), ("t_off", 150)):
        res[name] = (beats + rel).astype(np.int64)
    return res, beats


def test_a_straying_mark_is_replaced_by_the_template_projection() -> None:
    res, beats = _lead()
    res["t_off"][4] += 40  # 80 ms late: a U wave taken for the T end
    cp = ConsistencyParams(blend={k: 0.0 for k in ConsistencyParams().limit_ms})
    moved = beat_consistency(res, beats, FS, cp)
    assert moved == 1
    np.testing.assert_array_equal(res["t_off"], beats + 150)
    np.testing.assert_array_equal(res["qrs_on"], beats - 20)  # boundaries without a limit are never projected


def test_small_jitter_is_pulled_by_the_blend_share() -> None:
    res, beats = _lead()
    res["qrs_off"][3] += 4  # 8 ms late, inside the outlier limit
    beat_consistency(res, beats, FS, ConsistencyParams(blend={"qrs_off": 0.5}, limit_ms={"qrs_off": 16.0}))
    assert res["qrs_off"][3] == beats[3] + 22  # half way back to the template's +20


def test_ectopic_beats_and_missing_marks_keep_their_own_values() -> None:
    res, beats = _lead(ectopic=5)
    res["qrs_off"][5] = beats[5] + 60  # a wide ventricular beat really ends later
    res["p_on"][2] = -1  # no P wave found in this beat
    assert not dominant_beats(res["xf"], beats, FS, 0.9)[5]
    beat_consistency(res, beats, FS, ConsistencyParams())
    assert res["qrs_off"][5] == beats[5] + 60
    assert res["p_on"][2] == -1


def test_too_few_dominant_beats_change_nothing() -> None:
    res, beats = _lead(n_beats=2)
    res["qrs_on"][0] -= 30
    before = {k: v.copy() for k, v in res.items()}
    assert beat_consistency(res, beats, FS, ConsistencyParams(min_beats=3)) == 0
    for k in before:
        np.testing.assert_array_equal(res[k], before[k])


def test_running_median_skips_missing_values_and_uses_the_nearest_beats() -> None:
    v = np.array([1.0, np.nan, 3.0, 100.0, 5.0, 7.0, 9.0])
    out = running_median(v, 3)
    assert out[0] == 3.0  # neighbours 1, 3, 100 (the NaN is skipped)
    assert out[3] == 5.0  # 3, 100, 5
    assert out[6] == 7.0  # the last three: 5, 7, 9
