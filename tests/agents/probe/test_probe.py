"""Counterfactual probes end to end on the synthetic record: the set is built, confirmed by the pipeline, and the built-in
examinees score what they must (oracle 100 % sensitivity and invariance, prior 0 % sensitivity, random at chance)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from ecgtrace.jsonio import write_jsonl_atomic

AUDIT_DIAGNOSES = ("pvc", "sinus_pause", "first_degree_av_block")


def _qa_item(record, item_id: str, task: str, kind: str, t0_ms: int, t1_ms: int, answer: str, options: list[str]) -> dict:
    """A QA item written by hand from the synthetic schedule (an independent ground truth the probe must reproduce)."""
    question = f"In the window from {t0_ms} ms to {t1_ms} ms, about the {kind} events?"
    return {"format": "ecgtrace-qa-item/2", "id": item_id, "task": task, "template_id": task, "finding": kind,
            "record": {"db": "synthetic", "id": "holter", "path": str(record.record_path), "fs_hz": 250.0, "leads": ["MLII", "V1", "V5"],
                       "duration_s": 1800.0},
            "window": {"t0_s": t0_ms / 1000, "t1_s": t1_ms / 1000}, "question": question, "options": options, "answer": answer,
            "answer_type": "yes_no" if task == "closed_presence" else "integer" if task == "closed_count" else "timestamps_ms",
            "evidence": [{"lead": "MLII", "t0_ms": t0_ms, "t1_ms": t1_ms, "beats": []}],
            "provenance": {"source": "synthetic", "method": "tests", "version": "1", "params": {"kind": kind, "tolerance_ms": 150}}}


@pytest.fixture(scope="module")
def dataset(synth_record, synth_build, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("probe-dataset")
    write_jsonl_atomic(out / "audit.jsonl", [it for it in synth_build.items if it["diagnosis"] in AUDIT_DIAGNOSES])
    pvcs = [e["onset_ms"] for e in synth_record.schedule["events"] if e["kind"] == "pvc"]
    t = pvcs[1]
    qa = [
        _qa_item(synth_record, "qa-presence-yes", "closed_presence", "pvc", t - 4000, t + 6000, "Yes", ["Yes", "No"]),
        _qa_item(synth_record, "qa-presence-no", "closed_presence", "pvc", 300_000, 310_000, "No", ["Yes", "No"]),
        _qa_item(synth_record, "qa-count", "closed_count", "pvc", t - 12_000, t + 18_000, "1", ["2", "1", "0", "3"]),
        _qa_item(synth_record, "qa-timing", "closed_timing", "pvc", t - 12_000, t + 18_000, f"{t} ms",
                 [f"{t - 600} ms", f"{t} ms", f"{t + 800} ms", f"{t - 5000} ms, {t} ms"]),
    ]
    write_jsonl_atomic(out / "qa.jsonl", qa)
    return out


@pytest.fixture(scope="module")
def probe_set(dataset, tmp_path_factory):
    from ecgtrace.agents.probe.builder import build_probe_set
    from ecgtrace.graphs.probe_runner import load_probe_set

    folder = tmp_path_factory.mktemp("probe-set")
    build_probe_set(dataset, folder, seed=0, max_per_group=1)
    return load_probe_set(folder)


@pytest.fixture(scope="module")
def runs(probe_set, tmp_path_factory):
    from ecgtrace.agents.exam.examinees import make_examinee
    from ecgtrace.commands.probe import identity_of
    from ecgtrace.graphs.probe_runner import run_probe
    from ecgtrace.runlog import RunDir

    out = {}
    for name in ("oracle", "prior", "random"):
        folder = tmp_path_factory.mktemp(f"run-{name}")
        run = RunDir.open(folder / "run", {"kind": "probe", "model": name}, kind="probe")
        out[name] = (run, asyncio.run(run_probe(probe_set, run, make_examinee(name, seed=0), modality="text")))
    return out


def test_the_probe_set_keeps_confirmed_counterfactuals_and_says_why_it_dropped_the_rest(probe_set) -> None:
    pairs = probe_set.pairs
    assert all(p["reason"] for p in pairs if p["status"] == "dropped")
    kept = {(p["source"], p["kind"], p["group"]) for p in pairs if p["status"] == "kept"}
    for want in (("audit", "remove", "pvc"), ("audit", "remove", "sinus_pause"), ("audit", "remove", "first_degree_av_block"),
                 ("audit", "swap", "pvc"), ("audit", "control", "pvc"), ("qa", "remove", "closed_presence"), ("qa", "remove", "closed_count"),
                 ("qa", "move", "closed_timing"), ("qa", "swap", "closed_presence"), ("qa", "control", "closed_timing")):
        assert want in kept, (want, sorted(kept))
    counts = probe_set.manifest["counts"]
    for source, kinds in counts.items():
        for kind, c in kinds.items():
            mine = [p for p in pairs if p["source"] == source and p["kind"] == kind]
            assert c["kept"] + c["dropped"] + c["not_applicable"] == len(mine)
    ids = {it.id for it in [*probe_set.audit, *probe_set.qa]}
    for p in pairs:
        if p["status"] == "kept":
            assert p["id"] in ids and p["original"] in ids and p["turns"]
            for rel in p["files"].values():
                assert (probe_set.root / rel).is_file(), rel


def test_a_removed_pvc_is_gone_for_the_pipeline_and_the_other_beats_keep_their_class(probe_set) -> None:
    from ecgtrace.agents.probe._signal import pipeline_beats
    from ecgtrace.tools.counterfactual import load_window

    pair = next(p for p in probe_set.pairs if p["status"] == "kept" and p["kind"] == "remove" and p["group"] == "pvc" and p["source"] == "audit")
    assert pair["before"]["label"] is True and pair["after"]["label"] is False
    original, _ = load_window(probe_set.root / pair["files"]["original_window"])
    edited, meta = load_window(probe_set.root / pair["files"]["window"])
    assert original.sampfrom == edited.sampfrom and original.signal_mv.shape == edited.signal_mv.shape  # the same time axis
    fs = original.fs_hz
    before, after = pipeline_beats(original), pipeline_beats(edited)
    removed = [round(t * fs / 1000) for t in meta["edit"]["beats_removed_ms"]]
    assert removed and all(c != "V" for s, c in zip(after.samples, after.classes) if min(abs(s - r) for r in removed) < 0.3 * fs)
    changed = [(round(a * fs / 1000), round(b * fs / 1000)) for a, b in meta["edit"]["spans_ms"]]
    for s, c in zip(before.samples, before.classes):
        if any(a - fs <= s <= b + fs for a, b in changed) or not original.sampfrom + fs < s < original.sampto - fs:
            continue
        k = int(np.argmin(np.abs(after.samples - s)))
        assert abs(int(after.samples[k]) - s) < 0.075 * fs and after.classes[k] == c
    initial = [t for t in pair["turns"] if t["stage"] == "initial"][0]
    assert initial["expect"] == "change" and initial["original_answer"] == "Yes" and initial["counterfactual_answer"] == "No"
    edit = pair["edit"]
    assert edit["op"] == "remove_beats" and edit["removed_classes"] and set(edit["removed_classes"]) == {"V"} and edit["pipeline"]


def test_counterfactual_items_ask_the_originals_questions(probe_set) -> None:
    items = {it.id: it for it in probe_set.audit}
    for pair in (p for p in probe_set.pairs if p["status"] == "kept" and p["source"] == "audit"):
        o, c = items[pair["original"]], items[pair["id"]]
        assert c.initial.question == o.initial.question and c.initial.options == o.initial.options
        assert c.record == o.record and (c.window == o.window or pair["kind"] == "swap")
        for turn in pair["turns"]:
            if turn["stage"] in ("finding", "criterion", "decision"):
                assert turn["expect"] in ("change", "same")
        if pair["kind"] == "control":
            assert all(t["expect"] == "same" for t in pair["turns"])


def test_builtin_examinees_score_what_they_must(runs) -> None:
    oracle = runs["oracle"][1]["overall"]
    assert oracle["sensitivity"]["value"] == 1.0 and oracle["invariance"]["value"] == 1.0
    assert oracle["grounded_accuracy"]["value"] == 1.0 and oracle["localization_follow"]["value"] == 1.0
    assert oracle["sensitivity"]["n"] >= 10 and oracle["invariance"]["n"] >= 10
    prior = runs["prior"][1]["overall"]
    assert prior["sensitivity"]["value"] == 0.0 and prior["invariance"]["value"] == 1.0
    rnd = runs["random"][1]["overall"]
    for key in ("sensitivity", "invariance", "grounded_accuracy"):
        lo, hi = rnd[key]["ci95"]
        assert lo <= rnd[key]["chance"] <= hi, (key, rnd[key])
    assert runs["oracle"][1]["complete"] and runs["oracle"][1]["kind"] == "probe"
    for kind in ("remove", "swap", "control"):
        assert kind in runs["oracle"][1]["per_kind"]


def test_a_probe_run_resumes_and_reports_its_pairs(runs, probe_set) -> None:
    from ecgtrace.agents.exam.examinees import make_examinee
    from ecgtrace.graphs.probe_runner import run_probe
    from ecgtrace.runlog import RunDir
    from ecgtrace.views.report_html import render_html

    run, first = runs["random"]
    rows = run.samples()
    again = RunDir.open(run.path, {"kind": "probe", "model": "random"}, kind="probe")
    second = asyncio.run(run_probe(probe_set, again, make_examinee("random", seed=0), modality="text"))
    assert second["overall"] == first["overall"] and len(again.samples()) == len(rows)  # nothing asked twice
    header = json.loads((run.path / "header.json").read_text())
    assert header["kind"] == "probe" and header["format"] == "ecgtrace-run/3"
    row = next(r for r in rows if r["role"] == "counterfactual")
    assert row["pair"]["original"] and (probe_set.root / row["pair"]["image"]).is_file()
    html = render_html(run.path, max_images=4)
    assert "Counterfactual probes" in html and "<script" not in html
    assert html.count("alt=\"ECG strip\"") == 4 and "where the edit changed the signal" in html


def test_the_probe_command_builds_reuses_and_refuses_another_set(dataset, probe_set, tmp_path, capsys) -> None:
    from ecgtrace.cli import main

    argv = ["probe", str(dataset), "--model", "oracle", "--run", str(tmp_path / "r"), "--probe-set", str(probe_set.root), "--modality", "text",
            "--max-per-group", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "sensitivity" in out and "chance" in out and "invariance" in out
    lines = (tmp_path / "r" / "samples.jsonl").read_text().count("\n")
    assert main(argv) == 0 and (tmp_path / "r" / "samples.jsonl").read_text().count("\n") == lines  # resumed: nothing asked again
    capsys.readouterr()
    other = ["probe", str(dataset), "--model", "oracle", "--run", str(tmp_path / "r2"), "--probe-set", str(probe_set.root), "--modality", "text",
             "--max-per-group", "3"]
    assert main(other) != 0  # the folder holds a set built with other settings
    assert "another --probe-set folder" in capsys.readouterr().err


def test_a_source_whose_every_counterfactual_was_dropped_still_loads_and_says_why(dataset, tmp_path) -> None:
    """A QA file whose only item's record is gone: no qa.jsonl in the set (an empty one would not load), the drops in pairs.jsonl."""
    from ecgtrace.agents.probe.builder import build_probe_set
    from ecgtrace.graphs.probe_runner import load_probe_set
    from ecgtrace.jsonio import read_jsonl

    data = tmp_path / "data"
    data.mkdir()
    (data / "audit.jsonl").write_text((dataset / "audit.jsonl").read_text())
    qa = [dict(r) for r in read_jsonl(dataset / "qa.jsonl")][:1]
    qa[0]["record"] = {**qa[0]["record"], "path": str(tmp_path / "gone" / "holter")}
    write_jsonl_atomic(data / "qa.jsonl", qa)
    manifest = build_probe_set(data, tmp_path / "set", kinds=["remove", "control"], seed=0, max_per_group=1, only=["pvc", "closed_presence"])
    assert not (tmp_path / "set" / "qa.jsonl").exists()
    probe = load_probe_set(tmp_path / "set")
    assert probe.qa == [] and probe.audit
    qa_pairs = [p for p in probe.pairs if p["source"] == "qa"]
    assert qa_pairs and all(p["status"] == "dropped" and p["reason"].startswith("record_unreadable") for p in qa_pairs)
    assert manifest["counts"]["qa"]["remove"]["dropped"] == 1


