"""Counterfactual edits checked against the synthetic schedule and the project's own pipeline (detector + classifier)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ecgtrace.tools import counterfactual as cf
from ecgtrace.tools.annotations import read_reference_annotations
from ecgtrace.tools.records import open_record, read_window


@pytest.fixture(scope="module")
def record(synth_record):
    info = open_record(synth_record.record_path)
    ref = read_reference_annotations(synth_record.record_path, "atr")
    return info, np.asarray(ref.beat_samples, dtype=np.int64), np.asarray(ref.beat_classes).astype(str), synth_record.schedule


def _event(schedule: dict, kind: str, n: int = 0) -> dict:
    return [e for e in schedule["events"] if e["kind"] == kind][n]


def _around(info, samples, t_ms: float, half_s: float = 6.0):
    window = read_window(info, t_ms / 1000 - half_s, t_ms / 1000 + half_s)
    k = int(np.argmin(np.abs(samples - round(t_ms * info.fs_hz / 1000))))
    return window, k


def _pipeline(window):
    from ecgtrace.tools import _classify_short as cs
    from ecgtrace.tools.beats import detect_beats_array

    x = np.asarray(window.signal_mv, dtype=np.float32)
    beats = np.asarray(detect_beats_array(x, window.fs_hz).samples, dtype=np.int64)
    classes, _, _ = cs.classify_short_array(x, window.fs_hz, beats)
    return beats + window.sampfrom, np.asarray(classes).astype(str)


def _class_at(beats, classes, at: int, tol: int) -> str | None:
    k = int(np.argmin(np.abs(beats - at)))
    return str(classes[k]) if abs(int(beats[k]) - at) <= tol else None


def _unchanged_outside(original, edited) -> bool:
    x, y = np.asarray(original.signal_mv), np.asarray(edited.window.signal_mv)
    mask = np.ones(x.shape[0], bool)
    for a, b in edited.record["spans_ms"]:
        mask[max(0, int(a * original.fs_hz / 1000) - original.sampfrom - 1): int(b * original.fs_hz / 1000) - original.sampfrom + 1] = False
    return bool(np.array_equal(x[mask], y[mask]))


def test_removed_pvc_is_gone_and_every_other_beat_keeps_its_class(record) -> None:
    info, samples, classes, schedule = record
    event = _event(schedule, "pvc")
    window, k = _around(info, samples, event["onset_ms"])
    assert classes[k] == "V"
    edited = cf.remove_beats(window, samples, classes, [k], seed=0)
    fs, tol = info.fs_hz, int(0.075 * info.fs_hz)
    before, after = _pipeline(window), _pipeline(edited.window)
    assert _class_at(*before, int(samples[k]), tol) == "V"  # the pipeline saw the PVC ...
    assert all(c != "V" for s, c in zip(*after) if abs(s - samples[k]) < 0.5 * fs)  # ... and sees none there now
    # the restored beat sits halfway across the compensatory pause: RR restored on both sides, within 5 % of each other
    (added,) = edited.record["beats_added_ms"]
    assert abs(added - (samples[k - 1] + samples[k + 1]) / 2 * 1000 / fs) < 15
    assert _class_at(*after, int(round(added * fs / 1000)), tol) == "N"
    inside = [(s, c) for s, c in zip(*before) if window.sampfrom + fs < s < window.sampto - fs and abs(s - samples[k]) > 0.5 * fs]
    assert len(inside) >= 8
    for s, c in inside:  # every other beat keeps the class the pipeline gave it on the original
        assert _class_at(*after, int(s), tol) == c, (s, c)
    assert cf.seam_ratio(window, edited) < cf.MAX_SEAM_SIGMAS  # no step above the noise at the joins
    assert _unchanged_outside(window, edited)  # bit-identical where nothing was edited
    assert edited.record["beats_removed_ms"] == [int(round(samples[k] * 1000 / fs))] and edited.record["removed_classes"] == ["V"]


def test_removed_pac_restores_one_normal_rr_and_moves_the_later_beats(record) -> None:
    info, samples, classes, schedule = record
    window, k = _around(info, samples, _event(schedule, "pac")["onset_ms"])
    assert classes[k] == "S"
    edited = cf.remove_beats(window, samples, classes, [k], seed=1)
    (shift,) = edited.record["shifts_ms"]
    assert shift["by_ms"] > 100  # a reset sinus node: the next beat comes one normal RR later
    rr = np.diff(edited.beat_samples) * 1000 / info.fs_hz
    normal = np.median(rr)
    assert np.all(np.abs(rr - normal) < 0.12 * normal), rr  # no premature beat and no pause left
    assert set(edited.beat_classes.tolist()) == {"N"}
    assert cf.seam_ratio(window, edited) < cf.MAX_SEAM_SIGMAS


def test_pause_filled_with_the_missing_beats(record) -> None:
    info, samples, classes, schedule = record
    event = _event(schedule, "pause")
    window, k = _around(info, samples, event["onset_ms"], half_s=7.0)
    edited = cf.fill_pause(window, samples, classes, k, seed=0)
    rr = np.diff(edited.beat_samples) * 1000 / info.fs_hz
    assert event["pause_ms"] > 2000 and rr.max() < 1.3 * np.median(rr)
    assert len(edited.record["beats_added_ms"]) == round(event["pause_ms"] / np.median(rr)) - 1
    after = _pipeline(edited.window)
    for t in edited.record["beats_added_ms"]:
        assert _class_at(*after, int(round(t * info.fs_hz / 1000)), int(0.075 * info.fs_hz)) == "N"


def test_moved_pvc_appears_at_the_normal_beats_place(record) -> None:
    info, samples, classes, schedule = record
    window, k = _around(info, samples, _event(schedule, "pvc", 1)["onset_ms"])
    dest = k - 4
    edited = cf.move_beat(window, samples, classes, k, dest, seed=0)
    fs, tol = info.fs_hz, int(0.075 * info.fs_hz)
    after = _pipeline(edited.window)
    moved = [t for t, c in zip(edited.record["beats_added_ms"], edited.record["added_classes"]) if c == "V"][0]
    # same coupling interval as the original PVC, from the beat before its new place
    assert abs(moved - (samples[dest - 1] + samples[k] - samples[k - 1]) * 1000 / fs) < 5
    assert _class_at(*after, int(round(moved * fs / 1000)), tol) == "V"
    assert _class_at(*after, int((samples[k - 1] + samples[k + 1]) // 2), tol) == "N"  # a normal beat at the sinus time where the PVC was
    assert all(c != "V" for s, c in zip(*after) if abs(s - samples[k]) < 0.3 * fs)
    assert not edited.record["shifts_ms"]  # a full compensatory pause: no beat moves
    assert cf.seam_ratio(window, edited) < cf.MAX_SEAM_SIGMAS


def test_control_edit_keeps_every_class_and_changes_one_beat_only(record) -> None:
    info, samples, classes, _ = record
    window = read_window(info, 300.0, 310.0)
    inside = np.flatnonzero((samples >= window.sampfrom) & (samples < window.sampto))
    k = int(inside[len(inside) // 2])
    assert classes[inside].tolist().count("N") == inside.size
    edited = cf.replace_beats(window, samples, classes, [k], seed=0)
    assert edited.beat_classes.tolist() == classes[inside].tolist()
    assert np.array_equal(edited.beat_samples, samples[inside])
    (span,) = edited.record["spans_ms"]
    assert span[0] < samples[k] * 1000 / info.fs_hz < span[1] and span[1] - span[0] < 1200
    assert _unchanged_outside(window, edited) and not np.array_equal(window.signal_mv, edited.window.signal_mv)
    assert cf.seam_ratio(window, edited) < cf.MAX_SEAM_SIGMAS


def test_shortened_pr_is_measured_short(record) -> None:
    from ecgtrace.tools.measure import delineate, measure_window

    info, samples, classes, schedule = record
    event = _event(schedule, "avb1")
    t0 = event["onset_ms"] / 1000 + 5
    window = read_window(info, t0, t0 + 10)
    before = measure_window(window, samples)
    d = delineate(window, samples)
    marks = {name: np.full(samples.size, -1) for name in ("p_on", "p_off", "qrs_on")}
    index = {int(b): i for i, b in enumerate(samples)}
    for j, b in enumerate(d.beat_samples):
        for name in marks:
            vals = [int(lf.points[name][j]) for lf in d.per_lead.values() if lf.points[name][j] >= 0]
            if vals:
                marks[name][index[int(b)]] = int(np.median(vals))
    edited = cf.shorten_pr(window, samples, classes, marks["p_on"], marks["p_off"], marks["qrs_on"], target_pr_ms=160, seed=0)
    after = measure_window(edited.window, samples)
    pr_before = np.median([m.value("pr_ms") for m in before.per_lead.values() if m.value("pr_ms") is not None])
    pr_after = np.median([m.value("pr_ms") for m in after.per_lead.values() if m.value("pr_ms") is not None])
    assert pr_before > 240 and 130 < pr_after < 190, (pr_before, pr_after)
    assert edited.record["p_waves_moved"] >= 8


def test_edits_are_deterministic_and_the_seed_only_changes_the_noise(record, tmp_path) -> None:
    info, samples, classes, schedule = record
    window, k = _around(info, samples, _event(schedule, "pvc")["onset_ms"])
    a = cf.remove_beats(window, samples, classes, [k], seed=3)
    b = cf.remove_beats(window, samples, classes, [k], seed=3)
    c = cf.remove_beats(window, samples, classes, [k], seed=4)
    assert np.array_equal(a.window.signal_mv, b.window.signal_mv) and json.dumps(a.record) == json.dumps(b.record)
    diff = np.abs(np.asarray(a.window.signal_mv, float) - np.asarray(c.window.signal_mv, float))
    assert 0 < diff.max() < 0.2 and np.array_equal(a.beat_samples, c.beat_samples)
    path = cf.save_window(tmp_path / "w.npz", a.window, edit=a.record)
    back, meta = cf.load_window(path)
    assert np.array_equal(back.signal_mv, a.window.signal_mv) and back.sampfrom == window.sampfrom and meta["edit"]["op"] == "remove_beats"


def test_impossible_edits_say_why(record) -> None:
    info, samples, classes, _ = record
    window = read_window(info, 300.0, 310.0)
    first = int(np.flatnonzero(samples >= window.sampfrom)[0])
    with pytest.raises(cf.CounterfactualError, match="window edge"):
        cf.remove_beats(window, samples, classes, [first], seed=0)
    with pytest.raises(cf.CounterfactualError, match="ectopic"):
        cf.move_beat(window, samples, classes, first + 2, first + 6, seed=0)


def test_a_planted_step_at_a_join_is_a_seam_and_a_join_on_a_steep_wave_is_not(record) -> None:
    """The seam check can fail: a 0.3 mV step planted at one join is far above the noise; the same edit without it is not."""
    from dataclasses import replace

    info, samples, classes, schedule = record
    window, k = _around(info, samples, _event(schedule, "pvc")["onset_ms"])
    edited = cf.remove_beats(window, samples, classes, [k], seed=0)
    assert edited.joins and cf.seam_ratio(window, edited) < cf.MAX_SEAM_SIGMAS
    at = edited.joins[0] - window.sampfrom
    stepped = np.asarray(edited.window.signal_mv, dtype=np.float64).copy()
    stepped[at:, 0] += 0.3  # a DC jump on the first lead from the join on
    planted = replace(edited, window=replace(edited.window, signal_mv=stepped))
    assert cf.seam_ratio(window, planted) > 2 * cf.MAX_SEAM_SIGMAS  # 14.5 sigmas measured
    # the original's own QRS slopes are no seam: an edit that changes nothing scores zero at any join, even on an R peak
    r_peak = int(samples[k + 2])
    unchanged = replace(edited, window=window, joins=(r_peak, r_peak + 1), record={**edited.record, "shifts_ms": []})
    assert cf.seam_ratio(window, unchanged) == 0.0
