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
