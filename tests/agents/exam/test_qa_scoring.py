"""QA scoring against hand-computed values: ScoreMAE, timestamp F1, ROUGE-L, report statistics."""

from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path

import pytest

from ecgtrace.agents.exam.qa_results import summarize_qa
from ecgtrace.agents.exam.qa_scoring import (
    MAE_REFERENCE,
    match_times,
    parse_number,
    parse_times_ms,
    rouge_l,
    score_answer,
    score_mae,
)
from ecgtrace.agents.exam.report_stats import extract_statistics, label_verdict, score_report

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "qa_small.jsonl"


@pytest.fixture(scope="module")
def items() -> dict[str, dict]:
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]
    return {r["id"]: r for r in rows}


def by_task(items: dict[str, dict], task: str, k: int = 0) -> dict:
    return [r for r in items.values() if r["task"] == task][k]


# ------------------------------------------------------------------ ScoreMAE

def test_score_mae_formula_matches_hand_values() -> None:
    # 100 / (1 + e^((MAE - mu) / sigma)), computed by hand:
    assert score_mae(1.0, 1.0, 0.2) == pytest.approx(50.0)
    assert score_mae(0.0, 1.0, 0.2) == pytest.approx(100 / (1 + 0.006737947), abs=1e-6)  # e^-5
    assert score_mae(1.5, 1.0, 0.2) == pytest.approx(100 / (1 + 12.18249396), abs=1e-6)  # e^2.5
    assert score_mae(1e9, 1.0, 0.2) == 0.0  # no overflow


def test_open_count_items_and_task_score_mae(items: dict[str, dict]) -> None:
    item = by_task(items, "open_count", 0)  # window count, truth 2
    assert item["window"] and item["answer"] == "2"
    rows = []
    for k, reply in enumerate(["2", "There are 3 PVCs.", "In the window from 120000 to 130000 ms there are 4 PVCs"]):
        scored = score_answer(item, reply)
        rows.append({"id": f"x{k}", "task": "open_count", "family": scored["family"], "score": scored["score"], "correct": scored["correct"],
                     "turns": [{"parse_ok": scored["parse_ok"], "error": None, "details": scored["details"]}]})
    assert [r["turns"][0]["details"]["error"] for r in rows] == [0.0, 1.0, 2.0]
    assert rows[0]["correct"] and not rows[1]["correct"]
    assert rows[1]["score"] == pytest.approx(50.0)
    block = summarize_qa(rows)["per_task"]["open_count"]
    mae = block["score_mae"]["count_window"]
    assert mae["mae"] == pytest.approx(1.0)  # (0 + 1 + 2) / 3
    assert mae["score_mae"] == pytest.approx(50.0, abs=1e-4)
    assert block["accuracy"]["k"] == 1 and block["accuracy"]["n"] == 3


def test_record_count_is_relative_and_capped(items: dict[str, dict]) -> None:
    item = by_task(items, "open_count", 1)  # whole record, truth 12
    assert item["window"] is None
    ref = MAE_REFERENCE["count_record"]
    near = score_answer(item, "13")["details"]
    assert near["error"] == pytest.approx(1 / 12, abs=1e-6)
    assert near["score"] == pytest.approx(100 / (1 + math.exp((1 / 12 - ref["mu"]) / ref["sigma"])), abs=1e-3)
    far = score_answer(item, "15")["details"]  # 3/12 = 0.25 > cap 0.1 + 5 * 0.02 = 0.2
    assert far["capped"] and far["error"] == pytest.approx(0.2)
    assert far["score"] == pytest.approx(100 / (1 + math.exp(5.0)), abs=1e-3)  # 0.669
    missing = score_answer(item, "I cannot tell")
    assert not missing["parse_ok"] and missing["details"]["error"] == pytest.approx(0.2)


def test_hr_extremum_time_error_in_seconds(items: dict[str, dict]) -> None:
    item = by_task(items, "open_hr_extremum")  # truth 1203400 ms, tolerance 2000 ms
    scored = score_answer(item, "The maximum heart rate is reached at 1205400 ms.")
    assert scored["details"]["error"] == pytest.approx(2.0)
    assert scored["score"] == pytest.approx(100 / (1 + math.exp(-4.0)), abs=1e-3)  # (2 - 10) / 2 = -4 -> 98.20
    assert scored["correct"]  # within 2000 ms
    assert score_answer(item, "At 00:20:03.400")["details"]["error"] == pytest.approx(0.0)
    assert not score_answer(item, "1205401 ms")["correct"]


