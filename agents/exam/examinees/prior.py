"""``prior``: a shortcut probe that never sees the ECG nor the conversation, only the option texts.

It always picks the **longest option text** (the first one among ties). For
Yes/No that is "Yes"; for decisions "Further findings are required…"; for
multi-select the single longest option.
"""

from __future__ import annotations

from typing import Any

from ecgtrace.agents.exam.examinees.base import NO_OPTIONS_ANSWER, Backend, Examinee, ExamineeOptions, Reply


class PriorExaminee(Examinee):
    """Sees the option texts only; always the longest option (first among ties).

    Open questions (no options) get :data:`NO_OPTIONS_ANSWER`.
    """

    name = "prior"
    reads_ecg = False

    async def answer(self, messages: list[dict[str, Any]], turn: dict[str, Any]) -> Reply:
        options = turn.get("options") or []
        if not options:
            return Reply(raw=NO_OPTIONS_ANSWER)
        return Reply(raw=max(options, key=len))  # max keeps the first of equal lengths


def _make(argument: str | None, options: ExamineeOptions) -> Examinee:
    return PriorExaminee()


BACKEND = Backend("prior", _make, summary="never sees the ECG: always the longest option (a shortcut probe)")
