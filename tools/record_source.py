"""One record source: resolve a user-given record path once, list the files that define it, hash them once.

Every builder (the HolterAgent build, the audit-item builder, ``ecgtrace
annotate``) names a record the same way and keys its caches on the same
content hash:

* :func:`resolve_record` turns ``dir/100``, ``dir/100.hea``, ``dir/00.atr`` or
  ``rec.edf`` into a :class:`RecordSource`: the absolute base path, the kind
  (``wfdb``, ``edf``, or ``annotations`` for records that are only a ``.atr``
  file, like LTAFDB) and the files whose bytes define it;
* :func:`record_sha256` is the one content hash (SHA-256 over each file's name
  and bytes, streamed in 4 MiB blocks so memory stays flat on 24 h records),
  memoized per process on the files' sizes and modification times, so the
  build and the annotator running in one worker read the bytes once;
* :func:`record_info` opens a record's header once per process (render and
  measurement workers ask for the same record for every item).

The files that define a record: its header, the signal files the header names
(or the EDF file itself), and the sidecars that shape its ground truth: the
reference annotations ``<base>.atr`` and the synthetic generator's schedule
``<base>.schedule.json``. Outputs written beside a record (``.ecgtrace``,
``.summary.json``) are not part of it, so annotating a record does not change
its identity.
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ecgtrace.errors import RecordError
from ecgtrace.tools.records import RecordInfo, open_record, resolve_record_path

RecordKind = Literal["wfdb", "edf", "annotations"]
#: Suffixes a user may give instead of the record's base name.
RECORD_SUFFIXES: frozenset[str] = frozenset({".hea", ".dat", ".mat", ".atr"})
#: Sidecars whose bytes shape a record's ground truth (reference beats and rhythm, the synthetic schedule).
TRUTH_SIDECARS: tuple[str, ...] = (".atr", ".schedule.json")
_BLOCK = 1 << 22


@dataclass(frozen=True)
class RecordSource:
    """A resolved record: where it is, what kind it is, and which files make it up.

    ``base`` is absolute (symbolic links resolved) and has no extension,
    except for EDF records, whose base is the ``.edf`` file itself.
    ``files`` are sorted by name.
    """

    base: Path
    kind: RecordKind
    files: tuple[Path, ...]

    @property
    def db(self) -> str:
        """The folder name, used as the record's database name (``local`` at the file-system root)."""
        return self.base.parent.name or "local"

    @property
    def name(self) -> str:
        return self.base.name

    @property
    def sha256(self) -> str:
        """Content hash of :attr:`files` (see :func:`record_sha256`)."""
        return record_sha256(self.files)

    def has_reference(self) -> bool:
        """The record ships expert (or synthetic) reference annotations, ``<base>.atr``."""
        return Path(f"{self.base}.atr").is_file()


def _strip_suffix(path: Path) -> Path:
    return path.with_suffix("") if path.suffix.lower() in RECORD_SUFFIXES else path


def resolve_record(path: str | os.PathLike[str]) -> RecordSource:
    """The record a user-given path names; the one resolver of every builder.

    Raises:
        RecordError: no header, EDF file or ``.atr`` annotation file is there.
    """
    try:
        base, kind = resolve_record_path(path)
    except RecordError:
        base = _strip_suffix(Path(path))
        if not Path(f"{base}.atr").is_file():
            raise RecordError(f"{path}: no record here (no .hea, .atr or .edf file)") from None
        kind = "annotations"
    base = base.resolve()
    return RecordSource(base=base, kind=kind, files=tuple(record_files(base, kind)))  # type: ignore[arg-type]


def record_files(base: Path, kind: str) -> list[Path]:
    """The files whose bytes define a record (see the module docstring), sorted by name."""
    files: set[Path] = set()
    if kind == "edf":
        files.add(base)
    header = Path(f"{base}.hea")
    if kind != "edf" and header.is_file():
        files.add(header)
        files.update(_signal_files(header))
    files.update(p for p in (Path(f"{base}{suffix}") for suffix in TRUTH_SIDECARS) if p.is_file())
    return sorted(files, key=lambda p: (p.name, str(p)))


def _signal_files(header: Path) -> list[Path]:
    """Signal files a WFDB header names that exist beside it."""
    try:
        lines = header.read_text(encoding="latin-1").splitlines()
    except OSError as exc:
        raise RecordError(f"{header}: cannot read header ({exc.strerror})") from None
    records = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    names = {line.split()[0] for line in records[1:]}
    return [header.parent / name for name in names if (header.parent / name).is_file()]


def record_sha256(files: tuple[Path, ...] | list[Path]) -> str:
    """SHA-256 over each file's name and bytes, in the given order; memoized per process.

    The memo key holds every file's size and modification time, so a file
    changed on disk is hashed again.
    """
    stamps = []
    for path in files:
        try:
            stat = path.stat()
        except OSError as exc:
            raise RecordError(f"{path}: cannot read for hashing ({exc.strerror})") from None
        stamps.append((str(path), stat.st_size, stat.st_mtime_ns))
    return _hash_files(tuple(stamps))


@functools.lru_cache(maxsize=64)
def _hash_files(stamps: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for name, _, _ in stamps:
        path = Path(name)
        digest.update(path.name.encode())
        try:
            with open(path, "rb") as handle:
                while block := handle.read(_BLOCK):
                    digest.update(block)
        except OSError as exc:
            raise RecordError(f"{path}: cannot read for hashing ({exc.strerror})") from None
    return digest.hexdigest()


def record_info(path: str | os.PathLike[str]) -> RecordInfo:
    """The record's header (``open_record(path, check_leads=False)``), opened once per process.

    For workers that read windows of the same record item after item. The
    memo key holds the header's modification time.
    """
    base, kind = resolve_record_path(path)
    header = base if kind == "edf" else Path(f"{base}.hea")
    try:
        stamp = header.stat().st_mtime_ns
    except OSError:
        stamp = 0
    return _open(str(base), stamp)


@functools.lru_cache(maxsize=8)
def _open(base: str, stamp: int) -> RecordInfo:
    return open_record(base, check_leads=False)
