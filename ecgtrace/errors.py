"""Errors that ecgtrace reports to the user as one clear line.

Every failure that comes from the user's input (a record, an annotation file, a
template, a model answer, a server) is raised as an :class:`EcgTraceError`
subclass. The CLI prints ``error: <message>`` and exits non-zero instead of
showing a traceback; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class EcgTraceError(Exception):
    """Base class: a problem with the user's input, reported as one line."""

    exit_code: int = 2


class RecordError(EcgTraceError):
    """A record cannot be opened or read (missing, truncated, corrupt, unsupported)."""


class WindowError(RecordError):
    """A requested window or lead does not exist in the record."""


class AnnotationError(EcgTraceError):
    """An annotation file is missing, unreadable or does not match its record."""


class RubricError(EcgTraceError):
    """A YAML template, diagnosis graph or judge rubric is malformed."""


class ModelError(EcgTraceError):
    """A model endpoint failed in a way retries could not fix."""


class RunError(EcgTraceError):
    """A run directory is unusable (wrong dataset, foreign header, corrupt log)."""


class DatasetFormatError(EcgTraceError):
    """A dataset file (or one of its lines) does not follow its item contract."""


class AuditFormatError(DatasetFormatError):
    """An audit.jsonl file (or one of its lines) does not follow :class:`ecgtrace.contracts.AuditItem`."""


class QAFormatError(DatasetFormatError):
    """A qa.jsonl file (or one of its lines) does not follow :class:`ecgtrace.contracts.QAItem`."""


class InteropError(EcgTraceError):
    """A file in another benchmark's format cannot be read, or a run cannot be written in one."""


class ExamFailedError(ModelError):
    """An examination ran but no turn got an answer (every request failed): a failed run, not a 0% score."""

    exit_code: int = 3


class OutputError(EcgTraceError):
    """An output cannot be written (read-only or full disk, a path under a file, a symbolic link where a file belongs)."""


class BusyError(EcgTraceError):
    """A run or output folder is in use by another ecgtrace process (it holds the folder's lock)."""


#: errno values that mean the environment refused an output (not a bug): permissions, read-only or full disk,
#: a path under a file, a folder where a file belongs, too many open files.
ENVIRONMENT_ERRNOS: frozenset[int] = frozenset({1, 13, 17, 20, 21, 24, 28, 30, 36, 122})
#: SQLite messages with the same meaning (a checkpoint database on a full or read-only disk).
_SQLITE_ENVIRONMENT = ("disk is full", "readonly database", "unable to open database", "disk i/o error", "database is locked",
                       "file is not a database", "database disk image is malformed")


def environment_problem(exc: BaseException) -> str | None:
    """One line for an error the machine raised on the user's files (full disk, read-only folder), else None (a bug).

    The CLI shows such an error as ``error: ...`` instead of a traceback; code
    that knows the file raises :class:`OutputError` itself.
    """
    if isinstance(exc, OSError) and exc.errno in ENVIRONMENT_ERRNOS:
        where = f" {exc.filename}" if exc.filename else ""
        return f"cannot write{where}: {exc.strerror or exc}"
    module = type(exc).__module__
    if module.startswith("sqlite3") or module.startswith("aiosqlite"):
        text = str(exc).lower()
        if any(m in text for m in _SQLITE_ENVIRONMENT):
            return f"checkpoint database: {exc}"
    return None
