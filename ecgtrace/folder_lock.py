"""One process at a time per run folder or build output folder: an exclusive ``flock`` on a lock file.

Two ``ecgtrace audit`` processes on one ``--run`` folder would both append
the same samples and send every request twice; two builds into one ``--out``
would interleave their files. :func:`lock_folder` takes an exclusive,
non-blocking ``fcntl.flock`` on ``<folder>/.ecgtrace.lock`` and writes the
holder's pid into it; a second process gets :class:`~ecgtrace.errors.BusyError`
naming that pid. The kernel drops the lock when the holder exits, however it
exits (kill -9 included), so a stale lock file never blocks a rerun.

Within one process the lock is shared: opening the same folder again (a test,
or a notebook resuming a run) reuses the held lock instead of failing on itself.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ecgtrace.errors import BusyError, OutputError

LOCK_NAME = ".ecgtrace.lock"

_HELD: dict[str, tuple[int, int]] = {}  # resolved folder -> (fd, holders in this process)
_GUARD = threading.Lock()


def _holder(path: Path) -> str:
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return "unknown"
    return text.split()[0] if text else "unknown"


def lock_folder(folder: str | os.PathLike[str], what: str) -> FolderLock:
    """Hold ``folder``'s lock (created if needed) until :meth:`FolderLock.release` or the process ends.

    Args:
        folder: the run or output folder (it must exist).
        what: what the folder is, for the message (``run folder``, ``build output folder``).

    Raises:
        BusyError: another process holds it.
        OutputError: the lock file cannot be created (read-only folder) or is a symbolic link.
    """
    import fcntl

    root = Path(folder)
    key = str(root.resolve())
    with _GUARD:
        if key in _HELD:
            fd, count = _HELD[key]
            _HELD[key] = (fd, count + 1)
            return FolderLock(key)
        path = root / LOCK_NAME
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            if path.is_symlink():
                raise OutputError(f"refusing to use {path}: it is a symbolic link") from None
            raise OutputError(f"cannot lock {what} {root}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise BusyError(f"{what} {root} is in use by another ecgtrace process (pid {_holder(path)}); "
                            "wait for it to finish or stop it, then run the command again") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        _HELD[key] = (fd, 1)
        return FolderLock(key)


class FolderLock:
    """A held folder lock; :meth:`release` lets the next process in (idempotent)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._released = False

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        with _GUARD:
            fd, count = _HELD[self.key]
            if count > 1:
                _HELD[self.key] = (fd, count - 1)
                return
            del _HELD[self.key]
            os.close(fd)  # closing the descriptor drops the flock

    def __enter__(self) -> FolderLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
