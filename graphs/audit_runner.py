"""Drive the reasoning-audit graph over a whole audit set: resumable and concurrent.

The run loop (skip finished samples, bounded workers, append once, results) is
the one the QA runner uses too (:mod:`ecgtrace.agents.exam.run_loop`); what is
the audit's own is one sample = one graph thread.

One LangGraph thread per sample (``thread_id = f"{run_id}:{sample_id}"``) in
one SQLite checkpointer per run folder (WAL, busy timeout). Samples run in a
pool of ``concurrency`` workers; the examinee bounds its own in-flight
requests. A sample is appended to ``samples.jsonl`` once, when its thread
finishes; a rerun skips finished samples, resumes unfinished threads at their
last checkpoint, and appends samples whose thread had finished but whose line
was not yet written (killed in between). Nothing is lost or counted twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from ecgtrace.agents.audit.examiner import chain_request, run_style
from ecgtrace.agents.audit.format import AuditItem, AuditSet
from ecgtrace.agents.exam import run_loop
from ecgtrace.agents.exam.budget import PromptBudget, estimate_request_tokens, skip_record
from ecgtrace.agents.exam.examinees import Examinee
from ecgtrace.agents.exam.prompt_styles import PromptStyle
from ecgtrace.contracts.runs import AuditSample, sample_key
from ecgtrace.graphs.reasoning_audit import AuditContext, build_graph
from ecgtrace.metrics import summarize
from ecgtrace.runlog import RunDir
from ecgtrace.tools.text_encodings import RAW, EncodingError, TextEncoding

#: SQLite waits this long for a lock before "database is locked".
BUSY_TIMEOUT_MS = 30_000
#: Checkpoint writes are committed together at most this long after the first of them (s): the most a kill -9 can take back.
COMMIT_EVERY_S = 0.05


def _inline_saver_class() -> type:
    """``SqliteSaver`` whose async methods run its sync ones on the event loop's thread (built on first use:
    importing langgraph's SQLite module is deferred like every other heavy import here)."""
    global _INLINE_SAVER
    if _INLINE_SAVER is not None:
        return _INLINE_SAVER
    from langgraph.checkpoint.sqlite import SqliteSaver

    class InlineSqliteSaver(SqliteSaver):
        """LangGraph's SQLite checkpointer (same tables, same file), called inline instead of through aiosqlite.

        ``AsyncSqliteSaver`` sends every statement to a helper thread and back
        (about 18 thread hops per turn, most of the harness's checkpoint cost);
        here a checkpoint write is one ``INSERT`` on the loop's own thread, and
        the writes of every sample in flight are committed together at most
        :data:`COMMIT_EVERY_S` later (a commit is a WAL write that blocks the
        loop ~0.3 ms; 2-3 per turn were a third of the loop's time at 500
        turns/s). A ``kill -9`` therefore loses at most that window's turns,
        which the rerun asks again; finished samples are in ``samples.jsonl``
        (fsynced) and never depend on it. ``synchronous=NORMAL`` gives up
        durability against power loss only, as before.
        """

        _commit_handle: Any = None

        @contextmanager
        def cursor(self, transaction: bool = True) -> Iterator[Any]:
            with self.lock:
                self.setup()
                cur = self.conn.cursor()
                try:
                    yield cur
                finally:
                    cur.close()
            if transaction:
                self._commit_soon()

        def _commit_soon(self) -> None:
            if self._commit_handle is not None:
                return
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # called outside an event loop: commit at once
                self.commit_now()
                return
            self._commit_handle = loop.call_later(COMMIT_EVERY_S, self.commit_now)

        def commit_now(self) -> None:
            """Commit what is pending (the run's end, and every :data:`COMMIT_EVERY_S` while it runs)."""
            if self._commit_handle is not None:
                self._commit_handle.cancel()
                self._commit_handle = None
            with self.lock:
                self.conn.commit()

        async def aget_tuple(self, config: Any) -> Any:
            return self.get_tuple(config)

        async def alist(self, config: Any, *, filter: dict[str, Any] | None = None, before: Any = None,  # noqa: A002
                        limit: int | None = None):  # noqa: ANN201 - an async iterator
            for item in self.list(config, filter=filter, before=before, limit=limit):
                yield item

        async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            return self.put(config, checkpoint, metadata, new_versions)

        async def aput_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
            self.put_writes(config, writes, task_id, task_path)

        async def adelete_thread(self, thread_id: str) -> None:
            self.delete_thread(thread_id)

        async def aget_delta_channel_history(self, *, config: Any, channels: Any) -> Any:
            return self.get_delta_channel_history(config=config, channels=channels)

    _INLINE_SAVER = InlineSqliteSaver
    return InlineSqliteSaver


