"""Fixtures shared by the agents tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def synth_build(synth_record):
    """Audit items built once from the 30-minute synthetic record (seed 3, 3 per diagnosis)."""
    from ecgtrace.agents.audit.builder import build_record

    return build_record(synth_record.record_path, seed=3, max_per_diagnosis=3)
