"""Rhythm events against the synthetic schedule, hand-built beat streams and MIT-BIH rhythm intervals."""

from __future__ import annotations

import collections
import json

import numpy as np
import pytest

from ecgtrace.tools.af import detect_af
from ecgtrace.tools.annotations import read_reference_annotations
from ecgtrace.tools.rhythm import EVENT_KINDS, count_events, detect_events

FS = 250.0
# kinds the beat stream alone determines (avb1 needs PR intervals, noise needs the signal)
BEAT_STREAM_KINDS = ("af", "pac", "pvc", "v_couplet", "vt", "svt", "v_bigeminy", "v_trigeminy", "pause", "sinus_tachycardia", "sinus_bradycardia")


def _stream(rr_ms: list[float], classes: str) -> tuple[np.ndarray, np.ndarray]:
    samples = np.concatenate([[250], 250 + np.cumsum(np.round(np.asarray(rr_ms) * FS / 1000.0))]).astype(np.int64)
    assert len(classes) == samples.size
    return samples, np.array(list(classes), dtype="<U1")


def _no_af(n: int):
    return detect_af(np.arange(n) * 200, FS, min_episode_s=1e9)


@pytest.fixture(scope="module")
def synth_events(synth_record):
    ref = read_reference_annotations(synth_record.record_path, "atr")
    return ref, detect_events(ref.beat_samples, ref.beat_classes, ref.fs_hz, beat_source="reference")


def test_counts_match_the_synthetic_schedule_exactly(synth_record, synth_events):
    _, events = synth_events
    schedule = collections.Counter(e["kind"] for e in synth_record.schedule["events"])
    counts = count_events(events)
    for kind in BEAT_STREAM_KINDS:
        assert schedule[kind] >= 1
        assert counts[kind] == schedule[kind], kind
    assert {e["kind"] for e in events} <= set(BEAT_STREAM_KINDS)  # nothing spurious (no ivr, s_couplet ...)


def test_event_beats_and_times_match_the_schedule(synth_record, synth_events):
    ref, events = synth_events
    by_kind = collections.defaultdict(list)
    for e in events:
        by_kind[e["kind"]].append(e)
    for truth in synth_record.schedule["events"]:
        if truth["kind"] not in BEAT_STREAM_KINDS:
            continue
        found = [e for e in by_kind[truth["kind"]] if e["first_beat"] <= truth["last_beat"] and e["last_beat"] >= truth["first_beat"]]
        assert len(found) == 1, truth
        e = found[0]
        if truth["kind"] == "af":  # RR-based edges: within a few beats
            assert abs(e["first_beat"] - truth["first_beat"]) <= 2 and abs(e["last_beat"] - truth["last_beat"]) <= 2
            continue
        assert (e["first_beat"], e["last_beat"], e["n_beats"]) == (truth["first_beat"], truth["last_beat"], truth["n_beats"])
        assert (e["onset_ms"], e["offset_ms"]) == (truth["onset_ms"], truth["offset_ms"])
        assert e["onset_sample"] == ref.beat_samples[e["first_beat"]]
        if truth["kind"] in ("vt", "svt", "sinus_tachycardia", "sinus_bradycardia"):
            assert e["rate_bpm"] == pytest.approx(truth["rate_bpm"], rel=0.03)
    e = events[0]
    assert set(e) >= {"kind", "onset_ms", "offset_ms", "onset_sample", "offset_sample", "n_beats", "rate_bpm", "lead", "first_beat", "last_beat", "provenance"}
    assert e["provenance"]["source"] == "computed" and e["provenance"]["params"]["beat_source"] == "reference"
    json.dumps(events)


