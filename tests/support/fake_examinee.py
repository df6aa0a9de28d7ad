"""A third-party examinee backend, as a plugin package would ship it (registered through an entry point in tests)."""

from __future__ import annotations

from typing import Any

from ecgtrace.agents.exam.examinees import Backend, Examinee, ExamineeOptions, Reply


class EchoExaminee(Examinee):
    """Answers ``<prefix><the last option>``; records what it was built with."""

    def __init__(self, prefix: str, options: ExamineeOptions) -> None:
        self.name = f"echo:{prefix}"
        self.prefix = prefix
        self.options = options

    async def answer(self, messages: list[dict[str, Any]], turn: dict[str, Any]) -> Reply:
        return Reply(raw=f"{self.prefix}{(turn.get('options') or ['?'])[-1]}")


def make_echo(argument: str | None, options: ExamineeOptions) -> Examinee:
    return EchoExaminee(argument or "", options)


#: What the plugin's entry point names: ``echo = "tests.support.fake_examinee:BACKEND"``.
BACKEND = Backend("echo", make_echo, argument="prefix", summary="answers the last option")
NOT_A_BACKEND = 42
