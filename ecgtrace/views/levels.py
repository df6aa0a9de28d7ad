"""Reference levels drawn beside a run's accuracies: chance and the text-only ``prior``, per stage or task.

Both are computed on the very turns the run asked (same sample id, same turn
index), so a ``stop``-mode run is compared with the chance of the questions it
reached, not of the whole dataset:

* **chance**: the mean over those turns of ``1 / n_options`` (multi-select:
  ``1 / (2^n - 1)``, an exact set), from the items' option counts. Audit items
  come from the run's dataset (through the audit's own turn plan,
  :func:`ecgtrace.agents.audit.examiner.plan_turns`), QA items from the rows.
* **prior**: the accuracy of the ``prior`` examinee (option texts only, never
  the ECG) on those turns. Taken from a prior run when one of the served runs
  is one (``identity.model == "prior"``, same kind, matched by sample id and
  turn index); otherwise the prior examinee's rule is run on the items
  (:func:`prior_correct`), which needs no server.

Open QA questions (no options) have neither level. Where the items are not
available the levels are absent and ``notes`` says why.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ecgtrace.views.run_view import RunView


def stage_keys(turn: dict[str, Any]) -> list[str]:
    """The per-stage keys a turn counts under, as :mod:`ecgtrace.metrics` counts them (grounding also by kind)."""
    stage = str(turn.get("stage"))
    return [stage, f"grounding:{turn.get('kind')}"] if stage == "grounding" else [stage]


def _chance(options: list[str], multi: bool) -> float:
    return 1.0 / (2 ** len(options) - 1) if multi else 1.0 / len(options)


def _audit_questions(run: RunView) -> dict[str, dict[str, Any]]:
    """The questions of the run's audit items by ``"<item id>#<turn index>"`` (the audit's own turn plan), or {}."""
    from ecgtrace.agents.audit.examiner import plan_turns

    out = {}
    for item in run.item_models.values():
        for turn in plan_turns(item):
            key = f"{item.id}#{turn['index']}"
            out[key] = {"id": key, "task": turn["stage"], "options": turn["options"], "answer": turn["answer"], "multi": turn["multi"]}
    return out


def _run_async(make: Any) -> Any:
    """``asyncio.run(make())``, also from a thread whose event loop is running (a notebook, a browser driver): then in a worker thread."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


def prior_correct(questions: list[dict[str, Any]]) -> list[bool]:
    """Whether the built-in ``prior`` examinee answers each question right.

    The examinee itself answers (it sees the option texts only and replies with
    one of them verbatim), scored by :func:`ecgtrace.agents.exam.parsing.is_correct`
    as an exact option or exact set. Equal to :func:`ecgtrace.agents.exam.bias.prior_answers`,
    which also reads each reply back through the answer parser and builds a
    turn row: 50 times slower, too slow for a 10,000-sample run at start-up.
    """
    from ecgtrace.agents.exam.examinees import make_examinee
    from ecgtrace.agents.exam.parsing import is_correct
    from ecgtrace.agents.exam.turns import turn_spec

    prior = make_examinee("prior")
    turns = [turn_spec(index=0, stage=str(q.get("task")), question="", options=q["options"], answer=q["answer"], multi=bool(q["multi"]),
                       sample_id=q["id"]) for q in questions]

    async def replies() -> list[Any]:
        return [await prior.answer([], turn) for turn in turns]

    out = []
    for turn, reply in zip(turns, _run_async(replies) if turns else []):
        value = [reply.raw] if turn["multi"] else reply.raw
        out.append(reply.raw in turn["options"] and bool(is_correct(value, turn["answer"], turn["multi"])))
    return out


def _qa_questions(run: RunView) -> dict[str, dict[str, Any]]:
    out = {}
    for row in run.rows:
        item = row.get("item") or {}
        options = item.get("options")
        answer = (row.get("turns") or [{}])[0].get("answer")  # the truth as the row keeps it (items in rows omit it)
        if isinstance(options, list) and len(options) >= 2 and isinstance(answer, str):
            out[f"{row['id']}#0"] = {"id": f"{row['id']}#0", "task": row.get("task"), "options": list(options),
                                     "answer": answer, "multi": False}
    return out


def _asked(run: RunView) -> list[tuple[str, list[str], bool | None]]:
    """``(question key, level keys, correct)`` for every asked turn: audit stages, or the QA task."""
    out = []
    for row in run.rows:
        for turn in row.get("turns") or []:
            if not turn.get("asked", True):
                continue
            keys = [str(row.get("task"))] if run.kind == "qa" else stage_keys(turn)
            out.append((f"{row['id']}#{turn.get('index', 0)}", keys, turn.get("correct")))
    return out


def _prior_run_outcomes(prior: RunView) -> dict[str, bool]:
    return {f"{row['id']}#{t.get('index', 0)}": bool(t.get("correct")) for row in prior.rows for t in row.get("turns") or []
            if t.get("asked", True)}


def _mean_by_key(pairs: list[tuple[list[str], float]]) -> dict[str, float]:
    sums: dict[str, list[float]] = defaultdict(list)
    for keys, value in pairs:
        for key in keys:
            sums[key].append(value)
    return {key: round(sum(v) / len(v), 6) for key, v in sums.items()}


def reference_levels(run: RunView, others: list[RunView] | None = None) -> dict[str, Any]:
    """``{"chance": {key: level}, "prior": {key: level}, "notes": {"chance": str, "prior": str}}`` for ``run``.

    ``others`` are the other served runs; a prior run among them (same kind) supplies the prior level.
    Keys are stage keys (audit, see :func:`stage_keys`) or task names (QA).
    """
    questions = _qa_questions(run) if run.kind == "qa" else _audit_questions(run)
    asked = [a for a in _asked(run) if a[0] in questions]
    notes: dict[str, str] = {}
    if not questions:
        reason = "the run's dataset is not available" if run.kind == "audit" else "no closed questions"
        return {"chance": {}, "prior": {}, "notes": {"chance": f"chance: {reason}", "prior": f"prior: {reason}"}}
    chance = _mean_by_key([(keys, _chance(questions[q]["options"], bool(questions[q]["multi"]))) for q, keys, _ in asked])
    notes["chance"] = "chance: 1/options (multi-select: 1/(2^n-1)) over the turns this run asked"
    prior_run = next((o for o in others or [] if o is not run and o.kind == run.kind and o.model == "prior"), None)
    if run.model == "prior":
        prior_run = run
    if prior_run is not None:
        outcomes = _prior_run_outcomes(prior_run)
        prior = _mean_by_key([(keys, float(outcomes[q])) for q, keys, _ in asked if q in outcomes])
        notes["prior"] = f"prior: the prior run {prior_run.root.name} on the same turns"
    else:
        wanted = sorted({q for q, _, _ in asked})
        right = dict(zip(wanted, prior_correct([questions[q] for q in wanted])))
        prior = _mean_by_key([(keys, float(right[q])) for q, keys, _ in asked])
        notes["prior"] = "prior: the prior examinee's rule (longest option, option texts only) on the same turns"
    return {"chance": chance, "prior": prior, "notes": notes}
