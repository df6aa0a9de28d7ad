"""Per-beat marks from wave probabilities: hand-built probability tracks with hand-computed boundaries."""

from __future__ import annotations

import numpy as np

from ecgtrace.tools._delineate_net import NetMarkParams, _runs, net_beat_marks
from ecgtrace.tools._wave_net import CLASSES

FS = 500.0  # the delineator's internal rate; the net's own rate is 250 Hz, so half a net sample is 1 sample here


def _track(n: int, spans: list[tuple[str, int, int]]) -> np.ndarray:
    """Probabilities (n, 4): 0.9 for the named class on [a, b] (inclusive), 0.9 'none' elsewhere, 0.1/3 for the others."""
    prob = np.full((n, len(CLASSES)), 0.1 / 3)
    prob[:, 0] = 0.9
    for wave, a, b in spans:
        prob[a : b + 1, :] = 0.1 / 3
        prob[a : b + 1, CLASSES.index(wave)] = 0.9
    return prob


def test_runs_merge_across_short_gaps_only() -> None:
    inside = np.zeros(40, dtype=bool)
    inside[2:6] = inside[8:12] = inside[30:33] = True  # gap of 2 samples, then a gap of 18
    first, last = _runs(inside, gap=3)
    assert first.tolist() == [2, 30] and last.tolist() == [11, 32]
    first, last = _runs(inside, gap=1)
    assert first.tolist() == [2, 8, 30] and last.tolist() == [5, 11, 32]


def test_boundaries_are_the_crossings_moved_half_a_net_sample_inwards() -> None:
    """Margin (p_class - max other) jumps from -0.867 to +0.867 between two samples: the crossing is halfway,
    so the onset is (a - 0.5) + 1 = a + 0.5 and the offset (b + 0.5) - 1 = b - 0.5 samples at 500 Hz."""
    prob = _track(1000, [("p", 300, 349), ("qrs", 400, 449), ("t", 600, 699)])
    marks = net_beat_marks(prob, np.array([420]), FS)
    assert marks["qrs_on"][0] == 400.5 and marks["qrs_off"][0] == 448.5
    assert marks["p_on"][0] == 300.5 and marks["p_off"][0] == 348.5
    assert marks["t_on"][0] == 600.5 and marks["t_off"][0] == 698.5


def test_an_uneven_crossing_is_interpolated() -> None:
    prob = _track(1000, [("qrs", 400, 449)])
    # sample 399: QRS 0.6 vs none 0.3 -> margin +0.3 (it is QRS already); sample 398: margin -0.867
    prob[399] = [0.3, 0.05, 0.6, 0.05]
    marks = net_beat_marks(prob, np.array([420]), FS)
    expected = 398 + 0.867 / (0.867 + 0.3) + 1.0
    assert abs(marks["qrs_on"][0] - expected) < 1e-3


def test_each_beat_takes_its_own_waves() -> None:
    """Two beats: the first has a P wave too short to count (15 ms < 20 ms) and a T; the second a P (the last of two,
    the one next to its QRS), and a T split by a 30 ms gap (one wave: gaps under 40 ms join T runs)."""
    spans = [("p", 100, 106), ("qrs", 200, 249), ("t", 350, 449),
             ("p", 520, 540), ("p", 600, 649), ("qrs", 700, 749), ("t", 850, 899), ("t", 915, 960)]
    marks = net_beat_marks(_track(1200, spans), np.array([220, 720]), FS)
    assert np.isnan(marks["p_on"][0]) and marks["t_off"][0] == 448.5
    assert marks["p_on"][1] == 600.5 and marks["p_off"][1] == 648.5
    assert marks["t_on"][1] == 850.5 and marks["t_off"][1] == 959.5


def test_a_beat_without_a_qrs_nearby_gets_no_marks() -> None:
    prob = _track(1000, [("qrs", 400, 449)])
    marks = net_beat_marks(prob, np.array([420, 800]), FS, NetMarkParams(qrs_reach_ms=80.0))
    assert marks["qrs_on"][0] == 400.5
    assert all(np.isnan(marks[k][1]) for k in marks)  # 800 is 351 samples (702 ms) from the QRS


def test_no_beats_or_no_qrs_anywhere() -> None:
    assert all(v.size == 0 for v in net_beat_marks(_track(100, []), np.zeros(0, dtype=np.int64), FS).values())
    marks = net_beat_marks(_track(500, [("p", 10, 60)]), np.array([200]), FS)
    assert all(np.isnan(v).all() for v in marks.values())


def test_two_beats_on_one_qrs_run_do_not_share_it() -> None:
    """A double detection 60 ms after a beat, inside the same QRS run (400-449): the beat nearest the run's middle
    (424.5) keeps it, the other gets no net marks, so the rules delineate it."""
    prob = _track(1000, [("p", 300, 349), ("qrs", 400, 449), ("t", 600, 699)])
    marks = net_beat_marks(prob, np.array([420, 448]), FS)
    assert marks["qrs_on"][0] == 400.5 and marks["t_off"][0] == 698.5
    assert all(np.isnan(marks[k][1]) for k in marks)


def test_a_run_at_the_lead_edges_stays_inside_the_lead() -> None:
    """A QRS run on the last sample only: margins -0.6 then +0.2 cross at n - 1.25, and half a net sample inwards
    (+1) would put the onset at n - 0.25, past the last sample; marks stay within [0, n - 1] with onset <= offset."""
    n = 500
    prob = _track(n, [])
    prob[n - 2], prob[n - 1] = [0.8, 0.0, 0.2, 0.0], [0.4, 0.0, 0.6, 0.0]
    marks = net_beat_marks(prob, np.array([n - 1]), FS)
    assert marks["qrs_on"][0] == marks["qrs_off"][0] == n - 1
    first = net_beat_marks(_track(n, [("qrs", 0, 1)]), np.array([0]), FS)
    assert first["qrs_on"][0] == 0.0 and 0.0 <= first["qrs_off"][0] <= n - 1
