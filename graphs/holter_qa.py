"""HolterAgent: build a verified, multimodal QA dataset from one record.

load -> annotate -> plan -> write_items (one ``Send`` per template) -> verify
-> paraphrase (optional) -> render -> write. State holds record references
and plain JSON only (paths, summaries, items), never arrays: annotations live
in a sidecar file in the user's cache folder whose path is in state. Items
in state are :class:`~ecgtrace.contracts.QAItem` dumps plus working keys
(``_target``, ``_truth`` ...) that the writer builds and
:func:`ecgtrace.agents.holter.dataset.finalize` validates again. One thread
per record; with a SQLite checkpointer a crashed build resumes where it
stopped when rerun (:func:`run_record`), and a finished thread is reused only
while the record's content, the options, the templates and every component
and tool version that shapes the items are unchanged (:func:`thread_id`). ``graph`` is the compiled graph without a checkpointer,
for ``langgraph dev`` (see ``langgraph.json``); its input is
``{"record_path": ..., "out_dir": ..., "options": {"seed": 0, "modalities": ["text", "image"]}}``.
"""

import functools
import hashlib
import importlib
import json
import operator
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from ecgtrace import __version__
from ecgtrace.agents.holter import annotator, assets, dataset, planner, verifier, writer
from ecgtrace.agents.holter.facts import load_facts
from ecgtrace.agents.holter.tasks import get_task
from ecgtrace.errors import EcgTraceError, ModelError, OutputError
from ecgtrace.jsonio import make_folder, safe_join, write_json_atomic
from ecgtrace.rubrics.template_schema import QATemplate, load_templates
from ecgtrace.tools.annotate import annotation_store_dir, annotation_versions
from ecgtrace.tools.record_source import resolve_record

GRAPH_VERSION = "1"
#: Test hook: a node named here raises, to check that a rerun resumes from the checkpoint.
FAIL_ENV = "ECGTRACE_FAIL_NODE"


# --------------------------------------------------------------------------- state


class BuildOptions(TypedDict, total=False):
    seed: int
    tasks: list[str]
    modalities: list[str]
    templates_dir: str | None
    fs_hz: float | None
    paraphrase: bool
    measure: bool
    render_jobs: int  # worker processes for PNG/MP4 rendering (1: in the node's thread)
    detected_kinds: str  # records without a reference .atr: "validated" (default) or "all" (agents.holter.verifier)


class HolterQAState(TypedDict, total=False):
    record_path: str
    out_dir: str
    cache_dir: str | None  # annotation cache root (None: the user's ecgtrace cache)
    options: BuildOptions
    record: dict[str, Any]
    annotation: dict[str, Any]  # {path (sidecar), source, summary}
    plan: list[dict[str, Any]]
    items: Annotated[list[dict[str, Any]], operator.add]
    kept: list[dict[str, Any]]
    dropped: list[dict[str, Any]]
    render_cpu_s: float  # CPU seconds spent rendering (all workers)
    part: str


class WriteTask(TypedDict):
    annotation_path: str
    template_id: str
    targets: list[dict[str, Any]]
    options: BuildOptions


def _maybe_fail(node: str) -> None:
    if os.environ.get(FAIL_ENV) == node:
        raise RuntimeError(f"{FAIL_ENV}={node}: injected failure")


@functools.lru_cache(maxsize=8)
def _templates(templates_dir: str | None, tasks: tuple[str, ...]) -> dict[str, QATemplate]:
    templates = load_templates(templates_dir, tasks=list(tasks) or None)
    for template in templates:
        get_task(template.task)  # a template no task module implements fails here, not with zero items
    return {t.id: t for t in templates}


def templates_for(options: BuildOptions) -> dict[str, QATemplate]:
    return _templates(options.get("templates_dir"), tuple(options.get("tasks") or ()))


# --------------------------------------------------------------------------- nodes


def load_node(state: HolterQAState) -> dict[str, Any]:
    return {"record": annotator.load_record(state["record_path"], fs_hz=state["options"].get("fs_hz"))}


def annotate_node(state: HolterQAState) -> dict[str, Any]:
    root = state.get("cache_dir")
    result = annotator.annotate(state["record"], annotator.bundle_dir(root), fs_hz=state["options"].get("fs_hz"),
                                annotation_store=annotation_store_dir(root))
    return {"annotation": result}


def plan_node(state: HolterQAState) -> dict[str, Any]:
    facts = load_facts(state["annotation"]["path"])
    templates = list(templates_for(state["options"]).values())
    return {"plan": planner.plan(facts, templates, int(state["options"].get("seed", 0)))}


