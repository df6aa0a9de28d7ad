"""A probe run says honestly how it went, like an audit: every turn failed is exit 3, --retry-errors asks the failed samples
again, and a sample skipped for the token budget is asked on the next run (probe rows keep all of that in their inner sample)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.agents.probe.test_probe import _probe_cli, dataset, probe_set  # noqa: F401  (the probe tests' set on the synthetic record)
from tests.support.mock_openai import MockOpenAI, fixed


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]


def _mock_cli(dataset, probe_set, run: Path, url: str, *extra: str) -> int:  # noqa: F811
    from ecgtrace.cli import main

    return main(["probe", str(dataset), "--model", "openai:mock", "--base-url", url, "--modality", "text", "--text-encoding", "summary",
                 "--max-attempts", "1", "--timeout", "5", "--run", str(run), "--probe-set", str(probe_set.root), "--max-per-group", "1", "--limit", "1", "--quiet", *extra])


def test_a_probe_run_in_which_every_turn_failed_exits_3_and_retry_errors_asks_again(dataset, probe_set, tmp_path, capsys) -> None:  # noqa: F811
    run = tmp_path / "run"
    with MockOpenAI(models=("mock",), fault_rate=1.0, faults=("500",)) as server:
        assert _mock_cli(dataset, probe_set, run, server.url) == 3
    err = capsys.readouterr().err
    assert "every one of the" in err and "nothing was scored" in err and "500" in err and "Traceback" not in err
    rows = _rows(run)
    assert rows and all(t.get("error") for r in rows for t in r["sample"]["turns"] if t.get("asked", True))
    with MockOpenAI(fixed("Yes"), models=("mock",)) as healthy:
        assert _mock_cli(dataset, probe_set, run, healthy.url, "--retry-errors") == 0
    again = _rows(run)
    assert len(again) == len(rows) and not any(t.get("error") for r in again for t in r["sample"]["turns"])


def test_a_budget_skipped_probe_sample_is_asked_on_the_next_run(dataset, probe_set, tmp_path, capsys) -> None:  # noqa: F811
    run = tmp_path / "run"
    # a raw 10 s 3-lead window does not fit 10,000 tokens: every sample is skipped, with its reason
    assert _probe_cli(dataset, probe_set, run, "--limit", "1", "--max-prompt-tokens", "10000") != 0
    capsys.readouterr()
    skipped = _rows(run)
    assert skipped and all(r["sample"].get("skipped") for r in skipped)
    assert _probe_cli(dataset, probe_set, run, "--limit", "1") == 0  # no budget now: the skipped samples are asked
    rows = _rows(run)
    assert sorted(r["id"] for r in rows) == sorted(r["id"] for r in skipped) and not any(r["sample"].get("skipped") for r in rows)
    results = json.loads((run / "results.json").read_text())
    assert results["skipped"]["n"] == 0 and results["n_answered"] == len(rows) and results["overall"]["sensitivity"]["value"] == 1.0
