"""How an audit lays out its questions: ecgtrace's lettered style or ERB's, full or condensed.

* ``lettered`` (the default): the question, its options lettered ``A. ...``,
  "Answer with the letter of one option" (:func:`ecgtrace.agents.exam.messages.closed_prompt`);
  the ground truth enters the history as ``"B. No"``.
* ``erb`` (``--prompt-style erb``, ECG-Reasoning-Benchmark's protocol):
  ``Question: ...``, "This question has one of the following options as the
  correct answer:" (or the multiple-answer wording), ``- option`` lines, then
  an instruction to answer with only the full option text; no letters, so a
  bare letter is not read as an answer. The ground truth enters the history
  as the option text.
* ``condensed`` (``--condensed``, either style): only the question being
  asked shows its options; earlier questions stay in the history as their
  text alone, and their ground truth as option text (no letters to refer to).

:class:`PromptStyle` holds the choice; :func:`audit_layout` gives the message
layout (system prompt) that goes with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ecgtrace.agents.exam.messages import AUDIT, Layout, closed_prompt, lettered_answer
from ecgtrace.errors import EcgTraceError

ERB_SINGLE = "This question has one of the following options as the correct answer:"
ERB_MULTI = "This question has one or more of the following options as correct answers:"
ERB_SINGLE_HINT = "Answer with only the full text of the correct option, exactly as it is written above."
ERB_MULTI_HINT = "Answer with only the full texts of every correct option, exactly as they are written above, separated by commas."


def erb_prompt(question: str, options: list[str] | None, multi: bool = False) -> str:
    """A question in ERB's layout: ``Question: ...``, the options as ``- text`` lines, how to answer; options None: the question only."""
    if not options:
        return f"Question: {question}"
    return "\n".join([f"Question: {question}", ERB_MULTI if multi else ERB_SINGLE, *(f"- {o}" for o in options), "",
                      ERB_MULTI_HINT if multi else ERB_SINGLE_HINT])


def text_answer(answer: str | list[str]) -> str:
    """The answer as option text(s), comma-separated (``"Lead II, Lead aVF"``): teacher forcing without letters."""
    return ", ".join(answer) if isinstance(answer, list) else answer


@dataclass(frozen=True)
class PromptStyle:
    """How a conversation lays out its questions.

    Attributes:
        name: ``lettered`` (ecgtrace's: lettered options, answered by letter) or ``erb`` (ERB's: option texts, no letters).
        condensed: options are shown only on the question being asked; earlier questions
            stay in the history as their text alone (ERB's condensed chat).
    """

    name: str = "lettered"
    condensed: bool = False

    @property
    def letters(self) -> bool:
        """The options carry letters, so a reply may name one by its letter."""
        return self.name == "lettered"

    def prompt(self, question: str, options: list[str], multi: bool = False, *, current: bool = True) -> str:
        """The question as asked now (``current``) or as it stays in the history."""
        shown = options if current or not self.condensed else None
        if self.name == "erb":
            return erb_prompt(question, shown, multi)
        return closed_prompt(question, shown, multi) if shown else question

    def answer(self, options: list[str], answer: str | list[str]) -> str:
        """The ground-truth answer as the history says it: lettered, or option text where no letters are in sight."""
        return lettered_answer(options, answer) if self.letters and not self.condensed else text_answer(answer)


#: The prompt styles an audit may use, by name.
PROMPT_STYLES: tuple[str, ...] = ("lettered", "erb")


def prompt_style(name: str | PromptStyle = "lettered", condensed: bool = False) -> PromptStyle:
    """The :class:`PromptStyle` called ``name`` (a style passes through)."""
    if isinstance(name, PromptStyle):
        return name
    if name not in PROMPT_STYLES:
        raise EcgTraceError(f"unknown prompt style {name!r} (choose from {', '.join(PROMPT_STYLES)})")
    return PromptStyle(name=name, condensed=bool(condensed))


#: The reasoning audit in ERB's style (``--prompt-style erb``): options answered by their full text, no letters.
AUDIT_ERB = Layout(
    system_prompt=("You are an expert cardiologist interpreting an electrocardiogram (ECG), shown in the first message. "
                   "You will be asked one question at a time, step by step, about this ECG. Each question comes with the "
                   "options to choose from; reply with the full text of the correct option (or, where several are "
                   "correct, of each correct option), exactly as it is written, and nothing else."),
    signal_joins="\n", text_as_string=True, paper_note=True)


def audit_layout(style: PromptStyle) -> Layout:
    """The audit's layout for a prompt style."""
    return AUDIT_ERB if style.name == "erb" else AUDIT
