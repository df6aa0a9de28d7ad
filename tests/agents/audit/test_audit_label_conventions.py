"""Label maps whose source uses another cut-off than the graph: dropped with a reason, never guessed (issue 13)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from pydantic import ValidationError

from ecgtrace.agents.audit._labels import RecordLabels, ludb_reference_rate_bpm, record_labels
from ecgtrace.rubrics.diagnosis_schema import LabelMap
from ecgtrace.tools.records import open_record

REPO = Path(__file__).resolve().parents[3]


def _ludb(lines: list[str], rate_bpm: float | None) -> RecordLabels:
    return RecordLabels(kind="ludb", method="ludb.csv", fs_hz=500.0, n_samples=5000, ludb_lines=lines, ludb_rate_bpm=rate_bpm)


@pytest.mark.parametrize(("lines", "rate", "want"), [
    (["Sinus rhythm"], 57.7, None),  # LUDB calls 55-60 bpm sinus rhythm; the graph's cut-off is 60
    (["Sinus rhythm"], 66.0, False),
    (["Sinus bradycardia"], 47.5, True),
    (["Sinus rhythm"], None, False),  # no QRS marks: the statement stands
])
def test_ludb_bradycardia_between_the_two_cut_offs_is_ambiguous(graphs, lines, rate, want) -> None:
    label, why = _ludb(lines, rate).label_reason(graphs["sinus_bradycardia"], 0.0, 10.0)
    assert label is want
    assert ("ludb rate convention" in why) is (want is None)


@pytest.mark.parametrize(("lines", "rate", "want"), [
    (["Sinus tachycardia"], 90.4, None),  # LUDB record 70: "sinus tachycardia" at 90 bpm is no tachycardia above 100 bpm
    (["Sinus tachycardia"], 112.0, True),
    (["Sinus rhythm"], 75.0, False),
])
def test_ludb_tachycardia_between_the_two_cut_offs_is_ambiguous(graphs, lines, rate, want) -> None:
    assert _ludb(lines, rate).label(graphs["sinus_tachycardia"], 0.0, 10.0) is want


def test_ludb_left_axis_deviation_is_ambiguous_and_its_other_axes_stay_negatives(graphs) -> None:
    lad = graphs["left_axis_deviation"]
    record = _ludb(["Sinus rhythm", "Electric axis of the heart: left axis deviation"], 70.0)
    assert record.mapped(lad)
    assert record.label_reason(lad, 0.0, 10.0) == (None, "ludb 'left axis deviation' (related statement)")
    for axis in ("normal", "horizontal", "vertical"):
        assert _ludb(["Sinus rhythm", f"Electric axis of the heart: {axis}"], 70.0).label(lad, 0.0, 10.0) is False, axis


def test_ptbxl_without_sbrad_is_no_bradycardia_negative(graphs) -> None:
    brady = graphs["sinus_bradycardia"]
    base = {"kind": "ptbxl", "method": "test", "fs_hz": 100.0, "n_samples": 1000}
    label, why = RecordLabels(scp_positive={"NORM", "SR"}, **base).label_reason(brady, 0.0, 10.0)
    assert label is None and why.startswith("scp SBRAD absent: PTB-XL gives SBRAD only well below 60 bpm")
    assert RecordLabels(scp_positive={"SBRAD"}, **base).label(brady, 0.0, 10.0) is True
    assert RecordLabels(scp_positive={"NORM", "SR"}, **base).label(graphs["sinus_tachycardia"], 0.0, 10.0) is False  # STACH absence still counts


def test_a_rate_band_must_be_ordered() -> None:
    assert LabelMap(ludb_rate_doubtful_bpm=(90, 100)).ludb_rate_doubtful_bpm == (90, 100)
    for bad in ((100, 90), (0, 60), (60, 60)):
        with pytest.raises(ValidationError):
            LabelMap(ludb_rate_doubtful_bpm=bad)


def test_ludb_rate_comes_from_ludbs_own_qrs_marks(shared_data, graphs) -> None:
    """LUDB 70 has 13 QRS marks in lead II with a mean RR of 664 ms (90.4 bpm), and LUDB calls it sinus tachycardia."""
    base = shared_data / "ludb" / "data" / "70"
    assert ludb_reference_rate_bpm(base, 500.0) == pytest.approx(90.36, abs=0.05)
    labels = record_labels(base, open_record(base), None)
    assert labels.ludb_rate_bpm == pytest.approx(90.36, abs=0.05)
    label, why = labels.label_reason(graphs["sinus_tachycardia"], 0.0, 10.0)
    assert label is None and "90.4 bpm by LUDB's QRS marks" in why
    assert ludb_reference_rate_bpm(shared_data / "ludb" / "data" / "no_such_record", 500.0) is None


def test_records_inspected_to_find_a_bug_count_as_tuned() -> None:
    spec = importlib.util.spec_from_file_location("audit_items_bench", REPO / "benchmarks" / "audit_items.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.half_of("ludb", Path("ludb/data/70")) == "tuned"  # in the untuned half by number, but inspected
    assert bench.half_of("ludb", Path("ludb/data/71")) == "untuned"
    assert bench.half_of("ludb", Path("ludb/data/12")) == "tuned"
    assert bench.half_of("ptbxl", Path("records100/00000/00279_lr")) == "tuned"
    assert bench.half_of("ptbxl", Path("records100/00000/00280_lr")) == "untuned"
    assert bench.half_of("ptbxl", Path("records500/00000/00266_hr")) == "tuned"
    assert bench.half_of("cinc2021_12lead", Path("JS20006")) == "tuned"
    assert bench.half_of("cinc2021_12lead", Path("JS20002")) == "untuned"


def test_ptbxl_lad_does_not_settle_minus_30_degrees(graphs) -> None:
    lad = graphs["left_axis_deviation"]
    base = {"kind": "ptbxl", "method": "test", "fs_hz": 100.0, "n_samples": 1000, "scp_positive": {"SR"}}
    assert RecordLabels(axis="ALAD", **base).label(lad, 0.0, 10.0) is True
    assert RecordLabels(axis="LAD", **base).label_reason(lad, 0.0, 10.0) == (None, "ptbxl heart_axis LAD does not settle the threshold")
    assert RecordLabels(axis="MID", **base).label(lad, 0.0, 10.0) is False
