"""One record source: a path resolves to one record, its defining files hash once, its header opens once per process."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from ecgtrace.errors import RecordError
from ecgtrace.tools import record_source
from ecgtrace.tools.record_source import record_info, record_sha256, resolve_record


@pytest.fixture()
def record_copy(synth_record, tmp_path):
    """A private copy of the synthetic record plus files a user might keep beside it."""
    for suffix in (".hea", ".dat", ".atr", ".schedule.json"):
        shutil.copy(f"{synth_record.record_path}{suffix}", tmp_path / f"holter{suffix}")
    (tmp_path / "holter.ecgtrace").write_bytes(b"\x00\x00")  # an `ecgtrace annotate` output
    (tmp_path / "holter.summary.json").write_text("{}")
    (tmp_path / "other.dat").write_bytes(b"1234")
    return tmp_path / "holter"


def _independent_sha256(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


@pytest.mark.parametrize("given", ["holter", "holter.hea", "holter.dat", "holter.atr"])
def test_every_spelling_names_the_same_record(record_copy, given):
    source = resolve_record(record_copy.parent / given)
    assert source.base == record_copy.resolve() and source.kind == "wfdb"
    assert source.db == record_copy.parent.name and source.name == "holter"
    # header, the signal file it names, and the ground-truth sidecars; never outputs or other records
    assert [p.name for p in source.files] == ["holter.atr", "holter.dat", "holter.hea", "holter.schedule.json"]
    assert source.has_reference()


def test_hash_is_sha256_of_names_and_bytes_and_follows_changes(record_copy):
    source = resolve_record(record_copy)
    assert source.sha256 == _independent_sha256(sorted(source.files, key=lambda p: p.name))
    before = source.sha256
    (record_copy.parent / "holter.summary.json").write_text('{"changed": true}')  # not part of the record
    assert resolve_record(record_copy).sha256 == before
    schedule = record_copy.parent / "holter.schedule.json"
    schedule.write_text(schedule.read_text() + " ")
    os.utime(schedule, ns=(schedule.stat().st_atime_ns, schedule.stat().st_mtime_ns + 10**9))
    assert resolve_record(record_copy).sha256 != before


def test_hash_reads_the_bytes_once_per_process(record_copy, monkeypatch):
    source = resolve_record(record_copy)
    record_sha256(source.files)
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: opened.append(Path(path).name) or real_open(path, *a, **k))
    assert resolve_record(record_copy).sha256 == source.sha256
    assert not [name for name in opened if name.startswith("holter.")]


def test_annotation_only_record_and_missing_record(tmp_path, synth_record):
    shutil.copy(f"{synth_record.record_path}.atr", tmp_path / "00.atr")
    source = resolve_record(tmp_path / "00.atr")
    assert source.kind == "annotations" and [p.name for p in source.files] == ["00.atr"]
    with pytest.raises(RecordError, match="no record here"):
        resolve_record(tmp_path / "missing")


def test_record_info_opens_the_header_once_per_process(record_copy, monkeypatch):
    calls = []
    real = record_source.open_record
    monkeypatch.setattr(record_source, "open_record", lambda path, **kw: calls.append(path) or real(path, **kw))
    record_source._open.cache_clear()
    first = record_info(record_copy)
    assert record_info(f"{record_copy}.hea") is first
    assert len(calls) == 1 and first.n_samples > 0


def test_default_cache_dir_is_the_user_cache_never_the_record_folder(monkeypatch, tmp_path):
    from ecgtrace.tools.annotate import annotation_store_dir, default_cache_dir

    monkeypatch.setenv("ECGTRACE_CACHE", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine" and annotation_store_dir() == tmp_path / "mine" / "annotations"
    monkeypatch.delenv("ECGTRACE_CACHE")
    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "ecgtrace"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "ecgtrace"
