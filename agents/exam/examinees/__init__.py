"""Models under test, behind one async interface, found by name in a registry.

``await examinee.answer(messages, turn) -> Reply``, where ``messages`` are
OpenAI chat messages (the ECG attached to the first user message) and ``turn``
is the turn spec (:func:`ecgtrace.agents.exam.turns.turn_spec`).

Specs accepted by :func:`make_examinee` (one module per backend in this package):

* ``openai:<model>`` - any OpenAI-compatible chat endpoint (OpenAI, vLLM,
  Ollama, LM Studio) through the ``openai`` SDK's async client.
* ``langchain-openai:<model>`` - the same endpoint through langchain-openai
  ``ChatOpenAI`` (for langchain callbacks and tracers; slower).
* ``oracle`` - answers the ground truth (must score 100% on every metric).
* ``random`` - uniform over the options; multi-select: a uniform non-empty
  subset. Seeded per (seed, sample id, turn index), so a resumed run draws the
  same answers as an uninterrupted one.
* ``prior`` - a shortcut probe that never sees the ECG nor the conversation:
  it reads only the option texts of the question and always picks the
  **longest option text** (the first one among ties).
* ``human`` - you type answers at the terminal; the graph asks through a
  LangGraph ``interrupt()`` in a node of its own (``interactive = True``).
* anything an installed package registers under the entry point group
  ``ecgtrace.examinees`` (see :mod:`ecgtrace.agents.exam.examinees.registry`).

Adding a backend: a module in this package that defines ``BACKEND`` (a
:class:`Backend`), plus its name in :data:`registry.BUILTIN_MODULES`.
"""

from __future__ import annotations

from ecgtrace.agents.exam.examinees.base import NO_OPTIONS_ANSWER, Backend, Examinee, ExamineeOptions, Reply, as_text
from ecgtrace.agents.exam.examinees.chat_model import ChatModelExaminee, as_examinee, reply_from_message
from ecgtrace.agents.exam.examinees.human import HumanExaminee
from ecgtrace.agents.exam.examinees.langchain_chat import LangChainOpenAIExaminee
from ecgtrace.agents.exam.examinees.openai_chat import OpenAIExaminee
from ecgtrace.agents.exam.examinees.oracle import OracleExaminee
from ecgtrace.agents.exam.examinees.prior import PriorExaminee
from ecgtrace.agents.exam.examinees.random_pick import RandomExaminee
from ecgtrace.agents.exam.examinees.registry import (
    ENTRY_POINT_GROUP,
    describe_specs,
    examinee_specs,
    find_backend,
    make_examinee,
    register_examinee,
    unregister_examinee,
)

__all__ = [
    "ENTRY_POINT_GROUP", "NO_OPTIONS_ANSWER", "Backend", "ChatModelExaminee", "Examinee", "ExamineeOptions", "HumanExaminee",
    "LangChainOpenAIExaminee", "OpenAIExaminee", "OracleExaminee", "PriorExaminee", "RandomExaminee", "Reply", "as_examinee", "as_text", "describe_specs",
    "examinee_specs", "find_backend", "make_examinee", "register_examinee", "reply_from_message", "unregister_examinee",
]
