"""The annotation bundle store: one bundle per record location, reused on a rerun."""

from __future__ import annotations

import shutil
from pathlib import Path

from ecgtrace.agents.holter import annotator
from ecgtrace.agents.holter.facts import load_facts


def _copy_record(record_path: Path, folder: Path) -> Path:
    folder.mkdir(parents=True)
    for f in record_path.parent.glob(record_path.name + ".*"):
        shutil.copy2(f, folder / f.name)
    return folder / record_path.name


def test_a_copy_of_the_same_bytes_gets_its_own_bundle_and_outlives_the_first(tiny_record: Path, tmp_path: Path) -> None:
    first = _copy_record(tiny_record, tmp_path / "run-a" / "record")
    second = _copy_record(tiny_record, tmp_path / "run-b" / "record")
    cache = tmp_path / "cache"
    ref_a, ref_b = annotator.load_record(first), annotator.load_record(second)
    assert ref_a["hash"] == ref_b["hash"]  # same content: a content-only key would share one bundle

    bundle_a = annotator.annotate(ref_a, cache)["path"]
    shutil.rmtree(tmp_path / "run-a")  # the user deletes the first demo folder
    bundle_b = annotator.annotate(ref_b, cache)["path"]

    assert bundle_a != bundle_b
    facts_b = load_facts(bundle_b)
    assert facts_b.record["path"] == str(second)
    assert Path(facts_b.record["path"] + ".hea").exists()


def test_a_rerun_on_the_same_record_reuses_its_bundle(tiny_record: Path, tmp_path: Path) -> None:
    record = _copy_record(tiny_record, tmp_path / "record")
    cache = tmp_path / "cache"
    ref = annotator.load_record(record)
    path = Path(annotator.annotate(ref, cache)["path"])
    written_ns = path.stat().st_mtime_ns
    assert annotator.annotate(annotator.load_record(record), cache)["path"] == str(path)
    assert path.stat().st_mtime_ns == written_ns
    assert list(cache.glob("*.json")) == [path]