def test_originals_are_taken_group_by_group_and_qa_tasks_in_turn() -> None:
    from ecgtrace.agents.probe.builder import pick_originals

    items = [{"id": f"{task}-{kind}-{n}", "g": f"{task}:{kind}"} for task in ("closed_count", "closed_presence", "closed_timing")
             for kind in ("pac", "pvc", "vt") for n in range(2)]
    plain = pick_originals(items, lambda it: it["g"], 2, 4)
    assert [it["id"] for it in plain] == ["closed_count-pac-0", "closed_count-pvc-0", "closed_count-vt-0", "closed_presence-pac-0"]
    spread = pick_originals(items, lambda it: it["g"], 2, 4, family=lambda g: g.split(":")[0])
    assert [it["id"] for it in spread] == ["closed_count-pac-0", "closed_presence-pac-0", "closed_timing-pac-0", "closed_count-pvc-0"]
    everything = pick_originals(items, lambda it: it["g"], 2, None, family=lambda g: g.split(":")[0])
    assert sorted(it["id"] for it in everything) == sorted(it["id"] for it in items)  # the order changes, never the choice


def _probe_cli(dataset, probe_set, run: Path, *extra: str) -> int:
    from ecgtrace.cli import main

    return main(["probe", str(dataset), "--model", "oracle", "--modality", "text", "--run", str(run), "--probe-set", str(probe_set.root),
                 "--max-per-group", "1", "--quiet", *extra])


