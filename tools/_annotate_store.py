"""Sidecar store and WFDB output of :mod:`ecgtrace.tools.annotate` (internal).

The store key is a hash of (record content, tool versions, parameters); the
record content hash is :func:`ecgtrace.tools.record_source.record_sha256`. The
store lives in the user's cache folder (:func:`default_cache_dir`), never
beside the records.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ecgtrace.contracts.vocabulary import RHYTHM_NOTES
from ecgtrace.jsonio import to_json_text, write_bytes_atomic, write_json_atomic

# later kinds override earlier ones where episodes overlap
_NOTE_PRIORITY = ("sinus_tachycardia", "sinus_bradycardia", "v_bigeminy", "v_trigeminy", "s_bigeminy", "s_trigeminy", "ivr", "svt", "vt")


def default_cache_dir() -> Path:
    """The user's ecgtrace cache: ``$ECGTRACE_CACHE``, else the platform cache folder.

    ``$XDG_CACHE_HOME/ecgtrace`` (default ``~/.cache/ecgtrace``) on Linux and
    other Unix systems, ``~/Library/Caches/ecgtrace`` on macOS,
    ``%LOCALAPPDATA%\\ecgtrace\\Cache`` on Windows. Never the folder that holds
    the records: input folders are not written to.
    """
    env = os.environ.get("ECGTRACE_CACHE")
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "ecgtrace" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "ecgtrace"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache") / "ecgtrace"


def store_dir(cache_root: str | os.PathLike[str] | None = None) -> Path:
    """Where :func:`ecgtrace.tools.annotate.annotate_record` keeps its entries: ``<cache root>/annotations``."""
    return Path(cache_root if cache_root is not None else default_cache_dir()) / "annotations"


def store_key(record_hash: str, versions: dict[str, Any], params: dict[str, Any]) -> str:
    text = to_json_text({"record": record_hash, "versions": versions, "params": params})
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def save(cache_dir: Path, key: str, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> Path:
    """Write ``<key>.npz`` then ``<key>.json`` (the JSON last: it marks the entry complete)."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    write_bytes_atomic(cache_dir / f"{key}.npz", buffer.getvalue())
    return write_json_atomic(cache_dir / f"{key}.json", meta)


def load(cache_dir: Path, key: str) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
    """The stored entry, or None when absent or unreadable (then it is recomputed)."""
    meta_path, npz_path = cache_dir / f"{key}.json", cache_dir / f"{key}.npz"
    if not (meta_path.exists() and npz_path.exists()):
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        with np.load(npz_path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except (OSError, ValueError, json.JSONDecodeError):
        return None
    return arrays, meta


def rhythm_labels(n_beats: int, af_mask: np.ndarray, events: list[dict[str, Any]]) -> list[str]:
    """One rhythm label per beat: N or AFIB as the base, episodes painted on top."""
    labels = np.where(np.asarray(af_mask, dtype=bool), "AFIB", "N").astype(object) if n_beats else np.array([], dtype=object)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        by_kind.setdefault(e["kind"], []).append(e)
    for kind in _NOTE_PRIORITY:
        for e in by_kind.get(kind, []):
            labels[e["first_beat"] : e["last_beat"] + 1] = RHYTHM_NOTES[kind]
    return labels.tolist()


def write_wfdb(record_name: str, out_dir: Path, fs_hz: float, beat_samples: np.ndarray, beat_classes: np.ndarray, labels: list[str], extension: str = "ecgtrace") -> Path:
    """Write beats (symbols N S V F Q) and rhythm changes (``+`` with aux ``(AFIB`` ...) as a WFDB annotation file."""
    import wfdb

    samples: list[int] = []
    symbols: list[str] = []
    aux: list[str] = []
    current = None
    for sample, cls, label in zip(np.asarray(beat_samples).tolist(), np.asarray(beat_classes).astype(str).tolist(), labels):
        if label != current:
            samples.append(int(sample))
            symbols.append("+")
            aux.append("(" + label)
            current = label
        samples.append(int(sample))
        symbols.append(cls)
        aux.append("")
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{record_name}.{extension}"
    tmp_dir = out_dir / f".{record_name}.{extension}.tmp"
    tmp_dir.mkdir(exist_ok=True)
    try:
        if samples:
            wfdb.wrann(record_name, extension, np.array(samples, dtype=np.int64), symbol=symbols, aux_note=aux, fs=fs_hz, write_dir=str(tmp_dir))
            os.replace(tmp_dir / f"{record_name}.{extension}", target)
        else:  # wrann refuses an empty list; an annotation file with only the end marker is valid
            write_bytes_atomic(target, b"\x00\x00")
    finally:
        for leftover in tmp_dir.glob("*"):
            leftover.unlink()
        tmp_dir.rmdir()
    return target
