"""Content-addressed shards: each finished task's result stored once under its SHA-256, found by the task's key.

``DIR/<sha256>.json`` holds the bytes a task produced (written atomically,
never rewritten: the name is the content); ``DIR/index.json`` maps each task
key (e.g. a record's build thread id, which covers its content, options and
versions) to its shard. The merge reads shards in the caller's order, so it is
the same bytes whichever executor, worker or attempt produced them, and a rerun
skips every key whose shard is there and intact.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ecgtrace.jsonio import make_folder, write_bytes_atomic, write_json_atomic

INDEX = "index.json"


class ShardStore:
    """The shards of one output folder (see the module docstring)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        index = self.folder / INDEX
        try:
            self._index: dict[str, dict[str, Any]] = json.loads(index.read_text(encoding="utf-8")) if index.is_file() else {}
        except (OSError, json.JSONDecodeError):
            self._index = {}  # a broken index only costs a rebuild of the records it named

    def path_of(self, key: str) -> Path | None:
        """The shard of ``key``, if it is stored and its bytes still hash to its name."""
        entry = self._index.get(key)
        if entry is None:
            return None
        path = self.folder / f"{entry['sha256']}.json"
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != entry["sha256"]:
            return None
        return path

    def put(self, key: str, data: bytes, *, label: str = "") -> Path:
        """Store ``data`` as the shard of ``key`` (``label``: what it is, for people reading the index)."""
        sha = hashlib.sha256(data).hexdigest()
        path = self.folder / f"{sha}.json"
        make_folder(self.folder)
        if not path.is_file():
            write_bytes_atomic(path, data)
        self._index[key] = {"sha256": sha, "label": label}
        write_json_atomic(self.folder / INDEX, self._index)
        return path
