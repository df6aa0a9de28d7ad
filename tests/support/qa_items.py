"""The small hand-checked QA dataset of ``tests/fixtures`` (``qa_small.jsonl`` and its assets), copied where a test writes."""

from __future__ import annotations

import shutil
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def copy_small_qa(folder: Path) -> Path:
    """``folder`` (created) holding ``qa.jsonl`` and ``qa_assets/``: a dataset a test may run, resume or damage."""
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "qa_small.jsonl", folder / "qa.jsonl")
    shutil.copytree(FIXTURES / "qa_assets", folder / "qa_assets")
    return folder
