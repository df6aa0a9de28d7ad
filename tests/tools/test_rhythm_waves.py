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
