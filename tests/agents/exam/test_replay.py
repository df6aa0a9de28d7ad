"""``qa-eval --answers`` and ``audit --answers``: answers given before, scored again without asking any model.

A live run against the local mock server (some answers right, some wrong, one server error, a judge) is replayed
from its own samples: its ``results.json`` comes back byte for byte and the server sees no request.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ecgtrace.agents.exam.qa_runner import load_qa  # noqa: E402
from ecgtrace.cli import main  # noqa: E402
from tests.agents.exam.test_qa_runner import _question_of, dataset, oracle_policy  # noqa: E402,F401 (dataset: the QA fixture folder)
from tests.support.mock_openai import MockOpenAI, audit_oracle  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"


def _half_right(items: list[dict]):
    """The oracle on every other item, a wrong or empty reply on the rest: a run whose results are not all 100 %."""
    right = oracle_policy(items)
    wrong = {it["question"] for k, it in enumerate(items) if k % 2}

    def policy(body: dict) -> str:
        text = _question_of(body)
        if "Score bands" not in str(body["messages"][0]["content"]) and any(q in text for q in wrong):
            return "I cannot tell."
        return right(body)

    return policy


def test_a_live_runs_own_answers_give_its_results_byte_for_byte(dataset: Path, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    items = load_qa(dataset).items
    live = tmp_path / "live"
    with MockOpenAI(_half_right(items), fault_rate=0.15, faults=("500",), seed=2) as server:
        assert main(["qa-eval", str(dataset), "--model", "openai:mock", "--base-url", server.url, "--modality", "text", "--timeout", "13",
                     "--max-attempts", "1", "--judge", "openai:mock-judge", "--run", str(live), "--quiet"]) == 0
        asked = server.stats["requests"]
        for source in (live, live / "samples.jsonl"):
            replayed = tmp_path / f"replayed-{source.name}"
            assert main(["qa-eval", str(dataset), "--answers", str(source), "--run", str(replayed), "--quiet"]) == 0
            assert (replayed / "results.json").read_bytes() == (live / "results.json").read_bytes()
        assert server.stats["requests"] == asked  # nothing was asked again, the judge neither
    results = json.loads((live / "results.json").read_text())
    assert 0.0 < results["overall"]["closed_accuracy"]["value"] < 1.0  # the run is not trivially all right
    rows = [json.loads(line) for line in (live / "samples.jsonl").read_text().splitlines()]
    assert any(r["judge"] for r in rows) and any(t.get("error") for r in rows for t in r["turns"])  # a server error is replayed too
    # the replay's header names the answers it scored; a judge on top of a run's own verdicts is refused
    header = json.loads((tmp_path / "replayed-live" / "header.json").read_text())
    assert header["settings"]["answers"]["from_run"] == json.loads((live / "header.json").read_text())["run_id"]
    assert main(["qa-eval", str(dataset), "--answers", str(live), "--judge", "openai:x", "--run", str(tmp_path / "r3"), "--quiet"]) == 2
    assert "leave out --judge" in capsys.readouterr().err


def test_id_answer_lines_are_scored_and_a_missing_answer_is_wrong(dataset: Path, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    items = load_qa(dataset).items
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"id": it["id"], "answer": it["answer"]}) + "\n" for it in items[1:]))
    run = tmp_path / "run"
    assert main(["qa-eval", str(dataset), "--answers", str(answers), "--run", str(run), "--quiet"]) == 0
    rows = {r["id"]: r for r in map(json.loads, (run / "samples.jsonl").read_text().splitlines())}
    assert set(rows) == {it["id"] for it in items}  # never skipped
    missing = rows[items[0]["id"]]
    assert missing["score"] == 0.0 and missing["correct"] is False and "no recorded answer" in json.dumps(missing)
    for it in items[1:]:
        assert rows[it["id"]]["score"] >= 99.3, it["id"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "nope", "answer": "A"}) + "\n")
    assert main(["qa-eval", str(dataset), "--answers", str(bad), "--run", str(tmp_path / "r2"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "'nope' is no item of the dataset" in err
    twice = tmp_path / "twice.jsonl"
    twice.write_text(2 * (json.dumps({"id": items[0]["id"], "answer": "A"}) + "\n"))
    assert main(["qa-eval", str(dataset), "--answers", str(twice), "--run", str(tmp_path / "r4"), "--quiet"]) == 2
    assert "a second answer" in capsys.readouterr().err
    assert main(["qa-eval", str(dataset), "--answers", str(answers), "--model", "random", "--run", str(tmp_path / "r5"), "--quiet"]) == 2
    assert "takes no --model" in capsys.readouterr().err


def test_an_audit_runs_own_answers_give_its_results_byte_for_byte(tmp_path: Path) -> None:
    from ecgtrace.agents.audit.format import load_audit

    audit = load_audit(FIXTURES / "audit_small.jsonl")
    live = tmp_path / "live"
    with MockOpenAI(audit_oracle(audit.items), fault_rate=0.2, faults=("garbage",), seed=3) as server:
        assert main(["audit", str(audit.path), "--model", "openai:mock", "--base-url", server.url, "--modality", "text", "--timeout", "14",
                     "--run", str(live), "--quiet"]) == 0
        asked = server.stats["requests"]
        replayed = tmp_path / "replayed"
        assert main(["audit", str(audit.path), "--answers", str(live), "--run", str(replayed), "--quiet"]) == 0
        assert server.stats["requests"] == asked
    assert (replayed / "results.json").read_bytes() == (live / "results.json").read_bytes()


def test_a_run_with_epochs_a_limit_an_encoding_and_a_budget_is_replayed_as_it_was_asked(dataset: Path, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """Options shuffled per epoch (seeded), a stratified --limit, compact text and a budget that skips some samples: all kept."""
    items = load_qa(dataset).items
    live = tmp_path / "live"
    with MockOpenAI(_half_right(items)) as server:
        assert main(["qa-eval", str(dataset), "--model", "openai:mock", "--base-url", server.url, "--modality", "text", "--timeout", "18",
                     "--epochs", "2", "--seed", "4", "--limit", "8", "--text-encoding", "compact", "--max-prompt-tokens", "430",
                     "--price-in", "1", "--price-out", "2", "--run", str(live), "--quiet"]) == 0
        asked = server.stats["requests"]
        rows = [json.loads(line) for line in (live / "samples.jsonl").read_text().splitlines()]
        assert {r.get("epoch") or 0 for r in rows} == {0, 1} and any(r.get("skipped") for r in rows) and not all(r.get("skipped") for r in rows)
        replayed = tmp_path / "replayed"
        assert main(["qa-eval", str(dataset), "--answers", str(live), "--price-in", "1", "--price-out", "2", "--run", str(replayed),
                     "--quiet"]) == 0
        assert server.stats["requests"] == asked
    assert (replayed / "results.json").read_bytes() == (live / "results.json").read_bytes()
    again = [json.loads(line) for line in (replayed / "samples.jsonl").read_text().splitlines()]
    assert sorted((r["id"], r["score"], r["correct"]) for r in again) == sorted((r["id"], r["score"], r["correct"]) for r in rows)
    assert main(["qa-eval", str(dataset), "--answers", str(live), "--epochs", "3", "--run", str(tmp_path / "r2"), "--quiet"]) == 2
    assert "leave out --limit, --sample-id and --epochs" in capsys.readouterr().err
