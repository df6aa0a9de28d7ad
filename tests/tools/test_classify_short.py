"""Beat classes on 10 s records: expert-labelled MIT-BIH tiles, PTB-XL records, and Q only with a reason."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest

from ecgtrace.tools import _classify_short as cs
from ecgtrace.tools.annotate import annotate_record
from ecgtrace.tools.annotations import read_reference_annotations
from ecgtrace.tools.classify import classify_beats
from ecgtrace.tools.records import open_record, read_samples


@pytest.fixture(scope="module")
def mitdb_119(shared_data):
    info = open_record(shared_data / "mitdb" / "119")
    ref = read_reference_annotations(shared_data / "mitdb" / "119")
    return read_samples(info, 0, int(600 * info.fs_hz)).signal_mv, info.fs_hz, ref


def test_ten_second_tiles_of_a_bigeminy_record_find_the_v_beats(mitdb_119) -> None:
    """MIT-BIH 119 (ventricular bigeminy, expert labels): every 10 s tile on its own, as a 10 s ECG would be."""
    signal, fs, ref = mitdb_119
    tile = int(10 * fs)
    tp = fp = fn = q = n = 0
    for start in range(0, signal.shape[0] - tile + 1, tile):
        inside = np.flatnonzero((ref.beat_samples >= start) & (ref.beat_samples < start + tile))
        classes, feats, params = cs.classify_short_array(signal[start : start + tile], fs, ref.beat_samples[inside] - start)
        truth = ref.beat_classes[inside]
        tp += int(np.sum((classes == "V") & (truth == "V")))
        fp += int(np.sum((classes == "V") & (truth != "V")))
        fn += int(np.sum((classes != "V") & (truth == "V")))
        q += int(np.sum(classes == "Q"))
        n += inside.size
        assert set(np.unique(feats["q_reason"][classes == "Q"])) <= {"qrs_cut_by_record_edge", "no_usable_lead", "artifact_span"}
        assert params["n_dominant"] >= 2
    assert tp / (tp + fn) >= 0.95 and tp / (tp + fp) >= 0.95, (tp, fp, fn)
    assert q / n <= 0.05, (q, n)


def test_q_only_where_the_beat_cannot_be_read(mitdb_119) -> None:
    signal, fs, ref = mitdb_119
    x = signal[: int(10 * fs)].copy()
    beats = ref.beat_samples[(ref.beat_samples < x.shape[0])]
    beats = np.r_[int(0.02 * fs), beats[beats > int(0.4 * fs)]]  # a beat 20 ms after the start: its QRS is cut
    classes, feats, _ = cs.classify_short_array(x, fs, beats)
    assert classes[0] == "Q" and feats["q_reason"][0] == "qrs_cut_by_record_edge"
    assert np.all(feats["q_reason"][classes != "Q"] == "")
    one_lead_lost = x.copy()
    one_lead_lost[:, 1] = np.nan
    classes_nan, _, _ = cs.classify_short_array(one_lead_lost, fs, beats)
    assert np.sum(classes_nan == "Q") == np.sum(classes == "Q")  # the other lead still reads every beat
    dead = np.full_like(x, np.nan)
    classes_dead, feats_dead, params = cs.classify_short_array(dead, fs, beats)
    assert np.all(classes_dead == "Q") and set(feats_dead["q_reason"]) <= {"no_usable_lead", "qrs_cut_by_record_edge"}
    assert params["q_reasons"]["no_usable_lead"] == beats.size - 1


def test_ptbxl_records_are_never_all_q_at_either_rate(shared_data) -> None:
    """The audit's path (annotate_record -> classify_beats): 10 s PTB-XL records get N/S/V classes, at 100 and 500 Hz."""
    records = sorted((shared_data / "ptbxl").glob("records100/*/*_lr.hea"))[:20] + sorted((shared_data / "ptbxl").glob("records500/*/*_hr.hea"))[:8]
    assert len(records) == 28
    with tempfile.TemporaryDirectory() as cache:
        for header in records:
            ann = annotate_record(header.with_suffix(""), cache_dir=cache, use_cache=False, workers=1)
            classes = ann.beat_classes
            assert np.mean(classes == "Q") < 0.5, (header.stem, classes)
            prov = ann.provenance["params"]["classes_provenance"]
            assert prov["method"] == cs.METHOD and set(prov["params"]["q_reasons"]) <= {"qrs_cut_by_record_edge", "no_usable_lead", "artifact_span"}


def test_record_api_dispatches_short_records_only(shared_data, synth_record) -> None:
    base = shared_data / "ptbxl" / "records500" / "00000" / "00001_hr"
    info = open_record(base)
    window = read_samples(info, 0, info.n_samples)
    from ecgtrace.tools.measure import detect_window_beats

    beats = detect_window_beats(window)[0]
    result = classify_beats(info, beats, info.fs_hz)
    assert result.provenance["method"] == cs.METHOD and result.classes.size == beats.size
    for name in ("rr_prev_ms", "prematurity", "qrs_width_ms", "template_corr_max", "p_wave_present", "q_reason"):
        assert result.features[name].shape == beats.shape
    ref = read_reference_annotations(synth_record.record_path)
    long = classify_beats(synth_record.record_path, ref.beat_samples[:50], ref.fs_hz)  # a 30 min record: the forest
    assert long.provenance["method"] != cs.METHOD
