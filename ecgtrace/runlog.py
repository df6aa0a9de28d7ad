"""Run directory I/O for reasoning audits and QA evaluations.

A run directory holds:

* ``header.json`` - a :class:`ecgtrace.contracts.RunHeader`, written once when
  the run starts: ``format`` (``ecgtrace-run/2``; ``ecgtrace-run/3`` for a
  ``probe`` run), ``kind`` (``audit``, ``qa`` or ``probe``: what the run
  examines, so no reader guesses it from the rows),
  ``run_id``, ``identity`` (everything that decides the results: dataset
  SHA-256, model, modality, mode, seed, limit, prompt version), ``settings``
  (things that may change between resumes: concurrency, timeout, base URL,
  name of the API-key variable - never the key), ``versions``,
  ``metrics_version`` (audit runs: the metric definitions in force when the run
  began; older audit headers read as ``"1"``) and ``created_utc``. Format 1
  headers (``ecgtrace-audit-run/1``) are still read.
* ``samples.jsonl`` - append-only, one line per finished sample
  (:class:`~ecgtrace.contracts.AuditSample` or :class:`~ecgtrace.contracts.QASample`), fsynced.
* ``results.json`` - metrics, rewritten atomically from ``samples.jsonl``.
* ``checkpoints.sqlite`` - LangGraph checkpoints (one thread per sample).

Opening an existing directory with a different identity is refused
(:class:`~ecgtrace.errors.RunError`). The comparison follows the identity rules
of :func:`comparable_identity`: which samples a run asks (``--limit``,
``--sample-id``, ``--epochs``) is not part of it, so a run folder grows from
``--limit 20`` to the whole dataset; keys added later (the text encoding, the
option shuffle) read as their old meaning in headers written before them. A torn last line of ``samples.jsonl``
(process killed while appending) is cut off on open; duplicate ids are never
appended and are ignored on read (first wins); a line that is no sample (no
``id``) is an error naming its line.

One process at a time: :meth:`RunDir.open` holds the folder's lock
(:mod:`ecgtrace.folder_lock`) until the process ends or :meth:`RunDir.close`,
so a second ``ecgtrace audit`` on the same folder stops with one line naming
the holder. The files of a run folder are never symbolic links (a
``samples.jsonl`` linking outside would be appended to, a
``checkpoints.sqlite`` linking outside turned into a database): such a folder
is refused.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import platform
from pathlib import Path
from typing import Any

from ecgtrace.contracts.runs import RUN_FORMAT, RunHeader
from ecgtrace.errors import EcgTraceError, RunError
from ecgtrace.folder_lock import LOCK_NAME, lock_folder
from ecgtrace.jsonio import append_jsonl, make_folder, read_jsonl, to_json_text, write_json_atomic, write_jsonl_atomic
from ecgtrace.metrics import METRICS_VERSION

FORMAT = RUN_FORMAT
HEADER = "header.json"
SAMPLES = "samples.jsonl"
RESULTS = "results.json"
CHECKPOINTS = "checkpoints.sqlite"
#: Every file a run folder may hold that ecgtrace writes (SQLite adds its -wal and -shm files).
RUN_FILES: tuple[str, ...] = (HEADER, SAMPLES, RESULTS, CHECKPOINTS, f"{CHECKPOINTS}-wal", f"{CHECKPOINTS}-shm", "report.html")


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in ("ecgtrace", "langgraph", "langgraph-checkpoint-sqlite", "langchain-openai", "langchain-core", "openai"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


#: Identity keys that no longer decide a sample's result (older headers have them): left out of every comparison.
NOT_IDENTITY = ("limit",)
#: Keys added to the identity later, with what a header without them (or with null) meant.
IDENTITY_DEFAULTS: dict[str, Any] = {
    "text_encoding": {"method": "raw", "fs_hz": None, "leads": None, "version": "1"},  # ecgtrace.tools.text_encodings.RAW
    "option_shuffle": "1",  # ecgtrace.agents.exam.run_control.SHUFFLE_VERSION; epoch 0 was never shuffled
    "skip_unavailable": False,  # qa-eval --skip-unavailable
}


def comparable_identity(identity: dict[str, Any]) -> dict[str, Any]:
    """An identity as it is compared: keys of :data:`NOT_IDENTITY` dropped, later keys filled with their old meaning.

    ``skipped_unavailable`` (a count of items left out for the modality, which
    changed with ``--limit``) reads as the flag ``skip_unavailable``.
    """
    out = {k: v for k, v in identity.items() if k not in NOT_IDENTITY}
    if "skipped_unavailable" in out:  # written only with --skip-unavailable
        out.pop("skipped_unavailable")
        out["skip_unavailable"] = True
    for key, default in IDENTITY_DEFAULTS.items():
        if out.get(key) is None:
            out[key] = default
    return out


def run_id_for(identity: dict[str, Any]) -> str:
    return hashlib.sha256(to_json_text(identity).encode()).hexdigest()[:16]


class RunDir:
    """A run directory; use :meth:`open`. ``header`` is the header's JSON, ``kind`` what the run examines."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        self.header = header
        self.run_id: str = header["run_id"]
        self.kind: str = header["kind"]
        self._ids: set[str] = set()
        self._lock: Any = None

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
    def open(cls, path: str | os.PathLike[str], identity: dict[str, Any], settings: dict[str, Any] | None = None, *,
             kind: str | None = None) -> RunDir:
        """Create the run directory, or reopen it after checking it belongs to the same run.

        ``kind`` (``audit`` or ``qa``) is what the run examines; by default the
        identity's own ``kind`` (QA identities carry one), else ``audit``.
        """
        root = Path(path)
        if root.exists() and not root.is_dir():
            raise RunError(f"--run {root} exists and is not a folder")
        make_folder(root)
        lock = lock_folder(root, "run folder")
        try:
            run = cls._open_locked(root, identity, settings, kind)
        except BaseException:
            lock.release()
            raise
        run._lock = lock
        return run

    @classmethod
    def _open_locked(cls, root: Path, identity: dict[str, Any], settings: dict[str, Any] | None, kind: str | None) -> RunDir:
        check_run_files(root)
        header_path = root / HEADER
        if header_path.exists():
            header = read_header(root)
            if kind is not None and header["kind"] != kind:
                raise RunError(f"{root} holds a run of kind {header['kind']!r}, not {kind!r}; use a new --run folder")
            _check_identity(root, header.get("identity", {}), identity)
        else:
            if any(p.name != LOCK_NAME for p in root.iterdir()):
                raise RunError(f"{root} is not empty and has no {HEADER}; refusing to mix runs (use a new --run folder)")
            run_kind = kind or identity.get("kind") or "audit"
            header = RunHeader(kind=run_kind, run_id=run_id_for(identity), identity=identity,  # type: ignore[arg-type]
                               settings=settings or {}, versions=package_versions(),
                               metrics_version=METRICS_VERSION if run_kind == "audit" else None,
                               created_utc=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")).to_json()
            write_json_atomic(header_path, header)
        run = cls(root, header)
        run._repair_tail()
        run._ids = {row["id"] for row in run.samples()}
        return run

    def close(self) -> None:
        """Let another process open this run folder (the lock also goes when the process ends)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        return sample_rows(self.samples_path)

    def finished_ids(self) -> set[str]:
        return set(self._ids)

    def append_sample(self, row: dict[str, Any] | Any) -> bool:
        """Append one finished sample (a sample model or its JSON); False (nothing written) when its id is already there."""
        if hasattr(row, "to_json"):
            row = row.to_json()
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
        """Write ``results.json`` atomically; an unchanged file is left alone, so a rerun that asks nothing changes nothing."""
        import json

        try:
            if json.loads(self.results_path.read_text(encoding="utf-8")) == json.loads(to_json_text(results)):
                return self.results_path
        except (OSError, ValueError):
            pass
        return write_json_atomic(self.results_path, results)

    def thread_id(self, sample_id: str) -> str:
        return f"{self.run_id}:{sample_id}"


def check_run_files(root: Path) -> None:
    """Refuse a run folder whose files are symbolic links, or whose samples.jsonl is not a file."""
    for name in RUN_FILES:
        path = root / name
        if path.is_symlink():
            raise RunError(f"{path} is a symbolic link; a run folder's files must be its own (refusing to write through it)")
        if path.exists() and not path.is_file():
            raise RunError(f"{path} is not a file (a folder of that name is in the way); use a new --run folder")


def sample_rows(path: Path) -> list[dict[str, Any]]:
    """The samples of a ``samples.jsonl``: first occurrence of each id, in file order; a line that is no sample is an error."""
    seen: set[str] = set()
    rows = []
    try:
        numbered = read_jsonl(path, with_lines=True)
    except EcgTraceError as exc:
        raise RunError(str(exc)) from None
    for number, row in numbered:
        # the id is what every reader keys on; 'turns', when there (audit and QA samples), is a list
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not isinstance(row.get("turns", []), list):
            raise RunError(f"{path}:{number}: not a finished sample (a JSON object with a string 'id', and 'turns' a list); "
                           "fix or remove that line")
        if row["id"] not in seen:
            seen.add(row["id"])
            rows.append(row)
    return rows


def _check_identity(root: Path, old: dict[str, Any], new: dict[str, Any]) -> None:
    old, new = comparable_identity(old), comparable_identity(new)
    if old != new:
        diffs = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
        shown = "; ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in diffs[:3])
        raise RunError(f"{root} holds a run with a different dataset/config ({shown}); use a new --run folder")


def read_run_header(root: str | os.PathLike[str]) -> RunHeader:
    """The validated header of the run folder ``root`` (format 1 headers are read and say their kind)."""
    import json

    from pydantic import ValidationError

    header_path = Path(root) / HEADER
    if not header_path.is_file():
        raise RunError(f"{root} is not an audit run folder, nor a QA one (no {HEADER})")
    try:
        data = json.loads(header_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunError(f"{header_path}: unreadable ({exc})") from None
    try:
        return RunHeader.model_validate(data)
    except ValidationError as exc:
        raise RunError(f"{header_path}: not an ecgtrace run header ({exc.errors()[0]['msg']})") from None


def read_header(root: str | os.PathLike[str]) -> dict[str, Any]:
    """:func:`read_run_header` as plain JSON (``header["kind"]`` is always there)."""
    return read_run_header(root).to_json()


def load_run_samples(root: str | os.PathLike[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Header and finished samples of an existing run (read-only)."""
    header = read_header(root)
    path = Path(root) / SAMPLES
    if path.exists() and not path.is_file():
        raise RunError(f"{path} is not a file")
    return header, sample_rows(path)
