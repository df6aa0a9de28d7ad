"""Holtercare-Bench files in and out: ``ecgtrace import holtercare``, ``ecgtrace export holtercare`` and its gold answers scored.

The fixture ``tests/fixtures/holtercare/test_items.json`` holds items written in Holtercare's published shapes
(``../shared/formats/HOLTERCARE.md``), plus seven malformed ones whose rejection reasons are known by construction.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ecgtrace.cli import main

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "holtercare" / "test_items.json"
#: file index -> rejection code, by construction of the fixture
REJECTED = {15: "answer", 16: "answer", 17: "options", 18: "answer", 19: "unknown_task", 20: "malformed", 21: "malformed"}


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture()
def imported(tmp_path: Path, capsys) -> tuple[Path, list[dict], str]:  # noqa: ANN001
    out = tmp_path / "ds"
    assert main(["import", "holtercare", str(FIXTURE), "--out", str(out)]) == 0
    return out, _rows(out / "qa.jsonl"), capsys.readouterr().out


def test_import_keeps_file_order_case_ids_splits_and_says_there_is_no_signal(imported) -> None:  # noqa: ANN001
    out, items, line = imported
    source = json.loads(FIXTURE.read_text())
    kept = [i for i in range(len(source)) if i not in REJECTED]
    assert "imported 15 Holtercare-Bench items of 3 cases" in line and "7 rejected" in line
    assert [it["provenance"]["params"]["index"] for it in items] == kept  # file order
    assert len({it["id"] for it in items}) == len(items)  # unique ids though the case id repeats
    for it, index in zip(items, kept):
        row, params = source[index], it["provenance"]["params"]
        assert it["provenance"]["source"] == "holtercare" and params["case_id"] == row["id"]
        assert params["question_text"] == row["qa_pair"]["question"] and params["answer_text"] == row["qa_pair"]["answer"]
        assert it["split"] == row["tag"] and params["task_type"] == row["task_type"]
        assert it["record"] is None and it["modalities"]["text"] is None and it["modalities"]["image"] == []
        assert params["signal"].startswith("none")


def test_import_splits_inline_options_and_normalises_letter_answers(imported) -> None:  # noqa: ANN001
    _, items, _ = imported
    by_index = {it["provenance"]["params"]["index"]: it for it in items}
    count = by_index[2]
    assert count["task"] == "closed_count" and count["options"] == ["2", "0", "3", "1"] and count["answer"] == "1"
    assert count["question"].endswith("between 1020000 ms and 1050000 ms?") and "A. 2" not in count["question"]
    timing = by_index[3]
    assert timing["options"][0] == "1028324, 1037180 ms" and timing["answer"] == "1028324, 1037180 ms"
    presence = by_index[0]
    assert (presence["options"], presence["answer"], presence["finding"]) == (["No", "Yes"], "Yes", "pvc")
    free_presence = by_index[1]  # a presence question without options, answered by a sentence
    assert free_presence["options"] is None and free_presence["answer"] == "Yes" and free_presence["finding"] == "pac"
    negative = by_index[6]
    assert negative["task"] == "closed_diagnosis" and negative["answer"] == "Third-degree AV Block" and len(negative["options"]) == 3
    assert {it["task"] for it in items} >= {"closed_presence", "closed_count", "closed_timing", "closed_hr_extremum", "closed_diagnosis",
                                             "open_count", "open_timing", "open_hr_extremum", "open_diagnosis", "open_evidence",
                                             "report_summary", "report_statistics"}


def test_malformed_items_are_rejected_with_reasons(imported) -> None:  # noqa: ANN001
    out, _, _ = imported
    rejected = _rows(out / "rejected.jsonl")
    assert {r["index"]: r["code"] for r in rejected} == REJECTED
    reasons = {r["index"]: r["reason"] for r in rejected}
    assert "letter D is option '1'" in reasons[15] and "Glorbic Rhythm" in reasons[18] and "holter_trivia" in reasons[19]


def test_bad_files_are_one_line_errors(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["import", "holtercare", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "Traceback" not in err
    assert main(["import", "holtercare", str(tmp_path / "missing.json"), "--out", str(tmp_path / "o2")]) == 2
    assert capsys.readouterr().err.startswith("error:")


def test_gold_answers_fed_back_score_100_on_every_task(imported, tmp_path: Path) -> None:  # noqa: ANN001
    """Holtercare's own answer text, fed back as the reply through ``qa-eval --answers``, scores 100 % (99.33 is ScoreMAE's ceiling)."""
    out, items, _ = imported
    source = json.loads(FIXTURE.read_text())
    gold = tmp_path / "gold.json"
    gold.write_text(json.dumps([row for i, row in enumerate(source) if i not in REJECTED]))
    run = tmp_path / "run"
    assert main(["qa-eval", str(out), "--answers", str(gold), "--run", str(run), "--quiet"]) == 0
    results = json.loads((run / "results.json").read_text())
    assert results["n_finished"] == len(items) and results["overall"]["closed_accuracy"]["value"] == 1.0
    assert set(results["per_task"]) == {it["task"] for it in items}
    for task, block in results["per_task"].items():
        assert block["mean_score"]["value"] >= 99.3 and block["parse_failures"] == 0, task
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text("".join(json.dumps({"id": it["id"], "answer": "I cannot tell."}) + "\n" for it in items))
    assert main(["qa-eval", str(out), "--answers", str(wrong), "--run", str(tmp_path / "run-wrong"), "--quiet"]) == 0
    worse = json.loads((tmp_path / "run-wrong" / "results.json").read_text())
    assert worse["overall"]["closed_accuracy"]["value"] == 0.0 and worse["overall"]["mean_score"]["value"] < 30


def test_the_imported_file_itself_fed_back_leaves_out_the_answers_to_rejected_items(imported, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    out, items, _ = imported
    run = tmp_path / "run"
    assert main(["qa-eval", str(out), "--answers", str(FIXTURE), "--run", str(run)]) == 0
    assert "left out 7 answer(s) to items not in the dataset: 7 rejected at import" in capsys.readouterr().err
    header = json.loads((run / "header.json").read_text())
    assert header["settings"]["answers"]["left_out"] == {"rejected at import": 7} and header["settings"]["answers"]["answers"] == 15
    results = json.loads((run / "results.json").read_text())
    assert results["n_finished"] == 15 and results["overall"]["closed_accuracy"]["value"] == 1.0
    # another file (a model's answers in Holtercare's style, JSON Lines): rejected items are known by case and question
    source = json.loads(FIXTURE.read_text())
    model = tmp_path / "model.jsonl"
    model.write_text("".join(json.dumps(row) + "\n" for i, row in enumerate(source) if isinstance(row, dict) and i != 20))
    assert main(["qa-eval", str(out), "--answers", str(model), "--run", str(tmp_path / "run-model"), "--quiet"]) == 0
    left = json.loads((tmp_path / "run-model" / "header.json").read_text())["settings"]["answers"]["left_out"]
    assert left == {"rejected at import": 5}
    # an answer for a case the dataset does not have is still an error
    stranger = tmp_path / "stranger.jsonl"
    stranger.write_text(json.dumps({**source[0], "id": "Z999"}) + "\n")
    assert main(["qa-eval", str(out), "--answers", str(stranger), "--run", str(tmp_path / "run-x"), "--quiet"]) == 2
    assert "answer for 'Z999' fits no item of the dataset" in capsys.readouterr().err


def test_export_of_an_import_gives_the_file_back(imported, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    out, _, _ = imported
    exported = tmp_path / "back.json"
    assert main(["export", "holtercare", str(out), "--out", str(exported)]) == 0
    source = json.loads(FIXTURE.read_text())
    assert json.loads(exported.read_text()) == [row for i, row in enumerate(source) if i not in REJECTED]
    assert main(["export", "holtercare", str(out), "--out", str(out / "inside.json")]) == 2  # input folders are never written to
    assert "never written to" in capsys.readouterr().err and not (out / "inside.json").exists()


def test_export_of_an_ecgtrace_dataset_reads_back_and_scores_100(synth_qa, tmp_path: Path) -> None:  # noqa: ANN001
    """Our own items in Holtercare's format: options inline with letters, letter-plus-text answers; imported again they keep their answers."""
    dataset, items = synth_qa
    copy = tmp_path / "ds"
    shutil.copytree(dataset, copy)
    exported = tmp_path / "ours.json"
    assert main(["export", "holtercare", str(copy), "--out", str(exported)]) == 0
    rows = json.loads(exported.read_text())
    closed = [(it, row) for it, row in zip(items, rows) if it.get("options")]
    assert closed and all(" A. " in row["qa_pair"]["question"] and "; B. " in row["qa_pair"]["question"] for _, row in closed)
    for it, row in closed:
        letter = "ABCDEFGH"[it["options"].index(it["answer"])]
        assert row["qa_pair"]["answer"] == f"{letter}. {it['answer']}"
    assert {row["id"] for row in rows} == {f"{it['record']['db']}/{it['record']['id']}" for it in items}
    back = tmp_path / "back"
    assert main(["import", "holtercare", str(exported), "--out", str(back)]) == 0
    again = _rows(back / "qa.jsonl")
    assert len(again) == len(rows) and not (back / "rejected.jsonl").read_text().strip()
    for it, new in zip([it for it in items if it["task"] in {n["task"] for n in again}], again):
        assert new["task"] == it["task"] and new["options"] == it.get("options")
        if it.get("options"):
            assert new["answer"] == it["answer"]
    run = tmp_path / "run"
    assert main(["qa-eval", str(back), "--answers", str(exported), "--run", str(run), "--quiet"]) == 0
    results = json.loads((run / "results.json").read_text())
    for task, block in results["per_task"].items():
        assert block["mean_score"]["value"] >= 99.3, task


