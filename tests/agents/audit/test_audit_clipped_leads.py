"""A clipped lead gives no per-lead feature, says so, and the window's other leads are measured as before."""

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
    """PTB-XL 1 (500 Hz, NORM) as recorded, and with lead V5 cut at 60 % of its R wave, as a saturating amplifier would."""
    info = open_record(shared_data / "ptbxl" / "records500" / "00000" / "00001_hr")
    table, _ = beat_table(info, None, tmp_path_factory.mktemp("annotations"))
    window = read_window(info, 0.0, info.duration_s)
    v5 = window.leads.index("V5")
    signal = window.signal_mv.copy()
    limit = 0.6 * float(np.max(signal[:, v5]))
    signal[:, v5] = np.minimum(signal[:, v5], limit)
    cut = dataclasses.replace(window, signal_mv=signal)
    return window_features(window, table).features, window_features(cut, table).features


def test_the_cut_lead_is_named_and_gives_nothing(clean_and_cut) -> None:
    clean, cut = clean_and_cut
    assert not any(clean["per_lead"]["lead_clipped"].values())
    assert [lead for lead, v in cut["per_lead"]["lead_clipped"].items() if v] == ["V5"]
    assert clean["per_lead"]["r_amp_mv"]["V5"] is not None and clean["per_lead"]["qrs_ms"]["V5"] is not None
    for name, values in cut["per_lead"].items():
        if name != "lead_clipped":
            assert values.get("V5") is None, name


def test_the_other_leads_are_untouched(clean_and_cut) -> None:
    clean, cut = clean_and_cut
    for name in ("r_amp_mv", "qrs_depth_mv", "t_amp_mv", "st_j60_mv"):
        for lead, value in clean["per_lead"][name].items():
            if lead != "V5":
                assert cut["per_lead"][name][lead] == value, (name, lead)
    # Sokolow-Lyon takes max(R(V5), R(V6)): without V5 it is S(V1) + R(V6)
    s_v1, r_v6 = clean["per_lead"]["qrs_depth_mv"]["V1"], clean["per_lead"]["r_amp_mv"]["V6"]
    assert cut["sokolow_mv"] == pytest.approx(s_v1 + r_v6)


def test_a_drop_on_the_cut_lead_says_why(clean_and_cut) -> None:
    clean, cut = clean_and_cut
    assert unavailable_because(cut, "V5") == ":lead_clipped"
    assert unavailable_because(cut, "V1,V5") == ":lead_clipped"
    assert unavailable_because(cut, "V6") == "" and unavailable_because(clean, "V5") == ""
    assert unavailable_because({"amplitudes_calibrated": False, "per_lead": {}}, "V5") == ":amplitudes_not_calibrated"
