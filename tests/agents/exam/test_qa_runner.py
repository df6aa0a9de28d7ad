"""qa-eval end to end: the CLI, a real ChatOpenAI against the local mock server, resume, judge, no key on disk."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ecgtrace.agents.exam.qa_runner import build_messages, check_modality, load_qa  # noqa: E402
from ecgtrace.cli import main  # noqa: E402
from ecgtrace.errors import EcgTraceError  # noqa: E402
from tests.support.mock_openai import MockOpenAI  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
SENTINEL = "sk-SENTINEL-qa-7d2e-never-on-disk"


@pytest.fixture()
def dataset(tmp_path: Path) -> Path:
    from tests.support.qa_items import copy_small_qa

    return copy_small_qa(tmp_path / "ds")


def _question_of(body: dict) -> str:
    """All text of the last user message (the question may sit before or after the ECG parts)."""
    user = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    return "\n".join(p.get("text", "") for p in user) if isinstance(user, list) else user


def oracle_policy(items: list[dict]):
    """The truth for each question; a fixed verdict when the judge asks."""
    table = {}
    for item in items:
        table[item["question"]] = item["answer"] if item.get("options") is None else f"**{item['answer']}**"

    def policy(body: dict) -> str:
        if "Score bands" in str(body["messages"][0]["content"]):  # a judge scores the criteria its rubric lists
            ids = re.findall(r"^- (\w+) \(weight", str(body["messages"][0]["content"]), re.M)
            return json.dumps({"criteria": {k: 80 for k in ids}, "score": 80, "hallucinations": []})
        text = _question_of(body)
        return next((answer for question, answer in table.items() if question in text), "I cannot tell.")

    return policy


def test_messages_per_modality(dataset: Path) -> None:
    qa = load_qa(dataset)
    item = {k: v for k, v in qa.items[0].items() if k != "messages"}
    text = build_messages(item, qa.base_dir, "text")[1]["content"]
    image = build_messages(item, qa.base_dir, "image")[1]["content"]
    both = build_messages(item, qa.base_dir, "both")[1]["content"]
    kinds = lambda parts: [p["type"] for p in parts]  # noqa: E731
    assert kinds(text) == ["text", "text", "text"] and "Signal as text" in text[1]["text"]
    assert kinds(image) == ["text", "image_url", "text"] and image[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert kinds(both) == ["text", "text", "image_url", "text"]
    assert text[-1]["text"].endswith("Answer with the letter of one option.") and "A. Yes" in text[-1]["text"]
    prebuilt = {**item, "messages": [{"role": "user", "content": both}]}
    assert kinds(build_messages(prebuilt, qa.base_dir, "text")[0]["content"]) == ["text", "text", "text"]
    assert kinds(build_messages(prebuilt, qa.base_dir, "image")[0]["content"]) == ["text", "image_url", "text"]


def test_dataset_messages_per_modality_with_relative_image_paths(dataset: Path) -> None:
    """The dataset writes ``messages = {"text": [...], "image": [...]}`` with image URLs relative to its folder."""
    qa = load_qa(dataset)
    item = {**qa.items[0], "messages": {
        "text": [{"role": "user", "content": [{"type": "text", "text": "Q?\n\nECG signal (text):\n0.1,0.2"}]}],
        "image": [{"role": "user", "content": [{"type": "text", "text": "Q?"}, {"type": "image_url", "image_url": {"url": "qa_assets/w120.png"}}]}]}}
    text = build_messages(item, qa.base_dir, "text")
    image = build_messages(item, qa.base_dir, "image")
    both = build_messages(item, qa.base_dir, "both")
    assert [p["type"] for p in text[0]["content"]] == ["text"]
    assert image[0]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
    assert [p["type"] for p in both[0]["content"]] == ["text", "image_url"] and "ECG signal (text)" in both[0]["content"][0]["text"]
    assert item["messages"]["image"][0]["content"][1]["image_url"]["url"] == "qa_assets/w120.png"  # the item is not modified
    check_modality(item, qa.base_dir, "both")
    with pytest.raises(EcgTraceError, match="no messages.image"):
        check_modality({**item, "messages": {"text": item["messages"]["text"], "image": None}}, qa.base_dir, "image")


def test_bad_qa_files_are_one_line_errors(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text('{"id": "a", "task": "closed_count", "question": "q", "options": ["1", "2"], "answer": "3"}\n')
    with pytest.raises(EcgTraceError, match=r"qa.jsonl:1: answer '3' is not one of the options"):
        load_qa(path)
    path.write_text('{"id": "a", "task": "t", "question": "q", "answer": "1"}\n{"id": "a", "task": "t", "question": "q", "answer": "1"}\n')
    with pytest.raises(EcgTraceError, match="qa.jsonl:2: duplicate id 'a'"):
        load_qa(path)


def test_qa_eval_mock_server_resume_judge_and_no_key(dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # noqa: ANN001
    items = load_qa(dataset).items
    monkeypatch.setenv("ECG_QA_KEY", SENTINEL)
    run_dir = tmp_path / "run"
    with MockOpenAI(oracle_policy(items)) as server:
        argv = ["qa-eval", str(dataset / "qa.jsonl"), "--model", "openai:mock-vl", "--base-url", server.url, "--api-key-env", "ECG_QA_KEY",
                "--modality", "both", "--concurrency", "4", "--timeout", "10", "--judge", "openai:mock-judge", "--run", str(run_dir), "--quiet"]
        assert main([*argv, "--limit", "6"]) == 0
        first = json.loads((run_dir / "results.json").read_text())
        assert first["n_finished"] == 6 and first["complete"]
        requests_before = server.stats["requests"]
        # another --max-tokens is another run identity: refused, nothing asked
        assert main([*argv, "--limit", "6", "--max-tokens", "7"]) == 2
        assert "different dataset/config" in capsys.readouterr().err
        assert server.stats["requests"] == requests_before
        # which items are asked is not part of it: a larger --limit grows the same folder and asks only the new items
        argv[argv.index("--timeout") + 1] = "13"
        assert main([*argv, "--limit", "9"]) == 0
        grown = json.loads((run_dir / "results.json").read_text())
        assert grown["n_finished"] == 9 and grown["complete"]
        ids = [json.loads(line)["id"] for line in (run_dir / "samples.jsonl").read_text().splitlines()]
        assert len(ids) == len(set(ids)) == 9
        from ecgtrace.agents.exam.preflight import PREFLIGHT_PROMPT

        asked_now = [b for b in server.requests[requests_before:]  # the examinee's turns: not the judge's, not the endpoint checks
                     if "Score bands" not in str(b["messages"][0]["content"]) and b["messages"][0]["content"] != PREFLIGHT_PROMPT]
        assert len(asked_now) == 3  # the 6 finished items were not asked again
        argv[argv.index("--timeout") + 1] = "10"
        resumed = tmp_path / "run2"
        shutil.copytree(run_dir, resumed)
        header = json.loads((resumed / "header.json").read_text())
        assert header["identity"]["kind"] == "qa" and header["settings"]["api_key_env"] == "ECG_QA_KEY"
        # a full run in a new folder, then a rerun that must ask nothing. Each in-process run gets its own
        # --timeout: langchain-openai caches its async httpx client per (base_url, timeout) across event loops,
        # so a second asyncio.run with the same key would reuse a client bound to a closed loop.
        full = tmp_path / "full"
        argv[argv.index(str(run_dir))] = str(full)
        argv[argv.index("--timeout") + 1] = "11"
        assert main(argv) == 0
        asked = server.stats["requests"]
        judge_calls = sum(1 for body in server.requests if "Score bands" in str(body["messages"][0]["content"]))
        argv[argv.index("--timeout") + 1] = "12"
        assert main(argv) == 0
        assert server.stats["requests"] == asked  # resumed: every sample was finished
    rows = [json.loads(line) for line in (full / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == len(items) == len({r["id"] for r in rows})
    results = json.loads((full / "results.json").read_text())
    assert results["overall"]["closed_accuracy"]["value"] == 1.0
    for task, block in results["per_task"].items():
        assert block["mean_score"]["value"] >= 99.3, task
    judged = [r for r in rows if r["judge"]]
    assert {r["task"] for r in judged} == {"report_summary", "report_statistics", "open_evidence", "open_diagnosis"}
    assert judge_calls >= 1 and all(r["judge"]["ok"] and r["judge"]["score"] == 80.0 for r in judged)
    assert results["per_task"]["report_summary"]["judge"]["score"]["value"] == 80.0
    for path in list(run_dir.rglob("*")) + list(full.rglob("*")):
        if path.is_file():
            assert SENTINEL not in path.read_text(errors="ignore"), path


def test_random_examinee_on_open_questions_scores_the_floor(dataset: Path, tmp_path: Path) -> None:
    """Baselines have no options to pick on open questions: they say so, and score the floor without an error."""
    assert main(["qa-eval", str(dataset), "--model", "random", "--modality", "text", "--run", str(tmp_path / "r"), "--quiet"]) == 0
    rows = {r["task"]: r for r in map(json.loads, (tmp_path / "r" / "samples.jsonl").read_text().splitlines())}
    assert rows["open_count"]["turns"][0]["error"] is None
    assert rows["open_count"]["score"] < 1 and rows["open_count"]["correct"] is False
    assert rows["closed_presence"]["turns"][0]["error"] is None


def test_killed_run_resumes_without_losing_or_repeating_samples(dataset: Path, tmp_path: Path) -> None:
    """A run killed after 5 answers keeps them; the rerun asks only the rest; nothing is counted twice."""
    import asyncio

    from ecgtrace.agents.exam.examinees import Examinee, Reply
    from ecgtrace.agents.exam.qa_runner import identity_for, run_qa
    from ecgtrace.runlog import RunDir

    class Crashing(Examinee):
        name = "crashing"

        def __init__(self, crash_after: int | None) -> None:
            self.asked: list[str] = []
            self.crash_after = crash_after

        async def answer(self, messages, turn):  # noqa: ANN001
            if self.crash_after is not None and len(self.asked) >= self.crash_after:
                raise KeyboardInterrupt
            self.asked.append(turn["sample_id"])
            return Reply(raw=str(turn["answer"]), latency_ms=2.0, usage={"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12})

    qa = load_qa(dataset)
    identity = identity_for(qa, model="crashing", modality="text", seed=0, limit=None, max_tokens=None, judge=None)
    first = Crashing(crash_after=5)
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(run_qa(qa, RunDir.open(tmp_path / "run", identity), first, modality="text", concurrency=1))
    kept = [json.loads(line)["id"] for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert kept == first.asked[:5]
    second = Crashing(crash_after=None)
    results = asyncio.run(run_qa(qa, RunDir.open(tmp_path / "run", identity), second, modality="text", concurrency=3))
    assert sorted(second.asked) == sorted(set(i["id"] for i in qa.items) - set(kept))
    assert results["n_finished"] == len(qa.items) and results["complete"]
    assert results["overall"]["usage"]["tokens"]["total_tokens"] == 12 * len(qa.items)
    assert results["overall"]["usage"]["mean_latency_ms"] == 2.0


def test_human_examinee_answers_at_the_prompt(dataset: Path) -> None:
    import asyncio

    from ecgtrace.agents.exam.examinees import HumanExaminee
    from ecgtrace.agents.exam.qa_runner import run_one

    qa = load_qa(dataset)
    item = next(i for i in qa.items if i["task"] == "closed_count")
    asked = []
    row = asyncio.run(run_one(item, qa.base_dir, HumanExaminee(), "both", ask_human=lambda p: asked.append(p) or "B"))
    assert asked[0]["sample_id"] == item["id"] and "[image]" in asked[0]["prompt"] and "B. 2" in asked[0]["prompt"]
    assert row["correct"] and row["turns"][0]["raw"] == "B"


def test_items_without_the_modality_stop_the_run_or_are_skipped(dataset: Path, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    rows = [json.loads(line) for line in (dataset / "qa.jsonl").read_text().splitlines()]
    rows[1] = {**rows[1], "modalities": {"text": rows[1]["modalities"]["text"], "image": [], "video": None}}
    (dataset / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["qa-eval", str(dataset), "--model", "oracle", "--modality", "image", "--quiet"]
    assert main([*argv, "--run", str(tmp_path / "a")]) == 2
    assert "has no modalities.image" in capsys.readouterr().err
    assert main([*argv, "--run", str(tmp_path / "b"), "--skip-unavailable"]) == 0
    results = json.loads((tmp_path / "b" / "results.json").read_text())
    assert results["n_items"] == len(rows) - 1 and results["complete"]
