"""The annotate pipeline: sidecar store, WFDB output, summary, CLI."""

from __future__ import annotations

import collections
import json
import shutil

import numpy as np
import pytest
import wfdb

from ecgtrace.cli import main as cli_main
from ecgtrace.tools.annotate import AnnotateError, annotate_record, write_wfdb_annotations

EXACT_KINDS = ("af", "pac", "pvc", "v_couplet", "vt", "svt", "v_bigeminy", "v_trigeminy", "pause", "sinus_tachycardia", "sinus_bradycardia")


@pytest.fixture(scope="module")
def detector_ready(synth_record):
    """Skip unless the beat detector and the classifier (with its trained model) are installed."""
    pytest.importorskip("ecgtrace.tools.beats")
    classify = pytest.importorskip("ecgtrace.tools.classify")
    from ecgtrace.tools.annotations import read_reference_annotations

    ref = read_reference_annotations(synth_record.record_path, "atr")
    try:
        classify.classify_beats(synth_record.record_path, ref.beat_samples[:50], ref.fs_hz)
    except FileNotFoundError as exc:  # the classifier's model file is not there yet
        pytest.skip(f"beat classifier not usable: {exc}")


@pytest.fixture(scope="module")
def record_copy(synth_record, tmp_path_factory):
    """A private copy of the synthetic record (tests here modify files)."""
    folder = tmp_path_factory.mktemp("annotate")
    for suffix in (".hea", ".dat", ".atr", ".schedule.json"):
        shutil.copy(f"{synth_record.record_path}{suffix}", folder / f"holter{suffix}")
    return folder / "holter"


def test_reference_pipeline_matches_schedule_and_is_cached(record_copy, synth_record, tmp_path):
    stages = []
    a = annotate_record(record_copy, cache_dir=tmp_path / "store", prefer_reference=True, progress=lambda s, d, t: stages.append(s))
    assert not a.from_cache and {"beats", "af", "rhythm", "hr"} <= set(stages)
    assert set(a.timings_s) >= {"beats", "classify", "af", "rhythm", "hr", "total"}
    schedule = collections.Counter(e["kind"] for e in synth_record.schedule["events"])
    for kind in EXACT_KINDS:
        assert a.summary["events"][kind] == schedule[kind], kind
    assert a.summary["n_beats"] == synth_record.schedule["n_beats"]
    assert a.summary["pvc_total"] == synth_record.schedule["beats_per_symbol"]["V"]
    assert a.summary["pac_total"] == synth_record.schedule["beats_per_symbol"]["A"]
    assert a.summary["rhythm"] == "sinus rhythm with paroxysmal atrial fibrillation"
    assert a.provenance["source"] == "reference" and len(a.summary["record_sha256"]) == 64
    assert len(list((tmp_path / "store").glob("*.npz"))) == 1
    b = annotate_record(record_copy, cache_dir=tmp_path / "store", prefer_reference=True)
    assert b.from_cache and b.key == a.key
    assert np.array_equal(a.beat_samples, b.beat_samples) and np.array_equal(a.beat_classes, b.beat_classes)
    assert b.events == a.events and b.summary == a.summary and b.hr == a.hr
    c = annotate_record(record_copy, cache_dir=tmp_path / "store", prefer_reference=True, use_cache=False)
    assert not c.from_cache and c.summary == a.summary
    json.dumps(a.summary)
    json.dumps(a.events)


def test_store_key_follows_record_content(record_copy, tmp_path):
    a = annotate_record(record_copy, cache_dir=tmp_path, prefer_reference=True)
    data = bytearray((record_copy.parent / "holter.dat").read_bytes())
    data[1000] ^= 0x01
    changed = tmp_path / "changed"
    changed.mkdir()
    for suffix in (".hea", ".atr"):
        shutil.copy(f"{record_copy}{suffix}", changed / f"holter{suffix}")
    (changed / "holter.dat").write_bytes(bytes(data))
    b = annotate_record(changed / "holter", cache_dir=tmp_path, prefer_reference=True)
    assert b.key != a.key and not b.from_cache


