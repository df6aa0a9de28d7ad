"""Shared fixtures: the real records in ../shared/data and a synthetic Holter record."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The public PhysioNet records beside the repository (skips where absent, e.g. a user's clone)."""
    if not (SHARED_DATA / "mitdb" / "100.hea").exists():
        pytest.skip(f"real records not found at {SHARED_DATA} (only present on the project's machines)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def synth_record(tmp_path_factory: pytest.TempPathFactory):
    """A 30-minute, 3-lead, 250 Hz synthetic Holter record (seed 7) with every event kind."""
    from ecgtrace.tools.synth import synthesize_holter

    out = tmp_path_factory.mktemp("synth")
    return synthesize_holter(out, name="holter", hours=0.5, fs_hz=250.0, n_leads=3, seed=7)


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory):
    """Every test writes caches into a temporary folder, never into the user's ecgtrace cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("ECGTRACE_CACHE", str(tmp_path_factory.mktemp("ecgtrace-cache")))
    yield
    mp.undo()


@pytest.fixture(scope="session")
def tiny_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3-minute, 2-lead, 128 Hz synthetic record (seed 1): small enough for tests that copy and spoil it."""
    from ecgtrace.tools.synth import synthesize_holter

    return synthesize_holter(tmp_path_factory.mktemp("tiny"), name="tiny", hours=0.05, fs_hz=128.0, n_leads=2, seed=1).record_path


@pytest.fixture(scope="session")
def tiny_record_b(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another record like :func:`tiny_record` (seed 2): its ``.atr`` is a foreign file for the first."""
    from ecgtrace.tools.synth import synthesize_holter

    return synthesize_holter(tmp_path_factory.mktemp("tiny_b"), name="tiny", hours=0.05, fs_hz=128.0, n_leads=2, seed=2).record_path
