"""``human``: you type the answers.

In a run the audit graph asks through a LangGraph ``interrupt()`` in a node of
its own and the QA runner through its ``ask_human`` callback
(``interactive = True`` tells them to). Given an ``ask`` callback, the
examinee answers directly, as the debugger's re-ask does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ecgtrace.agents.exam.examinees.base import Backend, Examinee, ExamineeOptions, Reply


class HumanExaminee(Examinee):
    """Answered at the terminal: the graph routes its turns to an interrupt node.

    Args:
        ask: ``ask(turn) -> typed answer``; when given, :meth:`answer` calls it
            (without it the runner must route the turn to a person).
    """

    name = "human"
    interactive = True

    def __init__(self, ask: Callable[[dict[str, Any]], str] | None = None) -> None:
        self.ask = ask

    async def answer(self, messages: list[dict[str, Any]], turn: dict[str, Any]) -> Reply:
        if self.ask is None:
            raise RuntimeError("human answers come through the graph's interrupt, not answer()")
        return Reply(raw=self.ask(turn))


def _make(argument: str | None, options: ExamineeOptions) -> Examinee:
    return HumanExaminee()


BACKEND = Backend("human", _make, summary="you type the answers at the terminal")
