"""Shortcut probes: planted position and length biases are flagged; a balanced set is not."""

from __future__ import annotations

import itertools
import math
import json
import random
from pathlib import Path

import pytest
from scipy.stats import binom

from ecgtrace.agents.exam.bias import poisson_binomial_sf, probe
from ecgtrace.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"




def _item(i: int, task: str, options: list[str], answer: str, finding: str = "pvc") -> dict:
    return {"id": f"q{i:03d}", "split": "test", "task": task, "template_id": task, "question": f"Question {i}?", "options": options,
            "answer": answer, "answer_type": "integer", "event_kind": finding, "record": None, "window": None, "evidence": [],
            "modalities": {}, "provenance": {"source": "synthetic", "method": "test", "version": "1", "params": {}}}


def _write(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def balanced(n: int = 60, seed: int = 0) -> list[dict]:
    """Equal-length options, answer position uniform: nothing to find."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        options = [f"{v} ms" for v in rng.sample(range(1000, 9999), 4)]
        rows.append(_item(i, "closed_timing", options, options[i % 4]))
    return rows


def test_poisson_binomial_is_exact() -> None:
    assert poisson_binomial_sf(7, [0.25] * 20) == pytest.approx(float(binom.sf(6, 20, 0.25)), rel=1e-12)
    probs = [0.5, 0.25, 0.2, 0.25, 0.5, 1 / 7]
    for k in range(len(probs) + 2):
        brute = sum(
            float(math.prod(p if hit else 1 - p for p, hit in zip(probs, outcome)))
            for outcome in itertools.product([0, 1], repeat=len(probs)) if sum(outcome) >= k)
        assert poisson_binomial_sf(k, probs) == pytest.approx(brute, abs=1e-12)


def test_balanced_dataset_has_no_flags(tmp_path: Path) -> None:
    result = probe(_write(tmp_path / "ds", balanced()))
    assert result["flagged"] == []
    overall = next(g for g in result["groups"] if g["by"] == "all")
    assert overall["position"]["observed"] == [15, 15, 15, 15] and overall["position"]["expected"] == [15, 15, 15, 15]
    assert overall["prior"]["chance"] == pytest.approx(0.25)


def test_planted_position_bias_is_flagged(tmp_path: Path) -> None:
    rows = balanced()
    for row in rows[:30]:  # task closed_count: the answer is always option A
        row["task"] = "closed_count"
        row["answer"] = row["options"][0]
    result = probe(_write(tmp_path / "ds", rows))
    flagged = {(g["by"], g["group"]): g["flags"] for g in result["groups"] if g["flags"]}
    assert "position" in flagged[("task", "closed_count")]
    assert ("task", "closed_timing") not in flagged  # the other half stays balanced
    group = next(g for g in result["groups"] if g["group"] == "closed_count")
    assert group["position"]["observed"] == [30, 0, 0, 0] and group["position"]["p_holm"] < 1e-6


def test_planted_length_bias_is_flagged_and_the_prior_beats_chance(tmp_path: Path) -> None:
    rng = random.Random(1)
    rows = []
    for i in range(40):  # the answer is the longest option, at a balanced position
        short = [f"{v} ms" for v in rng.sample(range(1000, 9999), 3)]
        answer = f"{rng.randrange(1000, 9999)} ms, {rng.randrange(1000, 9999)} ms"
        options = short[:]
        options.insert(i % 4, answer)
        rows.append(_item(i, "closed_timing", options, answer, finding="pac" if i % 2 else "pvc"))
    result = probe(_write(tmp_path / "ds", rows))
    overall = next(g for g in result["groups"] if g["by"] == "all")
    assert set(overall["flags"]) == {"longest", "prior"}  # not "position": positions are balanced
    assert overall["longest"]["rate"] == 1.0 and overall["longest"]["chance"] == pytest.approx(0.25)
    assert overall["prior"]["accuracy"] == 1.0 and overall["prior"]["p_holm"] < 1e-6
    assert {g["group"] for g in result["groups"] if g["by"] == "finding" and "prior" in g["flags"]} == {"pac", "pvc"}


def test_audit_decisions_are_probed(tmp_path: Path) -> None:
    """The prior picks 'Further findings ...' (the longest decision option): flagged when that is mostly the truth."""
    from tests.support.audit_items import write_audit

    path = write_audit(tmp_path / "audit", 12, seed=0, loops=3)
    result = probe(path)
    decision = next(g for g in result["groups"] if g["source"] == "audit" and g["group"] == "audit:decision")
    assert decision["n"] == 36 and decision["position"]["fixed_options"]
    assert decision["prior"]["correct"] == 24  # 2 of 3 loops end with "Further findings are required ..."
    assert "prior" in decision["flags"] and "longest" in decision["flags"]


def test_cli_json_and_tables(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    folder = _write(tmp_path / "ds", balanced())
    assert main(["bias", str(folder), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["n_questions"] == 60 and data["flagged"] == []
    assert main(["bias", str(FIXTURES / "qa_small.jsonl")]) == 0
    assert "shortcut probes - qa" in capsys.readouterr().out
    assert main(["bias", str(tmp_path / "missing")]) == 2


def test_select_all_probe_flags_lead_questions_answered_by_every_lead(tmp_path):
    """A text-only policy 'select every option' must be caught when it beats 1/(2^n - 1)."""
    import json

    from ecgtrace.agents.exam.bias import probe

    rows = []
    for k in range(30):
        options = ["Yes", "No"]
        rows.append({"id": f"q{k}", "task": "closed_presence", "question": f"Is there a PVC in window {k}?",
                     "options": options, "answer": options[k % 2], "answer_type": "yes_no"})
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert not any("select_all" in line for line in probe(path)["flagged"])

    audit_lines = (FIXTURES / "audit_small.jsonl").read_text().splitlines()
    items = [json.loads(line) for line in audit_lines]
    leads_questions = 0
    for n, item in enumerate(items * 4):
        item = json.loads(json.dumps(item))
        item["id"] = f"{item['id']}-{n}"
        for loop in item["loops"]:
            for g in loop["grounding"]:
                if g["kind"] == "lead":
                    g["answer"] = list(g["options"])  # every lead, every time
                    leads_questions += 1
        (tmp_path / "audit").mkdir(exist_ok=True)
        with open(tmp_path / "audit" / "audit.jsonl", "a") as handle:
            handle.write(json.dumps(item) + "\n")
    assert leads_questions >= 5
    result = probe(tmp_path / "audit" / "audit.jsonl")
    assert any("grounding:lead" in line and "select_all" in line for line in result["flagged"])


def test_a_files_kind_is_what_its_items_declare_not_its_name(tmp_path: Path) -> None:
    from ecgtrace.contracts.datasets import kind_of_file
    from ecgtrace.errors import DatasetFormatError

    qa_named_like_audit = tmp_path / "audit_questions.jsonl"
    qa_named_like_audit.write_text("".join(json.dumps({**r, "format": "ecgtrace-qa-item/2", "finding": "pvc"}) + "\n"
                                           for r in ({k: v for k, v in row.items() if k != "event_kind"} for row in balanced(10))))
    result = probe(qa_named_like_audit)
    assert {g["source"] for g in result["groups"]} == {"qa"} and result["n_questions"] == 10
    audit_items = tmp_path / "items.jsonl"
    audit_items.write_text((FIXTURES / "audit_small.jsonl").read_text())  # format 1: the reasoning loops say so
    assert kind_of_file(audit_items) == "audit" and kind_of_file(FIXTURES / "qa_small.jsonl") == "qa"
    assert {g["source"] for g in probe(audit_items)["groups"]} == {"audit"}
    (tmp_path / "odd.jsonl").write_text('\n{"format": "someone-else/1", "id": "x"}\n')
    with pytest.raises(DatasetFormatError, match="unknown item format 'someone-else/1'"):
        kind_of_file(tmp_path / "odd.jsonl")
