"""AF/flutter detection on constructed RR streams and on LTAFDB reference beats."""

from __future__ import annotations

import json
import numpy as np
import pytest

from ecgtrace.tools.af import DEFAULT_AF_PARAMS, detect_af, score_af_episodes

FS = 250.0


def _stream(segments: list[tuple[str, int]], seed: int = 0) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Beat samples for segments of ('sinus'|'af', n_beats); returns samples and AF beat ranges."""
    rng = np.random.default_rng(seed)
    rr_ms: list[float] = []
    af_ranges = []
    for kind, n in segments:
        start = len(rr_ms)
        if kind == "sinus":
            base = 800 + 40 * np.sin(np.arange(n) / 15.0)  # slow sinus arrhythmia
            rr_ms.extend((base + rng.normal(0, 5, n)).tolist())
        else:
            rr_ms.extend(rng.uniform(420, 1000, n).tolist())
            af_ranges.append((start + 1, start + n))  # beat k ends RR k-1
    samples = np.concatenate([[500], 500 + np.cumsum(np.round(np.array(rr_ms) * FS / 1000.0))]).astype(np.int64)
    return samples, af_ranges


def test_one_af_episode_between_sinus_segments():
    samples, [(first, last)] = _stream([("sinus", 300), ("af", 300), ("sinus", 300)])
    res = detect_af(samples, FS)
    assert len(res.episodes) == 1
    ep = res.episodes[0]
    assert abs(ep["first_beat"] - first) <= 6 and abs(ep["last_beat"] - last) <= 6
    assert ep["onset_ms"] == round(samples[ep["first_beat"]] * 1000 / FS)
    assert res.beat_mask.sum() == ep["n_beats"] == ep["last_beat"] - ep["first_beat"] + 1
    assert not res.beat_mask[:first - 10].any() and not res.beat_mask[last + 10:].any()
    rr = np.diff(samples[ep["first_beat"] : ep["last_beat"] + 1]) / FS
    assert ep["mean_rate_bpm"] == pytest.approx(60.0 / rr.mean(), rel=1e-3)
    json.dumps(res.to_json())  # plain JSON, provenance included
    assert res.provenance["source"] == "detected" and res.provenance["params"]["min_episode_s"] == 30.0


def test_sinus_with_isolated_and_frequent_ectopics_is_not_af():
    samples, _ = _stream([("sinus", 1200)], seed=1)
    classes = np.full(samples.size, "N", dtype="<U1")
    s = samples.astype(np.float64)
    for k in range(20, samples.size - 2, 9):  # PVC every 9 beats: early beat, compensatory pause
        s[k] -= 0.3 * (s[k] - s[k - 1])
        classes[k] = "V"
    samples2 = np.round(s).astype(np.int64)
    assert detect_af(samples2, FS, beat_classes=classes).episodes == []
    # atrial bigeminy labelled S is excluded too
    s = samples.astype(np.float64)
    classes = np.full(samples.size, "N", dtype="<U1")
    s[1:-1:2] -= 0.25 * (s[1:-1:2] - s[0:-2:2])
    classes[1:-1:2] = "S"
    assert detect_af(np.round(s).astype(np.int64), FS, beat_classes=classes).episodes == []


def test_p_waves_veto_and_min_duration():
    samples, [(first, last)] = _stream([("sinus", 200), ("af", 200), ("sinus", 200)], seed=2)
    p_present = np.ones(samples.size, dtype=bool)
    assert detect_af(samples, FS, p_wave_present=p_present).episodes == []
    p_present[first:last + 1] = False
    assert len(detect_af(samples, FS, p_wave_present=p_present).episodes) == 1
    # unknown P (NaN) behaves as no information
    p_nan = np.full(samples.size, np.nan)
    assert len(detect_af(samples, FS, p_wave_present=p_nan).episodes) == 1
    short, _ = _stream([("sinus", 200), ("af", 25), ("sinus", 200)], seed=3)  # ~18 s of AF
    assert detect_af(short, FS).episodes == []
    assert len(detect_af(short, FS, min_episode_s=10.0, window_beats=16).episodes) == 1


def test_edge_cases_and_parameters():
    assert detect_af(np.array([], dtype=np.int64), FS).episodes == []
    assert detect_af(np.array([10, 200, 400]), FS).beat_mask.tolist() == [False] * 3
    with pytest.raises(TypeError):
        detect_af(np.arange(10) * 200, FS, not_a_threshold=1)
    with pytest.raises(ValueError):
        detect_af(np.arange(10) * 200, 0.0)
    assert set(DEFAULT_AF_PARAMS) >= {"min_episode_s", "window_beats", "succ_diff_frac"}


@pytest.mark.parametrize(
    "record, min_dur_se, min_dur_ppv",
    [("00", 0.96, 0.99), ("01", 0.97, 0.97), ("03", 0.95, 0.97)],
)
def test_ltafdb_reference_beats(shared_data, record, min_dur_se, min_dur_ppv):
    from ecgtrace.tools.annotations import read_reference_annotations

    ann = read_reference_annotations(shared_data / "ltafdb" / record, "atr", fs_hz=128)
    res = detect_af(ann.beat_samples, ann.fs_hz, beat_classes=ann.beat_classes)
    ref = [iv for iv in ann.rhythm_intervals if iv["label"] in ("AFIB", "AFL")]
    score = score_af_episodes(res.episodes, ref, min_reference_s=30.0)
    assert score["duration_se"] >= min_dur_se
    assert score["duration_ppv"] >= min_dur_ppv
    assert score["episode_se"] >= 0.85


def test_unlabelled_bigeminy_is_not_af():
    """Short-long alternation without class labels: irregular at lag 1, vetoed by the turning-point rule."""
    rng = np.random.default_rng(5)
    rr = np.tile([480.0, 1120.0], 200) * (1 + rng.normal(0, 0.01, 400))
    samples = np.concatenate([[0], np.cumsum(np.round(rr * FS / 1000.0))]).astype(np.int64)
    assert detect_af(samples, FS).episodes == []
    assert len(detect_af(samples, FS, max_turning_frac=1.0).episodes) == 1  # the veto is what rejects it


def test_synthetic_record_af_episodes(synth_record):
    from ecgtrace.tools.annotations import read_reference_annotations

    ref = read_reference_annotations(synth_record.record_path, "atr")
    res = detect_af(ref.beat_samples, ref.fs_hz, beat_classes=ref.beat_classes)
    truth = [e for e in synth_record.schedule["events"] if e["kind"] == "af"]
    assert len(res.episodes) == len(truth)
    for got, want in zip(res.episodes, truth):
        assert abs(got["first_beat"] - want["first_beat"]) <= 2 and abs(got["last_beat"] - want["last_beat"]) <= 2
    score = score_af_episodes(res.episodes, truth)
    assert score["duration_se"] >= 0.95 and score["duration_ppv"] == 1.0


def test_too_few_usable_rr_between_ectopic_beats_is_not_af():
    """Mixed ventricular bigeminy and trigeminy leave a few N-N RRs whose spread is the ectopy's, not the atria's."""
    rng = np.random.default_rng(4)
    rr_ms, classes = [], ["N"]
    while len(rr_ms) < 600:
        if rng.random() < 0.7:  # a PVC 60 % into the cycle and its compensatory pause
            rr_ms += [480.0, 1120.0]
            classes += ["V", "N"]
        else:
            rr_ms.append(float(rng.uniform(700, 1100)))  # the odd N-N RR, anything from 700 to 1100 ms
            classes.append("N")
    samples = np.concatenate([[500], 500 + np.cumsum(np.round(np.array(rr_ms) * FS / 1000.0))]).astype(np.int64)
    classes = np.array(classes, dtype="<U1")
    assert detect_af(samples, FS, beat_classes=classes).episodes == []
    loose = detect_af(samples, FS, beat_classes=classes, min_usable_frac=0.0)
    assert loose.episodes, "without the rule the few irregular N-N RRs read as AF (the test would show nothing)"
    # real AF with some PVCs keeps most RRs usable and is still found
    af, [(first, last)] = _stream([("sinus", 200), ("af", 400), ("sinus", 200)], seed=5)
    af_classes = np.full(af.size, "N", dtype="<U1")
    af_classes[first + 10:last - 10:12] = "V"
    episodes = detect_af(af, FS, beat_classes=af_classes).episodes
    assert len(episodes) == 1 and abs(episodes[0]["first_beat"] - first) <= 12 and abs(episodes[0]["last_beat"] - last) <= 12


def _clustered_atrial_runs(n_cycles: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sinus beats (P wave shown) broken every few beats by 2-4-beat atrial runs (no dominant P), as in MIT-BIH 220."""
    rng = np.random.default_rng(seed)
    rr_ms: list[float] = []
    p_present: list[bool] = []
    for _ in range(n_cycles):
        n_sinus = int(rng.integers(2, 4))
        rr_ms += (rng.normal(900, 40, n_sinus)).tolist()
        p_present += [True] * n_sinus
        n_run = int(rng.integers(2, 5))
        rr_ms += (rng.normal(560, 40, 1)).tolist() + rng.normal(410, 15, n_run - 1).tolist()
        p_present += [False] * n_run
    samples = np.concatenate([[500], 500 + np.cumsum(np.round(np.array(rr_ms) * FS / 1000.0))]).astype(np.int64)
    return samples, np.array([True] + p_present)


def test_clustered_atrial_runs_between_sinus_beats_are_not_af():
    samples, p_present = _clustered_atrial_runs(60, seed=4)
    assert 0.35 < p_present.mean() < 0.5  # P waves on a third to a half of the beats: organised atrial activity
    # irregular enough to read as AF when P waves are not asked, and under the old 50 % P rule (AF version 1.1)
    assert detect_af(samples, FS).episodes
    assert detect_af(samples, FS, p_wave_present=p_present, p_present_max_frac=0.5).episodes
    assert DEFAULT_AF_PARAMS["p_present_max_frac"] == 0.3
    assert detect_af(samples, FS, p_wave_present=p_present).episodes == []
