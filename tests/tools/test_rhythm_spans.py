"""P-wave kinds against given AFL/VFL/VF spans (tools/_rhythm_spans.py), on hand-built beat and P streams and events."""

from __future__ import annotations

import numpy as np

from ecgtrace.tools._rhythm_spans import drop_p_wave_events_in_spans
from ecgtrace.tools.rhythm import count_events, detect_events

FS = 250.0


def _two_to_one_stream() -> tuple[np.ndarray, np.ndarray]:
    """Sinus (PR 160 ms, P-P 900 ms), 20 cycles of 2:1 block (PR 200 ms), sinus: (beats, P peaks) in samples."""
    prs = [160.0] * 40 + [200.0, None] * 20 + [200.0] + [160.0] * 40
    p = 1000.0 + np.arange(len(prs)) * 900.0
    beats = [t + pr for t, pr in zip(p, prs) if pr is not None]
    return np.round(np.asarray(beats) * FS / 1000).astype(np.int64), np.round(p * FS / 1000).astype(np.int64)


def _event(kind: str, onset: int, offset: int, first: int | None, last: int | None) -> dict:
    return {"kind": kind, "onset_sample": onset, "offset_sample": offset, "first_beat": first, "last_beat": last}


def test_av_block_overlapping_a_flutter_span_in_its_middle_is_dropped():
    beats, p = _two_to_one_stream()
    classes = np.array(["N"] * beats.size)
    assert count_events(detect_events(beats, classes, FS, p_wave_samples=p))["avb_2to1"] == 1
    block = [e for e in detect_events(beats, classes, FS, p_wave_samples=p) if e["kind"] == "avb_2to1"][0]
    mid = (block["first_beat"] + block["last_beat"]) // 2
    # a 10 s flutter span around the block's middle beats: its first and last beats lie outside the span
    span = {"kind": "afl", "onset_sample": int(beats[mid - 2]), "offset_sample": int(beats[mid + 2]), "source": "test"}
    assert span["onset_sample"] > block["onset_sample"] and span["offset_sample"] < block["offset_sample"]
    counts = count_events(detect_events(beats, classes, FS, p_wave_samples=p, rhythm_spans=[span]))
    assert counts["avb_2to1"] == 0 and counts["afl"] == 1


def test_flutter_span_away_from_the_block_keeps_it():
    beats, p = _two_to_one_stream()
    classes = np.array(["N"] * beats.size)
    span = {"kind": "afl", "onset_sample": int(beats[2]), "offset_sample": int(beats[20]), "source": "test"}
    assert count_events(detect_events(beats, classes, FS, p_wave_samples=p, rhythm_spans=[span]))["avb_2to1"] == 1


def test_drop_keeps_other_kinds_and_events_that_only_touch_a_span():
    beats_in_af = np.zeros(30, bool)
    beats_in_af[25] = True
    spans = [(1000, 2000)]  # half-open: sample 2000 is outside
    events = [
        _event("avb3", 0, 1500, 0, 10),         # overlaps the span: dropped
        _event("avb3", 2000, 2600, 11, 14),      # starts where the span ends: kept
        _event("avb3", 0, 999, 0, 5),            # ends before it: kept
        _event("pvc", 1200, 1200, 7, 7),         # not a P-wave kind: kept
        _event("blocked_pac", 1500, 1500, 7, 7),  # a point inside a span with no beat in it: dropped
        _event("avb2_mobitz1", 3000, 4000, 22, 27),  # holds an AF beat (25), neither first nor last: dropped
        _event("junctional_escape", 2800, 2800, 20, 20),  # kept
    ]
    kept = drop_p_wave_events_in_spans(events, beats_in_af, spans)
    assert [(e["kind"], e["onset_sample"]) for e in kept] == [("avb3", 2000), ("avb3", 0), ("pvc", 1200), ("junctional_escape", 2800)]
