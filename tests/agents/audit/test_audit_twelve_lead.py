"""12-lead ground truth on real records with expert labels: label maps, per-lead features and the ERB graphs."""

from __future__ import annotations

import numpy as np
import pytest

from ecgtrace.agents.audit._features import window_features
from ecgtrace.agents.audit._labels import record_labels
from ecgtrace.agents.audit.builder import beat_table
from ecgtrace.agents.audit.engine import evaluate
from ecgtrace.tools.records import open_record, read_window


@pytest.fixture(scope="module")
def measured(shared_data, tmp_path_factory):
    """Features and labels of a few records, computed once: {name: (features, beat facts, labels, info)}."""
    cache = tmp_path_factory.mktemp("annotations")
    out = {}
    for name, rel in (("ptbxl_41", "ptbxl/records100/00000/00041_lr"), ("ptbxl_102", "ptbxl/records100/00000/00102_lr"),
                      ("ptbxl_139", "ptbxl/records100/00000/00139_lr"), ("ptbxl_1", "ptbxl/records500/00000/00001_hr"),
                      ("ludb_10", "ludb/data/10"), ("ludb_34", "ludb/data/34"), ("ptbxl_143", "ptbxl/records100/00000/00143_lr")):
        info = open_record(shared_data / rel)
        table, ref = beat_table(info, None, cache)
        wf = window_features(read_window(info, 0.0, info.duration_s), table)
        out[name] = (wf.features, wf.beats, record_labels(shared_data / rel, info, ref), info)
    return out


@pytest.mark.parametrize(("record", "diagnosis"), [("ptbxl_41", "lafb"), ("ptbxl_102", "first_degree_av_block"), ("ptbxl_139", "inferior_mi"),
                                                   ("ludb_10", "rbbb"), ("ludb_34", "third_degree_av_block")])
def test_expert_positive_records_walk_to_yes(measured, graphs, record: str, diagnosis: str) -> None:
    features, _, labels, info = measured[record]
    assert labels.label(graphs[diagnosis], 0.0, info.duration_s) is True  # the expert says yes ...
    assert evaluate(graphs[diagnosis], features, graphs).decision is True  # ... and so does the graph on our measurements


def test_a_paced_record_is_paced_and_no_fascicular_block(measured, graphs) -> None:
    """PTB-XL 143 (SCP PACE, tuned half): its paced QRS has a left axis, qR in I/aVL and rS inferiorly, as LAFB has.

    The spikes seen on the signal make it paced (wide QRS), and the pacing exclusion stops LAFB and LPFB there.
    """
    features, _, labels, info = measured["ptbxl_143"]
    assert labels.label(graphs["paced_rhythm"], 0.0, info.duration_s) is True and labels.label(graphs["lafb"], 0.0, info.duration_s) is False
    assert features["paced_beat_pct"] >= 50.0
    assert evaluate(graphs["paced_rhythm"], features, graphs).decision is True
    for gid in ("lafb", "lpfb"):
        path = evaluate(graphs[gid], features, graphs)
        assert path.path_id == f"{gid}:no_lbbb-/no_paced+=>no", path.path_id


def test_a_record_without_mv_is_paced_from_its_spikes_and_no_bundle_branch_block(measured, graphs) -> None:
    """LUDB 34 (tuned half; ventricular pacing, third-degree AV block): LUDB scales every lead to 1 mV, so the record
    has no mV; its spikes, read against each lead's own size, make it paced, and LBBB and RBBB stop at the pacing."""
    features, _, labels, info = measured["ludb_34"]
    assert features["amplitudes_calibrated"] is False
    assert labels.label(graphs["lbbb"], 0.0, info.duration_s) is False and labels.label(graphs["rbbb"], 0.0, info.duration_s) is False
    assert labels.label(graphs["paced_rhythm"], 0.0, info.duration_s) is True  # 'Unipolar ventricular pacing'
    assert features["paced_beat_pct"] >= 50.0
    assert evaluate(graphs["paced_rhythm"], features, graphs).decision is True
    for gid in ("lbbb", "rbbb"):
        path = evaluate(graphs[gid], features, graphs)
        assert path.path_id == f"{gid}:wide_qrs+/no_paced+=>no", path.path_id


def test_a_normal_record_is_negative_for_every_12_lead_diagnosis(measured, graphs) -> None:
    features, _, labels, info = measured["ptbxl_1"]
    assert "NORM" in labels.scp_positive
    for gid in ("lafb", "lpfb", "rvh", "lbbb", "rbbb", "lvh", "third_degree_av_block", "second_degree_av_block", "inferior_mi", "lateral_mi",
                "inferior_ischemia", "anterior_ischemia", "lateral_ischemia"):
        assert labels.label(graphs[gid], 0.0, info.duration_s) is False, gid
        assert evaluate(graphs[gid], features, graphs).decision is False, gid


def test_regional_codes_and_doubtful_likelihoods(shared_data, graphs) -> None:
    """ASMI maps to anterior MI only; a code with likelihood below 100 is dropped with the code and likelihood as the reason."""
    import ast
    import csv

    rows = {int(float(r["ecg_id"])): ast.literal_eval(r["scp_codes"]) for r in csv.DictReader(open(shared_data / "ptbxl" / "ptbxl_database.csv", encoding="utf-8"))}
    asmi = next(k for k, c in rows.items() if c.get("ASMI") == 100.0 and not set(c) & {"IMI", "ILMI", "LMI", "ALMI", "IPMI", "IPLMI"})
    doubtful = next(k for k, c in rows.items() if 0 < c.get("IMI", 0) < 100 and not set(c) & {"ILMI", "IPMI", "IPLMI", "INJIN", "INJIL"})
    for ecg_id, expect in ((asmi, {"anterior_mi": (True, ""), "inferior_mi": (False, ""), "lateral_mi": (False, "")}),
                           (doubtful, {"inferior_mi": (None, f"scp IMI likelihood {rows[doubtful]['IMI']:g}")})):
        base = shared_data / "ptbxl" / "records100" / f"{ecg_id // 1000 * 1000:05d}" / f"{ecg_id:05d}_lr"
        info = open_record(base)
        labels = record_labels(base, info, None)
        for gid, want in expect.items():
            assert labels.label_reason(graphs[gid], 0.0, 10.0) == want, (ecg_id, gid)


def test_per_lead_features_are_listed_per_beat_and_ludb_amplitudes_are_not_trusted(measured) -> None:
    features, beats, _, _ = measured["ptbxl_41"]
    for name in ("q_dur_ms", "q_amp_mv", "r_peak_time_ms", "s_dur_ms", "t_amp_mv", "r_notched", "rsr_prime", "pathological_q"):
        assert set(features["per_lead"][name]) == set(beats[0]["leads"]), name
    assert all(set(b["leads"]["V5"]) >= {"q_dur_ms", "r_peak_time_ms", "t_amp_mv", "r_notched"} for b in beats)
    assert features["amplitudes_calibrated"] is True and features["qrs_axis_deg"] < -30  # LAFB: marked left axis
    ludb, _, _, info = measured["ludb_10"]
    assert ludb["amplitudes_calibrated"] is False  # every LUDB lead is scaled to exactly 1 mV peak to peak
    assert ludb["qrs_axis_deg"] is None and all(v is None for v in ludb["per_lead"]["st_j_mv"].values())
    assert ludb["qrs_ms"] is not None and any(v is not None for v in ludb["per_lead"]["rsr_prime"].values())  # timing and shape stay
    assert np.isfinite(ludb["hr_bpm"])
