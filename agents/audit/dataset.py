"""Audit datasets: every record's items (:func:`ecgtrace.agents.audit.builder.build_record`), balanced and written.

:func:`build_audit_items` returns one record's items (with their assets);
:func:`write_audit_dataset` builds a set of records into ``audit.jsonl``: as
many negatives as positives per diagnosis, the surface, lead and measurement
balance over the final set (steps 5 of :mod:`ecgtrace.agents.audit.builder`),
the window assets, and ``audit_summary.json``. Deterministic: the same records,
graphs and seed give a byte-identical ``audit.jsonl`` (assets included).
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from ecgtrace.agents.audit._leads import balance_leads
from ecgtrace.agents.audit._questions import balance_measurement
from ecgtrace.agents.audit._surface import balance_surface
from ecgtrace.agents.audit.builder import BUILDER_VERSION, METHOD, RecordBuild, _balance, _rng, build_record
from ecgtrace.errors import EcgTraceError
from ecgtrace.rubrics.diagnosis_schema import DiagnosisGraph, load_diagnoses
from ecgtrace.tools.record_source import record_info
from ecgtrace.tools.records import read_window


def render_item_assets(item: dict[str, Any], out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Write ``assets/<id>.png`` (ECG paper) and ``assets/<id>.txt`` (signal as text) for an item."""
    from ecgtrace.jsonio import safe_join, write_text_atomic
    from ecgtrace.tools.render import render_png, signal_to_text

    info = record_info(item["record"]["path"])  # opened once per process, not once per item
    window = read_window(info, item["window"]["t0_s"], item["window"]["t1_s"])
    image = safe_join(out_dir, "assets", f"{item['id']}.png")
    text = safe_join(out_dir, "assets", f"{item['id']}.txt")
    render_png(window, image)
    write_text_atomic(text, signal_to_text(window, record=info.name))
    item["assets"] = {"image": f"assets/{item['id']}.png", "text": f"assets/{item['id']}.txt"}
    return item