_INLINE_SAVER: type | None = None


@asynccontextmanager
async def sqlite_checkpointer(path: str | Path):
    """One SQLite checkpointer per file (:func:`_inline_saver_class`), WAL journal, busy timeout.

    A file that is not a SQLite database (corrupt, or something else under
    that name) is a :class:`~ecgtrace.errors.RunError` saying what to do.
    """
    import sqlite3

    from ecgtrace.errors import RunError

    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
    saver: Any = None
    try:
        try:
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            saver = _inline_saver_class()(conn)
            saver.setup()
        except sqlite3.DatabaseError as exc:
            if "disk is full" in str(exc) or "readonly" in str(exc):
                raise
            raise RunError(f"{path}: not a usable checkpoint database ({exc}); move it away to start the unfinished "
                           "samples again from their first turn (finished ones are in samples.jsonl)") from None
        yield saver
    finally:
        try:
            if saver is not None:
                saver.commit_now()  # whatever the way out (end, error, Ctrl-C), the last turns' checkpoints land
        finally:
            conn.close()


async def shrink_checkpoints(saver: Any) -> None:
    """Give the space of deleted threads back to the disk (VACUUM) and empty the WAL.

    Deleting a finished sample's thread only marks its pages free; without
    this the file keeps the size of every turn ever checkpointed.
    """
    saver.commit_now()
    with saver.lock:
        conn = saver.conn
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def sample_row(item: AuditItem, values: dict[str, Any], epoch: int = 0) -> dict[str, Any]:
    """The samples.jsonl line of a finished thread (:class:`AuditSample` JSON)."""
    return AuditSample(id=sample_key(item.id, epoch), epoch=epoch, diagnosis=item.diagnosis, label=item.label, path_id=item.path_id,
                       mode=values["run"]["mode"], turns=values["turns"]).to_json()


def precheck(item: AuditItem, base_dir: str | Path, modality: str, encoding: TextEncoding, budget: PromptBudget | None,
             style: PromptStyle | str = "lettered") -> dict[str, Any] | None:
    """Why ``item`` cannot be asked (a SkipRecord's JSON), or None when its whole chain fits (asked in ``style``)."""
    if encoding.is_asset and budget is None:
        return None
    try:
        request = chain_request(item, base_dir, modality, encoding, style)
    except EncodingError as exc:
        return skip_record("encoding", str(exc), text_encoding=encoding.to_json())
    if budget is None:
        return None
    tokens = estimate_request_tokens(request)
    if budget.fits(tokens):
        return None
    return skip_record("token_budget", budget.reason(tokens, "the last turn of its chain"), prompt_tokens=tokens, budget=budget,
                       text_encoding=encoding.to_json())


async def _run_sample(graph: Any, run: RunDir, item: AuditItem, epoch: int, run_cfg: dict[str, Any], context: AuditContext,
                      ask_human: Callable[[dict[str, Any]], str] | None) -> dict[str, Any]:
    from langgraph.types import Command

    config = {"configurable": {"thread_id": run.thread_id(sample_key(item.id, epoch))}}
    snapshot = await graph.aget_state(config)
    values = snapshot.values or {}
    if values.get("done"):
        return sample_row(item, values, epoch)
    if not snapshot.next:  # a new thread: only a chain that can be asked to its end is started
        skipped = precheck(item, context.base_dir or run_cfg["base_dir"], run_cfg["modality"], TextEncoding.from_json(run_cfg.get("text")),
                           context.budget, run_style(run_cfg))
        if skipped is not None:
            return AuditSample(id=sample_key(item.id, epoch), epoch=epoch, diagnosis=item.diagnosis, label=item.label, path_id=item.path_id,
                               mode=run_cfg["mode"], turns=[], skipped=skipped).to_json()
    if snapshot.next:  # an unfinished thread: resume at its last checkpoint
        pending_interrupts = [i for task in snapshot.tasks for i in task.interrupts]
        payload: Any = None
        if pending_interrupts:
            payload = Command(resume=await asyncio.to_thread(_ask, ask_human, pending_interrupts[0].value))
    else:
        payload = {"item": item.to_json(), "run": {**run_cfg, "epoch": epoch}}
    while True:
        values = await graph.ainvoke(payload, config, context=context)
        interrupts = values.get("__interrupt__")
        if not interrupts:
            break
        payload = Command(resume=await asyncio.to_thread(_ask, ask_human, interrupts[0].value))
    if not values.get("done"):
        raise RuntimeError(f"sample {item.id}: graph stopped before the end of the chain")
    return sample_row(item, values, epoch)


