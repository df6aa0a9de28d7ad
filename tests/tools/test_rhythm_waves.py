"""VF/VFL from the signal: spectral rules on hand-made waves and on MIT-BIH 207's expert VFL intervals."""

from __future__ import annotations

import numpy as np

from ecgtrace.tools._rhythm_waves import DEFAULT_WAVE_PARAMS, ventricular_wave_spans, window_label

FS = 250.0


def test_window_labels_on_made_waves():
    t = np.arange(int(2 * FS)) / FS
    rng = np.random.default_rng(0)
    sine = np.sin(2 * np.pi * 4.5 * t)[:, None]
    assert window_label(0.8 * sine, FS, DEFAULT_WAVE_PARAMS) == "vfl"
    irregular = np.sin(2 * np.pi * np.cumsum(5.0 + 0.8 * np.sin(2 * np.pi * 0.9 * t)) / FS)[:, None] * (0.6 + 0.3 * np.sin(2 * np.pi * 0.7 * t))[:, None]
    assert window_label(irregular, FS, DEFAULT_WAVE_PARAMS) in ("vf", "vfl")
    assert window_label(rng.standard_normal((t.size, 2)), FS, DEFAULT_WAVE_PARAMS) is None  # white noise spreads its power
    assert window_label(0.01 * sine, FS, DEFAULT_WAVE_PARAMS) is None  # too small: asystole or a flat lead
    assert window_label(np.sin(2 * np.pi * 0.8 * t)[:, None], FS, DEFAULT_WAVE_PARAMS) is None  # baseline swing, not VF


def test_mitdb_207_vfl_intervals(shared_data):
    """207 is a DS1 record (the thresholds were set on it): its long expert VFL intervals are found, nothing else."""
    from ecgtrace.tools.annotations import read_reference_annotations

    path = shared_data / "mitdb" / "207"
    ann = read_reference_annotations(path)
    vfl = [(iv["onset_sample"], iv["offset_sample"]) for iv in ann.rhythm_intervals if iv["label"] == "VFL"]
    gaps = np.flatnonzero(np.diff(ann.beat_samples) > 2 * ann.fs_hz)
    spans = ventricular_wave_spans(path, [(int(ann.beat_samples[i]), int(ann.beat_samples[i + 1])) for i in gaps])
    found = sum(any(s["onset_sample"] < b and s["offset_sample"] > a for s in spans) for a, b in vfl if b - a >= 6 * ann.fs_hz)
    assert found >= 4 and all(any(s["onset_sample"] < b and s["offset_sample"] > a for a, b in vfl) for s in spans)


def test_steepness_of_a_sine_and_of_sharp_complexes():
    """A sine of f Hz: max slope 2 pi f A over a 5-95 % range of 2 A sin(0.45 pi), so ~3.18 f per second."""
    from ecgtrace.tools._rhythm_waves import steepness

    t = np.arange(int(2 * FS)) / FS
    for f_hz in (3.0, 4.0, 5.0):
        expected = 2 * np.pi * f_hz / (2 * np.sin(0.45 * np.pi))
        assert abs(steepness(np.sin(2 * np.pi * f_hz * t)[:, None], FS) - expected) / expected < 0.03
    # 4 Hz train of 40 ms triangular complexes (ventricular tachycardia at 240/min): 1/(20 ms) = 50/s, over the threshold
    phase = (t * 4.0) % 1.0
    spikes = np.clip(1.0 - np.abs(phase - 0.5) / 0.08, 0.0, None)
    assert steepness(spikes[:, None], FS) > DEFAULT_WAVE_PARAMS["max_steepness"] > steepness(np.sin(2 * np.pi * 4.0 * t)[:, None], FS)


def test_band_edge_flank_is_not_vf():
    """A 2 Hz wave (120/min) peaks below the VF band; its flank at the band's lowest bin must not be read as VF at 2.5 Hz."""
    t = np.arange(int(2 * FS)) / FS
    slow = np.sin(2 * np.pi * 2.0 * t)[:, None]
    assert window_label(slow, FS, {**DEFAULT_WAVE_PARAMS, "reject_edge_peak": False}) == "vf"  # what version 2 did
    assert window_label(slow, FS, DEFAULT_WAVE_PARAMS) is None