def build_audit_items(
    record_path: str | os.PathLike[str],
    *,
    seed: int = 0,
    annotation: str | None = None,
    max_per_diagnosis: int = 4,
    render_assets: bool = True,
    out_dir: str | os.PathLike[str] | None = None,
    diagnoses: list[str] | None = None,
    graphs: dict[str, DiagnosisGraph] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    """Audit items of one record and the count of dropped windows per diagnosis and reason.

    Args:
        record_path: WFDB record or EDF file.
        seed: Same seed, same items.
        annotation: Reference annotation extension (default: ``atr`` when the
            file exists); ``"none"`` forces the project's detectors.
        max_per_diagnosis: At most this many positive and this many negative
            windows per diagnosis.
        render_assets: Write the PNG and text of each window under ``out_dir/assets``.
        out_dir: Folder for assets (required with ``render_assets``).
        diagnoses: Only these graph ids (default: every graph that applies).
        graphs: Graphs to use (default: the built-in ``rubrics/diagnoses``).

    Returns:
        ``(items, drops)``: items are plain-JSON :class:`AuditItem` dicts;
        ``drops[diagnosis][reason]`` counts windows left out.
    """
    if render_assets and out_dir is None:
        raise EcgTraceError("build_audit_items: render_assets needs out_dir")
    built = build_record(record_path, seed=seed, annotation=annotation, max_per_diagnosis=max_per_diagnosis, graphs=graphs, diagnoses=diagnoses)
    if render_assets:
        for item in built.items:
            render_item_assets(item, out_dir)  # type: ignore[arg-type]
    return built.items, {d: dict(c) for d, c in sorted(built.drops.items()) if c}


def write_audit_dataset(
    records: list[str],
    out_dir: str | os.PathLike[str],
    *,
    seed: int = 0,
    max_per_diagnosis: int = 4,
    diagnoses: list[str] | None = None,
    render_assets: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
    build_key: str | None = None,
    on_progress: Any = None,
) -> dict[str, Any]:
    """Build items for every record, balance them per diagnosis, write ``out_dir/audit.jsonl`` (+ assets).

    ``cache_dir`` is the annotation store of records without reference beats
    (default: :func:`ecgtrace.tools.annotate.annotate_record`'s, in the user cache).

    Negatives are capped at the number of positives per diagnosis (one negative
    when there is no positive). A record that cannot be read is listed in
    ``failed_records`` and skipped. Returns a plain-JSON summary (items per
    diagnosis, drop reasons, agreement with expert labels), also written to
    ``out_dir/audit_summary.json`` with ``build_key`` (:func:`ecgtrace.agents.audit.freshness.audit_build_key`) when given.
    ``on_progress(step, done, total)`` is called after each record (``"records"``)
    and each rendered item (``"render"``).
    """
    from ecgtrace.jsonio import write_json_atomic, write_jsonl_atomic

    out = Path(out_dir)
    graphs = load_diagnoses()
    items: list[dict[str, Any]] = []
    drops: dict[str, Counter] = defaultdict(Counter)
    agreement: dict[str, Counter] = defaultdict(Counter)
    failed: list[str] = []
    progress = on_progress or (lambda step, done, total: None)
    for done, record in enumerate(records, start=1):
        progress("records", done - 1, len(records))
        try:
            built = build_record(record, seed=seed, max_per_diagnosis=max_per_diagnosis, graphs=graphs, diagnoses=diagnoses, cache_dir=cache_dir)
        except EcgTraceError as exc:  # one unreadable record must not cost the others their items
            failed.append(f"{record}: {exc}")
            continue
        items.extend(built.items)
        for diagnosis, counter in built.drops.items():
            drops[diagnosis].update(counter)
        for diagnosis, counter in built.agreement.items():
            agreement[diagnosis].update(counter)
        progress("records", done, len(records))
    merged = RecordBuild(items=items, drops=drops)
    for diagnosis in sorted({item["diagnosis"] for item in items}):
        _balance(merged, diagnosis, _rng(seed, "dataset", diagnosis))
    items = sorted(merged.items, key=lambda item: item["id"])
    balance_surface(items, graphs, _rng(seed, "dataset", "surface"))  # over the final set: per-record balance does not add up
    balance_leads(items, graphs, _rng(seed, "dataset", "leads"))
    balance_measurement(items, _rng(seed, "dataset", "measurement"))
    if render_assets:
        for done, item in enumerate(items, start=1):
            render_item_assets(item, out)
            progress("render", done, len(items))
    path = write_jsonl_atomic(out / "audit.jsonl", items)
    summary = {"path": str(path), "n_items": len(items), "n_records": len(records), "seed": int(seed), **_counts(items, merged.drops, agreement), "failed_records": failed,
               "provenance": {"source": "computed", "method": METHOD, "version": BUILDER_VERSION, "params": {"max_per_diagnosis": max_per_diagnosis, "diagnoses": diagnoses}}}
    if render_assets:
        from ecgtrace.agents.exam.text_sizes import text_token_table

        summary["text_tokens"] = text_token_table(items, out, has_text=lambda it: bool((it.get("assets") or {}).get("text")))
    if build_key:
        summary["build_key"] = build_key
    write_json_atomic(out / "audit_summary.json", {**summary, "path": path.name})  # relative: the folder may move
    return summary


def _counts(items: list[dict[str, Any]], drops: dict[str, Counter], agreement: dict[str, Counter]) -> dict[str, Any]:
    """The summary's tallies: items per diagnosis and label, dropped windows per reason, agreement with expert labels."""
    per_diagnosis: dict[str, dict[str, int]] = {}
    for item in items:
        row = per_diagnosis.setdefault(item["diagnosis"], {"positive": 0, "negative": 0})
        row["positive" if item["label"] else "negative"] += 1
    return {"per_diagnosis": dict(sorted(per_diagnosis.items())), "drops": {d: dict(sorted(c.items())) for d, c in sorted(drops.items()) if c},
            "label_agreement": {d: dict(sorted(c.items())) for d, c in sorted(agreement.items())}}