def fan_out(state: HolterQAState) -> list[Send] | str:
    sends = [Send("write_items", WriteTask(annotation_path=state["annotation"]["path"], template_id=entry["template_id"],
                                           targets=entry["targets"], options=state["options"])) for entry in state["plan"]]
    return sends or "verify"


def write_items_node(task: WriteTask) -> dict[str, Any]:
    facts = load_facts(task["annotation_path"])
    template = templates_for(task["options"])[task["template_id"]]
    items = writer.write_items(facts, template, task["targets"], seed=int(task["options"].get("seed", 0)), measure=task["options"].get("measure", True))
    return {"items": items}


def verify_node(state: HolterQAState) -> dict[str, Any]:
    facts = load_facts(state["annotation"]["path"])
    items = sorted(state.get("items") or [], key=lambda it: it["id"])
    kept, dropped = verifier.verify(facts, items, detected_kinds=state["options"].get("detected_kinds", "validated"))
    return {"kept": kept, "dropped": dropped}


def paraphrase_node(state: HolterQAState, config: RunnableConfig) -> dict[str, Any]:
    if not state["options"].get("paraphrase"):
        return {}
    from ecgtrace.agents.holter import paraphraser
    from ecgtrace.agents.holter.report import DIAGNOSIS_LABELS, LABELS

    model = ((config or {}).get("configurable") or {}).get("paraphrase_model")
    if model is None:
        try:
            model = paraphraser.default_model()
        except Exception as exc:  # noqa: BLE001 - e.g. no API key: one clear line instead of a traceback
            raise ModelError(f"--paraphrase: cannot create the chat model ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})") from None
    labels = sorted({*DIAGNOSIS_LABELS.values(), *(v for pair in LABELS.values() for v in pair)}, key=len, reverse=True)
    return {"kept": paraphraser.paraphrase_items(state["kept"], model, labels)}


def render_node(state: HolterQAState) -> dict[str, Any]:
    _maybe_fail("render")
    modalities = state["options"].get("modalities") or ["text", "image"]
    rendered = assets.render_items(state["annotation"]["path"], state["kept"], state["out_dir"], modalities, jobs=int(state["options"].get("render_jobs") or 1))
    return {"kept": [{**item, "modalities": mods} for item, (mods, _) in zip(state["kept"], rendered)],
            "render_cpu_s": round(sum(cpu for _, cpu in rendered), 3)}


def write_node(state: HolterQAState) -> dict[str, Any]:
    record = {**state["record"], "source": state["annotation"]["source"]}
    path = safe_join(state["out_dir"], ".parts", f"{record['db']}-{record['id']}.json")
    write_json_atomic(path, {"record": record, "items": state["kept"], "dropped": state["dropped"]})
    return {"part": str(path)}


# --------------------------------------------------------------------------- wiring


def build_graph() -> StateGraph:
    builder = StateGraph(HolterQAState)
    builder.add_node("load", load_node)
    builder.add_node("annotate", annotate_node)
    builder.add_node("plan", plan_node)
    builder.add_node("write_items", write_items_node)
    builder.add_node("verify", verify_node)
    builder.add_node("paraphrase", paraphrase_node)
    builder.add_node("render", render_node)
    builder.add_node("write", write_node)
    builder.add_edge(START, "load")
    builder.add_edge("load", "annotate")
    builder.add_edge("annotate", "plan")
    builder.add_conditional_edges("plan", fan_out, ["write_items", "verify"])
    builder.add_edge("write_items", "verify")
    builder.add_edge("verify", "paraphrase")
    builder.add_edge("paraphrase", "render")
    builder.add_edge("render", "write")
    builder.add_edge("write", END)
    return builder


#: Compiled without a checkpointer (``langgraph dev`` adds its own).
graph = build_graph().compile()


# --------------------------------------------------------------------------- running with resume


#: Options that say how the work is done, not what is built: kept out of the manifest and the thread id, so
#: ``--jobs 1`` and ``--jobs 2`` (which set ``render_jobs``) write the same bytes.
HOW_OPTIONS: frozenset[str] = frozenset({"render_jobs"})
#: Also out of the manifest: ``templates_dir`` is named there by the templates' own versions (the thread id keeps
#: the path: a checkpoint belongs to its folder).
NOT_SHAPING_OPTIONS: frozenset[str] = HOW_OPTIONS | {"templates_dir"}


