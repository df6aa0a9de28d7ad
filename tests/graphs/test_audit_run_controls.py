"""The reasoning audit under the run controls: text encodings, the token budget, epochs, a run folder that grows."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ecgtrace.agents.audit.format import load_audit  # noqa: E402
from ecgtrace.agents.exam.budget import PromptBudget, estimate_request_tokens  # noqa: E402
from ecgtrace.agents.exam.examinees import Examinee, Reply  # noqa: E402
from ecgtrace.agents.exam.examinees.base import as_text  # noqa: E402
from ecgtrace.graphs.audit_runner import run_audit  # noqa: E402
from ecgtrace.runlog import RunDir  # noqa: E402
from ecgtrace.tools.text_encodings import RAW, text_encoding  # noqa: E402
from tests.support.signal_items import write_signal_audit  # noqa: E402

@pytest.fixture()
def audit_dir(tmp_path: Path, synth_record) -> Path:
    """The fixture audit items with real signal text: each item's own 10 s window of the synthetic record."""
    return write_signal_audit(tmp_path / "audit", synth_record.record_path)


class Recorder(Examinee):
    """Answers the truth (or always the first option), keeps every request, and reports a usage when told to."""

    name = "recorder"

    def __init__(self, *, first_option: bool = False, prompt_tokens: int | None = None) -> None:
        self.seen: list[tuple[str, int, list[dict[str, Any]], list[str]]] = []
        self.first_option = first_option
        self.prompt_tokens = prompt_tokens

    async def answer(self, messages: list[dict[str, Any]], turn: dict[str, Any]) -> Reply:
        self.seen.append((turn["sample_id"], turn["index"], messages, list(turn["options"])))
        usage = {"prompt_tokens": self.prompt_tokens, "completion_tokens": 3, "total_tokens": self.prompt_tokens + 3} if self.prompt_tokens else None
        return Reply(raw=turn["options"][0] if self.first_option else as_text(turn["answer"]), usage=usage)


def _run(audit_dir: Path, run: Path, examinee: Examinee, **kwargs: Any) -> tuple[RunDir, dict[str, Any]]:
    audit = load_audit(audit_dir)
    run_dir = RunDir.open(run, {"test": "controls", **{k: str(v) for k, v in kwargs.items() if k == "encoding"}})
    results = asyncio.run(run_audit(audit, run_dir, examinee, mode="teacher", modality=kwargs.pop("modality", "text"), **kwargs))
    return run_dir, results


def _first_user_text(messages: list[dict[str, Any]]) -> str:
    content = next(m for m in messages if m["role"] == "user")["content"]
    return content if isinstance(content, str) else "\n".join(p.get("text", "") for p in content)


def test_the_model_reads_the_encoding_of_the_window_it_is_shown(audit_dir: Path, tmp_path: Path) -> None:
    examinee = Recorder()
    _, results = _run(audit_dir, tmp_path / "run", examinee, encoding=text_encoding("summary"))
    assert results["n_answered"] == 3 and results["skipped"]["n"] == 0
    assert results["overall"]["stages"]["initial"]["value"] == 1.0
    firsts = {sid: _first_user_text(msgs) for sid, index, msgs, _ in examinee.seen if index == 0}
    for sid, text in firsts.items():
        assert "# format: ecgtrace-beat-summary/1" in text and "ecgtrace-signal-text/1" not in text, sid
    assert "window 120.000 s to 130.000 s" in firsts["af-pos-001"]  # the item's own window, as its image shows it
    assert "leads MLII, V1;" in firsts["avb1-pos-003"]


def test_samples_that_cannot_fit_are_skipped_never_sent_and_checked_again(audit_dir: Path, tmp_path: Path) -> None:
    examinee = Recorder()
    budget = PromptBudget(8000, "--max-prompt-tokens")
    run_dir, results = _run(audit_dir, tmp_path / "raw", examinee, encoding=RAW, budget=budget)
    assert examinee.seen == []  # nothing was sent to fail
    assert results["n_finished"] == 3 and results["n_answered"] == 0 and results["complete"]
    assert results["skipped"] == {"n": 3, "by_kind": {"token_budget": 3}, "ids": ["af-neg-002", "af-pos-001", "avb1-pos-003"],
                                  "budget": {"max_prompt_tokens": 8000, "source": "--max-prompt-tokens"}}
    assert results["overall"]["n"] == 0  # metrics leave skipped samples out
    rows = run_dir.samples()
    for row in rows:
        assert row["turns"] == [] and row["skipped"]["kind"] == "token_budget" and row["skipped"]["prompt_tokens"] > 40_000
        assert "budget is 8,000 (--max-prompt-tokens)" in row["skipped"]["reason"]
    # a rerun with a larger budget checks them again and asks them
    _, again = _run(audit_dir, tmp_path / "raw", examinee, encoding=RAW, budget=PromptBudget(200_000, "--max-prompt-tokens"))
    assert again["n_answered"] == 3 and again["skipped"]["n"] == 0 and len({s for s, *_ in examinee.seen}) == 3
    # under the small budget the summary fits, and every request sent stays within it
    examinee = Recorder()
    _, fits = _run(audit_dir, tmp_path / "summary", examinee, encoding=text_encoding("summary"), budget=budget)
    assert fits["n_answered"] == 3 and examinee.seen
    assert max(estimate_request_tokens(msgs) for _, _, msgs, _ in examinee.seen) <= 8000