def test_a_store_hit_names_the_callers_copy_not_the_first_one(record_copy, tmp_path):
    # the store is keyed by content; a second copy of the same bytes must get its own location back,
    # or later readers (Holter assets, summary.json) open a folder that may be gone
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
        for suffix in (".hea", ".dat", ".atr"):
            shutil.copy(f"{record_copy}{suffix}", folder / f"holter{suffix}")
    a = annotate_record(first / "holter", cache_dir=tmp_path / "store", prefer_reference=True)
    shutil.rmtree(first)
    b = annotate_record(second / "holter", cache_dir=tmp_path / "store", prefer_reference=True)
    assert b.from_cache and b.key == a.key
    assert b.record["path"] == str(second / "holter") and a.record["path"] == str(first / "holter")
    assert b.summary == a.summary


def test_wfdb_output_reads_back(record_copy, tmp_path):
    a = annotate_record(record_copy, cache_dir=tmp_path / "store", prefer_reference=True)
    paths = write_wfdb_annotations(a, tmp_path / "out")
    assert paths["annotations"].name == "holter.ecgtrace"
    back = wfdb.rdann(str(tmp_path / "out" / "holter"), "ecgtrace")
    symbols = np.array(back.symbol)
    is_beat = symbols != "+"
    assert np.array_equal(back.sample[is_beat], a.beat_samples)
    assert np.array_equal(symbols[is_beat], a.beat_classes)
    notes = [n for n in back.aux_note if n]
    assert notes[0] == "(N" and "(AFIB" in notes and "(VT" in notes and "(SBR" in notes
    assert notes.count("(AFIB") == a.summary["af"]["n_episodes"]
    afib_at = back.sample[[i for i, n in enumerate(back.aux_note) if n == "(AFIB"]]
    assert sorted(afib_at.tolist()) == [e["onset_sample"] for e in a.af_episodes]
    assert back.fs == a.fs_hz
    assert json.loads(paths["summary"].read_text()) == a.summary


