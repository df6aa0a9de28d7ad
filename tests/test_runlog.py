"""Run folder I/O: header identity, torn tails, duplicates, the key never written."""

from __future__ import annotations

import json

import pytest

from ecgtrace.errors import RunError
from ecgtrace.runlog import RunDir, load_run_samples, read_header

IDENTITY = {"dataset_sha256": "abc", "model": "oracle", "mode": "teacher"}


def test_header_is_written_once_and_checked(tmp_path):
    run = RunDir.open(tmp_path / "r", IDENTITY, {"api_key_env": "OPENAI_API_KEY"})
    header = read_header(tmp_path / "r")
    assert header["identity"] == IDENTITY and header["run_id"] == run.run_id and "versions" in header
    again = RunDir.open(tmp_path / "r", dict(IDENTITY), {"concurrency": 99})  # settings may change
    assert again.run_id == run.run_id
    with pytest.raises(RunError, match="different dataset/config.*model"):
        RunDir.open(tmp_path / "r", {**IDENTITY, "model": "random"})
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    with pytest.raises(RunError, match="not empty"):
        RunDir.open(tmp_path / "other", IDENTITY)


def test_torn_tail_is_cut_and_ids_are_appended_once(tmp_path):
    run = RunDir.open(tmp_path / "r", IDENTITY)
    assert run.append_sample({"id": "a", "turns": []})
    assert not run.append_sample({"id": "a", "turns": []})  # never twice
    with open(run.samples_path, "a") as handle:
        handle.write('{"id": "b", "tur')  # killed mid-append
    run = RunDir.open(tmp_path / "r", IDENTITY)
    assert run.finished_ids() == {"a"}
    assert run.append_sample({"id": "b", "turns": []})
    lines = run.samples_path.read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["a", "b"]
    with open(run.samples_path, "a") as handle:  # a duplicate line (e.g. copied by hand) is read once
        handle.write(lines[0] + "\n")
    _, rows = load_run_samples(tmp_path / "r")
    assert [r["id"] for r in rows] == ["a", "b"]


def test_header_says_its_kind_and_format(tmp_path):
    audit = RunDir.open(tmp_path / "a", IDENTITY)
    qa = RunDir.open(tmp_path / "q", {**IDENTITY, "kind": "qa"})  # a QA identity names its kind
    explicit = RunDir.open(tmp_path / "e", IDENTITY, kind="qa")
    for run, kind in ((audit, "audit"), (qa, "qa"), (explicit, "qa")):
        header = json.loads((run.path / "header.json").read_text())
        assert header["format"] == "ecgtrace-run/2" and header["kind"] == kind == run.kind
    with pytest.raises(ValueError):
        RunDir.open(tmp_path / "bad", IDENTITY, kind="exam")
    with pytest.raises(RunError, match="holds a run of kind 'qa', not 'audit'"):
        RunDir.open(tmp_path / "e", IDENTITY, kind="audit")


def test_format1_run_folders_are_read_and_resumed(tmp_path):
    from ecgtrace.runlog import run_id_for

    old = tmp_path / "old"
    old.mkdir()
    identity = {**IDENTITY, "kind": "qa"}
    (old / "header.json").write_text(json.dumps({"format": "ecgtrace-audit-run/1", "run_id": run_id_for(identity), "identity": identity,
                                                 "settings": {}, "versions": {}, "created_utc": "2024-01-01T00:00:00Z"}))
    (old / "samples.jsonl").write_text('{"id": "a", "turns": []}\n')
    assert read_header(old)["kind"] == "qa"
    run = RunDir.open(old, identity)
    assert run.kind == "qa" and run.finished_ids() == {"a"}
    assert json.loads((old / "header.json").read_text())["format"] == "ecgtrace-audit-run/1"  # an old header is not rewritten
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "header.json").write_text(json.dumps({"format": "someone-else/3", "run_id": "x", "identity": {}}))
    with pytest.raises(RunError, match="not an ecgtrace run header"):
        read_header(tmp_path / "foreign")


def test_identity_rules_let_a_run_grow_and_read_older_headers(tmp_path):
    from ecgtrace.runlog import IDENTITY_DEFAULTS, comparable_identity
    from ecgtrace.tools.text_encodings import RAW, text_encoding

    assert IDENTITY_DEFAULTS["text_encoding"] == RAW.to_json()  # the literal is the encoders' own raw
    # a header written before the limit left the identity, before the text encoding and the shuffle were in it
    old = {**IDENTITY, "modality": "text", "limit": 20}
    RunDir.open(tmp_path / "r", old)
    new = {**IDENTITY, "modality": "text", "text_encoding": RAW.to_json(), "option_shuffle": "1"}
    assert RunDir.open(tmp_path / "r", new).run_id == read_header(tmp_path / "r")["run_id"]  # grows: the same run
    with pytest.raises(RunError, match="text_encoding"):
        RunDir.open(tmp_path / "r", {**new, "text_encoding": text_encoding("summary").to_json()})
    # qa-eval's old count of items left out (it changed with --limit) reads as the flag
    assert comparable_identity({"skipped_unavailable": 3}) == comparable_identity({"skip_unavailable": True})
    assert comparable_identity({}) != comparable_identity({"skip_unavailable": True})