def test_probe_epochs_ask_every_pair_again_with_shuffled_options(dataset, probe_set, tmp_path) -> None:
    assert _probe_cli(dataset, probe_set, tmp_path / "r", "--epochs", "2") == 0
    rows = [json.loads(line) for line in (tmp_path / "r" / "samples.jsonl").read_text().splitlines()]
    n = len(probe_set.entries())
    assert len(rows) == 2 * n and sum(r["epoch"] == 1 for r in rows) == n
    assert all(r["id"].endswith("#1") == (r["epoch"] == 1) and r["sample"]["id"] == r["id"] for r in rows)
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    assert results["epochs"]["epochs"] == 2 and results["complete"]
    for e in results["epochs"]["per_epoch"]:  # the oracle answers from the truth: shuffled options change nothing
        assert e["sensitivity"] == 1.0 and e["invariance"] == 1.0
    assert results["epochs"]["agreement"]["samples_agree"] == 1.0


def test_probe_sample_id_and_limit_choose_originals_with_all_their_counterfactuals(dataset, probe_set, tmp_path, capsys) -> None:
    kept = [p for p in probe_set.pairs if p["status"] == "kept"]
    original = kept[0]["original"]
    mine = {p["id"] for p in kept if p["original"] == original}
    assert _probe_cli(dataset, probe_set, tmp_path / "one", "--sample-id", original) == 0
    ids = {json.loads(line)["id"] for line in (tmp_path / "one" / "samples.jsonl").read_text().splitlines()}
    assert ids == {original} | mine
    assert _probe_cli(dataset, probe_set, tmp_path / "bad", "--sample-id", "no-such-item") != 0
    err = capsys.readouterr().err
    assert "error:" in err and "no-such-item" in err and "Traceback" not in err
    assert _probe_cli(dataset, probe_set, tmp_path / "grow", "--limit", "1") == 0
    first = (tmp_path / "grow" / "samples.jsonl").read_text().splitlines()
    assert _probe_cli(dataset, probe_set, tmp_path / "grow", "--limit", "2") == 0  # the same folder grows, nothing asked twice
    second = (tmp_path / "grow" / "samples.jsonl").read_text().splitlines()
    assert second[: len(first)] == first and len(second) > len(first)
    originals = {json.loads(line)["id"] for line in second if json.loads(line)["role"] == "original"}
    assert len(originals) == 2


