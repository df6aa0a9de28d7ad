"""``oracle``: answers the ground truth, as option text (never ambiguous to the parser); must score 100% on every metric."""

from __future__ import annotations

from typing import Any

from ecgtrace.agents.exam.examinees.base import Backend, Examinee, ExamineeOptions, Reply, as_text


class OracleExaminee(Examinee):
    """Answers the ground truth, as option text."""

    name = "oracle"
    reads_ecg = False

    async def answer(self, messages: list[dict[str, Any]], turn: dict[str, Any]) -> Reply:
        return Reply(raw=as_text(turn["answer"]))


def _make(argument: str | None, options: ExamineeOptions) -> Examinee:
    return OracleExaminee()


BACKEND = Backend("oracle", _make, summary="answers the ground truth (must score 100%)")
