"""The typed contracts: versioned items, run headers and turn rows, and the shared vocabulary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ecgtrace.contracts import QAItem, RecordRef, RunHeader, TurnRow, load_items, provenance
from ecgtrace.contracts import vocabulary as v
from ecgtrace.errors import QAFormatError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_record_ref_reads_format1_rate_name() -> None:
    ref = RecordRef.model_validate({"db": "d", "id": "1", "path": "p", "fs": 360.0, "leads": ["MLII"], "duration_s": 1.0})
    assert ref.fs_hz == 360.0
    assert "fs" not in ref.to_json() and ref.to_json()["fs_hz"] == 360.0


def test_provenance_helper_validates_the_source() -> None:
    assert provenance("computed", "m", 3, {"a": 1}) == {"source": "computed", "method": "m", "version": "3", "params": {"a": 1}}
    with pytest.raises(ValueError):
        provenance("guessed", "m", "1")


def test_format1_qa_items_upgrade_and_keep_their_finding() -> None:
    qa = load_items(FIXTURES / "qa_small.jsonl", "qa")
    first = qa.items[0]
    assert isinstance(first, QAItem) and first.format == "ecgtrace-qa-item/2"
    assert first.finding == "pvc"  # format 1 kept it under "event_kind"
    assert first.record is not None and first.record.fs_hz > 0
    assert all(it.answer in it.options for it in qa.items if it.options)


def test_qa_item_rejects_an_answer_outside_its_options(tmp_path: Path) -> None:
    row = {"format": "ecgtrace-qa-item/2", "id": "x", "task": "closed_presence", "question": "q?", "options": ["Yes", "No"], "answer": "Maybe"}
    (tmp_path / "qa.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(QAFormatError, match=r"qa.jsonl:1: .*not one of the options"):
        load_items(tmp_path, "qa")


def test_qa_item_v2_forbids_unknown_keys() -> None:
    with pytest.raises(ValueError, match="extra"):
        QAItem.model_validate({"format": "ecgtrace-qa-item/2", "id": "x", "task": "t", "question": "q", "answer": "1", "surprise": 1})


def test_run_header_format1_says_its_kind() -> None:
    old = {"format": "ecgtrace-audit-run/1", "run_id": "r", "identity": {"kind": "qa", "model": "oracle"}}
    assert RunHeader.model_validate(old).kind == "qa"
    assert RunHeader.model_validate({**old, "identity": {"model": "oracle"}}).kind == "audit"
    with pytest.raises(ValueError, match="unknown run format"):
        RunHeader.model_validate({**old, "format": "someone-else/9"})


def test_turn_row_defaults_describe_an_unasked_turn() -> None:
    row = TurnRow(index=3, stage="decision", asked=False, answer="Yes").to_json()
    assert row["correct"] is None and row["prompt"] is None and row["parse_ok"] is False


def test_vocabulary_is_consistent() -> None:
    assert set(v.QA_EVENT_KINDS) == {k.name for k in v.KINDS.values() if k.qa}
    assert v.EPISODE_KINDS <= v.COVERING_KINDS <= set(v.QA_EVENT_KINDS)
    assert {v.kind_of_note(note) for note in v.RHYTHM_NOTES.values()} == set(v.RHYTHM_NOTES)
    assert len(set(v.RHYTHM_NOTES.values())) == len(v.RHYTHM_NOTES), "two kinds share one aux note"
    assert v.assets_needed("both") == ("text", "image")


def _erb_like_item() -> dict:
    loop = {"criterion": {"question": "Which criterion?", "options": ["a", "b", "c", "d", "e"], "answer": "c"},
            "finding": {"question": "Present?", "options": ["No", "Yes"], "answer": "Yes"},
            "grounding": [{"kind": "lead", "question": "Which leads?", "options": ["Lead V1", "Lead V2"], "answer": ["Lead V2"], "multi": True},
                          {"kind": "measurement", "question": "Which bin?", "options": ["Below 120ms", "[120ms - 160ms]", "Above 160ms"],
                           "answer": "Above 160ms"}],
            "decision": {"question": "Diagnose?", "options": ["Further findings are required to confirm the diagnosis", "Yes", "No"],
                         "answer": "Yes"}}
    return {"id": "erb-1", "record": {"db": "ptbxl", "id": "00001_hr", "path": "p", "fs_hz": 500.0, "leads": ["I"], "duration_s": 10.0},
            "diagnosis": "lvh", "label": True, "path_id": "0",
            "initial": {"question": "LVH?", "options": ["Yes", "No", "I don't know"], "answer": "Yes"}, "loops": [loop],
            "provenance": {"source": "erb", "method": "m", "version": "1"}}


def test_audit_item_v3_takes_erb_option_sets_verbatim() -> None:
    from ecgtrace.contracts import AuditItem

    item = AuditItem.model_validate(_erb_like_item())
    assert item.format == "ecgtrace-audit-item/3" and item.initial.options[-1] == "I don't know"
    assert item.loops[0].grounding[0].answer == ["Lead V2"]
    assert v.lead_of_option("Lead aVL") == "aVL" and v.lead_of_option("AVR") == "aVR" and v.lead_of_option("MLII") == "MLII"


def test_audit_item_v2_keeps_its_fixed_option_lists_and_v3_its_rules() -> None:
    from ecgtrace.contracts import AuditItem

    with pytest.raises(ValueError, match="in a ecgtrace-audit-item/2 item"):
        AuditItem.model_validate({**_erb_like_item(), "format": "ecgtrace-audit-item/2"})
    bad = _erb_like_item()
    bad["initial"] = {"question": "LVH?", "options": ["Yes", "I don't know"], "answer": "Yes"}
    with pytest.raises(ValueError, match="initial options must include"):
        AuditItem.model_validate(bad)
    bad = _erb_like_item()
    bad["loops"][0]["decision"]["options"] = ["Yes", "No", "Maybe"]
    bad["loops"][0]["decision"]["answer"] = "Yes"
    with pytest.raises(ValueError, match="decision options must be"):
        AuditItem.model_validate(bad)


def test_format2_items_are_still_read() -> None:
    audit = load_items(FIXTURES / "audit_small.jsonl", "audit")
    assert audit.items and all(it.format == "ecgtrace-audit-item/3" for it in audit.items)  # format 1 lines, upgraded
    from ecgtrace.contracts.datasets import kind_of_item, readable_formats

    assert readable_formats("audit") == ("ecgtrace-audit-item/2", "ecgtrace-audit-item/3")
    assert kind_of_item({"format": "ecgtrace-audit-item/2"}) == "audit"


def test_audit_run_headers_record_their_metric_definitions() -> None:
    old = {"format": "ecgtrace-run/2", "kind": "audit", "run_id": "r", "identity": {}}
    assert RunHeader.model_validate(old).metrics_version == "1"  # written before the field: version 1
    assert RunHeader.model_validate({**old, "metrics_version": "2"}).metrics_version == "2"
    assert RunHeader.model_validate({**old, "kind": "qa"}).metrics_version is None