# ------------------------------------------------------------------ parsing

@pytest.mark.parametrize("text, value", [
    ("3", 3), ("There are 3 PVCs.", 3), ("In the window from 120000 to 130000 ms there are 3 PVCs", 3),
    ("Answer: 2", 2), ('{"answer": 4}', 4), ("three", 3), ("No, there are 2 of them.", 2), ("none", 0),
    ("<think>maybe 7</think> 5", 5), ("1,234 beats", 1234), ("I cannot tell.", None), (None, None),
])
def test_parse_number(text, value) -> None:  # noqa: ANN001
    assert parse_number(text) == value


@pytest.mark.parametrize("text, times", [
    ("121200 ms, 125400 ms", [121200, 125400]), ("at 121.2 s and 125.4 s", [121200, 125400]),
    ("00:20:03.400", [1203400]), ("none", []), ("1203400", [1203400]), ("2 min", [120000]),
    ("The 2 PVCs begin at 121200 ms and 125400 ms", [121200, 125400]),
])
def test_parse_times_ms(text, times) -> None:  # noqa: ANN001
    assert parse_times_ms(text) == pytest.approx(times)


# ------------------------------------------------------------------ timestamp F1

def test_timestamp_f1_hand_example() -> None:
    # pred 1000 matches 1050 (50 ms); 1100 has no truth left; 5000 vs 5200 is 200 ms > 150; 9000 matches 8990.
    out = match_times([1000, 1100, 5000, 9000], [1050, 5200, 8990], 150)
    assert (out["tp"], out["fp"], out["fn"]) == (2, 2, 1)
    assert out["precision"] == pytest.approx(0.5)
    assert out["recall"] == pytest.approx(2 / 3, abs=1e-6)
    assert out["f1"] == pytest.approx(4 / 7, abs=1e-6)  # 2*2 / (2*2 + 2 + 1)
    assert match_times([], [], 150)["f1"] == 1.0
    assert match_times([5], [], 150)["f1"] == 0.0
    # duplicates match one truth only
    assert match_times([1000, 1000, 1000], [1000], 150)["tp"] == 1


def test_timestamp_matching_is_maximum() -> None:
    """The two-pointer greedy gets as many matches as an optimal assignment (scipy)."""
    from scipy.optimize import linear_sum_assignment

    rng = random.Random(3)
    for _ in range(300):
        pred = [rng.randrange(0, 3000) for _ in range(rng.randrange(0, 8))]
        true = [rng.randrange(0, 3000) for _ in range(rng.randrange(0, 8))]
        tol = rng.choice([50, 150, 400])
        best = 0
        if pred and true:
            cost = [[-1 if abs(p - t) <= tol else 0 for t in true] for p in pred]
            rows, cols = linear_sum_assignment(cost)
            best = -sum(cost[r][c] for r, c in zip(rows, cols))
        assert match_times(pred, true, tol)["tp"] == best


def test_open_timing_item(items: dict[str, dict]) -> None:
    item = by_task(items, "open_timing")  # truth 121200, 125400; tolerance 150
    half = score_answer(item, "121300 ms, 126000 ms")
    assert half["details"]["tp"] == 1 and half["score"] == pytest.approx(50.0)
    assert score_answer(item, "121.25 s and 125.35 s")["correct"]


# ------------------------------------------------------------------ ROUGE-L

def _lcs(a: list[str], b: list[str]) -> int:
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, j in itertools.product(range(len(a)), range(len(b))):
        table[i + 1][j + 1] = table[i][j] + 1 if a[i] == b[j] else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


def test_rouge_l_matches_hand_computation() -> None:
    # LCS("the cat sat on the mat", "the cat lay on the mat") = "the cat on the mat" = 5 of 6 tokens each way.
    assert rouge_l("the cat lay on the mat", "the cat sat on the mat")["f1"] == pytest.approx(5 / 6, abs=1e-6)
    # LCS = alpha charlie echo: P = 3/4, R = 3/5, F = 2PR/(P+R) = 2/3
    out = rouge_l("alpha charlie echo xray", "alpha bravo charlie delta echo")
    assert (out["precision"], out["recall"], out["f1"]) == pytest.approx((0.75, 0.6, 2 / 3), abs=1e-6)
    for pred, ref in [("wide qrs with no preceding p wave", "the ectopic beats have a wide qrs with no preceding p wave"),
                      ("irregular rr intervals", "regular rr intervals")]:
        a, b = pred.split(), ref.split()
        lcs = _lcs(a, b)
        p, r = lcs / len(a), lcs / len(b)
        assert rouge_l(pred, ref)["f1"] == pytest.approx(2 * p * r / (p + r), abs=1e-6)


