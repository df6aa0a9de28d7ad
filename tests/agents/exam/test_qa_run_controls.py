"""QA items and both commands under the run controls: stored messages re-encoded, epochs, a server's context, tokens and cost."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ecgtrace.agents.exam.examinees import Examinee, Reply  # noqa: E402
from ecgtrace.agents.exam.messages import dataset_messages  # noqa: E402
from ecgtrace.agents.exam.qa_runner import build_messages, identity_for, load_qa, run_qa  # noqa: E402
from ecgtrace.cli import main  # noqa: E402
from ecgtrace.contracts import QAItem  # noqa: E402
from ecgtrace.runlog import RunDir  # noqa: E402
from ecgtrace.tools.text_encodings import RAW, text_encoding  # noqa: E402
from tests.support.mock_openai import MockOpenAI, audit_oracle  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture()
def qa_dir(tmp_path: Path, synth_record) -> Path:
    """Six closed items on one 10 s window of the synthetic record, with the messages a built dataset stores."""
    from ecgtrace.tools.records import open_record, read_window
    from ecgtrace.tools.render import signal_to_text

    folder = tmp_path / "qa"
    (folder / "assets").mkdir(parents=True)
    info = open_record(synth_record.record_path)
    (folder / "assets" / "w.txt").write_text(signal_to_text(read_window(info, 120.0, 130.0), record="holter"))
    shutil.copy(FIXTURES / "qa_assets" / "w120.png", folder / "assets" / "w.png")
    record = {"db": "synthetic", "id": "holter", "path": str(synth_record.record_path), "fs_hz": 250.0, "leads": ["MLII", "V1", "V5"],
              "duration_s": 1800.0}
    rows = []
    for k in range(6):
        options = ["1", "2", "3", "4"]
        row = {"format": "ecgtrace-qa-item/2", "id": f"q{k}", "task": "closed_count" if k % 2 else "closed_presence",
               "question": f"Question {k}: how many PVCs?", "options": options, "answer": options[k % 4], "answer_type": "integer",
               "record": record, "window": {"t0_s": 120.0, "t1_s": 130.0},
               "modalities": {"text": "assets/w.txt", "image": ["assets/w.png"], "video": None}}
        row["messages"] = dataset_messages(row, folder)
        rows.append(QAItem.model_validate(row).to_json())
    (folder / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _texts(messages: list[dict[str, Any]]) -> str:
    out = []
    for m in messages:
        content = m["content"]
        out += [content] if isinstance(content, str) else [p.get("text", "") for p in content if p.get("type") == "text"]
    return "\n".join(out)


def test_stored_messages_show_the_chosen_encoding_of_the_same_window(qa_dir: Path) -> None:
    qa = load_qa(qa_dir)
    item = qa.items[0]
    raw = build_messages(item, qa.base_dir, "text")
    assert raw == item["messages"]["text"] and "# format: ecgtrace-signal-text/1" in _texts(raw)
    compact = build_messages(item, qa.base_dir, "text", text_encoding("compact", 100, "MLII"))
    text = _texts(compact)
    assert "# format: ecgtrace-signal-compact/1" in text and "ecgtrace-signal-text/1" not in text
    assert "# t0_s: 120 " in text and "# leads: MLII\n" in text and text.startswith("Question 0: how many PVCs?\nOptions:")
    both = build_messages(item, qa.base_dir, "both", text_encoding("summary"))
    assert "# format: ecgtrace-beat-summary/1" in _texts(both)
    assert any(p.get("type") == "image_url" for m in both if isinstance(m["content"], list) for p in m["content"])
    image = build_messages(item, qa.base_dir, "image", text_encoding("summary"))
    assert "beat-summary" not in _texts(image)
    assert json.loads((qa_dir / "qa.jsonl").read_text().splitlines()[0])["messages"] == item["messages"]  # the item is never changed


class FirstOption(Examinee):
    """Always the first option shown: position bias in its purest form."""

    name = "first"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def answer(self, messages: list[dict[str, Any]], turn: dict[str, Any]) -> Reply:
        self.prompts.append(_texts(messages))
        return Reply(raw=turn["options"][0], usage={"prompt_tokens": 100, "completion_tokens": 2, "total_tokens": 102})


def test_epochs_rewrite_the_stored_options_and_score_what_was_shown(qa_dir: Path, tmp_path: Path) -> None:
    qa = load_qa(qa_dir)
    run = RunDir.open(tmp_path / "run", identity_for(qa, model="first", modality="text", seed=2, max_tokens=None, judge=None))
    examinee = FirstOption()
    results = asyncio.run(run_qa(qa, run, examinee, modality="text", epochs=4, seed=2, concurrency=1,
                                 pricing={"first": {"in": 3.0, "out": 15.0}}))
    rows = run.samples()
    assert len(rows) == 24 and results["complete"]
    for row in rows:
        shown = row["item"]["options"]
        question = f"Question {row['id'].split('#')[0][1:]}: how many PVCs?\nOptions:\n" + "\n".join(f"{'ABCD'[i]}. {o}" for i, o in enumerate(shown))
        assert any(question in prompt for prompt in examinee.prompts)  # the stored prompt, with the options in the shown order
        assert row["correct"] == (shown[0] == json.loads((qa_dir / "qa.jsonl").read_text().splitlines()[int(row["id"][1])])["answer"])
    epoch0 = [r for r in rows if r["epoch"] == 0]
    assert [r["item"]["options"] for r in epoch0] == [["1", "2", "3", "4"]] * 6
    assert results["overall"]["closed_accuracy"]["k"] == 2  # q0 and q4: the answer is first in the dataset's order
    block = results["epochs"]
    assert block["per_epoch"][0]["closed_accuracy"] == pytest.approx(2 / 6)
    assert block["agreement"]["samples_agree"] < 1.0
    usage = results["usage"]
    assert usage["requests"] == 24 and usage["tokens"] == {"prompt_tokens": 2400, "completion_tokens": 48, "total_tokens": 2448}
    assert usage["cost_usd"] == pytest.approx(2400 * 3.0 / 1e6 + 48 * 15.0 / 1e6)


def test_qa_eval_fits_a_servers_context_instead_of_failing(qa_dir: Path, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """A server with an 8,192-token context: raw text is skipped, never sent; the summary is asked and nothing fails."""
    qa = load_qa(qa_dir)
    answers = {i["question"]: i["answer"] for i in qa.items}

    def policy(body: dict) -> str:
        text = _texts(body["messages"])
        return next((a for q, a in answers.items() if q in text), "?")

    with MockOpenAI(policy, context_tokens=8192) as server:
        base = ["qa-eval", str(qa_dir), "--model", "openai:mock", "--base-url", server.url, "--modality", "text", "--quiet"]
        assert main([*base, "--run", str(tmp_path / "raw")]) == 2
        err = capsys.readouterr().err
        assert "error: every one of the 6 sample(s) was skipped (6 token budget)" in err and "server context 8,192" in err
        assert server.stats["requests"] == 0 and server.stats["context_exceeded"] == 0
        assert main([*base, "--run", str(tmp_path / "summary"), "--text-encoding", "summary", "--price-in", "2", "--price-out", "8",
                     "--timeout", "11"]) == 0
        assert server.stats["context_exceeded"] == 0 and server.stats["answers"] == 6
    results = json.loads((tmp_path / "summary" / "results.json").read_text())
    assert results["overall"]["closed_accuracy"]["value"] == 1.0 and results["skipped"]["n"] == 0
    tokens = results["usage"]["tokens"]
    assert tokens["prompt_tokens"] > 0 and results["usage"]["cost_usd"] == pytest.approx(
        tokens["prompt_tokens"] * 2 / 1e6 + tokens["completion_tokens"] * 8 / 1e6, abs=1e-6)
    header = json.loads((tmp_path / "summary" / "header.json").read_text())
    assert header["identity"]["text_encoding"]["method"] == "summary" and "limit" not in header["identity"]


def test_audit_limit_grows_the_run_and_sample_ids_pick(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    from tests.support.audit_items import write_audit

    audit = write_audit(tmp_path / "audit", 12, seed=3)
    run = tmp_path / "run"
    base = ["audit", str(audit), "--model", "oracle", "--modality", "text", "--run", str(run), "--quiet"]
    assert main([*base, "--limit", "4"]) == 0
    first = (run / "samples.jsonl").read_text().splitlines()
    assert main([*base, "--limit", "9"]) == 0
    grown = (run / "samples.jsonl").read_text().splitlines()
    assert grown[:4] == first and len(grown) == len({json.loads(r)["id"] for r in grown}) == 9
    results = json.loads((run / "results.json").read_text())
    assert results["n_items"] == 9 and results["complete"]
    picked = tmp_path / "picked"
    ids = [json.loads(grown[0])["id"], json.loads(grown[5])["id"]]
    assert main(["audit", str(audit), "--model", "oracle", "--modality", "text", "--run", str(picked), "--quiet",
                 "--sample-id", ids[0], "--sample-id", ids[1]]) == 0
    assert [json.loads(r)["id"] for r in (picked / "samples.jsonl").read_text().splitlines()] == ids
    assert main(["audit", str(audit), "--model", "oracle", "--modality", "image", "--run", str(tmp_path / "x"), "--quiet",
                 "--text-encoding", "summary"]) == 2
    assert "apply to --modality text or both" in capsys.readouterr().err


def test_audit_over_the_mock_server_with_epochs_and_a_budget(tmp_path: Path, synth_record) -> None:
    """audit --epochs 2 with --max-prompt-tokens: the oracle policy answers every shown order; cost from the server's usage."""
    from ecgtrace.agents.audit.format import load_audit
    from tests.support.signal_items import write_signal_audit

    folder = write_signal_audit(tmp_path / "audit", synth_record.record_path)
    items = load_audit(folder).items
    with MockOpenAI(audit_oracle(items)) as server:
        argv = ["audit", str(folder), "--model", "openai:mock", "--base-url", server.url, "--modality", "text", "--run", str(tmp_path / "r"),
                "--text-encoding", "summary", "--max-prompt-tokens", "6000", "--epochs", "2", "--price-in", "1", "--price-out", "1", "--quiet"]
        assert main(argv) == 0
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    assert results["overall"]["completion"]["value"] == 1.0 and results["epochs"]["agreement"]["samples_agree"] == 1.0
    assert results["skipped"]["budget"] == {"max_prompt_tokens": 6000, "source": "--max-prompt-tokens"}
    usage = results["usage"]
    assert usage["per_model"]["openai:mock"]["requests"] == sum(len(r["turns"]) for r in
                                                                 map(json.loads, (tmp_path / "r" / "samples.jsonl").read_text().splitlines()))
    assert usage["cost_usd"] == pytest.approx(usage["tokens"]["total_tokens"] / 1e6, abs=1e-6)