def test_runs_couplets_and_rate_threshold():
    # N N V V N N V V V (fast) N N V V V (slow: idioventricular) N N
    rr = [800, 800, 450, 450, 1000, 800, 400, 400, 400, 1000, 800, 700, 700, 700, 1000, 800]
    samples, classes = _stream(rr, "NNVVNNVVVNNVVVNNN")
    counts = count_events(detect_events(samples, classes, FS, af=_no_af(samples.size)))
    assert counts["v_couplet"] == 1 and counts["vt"] == 1 and counts["ivr"] == 1 and counts["pvc"] == 0
    counts = count_events(detect_events(samples, classes, FS, af=_no_af(samples.size), vt_min_rate_bpm=80.0))
    assert counts["vt"] == 2 and counts["ivr"] == 0
    samples, classes = _stream([800, 500, 500, 1000, 800, 450, 450, 450, 900, 800], "NNSSNNSSSNN")
    counts = count_events(detect_events(samples, classes, FS, af=_no_af(samples.size)))
    assert counts["s_couplet"] == 1 and counts["svt"] == 1 and counts["pac"] == 0


def test_bigeminy_trigeminy_cycles_and_isolated_convention():
    big = "N" + "NV" * 4 + "NNNN"  # 4 cycles of N V
    rr = [800] + [800, 480] * 4 + [1120, 800, 800]
    samples, classes = _stream(rr, big)
    events = detect_events(samples, classes, FS, af=_no_af(samples.size))
    kinds = [e["kind"] for e in events]
    assert kinds == ["v_bigeminy"]  # its PVCs are not counted again as pvc
    assert events[0]["cycles"] == 4 and events[0]["first_beat"] == 1 and events[0]["last_beat"] == 8
    kinds = [e["kind"] for e in detect_events(samples, classes, FS, af=_no_af(samples.size), bigeminy_min_cycles=5)]
    assert kinds == ["pvc"] * 4  # too short a chain: isolated PVCs
    tri = "N" + "NNV" * 3 + "NN"
    samples, classes = _stream([800] + [800, 800, 480] * 3 + [1120], tri)
    events = detect_events(samples, classes, FS, af=_no_af(samples.size))
    assert [e["kind"] for e in events] == ["v_trigeminy"] and events[0]["cycles"] == 3
    # a chain whose first ectopic lacks its two normal beats starts one cycle later (MIT-BIH 208)
    mixed = "NV" + "NV" + "NNV" * 3 + "NN"
    samples, classes = _stream([800] * (len(mixed) - 1), mixed)
    events = detect_events(samples, classes, FS, af=_no_af(samples.size))
    assert [(e["kind"], e["first_beat"], e["last_beat"]) for e in events] == [("pvc", 1, 1), ("pvc", 3, 3), ("v_trigeminy", 4, 12)]
    sbig = "N" + "NS" * 3 + "NN"
    samples, classes = _stream([800] + [800, 500] * 3 + [900], sbig)
    assert [e["kind"] for e in detect_events(samples, classes, FS, af=_no_af(samples.size))] == ["s_bigeminy"]


def test_pauses_respect_artifact_spans_and_noise_events():
    samples, classes = _stream([800, 800, 2500, 800, 800, 3000, 800], "NNNNNNNN")
    events = detect_events(samples, classes, FS, af=_no_af(samples.size))
    pauses = [e for e in events if e["kind"] == "pause"]
    assert [(p["first_beat"], p["last_beat"], p["duration_ms"]) for p in pauses] == [(2, 3, 2500), (5, 6, 3000)]
    span = (int(samples[5]) + 100, int(samples[5]) + 400)  # noise inside the second pause
    events = detect_events(samples, classes, FS, af=_no_af(samples.size), artifact_spans=[span])
    assert [e["kind"] for e in events if e["kind"] in ("pause", "noise")] == ["pause", "noise"]
    noise = [e for e in events if e["kind"] == "noise"][0]
    assert noise["onset_sample"] == span[0] and noise["first_beat"] is None
    assert count_events(detect_events(samples, classes, FS, af=_no_af(samples.size), pause_min_s=3.5))["pause"] == 0


