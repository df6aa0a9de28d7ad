"""The VFDB benchmark's protocol: every shared record is in exactly one half, and duration overlap is counted by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.benchmarks import import_benchmark as _bench


def test_split_is_disjoint_and_unknown_records_are_refused() -> None:
    protocol = _bench("_protocol")
    assert not protocol.VFDB_TUNED & protocol.VFDB_SCORED
    assert protocol.vfdb_status("418") == "tuned" and protocol.vfdb_status("428") == "untuned"
    with pytest.raises(KeyError, match="neither half"):
        protocol.vfdb_status("cu01")


def test_every_shared_vfdb_record_has_a_half(shared_data: Path) -> None:
    protocol = _bench("_protocol")
    names = {p.stem for p in (shared_data / "vfdb").glob("*.hea")}
    if not names:
        pytest.skip(f"no VFDB records in {shared_data / 'vfdb'}")
    assert names <= protocol.VFDB_TUNED | protocol.VFDB_SCORED
    assert {protocol.vfdb_status(n) for n in names} == {"tuned", "untuned"}


def test_overlap_seconds_by_hand() -> None:
    vocab = _bench("_rhythm_vocab")
    ref = [{"onset_ms": 0.0, "offset_ms": 10_000.0}, {"onset_ms": 20_000.0, "offset_ms": 30_000.0}]
    events = [{"onset_ms": 5_000.0, "offset_ms": 25_000.0}, {"onset_ms": 40_000.0, "offset_ms": 42_000.0}]
    # reference 20 s, events 22 s; the first event covers 5 s of each reference episode, the second none
    assert vocab.overlap_seconds(ref, events) == (20.0, 22.0, 10.0)
    assert vocab.overlap_seconds(ref, []) == (20.0, 0.0, 0.0)


def test_touching_parts_of_the_union_are_one_episode() -> None:
    vocab = _bench("_rhythm_vocab")
    ref = [{"kind": "VFL", "onset_ms": 0.0, "offset_ms": 6_000.0}, {"kind": "VF", "onset_ms": 6_000.0, "offset_ms": 20_000.0},
           {"kind": "VF", "onset_ms": 60_000.0, "offset_ms": 70_000.0}]
    events = [{"kind": "vfl", "onset_ms": 1_000.0, "offset_ms": 7_000.0}, {"kind": "vf", "onset_ms": 7_000.0, "offset_ms": 19_000.0}]
    rows = vocab.episode_scores(ref, events, {"VF|VFIB|VFL": ("vf", "vfl"), "VF": ("vf",)})
    union = [sum(rows["VF|VFIB|VFL"][b][i] for b in vocab.BINS) for i in range(4)]
    assert union == [1, 2, 1, 1]  # the VFL->VF run is one episode (found), the later VF is missed; one event, correct
    vf = [sum(rows["VF"][b][i] for b in vocab.BINS) for i in range(4)]
    assert vf == [1, 2, 1, 1]  # by kind the parts stay apart: the vf event finds the first VF interval only
