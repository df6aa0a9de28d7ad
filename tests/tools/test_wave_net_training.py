"""The wave net's training data (benchmarks/_wave_net_data.py, train_wave_net.py): set-valued labels from hand-made
QTDB-style marks, and the PR-lengthening augmentation on a hand-made beat. No PyTorch needed."""

from __future__ import annotations

import numpy as np

from tests.support.benchmarks import import_benchmark


def _data():
    return import_benchmark("_wave_net_data")


def test_qtdb_labels_rule_out_what_the_marks_rule_out() -> None:
    """Two consecutive beats, P marked on both, no T onset marked: QRS end -> T peak is 'none or T', the T-P
    stretch between the beats is none, before the first mark and after the last nothing is known."""
    d = _data()
    samples = [10, 15, 20, 30, 35, 40, 60, 70, 110, 115, 120, 130, 135, 140, 160, 170]
    symbols = ["(", "p", ")", "(", "N", ")", "t", ")", "(", "p", ")", "(", "N", ")", "t", ")"]
    beats = d.qtdb_beats(d.wave_marks(samples, symbols))
    assert [b["qrs"] for b in beats] == [(30, 40), (130, 140)] and beats[0]["t"] == (None, 60, 70)
    labels = d.qtdb_labels(200, beats)
    assert (labels[:10] == d.UNKNOWN).all() and (labels[171:] == d.UNKNOWN).all()
    assert (labels[10:21] == d.P).all() and (labels[21:30] == d.NONE).all() and (labels[30:41] == d.QRS).all()
    assert (labels[41:60] == d.NONE | d.T).all() and (labels[60:71] == d.T).all()
    assert (labels[71:110] == d.NONE).all()  # RR 100 samples = the median: no unmarked beat between them


def test_a_beat_without_a_p_mark_leaves_p_open_where_the_record_rarely_marks_p() -> None:
    d = _data()
    samples = [30, 35, 40, 60, 70, 130, 135, 140, 160, 170]
    symbols = ["(", "N", ")", "t", ")", "(", "N", ")", "t", ")"]
    labels = d.qtdb_labels(200, d.qtdb_beats(d.wave_marks(samples, symbols)))
    assert (labels[71:130] == d.NONE | d.P).all()


def test_lengthen_pr_moves_the_p_wave_and_its_label_earlier() -> None:
    d = _data()
    train = import_benchmark("train_wave_net")
    n = 200
    x = np.zeros(n)
    labels = np.full(n, d.NONE, dtype=np.uint8)
    x[120:130] = np.hanning(10) * 0.2  # P wave
    labels[120:130] = d.P
    x[150:160] = np.hanning(10) * 1.0  # QRS
    labels[150:160] = d.QRS
    y, moved = train.lengthen_pr(x, labels, 40)
    assert np.flatnonzero(moved == d.P).tolist() == list(range(80, 90))
    assert np.allclose(y[80:90], x[120:130]) and np.allclose(y[90:150], 0.0)  # a flat PR segment up to the QRS
    assert np.array_equal(y[150:160], x[150:160]) and (moved[150:160] == d.QRS).all()
    labels[60:100] = d.T  # a T wave where the P would go: the P stays
    y, kept = train.lengthen_pr(x, labels, 40)
    assert np.array_equal(y, x) and np.array_equal(kept, labels)


def test_pick_lead_draws_qtdb_at_the_share_asked_and_uniformly_without_one() -> None:
    """18 LUDB leads and 2 QTDB leads: uniform draws give QTDB about 1 in 10; a 0.5 share gives it about half; a share
    with no QTDB lead falls back to every lead rather than failing."""
    d = _data()
    train = import_benchmark("train_wave_net")
    leads = [d.LabelledLead(f"ludb/{k}:ii", np.zeros(4), np.zeros(4, dtype=np.uint8)) for k in range(18)]
    leads += [d.LabelledLead(f"qtdb/sel{k}:MLII", np.zeros(4), np.zeros(4, dtype=np.uint8)) for k in range(2)]
    rng = np.random.default_rng(0)

    def qtdb_share(share: float | None, pool: list, n: int = 4000) -> float:
        return sum(train.pick_lead(pool, rng, share).name.startswith("qtdb/") for _ in range(n)) / n

    assert abs(qtdb_share(None, leads) - 0.1) < 0.02
    assert abs(qtdb_share(0.5, leads) - 0.5) < 0.03
    assert abs(qtdb_share(0.25, leads) - 0.25) < 0.03
    assert qtdb_share(0.5, leads[:18]) == 0.0  # no QTDB lead to draw: every draw is an LUDB lead
