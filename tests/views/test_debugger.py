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
