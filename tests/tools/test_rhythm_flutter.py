"""Atrial flutter from the signal (tools/_rhythm_flutter.py) and its wiring into rhythm_signal/detect_events.

Ground truth: the synthetic holtercare record's schedule (AFL episodes with their
fixed 2:1 or 4:1 conduction, flutter waves at 250-330/min) and its ``.atr``
rhythm notes (sinus, AF, atrial tachycardia stretches where no flutter may be called).
"""

from __future__ import annotations

import numpy as np
import pytest

from ecgtrace.tools._rhythm_flutter import FLUTTER_VERSION, cancel_qrst, flutter_spans, regular_multiple
from ecgtrace.tools.annotations import read_reference_annotations
from ecgtrace.tools.records import open_record
from ecgtrace.tools.rhythm import detect_events
from ecgtrace.tools.rhythm_signal import signal_event_inputs
from ecgtrace.tools.synth import synthesize_holter

#: Episode bounds within 6 s (one analysis window); atrial rate within 10/min (FFT bin 7.3/min at 125 Hz, 1024 points).
BOUND_TOL_S = 6.0
RATE_TOL_BPM = 10.0


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    result = synthesize_holter(tmp_path_factory.mktemp("afl"), hours=4.0, seed=1, profile="holtercare")
    return result, read_reference_annotations(result.record_path), open_record(result.record_path)


def _generator_flutter_rate(event: dict) -> float:
    """The flutter rate of a scheduled AFL episode: its ventricular rate times the conduction ratio (2 or 4) that lands in 250-330/min."""
    rates = [event["rate_bpm"] * k for k in (2, 4) if 245.0 <= event["rate_bpm"] * k <= 335.0]
    assert len(rates) == 1
    return rates[0]


def test_synthetic_flutter_is_found_with_its_rate(record):
    result, ann, info = record
    fs = info.fs_hz
    scheduled = [e for e in result.schedule["events"] if e["kind"] == "afl"]
    assert scheduled
    found = flutter_spans(info, ann.beat_samples, ann.beat_classes)
    assert len(found) == len(scheduled)
    for ref, det in zip(scheduled, found):
        assert abs(det["onset_sample"] / fs - ref["onset_ms"] / 1000.0) <= BOUND_TOL_S
        assert abs(det["offset_sample"] / fs - ref["offset_ms"] / 1000.0) <= BOUND_TOL_S
        assert abs(det["atrial_rate_bpm"] - _generator_flutter_rate(ref)) <= RATE_TOL_BPM
        assert det["source"] == f"tools._rhythm_flutter v{FLUTTER_VERSION}"


def test_no_flutter_in_sinus_af_or_atrial_tachycardia(record):
    _, ann, info = record
    found = flutter_spans(info, ann.beat_samples, ann.beat_classes)
    others = [iv for iv in ann.rhythm_intervals if iv["label"] in ("N", "AFIB", "AT", "STACH", "SBR")]
    assert any(iv["label"] == "AFIB" for iv in others) and any(iv["label"] == "N" for iv in others)
    for f in found:
        for iv in others:  # a flutter span may touch a neighbour by the window's reach, not overlap it
            overlap = min(f["offset_sample"], iv["offset_sample"]) - max(f["onset_sample"], iv["onset_sample"])
            assert overlap <= BOUND_TOL_S * info.fs_hz, (f, iv["label"])


def test_workers_read_ahead_without_changing_the_spans(record):
    """Chunks read and decimated in two workers (with artifact-like excluded spans crossing chunk edges): the same episodes."""
    result, ann, info = record
    fs = int(info.fs_hz)
    afl = [e for e in result.schedule["events"] if e["kind"] == "afl"][0]
    edge_s = 600 * int(afl["onset_ms"] / 1000 / 600 + 1)  # a chunk edge inside the episode
    assert edge_s + 10 < afl["offset_ms"] / 1000
    excluded = [(599 * fs, 601 * fs), ((edge_s - 10) * fs, (edge_s + 10) * fs)]  # both straddle chunk edges
    serial = flutter_spans(info, ann.beat_samples, ann.beat_classes, excluded)
    assert serial == flutter_spans(info, ann.beat_samples, ann.beat_classes, excluded, workers=2)
    assert len(serial) == 2 != len(flutter_spans(info, ann.beat_samples, ann.beat_classes))  # the excluded span cuts the episode