def test_the_gap_signal_decides_pauses_next_to_artifact_spans():
    """A 3.5 s RR is a pause and an asystole. Read as busy on the signal (missed beats, noise) it is neither; with an
    artifact span inside it is neither either, unless the signal shows the gap quiet (a flat asystole), where the span
    is no noise event either."""
    samples, classes = _stream([800, 800, 3500, 800, 800], "NNNNNN")
    a, b = int(samples[2]), int(samples[3])

    def kinds(**kw) -> list[str]:
        return [e["kind"] for e in detect_events(samples, classes, FS, af=_no_af(samples.size), **kw) if e["kind"] in ("pause", "asystole")]

    assert sorted(kinds()) == ["asystole", "pause"]
    busy = [{"onset_sample": a, "offset_sample": b, "activity": 1.4, "busy": True}]
    quiet = [{"onset_sample": a, "offset_sample": b, "activity": 0.06, "busy": False}]
    unknown = [{"onset_sample": a, "offset_sample": b, "activity": None, "busy": False}]
    artifact = [(a + 200, a + 500)]
    assert kinds(gaps=busy) == []
    assert kinds(artifact_spans=artifact) == []
    assert sorted(kinds(artifact_spans=artifact, gaps=quiet)) == ["asystole", "pause"]
    assert kinds(artifact_spans=artifact, gaps=unknown) == []  # a gap the signal could not read: the artifact span stands
    noise = [e for e in detect_events(samples, classes, FS, af=_no_af(samples.size), artifact_spans=artifact, gaps=unknown) if e["kind"] == "noise"]
    assert len(noise) == 1  # ... and is reported as noise, but not inside a quiet gap (the detector's view of a flat asystole)
    assert not [e for e in detect_events(samples, classes, FS, af=_no_af(samples.size), artifact_spans=artifact, gaps=quiet) if e["kind"] == "noise"]


def test_noise_events_leave_out_the_vf_spans_inside_them():
    """The detector finds no QRS in VF either: an artifact span is noise only where no VF/VFL span explains it (VFDB 418
    had every VFL episode doubled as noise). Cut pieces under 2 s are the detector's margin; an uncut span stays whole."""
    samples, classes = _stream([800] * 4 + [30000] + [800] * 4, "N" * 10)
    gap0, gap1 = int(samples[4]), int(samples[5])  # a 30 s stretch without beats
    assert gap1 > gap0 + 5100  # every span below lies inside the stretch
    vf = {"kind": "vf", "onset_sample": gap0 + 1000, "offset_sample": gap0 + 3500, "source": "test"}

    def noise(spans, rhythm_spans=()):
        return [(e["onset_sample"], e["offset_sample"]) for e in detect_events(samples, classes, FS, af=_no_af(samples.size), artifact_spans=spans,
                                                                                rhythm_spans=list(rhythm_spans)) if e["kind"] == "noise"]

    inside = [(gap0 + 1000, gap0 + 3500)]
    assert noise(inside) == inside  # without the VF span: noise
    assert noise(inside, [vf]) == []  # the same span read as VF: not noise as well
    wider = [(gap0 + 500, gap0 + 4500)]  # 2 s of noise before the VF, 4 s after
    assert noise(wider, [vf]) == [(gap0 + 500, gap0 + 1000), (gap0 + 3500, gap0 + 4500)]
    margin = [(gap0 + 900, gap0 + 3700)]  # 0.4 s and 0.8 s left over: margins, not noise
    assert noise(margin, [vf]) == []
    short = [(gap0 + 5000, gap0 + 5100)]  # a 0.4 s span away from any VF: reported whole
    assert noise(short, [vf]) == short
    assert [e["kind"] for e in detect_events(samples, classes, FS, af=_no_af(samples.size), artifact_spans=inside, rhythm_spans=[vf])
            if e["kind"] in ("vf", "noise")] == ["vf"]


def test_sinus_rate_episodes_need_30_s_and_exclude_af():
    rr = [800] * 40 + [500] * 70 + [800] * 40 + [1200] * 20 + [800] * 40  # 35 s fast, 24 s slow
    samples, classes = _stream(rr, "N" * (len(rr) + 1))
    events = detect_events(samples, classes, FS, af=_no_af(samples.size))
    assert [e["kind"] for e in events] == ["sinus_tachycardia"]
    assert (events[0]["first_beat"], events[0]["last_beat"]) == (41, 110)
    assert events[0]["rate_bpm"] == pytest.approx(120.0)
    events = detect_events(samples, classes, FS, af=_no_af(samples.size), sinus_min_s=20.0)
    assert [e["kind"] for e in events] == ["sinus_tachycardia", "sinus_bradycardia"]


