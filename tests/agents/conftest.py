"""Fixtures shared by the agents tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def synth_build(synth_record):
    """Audit items built once from the 30-minute synthetic record (seed 3, 3 per diagnosis)."""
    from ecgtrace.agents.audit.builder import build_record

    return build_record(synth_record.record_path, seed=3, max_per_diagnosis=3)


@pytest.fixture(scope="session")
def synth_qa(synth_record, tmp_path_factory):
    """The QA dataset built once from the synthetic record with every built-in template (text only, no measurements)."""
    import json

    from ecgtrace.graphs.holter_build import build_dataset

    out = tmp_path_factory.mktemp("synth-qa")
    options = {"seed": 5, "tasks": [], "modalities": ["text"], "templates_dir": None, "fs_hz": None, "paraphrase": False, "measure": False}
    build_dataset([str(synth_record.record_path)], out, options, jobs=1, audit=False)
    return out, [json.loads(line) for line in (out / "qa.jsonl").read_text().splitlines()]
