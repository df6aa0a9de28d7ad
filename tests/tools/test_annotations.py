"""Reference annotations: AAMI mapping, rhythm intervals, annotation-only databases."""

from __future__ import annotations

import numpy as np
import pytest

from ecgtrace.errors import AnnotationError
from ecgtrace.tools.annotations import SYMBOL_TO_AAMI, clean_aux_note, read_reference_annotations, rhythm_label


def test_aami_mapping_follows_ec57():
    assert {s for s, c in SYMBOL_TO_AAMI.items() if c == "S"} == {"A", "a", "J", "S"}
    assert {s for s, c in SYMBOL_TO_AAMI.items() if c == "V"} == {"V", "E"}
    assert {s for s, c in SYMBOL_TO_AAMI.items() if c == "Q"} == {"/", "f", "Q"}
    for non_beat in "+~|x\"![]":
        assert non_beat not in SYMBOL_TO_AAMI


def test_aux_notes_are_cleaned():
    assert clean_aux_note("(N\x00") == "(N"
    assert rhythm_label("(AFIB\x00\x00") == "AFIB"
    assert rhythm_label("\x01 Aux") is None
    assert rhythm_label("") is None


def test_mitdb_100_counts(shared_data):
    ann = read_reference_annotations(shared_data / "mitdb" / "100")
    assert ann.beat_samples.size == 2273
    assert ann.class_counts() == {"N": 2239, "S": 33, "V": 1, "F": 0, "Q": 0}
    assert set(ann.beat_symbols) == {"N", "A", "V"}
    assert ann.rhythm_intervals[0]["label"] == "N"
    assert ann.provenance["source"] == "reference"


def test_mitdb_201_rhythm_intervals(shared_data):
    ann = read_reference_annotations(shared_data / "mitdb" / "201")
    labels = {iv["label"] for iv in ann.rhythm_intervals}
    assert {"N", "AFIB"} <= labels
    for first, second in zip(ann.rhythm_intervals, ann.rhythm_intervals[1:]):
        assert first["offset_sample"] == second["onset_sample"]  # contiguous, no overlap
    assert all("\x00" not in iv["label"] for iv in ann.rhythm_intervals)


def test_ltafdb_annotation_only_stream(shared_data):
    with pytest.raises(AnnotationError, match="sampling rate|fs_hz"):
        read_reference_annotations(shared_data / "ltafdb" / "00")
    ann = read_reference_annotations(shared_data / "ltafdb" / "00", fs_hz=128)
    assert ann.beat_samples.size > 90_000  # about 24 h of beats
    assert {"N", "AFIB"} <= {iv["label"] for iv in ann.rhythm_intervals}
    assert np.all(np.diff(ann.beat_samples) > 0)


def test_nsr2db_beat_times(shared_data):
    ann = read_reference_annotations(shared_data / "nsr2db" / "nsr001", "ecg")
    assert ann.fs_hz == 128.0
    assert ann.beat_samples.size > 80_000
    hours = ann.beat_samples[-1] / ann.fs_hz / 3600
    assert 20 < hours < 26


def test_qtdb_and_ludb_wave_annotations_read(shared_data):
    import wfdb

    q1c = wfdb.rdann(str(shared_data / "qtdb" / "sel100"), "q1c")
    assert {"(", ")", "N"} <= set(q1c.symbol)
    ludb = wfdb.rdann(str(shared_data / "ludb" / "data" / "1"), "ii")
    assert {"(", ")", "N", "p", "t"} <= set(ludb.symbol)


def test_synthetic_annotations_equal_schedule(synth_record):
    schedule = synth_record.schedule
    ann = read_reference_annotations(synth_record.record_path)
    assert ann.beat_samples.size == schedule["n_beats"]
    symbols = list(ann.beat_symbols)
    times_ms = ann.beat_times_ms()
    for event in schedule["events"]:
        if event["kind"] == "noise":
            continue
        first, last = event["first_beat"], event["last_beat"]
        assert times_ms[first] == event["onset_ms"] and times_ms[last] == event["offset_ms"], event
        assert last - first + 1 == event["n_beats"]
        kinds = symbols[first : last + 1]
        expected = {
            "pvc": ["V"], "pac": ["A"], "v_couplet": ["V", "V"],
            "vt": ["V"] * event["n_beats"], "svt": ["A"] * event["n_beats"],
        }.get(event["kind"])
        if expected is not None:
            assert kinds == expected, event
    # every rhythm episode of the schedule is an interval of the same length in the .atr
    intervals = {(iv["label"], iv["onset_ms"]) for iv in ann.rhythm_intervals}
    for event in schedule["events"]:
        if "rhythm_note" in event:
            assert (event["rhythm_note"][1:], event["onset_ms"]) in intervals, event


def test_cpsc2021_mark_just_past_the_end_is_tolerated(shared_data):
    """CPSC 2021 files put a mark one sample past the last one; it is dropped, not an error."""
    for path in sorted((shared_data / "cpsc2021").glob("*.atr")):
        ann = read_reference_annotations(path.with_suffix(""))
        assert ann.beat_samples.size > 0
        assert ann.beat_samples.max() < ann.n_samples