def test_open_evidence_scored_by_rouge(items: dict[str, dict]) -> None:
    item = by_task(items, "open_evidence")
    assert score_answer(item, item["answer"])["score"] == pytest.approx(100.0)
    partial = score_answer(item, "A premature ventricular contraction: wide QRS with no preceding P wave.")
    assert 0 < partial["score"] < 60 and partial["correct"] is None


# ------------------------------------------------------------------ reports

@pytest.mark.parametrize("text, expected", [
    ("mean HR 72 bpm", {"mean_hr_bpm": 72}),
    ("PVCs: 123 (0.5%)", {"pvc_total": 123, "pvc_pct": 0.5}),
    ("max heart rate of 131 bpm at 14:02:03", {"max_hr_bpm": 131, "max_hr_t_ms": 50_523_000}),
    ("The average heart rate was 68 bpm; heart rate ranged from 45 to 140 bpm.", {"mean_hr_bpm": 68, "min_hr_bpm": 45, "max_hr_bpm": 140}),
    ("HR < 60 bpm: 10.1%; HR > 100 bpm: 3.2%", {"pct_time_hr_lt_60": 10.1, "pct_time_hr_gt_100": 3.2}),
    ("Total of 100,234 beats over a 24-hour recording. Two couplets. PVC burden 1.2%",
     {"total_beats": 100234, "duration_s": 86400, "couplets": 2, "pvc_pct": 1.2}),
    ("There were 2 runs of VT and 1 run of SVT, no pauses.", {"runs": 3, "pauses": 0}),
    ("123 premature atrial contractions (0.12%) and 4 episodes of ventricular bigeminy", {"pac_total": 123, "pac_pct": 0.12, "bigeminy_episodes": 4}),
    ('{"mean_hr_bpm": 70, "pvc_total": "12 beats"}', {"mean_hr_bpm": 70, "pvc_total": 12}),
])
def test_extract_statistics_formats(text: str, expected: dict) -> None:
    got = extract_statistics(text)
    for key, value in expected.items():
        assert got.get(key) == pytest.approx(value), (key, got)


def test_summary_prose_reads_back_every_statistic(items: dict[str, dict]) -> None:
    """The reference summary prose and the reference JSON describe the same record: every field reads back."""
    truth = json.loads(by_task(items, "report_statistics")["answer"])
    got = extract_statistics(by_task(items, "report_summary")["answer"])
    for key, value in truth.items():
        if key == "rhythm":
            assert got["rhythm"] == value
        else:
            assert got[key] == pytest.approx(value), key
    assert got["max_hr_t_ms"] == 1203400 and got["min_hr_t_ms"] == 402100


def test_report_scoring_tolerances_and_hallucinations(items: dict[str, dict]) -> None:
    item = by_task(items, "report_summary")
    text = ("30 minutes recorded, 2300 beats. Rhythm: sinus rhythm with atrial flutter and first-degree AV block. "
            "Mean heart rate 85 bpm, maximum 135 bpm, minimum 50 bpm. PVCs: 58 (2.51%). 3 runs of ventricular tachycardia. "
            "No pauses.")
    out = score_report(item, text)
    fields = out["fields"]
    assert fields["total_beats"]["status"] == "correct"   # |2300 - 2310| = 10 <= max(10, 2%)
    assert fields["mean_hr_bpm"]["status"] == "wrong"     # |85 - 77| = 8 > max(5, 7.7)
    assert fields["max_hr_bpm"]["status"] == "correct"    # |135 - 131| = 4
    assert fields["min_hr_bpm"]["status"] == "correct"    # |50 - 48| = 2
    assert fields["pvc_total"]["status"] == "correct" and fields["pvc_pct"]["status"] == "correct"
    assert fields["runs"]["status"] == "wrong"            # 3 vs 2, exact below 10
    assert fields["pauses"]["status"] == "wrong"          # "no pauses" = 0 vs 1
    assert fields["pac_total"]["status"] == "missing"
    assert fields["rhythm"]["status"] == "wrong"          # flutter instead of AF
    assert "atrial_flutter" in out["hallucinations"] and "pause" not in out["claimed"]
    assert out["field_accuracy"] == pytest.approx(out["n_correct"] / out["n_fields"], abs=1e-6)


