"""Doubtful ground truth: a window whose path hinges on one measurement within its tolerance of a threshold."""

from __future__ import annotations

import math

import pytest

from ecgtrace.agents.audit._doubt import find_doubt
from ecgtrace.agents.audit.engine import evaluate
from ecgtrace.rubrics.diagnosis_features import CSE_TOLERANCE_MS, FEATURES, feature_tolerance, interval_sd_ms
from ecgtrace.rubrics.diagnosis_schema import load_diagnoses

LATERAL = ("I", "aVL", "V5", "V6")


@pytest.fixture(scope="module")
def graphs():
    return load_diagnoses()


def lvh_features(*, cornell: float = 0.10, st_j: dict[str, float] | None = None, t_amp: dict[str, float] | None = None) -> dict:
    """A window far from every LVH threshold except what a test sets: R(aVL) 0.5 mV, Sokolow 2.0 mV."""
    return {
        "sokolow_mv": 2.0,
        "cornell_product_mvs": cornell,
        "per_lead": {
            "r_amp_mv": {"I": 0.6, "aVL": 0.5, "V5": 1.4, "V6": 1.2},
            "st_j_mv": {lead: 0.0 for lead in LATERAL} | (st_j or {}),
            "t_amp_mv": {lead: 0.3 for lead in LATERAL} | (t_amp or {}),
        },
    }


def test_tolerances_follow_their_stated_sources() -> None:
    # one SD of an interval = the CSE limits (2 SD) of its two marks, halved and added in quadrature
    assert interval_sd_ms("qrs_on", "qrs_off") == pytest.approx(math.hypot(6.5 / 2, 11.6 / 2))
    assert FEATURES["qrs_ms"].tolerance == pytest.approx(6.6485, abs=1e-3)
    assert FEATURES["pr_ms"].tolerance == pytest.approx(math.hypot(CSE_TOLERANCE_MS["p_on"] / 2, CSE_TOLERANCE_MS["qrs_on"] / 2))
    assert feature_tolerance("st_j_mv", 0.1) == pytest.approx(0.025)  # the absolute floor beats 5 % of 0.1 mV
    assert feature_tolerance("r_amp_mv", 1.1) == pytest.approx(0.055)  # 5 % of 1.1 mV beats the floor
    assert feature_tolerance("cornell_product_mvs", 0.244) == pytest.approx(0.01952)
    assert feature_tolerance("v_beat_count", 1) == 0.0  # counts are read exactly from the beat table


def test_a_cornell_product_just_under_its_threshold_is_doubtful(graphs) -> None:
    features = lvh_features(cornell=0.2434)  # PTB-XL 173's value: 0.6 mV*ms under 0.244 mV*s
    assert evaluate(graphs["lvh"], features, graphs).decision is False
    doubt = find_doubt(graphs["lvh"], features, graphs)
    assert doubt is not None
    assert (doubt.criterion, doubt.feature, doubt.lead) == ("cornell", "cornell_product_mvs", None)
    assert doubt.measured == pytest.approx(0.2434) and doubt.threshold == pytest.approx(0.244)
    assert doubt.reason == "measurement_doubtful:cornell:cornell_product_mvs"


def test_values_outside_their_tolerance_are_not_doubtful(graphs) -> None:
    assert find_doubt(graphs["lvh"], lvh_features(cornell=0.244 - 0.0196), graphs) is None
    assert find_doubt(graphs["lvh"], lvh_features(cornell=0.244 + 0.0196), graphs) is None
    assert find_doubt(graphs["lvh"], lvh_features(cornell=0.244 + 0.0190), graphs) is not None


def test_a_near_value_the_graph_never_asks_about_is_not_doubt(graphs) -> None:
    # Cornell 0.1 ends the path before the strain criterion: its near-threshold ST level in V5 decides nothing
    assert find_doubt(graphs["lvh"], lvh_features(st_j={"V5": -0.06}, t_amp={"V5": -0.3}), graphs) is None


