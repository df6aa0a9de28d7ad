"""Audit items whose text assets are real signal text: the fixture items, each on its own window of a synthetic record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def write_signal_audit(folder: Path, record_path: str | Path) -> Path:
    """``folder`` with ``audit.jsonl`` (tests/fixtures/audit_small.jsonl) and assets: each item's window as signal text, its PNG."""
    from ecgtrace.tools.records import open_record, read_window
    from ecgtrace.tools.render import signal_to_text
    from ecgtrace.tools.text_encodings import select_leads

    (folder / "assets").mkdir(parents=True)
    shutil.copy(FIXTURES / "audit_small.jsonl", folder / "audit.jsonl")
    info = open_record(record_path)
    for line in (FIXTURES / "audit_small.jsonl").read_text().splitlines():
        item = json.loads(line)
        window = select_leads(read_window(info, item["window"]["t0_s"], item["window"]["t1_s"]), item["record"]["leads"])
        (folder / item["assets"]["text"]).write_text(signal_to_text(window, record="holter"))
        if item["assets"]["image"]:
            shutil.copy(FIXTURES / "assets" / Path(item["assets"]["image"]).name, folder / item["assets"]["image"])
    return folder