def test_regularity_of_a_repeated_complex_a_sine_and_a_wandering_wave():
    from ecgtrace.tools._rhythm_waves import regularity

    t = np.arange(int(4 * FS)) / FS
    assert regularity(np.sin(2 * np.pi * 3.0 * t)[:, None], FS) > 0.97  # exact repetition: about 1
    cycle = np.zeros(int(FS) // 3)
    cycle[:20] = np.hanning(20)  # a narrow complex every 1/3 s (180/min), flat between
    assert regularity(np.tile(cycle, 12)[:, None], FS) > 0.97
    rng = np.random.default_rng(0)
    # each cycle 0.15-0.35 s long and 0.5-1.5 high: a fibrillation-like wave
    cycles = [a * np.sin(np.linspace(0, 2 * np.pi, int(n), endpoint=False)) for n, a in
              zip(rng.uniform(0.15, 0.35, 40) * FS, rng.uniform(0.5, 1.5, 40))]
    wander = np.concatenate(cycles)[: t.size]
    assert regularity(wander[:, None], FS) < DEFAULT_WAVE_PARAMS["max_regularity"]
    assert regularity(np.zeros((int(4 * FS), 1)), FS) == 0.0  # a flat lead has no repetition to measure


def test_episodes_bridge_one_window_and_drop_steep_runs():
    from ecgtrace.tools._rhythm_waves import _episodes

    fs = 250
    p = {**DEFAULT_WAVE_PARAMS, "min_s": 5.0, "bridge_s": 1.0}
    win, step = 2 * fs, fs
    labels = ["vfl"] * 3 + [None] + ["vf"] * 2 + [None, None] + ["vfl"] * 4
    starts = [k * step for k in range(len(labels))]
    smooth = [12.0 if lab else np.nan for lab in labels]
    varied = [0.5 if lab else np.nan for lab in labels]
    spans = _episodes(labels, {"steepness": smooth, "regularity": varied}, starts, win, 1000, fs, p)
    # windows 0-5 bridge over the single gap (0 .. 5 s + 2 s window = 7 s); windows 8-11 are 5 s long; the double gap splits them
    assert [(s["onset_sample"], s["offset_sample"], s["kind"]) for s in spans] == [(1000, 1000 + 7 * fs, "vfl"), (1000 + 8 * fs, 1000 + 13 * fs, "vfl")]
    steep = [40.0 if lab and k >= 8 else v for k, (lab, v) in enumerate(zip(labels, smooth))]
    assert [s["onset_sample"] for s in _episodes(labels, {"steepness": steep, "regularity": varied}, starts, win, 1000, fs, p)] == [1000]
    repeated = [0.95 if lab and k < 8 else v for k, (lab, v) in enumerate(zip(labels, varied))]
    assert [s["onset_sample"] for s in _episodes(labels, {"steepness": smooth, "regularity": repeated}, starts, win, 1000, fs, p)] == [1000 + 8 * fs]
    no_limit = _episodes(labels, {"steepness": steep, "regularity": repeated}, starts, win, 1000, fs, {**p, "max_steepness": None, "max_regularity": None})
    assert len(no_limit) == 2
    no_bridge = _episodes(labels, {"steepness": smooth, "regularity": varied}, starts, win, 1000, fs, {**p, "bridge_s": 0.0})
    assert [s["onset_sample"] for s in no_bridge] == [1000 + 8 * fs]  # 3- and 2-window runs alone are under 5 s


def test_a_vfl_stretch_running_into_vf_gives_two_episodes():
    from ecgtrace.tools._rhythm_waves import _kind_segments

    fs, win = 250, 500
    windows = [("vfl", k * fs) for k in range(6)] + [("vf", k * fs) for k in range(6, 12)]
    # vfl windows cover 0-7 s, vf windows 6-13 s: they meet half-way (6.5 s), and both parts are over 5 s
    assert _kind_segments(windows, win, 5 * fs) == [("vfl", 0, int(6.5 * fs)), ("vf", int(6.5 * fs), 13 * fs)]
    # a 2-window vf stretch inside VFL is under 5 s: it joins its longer neighbour, and the majority names the whole
    short = [("vfl", k * fs) for k in range(8)] + [("vf", 8 * fs), ("vf", 9 * fs)] + [("vfl", k * fs) for k in range(10, 13)]
    assert _kind_segments(short, win, 5 * fs) == [("vfl", 0, 14 * fs)]
