"""Atomic, deterministic file writes shared by every writer in ecgtrace.

A run killed midway must never leave a half-written file that a rerun trusts,
so every whole-file write goes through a temporary file in the same folder and
``os.replace``. JSON is written with sorted keys and no NaN so that the same
inputs give byte-identical files.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ecgtrace.errors import EcgTraceError

_UMASK = os.umask(0)
os.umask(_UMASK)


def plain_json(obj: Any) -> Any:
    """A copy of ``obj`` that strict JSON and LangGraph state accept.

    numpy scalars and arrays become Python numbers and lists (duck-typed, so this
    module never imports numpy), tuples become lists, keys become strings, and
    NaN or infinity become None.
    """
    if isinstance(obj, dict):
        return {str(k): plain_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain_json(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return plain_json(obj.tolist())  # numpy array or scalar (a scalar's tolist() is a Python number)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def to_json_text(obj: Any, *, indent: int | None = None) -> str:
    """Serialize ``obj`` deterministically (sorted keys, no NaN/Infinity)."""
    return json.dumps(obj, sort_keys=True, indent=indent, ensure_ascii=False, allow_nan=False)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, 0o666 & ~_UMASK)  # mkstemp makes 0600; outputs are ordinary files
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return target


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> Path:
    return write_text_atomic(path, to_json_text(obj, indent=2) + "\n")


def write_jsonl_atomic(path: str | os.PathLike[str], rows: Iterable[Any]) -> Path:
    return write_text_atomic(path, "".join(to_json_text(row) + "\n" for row in rows))


def append_jsonl(path: str | os.PathLike[str], row: Any) -> None:
    """Append one line and fsync it, so a finished sample survives a crash right after."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    line = to_json_text(row) + "\n"
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def jsonl_records(data: bytes, source: object, error: type[Exception] = EcgTraceError) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of JSONL ``data``.

    A line that is not JSON raises ``error("<source>:<line>: not valid JSON (...)")``,
    so dataset loaders report the file and line of the problem.
    """
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{source}:{number}: not valid JSON ({exc.msg})") from None


def read_jsonl(path: str | os.PathLike[str], *, tolerate_torn_tail: bool = True) -> list[Any]:
    """Read a JSONL file.

    A process killed while appending can leave a torn last line; with
    ``tolerate_torn_tail`` that line is ignored (the sample it held was not
    finished), while a bad line anywhere else is an error.
    """
    target = Path(path)
    if not target.exists():
        return []
    lines = target.read_text(encoding="utf-8").splitlines()
    rows: list[Any] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if tolerate_torn_tail and number == len(lines):
                break
            raise EcgTraceError(f"{target}:{number}: not valid JSON ({exc.msg})") from None
    return rows


def safe_join(root: str | os.PathLike[str], *parts: str) -> Path:
    """Join ``parts`` under ``root`` and refuse any result that escapes ``root``."""
    base = Path(root).resolve()
    candidate = base.joinpath(*parts).resolve()
    if candidate != base and base not in candidate.parents:
        raise EcgTraceError(f"refusing to write outside the output folder: {candidate}")
    return candidate
