"""P waves on detected beats (tools/holter_p.py) and rhythm events from the signal alone (tools/rhythm_signal.py).

Ground truth: the synthetic holtercare record's ``p`` marks (every P wave,
conducted or not) and its exact schedule of AV-block events.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from ecgtrace.tools.annotations import read_reference_annotations
from ecgtrace.tools.holter_p import detect_p_waves
from ecgtrace.tools.rhythm import detect_events
from ecgtrace.tools.rhythm_signal import P_WAVE_KINDS, signal_event_inputs, wave_candidate_spans
from ecgtrace.tools.synth import synthesize_holter

AV_KINDS = ("avb2_mobitz1", "avb2_mobitz2", "avb_2to1", "avb3")


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    result = synthesize_holter(tmp_path_factory.mktemp("hcp"), hours=1.0, seed=3, profile="holtercare")
    return result, read_reference_annotations(result.record_path)


def _hits(a: np.ndarray, b: np.ndarray, tol: int) -> np.ndarray:
    i = np.clip(np.searchsorted(b, a), 1, b.size - 1)
    return np.minimum(np.abs(b[i] - a), np.abs(b[i - 1] - a)) <= tol


def test_p_peaks_match_every_annotated_p_wave(record):
    result, ann = record
    pw = detect_p_waves(result.record_path, ann.beat_samples, ann.beat_classes)
    ref = ann.marks["p"]
    tol = int(0.05 * ann.fs_hz)
    assert pw.status == "ok" and pw.p_known.all()
    assert _hits(ref, pw.p_samples, tol).mean() >= 0.95  # Se of P-wave peaks within 50 ms
    assert _hits(pw.p_samples, ref, tol).mean() >= 0.98  # +P
    assert pw.provenance["method"].startswith("holter_p.detect_p_waves") and pw.provenance["version"]
    # the PR of sinus beats is the generator's (156 ms peak to R at 250 Hz, see tests/tools/test_synth_holtercare.py)
    assert abs(float(np.nanmedian(pw.pr_ms)) - 156.0) <= 8.0
    # the chunks are independent: two worker processes give the same P waves, PRs and aligned R peaks
    pw2 = detect_p_waves(result.record_path, ann.beat_samples, ann.beat_classes, workers=2)
    assert np.array_equal(pw2.p_samples, pw.p_samples) and np.array_equal(pw2.r_fiducial, pw.r_fiducial)
    assert np.array_equal(pw2.pr_ms, pw.pr_ms, equal_nan=True) and pw2.chunks == pw.chunks


def test_av_blocks_are_counted_from_the_signal(record):
    """Detected beats and classes, detected P waves: every AV block of the schedule, no other."""
    from ecgtrace.tools.beats import detect_beats
    from ecgtrace.tools.classify import classify_beats

    result, ann = record
    table = detect_beats(result.record_path, workers=1)
    spans = [(int(a), int(b)) for a, b in table.artifact_spans]
    bc = classify_beats(result.record_path, table.samples, table.fs_hz, artifact_spans=spans)
    inputs = signal_event_inputs(result.record_path, table.samples, bc.classes, artifact_spans=spans, p_wave_present=bc.features["p_wave_present"])
    assert inputs["provenance"]["p_waves"]["version"]
    # P waves were read everywhere; the only undecided stretches are the schedule's flutter (flutter waves are not P waves)
    # and long RR gaps that swing like a QRS, which are the schedule's noise burst and its VF/VFL, never a pause
    def scheduled(*kinds: str) -> list[tuple[float, float]]:
        return [(e["onset_ms"] / 1000.0, e["offset_ms"] / 1000.0) for e in result.schedule["events"] if e["kind"] in kinds]

    expected = {"inside atrial flutter": scheduled("afl"), "the long RR gap swings like a QRS": scheduled("noise", "vf", "vfl")}
    assert {next(k for k in expected if u["reason"].startswith(k)) for u in inputs["undecided"]} == set(expected)
    for u in inputs["undecided"]:
        where = next(v for k, v in expected.items() if u["reason"].startswith(k))
        assert all(any(a <= s1 / table.fs_hz and b >= s0 / table.fs_hz for a, b in where) for s0, s1 in u["spans"]), u
    # the quiet gaps are the scheduled pause and asystole: the asystole is found although the detector put an artifact span in it
    quiet = [(g["onset_sample"] / table.fs_hz, g["offset_sample"] / table.fs_hz) for g in inputs["kwargs"]["gaps"] if not g["busy"]]
    assert len(quiet) == len(scheduled("pause", "asystole")) and all(any(a - 1.5 <= q0 and q1 <= b + 0.5 for a, b in scheduled("pause", "asystole")) for q0, q1 in quiet)
    events = detect_events(table.samples, bc.classes, table.fs_hz, artifact_spans=spans, **inputs["kwargs"])
    assert Counter(e["kind"] for e in events if e["kind"] in ("pause", "asystole")) == Counter({"pause": 2, "asystole": 1})
    asystole = next(e for e in events if e["kind"] == "asystole")  # the detector's artifact span inside it is no noise event
    assert not [e for e in events if e["kind"] == "noise" and asystole["onset_sample"] <= e["onset_sample"] and e["offset_sample"] <= asystole["offset_sample"]]
    sched = [e for e in result.schedule["events"] if e["kind"] in AV_KINDS]
    found = Counter(e["kind"] for e in events if e["kind"] in AV_KINDS)
    assert found == Counter(e["kind"] for e in sched)
    for e in (e for e in events if e["kind"] in AV_KINDS):  # each overlaps its scheduled episode
        assert any(s["kind"] == e["kind"] and s["onset_ms"] <= e["offset_ms"] and s["offset_ms"] >= e["onset_ms"] for s in sched)


def _write_record(tmp_path, with_p: bool):
    import wfdb

    fs, n = 250, 250 * 120
    t = np.arange(n)
    beats = np.arange(200, n - 200, 200)  # 75 bpm
    x = 0.01 * np.random.default_rng(1).standard_normal(n)
    for b in beats:
        x += 1.0 * np.exp(-0.5 * ((t - b) / 3.0) ** 2)
        x += 0.25 * np.exp(-0.5 * ((t - b - 60) / 10.0) ** 2)
        if with_p:
            x += 0.12 * np.exp(-0.5 * ((t - b + 40) / 6.0) ** 2)
    wfdb.wrsamp("rec", fs=fs, units=["mV"], sig_name=["II"], p_signal=x[:, None], fmt=["16"], write_dir=str(tmp_path))
    return tmp_path / "rec", beats


def test_a_record_without_p_waves_says_so(tmp_path):
    path, beats = _write_record(tmp_path, with_p=False)
    classes = np.full(beats.size, "N")
    pw = detect_p_waves(path, beats, classes)
    assert pw.status.startswith("no visible P waves") and pw.p_samples.size == 0 and not pw.p_known.any()
    inputs = signal_event_inputs(path, beats, classes)
    assert inputs["undecided"] and set(inputs["undecided"][0]["kinds"]) == set(P_WAVE_KINDS) and "P waves" in inputs["undecided"][0]["reason"]
    assert inputs["kwargs"]["p_wave_samples"] is None and inputs["kwargs"]["p_wave_present"].all()  # unknown is never "absent"
    events = detect_events(beats, classes, 250.0, **inputs["kwargs"])
    assert not [e for e in events if e["kind"] in P_WAVE_KINDS]


def test_a_made_record_with_p_waves(tmp_path):
    path, beats = _write_record(tmp_path, with_p=True)
    pw = detect_p_waves(path, beats, np.full(beats.size, "N"))
    assert pw.status == "ok" and pw.p_present[1:-1].all()
    assert np.allclose(pw.pr_ms[1:-1], 160.0, atol=8.0)
    assert np.all(_hits(pw.p_samples, beats - 40, 3))  # no P anywhere else (not on the T wave)


def test_bad_arguments():
    with pytest.raises(ValueError, match="method"):
        detect_p_waves("x", np.array([1]), np.array(["N"]), method="wavelet")
    with pytest.raises(TypeError, match="min_corr_x"):
        detect_p_waves("x", np.array([1]), np.array(["N"]), min_corr_x=1)
    with pytest.raises(ValueError, match="conduction_beat_samples"):
        detect_events(np.array([100, 400, 700]), np.array(["N"] * 3), 250.0, p_wave_samples=np.array([60]), conduction_beat_samples=np.array([1, 2]))


def test_wave_candidates_merge_artifacts_and_fast_runs():
    beats = np.concatenate([np.arange(0, 5000, 200), np.arange(5000, 7000, 50), np.arange(7000, 12000, 200)])
    spans = wave_candidate_spans(beats, 250.0, [(6800, 7600), (10000, 10500)], 20000)
    assert spans == [(4750, 7600), (10000, 10500)]  # the 200/min run (padded 1 s) merged with the artifact it touches
    assert wave_candidate_spans(np.arange(0, 5000, 200), 250.0, [], 5000) == []


def test_third_degree_needs_sinus_like_atria():
    """Dissociated P waves at 88/min make a third-degree block; flutter waves at 300/min taken for P waves do not."""
    from ecgtrace.tools._rhythm_conduction import conduction_events

    fs = 250.0
    beats = np.arange(1000, 1000 + 20 * 375, 375)  # 40 bpm escape rhythm
    sinus_p = np.arange(1040, beats[-1], 170)  # 88/min, drifting against the QRS
    assert any(k == "avb3" for k, *_ in conduction_events(beats, sinus_p, fs)["events"])
    flutter = np.arange(1040, beats[-1], 50)  # 300/min
    assert not any(k == "avb3" for k, *_ in conduction_events(beats, flutter, fs)["events"])


def test_no_escape_by_lateness_after_af_or_across_artifacts():
    from ecgtrace.tools._rhythm_escape import no_escape_mask

    samples = np.arange(0, 2000, 200)
    irregular = np.zeros(samples.size, bool)
    irregular[2:4] = True
    mask = no_escape_mask(samples, irregular, [(1250, 1500)])
    assert mask.tolist() == [False, False, True, True, True, False, False, True, True, False]
