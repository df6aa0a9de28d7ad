"""Heart rate: 8-beat averages, extrema with their times, burdens, per-minute series."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ecgtrace.tools.annotations import read_reference_annotations
from ecgtrace.tools.hr import average_hr, hr_extremum, hr_summary, instantaneous_hr_bpm, per_minute_hr, valid_rr_mask

FS = 250.0


def _independent_extrema(samples, classes, fs, t0_ms=None, t1_ms=None, spans=()):
    """Plain-loop 8-beat average over valid N-N RRs (allowing 4 skipped RRs); returns {max,min: (hr, t_ms, first, last)}."""
    valid = []
    for i in range(1, len(samples)):
        rr_ms = (samples[i] - samples[i - 1]) * 1000.0 / fs
        ok = classes[i] == "N" and classes[i - 1] == "N" and 250.0 <= rr_ms <= 3000.0
        ok = ok and not any(samples[i] > a and samples[i - 1] < b for a, b in spans)
        if ok:
            valid.append(i)
    best = {"max": None, "min": None}
    for k in range(7, len(valid)):
        window = valid[k - 7 : k + 1]
        first, last = window[0] - 1, window[-1]
        if last - first > 12:
            continue
        if t0_ms is not None and samples[first] * 1000.0 / fs < t0_ms:
            continue
        if t1_ms is not None and samples[last] * 1000.0 / fs > t1_ms:
            continue
        hr = 60.0 / (np.mean([samples[i] - samples[i - 1] for i in window]) / fs)
        t_ms = int(round(samples[last] * 1000.0 / fs))
        if best["max"] is None or hr > best["max"][0]:
            best["max"] = (hr, t_ms, first, last)
        if best["min"] is None or hr < best["min"][0]:
            best["min"] = (hr, t_ms, first, last)
    return best


@pytest.fixture(scope="module")
def synth_ref(synth_record):
    return read_reference_annotations(synth_record.record_path, "atr")


def test_extrema_match_an_independent_computation(synth_ref):
    s, c = synth_ref.beat_samples, synth_ref.beat_classes
    truth = _independent_extrema(s.tolist(), c.tolist(), synth_ref.fs_hz)
    for kind in ("max", "min"):
        got = hr_extremum(s, c, synth_ref.fs_hz, kind)
        hr, t_ms, first, last = truth[kind]
        assert got["hr_bpm"] == pytest.approx(hr, abs=0.006)
        assert got["t_ms"] == t_ms and got["beat"] == last
        assert got["evidence"]["beats"] == list(range(first, last + 1))
        assert got["evidence"]["t0_ms"] == round(s[first] * 4) and got["evidence"]["t1_ms"] == t_ms
        assert got["window_beats"] == 8 and got["provenance"]["source"] == "computed"
        json.dumps(got)
    # restricted to a window, e.g. the scheduled bradycardia episode and the hour's first 10 minutes
    for t0, t1 in ((0, 600_000), (600_000, 1_200_000)):
        truth = _independent_extrema(s.tolist(), c.tolist(), synth_ref.fs_hz, t0, t1)
        for kind in ("max", "min"):
            got = hr_extremum(s, c, synth_ref.fs_hz, kind, t0_ms=t0, t1_ms=t1)
            assert got["hr_bpm"] == pytest.approx(truth[kind][0], abs=0.006) and got["t_ms"] == truth[kind][1]
            assert t0 <= got["evidence"]["t0_ms"] and got["evidence"]["t1_ms"] <= t1


def test_extrema_fall_in_the_scheduled_episodes(synth_record, synth_ref):
    brady = [e for e in synth_record.schedule["events"] if e["kind"] == "sinus_bradycardia"][0]
    got = hr_extremum(synth_ref.beat_samples, synth_ref.beat_classes, synth_ref.fs_hz, "min")
    assert brady["onset_ms"] <= got["evidence"]["t0_ms"] and got["t_ms"] <= brady["offset_ms"]
    tachy = [e for e in synth_record.schedule["events"] if e["kind"] == "sinus_tachycardia"][0]
    got = hr_extremum(synth_ref.beat_samples, synth_ref.beat_classes, synth_ref.fs_hz, "max", t0_ms=tachy["onset_ms"] - 60_000, t1_ms=tachy["offset_ms"] + 60_000)
    assert tachy["onset_ms"] <= got["evidence"]["t0_ms"] and got["t_ms"] <= tachy["offset_ms"]
    assert got["hr_bpm"] == pytest.approx(tachy["rate_bpm"], rel=0.05)


def _stream(rr_ms):
    return np.concatenate([[100], 100 + np.cumsum(np.round(np.asarray(rr_ms, dtype=float) * FS / 1000.0))]).astype(np.int64)


def test_burdens_mean_and_per_minute():
    rr = [500] * 120 + [800] * 150 + [1200] * 50  # 60 s at 120 bpm, 120 s at 75, 60 s at 50
    s = _stream(rr)
    c = np.full(s.size, "N")
    summ = hr_summary(s, c, FS)
    # the first 7 RRs have no complete window; time-weighted shares of the rest
    analysed = sum(rr[7:]) / 1000.0
    assert summ["analysed_s"] == pytest.approx(analysed)
    # windows of 8 RRs: > 100 bpm while at most 2 of them are 800 ms; < 60 bpm once 5 are 1200 ms
    assert summ["tachy_burden_pct"] == pytest.approx(100 * (113 * 0.5 + 2 * 0.8) / analysed, abs=0.001)
    assert summ["brady_burden_pct"] == pytest.approx(100 * (50 - 4) * 1.2 / analysed, abs=0.001)
    assert summ["mean_hr_bpm"] == pytest.approx(60.0 * len(rr) / (sum(rr) / 1000.0), abs=0.01)
    assert summ["max"]["hr_bpm"] == pytest.approx(120.0) and summ["min"]["hr_bpm"] == pytest.approx(50.0)
    assert summ["max"]["t_ms"] == round(s[8] * 4)  # earliest window of 8 fast RRs ends at beat 8
    assert "8 consecutive valid RR" in summ["averaging"] and summ["window_beats"] == 8
    rows = per_minute_hr(s, c, FS, n_samples=int(s[-1]) + 1)
    assert rows[0]["hr_mean_bpm"] == pytest.approx(120.0) and rows[0]["n_rr"] == 119
    assert sum(r["n_rr"] for r in rows) == len(rr)
    json.dumps(summ)
    json.dumps(rows)


def test_ectopics_and_artifacts_are_excluded():
    rr = [800] * 30 + [400, 1200] + [800] * 30  # a PVC with coupling 400 ms
    s = _stream(rr)
    c = np.full(s.size, "N")
    c[31] = "V"
    assert hr_summary(s, c, FS)["max"]["hr_bpm"] == pytest.approx(75.0)
    c[31] = "N"  # labelled normal, the short RR counts
    assert hr_summary(s, c, FS)["max"]["hr_bpm"] > 75.0
    ok = valid_rr_mask(s, c, FS, artifact_spans=[(int(s[10]) + 5, int(s[12]) + 5)])
    assert not ok[11] and not ok[12] and not ok[13] and ok[10] and ok[14]
    hr = instantaneous_hr_bpm(s, FS)
    assert np.isnan(hr[0]) and hr[1] == pytest.approx(75.0)
    series = average_hr(s, c, FS, window_beats=4)
    assert series.window_beats == 4 and np.all(series.last_beat - series.first_beat == 4)


def test_empty_short_and_bad_parameters():
    empty = hr_summary(np.zeros(0, dtype=np.int64), np.zeros(0, dtype="<U1"), FS)
    assert empty["mean_hr_bpm"] is None and empty["max"]["hr_bpm"] is None and empty["tachy_burden_pct"] is None
    assert hr_extremum(np.array([0, 200, 400]), None, FS, "max")["hr_bpm"] is None
    with pytest.raises(ValueError):
        hr_extremum(np.array([0, 200]), None, FS, "median")
    with pytest.raises(TypeError):
        hr_summary(np.array([0, 200]), None, FS, window=8)
    with pytest.raises(ValueError):
        hr_summary(np.array([0, 200]), None, FS, timestamp="first")


def test_nsr2db_24h_beat_stream(shared_data):
    ann = read_reference_annotations(shared_data / "nsr2db" / "nsr001", "ecg")
    summ = hr_summary(ann.beat_samples, ann.beat_classes, ann.fs_hz)
    truth = _independent_extrema(ann.beat_samples.tolist(), ann.beat_classes.tolist(), ann.fs_hz)
    assert summ["max"]["hr_bpm"] == pytest.approx(truth["max"][0], abs=0.006) and summ["max"]["t_ms"] == truth["max"][1]
    assert summ["min"]["hr_bpm"] == pytest.approx(truth["min"][0], abs=0.006) and summ["min"]["t_ms"] == truth["min"][1]
    assert 40 < summ["mean_hr_bpm"] < 110 and summ["analysed_s"] > 20 * 3600


def test_hr_series_window():
    from ecgtrace.tools.hr import hr_series

    rr = [500] * 40 + [1000] * 40
    s = _stream(rr)
    c = np.full(s.size, "N")
    c[20] = "V"
    out = hr_series(s, c, FS, t0_ms=5_000, t1_ms=40_000)
    json.dumps(out)
    inst = out["instantaneous"]
    assert 20 not in inst["beat"] and 21 not in inst["beat"]  # the RRs around the ectopic beat
    assert all(5_000 <= t <= 40_000 for t in inst["t_ms"]) and set(inst["hr_bpm"]) == {120.0, 60.0}
    avg = out["averaged"]
    assert all(5_000 <= round(s[f] * 4) for f in avg["first_beat"]) and max(avg["t_ms"]) <= 40_000
    assert avg["hr_bpm"][0] == 120.0 and avg["hr_bpm"][-1] == 60.0
