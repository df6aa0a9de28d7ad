"""A clipped lead gives no per-lead feature, says so, and has no say in the window's other leads: they are measured as
in the same window without that lead."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ecgtrace.agents.audit._features import window_features
from ecgtrace.agents.audit._features_leads import unavailable_because
from ecgtrace.agents.audit.builder import beat_table
from ecgtrace.tools.records import open_record, read_window


@pytest.fixture(scope="module")
def clean_and_cut(shared_data, tmp_path_factory):
    """PTB-XL 1 (500 Hz, NORM) as recorded, with lead V5 cut at 60 % of its R wave, as a saturating amplifier would, and
    as recorded without V5 (the window the cut one must match in every other lead: the cross-lead rules, the J point
    and the P-wave vote leave a clipped lead out)."""
    info = open_record(shared_data / "ptbxl" / "records500" / "00000" / "00001_hr")
    table, _ = beat_table(info, None, tmp_path_factory.mktemp("annotations"))
    window = read_window(info, 0.0, info.duration_s)
    v5 = window.leads.index("V5")
    signal = window.signal_mv.copy()
    limit = 0.6 * float(np.max(signal[:, v5]))
    signal[:, v5] = np.minimum(signal[:, v5], limit)
    cut = dataclasses.replace(window, signal_mv=signal)
    without_v5 = read_window(info, 0.0, info.duration_s, [lead for lead in window.leads if lead != "V5"])
    return window_features(window, table).features, window_features(cut, table).features, window_features(without_v5, table).features


def test_the_cut_lead_is_named_and_gives_nothing(clean_and_cut) -> None:
    clean, cut, _ = clean_and_cut
    assert not any(clean["per_lead"]["lead_clipped"].values())
    assert [lead for lead, v in cut["per_lead"]["lead_clipped"].items() if v] == ["V5"]
    assert clean["per_lead"]["r_amp_mv"]["V5"] is not None and clean["per_lead"]["qrs_ms"]["V5"] is not None
    for name, values in cut["per_lead"].items():
        if name != "lead_clipped":
            assert values.get("V5") is None, name


def test_the_other_leads_are_measured_as_without_the_cut_lead(clean_and_cut) -> None:
    clean, cut, without_v5 = clean_and_cut
    for name in ("r_amp_mv", "qrs_depth_mv", "t_amp_mv", "st_j60_mv", "qrs_ms", "pr_ms"):
        assert set(without_v5["per_lead"][name]) == set(clean["per_lead"][name]) - {"V5"}
        for lead, value in without_v5["per_lead"][name].items():
            assert cut["per_lead"][name][lead] == value, (name, lead)
    # Sokolow-Lyon takes max(R(V5), R(V6)): without V5 it is S(V1) + R(V6); features are
    # rounded to 0.1 µV, so the sum of two rounded amplitudes may differ by one unit from the rounded sum
    s_v1, r_v6 = without_v5["per_lead"]["qrs_depth_mv"]["V1"], without_v5["per_lead"]["r_amp_mv"]["V6"]
    assert cut["sokolow_mv"] == pytest.approx(s_v1 + r_v6, abs=1.5e-4)


def test_a_drop_on_the_cut_lead_says_why(clean_and_cut) -> None:
    clean, cut, _ = clean_and_cut
    assert unavailable_because(cut, "V5") == ":lead_clipped"
    assert unavailable_because(cut, "V1,V5") == ":lead_clipped"
    assert unavailable_because(cut, "V6") == "" and unavailable_because(clean, "V5") == ""
    assert unavailable_because({"amplitudes_calibrated": False, "per_lead": {}}, "V5") == ":amplitudes_not_calibrated"
