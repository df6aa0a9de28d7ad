"""The reasoning-audit graph and runner: scores, modes, humans, faults, crashes and resumes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ecgtrace.agents.audit.format import load_audit  # noqa: E402
from ecgtrace.agents.exam.examinees import Examinee, HumanExaminee, OracleExaminee, PriorExaminee, RandomExaminee, Reply  # noqa: E402
from ecgtrace.agents.audit.examiner import ecg_content, plan_turns, render_answer  # noqa: E402
from ecgtrace.cli import main  # noqa: E402
from ecgtrace.graphs import reasoning_audit  # noqa: E402
from ecgtrace.graphs.audit_runner import run_audit  # noqa: E402
from ecgtrace.metrics import wilson  # noqa: E402
from ecgtrace.runlog import RunDir  # noqa: E402
from tests.support.audit_items import write_audit  # noqa: E402
from tests.support.mock_openai import MockOpenAI, audit_oracle, turn_key  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "audit_small.jsonl"
SENTINEL = "sk-SENTINEL-77e2b1-never-write-me"
METRICS = ("ida", "gt_rda", "completion")


def audit_run(audit, path, examinee, **kwargs):
    run = RunDir.open(path, {"test": str(path)})
    results = asyncio.run(run_audit(audit, run, examinee, **kwargs))
    return run, results


class Scripted(Examinee):
    """Right on every turn except ``wrong`` (turn indices); records the messages it saw."""

    def __init__(self, wrong=()):
        self.wrong = set(wrong)
        self.seen = []

    async def answer(self, messages, turn):
        self.seen.append((turn["sample_id"], turn["index"], messages))
        if turn["index"] in self.wrong:
            other = [o for o in turn["options"] if o != turn["answer"] and [o] != turn["answer"]]
            return Reply(raw=other[0])
        return Reply(raw=", ".join(turn["answer"]) if turn["multi"] else turn["answer"])


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return load_audit(write_audit(tmp_path_factory.mktemp("gen"), 120, seed=11))


# ----------------------------------------------------------------- scoring

@pytest.mark.parametrize("mode", ["teacher", "stop"])
def test_oracle_scores_100_on_every_metric(tmp_path, mode):
    audit = load_audit(FIXTURE)
    _, results = audit_run(audit, tmp_path / "run", OracleExaminee(), mode=mode, modality="text")
    for block in [results["overall"], *results["per_diagnosis"].values()]:
        assert all(block[m]["value"] == 1.0 for m in METRICS)
        assert block["depth"]["value"] == 4.0
        assert all(s["value"] == 1.0 for s in block["stages"].values())
    assert results["complete"] and results["overall"]["n"] == 3


def test_oracle_through_chatopenai_and_http_scores_100(tmp_path, monkeypatch):
    monkeypatch.setenv("ECG_KEY", SENTINEL)
    audit = load_audit(FIXTURE)
    with MockOpenAI(audit_oracle(audit.items)) as server:
        code = main(["audit", str(FIXTURE), "--model", "openai:mock", "--base-url", server.url, "--api-key-env", "ECG_KEY",
                     "--modality", "text", "--run", str(tmp_path / "run"), "--quiet"])
    assert code == 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert all(results["overall"][m]["value"] == 1.0 for m in METRICS) and results["overall"]["depth"]["value"] == 4.0
    rows = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert all(t["tokens"]["total_tokens"] > 0 for row in rows for t in row["turns"])


def test_random_lands_on_chance(tmp_path, generated):
    _, results = audit_run(generated, tmp_path / "run", RandomExaminee(seed=5), modality="text", concurrency=16)
    chance = {"initial": 1 / 2, "criterion": 1 / 5, "finding": 1 / 2, "grounding:lead": 1 / 7,
              "grounding:wave": 1 / 4, "grounding:measurement": 1 / 4, "decision": 1 / 3}
    # 8 intervals at once: Bonferroni-corrected Wilson intervals (z for 1 - 0.05/8), so that
    # the test holds for any seed 95% of the time rather than 66%
    z = 2.734
    stages = results["overall"]["stages"]
    for stage, p in chance.items():
        lo, hi = wilson(stages[stage]["k"], stages[stage]["n"], z=z)
        assert lo <= p <= hi, (stage, stages[stage], p)
    lo, hi = wilson(results["overall"]["ida"]["k"], results["overall"]["ida"]["n"], z=z)
    assert lo <= 0.5 <= hi
    # and the reported 95% interval is the plain Wilson interval
    assert stages["initial"]["ci95"] == pytest.approx(list(wilson(stages["initial"]["k"], stages["initial"]["n"])), abs=1e-6)


def test_prior_answers_the_longest_option(tmp_path, generated):
    _, results = audit_run(generated, tmp_path / "run", PriorExaminee(), modality="text", concurrency=16, limit=40)
    positives = sum(it.label for it in generated.items[:40])
    assert results["overall"]["ida"]["k"] == positives  # always "Yes"
    assert results["overall"]["stages"]["finding"]["k"] == sum(  # always "Yes"
        loop.finding.answer == "Yes" for it in generated.items[:40] for loop in it.loops)


# ------------------------------------------------------------------- modes

def test_teacher_forcing_history(tmp_path):
    audit = load_audit(FIXTURE)
    examinee = Scripted(wrong={0, 2, 4})
    run, _ = audit_run(audit, tmp_path / "run", examinee, mode="teacher", modality="both", limit=2)
    seen = {(sid, idx): msgs for sid, idx, msgs in examinee.seen}
    turns = {row["id"]: row["turns"] for row in run.samples()}["af-pos-001"]
    assert [t["correct"] for t in turns[:6]] == [False, True, False, True, False, True]
    last = seen[("af-pos-001", 9)]
    assert last[0]["role"] == "system"
    first_user = last[1]["content"]
    assert first_user[1]["type"] == "image_url" and first_user[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert "Signal as text" in first_user[0]["text"]
    assistant = [m["content"] for m in last if m["role"] == "assistant"]
    assert assistant[0] == turns[0]["raw"]  # the model's own initial answer stays
    plan = plan_turns(next(it for it in audit.items if it.id == "af-pos-001"))
    assert assistant[1:] == [render_answer(plan[i]) for i in range(1, 9)]  # then the ground truth, right or wrong
    assert assistant[2] == "A. Yes" and assistant[3] == "A. MLII, B. V1, C. V5"
    # only the first user message carries the ECG
    assert all(isinstance(m["content"], str) for m in last[2:])


def test_stop_mode_stops_at_first_error_after_the_initial(tmp_path):
    audit = load_audit(FIXTURE)
    examinee = Scripted(wrong={0, 4})  # initial wrong (does not stop), then the lead grounding
    run, results = audit_run(audit, tmp_path / "run", examinee, mode="stop", modality="text", limit=1)
    turns = run.samples()[0]["turns"]
    assert [t["asked"] for t in turns] == [True] * 5 + [False] * 5
    assert [t["correct"] for t in turns[:5]] == [False, True, True, True, False]
    assert results["overall"]["decision_acc"]["n"] == 0  # no decision was reached
    assert (results["overall"]["gt_rda"]["k"], results["overall"]["gt_rda"]["n"]) == (0, 1)  # the last decision never reached: wrong
    assert results["overall"]["depth"]["value"] == pytest.approx((2 + 1 / 2 + 0) / 2)  # second loop never reached


def test_human_answers_through_an_interrupt(tmp_path):
    audit = load_audit(FIXTURE)

    plans = {it.id: plan_turns(it) for it in audit.items}
    asked = []

    def ask_human(payload):
        asked.append(payload)
        turn = plans[payload["sample_id"]][payload["turn"]]
        assert payload["prompt"].startswith(turn["question"]) and payload["of"] == len(plans[payload["sample_id"]])
        return ", ".join(turn["answer"]) if turn["multi"] else turn["answer"]

    _, results = audit_run(audit, tmp_path / "run", HumanExaminee(), modality="text", ask_human=ask_human)
    assert len(asked) == sum(len(p) for p in plans.values())
    assert all(results["overall"][m]["value"] == 1.0 for m in METRICS)


def test_a_pending_interrupt_is_resumed_by_the_next_run(tmp_path):
    audit = load_audit(FIXTURE)

    plans = {it.id: plan_turns(it) for it in audit.items}
    answered = []

    def truth(payload):
        turn = plans[payload["sample_id"]][payload["turn"]]
        answered.append((payload["sample_id"], payload["turn"]))
        return ", ".join(turn["answer"]) if turn["multi"] else turn["answer"]

    def walks_away(payload):
        if len(answered) == 4:
            raise KeyboardInterrupt
        return truth(payload)

    with pytest.raises(KeyboardInterrupt):
        audit_run(audit, tmp_path / "run", HumanExaminee(), modality="text", ask_human=walks_away)
    assert len(answered) == 4
    run, results = audit_run(audit, tmp_path / "run", HumanExaminee(), modality="text", ask_human=truth)
    total = sum(len(p) for p in plans.values())
    assert len(answered) == total and len(set(answered)) == total  # no turn asked twice
    assert all(results["overall"][m]["value"] == 1.0 for m in METRICS)


def test_exported_graph_and_plain_json_state(tmp_path):
    assert reasoning_audit.graph.checkpointer is None
    from langgraph.checkpoint.memory import InMemorySaver

    audit = load_audit(FIXTURE)
    graph = reasoning_audit.build_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    run_cfg = {"mode": "teacher", "modality": "both", "base_dir": str(audit.base_dir)}
    asyncio.run(graph.ainvoke({"item": audit.items[0].to_json(), "run": run_cfg}, config,
                              context=reasoning_audit.AuditContext(examinee=OracleExaminee())))
    state = graph.get_state(config).values
    text = json.dumps(state)  # plain JSON all the way down
    assert "base64" not in text and state["done"] and len(state["turns"]) == 10
    # as `langgraph dev` runs it: no checkpointer, no context -> the oracle answers
    out = asyncio.run(reasoning_audit.graph.ainvoke({"item": audit.items[1].to_json(), "run": {**run_cfg, "modality": "text"}}))
    assert all(t["correct"] for t in out["turns"])


# ---------------------------------------------------- faults, crashes, resume

def test_twenty_percent_faults_complete_and_every_failure_is_recorded(tmp_path):
    audit = load_audit(write_audit(tmp_path / "data", 24, seed=2))
    # an injected timeout sleeps far past the client's 0.8 s: on a starved 2-core machine the event loop can wake
    # late, and a reply that arrived by then would be read as an answer (seen once at 1.4 s)
    server = MockOpenAI(audit_oracle(audit.items), fault_rate=0.2, timeout_sleep_s=6.0, seed=4, keep_requests=100_000)
    with server:
        code = main(["audit", str(audit.path), "--model", "openai:mock", "--base-url", server.url, "--modality", "text",
                     "--run", str(tmp_path / "run"), "--timeout", "0.8", "--max-attempts", "1", "--concurrency", "12", "--quiet"])
    assert code == 0
    rows = {json.loads(line)["id"]: json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()}
    assert len(rows) == 24
    turns = [t for row in rows.values() for t in row["turns"]]
    intro_to_id = {ecg_content({**it.to_json(), "assets": {}}, ".", "text")[0]["text"].splitlines()[0]: it.id for it in audit.items}
    last_fault = {}  # the fault of the last request for each (sample, turn): the one the client read
    for body, fault in zip(server.requests, server.faults_log):
        intro, index = turn_key(body)
        last_fault[(intro_to_id[intro], index)] = fault
    injected = Counter(f for f in last_fault.values() if f)
    assert min(injected[k] for k in ("429", "500", "timeout", "garbage")) > 0 and sum(injected.values()) > 0.1 * len(turns)
    for (sid, index), fault in last_fault.items():
        turn = rows[sid]["turns"][index]
        if fault is None:
            continue
        assert not turn["correct"], (fault, turn)
        if fault == "garbage":  # an answer that names no option: a recorded parse failure
            assert turn["error"] or (not turn["parse_ok"] and "no option recognised" in turn["parse_reason"]), turn
        else:  # 429, 500, timeout: a recorded server error
            assert turn["error"].split(":")[0] in {"RateLimitError 429", "InternalServerError 500", "APITimeoutError"}, turn
    # every other turn was answered right (an unexpected error could only be a timeout on a loaded machine)
    assert all(t["correct"] for t in turns if not t["error"] and t["parse_ok"])
    errors = [t for t in turns if t["error"]]
    assert len(errors) >= injected["429"] + injected["500"] + injected["timeout"]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["overall"]["turns"]["errors"] == len(errors)


def test_retry_errors_runs_failed_samples_again_once(tmp_path):
    audit = load_audit(FIXTURE)
    args = ["audit", str(FIXTURE), "--model", "openai:mock", "--modality", "text", "--run", str(tmp_path / "run"),
            "--max-attempts", "1", "--quiet"]
    with MockOpenAI(audit_oracle(audit.items), fault_rate=0.3, faults=("500",), seed=1) as flaky:
        assert main([*args, "--base-url", flaky.url]) == 0
    first = json.loads((tmp_path / "run" / "results.json").read_text())
    assert first["overall"]["turns"]["errors"] > 0
    with MockOpenAI(audit_oracle(audit.items)) as healthy:
        assert main([*args, "--base-url", healthy.url]) == 0  # plain rerun: finished samples are kept as they are
        assert healthy.stats["requests"] == 0
        assert main([*args, "--base-url", healthy.url, "--retry-errors"]) == 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["overall"]["turns"]["errors"] == 0 and results["overall"]["completion"]["value"] == 1.0
    assert sorted(_sample_ids(tmp_path / "run")) == sorted(it.id for it in audit.items)


def _sample_ids(run_dir: Path) -> list[str]:
    return [json.loads(line)["id"] for line in (run_dir / "samples.jsonl").read_text().splitlines()]


def test_sigkill_midway_then_rerun_gives_identical_results(tmp_path):
    audit = load_audit(write_audit(tmp_path / "data", 20, seed=9))
    env = {**os.environ, "ECG_KEY": SENTINEL, "PYTHONPATH": str(ROOT)}
    with MockOpenAI(audit_oracle(audit.items), delay_s=0.02) as server:
        def cmd(run_dir):
            return [sys.executable, "-m", "ecgtrace.cli", "audit", str(audit.path), "--model", "openai:mock", "--base-url", server.url,
                    "--api-key-env", "ECG_KEY", "--modality", "text", "--concurrency", "4", "--run", str(run_dir), "--quiet"]

        killed = tmp_path / "killed"
        proc = subprocess.Popen(cmd(killed), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if (killed / "samples.jsonl").exists() and len((killed / "samples.jsonl").read_bytes().splitlines()) >= 5:
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        partial = _sample_ids(killed)
        assert 5 <= len(partial) < 20 and not (killed / "results.json").exists()
        with sqlite3.connect(killed / "checkpoints.sqlite") as db:  # threads caught mid-chain
            in_flight = {row[0] for row in db.execute("SELECT DISTINCT thread_id FROM checkpoints")}
        remaining_turns = sum(len(plan_turns(it)) for it in audit.items if it.id not in partial)
        requests_before = server.stats["requests"]

        previous = os.environ.get("ECG_KEY")
        os.environ["ECG_KEY"] = SENTINEL
        try:
            assert main(cmd(killed)[3:]) == 0  # the same command again, resumes
            resumed_requests = server.stats["requests"] - requests_before
            assert main(cmd(tmp_path / "clean")[3:]) == 0  # an uninterrupted reference run
        finally:
            if previous is None:
                os.environ.pop("ECG_KEY", None)
            else:
                os.environ["ECG_KEY"] = previous
    ids = _sample_ids(killed)
    assert len(ids) == len(set(ids)) == 20 and ids[: len(partial)] == partial
    # threads resumed at their last checkpoint: turns already answered were not asked again
    assert resumed_requests <= remaining_turns
    if in_flight:
        assert resumed_requests < remaining_turns
    assert (killed / "results.json").read_bytes() == (tmp_path / "clean" / "results.json").read_bytes()
    # the key never reaches any file of either run (header, samples, results, checkpoints)
    for run_dir in (killed, tmp_path / "clean"):
        for path in run_dir.rglob("*"):
            if path.is_file():
                assert SENTINEL.encode() not in path.read_bytes(), path


def test_rerun_skips_finished_samples_and_refuses_other_configs(tmp_path, capsys):
    args = ["audit", str(FIXTURE), "--model", "oracle", "--modality", "text", "--run", str(tmp_path / "run"), "--quiet"]
    assert main(args) == 0
    before = (tmp_path / "run" / "samples.jsonl").read_bytes()
    assert main(args) == 0
    assert (tmp_path / "run" / "samples.jsonl").read_bytes() == before
    capsys.readouterr()
    assert main([*args, "--mode", "stop"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "different dataset/config" in err and "Traceback" not in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(("argv", "message"), [
    (["audit", "missing.jsonl", "--model", "oracle", "--run", "R"], "audit file not found"),
    (["audit", str(FIXTURE), "--model", "oracle", "--run", "R", "--concurrency", "0"], "--concurrency must be at least 1"),
    (["audit", str(FIXTURE), "--model", "oracle", "--run", "R", "--modality", "image"], "has no assets.image"),
    (["audit", str(FIXTURE), "--model", "gpt-4o", "--run", "R", "--modality", "text"], "unknown model"),
    (["compare", "nowhere-a", "nowhere-b"], "not an audit run folder"),
])
def test_user_errors_are_one_line(tmp_path, capsys, argv, message):
    argv = [str(tmp_path / a) if a in ("R", "nowhere-a", "nowhere-b") else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and message in err and len(err.splitlines()) == 1


def test_compare_command(tmp_path, capsys):
    for name, model in (("a", "oracle"), ("b", "random")):
        assert main(["audit", str(FIXTURE), "--model", model, "--modality", "text", "--run", str(tmp_path / name), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["shared_samples"] == 3 and out["tests"]["ida"]["n"] == 3 and out["tests"]["stage:criterion"]["n"] == 4


def test_state_is_parsed_into_the_contracts_at_the_node_boundary():
    """A format-1 item enters as plain JSON and leaves the plan node as the AuditItem contract's JSON; rows are TurnRows."""
    from ecgtrace.contracts import AuditItem, TurnRow

    raw = json.loads(FIXTURE.read_text().splitlines()[0])
    assert "fs" in raw["record"]
    out = asyncio.run(reasoning_audit.graph.ainvoke({"item": raw, "run": {"modality": "text", "base_dir": str(FIXTURE.parent)}}))
    assert out["item"] == AuditItem.model_validate(raw).to_json() and out["item"]["record"]["fs_hz"] == 250.0
    assert all(TurnRow.model_validate(t).to_json() == t for t in out["turns"])
    with pytest.raises(ValueError, match="unknown modality"):
        reasoning_audit.plan({"item": raw, "run": {"modality": "smell"}})
    with pytest.raises(ValueError):
        reasoning_audit.plan({"item": {**raw, "loops": []}})

