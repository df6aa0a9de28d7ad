"""Sidecar store and WFDB output of :mod:`ecgtrace.tools.annotate` (internal).

The store key is a hash of (record content, tool versions, parameters): the
record content hash covers the ``.hea`` and every signal file it names (and
the reference annotation file when reference beats are used), read in 1 MiB
blocks so memory stays flat on 24 h records.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ecgtrace.contracts.vocabulary import RHYTHM_NOTES
from ecgtrace.errors import RecordError
from ecgtrace.jsonio import to_json_text, write_bytes_atomic, write_json_atomic

_BLOCK = 1 << 20

# later kinds override earlier ones where episodes overlap
_NOTE_PRIORITY = ("sinus_tachycardia", "sinus_bradycardia", "v_bigeminy", "v_trigeminy", "s_bigeminy", "s_trigeminy", "ivr", "svt", "vt")


def record_files(base: Path, kind: str, extra: tuple[Path, ...] = ()) -> list[Path]:
    """The files whose bytes define a record: header and signal files (or the EDF file)."""
    if kind == "edf":
        return [base, *extra]
    header = Path(f"{base}.hea")
    files = [header]
    seen = set()
    for line in header.read_text(encoding="latin-1").splitlines()[1:]:
        parts = line.split()
        if not parts or line.startswith("#"):
            continue
        name = parts[0]
        if name not in seen and (base.parent / name).exists():
            seen.add(name)
            files.append(base.parent / name)
    return files + list(extra)


def content_hash(files: list[Path]) -> str:
    """SHA-256 over each file's name and bytes, streamed."""
    digest = hashlib.sha256()
    for path in files:
        try:
            handle = open(path, "rb")
        except OSError as exc:
            raise RecordError(f"{path}: cannot read for hashing ({exc.strerror})") from None
        digest.update(path.name.encode() + b"\0")
        with handle:
            while block := handle.read(_BLOCK):
                digest.update(block)
    return digest.hexdigest()


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
