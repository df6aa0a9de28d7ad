"""The signal-trust benchmark's scoring: matching per kind, and which events count beside noise."""

from __future__ import annotations

from tests.support.benchmarks import import_benchmark


def _ev(kind: str, onset_ms: int, offset_ms: int | None = None) -> dict:
    return {"kind": kind, "onset_ms": onset_ms, "offset_ms": onset_ms if offset_ms is None else offset_ms}


def test_beat_kinds_match_within_150_ms_and_runs_by_overlap() -> None:
    bench = import_benchmark("signal_trust")
    reference = [_ev("pvc", 1000), _ev("pvc", 5000), _ev("vt", 10_000, 12_000), _ev("pac", 20_000)]
    detected = [_ev("pvc", 1140), _ev("pvc", 5160), _ev("pvc", 7000), _ev("vt", 11_900, 13_000), _ev("vt", 30_000, 31_000)]
    assert bench.score_kind(reference, detected, "pvc") == [1, 2, 1, 3]  # 140 ms matches, 160 ms does not, 7000 is extra
    assert bench.score_kind(reference, detected, "vt") == [1, 1, 1, 2]  # overlapping runs match; the second is false
    assert bench.score_kind(reference, detected, "pac") == [0, 1, 0, 0]


def test_beats_and_runs_near_noise_are_left_out_episodes_kept_whole() -> None:
    bench = import_benchmark("signal_trust")
    noise = [[10_000, 11_000]]
    events = [_ev("pvc", 9_400), _ev("pvc", 9_600), _ev("vt", 11_200, 12_000), _ev("af", 0, 60_000), _ev("v_bigeminy", 8_000, 20_000),
              _ev("pause", 11_600, 14_000)]
    kept = bench.outside_noise(events, noise)
    assert [e["kind"] for e in kept] == ["pvc", "af", "v_bigeminy", "pause"]
    assert kept[0]["onset_ms"] == 9_400  # 600 ms before the noise: clear of the 500 ms margin
