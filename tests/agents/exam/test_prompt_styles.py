"""Prompt styles: ecgtrace's lettered questions, ERB's full option texts, and the condensed chat."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ecgtrace.agents.exam.examinees import Examinee, Reply
from ecgtrace.agents.exam.parsing import parse_answer
from ecgtrace.agents.exam.prompt_styles import AUDIT_ERB, prompt_style
from ecgtrace.agents.audit.format import load_audit
from ecgtrace.graphs.audit_runner import run_audit
from ecgtrace.runlog import RunDir

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_erb_layout_lists_full_option_texts_without_letters():
    erb = prompt_style("erb")
    assert erb.prompt("Which range?", ["[200ms - 210ms]", "Above 240ms"]) == (
        "Question: Which range?\nThis question has one of the following options as the correct answer:\n"
        "- [200ms - 210ms]\n- Above 240ms\n\nAnswer with only the full text of the correct option, exactly as it is written above.")
    assert "one or more of the following options as correct answers" in erb.prompt("Which leads?", ["Lead V1", "Lead V2"], True)
    assert erb.answer(["Lead V1", "Lead V2"], ["Lead V1", "Lead V2"]) == "Lead V1, Lead V2"
    assert not erb.letters and "A." not in erb.prompt("Q?", ["Yes", "No"])


def test_condensed_history_keeps_only_the_question():
    for name, asked in (("erb", "Question: Present?"), ("lettered", "Present?")):
        style = prompt_style(name, condensed=True)
        assert style.prompt("Present?", ["Yes", "No"], current=False) == asked
        assert style.answer(["Yes", "No"], "No") == "No"  # no letters in sight: the option text
    assert prompt_style("lettered").answer(["Yes", "No"], "No") == "B. No"


def test_without_letters_a_bare_letter_is_not_an_answer():
    options = ["Yes", "No", "Further findings are required to confirm the diagnosis"]
    assert parse_answer("B", options).value == "No"
    assert not parse_answer("B", options, letters=False).ok
    assert parse_answer("Further findings are required to confirm the diagnosis", options, letters=False).value == options[2]
    assert parse_answer("Lead II, Lead aVF", ["Lead II", "Lead III", "Lead aVF"], True, letters=False).value == ["Lead II", "Lead aVF"]


class Recorder(Examinee):
    def __init__(self):
        self.seen = []

    async def answer(self, messages, turn):
        self.seen.append(messages)
        return Reply(raw=", ".join(turn["answer"]) if turn["multi"] else turn["answer"])


def test_erb_condensed_conversation(tmp_path):
    audit = load_audit(FIXTURES / "audit_small.jsonl")
    examinee = Recorder()
    run = RunDir.open(tmp_path / "run", {"t": 1})
    results = asyncio.run(run_audit(audit, run, examinee, modality="text", prompt_style="erb", condensed=True, limit=1))
    assert results["overall"]["completion"]["value"] == 1.0
    last = examinee.seen[-1]
    assert last[0] == {"role": "system", "content": AUDIT_ERB.system_prompt}
    users = [m["content"] for m in last if m["role"] == "user"]
    assert all("- " not in u.split("\n", 1)[-1] or "Signal as text" in u for u in users[1:-1])  # no option lines in the history
    assert all(u.startswith("Question: ") and "\n" not in u for u in users[1:-1])
    assert "This question has one" in users[-1] and "A. " not in users[-1]
    assistants = [m["content"] for m in last if m["role"] == "assistant"]
    assert all(not a.startswith(("A. ", "B. ", "C. ")) for a in assistants[1:])  # ground truth as option text
    assert run.samples()[0]["turns"][1]["prompt"].startswith("Question: ")


def test_image_prompts_state_what_the_paper_squares_mean():
    from ecgtrace.agents.audit.examiner import build_request
    from ecgtrace.tools.render import PAPER_NOTE

    audit = load_audit(FIXTURES / "audit_small.jsonl")
    item = audit.items[0]
    for style in ("lettered", "erb"):
        messages = build_request([], "Q?", item, audit.base_dir, "image", style)
        assert messages[0]["role"] == "system" and messages[0]["content"].endswith(PAPER_NOTE)
        assert [p["type"] for p in messages[1]["content"]] == ["text", "image_url", "text"]
    text_only = build_request([], "Q?", item, audit.base_dir, "text")
    assert PAPER_NOTE not in str(text_only)
