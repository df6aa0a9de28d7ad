"""``ecgtrace export erb``: an audit run in ERB's result layout, so ERB's own evaluator can score it.

Layout: ``<out>/<model>/<data_source>/<target_dx>/<id>.json``, each file the
sample with ``model_response`` (the examinee's raw reply) added to every step.
Items imported from ERB get their metadata back verbatim; other items are
written with their own id, ``data_source: "ecgtrace-<db>"`` and
``target_dx: <diagnosis>``.

Key names: ``--keys old`` (default) writes what ERB's evaluator reads
(``path_1``, ``finding``, ``grounding``, ``decision``, question types
``finding``/``decision``, wave and measurement answers as plain texts, and
``eval_path: 1`` on the initial question: ecgtrace always asks ERB's reasoning
path); ``--keys new`` writes the released JSONL's names (``reasoning``,
``finding_identification``, ``ecg_grounding`` with answer lists,
``diagnostic_decision``). Steps are written in asking order and keys are not
sorted: the evaluator walks a loop's steps in file order.

What ERB's layout cannot carry (the window, the asset files, provenance,
ecgtrace's own parse and score of each turn) goes to ``<out>/<model>.ecgtrace.json``,
one entry per exported file, so nothing is lost.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ecgtrace.agents.interop._erb_samples import KEYS, QUESTION_TYPES
from ecgtrace.contracts.audit import AuditItem
from ecgtrace.errors import EcgTraceError, InteropError
from ecgtrace.jsonio import safe_join, write_json_atomic, write_text_atomic

EXPORT_VERSION = "1"
GROUNDING_TYPES_BY_KIND = {"lead": "lead_grounding", "wave": "wave_grounding", "measurement": "measurement_grounding"}
NOT_CARRIED = ("window (ERB always shows the whole record)", "asset files (ERB renders its own plot)", "provenance",
               "ecgtrace's parse and score of each turn", "reasoning traces, latency and token counts")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "model"


def _metadata(item: AuditItem) -> dict[str, Any]:
    """ERB's metadata: verbatim for items imported from ERB, else the item's own id and a data source that says ecgtrace."""
    params = item.provenance.params
    if item.provenance.source == "erb" and isinstance(params.get("metadata"), dict):
        return dict(params["metadata"])
    path_idx: Any = int(item.path_id) if item.path_id.isdigit() else item.path_id
    return {"id": item.id, "data_source": f"ecgtrace-{item.record.db}", "ecg_id": item.record.id, "target_dx": item.diagnosis,
            "dx_label": item.label, "path_idx": path_idx}


def _step(question: str, options: list[str], answer: str | list[str], qtype: str, response: Any, *, as_list: bool) -> dict[str, Any]:
    answers = answer if isinstance(answer, list) else [answer]
    idx = [options.index(a) for a in answers]
    return {"question": question, "options": list(options), "answer": answers if as_list else answers[0],
            "answer_idx": idx if as_list else idx[0], "question_type": qtype, "model_response": response}


def _responses(turns: list[dict[str, Any]]) -> dict[tuple[str, int | None, int], Any]:
    """``{(stage, loop, k): raw reply}``; ``k`` counts grounding turns within a loop (None when not asked or failed)."""
    out: dict[tuple[str, int | None, int], Any] = {}
    count: dict[tuple[str, int | None], int] = {}
    for t in sorted(turns, key=lambda t: t["index"]):
        key = (t["stage"], t.get("loop"))
        k = count.get(key, 0)
        count[key] = k + 1
        out[(t["stage"], t.get("loop"), k)] = t.get("raw") if t.get("asked", True) and not t.get("error") else None
    return out


def erb_result(item: AuditItem, turns: list[dict[str, Any]], keys: str = "old") -> dict[str, Any]:
    """One exported file: the item as an ERB sample with ``model_response`` on every step (see the module docstring)."""
    said = _responses(turns)
    names, types = KEYS[keys], QUESTION_TYPES[keys]
    initial = _step(item.initial.question, item.initial.options, item.initial.answer, types["initial"], said.get(("initial", None, 0)),
                    as_list=False)
    initial.pop("answer_idx")  # ERB's initial question carries no answer_idx
    if keys == "old":
        initial["eval_path"] = 1
    loops = []
    for n, loop in enumerate(item.loops):
        grounding = [_step(g.question, g.options, g.answer, GROUNDING_TYPES_BY_KIND[g.kind], said.get(("grounding", n, k)),
                           as_list=keys == "new" or g.multi) for k, g in enumerate(loop.grounding)]
        loops.append({
            names["criterion"]: _step(loop.criterion.question, loop.criterion.options, loop.criterion.answer, types["criterion"],
                                      said.get(("criterion", n, 0)), as_list=False),
            names["finding"]: _step(loop.finding.question, loop.finding.options, loop.finding.answer, types["finding"],
                                    said.get(("finding", n, 0)), as_list=False),
            names["grounding"]: grounding,
            names["decision"]: _step(loop.decision.question, loop.decision.options, loop.decision.answer, types["decision"],
                                     said.get(("decision", n, 0)), as_list=False),
        })
    return {"metadata": _metadata(item), "data": {"initial_diagnostic_question": initial, names["loops"]: loops}}


def _dataset_items(header: dict[str, Any], dataset: str | os.PathLike[str] | None) -> dict[str, AuditItem]:
    from ecgtrace.contracts.datasets import load_items

    path = dataset or (header.get("settings") or {}).get("dataset_path")
    if not path:
        raise InteropError("the run's header names no dataset; pass --dataset DIR/audit.jsonl")
    try:
        audit = load_items(path, "audit")
    except EcgTraceError as exc:
        raise InteropError(f"cannot read the run's audit items ({exc}); pass --dataset DIR/audit.jsonl") from None
    want = header["identity"].get("dataset_sha256")
    if want and audit.sha256 != want:
        raise InteropError(f"{audit.path} has changed since the run (its SHA-256 differs from the run's); pass the file the run used with --dataset")
    return {it.id: it for it in audit.items}


def export_run(run_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], *, keys: str = "old", model_name: str | None = None,
               dataset: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Write the finished samples of an audit run in ERB's result layout; returns a summary (``"line"``: one line).

    Raises:
        InteropError: not an audit run, no finished samples, the dataset is missing or changed, or ``out_dir`` is inside the run.
    """
    from ecgtrace.runlog import load_run_samples

    if keys not in KEYS:
        raise InteropError(f"--keys must be one of {', '.join(KEYS)}, got {keys!r}")
    header, rows = load_run_samples(run_dir)
    if header["kind"] != "audit":
        raise InteropError(f"{run_dir} is a {header['kind']} run; ERB's layout holds reasoning-audit runs")
    if not rows:
        raise InteropError(f"{run_dir} has no finished samples to export")
    run_root, out = Path(run_dir).resolve(), Path(out_dir)
    if out.resolve() == run_root or run_root in out.resolve().parents:
        raise InteropError(f"--out {out_dir} lies inside the run folder; choose a folder of its own")
    items = _dataset_items(header, dataset)
    model = _safe(model_name or str(header["identity"].get("model") or "model"))
    entries, not_asked, from_erb = [], 0, 0
    for row in rows:
        item = items.get(row["id"])
        if item is None:
            raise InteropError(f"sample {row['id']!r} of the run is not in the dataset {header['settings'].get('dataset_path')}")
        result = erb_result(item, row["turns"], keys)
        meta = result["metadata"]
        rel = [model, _safe(str(meta["data_source"])), _safe(str(meta["target_dx"])), f"{_safe(str(meta['id']))}.json"]
        write_text_atomic(safe_join(out, *rel), json.dumps(result, indent=4, ensure_ascii=False) + "\n")
        not_asked += sum(1 for t in row["turns"] if not t.get("asked", True))
        from_erb += item.provenance.source == "erb"
        entries.append({"file": "/".join(rel), "item_id": item.id, "source": item.provenance.source, "record": item.record.to_json(),
                        "window": item.window.model_dump() if item.window else None, "assets": item.assets.model_dump(),
                        "turns": [{k: t.get(k) for k in ("index", "stage", "kind", "asked", "parsed", "correct", "error")} for t in row["turns"]]})
    manifest = {"format": "ecgtrace-erb-export/1", "run": str(run_dir), "run_id": header["run_id"], "model": header["identity"].get("model"),
                "mode": header["identity"].get("mode"), "modality": header["identity"].get("modality"), "keys": keys,
                "n_files": len(entries), "not_carried": list(NOT_CARRIED), "files": entries,
                "provenance": {"source": "computed", "method": "ecgtrace.agents.interop.erb.export", "version": EXPORT_VERSION, "params": {"keys": keys}}}
    write_json_atomic(safe_join(out, f"{model}.ecgtrace.json"), manifest)
    note = f"; {not_asked} turn(s) never asked (stop mode) have model_response null" if not_asked else ""
    return {"n_files": len(entries), "n_from_erb": from_erb, "model_dir": str(out / model), "not_asked": not_asked,
            "line": f"exported {len(entries)} samples ({from_erb} from ERB) to {out / model} with {keys} key names{note}"}
