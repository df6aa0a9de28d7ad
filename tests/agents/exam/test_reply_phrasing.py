"""Scoring reads what people write: our own sentences of every phrasing the issue names, against hand-computed values."""

from __future__ import annotations

import pytest

from ecgtrace.agents.exam.findings_text import label_verdict, named_labels
from ecgtrace.agents.exam.parsing import parse_answer
from ecgtrace.agents.exam.qa_scoring import score_answer
from ecgtrace.agents.exam.report_stats import extract_statistics, score_report
from ecgtrace.agents.exam.reply_values import parse_duration_ms, parse_number, parse_times_ms


def _item(task: str, answer: str, answer_type: str, options: list[str] | None = None, **extra) -> dict:
    params = {"tolerance_ms": extra.pop("tolerance_ms", 150), **extra.pop("params", {})}
    return {"id": f"t-{task}", "task": task, "question": "Q?", "options": options, "answer": answer, "answer_type": answer_type,
            "window": extra.pop("window", {"t0_s": 0.0, "t1_s": 30.0}), "provenance": {"source": "computed", "method": "test", "version": "1",
                                                                               "params": params}, **extra}


# ------------------------------------------------------------------ times

@pytest.mark.parametrize("text, times", [
    ("The onset timestamps are: 1028324, 17179240, 17215495 ms.", [1028324, 17179240, 17215495]),
    ("PVCs start at 5120, 9340 and 12875 ms from the recording start.", [5120, 9340, 12875]),
    ("Onsets: 1.5, 3.25, 7 s", [1500, 3250, 7000]),
    ("They begin at 64000; 65200; 71800 ms", [64000, 65200, 71800]),
    ("at 121200 ms and 125400 ms", [121200, 125400]),
    ("The 2 PVCs begin at 121200 ms and 125400 ms", [121200, 125400]),
    ("1,028,324 ms", [1028324]),  # a thousands separator is no list
    ("at 2 s and 500 ms", [2000, 500]),  # two times, not one of 2.5 s
])
def test_several_timestamps_with_one_unit_at_the_end(text: str, times: list[float]) -> None:
    assert parse_times_ms(text) == pytest.approx(times)


@pytest.mark.parametrize("text, ms", [
    ("22 hours 39 minutes", (22 * 60 + 39) * 60_000),
    ("1 h 5 min", 65 * 60_000),
    ("2 min and 30 s", 150_000),
    ("1 hour, 5 minutes", 65 * 60_000),
    ("13:24:05", ((13 * 60 + 24) * 60 + 5) * 1000),
    ("at 03:12", (3 * 60 + 12) * 60_000),
    ("24 hours 0 minutes", 24 * 3_600_000),
    ("1 s 500 ms", 1500),
])
def test_durations_in_parts_and_clock_times(text: str, ms: float) -> None:
    assert parse_duration_ms(text) == pytest.approx(ms)


def test_a_ratio_is_no_clock_time() -> None:
    assert parse_times_ms("2:1 AV block at 1200 ms") == [1200]
    assert parse_times_ms("No 2:1 AV Block is detected in this segment.") == []  # a ratio, no two bare times
    assert parse_times_ms("2:1 AV block at 1200") == [1200]


# ------------------------------------------------------------------ numbers

@pytest.mark.parametrize("text, value", [
    ("138,156 heartbeats", 138156), ("A total of 1 episode of Premature Ventricular Contraction is detected in this segment.", 1),
    ("In this 30-second strip there are 3 PVCs.", 3), ("2:1 AV block: 3 episodes", 3), ("a 3rd-degree block is seen 2 times", 2),
    ("A total of 12 episodes of 2:1 AV Block are detected.", 12), ("No episode of sinus pause is detected in this segment.", 0),
    ("A total of 1,204 episodes of PVC are detected", 1204),
])
def test_counts_in_sentences(text: str, value: float) -> None:
    assert parse_number(text) == value