def test_oracle_answers_score_perfectly(items: dict[str, dict]) -> None:
    for item in items.values():
        scored = score_answer(item, item["answer"])
        assert scored["score"] >= 99.3, (item["id"], scored)
        assert scored["correct"] in (True, None), item["id"]
        if item["task"].startswith("report_"):
            assert scored["details"]["field_accuracy"] == 1.0 and not scored["details"]["hallucinations"]


def test_server_error_scores_zero(items: dict[str, dict]) -> None:
    for item in items.values():
        scored = score_answer(item, None, error="timeout")
        assert scored["correct"] in (False, None) and scored["score"] < 1.0, item["id"]


@pytest.mark.parametrize("text, label, ok", [
    ("This shows ventricular bigeminy with alternating PVCs", "ventricular bigeminy", True),
    ("No atrial fibrillation; this is a PVC.", "premature ventricular contraction", True),
    ("Atrial fibrillation with a PVC", "premature ventricular contraction", False),
    ("Normal sinus rhythm", "normal sinus rhythm", True),
    ("Sinus rhythm with a premature ventricular contraction", "normal sinus rhythm", False),
    ("A sinus pause of 2.4 s", "sinus pause", True),
])
def test_open_diagnosis_label(text: str, label: str, ok: bool) -> None:
    assert label_verdict(text, label)["correct"] is ok


def test_compare_qa_pairs_items_with_mcnemar() -> None:
    from ecgtrace.agents.exam.qa_results import compare_qa

    def rows(pattern: str) -> list[dict]:
        return [{"id": f"i{k}", "task": "closed_count" if k < 10 else "open_count", "correct": c == "1"} for k, c in enumerate(pattern)]

    out = compare_qa(rows("11111111110000000000"), rows("00000000001111111111") + [{"id": "x", "task": "t", "correct": True}])
    overall = out["tests"]["overall"]
    assert out["shared_samples"] == 20 and out["only_b"] == 1
    assert (overall["b"], overall["c"], overall["method"]) == (10, 10, "exact") and overall["p_value"] == 1.0
    closed = out["tests"]["task:closed_count"]
    assert (closed["b"], closed["c"]) == (10, 0)
    assert closed["p_value"] == pytest.approx(2 * 0.5 ** 10, abs=1e-6)  # exact two-sided binomial, 10 discordant pairs


def test_llm_style_report_is_read_and_negations_are_not_claims() -> None:
    from ecgtrace.agents.exam.report_stats import claimed_findings

    text = """Holter Monitoring Report
Duration: 24 hours 0 minutes
Total beats: 98,765
Heart rate: minimum 45 bpm (03:12:45), average 72 bpm, maximum 148 bpm (14:02:03)
Tachycardia (>100 bpm): 5.2% of the time
Bradycardia (<60 bpm): 12.3% of time
Supraventricular ectopy: 234 SVEs (0.24%)
Ventricular ectopy: 1,205 PVCs (1.22%), 3 couplets, 0 VT runs, 2 SVT runs, 2 episodes of bigeminy, no trigeminy
Pauses: none > 2.0 s
Rhythm: Sinus rhythm. No atrial fibrillation detected."""
    got = extract_statistics(text)
    assert got == {"duration_s": 86400.0, "total_beats": 98765.0, "min_hr_bpm": 45.0, "mean_hr_bpm": 72.0, "max_hr_bpm": 148.0,
                   "pct_time_hr_gt_100": 5.2, "pct_time_hr_lt_60": 12.3, "pac_total": 234.0, "pac_pct": 0.24, "pvc_total": 1205.0,
                   "pvc_pct": 1.22, "couplets": 3.0, "runs": 2.0, "bigeminy_episodes": 2.0, "trigeminy_episodes": 0.0, "pauses": 0.0,
                   "rhythm": "Sinus rhythm"}
    assert claimed_findings(text, got) == {"pac", "pvc", "couplet", "svt", "bigeminy"}  # not VT (0 runs), AF (negated), pauses (none)
    prose = "Sinus rhythm throughout. HR averaged 68 bpm (range 41-139 bpm). 15 isolated PVCs and 3 PACs. No pauses, couplets or runs were seen."
    assert extract_statistics(prose) == {"mean_hr_bpm": 68.0, "min_hr_bpm": 41.0, "max_hr_bpm": 139.0, "pvc_total": 15.0, "pac_total": 3.0,
                                         "pauses": 0.0, "couplets": 0.0, "runs": 0.0}
