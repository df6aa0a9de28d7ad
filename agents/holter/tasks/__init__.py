"""The QA task types: one object per task, which plans, writes, verifies, scores and summarizes its questions.

Every module of this package (names without a leading ``_``) is imported
here and registers its task types with :func:`~ecgtrace.agents.holter.tasks._base.register`;
:func:`get_task` finds one by name. The planner, writer and verifier of the
HolterAgent and the QA scoring (:func:`ecgtrace.agents.exam.qa_scoring.score_answer`)
and results (:func:`ecgtrace.agents.exam.qa_results.summarize_qa`) dispatch
through it instead of on task-name strings.

Adding a task type touches three files:

1. a module here with a :class:`QATask` subclass decorated with ``@register``
   (``name``, scoring ``family``, ``plan``, ``write``, optionally ``verify``,
   ``verify_distractors``, ``score``, ``summarize``);
2. its row in :data:`ecgtrace.rubrics.template_schema.TASK_RULES` (the answer
   format, distractor rule and scopes its templates must declare: rubrics are
   data and schema, so a template is validated without importing agents);
3. its template YAML in ``rubrics/templates/``.

:func:`check_registry` fails when a task has rules but no implementation or
the other way round (``ecgtrace templates validate`` and the tests call it).
"""

from __future__ import annotations

import importlib
import pkgutil

from ecgtrace.agents.holter.tasks._base import REGISTRY, QATask, WindowView, WriteContext, register
from ecgtrace.errors import RubricError
from ecgtrace.rubrics.template_schema import TASK_RULES, TASKS

__all__ = ["QATask", "WindowView", "WriteContext", "check_registry", "find_task", "get_task", "register", "task_names"]


def find_task(name: str) -> QATask | None:
    """The registered task type called ``name``, or None (items imported from elsewhere may name other tasks)."""
    return REGISTRY.get(name)


def get_task(name: str) -> QATask:
    """The registered task type called ``name``.

    Raises:
        RubricError: no module of :mod:`ecgtrace.agents.holter.tasks` implements it.
    """
    task = REGISTRY.get(name)
    if task is None:
        known = ", ".join(REGISTRY) or "none"
        raise RubricError(f"QA task {name!r} has no implementation in ecgtrace.agents.holter.tasks (implemented: {known})")
    return task


def task_names() -> tuple[str, ...]:
    """Task types that are both declared (``TASK_RULES``) and implemented, in dataset order."""
    return tuple(name for name in TASKS if name in REGISTRY)


def check_registry() -> None:
    """Every declared task type has an implementation and every implementation is declared.

    Raises:
        RubricError: naming the task types on either side.
    """
    missing = [name for name in TASK_RULES if name not in REGISTRY]
    undeclared = [name for name in REGISTRY if name not in TASK_RULES]
    if missing:
        raise RubricError(f"QA task(s) {', '.join(missing)} have template rules (rubrics/template_schema.py TASK_RULES) "
                          "but no implementation in ecgtrace.agents.holter.tasks")
    if undeclared:
        raise RubricError(f"QA task(s) {', '.join(undeclared)} are implemented in ecgtrace.agents.holter.tasks "
                          "but have no template rules (add them to TASK_RULES in rubrics/template_schema.py)")


def _import_task_modules() -> None:
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")


_import_task_modules()