def test_a_turn_the_server_counted_too_long_is_not_sent(audit_dir: Path, tmp_path: Path) -> None:
    # the server says turn 0 took 7995 tokens: every later request is at least that plus what came since
    examinee = Recorder(prompt_tokens=7995)
    run_dir, results = _run(audit_dir, tmp_path / "run", examinee, encoding=text_encoding("summary"), budget=PromptBudget(8000, "test"))
    assert {index for _, index, *_ in examinee.seen} == {0}
    for row in run_dir.samples():
        assert row["turns"][0]["error"] is None
        assert all(t["error"].startswith("not sent: this turn needs about") and t["parse_reason"] == "no answer: not sent"
                   for t in row["turns"][1:])
    assert results["overall"]["turns"]["errors"] == sum(len(r["turns"]) - 1 for r in run_dir.samples())


def test_epochs_shuffle_the_options_and_measure_position_bias(audit_dir: Path, tmp_path: Path) -> None:
    truthful = Recorder()
    _, results = _run(audit_dir, tmp_path / "truth", truthful, encoding=text_encoding("summary"), epochs=3, seed=5)
    assert results["complete"] and results["epochs"]["agreement"]["samples_agree"] == 1.0  # the truth does not move
    shown = {(sid, index): [] for sid, index, *_ in truthful.seen}
    for sid, index, _, options in truthful.seen:
        shown[(sid, index)].append(options)
    assert any(len({tuple(o) for o in orders}) > 1 for orders in shown.values())  # the options did move
    assert all(sorted(orders[0]) == sorted(o) for orders in shown.values() for o in orders)
    biased = Recorder(first_option=True)
    run_dir, results = _run(audit_dir, tmp_path / "biased", biased, encoding=text_encoding("summary"), epochs=3, seed=5)
    block = results["epochs"]
    assert [p["n"] for p in block["per_epoch"]] == [3, 3, 3]
    assert block["agreement"]["samples_agree"] < 1.0 and block["unstable_samples"]
    assert sorted(r["id"] for r in run_dir.samples()) == sorted(f"{s}{e}" for s in ("af-neg-002", "af-pos-001", "avb1-pos-003")
                                                                    for e in ("", "#1", "#2"))
    # each epoch is scored against the options it showed: the first option is right exactly when it is the answer
    for row in run_dir.samples():
        for turn in row["turns"]:
            assert turn["correct"] == (turn["parsed"] == turn["answer"])
    epoch0 = [r for r in run_dir.samples() if r["epoch"] == 0]
    assert results["overall"]["n"] == len(epoch0) == 3  # the headline metrics are epoch 0's


def test_the_debugger_rebuilds_a_later_epoch_as_it_was_asked(audit_dir: Path, tmp_path: Path) -> None:
    from ecgtrace.agents.audit.examiner import format_prompt
    from ecgtrace.views.debugger import DebugSample, rebuild_state

    run_dir, _ = _run(audit_dir, tmp_path / "run", Recorder(first_option=True), encoding=text_encoding("summary"), epochs=2, seed=5)
    item = load_audit(audit_dir).items[0]
    row = next(r for r in run_dir.samples() if r["id"] == f"{item.id}#1")
    header = {"kind": "audit", "run_id": run_dir.run_id, "settings": {}, "identity": {
        "mode": "teacher", "modality": "text", "seed": 5, "text_encoding": text_encoding("summary").to_json()}}
    state = rebuild_state(DebugSample(tmp_path / "run", header, row), item.to_json(), audit_dir, 3)
    assert [format_prompt(t) for t in state["plan"]] == [t["prompt"] for t in row["turns"]]  # the shuffled options of epoch 1
    assert state["run"]["text"]["method"] == "summary"
