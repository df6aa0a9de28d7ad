"""What every examinee is: one async ``answer(messages, turn) -> Reply``, and the options a backend is built with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any


#: Characters of a reply (and of its reasoning) a run keeps by default: the first and last halves. A reply
#: of 5 MB would otherwise be stored whole and re-sent in every later turn of its sample.
MAX_REPLY_CHARS = 32_000


@dataclass
class Reply:
    """What came back for one turn; ``raw`` is None when ``error`` is set."""

    raw: str | None
    reasoning: str | None = None
    usage: dict[str, Any] | None = None
    latency_ms: float = 0.0
    error: str | None = None
    attempts: int = 1
    meta: dict[str, Any] | None = None  # server response id, model, finish_reason

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def capped(self, max_chars: int = MAX_REPLY_CHARS) -> Reply:
        """This reply with ``raw`` and ``reasoning`` cut to ``max_chars`` (start and end kept, the cut marked
        in the text and recorded in ``meta["truncated"]`` as the original lengths); itself when nothing is cut."""
        cut = {name: len(text) for name in ("raw", "reasoning") if isinstance(text := getattr(self, name), str) and len(text) > max_chars}
        if not cut:
            return self
        changes: dict[str, Any] = {name: keep_ends(getattr(self, name), max_chars) for name in cut}
        return replace(self, **changes, meta={**(self.meta or {}), "truncated": {f"{name}_chars": n for name, n in cut.items()}})


def keep_ends(text: str, max_chars: int) -> str:
    """``text`` cut to about ``max_chars``: its first and last halves around a marker that says how much went.

    Both ends are kept because a model's answer often comes last, after its reasoning.
    """
    if len(text) <= max_chars:
        return text
    half = max(1, max_chars // 2)
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters of the reply not kept ...]\n{text[-half:]}"


class Examinee:
    """Base class of every model under test. ``interactive`` examinees are answered through an interrupt.

    ``answer`` gets OpenAI chat messages (the ECG attached to the first user
    message) and the turn spec (:func:`ecgtrace.agents.exam.turns.turn_spec`:
    question, options, answer, ...). Baselines may read the spec; a real model
    sees only the messages.

    ``reads_ecg``: False for baselines that never look at the messages (oracle, random, prior), which can
    therefore answer items that have no ECG to show (Holtercare-Bench items, imported without signals).
    """

    name: str = "examinee"
    interactive: bool = False
    reads_ecg: bool = True
    #: How much of each reply is kept and re-sent (:meth:`Reply.capped`); set from ``--max-reply-chars``.
    max_reply_chars: int = MAX_REPLY_CHARS
    #: The requests/tokens-per-minute budget booked before each request (an
    #: :class:`ecgtrace.agents.exam.rate_limit.RateLimit`); None: unlimited. A sharded run
    #: may swap it for one shared by every shard.
    limiter: Any = None

    async def answer(self, messages: list[dict[str, Any]], turn: dict[str, Any]) -> Reply:
        raise NotImplementedError

    def preflight(self) -> str | None:
        """Check, before a run, that this examinee can answer at all (endpoint up, model served, key taken).

        Returns a one-line note of what was checked, or None when there is nothing
        to check (the built-in baselines). Raises ``ModelError`` naming the cause.
        Called by :func:`ecgtrace.agents.exam.preflight.preflight`.
        """
        return None

    async def context_tokens(self) -> int | None:
        """The context length (prompt + answer tokens) the backend reports for its model; None when it reports none."""
        return None


#: What the baselines say to an open question: they have no options to pick from, and
#: an honest "cannot tell" scores the floor of each open metric (not an error).
NO_OPTIONS_ANSWER = "I cannot tell."


@dataclass(frozen=True)
class ExamineeOptions:
    """Everything ``--model`` may be built with; each backend reads the fields it needs.

    Attributes:
        seed: seed of random baselines.
        base_url: OpenAI-compatible endpoint (None: the provider's default).
        api_key_env: name of the environment variable holding the key (the key itself is never passed around).
        timeout_s: per-request timeout in seconds.
        concurrency: requests in flight at once.
        max_attempts: tries per request on transient failures.
        backoff_s: first retry wait in seconds (doubling).
        max_tokens: cap on answer tokens (None: the server's).
        temperature: sampling temperature (None: the server's).
        max_rpm: requests per minute (None: unlimited).
        max_tpm: tokens per minute, prompt plus answer as the server counts them (None: unlimited).
    """

    seed: int = 0
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 120.0
    concurrency: int = 8
    max_attempts: int = 4
    backoff_s: float = 1.0
    max_tokens: int | None = None
    temperature: float | None = None
    max_rpm: float | None = None
    max_tpm: float | None = None


#: ``factory(argument, options)``: ``argument`` is what follows ``name:`` in the spec (None when absent).
Factory = Callable[[str | None, ExamineeOptions], Examinee]


@dataclass(frozen=True)
class Backend:
    """One examinee backend as the registry knows it.

    Attributes:
        name: what ``--model`` starts with (``oracle``, or ``openai`` for ``openai:<model>``).
        factory: builds the examinee.
        argument: what follows ``name:`` (``"model"`` for ``openai:<model>``); None when the spec is the bare name.
        summary: one line for help texts.
    """

    name: str
    factory: Factory
    argument: str | None = None
    summary: str = ""

    @property
    def spec(self) -> str:
        """How the backend is named on the command line (``openai:<model>``)."""
        return f"{self.name}:<{self.argument}>" if self.argument else self.name


def as_text(choice: str | list[str]) -> str:
    """An answer (one option text, or several for multi-select) as the examinee would say it."""
    return ", ".join(choice) if isinstance(choice, list) else choice