def build_versions(options: BuildOptions) -> dict[str, Any]:
    """Versions of every component that shapes a build's items (the manifest's ``versions``)."""
    versions: dict[str, Any] = {"ecgtrace": __version__, "graph": GRAPH_VERSION, "annotator": annotator.ANNOTATOR_VERSION, "writer": writer.WRITER_VERSION,
                                "verifier": verifier.VERIFIER_VERSION, "modalities": assets.MODALITIES_VERSION, "dataset": dataset.DATASET_VERSION,
                                "templates": {t.id: t.version for t in templates_for(options).values()}}
    for name, attr in (("rhythm", "RHYTHM_VERSION"), ("hr", "HR_VERSION"), ("render", "RENDER_VERSION")):
        versions[name] = getattr(importlib.import_module(f"ecgtrace.tools.{name}"), attr, "?")
    versions["measure"] = importlib.import_module("ecgtrace.tools.measure").measure_identity()  # evidence reads morphology from measure_window
    versions["signal_trust"] = importlib.import_module("ecgtrace.tools.signal_trust").table_identity()  # which detected kinds items may assert
    versions["options"] = {k: v for k, v in options.items() if k not in NOT_SHAPING_OPTIONS}
    return versions


def thread_id(record_path: str, options: BuildOptions) -> str:
    """Stable per record content, options, templates and versions: the same command on the same inputs reuses the same thread.

    The versions are the build's components (:func:`build_versions`) and every
    tool that shapes the annotations (:func:`ecgtrace.tools.annotate.annotation_versions`),
    so a changed detector, classifier, rhythm or HR rule rebuilds instead of
    reusing a finished thread.
    """
    source = resolve_record(record_path)
    templates = {t.id: t.model_dump(mode="json") for t in templates_for(options).values()}
    shaping = {k: v for k, v in options.items() if k not in HOW_OPTIONS}
    key = {"record": str(source.base), "sha256": source.sha256, "options": shaping, "graph": GRAPH_VERSION, "templates": templates,
           "versions": build_versions(options), "tools": annotation_versions()}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]


def run_record(record_path: str, out_dir: str, options: BuildOptions, *, cache_dir: str | None = None, config: dict[str, Any] | None = None,
               on_stage: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run (or resume, or reuse) the build of one record; returns the final state.

    Checkpoints go to ``out_dir/.checkpoints/<record>.sqlite`` (one file per
    record, so parallel processes never share a SQLite writer). Annotations
    are cached under ``cache_dir`` (default: the user's ecgtrace cache, never
    the record's folder). ``on_stage(node)`` is called as each node finishes
    (progress display).
    """
    import sqlite3

    source = resolve_record(record_path)
    db_path = safe_join(out_dir, ".checkpoints", f"{source.base.parent.name}-{source.name}.sqlite")
    make_folder(Path(db_path).parent)
    if any(Path(f"{db_path}{end}").is_symlink() for end in ("", "-wal", "-shm")):
        raise OutputError(f"{db_path} is a symbolic link; refusing to write a checkpoint through it")
    conn = sqlite3.connect(str(db_path), check_same_thread=False, timeout=30)
    try:
        return _stream_record(conn, source, record_path, out_dir, options, cache_dir, config, on_stage)
    except EcgTraceError:
        conn.close()
        for end in ("", "-wal", "-shm"):  # bad input fails the same way on a rerun: its checkpoint resumes nothing
            Path(f"{db_path}{end}").unlink(missing_ok=True)
        raise
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and ("full" in str(exc) or "readonly" in str(exc)):
            raise OutputError(f"cannot write {db_path}: {exc}") from None
        raise OutputError(f"{db_path}: not a usable checkpoint database ({exc}); delete it to build this record from the start") from None
    finally:
        conn.close()


def _stream_record(conn: Any, source: Any, record_path: str, out_dir: str, options: BuildOptions, cache_dir: str | None,
                   config: dict[str, Any] | None, on_stage: Callable[[str], None] | None) -> dict[str, Any]:
    """Run the record's thread on the checkpoint connection ``conn`` (see :func:`run_record`)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=30000")
    compiled = build_graph().compile(checkpointer=SqliteSaver(conn))
    cfg = {**(config or {}), "configurable": {**((config or {}).get("configurable") or {}), "thread_id": thread_id(record_path, options)}}
    cfg.setdefault("max_concurrency", 4)
    snapshot = compiled.get_state(cfg)
    if snapshot.values and not snapshot.next:
        if on_stage is not None:
            on_stage("finished earlier (checkpoint)")
        return dict(snapshot.values)
    initial = None if snapshot.next else HolterQAState(record_path=str(source.base), out_dir=str(Path(out_dir).resolve()),
                                                       cache_dir=None if cache_dir is None else str(Path(cache_dir).resolve()),
                                                       options=options, items=[])
    for update in compiled.stream(initial, cfg, stream_mode="updates"):  # None: resume after a crash
        if on_stage is not None:
            for node in update:
                on_stage(node)
    return dict(compiled.get_state(cfg).values)
