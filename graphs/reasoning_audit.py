"""Reasoning audit: a model under test answers one ECG window's reasoning chain, turn by turn.

Turns: the initial Yes/No diagnosis question, then one loop per finding on the
ground-truth path: criterion selection -> finding identification -> grounding
questions (lead / wave / measurement) -> decision -> next loop or end.

Modes (``state["run"]["mode"]``):

* ``teacher`` - every turn is asked; after each turn the ground-truth answer
  enters the history (teacher forcing), except the initial question, whose
  answer stays the model's own.
* ``stop`` - the reasoning chain stops at the first wrong turn after the
  initial question (CXReasonBench); turns never reached are recorded with
  ``asked: False``. The initial answer never stops the chain.

State is plain JSON (the audit item, the plan, the scored turns; the history
is rebuilt from the turns). The ECG is loaded and attached only when a request is built. The
examinee is runtime context (:class:`AuditContext`), not state; with no
context (``langgraph dev``) the ``oracle`` answers.

Prompt style (``state["run"]["prompt_style"]``, ``"condensed"``): ecgtrace's
lettered options (default) or ERB's full option texts without letters, and
optionally ERB's condensed chat, in which only the question being asked shows
its options (:mod:`ecgtrace.agents.exam.prompt_styles`).

Each model turn is one superstep, so a checkpointed thread resumes at the
first unanswered turn. A ``human`` examinee's turn is answered through an
``interrupt()`` in the ``human`` node, which does nothing else.

The module reads top to bottom as state, the step (:func:`answer_turn`, the
one place a turn is asked and scored; the debugger's re-ask calls it too),
nodes, wiring. The item enters as :class:`~ecgtrace.contracts.AuditItem` JSON
and is validated at every node that reads it; every recorded turn is
:class:`~ecgtrace.contracts.TurnRow` JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from ecgtrace.agents.audit.examiner import build_request, format_prompt, not_asked, plan_turns, render_answer, run_style, score_reply
from ecgtrace.agents.exam.budget import PromptBudget, estimate_request_tokens, next_request_tokens
from ecgtrace.agents.exam.prompt_styles import PROMPT_STYLES
from ecgtrace.agents.exam.examinees import Examinee, Reply, make_examinee
from ecgtrace.agents.exam.messages import resolve_asset, shown_files
from ecgtrace.agents.exam.run_control import shuffled_options
from ecgtrace.contracts.audit import AuditItem
from ecgtrace.contracts.vocabulary import EXAM_MODALITIES, EXAM_MODES
from ecgtrace.tools.text_encodings import EncodingError, TextEncoding

#: Supersteps per turn is 1; this leaves room for the longest chains.
RECURSION_LIMIT = 10_000


# ----------------------------------------------------------------------- state

class AuditState(TypedDict, total=False):
    """Plain-JSON state of one sample's thread.

    Input: ``item`` (an AuditItem as JSON) and ``run`` ({"mode", "modality",
    "base_dir": folder that asset paths are relative to, "prompt_style", "condensed"; optional "text": the
    text encoding's JSON, "epoch" and "seed": from epoch 1 on every turn's
    options are shown in a seeded random order). The rest is filled in:
    ``plan`` (turn specs), ``cursor`` (the next turn), ``turns`` (TurnRow JSON),
    ``pending`` (a human's open question), ``done``.
    The conversation history is not stored: :func:`history` rebuilds it from
    ``turns`` (a checkpoint stays small and cannot disagree with the scores).
    """

    item: dict[str, Any]
    run: dict[str, Any]
    plan: list[dict[str, Any]]
    cursor: int
    turns: list[dict[str, Any]]
    pending: dict[str, Any] | None
    done: bool


@dataclass
class AuditContext:
    """Runtime context: the examinee (an :class:`Examinee` or a spec such as ``"random"``),
    the folder asset paths are relative to now (overrides ``run.base_dir``, so a
    resumed thread still finds its assets after the audit folder moved), and
    the prompt token budget (None: requests are not counted)."""

    examinee: Any = None
    base_dir: str | None = None
    budget: PromptBudget | None = None


#: Items validated, by ``id`` of the state's item dict (kept alive with it, so an id is never reused while cached).
_VALIDATED: dict[int, tuple[dict[str, Any], AuditItem]] = {}
_VALIDATED_MAX = 4096


def item_of(state: AuditState) -> AuditItem:
    """The state's item as its contract (the node boundary); read-only.

    LangGraph hands every superstep of a thread the same item dict, so the
    pydantic validation (a fifth of the graph's own CPU per turn) runs once per
    dict object: a resumed or edited state brings a new dict and is validated again.
    """
    data = state["item"]
    hit = _VALIDATED.get(id(data))
    if hit is not None and hit[0] is data:
        return hit[1]
    item = AuditItem.model_validate(data)
    if len(_VALIDATED) >= _VALIDATED_MAX:
        _VALIDATED.clear()
    _VALIDATED[id(data)] = (data, item)
    return item


def history(state: AuditState) -> list[dict[str, str]]:
    """The conversation so far: each asked prompt (in a condensed chat, its question alone), then the
    model's own initial answer or, for every later turn, the ground-truth answer (teacher forcing)."""
    style = run_style(state.get("run") or {})
    out: list[dict[str, str]] = []
    for record in state["turns"]:
        if not record["asked"]:
            break
        turn = state["plan"][record["index"]]
        said = (record["raw"] or "") if record["stage"] == "initial" else render_answer(turn, style)
        asked = format_prompt(turn, style, current=False) if style.condensed else record["prompt"]
        out += [{"role": "user", "content": asked}, {"role": "assistant", "content": said}]
    return out


# ----------------------------------------------------------------------- the step

async def answer_turn(state: AuditState, examinee: Examinee, base_dir: str | None = None,
                      budget: PromptBudget | None = None) -> dict[str, Any]:
    """Ask the turn at ``state["cursor"]`` and score the reply: its TurnRow JSON. State is not changed.

    ``base_dir`` overrides ``state["run"]["base_dir"]`` (where the assets are now).
    With a ``budget``, a request that would not fit is not sent: the turn is
    recorded with an ``error`` that says so (counted from the previous turn's
    server ``usage`` where there is one, else estimated).
    """
    turn = state["plan"][state["cursor"]]
    run = state["run"]
    style = run_style(run)
    prompt = format_prompt(turn, style)
    try:
        request = build_request(history(state), prompt, item_of(state), base_dir or run["base_dir"], run["modality"], style,
                                TextEncoding.from_json(run.get("text")))
    except EncodingError as exc:
        return score_reply(turn, prompt, Reply(raw=None, error=f"not sent: {exc}", attempts=0), style)
    if budget is not None:
        tokens = _request_tokens(request, state["turns"])
        if not budget.fits(tokens):
            return score_reply(turn, prompt, Reply(raw=None, error=f"not sent: {budget.reason(tokens, 'this turn')}", attempts=0), style)
    reply = (await examinee.answer(request, turn)).capped(examinee.max_reply_chars)  # kept and re-sent in later turns: bounded
    return score_reply(turn, prompt, reply, style)


def _request_tokens(request: list[dict[str, Any]], turns: list[dict[str, Any]]) -> int:
    """Prompt tokens of this turn's request: the last turn the server counted (its ``usage``) plus an estimate of what came since.

    Turn ``j``'s request held two messages (an answer, a question) fewer per
    turn since; without any counted turn the whole request is estimated.
    """
    for back, done in enumerate(reversed(turns), start=1):
        usage = done.get("tokens")
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            return next_request_tokens(request, usage, len(request) - 2 * back)
    return estimate_request_tokens(request)


def _advance(state: AuditState, record: dict[str, Any]) -> dict[str, Any]:
    """Record the scored turn and move the cursor (or, in ``stop`` mode after an error, end the chain)."""
    plan = state["plan"]
    turns = [*state["turns"], record]
    cursor = state["cursor"] + 1
    if state["run"].get("mode", "teacher") == "stop" and record["stage"] != "initial" and not record["correct"]:
        turns += [not_asked(t) for t in plan[cursor:]]
        cursor = len(plan)
    return {"turns": turns, "cursor": cursor, "pending": None, "done": cursor >= len(plan)}


_SPEC_CACHE: dict[str, Examinee] = {}


def _examinee(runtime: Runtime[AuditContext] | None) -> Examinee:
    value = getattr(getattr(runtime, "context", None), "examinee", None) if runtime else None
    if isinstance(value, Examinee):
        return value
    spec = value or "oracle"
    if spec not in _SPEC_CACHE:
        _SPEC_CACHE[spec] = make_examinee(spec)
    return _SPEC_CACHE[spec]


# ----------------------------------------------------------------------- nodes

def plan(state: AuditState) -> dict[str, Any]:
    """Validate the item and the run settings, lay out every turn; reset the conversation."""
    run = {"mode": "teacher", "modality": "text", "base_dir": ".", "prompt_style": "lettered", "condensed": False, **(state.get("run") or {})}
    if run["mode"] not in EXAM_MODES:
        raise ValueError(f"unknown mode {run['mode']!r}")
    if run["prompt_style"] not in PROMPT_STYLES:
        raise ValueError(f"unknown prompt style {run['prompt_style']!r}")
    if run["modality"] not in EXAM_MODALITIES:
        raise ValueError(f"unknown modality {run['modality']!r}")
    item = item_of(state)
    turns = plan_turns(item)
    epoch = int(run.get("epoch") or 0)
    for turn in turns if epoch else []:  # later epochs: the same questions, options in another order
        turn["options"] = shuffled_options(turn["options"], seed=int(run.get("seed") or 0), sample_id=item.id, epoch=epoch, index=turn["index"])
    return {"item": item.to_json(), "run": run, "plan": turns, "cursor": 0, "turns": [], "pending": None, "done": not turns}


async def ask(state: AuditState, runtime: Runtime[AuditContext]) -> dict[str, Any]:
    """Ask the current turn; machine examinees answer here, a human in ``human``."""
    examinee = _examinee(runtime)
    if examinee.interactive:
        turn = state["plan"][state["cursor"]]
        return {"pending": {"prompt": format_prompt(turn, run_style(state["run"])), "turn": turn["index"]}}
    context = getattr(runtime, "context", None)
    record = await answer_turn(state, examinee, getattr(context, "base_dir", None), getattr(context, "budget", None))
    return _advance(state, record)


def human(state: AuditState) -> dict[str, Any]:
    """Wait for a typed answer (``Command(resume=text)``); re-runs from here on resume."""
    turn = state["plan"][state["cursor"]]
    prompt = state["pending"]["prompt"]
    _, files = shown_files(item_of(state))
    ecg = {kind: str(resolve_asset(state["run"]["base_dir"], paths[0])) for kind, paths in files.items() if paths}  # files to open
    typed = interrupt({"sample_id": state["item"]["id"], "turn": turn["index"], "of": len(state["plan"]),
                       "stage": turn["stage"], "prompt": prompt, "ecg": ecg})
    return _advance(state, score_reply(turn, prompt, Reply(raw=str(typed)), run_style(state["run"])))


# ---------------------------------------------------------------------- wiring

def _next(state: AuditState) -> str:
    if state.get("done"):
        return END
    return "human" if state.get("pending") else "ask"


def build_graph(checkpointer: Any = None):
    """Compile the audit graph; pass a checkpointer for resumable runs."""
    builder = StateGraph(AuditState, context_schema=AuditContext)
    builder.add_node("plan", plan)
    builder.add_node("ask", ask)
    builder.add_node("human", human)
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", _next, ["ask", END])
    builder.add_conditional_edges("ask", _next, ["ask", "human", END])
    builder.add_conditional_edges("human", _next, ["ask", END])
    return builder.compile(checkpointer=checkpointer).with_config(recursion_limit=RECURSION_LIMIT)


#: Compiled without a checkpointer, for ``langgraph dev``.
graph = build_graph()