def test_probe_text_encoding_and_prompt_budget_decide_what_is_asked(dataset, probe_set, tmp_path, capsys) -> None:
    # a raw 10 s 3-lead 250 Hz window is tens of thousands of tokens: nothing fits 10,000, and the run says so
    assert _probe_cli(dataset, probe_set, tmp_path / "raw", "--max-prompt-tokens", "10000") != 0
    err = capsys.readouterr().err
    assert "error:" in err and "skipped" in err and "Traceback" not in err
    # the beat summary of the same windows fits: every pair is asked, and the run records the encoding
    assert _probe_cli(dataset, probe_set, tmp_path / "summary", "--text-encoding", "summary", "--max-prompt-tokens", "10000") == 0
    results = json.loads((tmp_path / "summary" / "results.json").read_text())
    assert results["skipped"]["n"] == 0 and results["overall"]["sensitivity"]["value"] == 1.0
    header = json.loads((tmp_path / "summary" / "header.json").read_text())
    assert header["identity"]["text_encoding"]["method"] == "summary"
    assert _probe_cli(dataset, probe_set, tmp_path / "img", "--text-encoding", "compact", "--text-fs", "50", "--modality", "image") != 0
    assert "--text-encoding" in capsys.readouterr().err


def test_probe_prices_go_into_the_usage_block(dataset, probe_set, tmp_path) -> None:
    assert _probe_cli(dataset, probe_set, tmp_path / "r", "--price-in", "2.5", "--price-out", "10") == 0
    usage = json.loads((tmp_path / "r" / "results.json").read_text())["usage"]
    assert usage["per_model"]["oracle"]["price_per_1m_usd"] == {"in": 2.5, "out": 10.0}
    assert usage["requests"] > 0 and usage["without_usage"] == usage["requests"]  # the oracle sends no usage: counted, never guessed


