"""Optional LLM rewrite of question wording; every number, time and label must survive.

Off by default. The model (a langchain chat model, e.g. ``ChatOpenAI`` with
``use_responses_api=False``) only rewrites the question; answers, options and
evidence are untouched. A paraphrase that loses or changes any number (times in
ms, counts, ages) or any protected label (the finding names, ``ms``) is
rejected and the original question is kept, with the reason recorded.
"""

from __future__ import annotations

import re
from typing import Any

PARAPHRASER_VERSION = "1"
SYSTEM_PROMPT = (
    "Rewrite the user's question about an ECG with different wording. Keep every number, time, unit and "
    "medical term exactly as written. Do not answer it. Reply with the rewritten question only."
)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def protected_terms(question: str, labels: list[str]) -> list[str]:
    """Numbers and labels that a paraphrase must keep verbatim."""
    terms = _NUMBER.findall(question)
    terms += [label for label in labels if label and label.lower() in question.lower()]
    if " ms" in question:
        terms.append("ms")
    return terms


def check_paraphrase(original: str, candidate: str, labels: list[str]) -> str | None:
    """Why ``candidate`` is not acceptable, or None."""
    text = candidate.strip()
    if not text:
        return "empty paraphrase"
    want = sorted(_NUMBER.findall(original))
    got = sorted(_NUMBER.findall(text))
    if want != got:
        return f"numbers changed: {want} -> {got}"
    for term in protected_terms(original, labels):
        if not _NUMBER.fullmatch(term) and term.lower() not in text.lower():
            return f"lost term {term!r}"
    return None


def paraphrase_items(items: list[dict[str, Any]], model: Any, labels: list[str]) -> list[dict[str, Any]]:
    """Rewrite each item's question with ``model``; keep the original where the check fails.

    Each item gets ``provenance.params.paraphrase``: ``{status, reason}``.
    """
    from langchain_core.messages import HumanMessage, SystemMessage

    out = []
    for item in items:
        original = item["question"]
        status, reason, question = "kept", None, original
        try:
            reply = model.invoke([SystemMessage(SYSTEM_PROMPT), HumanMessage(original)])
            candidate = str(getattr(reply, "content", reply)).strip()
            reason = check_paraphrase(original, candidate, labels)
            if reason is None:
                status, question = "rewritten", candidate
        except Exception as exc:  # noqa: BLE001 - a failed call keeps the original wording
            reason = f"model error: {type(exc).__name__}"
        params = {**item["provenance"]["params"], "paraphrase": {"status": status, "reason": reason, "version": PARAPHRASER_VERSION}}
        out.append({**item, "question": question, "provenance": {**item["provenance"], "params": params}})
    return out


def default_model(model_name: str | None = None) -> Any:
    """``ChatOpenAI`` from the environment (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``ECGTRACE_PARAPHRASE_MODEL``)."""
    import os

    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model=model_name or os.environ.get("ECGTRACE_PARAPHRASE_MODEL", "gpt-4o-mini"), temperature=0, use_responses_api=False)