def test_s_beats_inside_af_are_not_pacs():
    rng = np.random.default_rng(0)
    rr = [800] * 60 + rng.uniform(400, 1000, 200).tolist() + [800] * 60
    classes = ["N"] * (len(rr) + 1)
    for k in range(80, 240, 20):
        classes[k] = "S"
    samples, cls = _stream(rr, "".join(classes))
    counts = count_events(detect_events(samples, cls, FS))
    assert counts["af"] == 1 and counts["pac"] == 0
    assert count_events(detect_events(samples, cls, FS, suppress_s_in_af=False))["pac"] == 8


def test_bad_input():
    samples, classes = _stream([800, 800], "NNN")
    with pytest.raises(ValueError):
        detect_events(samples, classes[:2], FS)
    with pytest.raises(ValueError):
        detect_events(samples[::-1], classes, FS)
    with pytest.raises(TypeError):
        detect_events(samples, classes, FS, no_such=1)
    assert detect_events(np.zeros(0, dtype=np.int64), np.zeros(0, dtype="<U1"), FS) == []
    assert set(count_events([])) == set(EVENT_KINDS)


def _agreement(events, intervals, label, kind):
    refs = [iv for iv in intervals if iv["label"] == label]
    dets = [e for e in events if e["kind"] == kind]
    hit = sum(any(e["kind"] == kind and e["onset_sample"] <= iv["offset_sample"] and e["offset_sample"] >= iv["onset_sample"] for e in dets) for iv in refs)
    good = sum(any(iv["label"] == label and e["onset_sample"] <= iv["offset_sample"] and e["offset_sample"] >= iv["onset_sample"] for iv in intervals) for e in dets)
    return hit, len(refs), good, len(dets)


def test_mitdb_rhythm_intervals(shared_data):
    """Events from the expert beats against the expert rhythm intervals (measured: see benchmarks/rhythm.py)."""
    totals = collections.defaultdict(lambda: [0, 0, 0, 0])
    pairs = {"VT": "vt", "SVTA": "svt", "B": "v_bigeminy", "T": "v_trigeminy"}
    for hea in sorted((shared_data / "mitdb").glob("*.hea")):
        ann = read_reference_annotations(hea.with_suffix(""), "atr")
        events = detect_events(ann.beat_samples, ann.beat_classes, ann.fs_hz, beat_source="reference")
        for label, kind in pairs.items():
            for i, v in enumerate(_agreement(events, ann.rhythm_intervals, label, kind)):
                totals[kind][i] += v
    se = {k: t[0] / t[1] for k, t in totals.items()}
    ppv = {k: t[2] / t[3] for k, t in totals.items()}
    assert se["vt"] >= 0.88 and ppv["vt"] >= 0.97
    assert se["svt"] >= 0.93 and ppv["svt"] >= 0.78
    assert se["v_bigeminy"] >= 0.85 and ppv["v_bigeminy"] >= 0.97
    assert se["v_trigeminy"] >= 0.86 and ppv["v_trigeminy"] >= 0.89


def test_nan_beat_samples_are_rejected():
    from ecgtrace.tools.hr import hr_summary

    bad = np.array([0.0, 200.0, np.nan, 600.0])
    for call in (lambda: detect_af(bad, FS), lambda: detect_events(bad, np.array(list("NNNN")), FS), lambda: hr_summary(bad, None, FS)):
        with pytest.raises(ValueError):
            call()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"fs_hz": 0.0}, "fs_hz must be > 0"),
        ({"beat_classes": np.array(list("NNN"))}, "beat_classes has 3 entries for 4 beats"),
        ({"beat_samples": np.array([250, 500, 500, 750])}, "strictly increasing"),
        ({"p_wave_samples": np.array([400]), "conduction_beat_samples": np.array([240, 490])}, "conduction_beat_samples has 2 entries for 4 beats"),
    ],
)
def test_detect_events_names_the_inconsistent_input(change, message):
    """A beat stream that does not hold together is refused with a ValueError that says what is wrong, before any work."""
    inputs = {"beat_samples": np.array([250, 500, 750, 1000]), "beat_classes": np.array(list("NNNN")), "fs_hz": FS, "af": _no_af(4)}
    with pytest.raises(ValueError, match=message):
        detect_events(**{**inputs, **change})
