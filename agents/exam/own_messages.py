"""The messages a QA item carries itself (``qa.jsonl``'s ``messages``), as sent in one modality and text encoding.

Split from :mod:`ecgtrace.agents.exam.messages`; it reads assets through
:mod:`ecgtrace.agents.exam.asset_files`: a built dataset stores ready-made messages per modality, with
the signal text inline and image paths relative to the dataset folder.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from ecgtrace.agents.exam.asset_files import asset_text, image_data_uri, resolve_asset, shown_files, signal_text
from ecgtrace.contracts.qa import QAItem
from ecgtrace.errors import QAFormatError
from ecgtrace.tools.text_encodings import RAW, EncodingError, TextEncoding


def own_messages(item: QAItem, base_dir: str | Path, modality: str, encoding: TextEncoding = RAW) -> list[dict[str, Any]] | None:
    """The messages a QA item carries, for ``modality``; None when it carries none for it.

    A dict keyed by modality (``{"text": [...], "image": [...]}``, as the
    dataset writes it; ``both`` = the text messages plus the image parts), or a
    list (image parts dropped for ``text``; the part holding the item's signal
    text asset dropped for ``image``). Image URLs that are paths relative to the
    dataset folder become data URIs. With an ``encoding`` other than raw, the
    signal text inside the messages is replaced by the item's text asset in
    that encoding. The item is never modified.
    """
    own = item.messages
    if isinstance(own, dict) and (own.get(modality) or (modality == "both" and own.get("text") and own.get("image"))):
        if modality != "both":
            chosen = copy.deepcopy(own[modality])
        else:
            chosen = copy.deepcopy(own["text"])
            images = [p for m in own["image"] if isinstance(m.get("content"), list) for p in m["content"] if p.get("type") == "image_url"]
            last = next(m for m in reversed(chosen) if m.get("role") == "user")
            if isinstance(last["content"], str):
                last["content"] = [{"type": "text", "text": last["content"]}]
            last["content"] = [*last["content"], *copy.deepcopy(images)]
        return _inline_images(_reencoded(chosen, item, base_dir, modality, encoding), base_dir)
    if isinstance(own, list) and own:
        shown = _only_shown(copy.deepcopy(own), modality, _signal_texts(item, base_dir))
        return _inline_images(_reencoded(shown, item, base_dir, modality, encoding), base_dir)
    return None


def _reencoded(messages: list[dict[str, Any]], item: QAItem, base_dir: str | Path, modality: str,
               encoding: TextEncoding) -> list[dict[str, Any]]:
    """Replace each signal text asset found in the messages by its ``encoding`` (raw or image-only: unchanged).

    Raises:
        EncodingError: the messages hold none of the item's signal text, so there is nothing to re-encode.
    """
    if encoding.is_asset or modality == "image":
        return messages
    swaps = [(asset_text(p), signal_text(p, encoding)) for p in (resolve_asset(base_dir, rel) for rel in shown_files(item)[1]["text"])
             if p.is_file()]
    found = False
    for message in messages:
        content = message.get("content")
        parts = content if isinstance(content, list) else [message]
        key = "text" if isinstance(content, list) else "content"
        for part in parts:
            text = part.get(key) if isinstance(part, dict) else None
            if not isinstance(text, str) or (isinstance(content, list) and part.get("type") != "text"):
                continue
            for raw, encoded in swaps:
                if raw.strip() and raw in text:
                    text, found = text.replace(raw, encoded), True
            part[key] = text
    if not found:
        raise EncodingError(f"item {item.id!r}: its own messages hold no signal text asset to write as {encoding.method}")
    return messages


def _signal_texts(item: QAItem, base_dir: str | Path) -> list[str]:
    """The item's signal text assets that exist: what marks a signal part in its own messages."""
    paths = [resolve_asset(base_dir, rel) for rel in shown_files(item)[1]["text"]]
    return [text for text in (asset_text(p) for p in paths if p.is_file()) if text.strip()]


def _only_shown(messages: list[dict[str, Any]], modality: str, signals: list[str]) -> list[dict[str, Any]]:
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        kept = []
        for part in content:
            is_image = isinstance(part, dict) and part.get("type") == "image_url"
            is_signal = isinstance(part, dict) and part.get("type") == "text" and any(s in str(part.get("text", "")) for s in signals)
            if not ((modality == "text" and is_image) or (modality == "image" and is_signal)):
                kept.append(part)
        message["content"] = kept
    return messages


def _inline_images(messages: list[dict[str, Any]], base_dir: str | Path) -> list[dict[str, Any]]:
    """Image parts whose URL is a path relative to the dataset folder become data URIs (the dataset writes paths)."""
    for message in messages:
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            url = (part.get("image_url") or {}).get("url") if isinstance(part, dict) and part.get("type") == "image_url" else None
            if isinstance(url, str) and not url.startswith(("data:", "http://", "https://")):
                path = resolve_asset(base_dir, url, QAFormatError)
                if not path.is_file():
                    raise QAFormatError(f"image {url!r} of a QA item not found under {base_dir}")
                part["image_url"] = {**part["image_url"], "url": image_data_uri(path)}
    return messages
