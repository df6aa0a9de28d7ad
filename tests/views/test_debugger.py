"""The turn-by-turn debugger on a saved run."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from ecgtrace.cli import main
from ecgtrace.views.debugger import _audit_item, _state_from_checkpoints, load_debug_sample, reask_turn_sync, rebuild_state
from ecgtrace.errors import RunError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "audit_small.jsonl"


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("run") / "random"
    code = main(["audit", str(FIXTURE), "--model", "random", "--modality", "text", "--seed", "3",
                 "--run", str(run), "--quiet", "--keep-checkpoints"])
    assert code == 0
    return run


def _broken_sample(run: Path):
    from ecgtrace.runlog import load_run_samples

    _, rows = load_run_samples(run)
    for row in rows:
        sample = load_debug_sample(run, row["id"])
        if sample.broke_at() is not None:
            return sample
    pytest.fail("random examinee got every chain right: fixture too small")


def test_steps_show_question_answer_truth_and_break(saved_run, capsys):
    sample = _broken_sample(saved_run)
    assert main(["debug", str(saved_run), "--sample", sample.row["id"], "--all"]) == 0
    out = capsys.readouterr().out
    broke = sample.broke_at()
    assert f"chain broke at turn {broke}" in out
    assert "the chain broke here" in out
    first_wrong = sample.turns[broke]
    assert str(first_wrong["raw"]) in out
    assert "truth:" in out and "raw answer:" in out and "parsed:" in out


def test_reask_with_oracle_fixes_the_broken_turn(saved_run):
    from ecgtrace.agents.exam.examinees import make_examinee

    sample = _broken_sample(saved_run)
    broke = sample.broke_at()
    new, source = reask_turn_sync(sample, broke, make_examinee("oracle"))
    assert new["correct"] is True
    assert sample.turns[broke]["correct"] is False
    assert new["prompt"] == sample.turns[broke]["prompt"]  # the very same question
    assert "checkpoint" in source


def test_checkpoint_state_equals_rebuilt_state(saved_run):
    from ecgtrace.agents.audit.examiner import build_request, format_prompt
    from ecgtrace.graphs.reasoning_audit import history

    sample = _broken_sample(saved_run)
    item, base_dir = _audit_item(sample)
    for index in range(1, len(sample.turns)):
        if not sample.turns[index].get("asked", True):
            break
        from_checkpoint = asyncio.run(_state_from_checkpoints(sample, index))
        rebuilt = rebuild_state(sample, item, base_dir, index)
        assert from_checkpoint is not None
        prompt = format_prompt(rebuilt["plan"][index])
        run = rebuilt["run"]
        assert build_request(history(from_checkpoint), prompt, from_checkpoint["item"], run["base_dir"], run["modality"]) == \
            build_request(history(rebuilt), prompt, rebuilt["item"], run["base_dir"], run["modality"])


def test_human_answers_in_the_models_place(saved_run, monkeypatch, capsys):
    sample = _broken_sample(saved_run)
    broke = sample.broke_at()
    truth = sample.turns[broke]["answer"]
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{truth}\n"))
    assert main(["debug", str(saved_run), "--sample", sample.row["id"], "--human", "--turn", str(broke)]) == 0
    assert "the verdict changed" in capsys.readouterr().out


def test_unknown_sample_is_a_clear_error(saved_run):
    with pytest.raises(RunError, match="no finished sample"):
        load_debug_sample(saved_run, "does-not-exist")
    assert main(["debug", str(saved_run), "--sample", "does-not-exist"]) == 2


def test_reask_sends_exactly_what_the_run_sent(tmp_path):
    """The re-ask runs the graph's own step: the request equals the one the run made for that turn."""
    from ecgtrace.agents.exam.examinees import Examinee, Reply

    class Recording(Examinee):
        def __init__(self):
            self.seen = {}

        async def answer(self, messages, turn):
            self.seen[(turn["sample_id"], turn["index"])] = messages
            return Reply(raw=turn["options"][-1])  # wrong often enough

    import asyncio as _asyncio

    from ecgtrace.agents.audit.format import load_audit
    from ecgtrace.graphs.audit_runner import run_audit
    from ecgtrace.runlog import RunDir

    audit = load_audit(FIXTURE)
    run = RunDir.open(tmp_path / "run", {"dataset_sha256": audit.sha256, "model": "recording"}, {"dataset_path": str(audit.path)})
    during = Recording()
    _asyncio.run(run_audit(audit, run, during, modality="text"))
    sample = load_debug_sample(run.path, audit.items[0].id)
    for index in (0, 3, len(sample.turns) - 1):
        again = Recording()
        new, source = reask_turn_sync(sample, index, again)
        assert "rebuilt" in source
        assert again.seen[(sample.row["id"], index)] == during.seen[(sample.row["id"], index)]
        assert {k: new[k] for k in ("prompt", "raw", "correct")} == {k: sample.turns[index][k] for k in ("prompt", "raw", "correct")}


def test_a_qa_item_is_reasked_through_the_qa_runner(tmp_path):
    import shutil

    from ecgtrace.agents.exam.examinees import make_examinee

    qa_dir = tmp_path / "qa"
    qa_dir.mkdir()
    shutil.copy(FIXTURE.parent / "qa_small.jsonl", qa_dir / "qa.jsonl")
    shutil.copytree(FIXTURE.parent / "qa_assets", qa_dir / "qa_assets")
    assert main(["qa-eval", str(qa_dir), "--model", "prior", "--modality", "text", "--run", str(tmp_path / "run"), "--quiet"]) == 0
    sample = load_debug_sample(tmp_path / "run", "synthetic-holter-closed_count-000")
    assert sample.kind == "qa"
    new, source = reask_turn_sync(sample, 0, make_examinee("oracle"))
    assert new["correct"] is True and new["prompt"] == sample.turns[0]["prompt"] and "QA item" in source
    with pytest.raises(RunError, match="one turn"):
        reask_turn_sync(sample, 1, make_examinee("oracle"))
