"""The QA task type: one object that plans, writes, verifies, scores and summarizes one kind of question.

A task type is a :class:`QATask` subclass in a module of this package,
registered with :func:`register`. Its templates' rules (answer format,
distractor rule, scopes) are the row of
:data:`ecgtrace.rubrics.template_schema.TASK_RULES` with the same name.
Scoring defaults to the task's :attr:`QATask.family` in
:mod:`ecgtrace.agents.exam.qa_families`; a task may override :meth:`QATask.score`
and :meth:`QATask.summarize`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ecgtrace.agents.exam import qa_families
from ecgtrace.agents.holter.evidence import events_inside, window_values
from ecgtrace.agents.holter.facts import Facts
from ecgtrace.agents.holter.report import KIND_OF_LABEL
from ecgtrace.contracts.vocabulary import COVERING_KINDS, NORMAL, QA_EVENT_KINDS
from ecgtrace.rubrics.template_schema import TASK_RULES, QATemplate, TaskRules

Target = dict[str, Any]
#: What a task's writer returns for one target: answer, evidence and working keys (``_truth``, ``_distractors`` ...).
Written = dict[str, Any]


@dataclass(frozen=True)
class WindowView:
    """A window target as the writer sees it: its span, kind, and the events of that kind in or over it."""

    t0: int
    t1: int
    kind: str
    inside: list[dict[str, Any]]
    covering: list[dict[str, Any]]

    def base(self) -> Written:
        """The fields every window item starts from (a fresh dict each call)."""
        return {"window": {"t0_s": round(self.t0 / 1000.0, 3), "t1_s": round(self.t1 / 1000.0, 3)}, "_display_ms": [[self.t0, self.t1]],
                "_values": window_values(self.t0, self.t1, self.kind)}

    @property
    def found(self) -> list[dict[str, Any]]:
        """The events an answer rests on: those inside the window, else those covering it."""
        return self.inside or self.covering


@dataclass
class WriteContext:
    """Everything a task's writer needs for one target."""

    facts: Facts
    template: QATemplate
    target: Target
    rng: random.Random
    lead: str | None
    measure: bool = True
    _window: WindowView | None = field(default=None, repr=False)

    def window(self) -> WindowView:
        """The target's window with the events of its kind inside and covering it (window targets only)."""
        if self._window is None:
            t0, t1, kind = int(self.target["t0_ms"]), int(self.target["t1_ms"]), self.target["kind"]
            inside = events_inside(self.facts, kind, t0, t1) if kind != NORMAL else []
            covering = list(self.facts.events_overlapping(t0, t1, kind)) if kind in COVERING_KINDS else []
            self._window = WindowView(t0, t1, kind, inside, covering)
        return self._window

    @property
    def n_distractors(self) -> int:
        return self.template.distractors.n

    def param(self, name: str, default: Any) -> Any:
        """A distractor-rule parameter of the template, or ``default``."""
        return self.template.distractors.params.get(name, default)


class QATask:
    """One QA task type. Subclasses set :attr:`name` and :attr:`family` and implement :meth:`plan` and :meth:`write`."""

    #: The task's name, as templates and items spell it (a key of ``TASK_RULES``).
    name: ClassVar[str]
    #: How an open item of this task is scored and summarized (closed items, with options, score as ``closed``):
    #: a family of :mod:`ecgtrace.agents.exam.qa_families`.
    family: ClassVar[str]
    #: Event kinds the task targets when its template lists none.
    kinds: ClassVar[tuple[str, ...]] = QA_EVENT_KINDS

    @property
    def rules(self) -> TaskRules:
        """What its templates must say (``TASK_RULES[name]``)."""
        return TASK_RULES[self.name]

    # ---- build
    def plan(self, facts: Facts, template: QATemplate, rng: random.Random) -> list[Target]:
        """The targets a template asks about in one record (plain JSON)."""
        raise NotImplementedError

    def write(self, ctx: WriteContext) -> Written | None:
        """The answer, evidence and working data of one target, or None when the target cannot be answered."""
        raise NotImplementedError

    def verify(self, facts: Facts, item: dict[str, Any]) -> str | None:
        """Why the item's answer disagrees with an independent recomputation, or None.

        Called after the checks every item gets (question text, noise, seams,
        window edges); see :mod:`ecgtrace.agents.holter.verifier`.
        """
        return None

    def verify_distractors(self, facts: Facts, item: dict[str, Any]) -> str | None:
        """Why a distractor of a closed item could itself be a correct answer, or None."""
        return None

    def asserted_kinds(self, item: dict[str, Any]) -> frozenset[str] | None:
        """The event kinds whose presence or absence the item's answer and options assert; None: every kind.

        On a record annotated by the detectors, each of them must be validated
        from the signal (:mod:`ecgtrace.tools.signal_trust`) for the item to be
        kept. The default: the target's kind or kinds, and the kinds of any
        diagnosis offered as an option; a normal strip asserts that every kind
        is absent (a "normal sinus rhythm" option only that the answer's kind is there).
        """
        target = item["_target"]
        kinds = set(target.get("kinds") or ([target["kind"]] if target.get("kind") else []))
        if NORMAL in kinds:
            return None
        options = {KIND_OF_LABEL.get(label) for label in item.get("_distractors") or () if isinstance(label, str)}
        return frozenset(kinds | (options - {None, NORMAL}))

    # ---- exam
    def family_of(self, item: dict[str, Any]) -> str:
        """The scoring family of one item: ``closed`` when it has options, else :attr:`family`."""
        return "closed" if item.get("options") else self.family

    def score(self, item: dict[str, Any], raw: Any, *, error: str | None = None) -> dict[str, Any]:
        """Score one reply (see :func:`ecgtrace.agents.exam.qa_families.score_family`)."""
        return qa_families.score_family(self.family_of(item), item, raw, error=error)

    def summarize(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """The ``results.json`` block of this task's scored samples (see :func:`ecgtrace.agents.exam.qa_families.family_block`)."""
        return qa_families.family_block(rows)


#: Every registered task type by name, in registration order.
REGISTRY: dict[str, QATask] = {}


def register(cls: type[QATask]) -> type[QATask]:
    """Class decorator: register one instance of a task type under its :attr:`~QATask.name`."""
    name = cls.name
    if name in REGISTRY:
        raise RuntimeError(f"QA task {name!r} is registered twice ({type(REGISTRY[name]).__module__} and {cls.__module__})")
    if cls.family not in qa_families.FAMILIES:
        raise RuntimeError(f"QA task {name!r}: unknown scoring family {cls.family!r}; known: {', '.join(qa_families.FAMILIES)}")
    REGISTRY[name] = cls()
    return cls
