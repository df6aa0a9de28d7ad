"""The main job end to end, in a shortened form (30 min record, a few items per examinee)."""

from __future__ import annotations

import json

from ecgtrace.cli import main


def test_demo_end_to_end_and_resume(tmp_path, capsys):
    out = tmp_path / "demo"
    argv = ["demo", "--out", str(out), "--hours", "0.5", "--limit", "12", "--max-images", "2", "--modality", "text"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert "how well each examinee reads the ECG" in first and "GT-RDA" in first
    assert "…" not in first  # nothing cut at the test's 80 columns
    chance = next(line for line in first.splitlines() if line.startswith("chance "))
    assert "50.0%" in chance  # Yes/No initial questions: a uniform guess is right half the time
    notes = " ".join(first.split())
    assert "oracle answers from the ground truth" in notes and "prior never sees the ECG" in notes
    assert "vs chance" in notes and "decisions have a prior of their own" in notes
    assert (out / "dataset" / "qa.jsonl").exists() and (out / "dataset" / "audit.jsonl").exists()
    results = {}
    for model in ("oracle", "random", "prior"):
        for kind in ("audit", "qa"):
            run = out / "runs" / f"{kind}-{model}"
            assert (run / "report.html").stat().st_size > 10_000
            results[kind, model] = json.loads((run / "results.json").read_text())
    oracle = results["audit", "oracle"]["overall"]
    assert oracle["ida"]["value"] == oracle["gt_rda"]["value"] == oracle["completion"]["value"] == 1.0
    assert oracle["depth"]["value"] == 4.0
    assert results["qa", "oracle"]["overall"]["closed_accuracy"]["value"] == 1.0
    assert results["audit", "random"]["overall"]["completion"]["value"] < 1.0

    # a second run reuses the record, the dataset and every finished sample
    assert main(argv) == 0
    second = capsys.readouterr().out
    assert "reusing the synthetic record" in second
    assert "nothing to do:" in second and "demo steps that did work" not in second
    for (kind, model), before in results.items():
        after = json.loads((out / "runs" / f"{kind}-{model}" / "results.json").read_text())
        assert after["overall"] == before["overall"]
