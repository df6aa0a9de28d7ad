"""AuditItem validation: the contract between the audit builder and the reasoning audit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ecgtrace.agents.audit.format import AuditFormatError, load_audit

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "audit_small.jsonl"


def _write(tmp_path, mutate):
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    mutate(rows)
    path = tmp_path / "audit.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_fixture_loads_with_a_stable_hash(tmp_path):
    first = load_audit(FIXTURE)
    assert first.sha256 == load_audit(FIXTURE).sha256 and len(first.items) == 3
    assert first.base_dir == FIXTURE.parent
    (tmp_path / "audit.jsonl").write_bytes(FIXTURE.read_bytes())
    assert load_audit(tmp_path).sha256 == first.sha256  # a folder means DIR/audit.jsonl


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda rows: rows[1]["initial"].update(answer="Maybe"), ":2: initial: Value error, answer 'Maybe' is not one of the options"),
    (lambda rows: rows[0]["loops"][0]["grounding"][0].update(answer="MLII"), ":1: loops.0.grounding.0: Value error, a multi-select"),
    (lambda rows: rows[0]["loops"][0]["decision"].update(options=["Yes", "No"], answer="No"), ":1: loops.0: Value error, decision options"),
    (lambda rows: rows[2].update(id="af-pos-001"), ":3: duplicate id 'af-pos-001' (first on line 1)"),
    (lambda rows: rows[0]["assets"].update(text="../secret.txt"), "must be a path inside the audit folder"),
    (lambda rows: rows[0].update(extra_key=1), ":1: extra_key: Extra inputs are not permitted"),
])
def test_bad_items_are_one_line_errors(tmp_path, mutate, message):
    path = _write(tmp_path, mutate)
    with pytest.raises(AuditFormatError) as info:
        load_audit(path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_torn_or_non_json_line(tmp_path):
    path = tmp_path / "audit.jsonl"
    path.write_text(FIXTURE.read_text() + '{"id": "x", \n')
    with pytest.raises(AuditFormatError, match=":4: not valid JSON"):
        load_audit(path)
