"""AV-conduction rules (second/third-degree block, non-conducted PACs) on hand-built P and QRS streams."""

from __future__ import annotations

import numpy as np

from ecgtrace.tools._rhythm_conduction import conduction_events
from ecgtrace.tools.rhythm import count_events, detect_events

FS = 250.0


def _stream(pr_ms: list[float | None], pp_ms: float = 800.0) -> tuple[np.ndarray, np.ndarray]:
    """P waves every ``pp_ms``; each P conducts with its PR (ms) or is blocked (None). Returns (beats, P peaks) in samples."""
    p = 1000.0 + np.arange(len(pr_ms)) * pp_ms
    beats = [t + pr for t, pr in zip(p, pr_ms) if pr is not None]
    return np.round(np.asarray(beats) * FS / 1000).astype(np.int64), np.round(p * FS / 1000).astype(np.int64)


def _kinds(beats: np.ndarray, p_peaks: np.ndarray, **kw) -> dict[str, int]:
    out = conduction_events(beats, p_peaks, FS, **kw)
    kinds: dict[str, int] = {}
    for kind, *_ in out["events"]:
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def test_sinus_rhythm_has_no_conduction_events():
    beats, p = _stream([160.0] * 30)
    assert _kinds(beats, p) == {}


def test_wenckebach_cycles_are_one_mobitz1_episode():
    cycle = [180.0, 240.0, 270.0, None]
    beats, p = _stream([160.0] * 6 + cycle * 3 + [180.0] + [160.0] * 6)
    out = conduction_events(beats, p, FS)
    assert [(k, e.get("drops")) for k, _, _, e in out["events"]] == [("avb2_mobitz1", 3)]


def test_constant_pr_drops_are_mobitz2_and_alternate_drops_are_2_to_1():
    beats, p = _stream([160.0] * 6 + [200.0, 200.0, None] * 3 + [200.0] + [160.0] * 6)
    assert _kinds(beats, p) == {"avb2_mobitz2": 1}
    beats, p = _stream([160.0] * 6 + [200.0, None] * 6 + [200.0] + [160.0] * 6)
    assert _kinds(beats, p) == {"avb_2to1": 1}


def test_a_drop_with_changing_pr_on_both_sides_is_left_unclassified():
    beats, p = _stream([160.0] * 6 + [200.0, 260.0, None, 300.0] + [160.0] * 6)
    out = conduction_events(beats, p, FS)
    assert out["events"] == [] and out["unclassified_drops"] == 1


def test_an_early_p_without_qrs_is_a_non_conducted_pac():
    beats, p = _stream([160.0] * 20)
    early = np.array([int(round((1000 + 10 * 800 + 380) * FS / 1000))])  # 380 ms after a P: premature, in the T wave
    assert _kinds(beats, np.sort(np.concatenate([p, early]))) == {"blocked_pac": 1}
    # the same P given as a known blocked PAC (MIT-BIH 'x') counts once
    assert _kinds(beats, p, blocked_pac=early) == {"blocked_pac": 1}


def test_dissociated_p_waves_are_third_degree_block():
    p = np.round((1000 + np.arange(60) * 700.0) * FS / 1000).astype(np.int64)  # atria at 86/min
    beats = np.round((1100 + np.arange(26) * 1550.0) * FS / 1000).astype(np.int64)  # escape at 39/min
    out = conduction_events(beats, p, FS)
    kinds = [k for k, *_ in out["events"]]
    assert kinds == ["avb3"]
    _, a, b, _ = out["events"][0]
    assert b - a + 1 >= 20


def test_detect_events_reports_av_block_and_keeps_its_beats_out_of_sinus_rate():
    beats, p = _stream([160.0] * 40 + [200.0, None] * 20 + [200.0] + [160.0] * 40, pp_ms=900.0)
    classes = np.array(["N"] * beats.size)
    counts = count_events(detect_events(beats, classes, FS, p_wave_samples=p))
    assert counts["avb_2to1"] == 1 and counts["sinus_bradycardia"] == 0 and counts["pause"] == 0


def test_a_wave_locked_one_to_one_after_the_qrs_is_not_third_degree_block():
    """A wave 120 ms after every QRS (a flutter wave, a retrograde P) at the ventricular rate: no P conducts, yet the
    atria do not beat faster than the ventricles, so this is no AV dissociation."""
    beats = np.round((1000 + np.arange(30) * 900.0) * FS / 1000).astype(np.int64)  # 67/min
    locked = beats[:-1] + int(round(0.120 * FS))
    assert "avb3" not in _kinds(beats, locked)


def test_dissociated_atria_over_an_irregular_ventricular_rhythm_are_not_third_degree_block():
    """Regular P waves at 86/min over RR of 1.0-2.0 s in no order: the ventricles follow no escape rhythm."""
    rng = np.random.default_rng(3)
    p = np.round((1000 + np.arange(60) * 700.0) * FS / 1000).astype(np.int64)
    beats = np.round((1100 + np.cumsum(rng.uniform(1000.0, 2000.0, 26))) * FS / 1000).astype(np.int64)
    assert "avb3" not in _kinds(beats, p)
