"""Rubric-driven LLM judge for free-text answers (reports, evidence reasoning).

The judge is any examinee (:func:`ecgtrace.agents.exam.examinees.make_examinee`:
``openai:<model>`` on any OpenAI-compatible endpoint, or a fake in tests), so
retries, timeouts and usage accounting are the same as for models under test.

Protocol: one request per answer. The system message holds the rubric
(instructions, criteria with weights, score bands); the user message holds the
question, the reference answer, the deterministic findings (statistics that
disagree, hallucinated findings from :mod:`ecgtrace.agents.exam.report_stats`) and
the model's answer between ``<model_answer>`` tags (any closing tag inside it
is defused), and asks for JSON::

    {"criteria": {"<criterion id>": 0-100, ...}, "score": 0-100,
     "hallucinations": ["..."], "rationale": "..."}

The verdict's ``score`` is recomputed here as the weighted sum of the
criterion scores (the judge's own total is kept as ``judge_score``), and its
band comes from the rubric. A reply that is not such JSON is recorded with
``ok: False`` and a reason; it never raises.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ecgtrace.agents.exam.examinees import Examinee, Reply
from ecgtrace.agents.exam.parsing import json_values, strip_thinking
from ecgtrace.rubrics.judge_schema import JudgeRubric

JUDGE_VERSION = "1"
_MAX_ANSWER_CHARS = 20_000


def system_prompt(rubric: JudgeRubric) -> str:
    lines = [rubric.instructions.strip(), "", "Criteria (score each 0-100):"]
    lines += [f"- {c.id} (weight {c.weight:g}): {c.description.strip()}" for c in rubric.criteria]
    lines += ["", "Score bands:"]
    lines += [f"- {b.min}-{b.max} {b.label}: {b.description.strip()}" for b in sorted(rubric.bands, key=lambda b: -b.min)]
    ids = ", ".join(f'"{c.id}": <0-100>' for c in rubric.criteria)
    lines += ["", "Reply with one JSON object and nothing else:",
              f'{{"criteria": {{{ids}}}, "score": <0-100>, "hallucinations": [<findings the answer invents>], "rationale": "<one or two sentences>"}}']
    return "\n".join(lines)


def _defuse(text: str) -> str:
    return re.sub(r"</?\s*model_answer\s*>", lambda m: m.group(0).replace("<", "&lt;").replace(">", "&gt;"), text, flags=re.I)


def judge_messages(rubric: JudgeRubric, item: dict[str, Any], answer_text: str, deterministic: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The chat messages sent to the judge for one answer."""
    parts = [f"Task: {item.get('task')}", f"Question: {item.get('question', '')}", "", "Reference answer (correct by construction):",
             str(item.get("answer", "")), ""]
    if deterministic:
        wrong = {k: v for k, v in (deterministic.get("fields") or {}).items() if v.get("status") != "correct"}
        if wrong:
            parts.append("Automatic check - fields missing or outside tolerance: " + json.dumps(wrong, sort_keys=True))
        if deterministic.get("hallucinations"):
            parts.append("Automatic check - findings asserted but absent from the reference: " + ", ".join(deterministic["hallucinations"]))
        parts.append("")
    body = _defuse(strip_thinking(answer_text or ""))[:_MAX_ANSWER_CHARS]
    parts += ["<model_answer>", body, "</model_answer>"]
    return [{"role": "system", "content": system_prompt(rubric)}, {"role": "user", "content": "\n".join(parts)}]


def _json_object(text: str) -> dict[str, Any] | None:
    return next((obj for obj in json_values(text, opening="{") if isinstance(obj, dict) and "criteria" in obj), None)


def _score(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if 0 <= value <= 100 else None
    if isinstance(value, str) and re.fullmatch(r"\s*\d+(?:\.\d+)?\s*", value):
        return _score(float(value))
    if isinstance(value, dict):
        return _score(value.get("score"))
    return None


def parse_verdict(raw: Any, rubric: JudgeRubric) -> dict[str, Any]:
    """Read the judge's JSON; ``ok`` is False (with ``reason``) unless every criterion has a 0-100 score."""
    base = {"ok": False, "reason": None, "criteria": {}, "score": None, "band": None, "judge_score": None,
            "hallucinations": [], "rationale": None}
    if not isinstance(raw, str) or not raw.strip():
        return {**base, "reason": "empty judge reply"}
    obj = _json_object(strip_thinking(raw))
    if obj is None or not isinstance(obj.get("criteria"), dict):
        return {**base, "reason": "judge reply holds no JSON object with 'criteria'"}
    scores: dict[str, float] = {}
    for criterion in rubric.criteria:
        value = _score(obj["criteria"].get(criterion.id))
        if value is None:
            return {**base, "reason": f"criterion {criterion.id!r} missing or not a 0-100 score"}
        scores[criterion.id] = value
    total = round(sum(c.weight * scores[c.id] for c in rubric.criteria), 4)
    halluc = obj.get("hallucinations")
    return {"ok": True, "reason": None, "criteria": scores, "score": total, "band": rubric.band_of(total).label,
            "judge_score": _score(obj.get("score")),
            "hallucinations": [str(h) for h in halluc][:50] if isinstance(halluc, list) else [],
            "rationale": str(obj.get("rationale"))[:2000] if obj.get("rationale") is not None else None}


async def judge_answer(judge: Examinee, rubric: JudgeRubric, item: dict[str, Any], answer_text: str,
                       deterministic: dict[str, Any] | None = None) -> dict[str, Any]:
    """Ask the judge once; returns the verdict plus ``raw``, ``latency_ms``, ``tokens``, ``error``, ``rubric``."""
    messages = judge_messages(rubric, item, answer_text, deterministic)
    turn = {"index": 0, "stage": "judge", "loop": None, "kind": None, "question": item.get("question", ""), "options": [],
            "answer": "", "multi": False, "sample_id": item.get("id")}
    try:
        reply = (await judge.answer(messages, turn)).capped(judge.max_reply_chars)
    except Exception as exc:  # noqa: BLE001 - a judge failure is recorded, never crashes the run
        from ecgtrace.errors import ModelError

        if isinstance(exc, ModelError):
            raise
        from ecgtrace.redact import redact

        reply = Reply(raw=None, error=f"{type(exc).__name__}: {redact(str(exc))[:200]}")
    verdict = parse_verdict(reply.raw, rubric) if not reply.error else {
        "ok": False, "reason": "no verdict: judge server error", "criteria": {}, "score": None, "band": None,
        "judge_score": None, "hallucinations": [], "rationale": None}
    return {**verdict, "rubric": f"{rubric.id}@{rubric.version}", "judge": getattr(judge, "name", "judge"), "raw": reply.raw,
            "latency_ms": reply.latency_ms, "tokens": reply.usage, "error": reply.error}
