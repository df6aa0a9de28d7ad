"""Optional LLM rewrite of question wording; every number, time and label must survive.

Off by default. The model is an examinee from the same factory as every model
the project talks to (:func:`ecgtrace.agents.exam.examinees.make_examinee`, so
retries, timeouts and key handling are the same), or any langchain chat model
(wrapped by :func:`~ecgtrace.agents.exam.examinees.as_examinee`). It only
rewrites the question; answers, options and evidence are untouched. A paraphrase that loses or changes any number (times in
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
    """Rewrite each item's question with ``model`` (an examinee or a chat model); keep the original where the check fails.

    Each item gets ``provenance.params.paraphrase``: ``{status, reason, version}``.
    """
    from ecgtrace.agents.exam.examinees import as_examinee

    examinee = as_examinee(model)
    replies = _run(_ask_all(examinee, items))
    out = []
    for item, (candidate, failure) in zip(items, replies):
        original = item["question"]
        status, reason, question = "kept", failure, original
        if failure is None:
            reason = check_paraphrase(original, candidate, labels)
            if reason is None:
                status, question = "rewritten", candidate
        params = {**item["provenance"]["params"], "paraphrase": {"status": status, "reason": reason, "version": PARAPHRASER_VERSION}}
        out.append({**item, "question": question, "provenance": {**item["provenance"], "params": params}})
    return out


async def _ask_all(examinee: Any, items: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    """``(candidate, failure)`` per item, asked one after the other (a failed call keeps the original wording)."""
    from ecgtrace.agents.exam.turns import turn_spec

    out: list[tuple[str, str | None]] = []
    for item in items:
        request = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": item["question"]}]
        turn = turn_spec(index=0, stage="paraphrase", question=item["question"], options=None, answer="", sample_id=item.get("id", ""))
        try:
            reply = await examinee.answer(request, turn)
        except Exception as exc:  # noqa: BLE001 - a failed call keeps the original wording
            out.append(("", f"model error: {type(exc).__name__}"))
            continue
        if reply.error:
            out.append(("", f"model error: {reply.error.split(':', 1)[0]}"))
        else:
            out.append((str(reply.raw or "").strip(), None))
    return out


def _run(coro: Any) -> Any:
    """Run ``coro`` to completion from synchronous code, also when an event loop is already running in this thread."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def default_model(model_name: str | None = None) -> Any:
    """The ``openai:`` examinee from the environment: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``ECGTRACE_PARAPHRASE_MODEL``.

    Raises:
        ModelError: no key in the environment (and no base URL of a local server).
    """
    import os

    from ecgtrace.agents.exam.examinees import make_examinee

    name = model_name or os.environ.get("ECGTRACE_PARAPHRASE_MODEL", "gpt-4o-mini")
    return make_examinee(f"openai:{name}", base_url=os.environ.get("OPENAI_BASE_URL"), temperature=0, concurrency=1)
