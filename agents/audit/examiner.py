"""The audit's examination: an :class:`AuditItem` as turns, prompts, requests and scores.

Everything here returns plain JSON (dicts, lists, str, int, float, bool) so it
can live in LangGraph state. The ECG itself (image bytes, text) is attached
only when a request is built (:func:`build_request`), never stored. The pieces
are the shared examination's (:mod:`ecgtrace.agents.exam.messages` for prompts
and requests, :mod:`ecgtrace.agents.exam.turns` for turn specs and rows); this
module says how an audit uses them: which turns, in which order, which layout.
Every prompt-making function takes the run's prompt style
(:mod:`ecgtrace.agents.exam.prompt_styles`: ``lettered`` or ``erb``, full or
condensed); the default is ecgtrace's lettered style.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ecgtrace.agents.exam import messages
from ecgtrace.agents.exam.examinees.base import Reply
from ecgtrace.agents.exam.prompt_styles import PromptStyle, audit_layout, prompt_style
from ecgtrace.agents.exam.turns import closed_row, turn_spec, unasked_row
from ecgtrace.contracts.audit import AuditItem
from ecgtrace.tools.text_encodings import RAW, TextEncoding

#: Bump when prompts or scoring change: it is part of a run's identity.
#: 2: image prompts state what the paper's squares mean; prompt styles (lettered | erb) and condensed chats.
PROMPT_VERSION = "2"
SYSTEM_PROMPT = messages.AUDIT.system_prompt
Style = PromptStyle | str


def run_style(run: dict[str, Any]) -> PromptStyle:
    """The prompt style a run's settings (``{"prompt_style", "condensed"}``) ask for; ecgtrace's lettered style by default."""
    return prompt_style(run.get("prompt_style") or "lettered", bool(run.get("condensed")))


def plan_turns(item: AuditItem | dict[str, Any]) -> list[dict[str, Any]]:
    """All turn specs of one sample in asking order (initial, then each loop's steps)."""
    it = item if isinstance(item, AuditItem) else AuditItem.model_validate(item)
    turns: list[dict[str, Any]] = []

    def add(stage: str, loop: int | None, q: Any, kind: str | None = None, multi: bool = False) -> None:
        turns.append(turn_spec(index=len(turns), stage=stage, loop=loop, kind=kind, question=q.question, options=q.options,
                               answer=q.answer, multi=multi, sample_id=it.id))

    add("initial", None, it.initial)
    for n, loop in enumerate(it.loops):
        add("criterion", n, loop.criterion)
        add("finding", n, loop.finding)
        for g in loop.grounding:
            add("grounding", n, g, kind=g.kind, multi=g.multi)
        add("decision", n, loop.decision)
    return turns


def format_prompt(turn: dict[str, Any], style: Style = "lettered", *, current: bool = True) -> str:
    """The user message for one turn (question, options, how to answer), or as the history keeps it (``current=False``)."""
    return prompt_style(style).prompt(turn["question"], turn["options"], turn["multi"], current=current)


def render_answer(turn: dict[str, Any], style: Style = "lettered") -> str:
    """The ground-truth answer as the assistant would have said it (teacher forcing)."""
    return prompt_style(style).answer(turn["options"], turn["answer"])


def score_reply(turn: dict[str, Any], prompt: str, reply: Reply | dict[str, Any], style: Style = "lettered") -> dict[str, Any]:
    """One finished turn as it goes into samples.jsonl (a server error is scored wrong, the error kept).

    Without letters on the options (``erb`` style) only option texts count as answers.
    """
    return closed_row(turn, prompt, reply, letters=prompt_style(style).letters)


def not_asked(turn: dict[str, Any]) -> dict[str, Any]:
    """A turn the chain never reached (``stop`` mode after an error)."""
    return unasked_row(turn)


def check_assets(item: AuditItem, base_dir: str | Path, modality: str) -> None:
    """Refuse, before any model call, an item whose asset for ``modality`` is missing."""
    messages.check_modality(item, base_dir, modality)


def ecg_content(item: AuditItem | dict[str, Any], base_dir: str | Path, modality: str, style: Style = "lettered") -> list[dict[str, Any]]:
    """OpenAI content parts that show the ECG window (read from disk on demand, cached)."""
    return messages.ecg_content(item, base_dir, modality, layout=audit_layout(prompt_style(style)))


def build_request(history: list[dict[str, Any]], prompt: str, item: AuditItem | dict[str, Any], base_dir: str | Path,
                  modality: str, style: Style = "lettered", encoding: TextEncoding = RAW) -> list[dict[str, Any]]:
    """OpenAI chat messages: system, the ECG + first question, the text history, this question.

    ``history`` is the plain-text conversation so far (``{"role", "content"}``
    pairs). The ECG is attached to the first user message: content parts
    (text, image) when there is an image, one string when all is text;
    ``style`` says how questions and options are written, ``encoding`` how the signal text is.
    """
    return messages.build_messages(item, base_dir, modality, layout=audit_layout(prompt_style(style)), prompt=prompt,
                                   history=history, encoding=encoding)


def chain_request(item: AuditItem | dict[str, Any], base_dir: str | Path, modality: str, encoding: TextEncoding = RAW,
                  style: Style = "lettered") -> list[dict[str, Any]]:
    """The longest request of a sample's chain: its last turn, after every earlier question and the true answers.

    The model's own initial answer is unknown before it is asked; the true one
    stands in for it (a longer one is caught by the check of each turn).
    """
    plan = plan_turns(item)
    history: list[dict[str, Any]] = []
    for turn in plan[:-1]:
        asked = format_prompt(turn, style, current=not prompt_style(style).condensed)  # as history() keeps it
        history += [{"role": "user", "content": asked},
                    {"role": "assistant", "content": render_answer(turn, style)}]
    return build_request(history, format_prompt(plan[-1], style), item, base_dir, modality, style, encoding)