def test_a_probe_set_built_inside_a_new_run_folder_is_reused_on_resume(dataset, tmp_path, capsys) -> None:
    from ecgtrace.cli import main

    argv = ["probe", str(dataset), "--model", "oracle", "--modality", "text", "--run", str(tmp_path / "r"), "--kinds", "control",
            "--only", "pvc", "--max-per-group", "1", "--quiet", "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert (tmp_path / "r" / "probe-set" / "pairs.jsonl").is_file() and first["n_finished"] == first["n_items"] > 0
    lines = (tmp_path / "r" / "samples.jsonl").read_text()
    assert main(argv) == 0 and (tmp_path / "r" / "samples.jsonl").read_text() == lines  # resumed: nothing asked again
    assert json.loads(capsys.readouterr().out)["overall"] == first["overall"]


def test_a_probe_in_two_shards_gives_the_run_of_one_process(dataset, probe_set, tmp_path) -> None:
    """``--workers 2``: each pair is asked in one shard against the driver's set, and the merged run equals one process's."""
    runs = {"one": tmp_path / "one", "sharded": tmp_path / "sharded"}
    assert _probe_cli(dataset, probe_set, runs["one"], "--model", "random", "--seed", "3") == 0
    assert _probe_cli(dataset, probe_set, runs["sharded"], "--model", "random", "--seed", "3", "--workers", "2") == 0

    def rows(run: Path) -> list[dict]:
        out = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
        return sorted(({k: v for k, v in r.items() if k != "latency_ms"} for r in out), key=lambda r: r["id"])

    one, sharded = (json.loads((run / "results.json").read_text()) for run in runs.values())
    assert sharded["overall"] == one["overall"] and sharded["per_kind"] == one["per_kind"] and one["overall"]["n_pairs"] > 0
    assert rows(runs["sharded"]) == rows(runs["one"])
    assert not (runs["sharded"] / "shards").exists()  # every row merged: the shard folders are gone


def test_probe_shards_use_the_set_the_driver_built_in_the_run_folder(dataset, tmp_path) -> None:
    """Without ``--probe-set`` the set is built once in RUN/probe-set; a shard must not build its own in its folder."""
    from ecgtrace.cli import main

    run = tmp_path / "r"
    assert main(["probe", str(dataset), "--model", "oracle", "--modality", "text", "--run", str(run), "--max-per-group", "1",
                 "--workers", "2", "--keep-checkpoints", "--quiet"]) == 0
    shards = sorted(p for p in (run / "shards").iterdir() if p.is_dir())
    assert len(shards) == 2 and all((p / "samples.jsonl").is_file() and not (p / "probe-set").exists() for p in shards)
    results = json.loads((run / "results.json").read_text())
    assert results["overall"]["n_pairs"] > 0 and results["overall"]["sensitivity"]["value"] == 1.0
