"""The files that show an item: which they are, where they are (never outside the dataset folder), their content.

* :func:`shown_files` lists an item's text and image assets; :func:`resolve_asset`
  is the one way an asset path becomes a file (refused when it leaves the folder).
* :func:`image_data_uri`, :func:`asset_text` and :func:`signal_text` (the text
  asset in a run's text encoding) read them on demand, cached by path, size and
  modification time, and by content for encodings.

Used by :mod:`ecgtrace.agents.exam.messages` (which re-exports these names) and
:mod:`ecgtrace.agents.exam.own_messages`.
"""

from __future__ import annotations

import base64
from functools import lru_cache
from pathlib import Path

from ecgtrace.contracts.audit import AuditItem
from ecgtrace.contracts.qa import QAItem
from ecgtrace.errors import DatasetFormatError, EcgTraceError
from ecgtrace.jsonio import safe_join
from ecgtrace.tools.text_encodings import RAW, TextEncoding, encode_signal_text


def shown_files(item: AuditItem | QAItem) -> tuple[str, dict[str, list[str]]]:
    """``(field, {"text": [paths], "image": [paths]})``: the files that show an item, relative to its dataset folder."""
    if isinstance(item, AuditItem):
        assets = item.assets
        return "assets", {"text": [assets.text] if assets.text else [], "image": [assets.image] if assets.image else []}
    mods = item.modalities
    return "modalities", {"text": [mods.text] if mods.text else [], "image": list(mods.image)}


def resolve_asset(base_dir: str | Path, rel: str, error: type[EcgTraceError] = DatasetFormatError) -> Path:
    """The file an asset path names, relative to the dataset folder ``base_dir``; refused when it leaves that folder."""
    try:
        return safe_join(base_dir, rel)
    except EcgTraceError:
        raise error(f"asset {rel!r} resolves outside the dataset folder {base_dir}") from None


@lru_cache(maxsize=64)
def _data_uri(path: str, mtime_ns: int, size: int) -> str:
    mime = "image/png" if path.lower().endswith(".png") else "image/jpeg"
    return f"data:{mime};base64,{base64.b64encode(Path(path).read_bytes()).decode('ascii')}"


@lru_cache(maxsize=64)
def _text(path: str, mtime_ns: int, size: int) -> str:
    return Path(path).read_text(encoding="utf-8")


def image_data_uri(path: Path) -> str:
    """A PNG/JPEG file as a data URI (cached: items share display windows; a rewritten file is read again)."""
    stat = path.stat()
    return _data_uri(str(path), stat.st_mtime_ns, stat.st_size)


def asset_text(path: Path) -> str:
    """A text asset's content (cached like :func:`image_data_uri`)."""
    stat = path.stat()
    return _text(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _encoded(text: str, encoding: TextEncoding) -> str:
    return encode_signal_text(text, encoding)  # keyed by content: items that show the same window share it


def signal_text(path: Path, encoding: TextEncoding = RAW) -> str:
    """A text asset in ``encoding`` (the asset itself for raw): deterministic, cached by file and encoding.

    Raises:
        ecgtrace.tools.text_encodings.EncodingError: the asset cannot be written in ``encoding``.
    """
    text = asset_text(path)
    return text if encoding.is_asset else _encoded(text, encoding)