def test_oracle_scores_100_on_every_imported_task_and_a_real_model_is_refused(imported, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """The baselines never look at the ECG, so they answer imported items (no signal) by their question alone."""
    out, items, _ = imported
    assert main(["qa-eval", str(out), "--model", "oracle", "--modality", "text", "--run", str(tmp_path / "oracle"), "--quiet"]) == 0
    results = json.loads((tmp_path / "oracle" / "results.json").read_text())
    assert results["n_finished"] == len(items) and results["overall"]["closed_accuracy"]["value"] == 1.0
    assert set(results["per_task"]) == {it["task"] for it in items}
    for task, block in results["per_task"].items():
        assert block["mean_score"]["value"] >= 99.3, task
    rows = [json.loads(line) for line in (tmp_path / "oracle" / "samples.jsonl").read_text().splitlines()]
    from ecgtrace.agents.exam.qa_runner import question_text

    by_id = {it["id"]: it for it in items}
    assert all(r["turns"][0]["prompt"] == question_text(by_id[r["id"]]) for r in rows)  # the question alone: no signal to show
    assert main(["qa-eval", str(out), "--model", "random", "--modality", "text", "--run", str(tmp_path / "random"), "--quiet"]) == 0
    assert json.loads((tmp_path / "random" / "results.json").read_text())["overall"]["mean_score"]["value"] < 30
    assert main(["qa-eval", str(out), "--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "--modality", "text",
                 "--run", str(tmp_path / "live"), "--quiet"]) == 2
    assert "has no ECG to show" in capsys.readouterr().err and not (tmp_path / "live" / "samples.jsonl").exists()
