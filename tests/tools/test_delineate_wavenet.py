"""Delineation with the wave net (the default method): marks that are physically possible on every beat, whatever the
rhythm, and on the window's own samples; a T wave the net runs into the next beat is not taken."""

from __future__ import annotations

import numpy as np
import pytest

from ecgtrace.tools import render
from ecgtrace.tools._delineate import DelineationParams, delineate_lead
from ecgtrace.tools._delineate_net import net_beat_marks
from ecgtrace.tools._wave_net import CLASSES, wave_probabilities
from ecgtrace.tools.measure import delineate
from ecgtrace.tools.records import open_record

ORDER = ("p_on", "p_off", "qrs_on", "qrs_off", "t_off")


def _violations(d) -> list[tuple]:
    """Every beat of every lead: marks inside the window; P on <= P off <= QRS on <= R peak <= QRS off <= T off;
    T off before the next beat's QRS onset."""
    bad = []
    first, last = d.sampfrom, d.sampfrom + d.n_samples - 1
    for lead, f in d.per_lead.items():
        pts = f.points
        for k in range(pts["qrs_on"].size):
            for name, v in pts.items():
                if v[k] >= 0 and not first <= v[k] <= last:
                    bad.append((lead, k, name, "outside the window"))
            marks = [int(pts[m][k]) for m in ORDER if pts[m][k] >= 0]
            if marks != sorted(marks):
                bad.append((lead, k, "out of order", marks))
            if pts["qrs_on"][k] >= 0 and not pts["qrs_on"][k] <= pts["r_peak"][k] <= pts["qrs_off"][k]:
                bad.append((lead, k, "R peak outside its QRS"))
            if k + 1 < pts["qrs_on"].size and 0 <= pts["qrs_on"][k + 1] <= pts["t_off"][k]:
                bad.append((lead, k, "T ends after the next QRS starts"))
    return bad


@pytest.mark.parametrize("method", ["wavenet", "rules"])
def test_every_event_window_of_the_synthetic_record_has_possible_marks(synth_record, method) -> None:
    info = open_record(synth_record.record_path)
    events = synth_record.schedule["events"]
    assert len(events) >= 10
    for event in events:
        window = render.window_by_event(info, event)
        d = delineate(window, None, method=method)
        assert d.params["method"] == method and bool(d.params["wave_net"]) == (method == "wavenet")
        assert _violations(d) == [], event["kind"]


@pytest.mark.parametrize("method", ["wavenet", "rules"])
@pytest.mark.parametrize(("record", "t0_s"), [("ludb/data/61", 0.0), ("ludb/data/93", 0.0), ("mitdb/208", 60.0), ("mitdb/208", 360.0),
                                              ("mitdb/203", 100.0), ("qtdb/sel100", 120.0)])
def test_real_windows_have_possible_marks(shared_data, record, t0_s, method) -> None:
    """A paced LUDB record (93), MIT-BIH 208 (PVCs and couplets; before measurement version 8 the rules put P off after
    QRS on at 60 s and a T end past the next QRS at 360 s), 203 (multiform PVCs and AF: T ends past the next QRS in
    both leads at 100 s) and a QTDB excerpt whose last T wave reaches the window's end."""
    info = open_record(shared_data / record)
    d = delineate(render.window_by_time(info, t0_s, t0_s + 10.0), None, method=method)
    assert _violations(d) == []
    if method == "rules" and record == "mitdb/208":
        assert d.params["impossible_marks_dropped"] >= 1  # the marks the rules put there are dropped, not moved


def test_a_t_wave_the_net_runs_into_the_next_beat_ends_before_it(synth_record) -> None:
    """The net's probabilities with the stretch from the second beat's QRS through the third's relabelled T (a beat the
    net missed): the second beat's net T wave runs through the third beat; the delineator keeps that beat's T end before the third QRS's onset and 100 ms before its R."""
    from ecgtrace.tools.annotations import read_reference_annotations

    info = open_record(synth_record.record_path)
    window = render.window_by_time(info, 200.0, 206.0)
    beats = read_reference_annotations(synth_record.record_path).beat_samples
    local = beats[(beats >= window.sampfrom) & (beats < window.sampto)] - window.sampfrom
    x = window.signal_mv[:, window.leads.index("MLII")]
    prob = wave_probabilities(x, window.fs_hz)
    # T from the second beat's QRS end (R + 40 ms) through the third beat's QRS (R + 60 ms): one T run over both
    on, off = int(local[1] + 0.04 * window.fs_hz), int(local[2] + 0.06 * window.fs_hz)
    prob[on : off + 1] = 0.0
    prob[on : off + 1, CLASSES.index("t")] = 1.0
    assert net_beat_marks(prob, local, window.fs_hz)["t_off"][1] > local[2]  # what the net alone would say
    out = delineate_lead(x, window.fs_hz, local, DelineationParams(), prob)
    assert out["t_off"][1] >= 0
    assert out["t_off"][1] <= local[2] - int(0.1 * window.fs_hz)
    assert out["qrs_on"][2] < 0 or out["t_off"][1] < out["qrs_on"][2]


@pytest.mark.parametrize("method", ["wavenet", "rules"])
def test_a_window_without_beats_or_too_short_has_no_marks(method) -> None:
    """A flat 10 s window (no beat to find) and a 0.2 s window with one beat: no marks and no values, no error."""
    from ecgtrace.tools.measure import measure_window
    from ecgtrace.tools.records import SignalWindow

    flat = SignalWindow(signal_mv=np.zeros((2500, 2), dtype=np.float32), fs_hz=250.0, sampfrom=0, leads=("I", "II"))
    for beats in (np.zeros(0, dtype=np.int64), None):
        d = delineate(flat, beats, method=method)
        assert d.beat_samples.size == 0 and all(v.size == 0 for f in d.per_lead.values() for v in f.points.values())
        assert all(m.value("qrs_ms") is None for m in measure_window(flat, beats, method=method).per_lead.values())
    short = SignalWindow(signal_mv=np.random.default_rng(0).standard_normal((50, 2)).astype(np.float32), fs_hz=250.0, sampfrom=0,
                         leads=("I", "II"))
    d = delineate(short, np.array([25]), method=method)
    assert all((v == -1).all() for f in d.per_lead.values() for v in f.points.values())
