"""Diagnosis logic graphs: loading, precise validation errors and ground-truth paths.

The expected paths live in ``tests/fixtures/diagnoses/paths/<graph>.yaml``: one
hand-built feature set per branch, with the path a clinician would walk on it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from ecgtrace.agents.audit.engine import MissingFeature, NotApplicable, evaluate, evaluate_predicate, grounding_leads
from ecgtrace.errors import RubricError
from ecgtrace.rubrics.diagnosis_schema import FEATURES, GroundingRule, load_diagnoses, load_diagnosis, validate_diagnosis_file
from ecgtrace.rubrics.loading import builtin_dir

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "diagnoses"
PATH_FILES = sorted((FIXTURES / "paths").glob("*.yaml"))
AMBULATORY = {"pvc", "pac", "af", "vt", "svt", "ventricular_bigeminy", "ventricular_trigeminy", "sinus_bradycardia", "sinus_tachycardia",
              "sinus_pause", "first_degree_av_block", "second_degree_av_block", "lbbb_beats", "rbbb_beats", "paced_rhythm"}
TWELVE_LEAD = {"lbbb", "rbbb", "lvh", "left_axis_deviation", "right_axis_deviation", "st_elevation", "st_depression"}


def _cases() -> list[tuple[str, dict]]:
    out = []
    for path in PATH_FILES:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
        for case in spec["cases"]:
            out.append((spec["graph"], case))
    return out


CASES = _cases()


@pytest.fixture(scope="module")
def graphs():
    return load_diagnoses()


def test_builtin_graphs_cover_both_sets_and_validate(graphs) -> None:
    assert AMBULATORY | TWELVE_LEAD <= set(graphs)
    for path in sorted(builtin_dir("diagnoses").glob("*.yaml")):
        assert validate_diagnosis_file(path) == [], path


def test_every_threshold_has_a_unit_and_a_known_feature(graphs) -> None:
    def leaves(node):
        for key in ("all", "any"):
            if key in node:
                for child in node[key]:
                    yield from leaves(child)
                return
        if "not" in node:
            yield from leaves(node["not"])
            return
        yield node

    for graph in graphs.values():
        for crit in graph.criteria.values():
            assert len(crit.distractors) >= 4 and crit.text not in crit.distractors
            for leaf in leaves(crit.finding):
                assert leaf["feature"] in FEATURES
                assert isinstance(leaf["value"], bool) or leaf.get("unit")


@pytest.mark.parametrize(("graph_id", "case"), CASES, ids=[f"{g}:{c['name']}" for g, c in CASES])
def test_graph_takes_the_expected_path(graphs, graph_id: str, case: dict) -> None:
    path = evaluate(graphs[graph_id], case["features"])
    walked = [f"{s.criterion}{'+' if s.present else '-'}" for s in path.steps]
    assert walked == case["path"]
    assert path.decision is case["decision"]
    assert path.path_id == f"{graph_id}:{'/'.join(case['path'])}=>{'yes' if case['decision'] else 'no'}"


def test_fixtures_exercise_every_branch_of_every_graph(graphs) -> None:
    """Each criterion of each graph is seen present and absent in some fixture case."""
    seen: dict[str, set[str]] = {gid: set() for gid in graphs}
    for graph_id, case in CASES:
        seen[graph_id].update(case["path"])
    for gid, graph in graphs.items():
        wanted = {f"{cid}{sign}" for cid in graph.criteria for sign in "+-"}
        assert wanted <= seen[gid], f"{gid}: no fixture case for {sorted(wanted - seen[gid])}"


@pytest.mark.parametrize(
    ("name", "line", "field", "reason"),
    [
        ("unreachable", 13, "criteria.orphan", "unreachable node"),
        ("missing_branch", 6, "criteria.first", "missing branch if_absent"),
        ("no_unit", 12, "criteria.first.finding.all.1.value", "threshold 200 has no unit (feature pr_ms is in ms)"),
        ("unknown_feature", 9, "criteria.first.finding.feature", "unknown feature 'pr_interval_ms'"),
        ("cycle", 13, "criteria.second", "cycle: first -> second -> first"),
        ("wrong_unit", 9, "criteria.first.finding.unit", "unit 'mV' does not fit feature qrs_ms"),
        ("unknown_target", 11, "criteria.first.if_present", "unknown node 'diagnosis'"),
        ("lead_feature_without_lead", 9, "criteria.first.finding.feature", "measured per lead"),
        ("three_distractors", 10, "criteria.first.distractors", "at least 4"),
        ("distractor_repeats_variant", 13, "criteria.first.distractors.1", "a distractor repeats a wording of the criterion (text or variants): 'Fast heart rate'"),
        ("distractor_not_text", 13, "criteria.first.distractors.2", "a distractor is a text or a non-empty list of alternative wordings"),
        ("negated_repeats_question", 9, "criteria.first.negated_questions.1", "a negated question repeats a question 'Is the rate fast?'"),
    ],
)
def test_malformed_graphs_give_precise_errors(name: str, line: int, field: str, reason: str) -> None:
    path = FIXTURES / "bad" / f"{name}.yaml"
    problems = validate_diagnosis_file(path)
    assert problems, name
    assert problems[0].startswith(f"{path}:{line}: {field}: ")
    assert reason in problems[0]
    with pytest.raises(RubricError) as err:
        load_diagnosis(path)
    assert str(err.value) == problems[0]


def test_every_criterion_can_be_asked_without_a_text_shortcut(graphs) -> None:
    """Wordings allow the correct option at every length rank (0..4 longer options), and Yes/No can be balanced."""
    from ecgtrace.agents.audit._surface import criterion_choices

    for graph in graphs.values():
        for cid, crit in graph.criteria.items():
            assert sorted(criterion_choices(crit)) == [0, 1, 2, 3, 4], f"{graph.id}.{cid}"
            assert crit.negated_questions and not set(crit.negated_questions) & set(crit.questions), f"{graph.id}.{cid}"


def test_id_must_match_file_name(tmp_path: Path) -> None:
    target = tmp_path / "renamed.yaml"
    shutil.copy(FIXTURES / "new_diagnosis.yaml", target)
    assert validate_diagnosis_file(target) == [f"{target}:2: id: id 'new_diagnosis' must match the file name 'renamed'"]


def test_a_new_diagnosis_is_only_a_yaml_file(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "new_diagnosis.yaml", tmp_path / "new_diagnosis.yaml")
    shutil.copy(builtin_dir("diagnoses") / "af.yaml", tmp_path / "af.yaml")
    graphs = load_diagnoses(tmp_path)
    assert sorted(graphs) == ["af", "new_diagnosis"]
    assert evaluate(graphs["new_diagnosis"], {"hr_bpm": 180.0}).decision is True
    assert evaluate(graphs["new_diagnosis"], {"hr_bpm": 150.0}).decision is False


def test_units_are_converted_not_ignored() -> None:
    in_s = {"feature": "max_rr_ms", "op": ">", "value": 2, "unit": "s"}
    assert evaluate_predicate(in_s, {"max_rr_ms": 2100.0}) is True
    assert evaluate_predicate(in_s, {"max_rr_ms": 1900.0}) is False
    in_uv = {"feature": "st_j60_mv", "lead": "V5", "op": "<", "value": -70, "unit": "uV"}
    assert evaluate_predicate(in_uv, {"per_lead": {"st_j60_mv": {"V5": -0.08}}}) is True
    assert evaluate_predicate(in_uv, {"per_lead": {"st_j60_mv": {"V5": -0.06}}}) is False
    cornell = {"feature": "cornell_product_mvs", "op": ">", "value": 2440, "unit": "mm*ms"}
    assert evaluate_predicate(cornell, {"cornell_product_mvs": 0.25}) is True
    assert evaluate_predicate(cornell, {"cornell_product_mvs": 0.24}) is False


def test_missing_values_raise_instead_of_guessing(graphs) -> None:
    with pytest.raises(MissingFeature) as err:
        evaluate(graphs["first_degree_av_block"], {"p_wave_present_pct": 95.0, "pr_ms": None})
    assert err.value.feature == "pr_ms"
    with pytest.raises(MissingFeature):
        evaluate(graphs["lbbb_beats"], {"qrs_ms": 150.0, "per_lead": {"qrs_net_mv": {"MLII": 1.0}}})


def test_per_lead_quantifiers_and_lead_grounding() -> None:
    feats = {"per_lead": {"st_j60_mv": {"I": 0.12, "II": 0.02, "V2": 0.2, "aVR": None}}}
    two = {"feature": "st_j60_mv", "leads": "all", "min_leads": 2, "op": ">", "value": 0.1, "unit": "mV"}
    three = dict(two, min_leads=3)
    every = {"feature": "st_j60_mv", "leads": ["I", "V2"], "quantifier": "all", "op": ">", "value": 0.1, "unit": "mV"}
    assert evaluate_predicate(two, feats) is True
    assert evaluate_predicate(three, feats) is False
    assert evaluate_predicate(every, feats) is True
    rule = GroundingRule(kind="lead", questions=["Where?"], feature="st_j60_mv", op=">", value=0.1, unit="mV")
    assert grounding_leads(rule, feats) == ["I", "V2"]


def test_lead_rule_thresholds_need_a_placeholder(tmp_path: Path) -> None:
    text = (builtin_dir("diagnoses") / "pac.yaml").read_text(encoding="utf-8")
    assert "{value} mV tall?" in text
    target = tmp_path / "pac.yaml"
    target.write_text(text.replace("at least {value} mV tall?", "at least 0.12 mV tall?"), encoding="utf-8")
    problems = validate_diagnosis_file(target)
    assert problems and "need '{value}' in every question text" in problems[0], problems


def test_every_wording_is_recognised_when_answered_verbatim(graphs) -> None:
    """The oracle answers with the option text: no wording may lose characters in the answer parser (e.g. 'mV*s')."""
    from ecgtrace.agents.exam.parsing import parse_answer
    from ecgtrace.rubrics.diagnosis_schema import distractor_wordings

    for graph in graphs.values():
        for cid, crit in graph.criteria.items():
            answers = [crit.text, *crit.variants]
            wordings = [w for e in crit.distractors for w in distractor_wordings(e)]
            for answer in answers:
                options = [answer, *[w for w in wordings if w != answer][:4]]
                for option in options:
                    parsed = parse_answer(option, options, False)
                    assert parsed.ok and parsed.value == option, (graph.id, cid, option, parsed.reason)


def test_a_finding_can_name_another_diagnosis(graphs, tmp_path: Path) -> None:
    """ERB's fascicular blocks start with 'LBBB present -> No': the lbbb graph is walked on the same features."""
    lbbb = {"qrs_ms": 160, "paced_beat_pct": 0, "qrs_axis_deg": -60, "per_lead": {"qrs_net_mv": {"V1": -1.2, "V2": -1.5}, "monophasic_r": {"I": True, "aVL": True, "V6": True},
                                                           "r_notched": {"V6": True}}}
    path = evaluate(graphs["lafb"], lbbb, graphs)
    assert path.path_id == "lafb:no_lbbb+=>no" and path.steps[0].values == {"lbbb@decision": True}
    # the referenced graph must exist in the same folder
    text = (builtin_dir("diagnoses") / "lafb.yaml").read_text(encoding="utf-8")
    (tmp_path / "lafb.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(RubricError, match="names unknown diagnosis 'lbbb'"):
        load_diagnoses(tmp_path)
    shutil.copy(builtin_dir("diagnoses") / "lbbb.yaml", tmp_path / "lbbb.yaml")
    with pytest.raises(RubricError, match="names unknown diagnosis 'paced_rhythm'"):  # the pacing exclusion names a second graph
        load_diagnoses(tmp_path)
    shutil.copy(builtin_dir("diagnoses") / "paced_rhythm.yaml", tmp_path / "paced_rhythm.yaml")
    assert sorted(load_diagnoses(tmp_path)) == ["lafb", "lbbb", "paced_rhythm"]
    bad = text.replace("diagnosis: lbbb, op", "diagnosis: lbbb, unit: mV, op")
    (tmp_path / "lafb.yaml").write_text(bad, encoding="utf-8")
    assert "has only feature, diagnosis, op and value" in validate_diagnosis_file(tmp_path / "lafb.yaml")[0]


ST_GRAPHS = ("anterior_ischemia", "inferior_ischemia", "lateral_ischemia", "anterior_mi", "inferior_mi", "lateral_mi", "st_elevation", "st_depression")


@pytest.mark.parametrize("graph_id", ST_GRAPHS)
def test_st_graphs_do_not_apply_beside_lbbb_or_pacing(graphs, graph_id: str) -> None:
    """ST elevation of 0.3 mV and ST depression of 0.2 mV in every lead, Q waves and inverted T everywhere: the graph
    says Yes on a narrow unpaced window, is not applicable beside complete LBBB or a paced rhythm, and cannot tell
    without the QRS width the LBBB graph asks first."""
    leads = ("I", "II", "III", "aVR", "aVL", "aVF", "V1", "V2", "V3", "V4", "V5", "V6")
    level = 0.3 if graph_id.endswith("_mi") or graph_id == "st_elevation" else -0.2
    waves = {"st_j_mv": dict.fromkeys(leads, level), "st_j60_mv": dict.fromkeys(leads, level), "t_amp_mv": dict.fromkeys(leads, -0.3),
             "pathological_q": dict.fromkeys(leads, True)}
    narrow = {"qrs_ms": 90, "paced_beat_pct": 0, "per_lead": waves}
    assert graphs[graph_id].requires.not_with == ["lbbb", "paced_rhythm"]
    assert evaluate(graphs[graph_id], narrow, graphs).decision is True
    lbbb = {"qrs_ms": 160, "paced_beat_pct": 0, "per_lead": {**waves, "qrs_net_mv": {"V1": -1.2, "V2": -1.6},
                                                             "monophasic_r": {"I": True, "aVL": True, "V6": True}, "r_notched": {"V5": True}}}
    with pytest.raises(NotApplicable) as exc:
        evaluate(graphs[graph_id], lbbb, graphs)
    assert exc.value.reason == "not_applicable:beside_lbbb"
    with pytest.raises(NotApplicable) as exc:
        evaluate(graphs[graph_id], {**lbbb, "paced_beat_pct": 90}, graphs)  # paced: LBBB itself stops at the pacing
    assert exc.value.reason == "not_applicable:beside_paced_rhythm"
    with pytest.raises(MissingFeature):
        evaluate(graphs[graph_id], {"paced_beat_pct": 0, "per_lead": waves}, graphs)


def test_not_with_must_name_a_graph_of_the_folder(graphs, tmp_path: Path) -> None:
    for name in ("st_elevation", "lbbb", "paced_rhythm"):
        shutil.copy(builtin_dir("diagnoses") / f"{name}.yaml", tmp_path / f"{name}.yaml")
    assert sorted(load_diagnoses(tmp_path)) == ["lbbb", "paced_rhythm", "st_elevation"]
    (tmp_path / "lbbb.yaml").unlink()  # nothing else names lbbb: only st_elevation's requires.not_with does
    with pytest.raises(RubricError, match=r"requires\.not_with\.0: names unknown diagnosis 'lbbb'"):
        load_diagnoses(tmp_path)


def test_composites_decide_without_a_missing_value_when_they_can() -> None:
    """all() is False as soon as one child is; any() True as soon as one is; otherwise a missing value is missing."""
    low = {"feature": "hr_bpm", "op": "<", "value": 60, "unit": "bpm"}
    missing = {"feature": "pr_ms", "op": ">", "value": 200, "unit": "ms"}
    assert evaluate_predicate({"all": [low, missing]}, {"hr_bpm": 80.0}) is False
    assert evaluate_predicate({"any": [missing, low]}, {"hr_bpm": 50.0}) is True
    with pytest.raises(MissingFeature):
        evaluate_predicate({"all": [low, missing]}, {"hr_bpm": 50.0})
    with pytest.raises(MissingFeature):
        evaluate_predicate({"any": [low, missing]}, {"hr_bpm": 80.0})


def test_every_erb_diagnosis_has_a_graph_with_expert_labels(graphs) -> None:
    """The 17 ERB diagnoses, each mapped to PTB-XL codes (regional codes included) and CinC or LUDB labels."""
    erb = {"first_degree_av_block": ["1AVB"], "second_degree_av_block": ["2AVB"], "third_degree_av_block": ["3AVB"], "pac": ["PAC"], "pvc": ["PVC"],
           "lbbb": ["CLBBB"], "rbbb": ["CRBBB"], "lafb": ["LAFB"], "lpfb": ["LPFB"], "lvh": ["LVH"], "rvh": ["RVH"],
           "anterior_mi": ["ASMI", "AMI", "ALMI"], "inferior_mi": ["IMI", "ILMI"], "lateral_mi": ["LMI", "ALMI", "ILMI"],
           "anterior_ischemia": ["ISCAS", "ISCAL", "ISCAN"], "inferior_ischemia": ["ISCIN", "ISCIL"], "lateral_ischemia": ["ISCLA", "ISCAL", "ISCIL"]}
    for gid, codes in erb.items():
        labels = graphs[gid].labels
        assert set(codes) <= set(labels.scp), gid
        assert labels.snomed or labels.ludb, gid
    assert "ISC_" in graphs["anterior_ischemia"].labels.scp_ambiguous  # region-free ischemia never counts as a regional negative
