"""Holtercare's rhythm vocabulary in the synthetic generator, counted exactly by rhythm.detect_events."""

from __future__ import annotations

import hashlib
from collections import Counter

import numpy as np
import pytest

from ecgtrace.errors import EcgTraceError
from ecgtrace.contracts.vocabulary import note_for
from ecgtrace.tools._synth_holtercare import HOLTERCARE_EVENTS_PER_DAY
from ecgtrace.tools._synth_schedule import EVENTS_PER_DAY
from ecgtrace.tools.annotations import read_reference_annotations
from ecgtrace.tools.rhythm import count_events, detect_events, reference_event_inputs
from ecgtrace.tools.synth import synthesize_holter

#: Subtype events are also their parent kind: an asystole is a pause, a sustained atrial tachycardia an svt.
ALSO_COUNTED_AS = {"asystole": "pause", "atrial_tachycardia": "svt"}


def _digest(base) -> dict[str, str]:
    return {ext: hashlib.sha256(open(f"{base}.{ext}", "rb").read()).hexdigest() for ext in ("hea", "dat", "atr", "schedule.json")}


@pytest.fixture(scope="module")
def holtercare(tmp_path_factory):
    """A 1 h, 3-lead, 250 Hz holtercare record (seed 3) and the events from its reference annotations."""
    result = synthesize_holter(tmp_path_factory.mktemp("hc"), hours=1.0, seed=3, profile="holtercare")
    ann = read_reference_annotations(result.record_path)
    events = detect_events(ann.beat_samples, ann.beat_classes, ann.fs_hz, beat_source="reference", **reference_event_inputs(ann))
    return result, ann, events


def test_default_profile_is_untouched_and_holtercare_differs(tmp_path):
    plain = synthesize_holter(tmp_path / "a", hours=0.1, seed=5, n_leads=2)
    explicit = synthesize_holter(tmp_path / "b", hours=0.1, seed=5, n_leads=2, profile="default")
    other = synthesize_holter(tmp_path / "c", hours=0.1, seed=5, n_leads=2, profile="holtercare")
    assert _digest(plain.record_path) == _digest(explicit.record_path)
    assert _digest(plain.record_path)["dat"] != _digest(other.record_path)["dat"]
    assert "profile" not in plain.schedule and other.schedule["profile"] == "holtercare"
    with pytest.raises(EcgTraceError, match="profile"):
        synthesize_holter(tmp_path / "d", hours=0.1, profile="cardiology")


def test_every_kind_is_scheduled(holtercare):
    result, _, _ = holtercare
    kinds = Counter(e["kind"] for e in result.schedule["events"])
    assert set(kinds) >= set(EVENTS_PER_DAY) | set(HOLTERCARE_EVENTS_PER_DAY)
    for e in result.schedule["events"]:
        if note_for(e["kind"]):
            assert e["rhythm_note"] == "(" + note_for(e["kind"])


def test_every_kind_is_counted_exactly(holtercare):
    result, _, events = holtercare
    scheduled = Counter(e["kind"] for e in result.schedule["events"])
    expected = dict(scheduled)
    for sub, parent in ALSO_COUNTED_AS.items():
        expected[parent] = scheduled[parent] + scheduled[sub]
    counts = count_events(events)
    for kind in (*HOLTERCARE_EVENTS_PER_DAY, "pause", "svt", "pvc", "pac", "vt", "v_couplet", "v_bigeminy", "v_trigeminy", "af", "sinus_tachycardia", "sinus_bradycardia"):
        assert counts[kind] == expected.get(kind, 0), kind


def test_event_times_match_the_schedule(holtercare):
    result, ann, events = holtercare
    tol_ms = 1000.0 / ann.fs_hz + 1  # R peaks are on the sample grid; P marks within a sample
    for want in result.schedule["events"]:
        if want["kind"] not in HOLTERCARE_EVENTS_PER_DAY:
            continue
        got = [e for e in events if e["kind"] == want["kind"] and abs(e["onset_ms"] - want["onset_ms"]) <= max(tol_ms, 2500 if want["kind"] == "avb3" else 0)]
        assert len(got) == 1, want
        if want["kind"] != "avb3":  # third-degree block starts at the first beat whose P waves have drifted (within 4 beats)
            assert abs(got[0]["offset_ms"] - want["offset_ms"]) <= tol_ms, want


