"""QA templates: built-ins cover the 12 tasks, errors are precise, new files need no code, formatting is safe."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ecgtrace.errors import RubricError
from ecgtrace.rubrics.template_schema import TASKS, load_template, load_templates, safe_format

BUILTIN = Path(__file__).resolve().parents[2] / "rubrics" / "templates"


def test_builtin_templates_cover_all_12_tasks():
    templates = load_templates()
    assert {t.task for t in templates} == set(TASKS)
    assert len(TASKS) == 12


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "t.yaml"
    path.write_text(text, encoding="utf-8")
    return path


GOOD = """id: my_count
version: "2"
task: open_count
stems:
  - "How many {event_plural} between {t0_ms} ms and {t1_ms} ms?"
answer:
  format: integer
evidence:
  rule: event_beats
"""


def test_error_names_file_line_and_field(tmp_path):
    path = _write(tmp_path, GOOD.replace("format: integer", "format: integr"))
    with pytest.raises(RubricError) as info:
        load_template(path)
    assert str(info.value).startswith(f"{path}:7: answer.format:")


def test_attribute_access_in_stem_is_rejected_with_its_line(tmp_path):
    path = _write(tmp_path, GOOD.replace("{event_plural}", "{event_plural.__class__}"))
    with pytest.raises(RubricError, match=r"t\.yaml:5: stems\.0: .*only plain names"):
        load_template(path)


def test_unknown_field_and_wrong_rule(tmp_path):
    with pytest.raises(RubricError, match=r":5: stems\.0: .*unknown field \{patient_name\}"):
        load_template(_write(tmp_path, GOOD.replace("{event_plural}", "{patient_name}")))
    with pytest.raises(RubricError, match=r"needs distractors.rule 'count_offsets'"):
        load_template(_write(tmp_path, GOOD.replace("open_count", "closed_count")))


def test_new_template_is_picked_up_without_code(tmp_path):
    folder = tmp_path / "templates"
    shutil.copytree(BUILTIN, folder)
    (folder / "my_count.yaml").write_text(GOOD, encoding="utf-8")
    ids = [t.id for t in load_templates(folder, tasks=["open_count"])]
    assert "my_count" in ids and "open_count" in ids


def test_safe_format_fills_plain_names_only():
    assert safe_format("{event} at {t0_ms} ms", {"event": "pause", "t0_ms": 5}) == "pause at 5 ms"
    with pytest.raises(ValueError):
        safe_format("{event[0]}", {"event": "pause"})
    with pytest.raises(ValueError):
        safe_format("{event!r}", {"event": "pause"})


def test_templates_cli_validate(tmp_path, capsys):
    from ecgtrace.cli import main

    assert main(["templates", "validate", str(BUILTIN / "closed_count.yaml")]) == 0
    bad = _write(tmp_path, GOOD.replace("version: \"2\"\n", ""))
    assert main(["templates", "validate", str(bad)]) == 2


def test_templates_cli_preview(synth_record, capsys):
    from ecgtrace.cli import main

    assert main(["templates", "preview", str(BUILTIN / "closed_timing.yaml"), "--record", str(synth_record.record_path)]) == 0
    out = capsys.readouterr().out
    assert '"answer_type": "timestamps_ms"' in out and "distractors" in out


def test_templates_cli_list(capsys):
    from ecgtrace.cli import main

    assert main(["templates", "list"]) == 0
    out = capsys.readouterr().out
    assert "closed_presence" in out and "report_summary" in out


def test_new_template_builds_items_without_code(synth_record, tmp_path):
    from ecgtrace.graphs.holter_build import build_dataset

    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "my_count.yaml").write_text(GOOD, encoding="utf-8")
    options = {"seed": 1, "tasks": [], "modalities": ["text"], "templates_dir": str(folder), "fs_hz": None, "paraphrase": False, "measure": False}
    manifest = build_dataset([str(synth_record.record_path)], tmp_path / "out", options, jobs=1, audit=False)
    assert manifest["versions"]["templates"] == {"my_count": "2"}
    assert manifest["counts"]["per_task"] == {"open_count": manifest["counts"]["items"]} and manifest["counts"]["items"] > 0
