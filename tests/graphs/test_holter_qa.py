"""HolterAgent end to end on the synthetic record: answers match the schedule, bytes are stable, crashes resume."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from ecgtrace.graphs.holter_build import build_dataset
from ecgtrace.graphs.holter_qa import FAIL_ENV, graph

OPTIONS = {"seed": 11, "tasks": [], "modalities": ["text"], "templates_dir": None, "fs_hz": None, "paraphrase": False, "measure": False}
LABEL_TO_KIND = {
    "premature atrial contraction": "pac", "premature ventricular contraction": "pvc", "ventricular couplet": "v_couplet",
    "ventricular tachycardia": "vt", "supraventricular tachycardia": "svt", "ventricular bigeminy": "v_bigeminy",
    "ventricular trigeminy": "v_trigeminy", "atrial fibrillation": "af", "sinus pause": "pause", "first-degree AV block": "avb1",
    "sinus tachycardia": "sinus_tachycardia", "sinus bradycardia": "sinus_bradycardia",
}


@pytest.fixture(scope="module")
def built(synth_record, tmp_path_factory):
    out = tmp_path_factory.mktemp("qa")
    manifest = build_dataset([str(synth_record.record_path)], out, OPTIONS, jobs=1, audit=False)
    rows = [json.loads(line) for line in (out / "qa.jsonl").read_text().splitlines()]
    return out, manifest, rows


def _schedule_events(synth_record, kind, t0_ms, t1_ms, *, inside=True):
    events = [e for e in synth_record.schedule["events"] if e["kind"] == kind]
    if inside:
        return [e for e in events if e["onset_ms"] >= t0_ms and e["offset_ms"] < t1_ms]
    return [e for e in events if e["offset_ms"] >= t0_ms and e["onset_ms"] < t1_ms]


def _kind_of(row):
    return row["provenance"]["params"]["kind"]


def test_every_task_is_built_and_loads_with_datasets(built):
    out, manifest, rows = built
    tasks = set(manifest["counts"]["per_task"])
    assert {"closed_presence", "closed_count", "closed_timing", "closed_diagnosis", "open_count", "open_timing", "open_diagnosis",
            "open_evidence", "report_statistics", "report_summary"} <= tasks
    assert tasks | set(r["task"] for r in json.loads("[" + ",".join((out / "dropped.jsonl").read_text().splitlines()) + "]")) >= {
        "closed_hr_extremum", "open_hr_extremum"}
    datasets = pytest.importorskip("datasets")
    ds = datasets.load_dataset("json", data_files=str(out / "qa.jsonl"), split="train")
    assert ds.num_rows == len(rows)
    for row in rows:
        assert isinstance(row["answer"], str) and row["split"] == "test"
        assert (row["window"] is None) == (row["task"].startswith("report") or row["task"].endswith("hr_extremum") or row["template_id"] == "open_count_record")
        assert row["modalities"]["text"] and (out / row["modalities"]["text"]).exists()
        assert "unknown" not in row["question"] and "None" not in row["question"]


def test_answers_match_the_generator_schedule(built, synth_record):
    _, _, rows = built
    checked = Counter()
    for row in rows:
        task = row["task"]
        if row["window"] is None:
            continue
        t0, t1 = round(row["window"]["t0_s"] * 1000), round(row["window"]["t1_s"] * 1000)
        if task in ("closed_count", "open_count"):
            assert int(row["answer"]) == len(_schedule_events(synth_record, _kind_of(row), t0, t1)), row["id"]
        elif task in ("closed_timing", "open_timing"):
            onsets = sorted(e["onset_ms"] for e in _schedule_events(synth_record, _kind_of(row), t0, t1))
            assert row["answer"] == ", ".join(f"{t} ms" for t in onsets), row["id"]
        elif task == "closed_presence":
            kind = _kind_of(row)
            present = bool(_schedule_events(synth_record, kind, t0, t1, inside=False))
            assert row["answer"] == ("Yes" if present else "No"), row["id"]
        elif task in ("closed_diagnosis", "open_diagnosis"):
            kinds = {e["kind"] for e in synth_record.schedule["events"] if e["offset_ms"] >= t0 and e["onset_ms"] < t1} - {"noise"}
            expected = {LABEL_TO_KIND.get(row["answer"], "normal")}
            assert kinds == (expected - {"normal"}), row["id"]
        checked[task] += 1
    assert checked["closed_count"] and checked["closed_timing"] and checked["closed_presence"] and checked["closed_diagnosis"]


def test_report_matches_schedule(built, synth_record):
    _, _, rows = built
    stats = json.loads(next(r for r in rows if r["task"] == "report_statistics")["answer"])
    events = Counter(e["kind"] for e in synth_record.schedule["events"])
    assert stats["couplets"] == events["v_couplet"]
    assert stats["runs"] == events["vt"] + events["svt"]
    assert stats["pauses"] == events["pause"]
    assert stats["bigeminy_episodes"] == events["v_bigeminy"] and stats["trigeminy_episodes"] == events["v_trigeminy"]
    sched = synth_record.schedule["events"]
    n_v = sum(e["n_beats"] for e in sched if e["kind"] in ("pvc", "v_couplet", "vt")) + sum(
        e["n_beats"] // 2 if e["kind"] == "v_bigeminy" else e["n_beats"] // 3 for e in sched if e["kind"] in ("v_bigeminy", "v_trigeminy"))
    assert stats["pvc_total"] == n_v
    assert stats["pac_total"] == sum(e["n_beats"] for e in sched if e["kind"] in ("pac", "svt"))


def test_options_balanced_and_distractors_wrong(built, synth_record):
    _, _, rows = built
    positions: dict[int, Counter] = {}
    for row in rows:
        if row["options"] is None:
            continue
        assert row["options"].count(row["answer"]) == 1
        assert len(set(row["options"])) == len(row["options"])
        positions.setdefault(len(row["options"]), Counter())[row["options"].index(row["answer"])] += 1
        if row["task"] == "closed_count":
            t0, t1 = round(row["window"]["t0_s"] * 1000), round(row["window"]["t1_s"] * 1000)
            truth = len(_schedule_events(synth_record, _kind_of(row), t0, t1))
            assert all(int(o) != truth and int(o) >= 0 for o in row["options"] if o != row["answer"])
        if row["task"] == "closed_timing":
            onsets = [e["onset_ms"] for e in synth_record.schedule["events"] if e["kind"] == _kind_of(row)]
            for option in row["options"]:
                if option == row["answer"]:
                    continue
                times = [int(t.removesuffix(" ms")) for t in option.split(", ")]
                assert not all(any(abs(t - e) <= 150 for e in onsets) for t in times), option
        if row["task"] == "closed_diagnosis":
            t0, t1 = round(row["window"]["t0_s"] * 1000), round(row["window"]["t1_s"] * 1000)
            present = {e["kind"] for e in synth_record.schedule["events"] if e["offset_ms"] >= t0 and e["onset_ms"] < t1}
            for option in row["options"]:
                if option != row["answer"]:
                    assert LABEL_TO_KIND.get(option, "normal") not in present, option
        if row["task"] == "closed_hr_extremum":
            truth = int(row["answer"].removesuffix(" ms"))
            assert all(abs(int(o.removesuffix(" ms")) - truth) > 2000 for o in row["options"] if o != row["answer"])
    for n, counts in positions.items():
        assert max(counts.values()) - min(counts.get(p, 0) for p in range(n)) <= 1, (n, counts)


def test_same_seed_same_bytes_and_resume_after_crash(built, synth_record, tmp_path, monkeypatch):
    out, _, _ = built
    monkeypatch.setenv(FAIL_ENV, "render")
    with pytest.raises(RuntimeError, match="injected failure"):
        build_dataset([str(synth_record.record_path)], tmp_path, OPTIONS, jobs=1, audit=False)
    assert not (tmp_path / "qa.jsonl").exists()
    assert list((tmp_path / ".checkpoints").glob("*.sqlite"))
    monkeypatch.delenv(FAIL_ENV)
    build_dataset([str(synth_record.record_path)], tmp_path, OPTIONS, jobs=1, audit=False)
    assert (tmp_path / "qa.jsonl").read_bytes() == (out / "qa.jsonl").read_bytes()
    for asset in sorted((out / "assets").iterdir())[:20]:
        assert (tmp_path / "assets" / asset.name).read_bytes() == asset.read_bytes()


def test_graph_export_and_langgraph_json():
    config = json.loads((Path(__file__).resolve().parents[2] / "langgraph.json").read_text())
    assert config["graphs"]["holter_qa"].endswith("graphs/holter_qa.py:graph")
    assert {"load", "annotate", "plan", "write_items", "verify", "paraphrase", "render", "write"} <= set(graph.get_graph().nodes)
    assert graph.checkpointer is None
    # langgraph dev loads the file by path, without the package's module name
    import importlib.util

    spec = importlib.util.spec_from_file_location("holter_qa_by_path", Path(__file__).resolve().parents[2] / "graphs" / "holter_qa.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert set(module.graph.get_graph().nodes) == set(graph.get_graph().nodes)


def test_image_messages_and_cli(synth_record, tmp_path):
    from ecgtrace.cli import main

    rc = main(["build", str(synth_record.record_path), "--out", str(tmp_path), "--tasks", "closed_count", "--modalities", "text,image", "--seed", "2", "--no-audit"])
    assert rc == 0
    rows = [json.loads(line) for line in (tmp_path / "qa.jsonl").read_text().splitlines()]
    assert rows and {r["task"] for r in rows} == {"closed_count"}
    for row in rows:
        image = row["modalities"]["image"][0]
        assert (tmp_path / image).read_bytes()[:4] == b"\x89PNG"
        parts = row["messages"]["image"][0]["content"]
        assert parts[0]["type"] == "text" and row["question"] in parts[0]["text"]
        assert parts[1] == {"type": "image_url", "image_url": {"url": image}}
        assert "ECG signal (text)" in row["messages"]["text"][0]["content"][0]["text"]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["seed"] == 2 and manifest["records"][0]["sha256"]


def test_paraphrase_node_uses_the_configured_model(synth_record, tmp_path):
    from itertools import repeat

    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from ecgtrace.graphs.holter_qa import run_record

    model = GenericFakeChatModel(messages=repeat(AIMessage("How many beats? (no numbers kept)")))
    options = {**OPTIONS, "tasks": ["closed_count"], "paraphrase": True}
    state = run_record(str(synth_record.record_path), str(tmp_path), options, config={"configurable": {"paraphrase_model": model}})
    assert state["kept"]
    for item in state["kept"]:
        assert item["provenance"]["params"]["paraphrase"]["status"] == "kept"
        assert item["question"].startswith("ECG recording")


def test_build_caches_in_the_user_cache_not_beside_records_or_outputs(built, synth_record):
    import os

    out, _, _ = built
    assert not (out / ".cache").exists()
    record_dir = Path(synth_record.record_path).parent
    assert sorted(p.name for p in record_dir.iterdir()) == ["holter.atr", "holter.dat", "holter.hea", "holter.schedule.json"]
    assert list((Path(os.environ["ECGTRACE_CACHE"]) / "holter").glob("holter-*.json"))


def test_annotation_bundle_misses_when_a_tool_version_changes(synth_record, tmp_path, monkeypatch):
    from ecgtrace.agents.holter import annotator

    ref = annotator.load_record(synth_record.record_path)
    first = annotator.annotate(ref, tmp_path)["path"]
    assert annotator.annotate(ref, tmp_path)["path"] == first
    monkeypatch.setattr("ecgtrace.tools.hr.HR_VERSION", "changed-for-the-test")
    second = annotator.annotate(ref, tmp_path)["path"]
    assert second != first and Path(second).exists()


def test_finished_thread_is_reused_only_while_versions_match(synth_record, tmp_path, monkeypatch):
    from ecgtrace.graphs.holter_qa import run_record, thread_id

    options = {**OPTIONS, "tasks": ["report_statistics"]}
    record = str(synth_record.record_path)
    stages: list[str] = []
    run_record(record, str(tmp_path), options, on_stage=stages.append)
    assert "render" in stages
    stages.clear()
    run_record(record, str(tmp_path), options, on_stage=stages.append)
    assert stages == ["finished earlier (checkpoint)"]
    before = thread_id(record, options)
    monkeypatch.setattr("ecgtrace.tools.rhythm.RHYTHM_VERSION", "changed-for-the-test")
    assert thread_id(record, options) != before
    stages.clear()
    state = run_record(record, str(tmp_path), options, on_stage=stages.append)
    assert "annotate" in stages and "render" in stages and state["kept"]


def test_render_workers_change_neither_the_manifest_nor_the_thread(synth_record):
    """``--jobs`` sets ``render_jobs``: how many processes render, not what is rendered, so the bytes must not depend on it."""
    from ecgtrace.graphs.holter_qa import build_versions, thread_id

    base = {"seed": 3, "tasks": ["closed_count"], "modalities": ["text"], "templates_dir": None, "fs_hz": None,
            "paraphrase": False, "measure": False}
    one, four = {**base, "render_jobs": 1}, {**base, "render_jobs": 4}
    assert build_versions(one) == build_versions(four)
    assert "render_jobs" not in build_versions(one)["options"]
    assert thread_id(str(synth_record.record_path), one) == thread_id(str(synth_record.record_path), four)
    assert thread_id(str(synth_record.record_path), one) != thread_id(str(synth_record.record_path), {**one, "seed": 4})


def test_failed_audit_items_leave_the_folder_unfinished_and_the_rerun_writes_them(synth_record, tmp_path, monkeypatch, capsys):
    """A build whose audit items fail exits non-zero with one error line and is not marked finished; the rerun completes it."""
    from ecgtrace.agents.audit import dataset
    from ecgtrace.cli import main
    from ecgtrace.contracts.datasets import UNFINISHED_BUILD

    def broken(*args, **kwargs):
        raise OSError("disk full")

    argv = ["build", str(synth_record.record_path), "--out", str(tmp_path), "--tasks", "closed_count", "--modalities", "text", "--seed", "2"]
    with monkeypatch.context() as patch:
        patch.setattr(dataset, "write_audit_dataset", broken)
        assert main(argv) == 3
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("error:")] == [
        line for line in err.splitlines() if "audit.jsonl not written (OSError: disk full)" in line]
    assert (tmp_path / "qa.jsonl").is_file() and not (tmp_path / "audit.jsonl").exists()
    assert (tmp_path / UNFINISHED_BUILD).is_file()
    assert main(argv) == 0
    assert (tmp_path / "audit.jsonl").is_file() and not (tmp_path / UNFINISHED_BUILD).exists()