def test_a_lead_value_decides_only_when_no_other_lead_settles_the_finding(graphs) -> None:
    # exactly one voltage criterion (Cornell 0.30) sends the path to strain, where V5's ST level of -0.06 mV is
    # 0.01 mV past its -0.05 mV threshold
    alone = lvh_features(cornell=0.30, st_j={"V5": -0.06}, t_amp={"V5": -0.3})
    assert evaluate(graphs["lvh"], alone, graphs).decision is True
    doubt = find_doubt(graphs["lvh"], alone, graphs)
    assert doubt is not None and (doubt.criterion, doubt.feature, doubt.lead) == ("strain", "st_j_mv", "V5")
    # V6 shows strain clearly as well: V5 no longer decides anything
    settled = lvh_features(cornell=0.30, st_j={"V5": -0.06, "V6": -0.2}, t_amp={"V5": -0.3, "V6": -0.3})
    assert find_doubt(graphs["lvh"], settled, graphs) is None
    # without T inversion the strain finding is absent whatever V5's ST level is
    no_t = lvh_features(cornell=0.30, st_j={"V5": -0.06})
    assert find_doubt(graphs["lvh"], no_t, graphs) is None


def lafb_features(qrs_ms: float) -> dict:
    """LAFB's own criteria clearly met; LBBB's met except a QRS duration the test sets."""
    leads = ("I", "II", "III", "aVR", "aVL", "aVF", "V1", "V2", "V3", "V4", "V5", "V6")
    return {
        "qrs_ms": qrs_ms, "qrs_axis_deg": -55.0, "paced_beat_pct": 0.0,
        "per_lead": {
            "qr_pattern": {lead: lead in ("I", "aVL") for lead in leads},
            "rs_pattern": {lead: lead in ("II", "III", "aVF") for lead in leads},
            "qrs_net_mv": {lead: -0.8 if lead in ("V1", "V2") else 0.6 for lead in leads},
            "monophasic_r": {lead: lead in ("I", "aVL", "V6") for lead in leads},
            "r_notched": {lead: lead in ("I", "aVL", "V5", "V6") for lead in leads},
        },
    }


def test_a_doubt_inside_a_graph_another_graph_consults_counts(graphs) -> None:
    # LAFB asks LBBB first; a QRS of 118 ms (LBBB's 120 ms threshold within 6.6 ms) decides LBBB, hence LAFB
    near = lafb_features(118.0)
    assert evaluate(graphs["lafb"], near, graphs).decision is True
    doubt = find_doubt(graphs["lafb"], near, graphs)
    assert doubt is not None and (doubt.criterion, doubt.feature) == ("no_lbbb", "qrs_ms")  # where LAFB's path parts
    assert find_doubt(graphs["lafb"], lafb_features(100.0), graphs) is None


def test_find_doubt_never_changes_the_features(graphs) -> None:
    features = lvh_features(cornell=0.30, st_j={"V5": -0.06}, t_amp={"V5": -0.3})
    before = repr(features)
    find_doubt(graphs["lvh"], features, graphs)
    assert repr(features) == before


def test_the_builder_drops_a_doubtful_window_before_reading_its_label_and_counts_it_apart(shared_data, graphs, tmp_path) -> None:
    from ecgtrace.agents.audit.builder import build_record

    # PTB-XL 173 (LVH by a human-validated SCP code): R(aVL) and Sokolow under their cut-offs, a Cornell product of
    # about 0.2434 mV*s against 0.244 and no strain; by ERB's rule no LVH, within 0.6 mV*ms of yes
    built = build_record(shared_data / "ptbxl" / "records100" / "00000" / "00173_lr", graphs=graphs, diagnoses=["lvh"], cache_dir=tmp_path)
    assert built.drops["lvh"] == {"measurement_doubtful:cornell_after_one:cornell_product_mvs": 1}
    assert built.agreement["lvh"]["checked"] == 0  # not a disagreement, not an agreement
    assert built.agreement["lvh"]["doubtful_expert_yes"] == 1 and built.agreement["lvh"]["doubtful_expert_yes_agreed"] == 0
    assert not built.items and not built.disagreements
