"""The delineation benchmark's bookkeeping: SD without the paced records, which records are paced, the second cardiologist."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.support.benchmarks import import_benchmark


def _bench():
    return import_benchmark("delineation")


def test_sd_without_leaves_the_named_records_out() -> None:
    bench = _bench()
    tally = bench.Tally()
    tally.add("qrs_on", np.array([-2.0, 2.0, np.nan]), "a")  # the NaN is a mark not found
    tally.add("qrs_on", np.array([40.0, 60.0]), "paced")
    sd, n = tally.sd_without("qrs_on", frozenset({"paced"}))
    assert n == 2 and sd == 2.0  # SD of -2, +2 (population SD, as the table's)
    sd_all, n_all = tally.sd_without("qrs_on", frozenset())
    assert n_all == 4 and sd_all == np.std([-2.0, 2.0, 40.0, 60.0])


def test_paced_records_of_both_databases(shared_data) -> None:
    paced = _bench().paced_records(shared_data)
    assert {"sel102", "sel104"} <= paced["qtdb"]  # the MIT-BIH paced records 102 and 104 have QTDB excerpts
    # ludb.csv, column "Cardiac pacing": the ten records with a pacemaker
    assert paced["ludb"] == frozenset({"8", "34", "45", "72", "74", "90", "93", "95", "104", "111"})


def test_split_keeps_detector_tuned_excerpts_out_of_the_untuned_half(tmp_path: Path) -> None:
    bench = _bench()
    qtdb = tmp_path / "qtdb"
    (tmp_path / "ludb" / "data").mkdir(parents=True)
    qtdb.mkdir()
    # sorted: sel101 (even, tuning), sel102 (odd, but paced MIT-BIH 102: tuned), sel103 (even), sel302 (odd, untuned)
    for name in ("sel101", "sel102", "sel103", "sel302"):
        (qtdb / f"{name}.q1c").write_bytes(b"")
    split = bench.split_records(tmp_path)["qtdb"]
    assert split["untuned"] == ["sel302"]
    assert split["tuning"] == ["sel101", "sel102", "sel103"]


def test_global_marks_are_the_median_of_each_beats_group() -> None:
    """Three leads (samples at 500 Hz, gap 50 samples = 100 ms): beat 1 marked at 100, 104, 120 -> median 104; beat 2 at
    600 and 612 (two leads) -> 606; a stray mark at 900 in one lead is a group of one, below the two leads needed."""
    bench = _bench()
    leads = [np.array([100, 600, -1]), np.array([104, 612, 900]), np.array([120, -1, -1])]
    assert bench.global_marks(leads, gap=50, min_leads=2).tolist() == [104.0, 606.0]
    assert bench.global_marks(leads, gap=50, min_leads=3).tolist() == [104.0]
    assert bench.global_marks([np.array([-1]), np.zeros(0, dtype=np.int64)], gap=50, min_leads=1).size == 0


def test_interval_errors_pair_each_start_with_the_next_end_and_subtract_the_mark_errors() -> None:
    bench = _bench()
    ref_on = np.array([100, 600, 1100])
    ref_off = np.array([150, 640, 1400])  # the third end lies 300 samples after its start: too far for a 250-sample interval
    err_on = np.array([2.0, np.nan, 0.0])  # the second onset was not found
    err_off = np.array([-3.0, 1.0, 5.0])
    got = bench.interval_errors(ref_on, ref_off, err_on, err_off, 250)
    assert got[0] == -5.0  # the interval came out 5 ms short: end 3 ms early, start 2 ms late
    assert np.isnan(got[1]) and np.isnan(got[2])


def test_second_reader_scores_qtdbs_second_cardiologist_against_the_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two beats at 250 Hz (4 ms a sample). Cardiologist 1 marks P, QRS and T; cardiologist 2 marks QRS and T only, her
    QRS onsets 2 samples later (+8 ms) and 1 earlier (-4 ms). P is not scored (not counted missed); a record without
    ``.q2c`` is skipped; T offsets farther apart than the tolerance are not found."""
    import wfdb

    bench = _bench()
    scoring = import_benchmark("_delineation_scoring")

    def write(record: str, extension: str, marks: list[tuple[int, str]]) -> None:  # wrann takes letters only: write, then rename
        wfdb.wrann(record, "tmp", np.array([m for m, _ in marks]), symbol=[s for _, s in marks], write_dir=str(tmp_path))
        (tmp_path / f"{record}.tmp").rename(tmp_path / f"{record}.{extension}")

    def beat(r: int, on: int, t_off: int, with_p: bool) -> list[tuple[int, str]]:
        p = [(r - 60, "("), (r - 50, "p"), (r - 40, ")")] if with_p else []
        return p + [(on, "("), (r, "N"), (r + 20, ")"), (r + 60, "("), (r + 80, "t"), (t_off, ")")]

    for record in ("rec1", "rec2"):
        wfdb.wrsamp(record, fs=250, units=["mV"], sig_name=["MLII"], p_signal=np.zeros((2000, 1)), fmt=["16"], write_dir=str(tmp_path))
        write(record, "q1c", beat(500, 490, 600, True) + beat(1000, 990, 1100, True))
    write("rec1", "q2c", beat(500, 492, 601, False) + beat(1000, 989, 1100 + 60, False))
    reader = bench.second_reader(tmp_path, ["rec1", "rec2"], tol_ms=150.0)
    assert set(reader.by_record) == {"rec1"}
    assert reader.errors["qrs_on"] == [8.0, -4.0]
    assert reader.errors["qrs_off"] == [0.0, 0.0]
    assert reader.errors["t_off"] == [4.0]  # the second T offset lies 240 ms off: not found within 150 ms
    assert reader.total["t_off"] == 2 and "p_on" not in reader.total
    assert scoring.Tally is bench.Tally  # one home for the scoring, re-exported by the benchmark
    ours = bench.Tally()
    ours.add("qrs_on", np.array([4.0, -4.0]), "rec1")
    ours.add("qrs_on", np.array([40.0]), "rec2")  # a record without .q2c: not in the comparison
    for point in ("qrs_off", "t_off"):
        ours.add(point, np.array([0.0, 0.0]), "rec1")
    against_second = bench.Tally()
    against_second.add("qrs_on", np.array([3.0, -3.0]), "rec1")
    bench.print_second_reader({"ecgtrace": ours}, reader, bench.SHORT, {"ecgtrace": against_second})
    line, second = capsys.readouterr().out.rstrip().split("\n")
    assert second.endswith("against cardiologist 2's marks instead (best of two leads): ours 3.0, nan, nan")
    assert "on the 1 records with both (rec1)" in line and "P on" not in line
    assert "QRS on 6.0 (2 of 2 marks" in line and "T off 0.0 (1 of 2 marks" in line  # SD of +8, -4: 6 ms
    assert line.rstrip().endswith("ours 4.0, 0.0, 0.0")  # rec2's 40 ms left out
