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

Each model turn is one superstep, so a checkpointed thread resumes at the
first unanswered turn. A ``human`` examinee's turn is answered through an
``interrupt()`` in the ``human`` node, which does nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from ecgtrace.agents.exam.examinees import Examinee, Reply, make_examinee
from ecgtrace.agents.audit.examiner import (
    MODES,
    build_request,
    format_prompt,
    not_asked,
    plan_turns,
    render_answer,
    score_reply,
)

#: Supersteps per turn is 1; this leaves room for the longest chains.
RECURSION_LIMIT = 10_000


# ----------------------------------------------------------------------- state

class AuditState(TypedDict, total=False):
    """Plain-JSON state of one sample's thread.

    Input: ``item`` (an AuditItem as JSON) and ``run`` ({"mode", "modality",
    "base_dir"}: folder that asset paths are relative to). The rest is filled in.
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
    and the folder asset paths are relative to now (overrides ``run.base_dir``, so a
    resumed thread still finds its assets after the audit folder moved)."""

    examinee: Any = None
    base_dir: str | None = None


_SPEC_CACHE: dict[str, Examinee] = {}


def _examinee(runtime: Runtime[AuditContext] | None) -> Examinee:
    value = getattr(getattr(runtime, "context", None), "examinee", None) if runtime else None
    if isinstance(value, Examinee):
        return value
    spec = value or "oracle"
    if spec not in _SPEC_CACHE:
        _SPEC_CACHE[spec] = make_examinee(spec)
    return _SPEC_CACHE[spec]


def history(state: AuditState) -> list[dict[str, str]]:
    """The conversation so far: each asked prompt, then the model's own initial answer
    or, for every later turn, the ground-truth answer (teacher forcing)."""
    out: list[dict[str, str]] = []
    for record in state["turns"]:
        if not record["asked"]:
            break
        said = (record["raw"] or "") if record["stage"] == "initial" else render_answer(state["plan"][record["index"]])
        out += [{"role": "user", "content": record["prompt"]}, {"role": "assistant", "content": said}]
    return out


def _advance(state: AuditState, turn: dict[str, Any], prompt: str, reply: dict[str, Any]) -> dict[str, Any]:
    """Score the reply, record the turn and move the cursor (or stop the chain)."""
    record = score_reply(turn, prompt, reply)
    plan = state["plan"]
    mode = state["run"].get("mode", "teacher")
    turns = [*state["turns"], record]
    cursor = state["cursor"] + 1
    if mode == "stop" and turn["stage"] != "initial" and not record["correct"]:
        turns += [not_asked(t) for t in plan[cursor:]]
        cursor = len(plan)
    return {"turns": turns, "cursor": cursor, "pending": None, "done": cursor >= len(plan)}


# ----------------------------------------------------------------------- nodes

def plan(state: AuditState) -> dict[str, Any]:
    """Validate the item and lay out every turn; reset the conversation."""
    run = dict(state.get("run") or {})
    run.setdefault("mode", "teacher")
    run.setdefault("modality", "text")
    run.setdefault("base_dir", ".")
    if run["mode"] not in MODES:
        raise ValueError(f"unknown mode {run['mode']!r}")
    turns = plan_turns(state["item"])
    return {"run": run, "plan": turns, "cursor": 0, "turns": [], "pending": None, "done": not turns}


async def ask(state: AuditState, runtime: Runtime[AuditContext]) -> dict[str, Any]:
    """Ask the current turn; machine examinees answer here, a human in ``human``."""
    examinee = _examinee(runtime)
    turn = state["plan"][state["cursor"]]
    prompt = format_prompt(turn)
    if examinee.interactive:
        return {"pending": {"prompt": prompt, "turn": turn["index"]}}
    run = state["run"]
    base_dir = getattr(runtime.context, "base_dir", None) or run["base_dir"]
    messages = build_request(history(state), prompt, state["item"], base_dir, run["modality"])
    reply = await examinee.answer(messages, turn)
    return _advance(state, turn, prompt, reply.to_json())


def human(state: AuditState) -> dict[str, Any]:
    """Wait for a typed answer (``Command(resume=text)``); re-runs from here on resume."""
    turn = state["plan"][state["cursor"]]
    prompt = state["pending"]["prompt"]
    assets = state["item"].get("assets") or {}
    ecg = {k: str(Path(state["run"]["base_dir"]) / v) for k, v in assets.items() if v}  # files for the human to open
    typed = interrupt({"sample_id": state["item"]["id"], "turn": turn["index"], "of": len(state["plan"]),
                       "stage": turn["stage"], "prompt": prompt, "ecg": ecg})
    return _advance(state, turn, prompt, Reply(raw=str(typed)).to_json())


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