def _ask(ask_human: Callable[[dict[str, Any]], str] | None, question: dict[str, Any]) -> str:
    if ask_human is None:
        raise RuntimeError("a human examinee needs an ask_human callback")
    return ask_human(question)


async def run_audit(audit: AuditSet, run: RunDir, examinee: Examinee, *, mode: str = "teacher", modality: str = "text",
                    prompt_style: str = "lettered", condensed: bool = False, concurrency: int = 8, limit: int | None = None,
                    on_sample: Callable[[dict[str, Any]], None] | None = None,
                    ask_human: Callable[[dict[str, Any]], str] | None = None,
                    keep_checkpoints: bool = False, restart: set[str] | frozenset[str] = frozenset(),
                    items: list[AuditItem] | None = None, encoding: TextEncoding = RAW, budget: PromptBudget | None = None,
                    epochs: int = 1, seed: int = 0, pricing: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:
    """Run (or resume) the audit; returns the results written to ``results.json``.

    Args:
        audit: the loaded audit set (items, folder, hash).
        run: the opened run folder.
        examinee: the model under test.
        mode: ``teacher`` or ``stop``.
        modality: ``image``, ``text`` or ``both``.
        prompt_style: ``lettered`` (ecgtrace's) or ``erb`` (full option texts, no letters).
        condensed: show the options only on the question being asked (ERB's condensed chat).
        concurrency: samples in flight at once (1 for a human examinee).
        limit: only the first ``limit`` of ``items``.
        on_sample: called with each row appended to samples.jsonl (progress).
        ask_human: called with an interrupt payload, returns the typed answer.
        keep_checkpoints: keep a finished sample's thread in checkpoints.sqlite
            (for time-travel debugging). By default it is deleted once the sample
            is in samples.jsonl, which holds every turn; the database then only
            holds samples in flight instead of growing with the run.
        restart: sample ids whose thread is discarded first, so they start over
            (``--retry-errors`` after :meth:`RunDir.drop_samples`).
        items: the items to ask (default: every item of ``audit``; see
            :func:`ecgtrace.agents.exam.run_control.select_items`).
        encoding: how the ECG is written as text (text and both modalities).
        budget: the prompt token budget: a sample whose chain cannot fit is
            skipped with its reason, a turn that would not fit is not sent.
        epochs: times each item is asked (options shuffled from epoch 1 on, seeded by ``seed``).
        pricing: USD per 1M tokens by model name, for the cost in ``results["usage"]``.
    """
    pool = list(items) if items is not None else list(audit.items)
    chosen = pool[:limit] if limit else pool
    run_cfg = {"mode": mode, "modality": modality, "base_dir": str(audit.base_dir), "prompt_style": prompt_style,
               "condensed": bool(condensed), "text": encoding.to_json(), "seed": int(seed)}
    context = AuditContext(examinee=examinee, base_dir=str(audit.base_dir), budget=budget)

    async with sqlite_checkpointer(run.checkpoint_path) as saver:
        graph = build_graph(checkpointer=saver)
        for sample_id in sorted(restart):
            await saver.adelete_thread(run.thread_id(sample_id))

        async def examine_one(unit: run_loop.EpochUnit[AuditItem]) -> dict[str, Any]:
            return await _run_sample(graph, run, unit.item, unit.epoch, run_cfg, context, ask_human)

        async def forget(unit: run_loop.EpochUnit[AuditItem]) -> None:
            if not keep_checkpoints:  # only after the line is safely on disk
                await saver.adelete_thread(run.thread_id(unit.id))

        await run_loop.examine(run, run_loop.epoch_units(chosen, epochs), examine_one, workers=run_loop.worker_count(examinee, concurrency),
                               on_sample=on_sample, after_append=forget)
        if not keep_checkpoints:
            await shrink_checkpoints(saver)
    models = {"examinee": (run.header.get("identity") or {}).get("model") or getattr(examinee, "name", None)}
    return write_results(run, chosen, epochs=epochs, models=models, pricing=pricing, budget=budget.to_json() if budget else None)


def headline(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """The metrics one epoch of an audit is summed up by (``results["epochs"]``)."""
    overall = summarize(rows)["overall"]
    return {name: overall[name]["value"] for name in ("ida", "gt_rda", "completion", "depth")}


def write_results(run: RunDir, items: list[AuditItem], *, epochs: int = 1, models: dict[str, str | None] | None = None,
                  pricing: dict[str, dict[str, float]] | None = None, budget: dict[str, Any] | None = None) -> dict[str, Any]:
    """Metrics over the finished samples of ``items``; written atomically to results.json."""
    return run_loop.write_exam_results(run, items, summarize, epochs=epochs, headline=headline, models=models, pricing=pricing, budget=budget)
