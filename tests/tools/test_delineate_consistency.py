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


# --------------------------------------------------------------------------- median-beat QRS offset

END = 30  # samples after R where the synthetic QRS returns to the baseline (60 ms at 500 Hz)


def _qrs_shape(t: np.ndarray, b: int) -> np.ndarray:
    """Piecewise-linear R-S: rises from b-15 to 1 mV at b, falls to -0.3 mV at b+10, slowly back to 0 at b+END (its true end)."""
    return np.interp(t, [b - 15, b, b + 10, b + END], [0.0, 1.0, -0.3, 0.0], left=0.0, right=0.0)


def _rule(d: np.ndarray, main: int, lo: int, hi: int) -> tuple[int, int]:
    from ecgtrace.tools._delineate import DelineationParams, _qrs_bounds

    return _qrs_bounds(d, main, lo, hi, FS, DelineationParams(), None)


def _noisy_lead(noise_mv: float = 0.02, ectopic: int | None = None, seed: int = 1) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Identical QRS complexes plus white noise, low-passed at 40 Hz as the delineator's ``xf``; each beat's own offset is the rule on its noisy slope."""
    from ecgtrace.tools._delineate_filters import lowpass as _lowpass

    beats = np.arange(1, 13) * RR
    t = np.arange(14 * RR, dtype=np.float64)
    xf = sum(_qrs_shape(t, int(b)) * (-1.0 if k == ectopic else 1.0) for k, b in enumerate(beats))
    xf = _lowpass(xf + np.random.default_rng(seed).normal(0.0, noise_mv, t.size), 40.0, FS)
    d = np.gradient(xf) * FS
    own = [_rule(d, int(b), int(b) - 60, int(b) + 60) for b in beats]
    res = {"xf": xf, "r_peak": beats.astype(np.int64), "qrs_on": np.array([o[0] for o in own], dtype=np.int64),
           "qrs_off": np.array([o[1] for o in own], dtype=np.int64)}
    return res, beats


def test_median_beat_offset_replaces_a_beats_offset_that_stopped_early() -> None:
    from ecgtrace.tools._delineate_consistency import median_beat_qrs

    clean, beats = _noisy_lead(noise_mv=0.0)
    assert np.all(np.abs(clean["qrs_off"] - (beats + END)) <= 1)  # on a clean beat the rule finds the true end
    res, _ = _noisy_lead(noise_mv=0.02)
    own = res["qrs_off"].copy()
    stray = np.abs(own - clean["qrs_off"]) > 5  # more than 10 ms from the clean beat's: this noisy beat stopped early on a dip
    assert stray.any()
    moved = median_beat_qrs(res, FS, _rule, outlier_ms=10.0)
    assert moved == int(stray.sum())
    assert np.all(np.abs(res["qrs_off"][stray] - (beats[stray] + END)) <= 1)  # within 2 ms of the true end
    np.testing.assert_array_equal(res["qrs_off"][~stray], own[~stray])  # beats within 10 ms of the template keep their own


def test_median_beat_offset_far_from_the_beats_own_is_not_used() -> None:
    from ecgtrace.tools._delineate_consistency import median_beat_qrs

    res, beats = _noisy_lead()
    res["qrs_off"] = beats + END + 15  # 30 ms away from the median beat's: the guard keeps the beats' own marks
    assert median_beat_qrs(res, FS, _rule, agree_ms=10.0) == 0
    np.testing.assert_array_equal(res["qrs_off"], beats + END + 15)


def test_median_beat_leaves_ectopic_beats_and_onsets_alone() -> None:
    from ecgtrace.tools._delineate_consistency import median_beat_qrs

    res, beats = _noisy_lead(ectopic=4)
    res["qrs_off"][4] = beats[4] + 50
    onsets = res["qrs_on"].copy()
    median_beat_qrs(res, FS, _rule)
    assert res["qrs_off"][4] == beats[4] + 50  # the inverted beat is not dominant
    np.testing.assert_array_equal(res["qrs_on"], onsets)  # only MEDIAN_BEAT_MARKS are set


def test_median_beat_needs_enough_dominant_beats() -> None:
    from ecgtrace.tools._delineate_consistency import median_beat_qrs

    res, beats = _noisy_lead()
    before = res["qrs_off"].copy()
    assert median_beat_qrs(res, FS, _rule, min_beats=20) == 0
    np.testing.assert_array_equal(res["qrs_off"], before)


def test_impossible_marks_are_dropped_and_the_qrs_anchors_kept() -> None:
    from ecgtrace.tools._delineate_consistency import drop_impossible_marks

    def arr(*v: int) -> np.ndarray:
        return np.array(v, dtype=np.int64)

    # three beats (samples at 500 Hz); beat 0: P off 6 samples after QRS on; beat 1: T end after beat 2's QRS onset;
    # beat 2: a reversed T (on after off) and a P that is fine
    res = {
        "p_on": arr(80, 480, 880), "p_peak": arr(95, 500, 900), "p_off": arr(106, 520, 930),
        "qrs_on": arr(100, 560, 960), "r_peak": arr(120, 580, 980), "qrs_off": arr(150, 610, 1010),
        "t_on": arr(250, 700, 1200), "t_peak": arr(300, 800, 1150), "t_off": arr(380, 965, 1100),
    }
    before = {k: v.copy() for k, v in res.items()}
    assert drop_impossible_marks(res) == 4
    assert res["p_off"].tolist() == [-1, 520, 930] and res["p_on"].tolist() == before["p_on"].tolist()
    assert res["p_peak"].tolist() == before["p_peak"].tolist()
    assert res["t_off"].tolist() == [380, -1, -1] and res["t_on"].tolist() == [250, 700, -1]
    assert res["t_peak"].tolist() == before["t_peak"].tolist()  # the peak of a reversed T stays: only its ends are wrong
    for name in ("qrs_on", "r_peak", "qrs_off"):
        assert res[name].tolist() == before[name].tolist()
    assert drop_impossible_marks(res) == 0  # nothing left to drop


def test_a_t_end_that_would_round_onto_the_next_qrs_onset_is_dropped() -> None:
    from ecgtrace.tools._delineate_consistency import drop_impossible_marks, record_gap
    from ecgtrace.tools._delineation import marks_to_record

    def beats(t_off_0: int) -> dict[str, np.ndarray]:
        none = np.array([-1, -1], dtype=np.int64)
        return {"p_on": none.copy(), "p_peak": none.copy(), "p_off": none.copy(), "qrs_on": np.array([100, 405]), "r_peak": np.array([110, 415]),
                "qrs_off": np.array([130, 435]), "t_on": np.array([200, -1]), "t_peak": np.array([300, -1]), "t_off": np.array([t_off_0, -1])}

    # internal 500 Hz, record 250 Hz: a T end at internal 403 and the next QRS onset at 405 are apart, but both
    # land on record sample 202 (201.5 and 202.5 round half to even)
    assert marks_to_record(np.array([403, 405]), 500.0, 250.0, 0, 1000)[0].tolist() == [202, 202]
    assert record_gap(500.0, 250.0) == 3 and record_gap(500.0, 1000.0) == 2
    close = beats(403)
    assert drop_impossible_marks(close) == 0  # apart at the internal rate: the default gap keeps it
    close = beats(403)
    assert drop_impossible_marks(close, record_gap(500.0, 250.0)) == 1 and close["t_off"][0] == -1
    apart = beats(402)  # record sample 201, before the onset's 202
    assert marks_to_record(np.array([402]), 500.0, 250.0, 0, 1000)[0].tolist() == [201]
    assert drop_impossible_marks(apart, record_gap(500.0, 250.0)) == 0 and apart["t_off"][0] == 402
