"""Run directory I/O for reasoning audits.

A run directory holds:

* ``header.json`` - written once when the run starts: ``format``, ``run_id``,
  ``identity`` (everything that decides the results: dataset path and SHA-256,
  model, modality, mode, seed, limit, prompt version), ``settings`` (things
  that may change between resumes: concurrency, timeout, base URL, name of the
  API-key variable - never the key), ``versions`` and ``created_utc``.
* ``samples.jsonl`` - append-only, one line per finished sample
  (``id``, ``diagnosis``, ``label``, ``path_id``, ``turns``), fsynced.
* ``results.json`` - metrics, rewritten atomically from ``samples.jsonl``.
* ``checkpoints.sqlite`` - LangGraph checkpoints (one thread per sample).

Opening an existing directory with a different identity is refused
(:class:`~ecgtrace.errors.RunError`). A torn last line of ``samples.jsonl``
(process killed while appending) is cut off on open; duplicate ids are never
appended and are ignored on read (first wins).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import platform
from pathlib import Path
from typing import Any

from ecgtrace.errors import RunError
from ecgtrace.jsonio import append_jsonl, read_jsonl, to_json_text, write_json_atomic, write_jsonl_atomic

FORMAT = "ecgtrace-audit-run/1"
HEADER = "header.json"
SAMPLES = "samples.jsonl"
RESULTS = "results.json"
CHECKPOINTS = "checkpoints.sqlite"


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in ("ecgtrace", "langgraph", "langgraph-checkpoint-sqlite", "langchain-openai", "langchain-core", "openai"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


def run_id_for(identity: dict[str, Any]) -> str:
    return hashlib.sha256(to_json_text(identity).encode()).hexdigest()[:16]


class RunDir:
    """An audit run directory; use :meth:`open`."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        self.header = header
        self.run_id: str = header["run_id"]
        self._ids: set[str] = set()

    @property
    def samples_path(self) -> Path:
        return self.path / SAMPLES

    @property
    def results_path(self) -> Path:
        return self.path / RESULTS

    @property
    def checkpoint_path(self) -> Path:
        return self.path / CHECKPOINTS

    @classmethod
    def open(cls, path: str | os.PathLike[str], identity: dict[str, Any], settings: dict[str, Any] | None = None) -> RunDir:
        """Create the run directory, or reopen it after checking it belongs to the same run."""
        root = Path(path)
        if root.exists() and not root.is_dir():
            raise RunError(f"--run {root} exists and is not a folder")
        header_path = root / HEADER
        if header_path.exists():
            header = read_header(root)
            old = header.get("identity", {})
            if old != identity:
                diffs = [k for k in sorted(set(old) | set(identity)) if old.get(k) != identity.get(k)]
                shown = "; ".join(f"{k}: {old.get(k)!r} -> {identity.get(k)!r}" for k in diffs[:3])
                raise RunError(f"{root} holds a run with a different dataset/config ({shown}); use a new --run folder")
        else:
            if root.exists() and any(root.iterdir()):
                raise RunError(f"{root} is not empty and has no {HEADER}; refusing to mix runs (use a new --run folder)")
            header = {
                "format": FORMAT,
                "run_id": run_id_for(identity),
                "identity": identity,
                "settings": settings or {},
                "versions": package_versions(),
                "created_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            write_json_atomic(header_path, header)
        run = cls(root, header)
        run._repair_tail()
        run._ids = {row["id"] for row in run.samples()}
        return run

    def _repair_tail(self) -> None:
        """Cut a torn last line (killed mid-append) so later appends start on a clean line."""
        target = self.samples_path
        if not target.exists():
            return
        data = target.read_bytes()
        if not data or data.endswith(b"\n"):
            return
        cut = data.rfind(b"\n") + 1  # 0 when the only line is torn
        with open(target, "r+b") as handle:
            handle.truncate(cut)
            handle.flush()
            os.fsync(handle.fileno())

    def samples(self) -> list[dict[str, Any]]:
        """Finished samples, first occurrence of each id, in file order."""
        seen: set[str] = set()
        rows = []
        for row in read_jsonl(self.samples_path):
            if row["id"] not in seen:
                seen.add(row["id"])
                rows.append(row)
        return rows

    def finished_ids(self) -> set[str]:
        return set(self._ids)

    def append_sample(self, row: dict[str, Any]) -> bool:
        """Append one finished sample; False (nothing written) when its id is already there."""
        if row["id"] in self._ids:
            return False
        append_jsonl(self.samples_path, row)
        self._ids.add(row["id"])
        return True

    def drop_samples(self, predicate: Any) -> list[str]:
        """Remove finished samples for which ``predicate(row)`` is true (atomic rewrite); returns their ids.

        Used by ``--retry-errors``: the samples are then run again from their
        first turn and appended anew, so each id is still counted once.
        """
        rows = self.samples()
        dropped = [r["id"] for r in rows if predicate(r)]
        if dropped:
            gone = set(dropped)
            write_jsonl_atomic(self.samples_path, [r for r in rows if r["id"] not in gone])
            self._ids -= gone
        return dropped

    def write_results(self, results: dict[str, Any]) -> Path:
        return write_json_atomic(self.results_path, results)

    def thread_id(self, sample_id: str) -> str:
        return f"{self.run_id}:{sample_id}"


def read_header(root: str | os.PathLike[str]) -> dict[str, Any]:
    import json

    header_path = Path(root) / HEADER
    if not header_path.is_file():
        raise RunError(f"{root} is not an audit run folder (no {HEADER})")
    try:
        header = json.loads(header_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunError(f"{header_path}: unreadable ({exc})") from None
    if header.get("format") != FORMAT or "run_id" not in header:
        raise RunError(f"{header_path}: not an ecgtrace audit run header")
    return header


def load_run_samples(root: str | os.PathLike[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Header and finished samples of an existing run (read-only)."""
    header = read_header(root)
    seen: set[str] = set()
    rows = []
    for row in read_jsonl(Path(root) / SAMPLES):
        if row["id"] not in seen:
            seen.add(row["id"])
            rows.append(row)
    return header, rows
