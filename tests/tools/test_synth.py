"""The synthetic Holter generator: determinism, schedule, morphology and speed-independent checks."""

from __future__ import annotations

import hashlib
from collections import Counter

import numpy as np
import pytest

from ecgtrace.errors import EcgTraceError
from ecgtrace.tools._synth_schedule import EVENTS_PER_DAY
from ecgtrace.tools.annotations import read_reference_annotations
from ecgtrace.tools.records import open_record, read_window
from ecgtrace.tools.synth import load_schedule, synthesize_holter


def _digest(base) -> dict[str, str]:
    return {ext: hashlib.sha256(open(f"{base}.{ext}", "rb").read()).hexdigest() for ext in ("hea", "dat", "atr", "schedule.json")}


def test_same_seed_same_bytes(tmp_path):
    a = synthesize_holter(tmp_path / "a", hours=0.1, seed=11, n_leads=2, fs_hz=128)
    b = synthesize_holter(tmp_path / "b", hours=0.1, seed=11, n_leads=2, fs_hz=128)
    c = synthesize_holter(tmp_path / "c", hours=0.1, seed=12, n_leads=2, fs_hz=128)
    assert _digest(a.record_path) == _digest(b.record_path)
    assert _digest(a.record_path)["dat"] != _digest(c.record_path)["dat"]


def test_every_event_kind_is_present(synth_record):
    kinds = Counter(e["kind"] for e in synth_record.schedule["events"])
    assert set(kinds) == set(EVENTS_PER_DAY)


def test_events_do_not_overlap(synth_record):
    spans = sorted((e["onset_ms"], e["offset_ms"]) for e in synth_record.schedule["events"])
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start > end


def test_schedule_file_round_trips(synth_record):
    assert load_schedule(synth_record.record_path) == synth_record.schedule


def test_rr_intervals_respect_the_schedule(synth_record):
    """No unscheduled pause, and sinus rate outside episodes stays between 60 and 100 bpm."""
    schedule = synth_record.schedule
    ann = read_reference_annotations(synth_record.record_path)
    rr_s = np.diff(ann.beat_samples) / schedule["fs_hz"]
    pauses = [e for e in schedule["events"] if e["kind"] == "pause"]
    long_rr = np.flatnonzero(rr_s > 2.0)
    assert [int(i) for i in long_rr] == [e["first_beat"] for e in pauses]
    in_event = np.zeros(ann.beat_samples.size, dtype=bool)
    for event in schedule["events"]:
        if event["first_beat"] is not None:
            in_event[event["first_beat"] : event["last_beat"] + 2] = True  # and the beat after
    quiet = ~in_event[1:] & ~in_event[:-1] & (ann.beat_classes[1:] == "N") & (ann.beat_classes[:-1] == "N")
    hr = 60.0 / rr_s[quiet]
    assert hr.min() > 58 and hr.max() < 100


def test_pvc_morphology_is_wide_and_pac_has_abnormal_p(synth_record):
    schedule = synth_record.schedule
    info = open_record(synth_record.record_path)
    fs = info.fs_hz
    pvc = next(e for e in schedule["events"] if e["kind"] == "pvc")
    pac = next(e for e in schedule["events"] if e["kind"] == "pac")

    def beat(t_ms: int) -> np.ndarray:
        w = read_window(info, t_ms / 1000 - 0.3, t_ms / 1000 + 0.4, leads=["MLII"])
        return w.signal_mv[:, 0]

    def width_ms(trace: np.ndarray) -> float:
        r = int(0.3 * fs)
        segment = np.abs(trace[r - int(0.1 * fs) : r + int(0.12 * fs)] - np.median(trace))
        above = np.flatnonzero(segment > 0.3 * segment.max())
        return (above[-1] - above[0]) * 1000 / fs

    normal_t = pvc["onset_ms"] - 4000
    ann = read_reference_annotations(synth_record.record_path)
    normal_t = int(ann.beat_times_ms()[np.argmin(np.abs(ann.beat_times_ms() - normal_t))])
    assert width_ms(beat(pvc["onset_ms"])) > 1.5 * width_ms(beat(normal_t))
    # PAC P wave is inverted in MLII (ectopic atrial focus), the sinus P is upright
    def p_area(t_ms: int, pr_ms: float) -> float:
        trace = beat(t_ms)
        r = int(0.3 * fs)
        p_centre = r - int((pr_ms + 45 - 50) * fs / 1000)
        base = np.median(trace)
        return float(np.sum(trace[p_centre - int(0.03 * fs) : p_centre + int(0.03 * fs)] - base))

    assert p_area(pac["onset_ms"], 130) < 0 < p_area(normal_t, 160)


def test_af_has_no_p_waves_and_irregular_rr(synth_record):
    schedule = synth_record.schedule
    ann = read_reference_annotations(synth_record.record_path)
    af = next(e for e in schedule["events"] if e["kind"] == "af")
    rr = np.diff(ann.beat_samples[af["first_beat"] : af["last_beat"] + 1]) / schedule["fs_hz"]
    sinus = np.diff(ann.beat_samples[af["first_beat"] - 40 : af["first_beat"] - 5]) / schedule["fs_hz"]
    assert np.std(rr) / np.mean(rr) > 3 * np.std(sinus) / np.mean(sinus)


@pytest.mark.parametrize("kwargs, message", [
    ({"hours": 30}, "hours"), ({"fs_hz": 1000}, "fs_hz"), ({"n_leads": 5}, "n_leads"), ({"name": "a.b"}, "record name"),
])
def test_invalid_parameters(tmp_path, kwargs, message):
    with pytest.raises(EcgTraceError, match=message):
        synthesize_holter(tmp_path, **kwargs)
