"""The QA task registry: every task type is one object, found by name; unknown or unimplemented tasks fail loudly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ecgtrace.agents.exam.qa_families import content_family
from ecgtrace.agents.exam.qa_results import summarize_qa
from ecgtrace.agents.exam.qa_scoring import family, score_answer
from ecgtrace.agents.holter import tasks
from ecgtrace.agents.holter.tasks import QATask, check_registry, get_task, register
from ecgtrace.agents.holter.tasks._base import REGISTRY
from ecgtrace.contracts import QAItem
from ecgtrace.errors import RubricError
from ecgtrace.rubrics.template_schema import TASK_RULES, TASKS, TaskRules, load_template

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
BUILTIN = Path(__file__).resolve().parents[3] / "rubrics" / "templates"
TEMPLATE = """id: my_task
version: "1"
task: {task}
scope: {scope}
stems:
  - "How many {{event_plural}} between {{t0_ms}} ms and {{t1_ms}} ms?"
answer:
  format: integer
evidence:
  rule: event_beats
"""


@pytest.fixture()
def scratch_task():
    """Register a task type for one test and remove it (and its rules) afterwards."""
    added: list[str] = []

    def add(cls: type[QATask], rules: TaskRules | None = None) -> QATask:
        register(cls)
        added.append(cls.name)
        if rules is not None:
            TASK_RULES[cls.name] = rules
        return REGISTRY[cls.name]

    yield add
    for name in added:
        REGISTRY.pop(name, None)
        TASK_RULES.pop(name, None)


def test_every_declared_task_has_one_implementation():
    check_registry()
    assert tasks.task_names() == TASKS and len(TASKS) == 12
    for name in TASKS:
        task = get_task(name)
        assert task.name == name and task.rules is TASK_RULES[name]
        assert (task.family == "closed") == (TASK_RULES[name].format == "closed")


def test_builtin_families_agree_with_the_item_shapes():
    """Dispatch by task gives the family the items' shapes gave before the registry (no scoring change)."""
    rows = [json.loads(line) for line in (FIXTURES / "qa_small.jsonl").read_text().splitlines() if line.strip()]
    assert {r["task"] for r in rows} <= set(TASKS)
    for row in rows:
        assert family(row) == content_family(row), row["id"]


def test_unknown_task_fails_templates_validate(tmp_path, capsys):
    from ecgtrace.cli import main

    path = tmp_path / "t.yaml"
    path.write_text(TEMPLATE.format(task="closed_countt", scope="window"), encoding="utf-8")
    with pytest.raises(RubricError, match=r"t\.yaml:3: task: .*unknown task 'closed_countt'; known: closed_presence"):
        load_template(path)
    assert main(["templates", "validate", str(path)]) == 2
    assert "unknown task 'closed_countt'" in capsys.readouterr().err


def test_declared_task_without_implementation_fails_validate_and_build(tmp_path, capsys, monkeypatch):
    from ecgtrace.cli import main

    monkeypatch.setitem(TASK_RULES, "open_tally", TaskRules("open", "integer", "none"))
    path = tmp_path / "t.yaml"
    path.write_text(TEMPLATE.format(task="open_tally", scope="window"), encoding="utf-8")
    assert load_template(path).task == "open_tally"  # the schema knows the task...
    with pytest.raises(RubricError, match="open_tally.*no implementation"):
        check_registry()
    assert main(["templates", "validate", str(BUILTIN / "closed_count.yaml")]) == 2  # ...but nothing implements it
    assert "no implementation" in capsys.readouterr().err
    with pytest.raises(RubricError, match="QA task 'open_tally' has no implementation"):
        get_task("open_tally")


def test_implementation_without_rules_fails_the_registry_check(scratch_task):
    class Stray(QATask):
        name = "stray_task"
        family = "numeric"

    scratch_task(Stray)
    with pytest.raises(RubricError, match="stray_task are implemented .* no template rules"):
        check_registry()


def test_scope_a_planner_cannot_serve_is_rejected(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(TEMPLATE.format(task="open_timing", scope="record").replace("integer", "timestamps_ms"), encoding="utf-8")
    with pytest.raises(RubricError, match="task open_timing asks about window scope, not 'record'"):
        load_template(path)
    ok = tmp_path / "ok.yaml"
    ok.write_text(TEMPLATE.format(task="open_count", scope="record"), encoding="utf-8")
    assert load_template(ok).scope == "record"


def test_a_new_task_type_is_planned_written_scored_and_summarized_through_its_object(scratch_task, synth_record, tmp_path):
    """One module's worth of code (a QATask subclass) plus its rules row makes a working task type."""
    from ecgtrace.agents.holter import annotator, planner, verifier, writer
    from ecgtrace.agents.holter.facts import load_facts

    class OpenBeats(QATask):
        name = "open_beat_total"
        family = "numeric"
        kinds = ()

        def plan(self, facts, template, rng):  # noqa: ANN001
            return [{"scope": "record"}]

        def write(self, ctx):  # noqa: ANN001
            n = int(ctx.facts.beat_ms.size)
            return {"window": None, "answer": str(n), "evidence": [], "_truth": n, "_display_ms": []}

        def score(self, item, raw, *, error=None):  # noqa: ANN001
            out = super().score(item, raw, error=error)
            return {**out, "details": {**out["details"], "scored_by": self.name}}

        def summarize(self, rows):  # noqa: ANN001
            return {**super().summarize(rows), "custom": len(rows)}

    scratch_task(OpenBeats, TaskRules("open", "integer", "none", ("record",)))
    path = tmp_path / "t.yaml"
    path.write_text(TEMPLATE.format(task="open_beat_total", scope="record").replace("between {t0_ms} ms and {t1_ms} ms", "in the recording"),
                    encoding="utf-8")
    template = load_template(path)
    facts = load_facts(annotator.annotate(annotator.load_record(synth_record.record_path), tmp_path / "cache")["path"])
    entries = planner.plan(facts, [template], seed=1)
    items = writer.write_items(facts, template, entries[0]["targets"], seed=1, measure=False)
    kept, dropped = verifier.verify(facts, items)
    assert len(kept) == 1 and not dropped
    item = kept[0]
    assert item["answer"] == str(facts.beat_ms.size) and item["format"] == "ecgtrace-qa-item/2" and item["finding"] is None
    scored = score_answer(item, f"There are {facts.beat_ms.size} beats.")
    assert scored["correct"] and scored["details"]["scored_by"] == "open_beat_total"
    public = QAItem.model_validate({k: v for k, v in item.items() if not k.startswith("_")})
    assert score_answer(public, "12")["details"]["scored_by"] == "open_beat_total"  # a QAItem is accepted as well as a dict
    row = {"id": item["id"], "task": item["task"], "family": scored["family"], "score": scored["score"], "correct": scored["correct"],
           "turns": [{"parse_ok": True, "error": None, "details": scored["details"]}]}
    assert summarize_qa([row])["per_task"]["open_beat_total"]["custom"] == 1


def test_unregistered_tasks_still_score_by_their_shape():
    item = {"id": "x", "task": "imported_count", "question": "How many?", "answer": "3", "answer_type": "integer", "window": {"t0_s": 0, "t1_s": 10}}
    scored = score_answer(item, "3")
    assert scored["family"] == "numeric" and scored["correct"]
