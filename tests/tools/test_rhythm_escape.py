"""Escape beats by lateness (tools/_rhythm_escape.py) on hand-built beat streams with hand-computed RRs."""

from __future__ import annotations

import numpy as np

from ecgtrace.tools._rhythm_escape import late_beats
from ecgtrace.tools.af import detect_af
from ecgtrace.tools.rhythm import detect_events

FS = 250.0


def _stream(rr_ms: list[float], classes: str) -> tuple[np.ndarray, np.ndarray]:
    samples = np.concatenate([[250], 250 + np.cumsum(np.round(np.asarray(rr_ms) * FS / 1000.0))]).astype(np.int64)
    assert samples.size == len(classes)
    return samples, np.array(list(classes), dtype="<U1")


def _junctional_escapes(rr_ms: list[float], classes: str, no_p_at: int) -> list[int]:
    samples, cls = _stream(rr_ms, classes)
    p_wave = np.ones(samples.size, bool)
    p_wave[no_p_at] = False
    af = detect_af(samples, FS, min_episode_s=1e9)
    events = detect_events(samples, cls, FS, af=af, p_wave_present=p_wave)
    return [e["first_beat"] for e in events if e["kind"] == "junctional_escape"]


def test_the_beat_ending_a_compensatory_pause_is_not_late():
    """Sinus at 800 ms, a PVC coupled at 500 ms, then 1200 ms to a beat without P: 1.5 x the NN median, but only
    100 ms after the sinus beat was due (two cycles after the beat before the PVC). It is late only from
    (1 + 1.4) x 800 - 500 = 1420 ms on."""
    rr = [800.0] * 9 + [500.0, 1200.0] + [800.0] * 4
    cls = "N" * 10 + "VN" + "N" * 4
    ectopic = np.isin(np.array(list(cls)), ("V",))
    samples, _ = _stream(rr, cls)
    assert late_beats(samples, 1.4, np.array(list(cls)) == "N")[11]  # lateness against the NN median alone
    assert not late_beats(samples, 1.4, np.array(list(cls)) == "N", ectopic=ectopic)[11]
    assert _junctional_escapes(rr, cls, no_p_at=11) == []


def test_a_beat_that_outlasts_the_compensatory_pause_is_an_escape():
    """The same PVC followed by 1500 ms of silence (>= 1420 ms) and a beat without P: a junctional escape beat."""
    rr = [800.0] * 9 + [500.0, 1500.0] + [800.0] * 4
    cls = "N" * 10 + "VN" + "N" * 4
    samples, classes = _stream(rr, cls)
    late = late_beats(samples, 1.4, classes == "N", ectopic=classes == "V")
    assert np.flatnonzero(late).tolist() == [11]
    assert _junctional_escapes(rr, cls, no_p_at=11) == [11]


def test_a_late_beat_after_sinus_beats_keeps_the_plain_rule():
    """Without an ectopic before it, 1.4 x the NN median decides: 1120 ms after 800 ms cycles is late, 1100 ms is not."""
    for pause_ms, late in ((1120.0, True), (1100.0, False)):
        rr = [800.0] * 10 + [pause_ms] + [800.0] * 4
        samples, classes = _stream(rr, "N" * 16)
        assert bool(late_beats(samples, 1.4, classes == "N", ectopic=np.zeros(16, bool))[11]) is late


def test_no_beat_is_late_without_a_recent_sinus_cycle():
    """Ventricular bigeminy leaves no N-N interval: a median from before the run must not judge the beats in it."""
    import numpy as np

    from ecgtrace.tools._rhythm_escape import late_beats

    rr = [800.0] * 20  # sinus at 75/min
    rr += [550.0, 1450.0] * 30  # then bigeminy while the sinus cycle slows to 1000 ms: coupling 550, compensatory 1450
    samples = np.concatenate([[0.0], np.cumsum(rr)]).astype(np.int64)
    classes = np.array(["N"] * 21 + ["V", "N"] * 30)
    late = late_beats(samples, 1.4, classes == "N", ectopic=classes == "V")
    # with the stale 800 ms cycle the compensatory beats would be late: 1450 >= (1 + 1.4) x 800 - 550
    assert 1450.0 >= 2.4 * 800.0 - 550.0
    # the last N-N interval is RR 19 (beats 19-20); RRs up to 8 after it (ending at beats <= 28) may still be judged
    assert np.flatnonzero(late).tolist() == [22, 24, 26, 28]
    # a sinus pause with recent sinus cycles is still late
    pause = np.concatenate([[0.0], np.cumsum([800.0] * 12 + [1600.0] + [800.0] * 3)]).astype(np.int64)
    normal = np.ones(pause.size, bool)
    assert np.flatnonzero(late_beats(pause, 1.4, normal)).tolist() == [13]