def test_regular_multiple_accepts_fixed_ratios_and_rejects_irregular_rr():
    f0 = 5.0  # 300/min: a cycle of 0.2 s
    assert regular_multiple(np.array([0.4, 0.4, 0.8, 0.4]), f0, {"multiple_tol": 0.2, "max_ratio": 6})
    assert not regular_multiple(np.array([0.4, 0.5, 0.73, 0.61]), f0, {"multiple_tol": 0.2, "max_ratio": 6})
    assert not regular_multiple(np.array([]), f0, {"multiple_tol": 0.2, "max_ratio": 6})


def test_flutter_spans_rejects_mismatched_classes(record):
    _, ann, info = record
    with pytest.raises(ValueError, match="beat_classes"):
        flutter_spans(info, ann.beat_samples, ann.beat_classes[:-1])


def test_signal_inputs_give_afl_events_and_no_p_wave_kinds_inside(record):
    """From the signal path (reference beats and classes, detected P waves, flutter): afl events, no AV block inside them."""
    result, ann, info = record
    inputs = signal_event_inputs(info, ann.beat_samples, ann.beat_classes)
    assert inputs["provenance"]["flutter"]["version"] == FLUTTER_VERSION
    events = detect_events(ann.beat_samples, ann.beat_classes, ann.fs_hz, **inputs["kwargs"])
    afl = [e for e in events if e["kind"] == "afl"]
    assert len(afl) == sum(e["kind"] == "afl" for e in result.schedule["events"])
    assert any(u["reason"].startswith("inside atrial flutter") for u in inputs["undecided"])
    p_kinds = ("avb2_mobitz1", "avb2_mobitz2", "avb_2to1", "avb3", "blocked_pac", "junctional_rhythm", "junctional_escape")
    for e in events:
        if e["kind"] in p_kinds:
            assert not any(e["onset_sample"] <= f["offset_sample"] and e["offset_sample"] >= f["onset_sample"] for f in afl), e


def test_signal_inputs_find_flutter_from_beats_jittered_like_a_detector(record):
    """R peaks jittered by up to +-7 samples (28 ms at 250 Hz: the detector's spread on this record) spoil QRS-T
    cancellation; signal_event_inputs hands the flutter detector the P detector's aligned R fiducials instead."""
    result, ann, info = record
    jittered = ann.beat_samples + np.random.default_rng(0).integers(-7, 8, ann.beat_samples.size)
    spans = [s for s in signal_event_inputs(info, jittered, ann.beat_classes)["kwargs"]["rhythm_spans"] if s["kind"] == "afl"]
    scheduled = [e for e in result.schedule["events"] if e["kind"] == "afl"]
    assert len(spans) == len(scheduled)
    for ref, det in zip(scheduled, spans):
        assert abs(det["onset_sample"] / info.fs_hz - ref["onset_ms"] / 1000.0) <= BOUND_TOL_S
        assert abs(det["offset_sample"] / info.fs_hz - ref["offset_ms"] / 1000.0) <= BOUND_TOL_S


def test_cancel_qrst_removes_scaled_copies_of_the_template_and_cuts_before_the_next_beat():
    """Beats made of the template times a per-beat, per-lead scale cancel exactly; a beat closer than the template's
    length is fitted only up to the next beat, whose own copy then cancels too; samples outside every beat are kept."""
    rng = np.random.default_rng(2)
    pre, length = 5, 20
    template = rng.normal(size=(length, 2))
    beats = np.array([10, 40, 52, 90])  # 52 comes 12 samples after 40: beat 40's fit is cut at 52 - pre
    x = np.zeros((120, 2))
    starts = beats - pre
    cut = np.append(starts[1:], 120) - starts
    scales = rng.uniform(0.5, 2.0, size=(beats.size, 2))
    for s0, n, k in zip(starts, np.minimum(cut, length), scales):
        x[s0 : s0 + n] += template[:n] * k
    x[110:] = 3.0  # after the last beat's template: no beat covers it
    out = cancel_qrst(x, beats, template, pre)
    assert np.allclose(out[:110], 0.0) and np.allclose(out[110:], 3.0)