def test_errors_are_one_line(tmp_path, capsys, record_copy):
    from ecgtrace.errors import EcgTraceError

    with pytest.raises(EcgTraceError):
        annotate_record(tmp_path / "missing")
    bare = tmp_path / "bare"
    bare.mkdir()
    for suffix in (".hea", ".dat"):
        shutil.copy(f"{record_copy}{suffix}", bare / f"holter{suffix}")
    with pytest.raises(AnnotateError):
        annotate_record(bare / "holter", prefer_reference=True, cache_dir=tmp_path)
    assert cli_main(["annotate", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


def test_cli_json_and_tables(record_copy, tmp_path, capsys):
    args = ["annotate", str(record_copy), "--out", str(tmp_path / "out"), "--reference", "--cache-dir", str(tmp_path / "s")]
    assert cli_main([*args, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["events"]["vt"] >= 1 and (tmp_path / "out" / "holter.ecgtrace").exists()
    assert cli_main([*args, "--no-cache", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "heart rate" in out and "v_bigeminy" in out and "bpm at" in out


def test_detected_pipeline_on_synthetic_record(detector_ready, record_copy, synth_record, tmp_path):
    a = annotate_record(record_copy, cache_dir=tmp_path, workers=1)
    assert a.provenance["source"] == "detected"
    schedule = collections.Counter(e["kind"] for e in synth_record.schedule["events"])
    # beats under the noise burst are not detected: they lie in the reported artifact span
    noise = [e for e in synth_record.schedule["events"] if e["kind"] == "noise"]
    assert abs(a.summary["n_beats"] - synth_record.schedule["n_beats"]) <= 10
    for kind in (*EXACT_KINDS, "noise"):
        assert a.summary["events"][kind] == schedule[kind], kind
    for e in noise:
        assert any(s0 <= e["offset_ms"] * 0.25 and s1 >= e["onset_ms"] * 0.25 for s0, s1 in a.artifact_spans)


@pytest.mark.parametrize("damage", ["flat", "nan", "noisy"])
def test_detected_pipeline_survives_a_damaged_lead(detector_ready, record_copy, synth_record, tmp_path, damage):
    folder = tmp_path / damage
    folder.mkdir()
    for suffix in (".hea", ".atr"):
        shutil.copy(f"{record_copy}{suffix}", folder / f"holter{suffix}")
    digital = np.fromfile(f"{record_copy}.dat", dtype="<i2").reshape(-1, 3).copy()
    rng = np.random.default_rng(0)
    if damage == "flat":
        digital[:, 1] = 0
    elif damage == "nan":
        digital[:, 2] = -32768  # the format-16 NaN code
    else:
        digital[:, 2] = np.clip(digital[:, 2] + rng.normal(0, 800, digital.shape[0]), -32767, 32767).astype("<i2")
    digital.tofile(folder / "holter.dat")
    if damage == "noisy":
        a = annotate_record(folder / "holter", cache_dir=tmp_path / "store", workers=1)
    else:
        with pytest.warns(Warning, match="unusable"):
            a = annotate_record(folder / "holter", cache_dir=tmp_path / "store", workers=1)
    schedule = collections.Counter(e["kind"] for e in synth_record.schedule["events"])
    assert abs(a.summary["n_beats"] - synth_record.schedule["n_beats"]) <= 10
    # a noisy lead disturbs beat classes (classifier limit, see benchmarks/classify.py): only the kinds that the
    # beat times, AF and the rate rules decide are asserted there
    kinds = EXACT_KINDS if damage != "noisy" else ("af", "pause", "sinus_tachycardia", "sinus_bradycardia")
    for kind in kinds:
        assert a.summary["events"][kind] == schedule[kind], kind


def test_pipeline_plumbing_with_a_stand_in_classifier(record_copy, synth_record, tmp_path, monkeypatch):
    """Detected beats, then a classifier stand-in that copies the nearest reference class: events match the schedule."""
    import sys
    import types

    pytest.importorskip("ecgtrace.tools.beats")
    from ecgtrace.tools.annotations import read_reference_annotations

    ref = read_reference_annotations(record_copy, "atr")
    calls = {}

    def classify_beats(record, beat_samples, fs_hz, *, af_mask=None, artifact_spans=(), workers=1):
        calls["af_mask"] = None if af_mask is None else np.asarray(af_mask).copy()
        calls["workers"] = workers
        pos = np.clip(np.searchsorted(ref.beat_samples, beat_samples), 1, ref.beat_samples.size - 1)
        nearest = np.where(np.abs(ref.beat_samples[pos - 1] - beat_samples) < np.abs(ref.beat_samples[pos] - beat_samples), pos - 1, pos)
        classes = ref.beat_classes[nearest]
        p_wave = np.where(np.asarray(af_mask, dtype=bool), False, classes != "V")
        return types.SimpleNamespace(classes=classes, features={"p_wave_present": p_wave}, provenance={"source": "detected", "method": "stand-in", "version": "0"})

    fake = types.ModuleType("ecgtrace.tools.classify")
    fake.classify_beats = classify_beats
    fake.CLASSIFY_VERSION = "stand-in"
    monkeypatch.setitem(sys.modules, "ecgtrace.tools.classify", fake)
    a = annotate_record(record_copy, cache_dir=tmp_path, workers=1)
    assert calls["af_mask"] is not None and calls["af_mask"].sum() > 0  # classification knew where AF is
    assert calls["workers"] == 1  # the caller's worker count reaches the classifier's feature pass
    assert a.provenance["source"] == "detected" and a.provenance["params"]["classes_provenance"]["method"] == "stand-in"
    schedule = collections.Counter(e["kind"] for e in synth_record.schedule["events"])
    for kind in EXACT_KINDS:
        assert a.summary["events"][kind] == schedule[kind], kind


@pytest.mark.parametrize("record, min_se, min_ppv", [("mitdb/203", 0.99, 0.97), ("cpsc2021/data_84_2", 0.98, 0.99), ("cpsc2021/data_8_2", 0.98, 0.99)])
def test_detected_pipeline_af_on_real_records(detector_ready, shared_data, tmp_path, record, min_se, min_ppv):
    """Whole pipeline (detected beats, classes, P waves) against expert AF intervals (measured in benchmarks/rhythm.py)."""
    from ecgtrace.tools.af import score_af_episodes
    from ecgtrace.tools.annotations import read_reference_annotations

    path = shared_data / record
    header_len = int(wfdb.rdheader(str(path)).sig_len)
    ann = read_reference_annotations(path, "atr", n_samples=header_len + 1)  # cpsc2021 annotates one sample past the end
    a = annotate_record(path, cache_dir=tmp_path)
    score = score_af_episodes(a.af_episodes, [iv for iv in ann.rhythm_intervals if iv["label"] in ("AFIB", "AFL")])
    assert score["duration_se"] >= min_se and score["duration_ppv"] >= min_ppv


@pytest.mark.parametrize("module, constant", [("rhythm", "RHYTHM_VERSION"), ("hr", "HR_VERSION"), ("af", "AF_VERSION"), ("annotate", "ANNOTATE_VERSION")])
def test_a_changed_tool_version_misses_the_store(record_copy, tmp_path, monkeypatch, module, constant):
    import importlib

    a = annotate_record(record_copy, cache_dir=tmp_path, prefer_reference=True)
    assert annotate_record(record_copy, cache_dir=tmp_path, prefer_reference=True).from_cache
    monkeypatch.setattr(importlib.import_module(f"ecgtrace.tools.{module}"), constant, "changed-for-the-test")
    b = annotate_record(record_copy, cache_dir=tmp_path, prefer_reference=True)
    assert not b.from_cache and b.key != a.key
    assert b.provenance["params"]["versions"][module] == "changed-for-the-test"


def test_detector_and_classifier_versions_are_in_the_key(monkeypatch):
    beats = pytest.importorskip("ecgtrace.tools.beats")
    classify = pytest.importorskip("ecgtrace.tools.classify")
    from ecgtrace.tools.annotate import annotation_versions

    before = annotation_versions()
    assert set(before) >= {"beats", "classify", "classify_model", "af", "rhythm", "hr", "annotate", "annotations"}
    assert "absent" not in (before["beats"], before["classify"])
    monkeypatch.setattr(beats, "ALGORITHM_VERSION", "changed-detector")
    monkeypatch.setattr(classify, "VERSION", "changed-classifier")
    after = annotation_versions()
    assert (after["beats"], after["classify"]) == ("changed-detector", "changed-classifier")
    assert {k: v for k, v in after.items() if k not in ("beats", "classify")} == {k: v for k, v in before.items() if k not in ("beats", "classify")}


def test_store_defaults_to_the_user_cache_not_the_record_folder(record_copy, monkeypatch, tmp_path):
    monkeypatch.setenv("ECGTRACE_CACHE", str(tmp_path / "user-cache"))
    before = sorted(p.name for p in record_copy.parent.iterdir())
    annotate_record(record_copy, prefer_reference=True)
    assert sorted(p.name for p in record_copy.parent.iterdir()) == before
    assert len(list((tmp_path / "user-cache" / "annotations").glob("*.npz"))) == 1


def test_workers_do_not_change_the_annotation(record_copy, detector_ready, tmp_path):
    """Beat detection and the P-wave search run in two processes with workers=2; every output is the same as serial."""
    serial = annotate_record(record_copy, cache_dir=tmp_path / "one", workers=1, use_cache=False)
    parallel = annotate_record(record_copy, cache_dir=tmp_path / "two", workers=2, use_cache=False)
    np.testing.assert_array_equal(serial.beat_samples, parallel.beat_samples)
    np.testing.assert_array_equal(serial.beat_classes, parallel.beat_classes)
    assert serial.events == parallel.events
    assert serial.hr == parallel.hr
    # the summary's provenance names the worker count (the beat detector's params say it); all else is the same
    assert {k: v for k, v in serial.summary.items() if k != "provenance"} == {k: v for k, v in parallel.summary.items() if k != "provenance"}
    from ecgtrace.tools.holter_p import DEFAULT_P_PARAMS

    assert serial.n_samples / serial.fs_hz > 2 * DEFAULT_P_PARAMS["chunk_s"]  # three P-search chunks: the pool is used
    inputs = [a.provenance["params"]["rhythm_inputs"] for a in (serial, parallel)]
    assert inputs[0] == inputs[1] and inputs[0]["provenance"]["p_wave_status"]
