"""The one message builder: prompts, assets inside the dataset folder, the three layouts, an item's own messages."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ecgtrace.agents.exam import messages as m
from ecgtrace.agents.exam.turns import closed_row, turn_spec, unasked_row
from ecgtrace.contracts import AuditItem, QAItem
from ecgtrace.errors import AuditFormatError, QAFormatError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    """A dataset folder with one audit item and one QA item whose assets are written by hand."""
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "w.txt").write_text("t_s,MLII\n0.000,0.100\n")
    shutil.copy(FIXTURES / "qa_assets" / "w120.png", tmp_path / "assets" / "w.png")
    return tmp_path


def _audit(**assets) -> AuditItem:
    row = json.loads((FIXTURES / "audit_small.jsonl").read_text().splitlines()[0])
    return AuditItem.model_validate({**row, "assets": assets})


def _qa(**extra) -> QAItem:
    return QAItem.model_validate({"format": "ecgtrace-qa-item/2", "id": "q1", "task": "closed_presence", "question": "Is there a PVC?",
                                  "options": ["Yes", "No"], "answer": "No", "answer_type": "yes_no",
                                  "record": {"db": "d", "id": "r7", "path": "p", "fs_hz": 128.0, "leads": ["II"], "duration_s": 60.0},
                                  "window": {"t0_s": 10.0, "t1_s": 20.0},
                                  "modalities": {"text": "assets/w.txt", "image": ["assets/w.png"]}, **extra})


def test_one_option_formatter_behind_every_prompt() -> None:
    assert m.option_lines(["Yes", "No", "Maybe"]) == ["A. Yes", "B. No", "C. Maybe"]
    assert m.closed_prompt("Q?", ["Yes", "No"]) == "Q?\n\nA. Yes\nB. No\n\nAnswer with the letter of one option."
    assert m.closed_prompt("Q?", ["I", "II"], multi=True).endswith("separated by commas, e.g. 'A, C'.")
    assert m.question_prompt("How many?", None, answer_type="integer") == "How many?\n\nAnswer with a single number."
    assert m.question_prompt("Describe.", None, answer_type="text") == "Describe."
    assert m.dataset_prompt("Q?", ["Yes", "No"]) == "Q?\nOptions:\nA. Yes\nB. No\nAnswer with the text of one option."
    assert m.lettered_answer(["MLII", "V1", "V5"], ["MLII", "V5"]) == "A. MLII, C. V5"


def test_asset_paths_stay_inside_the_dataset_folder(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    assert m.resolve_asset(folder, "assets/w.txt") == (folder / "assets" / "w.txt").resolve()
    with pytest.raises(QAFormatError, match="outside the dataset folder"):
        m.resolve_asset(folder, "../secret.txt", QAFormatError)
    outside = tmp_path_factory.mktemp("outside")
    (outside / "leak.txt").write_text("secret")
    os.symlink(outside / "leak.txt", folder / "assets" / "link.txt")  # a link that leads out is refused too
    with pytest.raises(QAFormatError, match="outside the dataset folder"):
        m.check_modality(_qa(modalities={"text": "assets/link.txt", "image": []}), folder, "text")


def test_one_modality_check_for_audit_and_qa_items(folder: Path) -> None:
    m.check_modality(_audit(text="assets/w.txt", image="assets/w.png"), folder, "both")
    with pytest.raises(AuditFormatError, match="has no assets.image, needed for --modality image"):
        m.check_modality(_audit(text="assets/w.txt"), folder, "image")
    with pytest.raises(AuditFormatError, match=r"assets.text file not found: .*missing.txt"):
        m.check_modality(_audit(text="assets/missing.txt").to_json(), folder, "text")  # plain JSON says its own kind
    with pytest.raises(QAFormatError, match="has no modalities.image"):
        m.check_modality(_qa(modalities={"text": "assets/w.txt", "image": []}), folder, "both")
    with pytest.raises(QAFormatError, match="unknown modality 'audio'"):
        m.check_modality(_qa(), folder, "audio")
    with pytest.raises(QAFormatError, match="has no modalities.video, needed for --modality video"):  # issue 19: video is sent
        m.check_modality(_qa(), folder, "video")


def test_audit_layout_is_a_conversation_with_the_ecg_on_the_first_message(folder: Path) -> None:
    item = _audit(text="assets/w.txt", image="assets/w.png")
    history = [{"role": "user", "content": "first?"}, {"role": "assistant", "content": "A. Yes"}]
    text = m.build_messages(item, folder, "text", layout=m.AUDIT, prompt="second?", history=history)
    intro = "ECG record holter from 120 s to 130 s, leads MLII, V1, V5, sampled at 250 Hz."
    assert text[0] == {"role": "system", "content": m.AUDIT.system_prompt}
    assert text[1] == {"role": "user", "content": f"{intro}\nSignal as text:\nt_s,MLII\n0.000,0.100\n\n\nfirst?"}
    assert text[2:] == [history[1], {"role": "user", "content": "second?"}]
    both = m.build_messages(item, folder, "both", layout=m.AUDIT, prompt="first?")[1]["content"]
    assert [p["type"] for p in both] == ["text", "image_url", "text"] and both[0]["text"].startswith(intro + "\nSignal as text:")
    assert both[1]["image_url"]["url"].startswith("data:image/png;base64,iVBOR") and both[2]["text"] == "first?"


def test_qa_layout_is_one_request_with_separate_parts(folder: Path) -> None:
    item = _qa()
    both = m.build_messages(item, folder, "both", layout=m.QA, prompt="Q")
    assert both[0]["content"] == m.QA.system_prompt
    parts = both[1]["content"]
    assert [p["type"] for p in parts] == ["text", "text", "image_url", "text"]
    assert parts[0]["text"] == "ECG record r7 from 10 s to 20 s, leads II, sampled at 128 Hz."
    assert parts[1]["text"] == "Signal as text:\nt_s,MLII\n0.000,0.100\n" and parts[3]["text"] == "Q"


def test_dataset_layout_stores_paths_and_the_question_first(folder: Path) -> None:
    row = {"question": "Is there a PVC?", "options": ["Yes", "No"], "modalities": {"text": "assets/w.txt", "image": ["assets/w.png"]}}
    stored = m.dataset_messages(row, folder, context_text="hour 1: 60 bpm")
    prompt = "Is there a PVC?\nOptions:\nA. Yes\nB. No\nAnswer with the text of one option."
    assert stored["text"] == [{"role": "user", "content": [
        {"type": "text", "text": f"{prompt}\n\nECG signal (text):\nt_s,MLII\n0.000,0.100\n"}]}]
    assert stored["image"] == [{"role": "user", "content": [
        {"type": "text", "text": f"{prompt}\n\nhour 1: 60 bpm"}, {"type": "image_url", "image_url": {"url": "assets/w.png"}}]}]
    assert m.dataset_messages({**row, "modalities": {"text": None, "image": []}}, folder) == {"text": None, "image": None}
    # asked later, the stored messages are the item's own: the image path becomes a data URI
    asked = m.build_messages(_qa(messages=stored), folder, "both", layout=m.QA, prompt="unused")
    assert [p["type"] for p in asked[0]["content"]] == ["text", "image_url"] and "ECG signal (text)" in asked[0]["content"][0]["text"]


def test_a_list_of_own_messages_drops_the_signal_part_by_the_items_asset_not_by_markers(folder: Path) -> None:
    signal = (folder / "assets" / "w.txt").read_text()
    own = [{"role": "user", "content": [{"type": "text", "text": "intro"}, {"type": "text", "text": f"here it is:\n{signal}"},
                                        {"type": "image_url", "image_url": {"url": "assets/w.png"}}, {"type": "text", "text": "Q?"}]}]
    item = _qa(messages=own)
    image = m.build_messages(item, folder, "image", layout=m.QA, prompt="unused")[0]["content"]
    text = m.build_messages(item, folder, "text", layout=m.QA, prompt="unused")[0]["content"]
    assert [p.get("text") for p in image if p["type"] == "text"] == ["intro", "Q?"] and image[1]["image_url"]["url"].startswith("data:")
    assert [p["type"] for p in text] == ["text", "text", "text"]
    assert item.messages[0]["content"][2]["image_url"]["url"] == "assets/w.png"  # the item is not modified


def test_a_rewritten_asset_is_read_again(folder: Path) -> None:
    item = _qa()
    before = m.build_messages(item, folder, "text", layout=m.QA, prompt="Q")[1]["content"][1]["text"]
    (folder / "assets" / "w.txt").write_text("t_s,MLII\n0.000,0.200\n0.004,0.300\n")
    after = m.build_messages(item, folder, "text", layout=m.QA, prompt="Q")[1]["content"][1]["text"]
    assert before.endswith("0.100\n") and after.endswith("0.300\n")


def test_prompt_record_keeps_the_last_user_text_capped() -> None:
    request = [{"role": "system", "content": "s"}, {"role": "user", "content": [
        {"type": "text", "text": "x" * (m.PROMPT_KEEP_CHARS + 10)}, {"type": "image_url", "image_url": {"url": "data:"}}]}]
    kept = m.prompt_record(request)
    assert kept.startswith("x" * m.PROMPT_KEEP_CHARS) and "[... 18 more characters of the request not stored]" in kept
    assert m.prompt_record([{"role": "user", "content": "Q?"}]) == "Q?"


def test_turn_rows_are_the_contract_for_every_examination() -> None:
    from ecgtrace.agents.exam.examinees import Reply
    from ecgtrace.contracts import TurnRow

    turn = turn_spec(index=2, stage="grounding", kind="lead", question="Which leads?", options=["I", "II", "V1"],
                     answer=["I", "V1"], multi=True, sample_id="s")
    right = closed_row(turn, "p", Reply(raw="A, C", latency_ms=4.0))
    assert right["correct"] is True and right["parsed"] == ["I", "V1"] and right["prompt"] == "p"
    failed = closed_row(turn, "p", {"raw": None, "error": "RateLimitError 429: slow down", "attempts": 3})
    assert failed["correct"] is False and failed["parse_reason"] == "no answer: server error" and failed["attempts"] == 3
    skipped = unasked_row(turn)
    assert skipped["asked"] is False and skipped["correct"] is None and skipped["answer"] == ["I", "V1"]
    for row in (right, failed, skipped):
        assert TurnRow.model_validate(row).to_json() == row and set(row) == set(TurnRow.model_fields)
