"""Doubt rules from the label sources' own definitions and measurement tolerances (issue 13): dropped with a reason, counted."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from ecgtrace.agents.audit._labels import RecordLabels, ludb_reference_pr_ms, record_labels
from ecgtrace.agents.audit._ludb_reference import ludb_lead_pr_ms
from ecgtrace.rubrics.diagnosis_schema import load_diagnoses
from ecgtrace.tools.records import open_record

REPO = Path(__file__).resolve().parents[3]


def _ludb(lines: list[str], pr_ms: float | None) -> RecordLabels:
    return RecordLabels(kind="ludb", method="ludb.csv", fs_hz=500.0, n_samples=5000, ludb_lines=lines, ludb_pr_ms=pr_ms)


def test_lead_pr_runs_from_p_onset_to_the_next_qrs_onset() -> None:
    """Hand-built marks at 500 Hz: P onsets 100 and 600, QRS onsets 200 and 710 -> PR 200 and 220 ms; a QRS without P is skipped."""
    samples = np.array([100, 120, 140, 200, 210, 240, 300, 350, 400, 600, 620, 640, 710, 720, 750, 1100, 1110, 1150])
    symbols = ["(", "p", ")", "(", "N", ")", "(", "t", ")", "(", "p", ")", "(", "N", ")", "(", "N", ")"]
    assert ludb_lead_pr_ms(samples, symbols, 500.0) == pytest.approx([200.0, 220.0])
    assert ludb_lead_pr_ms(samples[:3], symbols[:3], 500.0) == []  # a P wave and no QRS


def test_ludb_reference_pr_is_the_median_over_leads_of_each_leads_median(shared_data) -> None:
    """LUDB 102 ("Sinus rhythm", no AV block): 201 ms, read by an independent pass over its 12 wave files while designing the band."""
    base = shared_data / "ludb" / "data" / "102"
    assert ludb_reference_pr_ms(base, 500.0) == pytest.approx(201.0, abs=0.5)
    assert ludb_reference_pr_ms(shared_data / "ludb" / "data" / "no_such_record", 500.0) is None
    labels = record_labels(base, open_record(base), None)
    label, why = labels.label_reason(load_diagnoses()["first_degree_av_block"], 0.0, 10.0)
    assert label is None and why.startswith("ludb pr tolerance (statement no): 201 ms")


@pytest.mark.parametrize(("lines", "pr_ms", "want"), [
    (["Sinus rhythm", "I degree av block"], 195.0, None),  # inside 200 +- 12 ms (CSE P-onset and QRS-onset tolerances)
    (["Sinus rhythm"], 205.0, None),
    (["Sinus rhythm"], 187.0, False),  # outside the band the statement stands, either way
    (["Sinus rhythm", "I degree av block"], 186.5, True),
    (["Sinus rhythm"], 213.0, False),
    (["Sinus rhythm", "I degree av block"], None, True),  # no marks: the statement stands
])
def test_ludb_av_block_within_the_marks_tolerance_of_200_ms_is_ambiguous(graphs, lines, pr_ms, want) -> None:
    label, why = _ludb(lines, pr_ms).label_reason(graphs["first_degree_av_block"], 0.0, 10.0)
    assert label is want
    assert why.startswith("ludb pr tolerance") is (want is None)


def test_a_rhythm_named_beside_ectopic_beats_does_not_settle_a_regular_sinus_window(graphs) -> None:
    brady, tachy = graphs["sinus_bradycardia"], graphs["sinus_tachycardia"]
    ptbxl = {"kind": "ptbxl", "method": "test", "fs_hz": 100.0, "n_samples": 1000}
    label, why = RecordLabels(scp_positive={"SBRAD", "SARRH"}, **ptbxl).label_reason(brady, 0.0, 10.0)  # as PTB-XL 284
    assert label is None and why.startswith("positive beside ptbxl SARRH:")
    assert RecordLabels(scp_positive={"SBRAD"}, **ptbxl).label(brady, 0.0, 10.0) is True
    assert RecordLabels(scp_positive={"SR", "PAC"}, **ptbxl).label(tachy, 0.0, 10.0) is False  # negatives are not touched
    cinc = {"kind": "cinc", "method": "test", "fs_hz": 500.0, "n_samples": 5000}
    label, why = RecordLabels(snomed={"426177001", "284470004"}, **cinc).label_reason(brady, 0.0, 10.0)  # as CinC JS20014
    assert label is None and why.startswith("positive beside cinc 284470004:")
    ludb = {"kind": "ludb", "method": "test", "fs_hz": 500.0, "n_samples": 5000, "ludb_rate_bpm": 48.0}
    assert RecordLabels(ludb_lines=["Sinus bradycardia", "Atrial extrasystole: single"], **ludb).label(brady, 0.0, 10.0) is None
    assert RecordLabels(ludb_lines=["Sinus bradycardia"], **ludb).label(brady, 0.0, 10.0) is True


def test_the_benchmark_names_the_rule_behind_every_label_doubt_drop() -> None:
    spec = importlib.util.spec_from_file_location("audit_items_bench", REPO / "benchmarks" / "audit_items.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.doubt_rule("label_ambiguous:ludb pr tolerance (statement yes): 195 ms by LUDB's marks") == "ludb pr tolerance (statement yes)"
    assert bench.doubt_rule("label_ambiguous:scp LVH likelihood 50") == "scp LVH likelihood < 100"
    assert bench.doubt_rule("label_ambiguous:positive beside ptbxl SARRH: rhythm named beside") == "positive beside ptbxl SARRH"
    assert bench.doubt_rule("noise") is None and bench.doubt_rule("label_disagrees:expert_yes") is None



def test_a_ludb_pr_band_must_be_ordered() -> None:
    from pydantic import ValidationError

    from ecgtrace.rubrics.diagnosis_schema import LabelMap

    assert LabelMap(ludb_pr_doubtful_ms=(188, 212)).ludb_pr_doubtful_ms == (188, 212)
    with pytest.raises(ValidationError, match="ludb_pr_doubtful_ms"):
        LabelMap(ludb_pr_doubtful_ms=(212, 188))


def test_lvh_left_out_beside_lbbb_pacing_or_lafb_is_no_negative(graphs) -> None:
    lvh = graphs["lvh"]
    ptbxl = {"kind": "ptbxl", "method": "test", "fs_hz": 100.0, "n_samples": 1000}
    for code in ("CLBBB", "PACE", "LAFB"):
        label, why = RecordLabels(scp_positive={"SR", code}, **ptbxl).label_reason(lvh, 0.0, 10.0)
        assert label is None and why.startswith(f"absent beside ptbxl {code}:"), code
    assert RecordLabels(scp_positive={"SR", "CRBBB"}, **ptbxl).label(lvh, 0.0, 10.0) is False
    assert RecordLabels(scp_positive={"LVH", "CLBBB"}, **ptbxl).label(lvh, 0.0, 10.0) is True  # a positive beside them stands
    cinc = {"kind": "cinc", "method": "test", "fs_hz": 500.0, "n_samples": 5000}
    assert RecordLabels(snomed={"426783006", "10370003"}, **cinc).label(lvh, 0.0, 10.0) is None
    ludb = {"kind": "ludb", "method": "test", "fs_hz": 500.0, "n_samples": 5000}
    assert RecordLabels(ludb_lines=["Sinus rhythm", "Unipolar ventricular pacing"], **ludb).label(lvh, 0.0, 10.0) is None
    assert RecordLabels(ludb_lines=["Sinus rhythm"], **ludb).label(lvh, 0.0, 10.0) is False
