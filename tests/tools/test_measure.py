"""Delineation and measurements against the synthetic ground truth, the .waves file, the CLI and the benchmark."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ecgtrace.cli import main
from ecgtrace.tools import render
from ecgtrace.rubrics.diagnosis_features import CSE_TOLERANCE_MS
from ecgtrace.tools.annotations import read_reference_annotations
from ecgtrace.tools.measure import POINTS, delineate, detect_r_peaks, measure_window, write_waves
from ecgtrace.tools.records import open_record

CSE_MS = CSE_TOLERANCE_MS  # the acceptance limits
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def record(synth_record):
    info = open_record(synth_record.record_path)
    beats = read_reference_annotations(synth_record.record_path).beat_samples
    return info, beats, synth_record.schedule


def _quiet_windows(schedule, n=4, length_s=10.0):
    """Windows of plain sinus rhythm: at least 12 s away from every scheduled event."""
    busy = [(e["onset_ms"] / 1000 - 12, e["offset_ms"] / 1000 + 12) for e in schedule["events"]]
    starts = [t for t in np.arange(20.0, 1780.0, 30.0) if not any(a < t + length_s and t < b for a, b in busy)]
    assert len(starts) >= n
    return starts[:: max(len(starts) // n, 1)][:n]


def test_intervals_match_the_synthetic_truth(record):
    info, beats, schedule = record
    truth = schedule["morphology"]["N"]
    for t0 in _quiet_windows(schedule):
        window = render.window_by_time(info, t0, t0 + 10.0)
        result = measure_window(window, beats)
        in_window = beats[(beats >= window.sampfrom) & (beats < window.sampto)]
        rr_s = np.diff(in_window) / info.fs_hz
        qt_true = truth["qtc_ms"] * np.median(np.clip(rr_s, 0.3, 2.0)) ** (1 / 3)
        # MLII and V5 have the q wave that defines the synthetic QRS onset (V1 has none)
        for lead in ("MLII", "V5"):
            m = result.per_lead[lead]
            assert abs(m.value("pr_ms") - truth["pr_ms"]) <= CSE_MS["p_on"], (t0, lead, m.value("pr_ms"))
            assert abs(m.value("qrs_ms") - truth["qrs_ms"]) <= CSE_MS["qrs_off"], (t0, lead, m.value("qrs_ms"))
            assert abs(m.value("qt_ms") - qt_true) <= CSE_MS["t_off"], (t0, lead, m.value("qt_ms"), qt_true)
            assert abs(m.value("qtc_fridericia_ms") - truth["qtc_ms"]) <= CSE_MS["t_off"]
            assert abs(m.value("rr_ms") - 1000 * np.median(rr_s)) <= 4.0
            assert m.p_wave["present"]
            assert m.value("r_amp_mv") > 0.8 and m.value("t_amp_mv") > 0.2
            assert abs(m.value("st_j60_mv")) < 0.1


def test_first_degree_av_block_and_af(record):
    info, beats, schedule = record
    avb1 = next(e for e in schedule["events"] if e["kind"] == "avb1")
    mid = 0.5 * (avb1["onset_ms"] + avb1["offset_ms"])
    window = render.window_by_event(info, {"onset_ms": mid, "offset_ms": mid})
    pr = measure_window(window, beats).per_lead["MLII"].value("pr_ms")
    assert abs(pr - avb1["pr_ms"]) <= CSE_MS["p_on"], (pr, avb1["pr_ms"])
    af = next(e for e in schedule["events"] if e["kind"] == "af")
    mid = 0.5 * (af["onset_ms"] + af["offset_ms"])
    result = measure_window(render.window_by_event(info, {"onset_ms": mid, "offset_ms": mid}), beats)
    assert not result.per_lead["MLII"].p_wave["present"]


def test_values_list_their_beats_and_serialize_to_plain_json(record):
    info, beats, _ = record
    window = render.window_by_time(info, 200.0, 210.0)
    result = measure_window(window, beats)
    payload = result.to_json(include_fiducials=True)
    text = json.dumps(payload, allow_nan=False)
    assert json.loads(text)["provenance"]["source"] == "computed"
    in_window = set(int(b) for b in beats[(beats >= window.sampfrom) & (beats < window.sampto)])
    for lead, values in payload["leads"].items():
        for name in ("pr_ms", "qrs_ms", "qt_ms", "qtc_bazett_ms", "rr_ms", "t_amp_mv"):
            assert values[name]["n"] == len(values[name]["beats"]) > 0
            assert set(values[name]["beats"]) <= in_window
        assert len(values["median_beat"]["values_mv"]) == round(0.55 * 250) - round(-0.35 * 250) + 1
        assert values["median_beat"]["t0_ms"] == -350.0 and len(values["median_beat"]["beats"]) >= 8
    fid = result.delineation.per_lead["MLII"]
    assert set(fid.points) == set(POINTS)
    ok = fid.points["qrs_on"] >= 0
    assert np.all(fid.points["qrs_on"][ok] < fid.points["r_peak"][ok]) and np.all(fid.points["r_peak"][ok] < fid.points["qrs_off"][ok])


def test_window_detector_finds_the_reference_beats(record):
    info, beats, schedule = record
    for t0 in _quiet_windows(schedule, n=3):
        window = render.window_by_time(info, t0, t0 + 10.0)
        found = detect_r_peaks(window.signal_mv, window.fs_hz) + window.sampfrom
        ref = beats[(beats >= window.sampfrom) & (beats < window.sampto)]
        assert found.size == ref.size
        assert np.max(np.abs(found - ref)) <= 0.04 * info.fs_hz
    d = delineate(render.window_by_time(info, 300.0, 310.0))
    assert d.beat_source.startswith("detected") and d.beat_samples.size >= 8


def test_waves_file_follows_the_qtdb_convention(record, tmp_path):
    import wfdb

    info, beats, _ = record
    window = render.window_by_time(info, 140.0, 150.0, leads=["MLII"])
    delineation = delineate(window, beats)
    path = write_waves(delineation, tmp_path, "holter")
    ann = wfdb.rdann(str(tmp_path / "holter"), "waves")
    assert path.name == "holter.waves" and ann.fs == 250
    symbols = "".join(ann.symbol)
    assert "(p)" in symbols and "(N)" in symbols and "(t)" in symbols
    assert set(ann.symbol) == {"(", ")", "p", "N", "t"}
    # onset/offset marks carry the wave type in num: 0 P, 1 QRS, 2 T
    for k, s in enumerate(ann.symbol):
        if s in "()":
            peak = ann.symbol[k + 1] if s == "(" else ann.symbol[k - 1]
            assert ann.num[k] == {"p": 0, "N": 1, "t": 2}[peak]
    assert np.all(np.diff(ann.sample) >= 0)


def test_cli_delineate(record, tmp_path, capsys):
    info, _, _ = record
    assert main(["delineate", info.path, "--t0", "140", "--t1", "150", "--lead", "MLII", "--out", str(tmp_path), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["beats_source"] == "reference .atr"
    assert list(payload["measurements"]["leads"]) == ["MLII"]
    assert (tmp_path / "holter.waves").exists()
    assert main(["delineate", info.path, "--t0", "5", "--t1", "3", "--out", str(tmp_path)]) == 2
    assert main(["delineate", info.path, "--lead", "V9", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("error:") for line in err)


def test_delineation_on_real_marks(shared_data):
    """ecgtrace finds most cardiologist marks on a QTDB record and a LUDB lead."""
    from tests.support.benchmarks import import_benchmark

    bench = import_benchmark("delineation")
    tallies = {"ecgtrace": bench.Tally(), "neurokit2 dwt": bench.Tally()}
    bench.neurokit_dwt = lambda window, beats: [{k: np.zeros(0, dtype=np.int64) for k in bench.POINTS} for _ in window.leads]
    bench.run_qtdb(1, 150.0, "best", tallies, ["sel100"])
    bench.run_ludb(2, 150.0, tallies, ("ii",))
    ours = tallies["ecgtrace"]
    for point in ("qrs_on", "qrs_off", "t_off", "p_on"):
        mean, sd, found, n = ours.row(point)
        assert n > 20 and found > 0.9, (point, found)
        assert sd < 3 * CSE_MS[point], (point, sd)


def test_benchmark_script_runs(shared_data):
    out = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "delineation.py"), "--limit", "1", "--records", "sel100", "--ludb-leads", "ii"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "QTDB" in out.stdout and "LUDB" in out.stdout and "nk dwt" in out.stdout and "rules" in out.stdout
    assert "cross-lead marks" in out.stdout


def _lead_marks(fs_hz: float, n_beats: int, with_p: bool) -> dict[str, np.ndarray]:
    """One lead's per-beat marks as the delineator leaves them: QRS every second, 80 ms wide; P 160 ms before it."""
    qrs_on = (np.arange(n_beats) * fs_hz + 0.5 * fs_hz).astype(np.int64)
    p_on = qrs_on - int(0.16 * fs_hz) if with_p else np.full(n_beats, -1)
    return {"qrs_on": qrs_on, "qrs_off": qrs_on + int(0.08 * fs_hz), "p_on": p_on.copy(), "p_peak": np.where(p_on >= 0, p_on + 20, -1),
            "p_off": np.where(p_on >= 0, p_on + 50, -1), "p_present": np.full(n_beats, with_p), "p_quiet_ratio": np.full(n_beats, 3.0 if with_p else np.nan)}


@pytest.mark.parametrize(("p_leads", "kept"), [(2, True), (1, False)])
def test_p_waves_belong_to_the_window_when_two_of_twelve_leads_show_them(p_leads, kept):
    """Hand-made marks: a steady PR of 160 ms in ``p_leads`` leads, none elsewhere. Two of twelve leads keep the P waves
    in every lead (sinus tachycardia with P on T shows them in few leads); one lead alone does not (AF's f waves can)."""
    from ecgtrace.tools._delineate import DelineationParams
    from ecgtrace.tools.measure import _p_rule_all_leads

    fs = 500.0
    results = [_lead_marks(fs, 10, with_p=j < p_leads) for j in range(12)]
    p_waves = _p_rule_all_leads(results, fs, DelineationParams())
    assert [pw["present"] for pw in p_waves] == [j < p_leads for j in range(12)]
    assert {pw["window_present"] for pw in p_waves} == {kept}
    assert bool(results[0]["p_present"].all()) is kept  # a lead that showed them loses them when the window rule says AF
    assert (results[0]["p_on_found"] >= 0).all()  # the found marks stay for the atrial analysis either way