# ------------------------------------------------------------------ reports

@pytest.mark.parametrize("text, expected", [
    ("The maximum recorded heart rate was 135 bpm.", {"max_hr_bpm": 135}),
    ("The fastest recorded rate was 191 bpm.", {"max_hr_bpm": 191}),
    ("minimum HR 41 bpm at 03:12", {"min_hr_bpm": 41, "min_hr_t_ms": 11_520_000}),
    ("The slowest recorded rate was 38 bpm, reached at 8201000 ms.", {"min_hr_bpm": 38, "min_hr_t_ms": 8_201_000}),
    ("The mean heart rate over the whole recording was 72 bpm.", {"mean_hr_bpm": 72}),
    ("The recording lasted 22 hours 39 minutes and contains 138,156 heartbeats.", {"duration_s": 81540, "total_beats": 138156}),
    ("22 hours 39 minutes of recording were analysed.", {"duration_s": 81540}),
    ("Total recording time: 13:24:05.", {"duration_s": 48245}),
    ("Heart rate exceeded 100 bpm for 8.5% of the time and was under 60 bpm for 4.1% of the time.",
     {"pct_time_hr_gt_100": 8.5, "pct_time_hr_lt_60": 4.1}),
    ("PVC breakdown: 1,180 single, 10 paired, 1 in runs, 2 bigeminy and 0 trigeminy episodes.",
     {"pvc_single": 1180, "couplets": 10, "pvc_runs": 1, "bigeminy_episodes": 2, "trigeminy_episodes": 0}),
    ("PAC breakdown: 200 single, 12 paired, 3 in runs, 1 bigeminy and 0 trigeminy episodes, with 2 non-conducted PACs.",
     {"pac_single": 200, "pac_pairs": 12, "pac_runs": 3, "pac_bigeminy": 1, "pac_trigeminy": 0, "pac_nonconducted": 2}),
])
def test_report_phrasings(text: str, expected: dict) -> None:
    got = extract_statistics(text)
    for key, value in expected.items():
        assert got.get(key) == pytest.approx(value), (key, got)


def test_a_breakdown_clause_gives_no_totals() -> None:
    """"2 in runs" of a PVC breakdown is never the total of runs; the totals come from their own sentence."""
    text = ("Ventricular ectopy: 58 PVCs (2.5% of all beats). PVC breakdown: 40 single, 1 paired, 2 in runs, 1 bigeminy and 1 trigeminy episodes. "
            "1 ventricular couplets, 3 runs (VT or SVT), 1 episodes of bigeminy, 1 of trigeminy and 0 pauses longer than 2 s.")
    got = extract_statistics(text)
    assert got["runs"] == 3 and got["pvc_runs"] == 2 and got["pvc_single"] == 40 and got["pvc_total"] == 58


def test_a_json_report_truth_has_no_breakdown_to_hallucinate() -> None:
    truth = {"pac_total": 3, "pvc_total": 5, "pauses": 0, "runs": 0, "couplets": 0, "bigeminy_episodes": 0, "trigeminy_episodes": 0,
             "rhythm": "sinus rhythm"}
    item = _item("report_statistics", __import__("json").dumps(truth), "report_json", window=None)
    out = score_report(item, "Rhythm: sinus rhythm. 3 PACs, 5 PVCs, with 2 non-conducted PACs. No pauses, couplets or runs. "
                             "0 episodes of bigeminy, 0 of trigeminy.")
    assert out["field_accuracy"] == 1.0 and out["hallucinations"] == []


# ------------------------------------------------------------------ closed answers

@pytest.mark.parametrize("reply", ["D", "D. 1", "The answer is D. 1", "Answer: D. 1", "(D) 1", "**D. 1**", "D is correct.", "1"])
def test_letter_letter_plus_text_and_sentence_answers(reply: str) -> None:
    item = _item("closed_count", "1", "integer", ["2", "0", "3", "1"])
    assert score_answer(item, reply)["correct"], reply


