"""Fixtures shared by the audit tests."""

from __future__ import annotations

import pytest

from ecgtrace.rubrics.diagnosis_schema import DiagnosisGraph, load_diagnoses


@pytest.fixture(scope="session")
def graphs() -> dict[str, DiagnosisGraph]:
    """The shipped diagnosis graphs, loaded once (read-only in every test)."""
    return load_diagnoses()
