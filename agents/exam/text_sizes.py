"""How many tokens each dataset item takes as text, per encoding: written into a dataset's manifest.

So a user can pick ``--text-encoding`` (and ``--text-fs``, ``--max-prompt-tokens``)
for a model's context before a run. The number is what the prompt budget checks
(:mod:`ecgtrace.agents.exam.budget`): the estimated prompt tokens of the item's
longest text-modality request - a QA item's one request, an audit item's last
turn after its whole chain. None where the item's ECG cannot be written in that
encoding (an annotation-only record's beat list has no samples to re-encode).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ecgtrace.agents.exam.budget import estimate_request_tokens
from ecgtrace.tools.text_encodings import RAW, EncodingError, TextEncoding, text_encoding
from ecgtrace.tools.tokens import TOKEN_ESTIMATE_METHOD, TOKEN_ESTIMATE_VERSION

#: The encodings a manifest sizes every item in, by the key it is listed under.
MANIFEST_ENCODINGS: dict[str, TextEncoding] = {
    "raw": RAW,
    "downsampled_100hz": text_encoding("downsampled", 100.0),
    "compact": text_encoding("compact"),
    "compact_100hz": text_encoding("compact", 100.0),
    "summary": text_encoding("summary"),
}


def _request(item: Any, base_dir: str | Path, encoding: TextEncoding) -> list[dict[str, Any]]:
    from ecgtrace.agents.exam.messages import exam_item
    from ecgtrace.contracts.audit import AuditItem

    it = exam_item(item)
    if isinstance(it, AuditItem):
        from ecgtrace.agents.audit.examiner import chain_request

        return chain_request(it, base_dir, "text", encoding)
    from ecgtrace.agents.exam.qa_runner import build_messages

    return build_messages(it, base_dir, "text", encoding)


def item_text_tokens(item: Any, base_dir: str | Path, encodings: dict[str, TextEncoding] | None = None) -> dict[str, int | None]:
    """``{encoding key: estimated prompt tokens}`` of one audit or QA item shown as text (None: cannot be written so)."""
    out: dict[str, int | None] = {}
    for key, encoding in (encodings or MANIFEST_ENCODINGS).items():
        try:
            out[key] = estimate_request_tokens(_request(item, base_dir, encoding))
        except EncodingError:
            out[key] = None
    return out


def text_token_table(items: list[Any], base_dir: str | Path, *, has_text: Callable[[Any], bool],
                     encodings: dict[str, TextEncoding] | None = None) -> dict[str, Any]:
    """The manifest's ``text_tokens`` block: per item and encoding, and min / median / max per encoding.

    ``has_text(item)`` says whether the item has a text asset (the others are not listed).
    """
    chosen = encodings or MANIFEST_ENCODINGS
    per_item = {_id(it): item_text_tokens(it, base_dir, chosen) for it in items if has_text(it)}
    summary = {}
    for key in chosen:
        values = [sizes[key] for sizes in per_item.values() if sizes[key] is not None]
        summary[key] = {"n": len(values), "min": min(values) if values else None,
                        "median": int(statistics.median(values)) if values else None, "max": max(values) if values else None}
    return {"what": "estimated prompt tokens of each item's longest text-modality request (a QA item's request; an audit "
                    "item's last turn after its whole chain), per --text-encoding; null: the item's text cannot be written so",
            "method": TOKEN_ESTIMATE_METHOD, "version": TOKEN_ESTIMATE_VERSION,
            "encodings": {key: enc.to_json() for key, enc in chosen.items()}, "summary": summary, "items": per_item}


def _id(item: Any) -> str:
    return item["id"] if isinstance(item, dict) else item.id
