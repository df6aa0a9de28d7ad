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
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ecgtrace.errors import EcgTraceError, OutputError

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


def output_error(path: str | os.PathLike[str], exc: OSError, doing: str = "write") -> OutputError:
    """One line for an output that cannot be written: ``cannot write PATH: No space left on device``."""
    return OutputError(f"cannot {doing} {path}: {exc.strerror or type(exc).__name__}")


def make_folder(path: str | os.PathLike[str]) -> Path:
    """``mkdir -p`` whose failure (read-only disk, a file in the way) is one :class:`OutputError` line."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise OutputError(f"cannot create folder {folder}: a file of that name is in the way") from None
    except OSError as exc:
        raise output_error(folder, exc, "create folder") from None
    return folder


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half.

    A failure (full or read-only disk) leaves no temporary file and is an
    :class:`~ecgtrace.errors.OutputError` naming the path.
    """
    target = Path(path)
    make_folder(target.parent)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise output_error(target, exc) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, 0o666 & ~_UMASK)  # mkstemp makes 0600; outputs are ordinary files
        os.replace(tmp_name, target)
    except OSError as exc:
        Path(tmp_name).unlink(missing_ok=True)
        raise output_error(target, exc) from None
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return target


def write_through_temp_folder(target: str | os.PathLike[str], write_into: Callable[[Path], None]) -> Path:
    """Atomic write for writers that only take a folder (``wfdb.wrann``): ``write_into(tmp)`` writes ``target.name``
    into a temporary folder beside ``target``, which is then renamed into place; a failure leaves nothing behind."""
    final = Path(target)
    make_folder(final.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    try:
        write_into(tmp)
        os.replace(tmp / final.name, final)
    except OSError as exc:
        raise output_error(final, exc) from None
    finally:
        for leftover in tmp.glob("*"):
            leftover.unlink(missing_ok=True)
        tmp.rmdir()
    return final


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> Path:
    return write_text_atomic(path, to_json_text(obj, indent=2) + "\n")


def write_jsonl_atomic(path: str | os.PathLike[str], rows: Iterable[Any]) -> Path:
    return write_text_atomic(path, "".join(to_json_text(row) + "\n" for row in rows))


def append_jsonl(path: str | os.PathLike[str], row: Any) -> None:
    """Append one line and fsync it, so a finished sample survives a crash right after.

    A symbolic link is never followed (a run log linking outside the run folder
    is refused), and an append that fails (full disk) is cut back, so the file
    never ends in half a line: :class:`~ecgtrace.errors.OutputError`.
    """
    from ecgtrace.redact import redact

    target = Path(path)
    make_folder(target.parent)
    data = (redact(to_json_text(row), patterns=False) + "\n").encode("utf-8")  # a key a server echoed never reaches the disk
    try:
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError as exc:
        if target.is_symlink():
            raise OutputError(f"refusing to append to {target}: it is a symbolic link") from None
        raise output_error(target, exc, "append to") from None
    try:
        size = os.fstat(fd).st_size
        try:
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fsync(fd)
        except OSError as exc:
            os.ftruncate(fd, size)
            raise output_error(target, exc, "append to") from None
    finally:
        os.close(fd)


def _decoded_lines(data: bytes) -> Iterator[tuple[int, str | None]]:
    """``(line number, text)`` of each line; the text is None when the line is not UTF-8."""
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError:
            yield number, None


def _not_utf8(source: object, number: int) -> str:
    return f"{source}:{number}: not UTF-8 text (a JSONL file holds UTF-8 JSON, one value per line)"


def jsonl_records(data: bytes, source: object, error: type[Exception] = EcgTraceError) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of JSONL ``data``.

    A line that is not JSON raises ``error("<source>:<line>: not valid JSON (...)")``,
    so dataset loaders report the file and line of the problem.
    """
    for number, line in _decoded_lines(data):
        if line is None:
            raise error(_not_utf8(source, number))
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{source}:{number}: not valid JSON ({exc.msg})") from None


def read_jsonl(path: str | os.PathLike[str], *, tolerate_torn_tail: bool = True, with_lines: bool = False) -> list[Any]:
    """Read a JSONL file (``with_lines``: ``(line number, value)`` pairs, for messages that name the line).

    A process killed while appending can leave a torn last line; with
    ``tolerate_torn_tail`` that line is ignored (the sample it held was not
    finished), while a bad line anywhere else is an error. A line that is not
    UTF-8 is an error naming the file and line.
    """
    target = Path(path)
    if not target.exists():
        return []
    if not target.is_file():
        raise EcgTraceError(f"{target} is not a file")
    try:
        data = target.read_bytes()
    except OSError as exc:
        raise EcgTraceError(f"{target}: cannot read ({exc.strerror})") from None
    lines = list(_decoded_lines(data.removesuffix(b"\n")))
    rows: list[Any] = []
    for number, line in lines:
        torn_tail = tolerate_torn_tail and number == len(lines)  # killed mid-append (even inside a UTF-8 character)
        if line is None:
            if torn_tail:
                break
            raise EcgTraceError(_not_utf8(target, number))
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            if torn_tail:
                break
            raise EcgTraceError(f"{target}:{number}: not valid JSON ({exc.msg})") from None
        rows.append((number, value) if with_lines else value)
    return rows


def safe_join(root: str | os.PathLike[str], *parts: str, action: str = "write") -> Path:
    """Join ``parts`` under ``root`` and refuse any result that escapes ``root`` (``..``, or a symbolic link leading out).

    ``action`` (``write`` or ``read``) only words the refusal.
    """
    base = Path(root).resolve()
    candidate = base.joinpath(*parts).resolve()
    if candidate != base and base not in candidate.parents:
        where = "the output folder" if action == "write" else str(base)
        raise EcgTraceError(f"refusing to {action} outside {where}: {candidate}")
    return candidate
