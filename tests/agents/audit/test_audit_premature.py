"""Premature beats break the rhythm; sinus arrhythmia's gradual RR shortening does not (issue 13: PAC negatives)."""

from __future__ import annotations

import numpy as np

from ecgtrace.agents.audit._features import PREMATURE_RATIO, early_against_rhythm


def _premature(rr_ms: list[float], ref_ms: list[float]) -> list[bool]:
    rr, ref = np.asarray(rr_ms, dtype=float), np.asarray(ref_ms, dtype=float)
    nxt = np.r_[rr[1:], np.nan]
    return early_against_rhythm(rr < PREMATURE_RATIO * ref, rr, nxt, ref).tolist()


def test_an_early_beat_with_a_pause_after_it_is_premature() -> None:
    # coupling 560 ms (70 % of 800), then a compensatory 1040 ms
    assert _premature([800, 800, 800, 560, 1040, 800], [800] * 6) == [False, False, False, True, False, False]


def test_gradual_shortening_is_not_premature() -> None:
    # PTB-XL 00014-like sinus arrhythmia: 716 ms is < 85 % of the 850 ms reference, but the next RR (778 ms) is no pause
    rr, ref = [874, 788, 730, 750, 848, 900, 852, 762, 716, 778], [874, 874, 831, 788, 769, 799, 848, 850, 850, 848]
    early = (np.asarray(rr) < PREMATURE_RATIO * np.asarray(ref)).tolist()
    assert early[8] is True
    assert not any(_premature(rr, ref))


def test_runs_and_interpolated_beats_stay_premature() -> None:
    # a run of three at 500/450/450 ms ended by a pause: every beat of it
    assert _premature([800, 800, 500, 450, 450, 900, 800], [800] * 7) == [False, False, True, True, True, False, False]
    # interpolated: 400 + 400 ms add up to one 800 ms RR
    assert _premature([800, 800, 400, 400, 800], [800] * 5)[2] is True
    # the last beat has no RR after it: timing alone
    assert _premature([800, 800, 600], [800] * 3) == [False, False, True]