def test_blocked_p_waves_and_escape_beats_are_in_the_annotations(holtercare):
    result, ann, _ = holtercare
    x_ms = ann.marks["x"] * 1000.0 / ann.fs_hz
    for e in result.schedule["events"]:
        if e["kind"] == "blocked_pac":
            assert np.min(np.abs(x_ms - e["onset_ms"])) <= 4
    assert int(np.count_nonzero(ann.beat_symbols == "E")) == result.schedule["beats_per_symbol"]["E"] > 0
    assert int(np.count_nonzero(ann.beat_symbols == "j")) == result.schedule["beats_per_symbol"]["j"] > 0
    assert ann.marks["p"].size + ann.marks["x"].size == result.schedule["n_p_waves"]
    vf = [iv for iv in ann.rhythm_intervals if iv["label"] in ("VF", "VFL")]
    assert len(vf) == sum(e["kind"] in ("vf", "vfl") for e in result.schedule["events"])
    for iv in vf:  # no beat inside ventricular fibrillation or flutter
        assert not np.any((ann.beat_samples >= iv["onset_sample"]) & (ann.beat_samples < iv["offset_sample"]))


def test_av_block_rr_and_pr_patterns(holtercare):
    result, ann, _ = holtercare
    t_ms = ann.beat_samples * 1000.0 / ann.fs_hz
    for e in result.schedule["events"]:
        if e["kind"] in ("avb2_mobitz1", "avb2_mobitz2", "avb_2to1"):
            inside = (t_ms >= e["onset_ms"]) & (t_ms <= e["offset_ms"])
            assert len(e["blocked_p_ms"]) >= (3 if e["kind"] == "avb_2to1" else 2)
            for p_ms in e["blocked_p_ms"]:  # each blocked P lies in a long RR: no QRS within 400 ms after it
                after = t_ms[t_ms > p_ms]
                assert after.size and after[0] - p_ms > 400 and np.any(inside)


def test_ventricular_flutter_repeats_like_recorded_vfl(holtercare):
    """The scheduled VFL is a 4-5 Hz wave whose cycles vary like VFDB's expert VFL: over 4 s windows the regularity of
    the wave detector (1.00 for a pure sine) has a median between 0.5 and 0.8 (VFDB 418/419 VFL: 0.58-0.68), and its
    dominant frequency is the scheduled one. The spread has its own generator: the same record comes out again."""
    from ecgtrace.tools._rhythm_waves import regularity
    from ecgtrace.tools.records import open_record, read_samples
    from ecgtrace.tools._synth_holtercare import vfl_wave

    result, _, _ = holtercare
    info = open_record(result.record_path)
    fs = info.fs_hz
    vfl = [e for e in result.schedule["events"] if e["kind"] == "vfl"]
    assert vfl
    for e in vfl:
        a, b = int(e["onset_ms"] * fs / 1000.0), int(e["offset_ms"] * fs / 1000.0)
        x = read_samples(info, a, b).signal_mv
        windows = [regularity(x[s : s + int(4 * fs)], fs) for s in range(0, x.shape[0] - int(4 * fs), int(fs))]
        assert 0.5 <= float(np.median(windows)) <= 0.8, windows
        spectrum = np.abs(np.fft.rfft(x[:, 0] - x[:, 0].mean()))
        f_peak = np.fft.rfftfreq(x.shape[0], 1.0 / fs)[int(np.argmax(spectrum))]
        assert 3.5 <= f_peak <= 5.5, f_peak
    rng = np.random.default_rng([1, 2])
    wave = vfl_wave(2500, fs, 4.5, 1.0, rng)
    assert np.array_equal(wave, vfl_wave(2500, fs, 4.5, 1.0, np.random.default_rng([1, 2])))
    assert 0.5 < float(np.abs(wave).max()) < 2.0  # cycle sizes spread by 20 % around 1 mV
