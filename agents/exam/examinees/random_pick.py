"""``random``: uniform over the options, seeded per turn, so a resumed run draws what an uninterrupted one would."""

from __future__ import annotations

import hashlib
import random
from typing import Any

from ecgtrace.agents.exam.examinees.base import NO_OPTIONS_ANSWER, Backend, Examinee, ExamineeOptions, Reply


class RandomExaminee(Examinee):
    """Uniform over options (multi-select: uniform over non-empty subsets), seeded per (seed, sample id, turn index).

    Open questions (no options) get :data:`NO_OPTIONS_ANSWER`.
    """

    name = "random"
    reads_ecg = False

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)

    def _rng(self, turn: dict[str, Any]) -> random.Random:
        key = f"{self.seed}:{turn.get('sample_id')}:{turn['index']}".encode()
        return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))

    async def answer(self, messages: list[dict[str, Any]], turn: dict[str, Any]) -> Reply:
        rng = self._rng(turn)
        options = turn.get("options") or []
        if not options:
            return Reply(raw=NO_OPTIONS_ANSWER)
        if turn["multi"]:
            mask = rng.randrange(1, 2 ** len(options))  # uniform over the 2^n - 1 non-empty subsets
            return Reply(raw=", ".join(o for i, o in enumerate(options) if mask >> i & 1))
        return Reply(raw=rng.choice(options))


def _make(argument: str | None, options: ExamineeOptions) -> Examinee:
    return RandomExaminee(options.seed)


BACKEND = Backend("random", _make, summary="uniform over the options, seeded by --seed (chance level)")