def test_a_letter_whose_text_names_another_option_is_not_read() -> None:
    item = _item("closed_count", "1", "integer", ["2", "0", "3", "1"])
    scored = score_answer(item, "D. 3")
    assert not scored["parse_ok"] and "contradicts" in scored["parse_reason"]


def test_letter_with_the_option_values_in_other_words() -> None:
    options = ["1028324 ms, 1037180 ms", "1027724 ms, 1036580 ms", "1029124 ms, 1037980 ms", "1028324 ms"]
    assert parse_answer("A. 1028324, 1037180 ms", options).value == options[0]
    assert parse_answer("The answer is A. 1028324 and 1037180 ms.", options).value == options[0]
    assert parse_answer("A. 1028324 ms", options).value is None  # the values of option D, not A


@pytest.mark.parametrize("reply, want", [
    ("Yes, the rhythm pattern supports the presence of Premature Atrial Contraction.", True),
    ("No, the rhythm pattern does not support the presence of Premature Atrial Contraction.", False),
    ("Yes and no.", None),
])
def test_yes_no_sentences_to_a_question_without_options(reply: str, want: bool | None) -> None:
    item = _item("closed_presence", "Yes", "yes_no")
    scored = score_answer(item, reply)
    assert scored["correct"] is (want is True) and scored["parse_ok"] is (want is not None)


# ------------------------------------------------------------------ diagnosis labels

@pytest.mark.parametrize("synonym", ["PVC", "PVCs", "ventricular premature beat", "premature ventricular contraction", "VPBs",
                                     "premature ventricular complexes", "ventricular extrasystoles"])
def test_pvc_synonyms(synonym: str) -> None:
    assert named_labels(f"The strip shows {synonym}.") == ["pvc"]


def test_a_longer_mention_wins() -> None:
    assert named_labels("polymorphic ventricular tachycardia") == ["polymorphic_vt"]
    assert named_labels("non-conducted premature atrial contractions") == ["blocked_pac"]
    assert named_labels("paired premature atrial contractions") == ["s_couplet"]
    assert named_labels("second-degree AV block, Mobitz II") == ["avb2_mobitz2"]
    assert named_labels("Mobitz I (Wenckebach)") == ["avb2_mobitz1"]


def test_multi_label_precision_recall_and_exact_set() -> None:
    truth = "premature atrial contraction; premature ventricular contraction"
    exact = label_verdict("The arrhythmias present in this ECG strip are PVCs and atrial premature beats.", truth)
    assert exact["correct"] and (exact["precision"], exact["recall"], exact["f1"]) == (1.0, 1.0, 1.0)
    half = label_verdict("Only a ventricular premature beat is seen; no PAC.", truth)  # PAC negated
    assert not half["correct"] and (half["tp"], half["fp"], half["fn"]) == (1, 0, 1)
    assert (half["precision"], half["recall"]) == (1.0, 0.5) and half["f1"] == pytest.approx(2 / 3, abs=1e-6)
    extra = label_verdict("PVCs, PACs and atrial fibrillation.", truth)
    assert not extra["correct"] and (extra["tp"], extra["fp"], extra["fn"]) == (2, 1, 0) and extra["precision"] == pytest.approx(2 / 3, abs=1e-6)
    couplet = label_verdict("A ventricular couplet: two PVCs in a row.", "ventricular couplet")
    assert couplet["correct"]  # the PVCs of a couplet neither count nor cost


def test_open_diagnosis_scores_the_set_f1() -> None:
    item = _item("open_diagnosis", "premature atrial contraction; premature ventricular contraction", "label")
    assert score_answer(item, "PVC and PAC")["score"] == 100.0
    scored = score_answer(item, "premature ventricular contraction")
    assert scored["correct"] is False and scored["score"] == pytest.approx(100 * 2 / 3, abs=1e-3)
