"""One sample for the viewer: its turns, its ECG figures and images, its counterfactual; and two runs compared.

Figures are drawn on request (:func:`render_sample_figure`), one PNG per
name, from the record when it can be opened (the true evidence shaded green,
the model's chosen span outlined in blue, leads labelled), else from the
item's own image above a time strip (:mod:`ecgtrace.views._report_images`):

* ``window``: the sample's window with every wave-grounding span (audit) or
  the QA evidence and the model's times (QA);
* ``t<index>``: one grounding turn's spans (lead grounding shades the true
  leads' rows and outlines the chosen ones).

**Counterfactual extension point.** A sample row (or its item) may carry
``"counterfactual": {"image": "<path>", "description": str, "turns": [TurnRow, ...]?}``:
an edited strip (a later issue's counterfactual probes write it), its image
path relative to the run folder or the dataset folder. The viewer shows the
original ECG above the edited strip and, when ``turns`` are given, the answers
on the edited strip below the original ones. :func:`counterfactual_of` is the
one place that reads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ecgtrace.views.run_view import RunView, sample_key
from ecgtrace.views.viewer_data import IMAGE_SUFFIXES, MAX_DIFFS, MAX_TURN_TEXT, asset_url, figure_url

VIEWER_PX_PER_MM = 6  # 10 s of paper = 1500 px: readable at fit width, sharp when zoomed


def _clip_text(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_TURN_TEXT:
        return value[:MAX_TURN_TEXT] + f"\n[... {len(value) - MAX_TURN_TEXT} more characters not shown]"
    return value


def _turn_json(turn: dict[str, Any]) -> dict[str, Any]:
    return {k: _clip_text(v) for k, v in turn.items()}


def figure_specs(run: RunView, row: dict[str, Any]) -> list[dict[str, Any]]:
    """The figures a sample has: ``{"name", "turn", "true", "chosen"}`` (spans in ms from the record start)."""
    from ecgtrace.views._report_images import audit_turn_spans, qa_spans

    item = run.item(row)
    cf = counterfactual_of(run, row)
    edited = [{"name": "cf", "turn": None, "title": "edited (counterfactual)", "chosen": [],
               "true": [{"t0_ms": float(a), "t1_ms": float(b), "lead": None} for a, b in cf["spans_ms"]]}] if cf and cf["window"] else []
    if item is None:
        return edited
    if run.row_kind(row) == "qa":
        true, chosen = qa_spans(row)
        return ([{"name": "window", "turn": None, "true": true, "chosen": chosen}] if item.get("window") or true else []) + edited
    specs: list[dict[str, Any]] = []
    waves_true: list[dict[str, Any]] = []
    waves_chosen: list[dict[str, Any]] = []
    for turn in row.get("turns") or []:
        if turn.get("stage") != "grounding":
            continue
        true, chosen = audit_turn_spans(turn, item)
        if turn.get("kind") == "wave":
            waves_true += true
            waves_chosen += chosen
        if true or chosen:
            specs.append({"name": f"t{turn.get('index')}", "turn": turn.get("index"), "true": true, "chosen": chosen})
    if item.get("window") or waves_true:
        specs.insert(0, {"name": "window", "turn": None, "true": waves_true, "chosen": waves_chosen})
    return specs + edited


def _image_assets(run: RunView, row: dict[str, Any]) -> list[tuple[str, Path, str]]:
    """``(name, file, caption)`` of the images the model was shown, and of the counterfactual strip."""
    item = run.item(row) or {}
    rels: list[Any] = []
    if run.row_kind(row) == "qa":
        image = (item.get("modalities") or {}).get("image")
        rels = list(image) if isinstance(image, list) else [image]
    else:
        rels = [(item.get("assets") or {}).get("image")]
    out = []
    for i, rel in enumerate(r for r in rels if r):
        path = run.resolve_file(rel)
        if path is not None and path.suffix.lower() in IMAGE_SUFFIXES:
            out.append((f"img{i}", path, f"the image the model was shown ({rel})"))
    cf = counterfactual_of(run, row)
    if cf is not None and cf.get("path") is not None:
        out.append(("cf", cf["path"], f"counterfactual: {cf.get('description') or 'edited strip'}"))
    return out


def counterfactual_of(run: RunView, row: dict[str, Any]) -> dict[str, Any] | None:
    """The sample's counterfactual pair (see the module docstring), its image resolved inside the run or dataset folder."""
    raw = row.get("counterfactual") or (run.item(row) or {}).get("counterfactual")
    if not isinstance(raw, dict):
        return None
    path = run.resolve_file(raw.get("image"))
    turns = raw.get("turns") if isinstance(raw.get("turns"), list) else []
    window = raw.get("window") if isinstance(raw.get("window"), str) and run.resolve_file(raw.get("window")) is not None else None
    spans = [s for s in raw.get("spans_ms") or [] if isinstance(s, list | tuple) and len(s) == 2]
    return {"image": raw.get("image"), "path": path if path is not None and path.suffix.lower() in IMAGE_SUFFIXES else None,
            "description": str(raw.get("description") or ""), "turns": [_turn_json(t) for t in turns if isinstance(t, dict)],
            "window": window, "spans_ms": spans}


def asset_file(run: RunView, row: dict[str, Any], name: str) -> Path | None:
    """The file behind an asset name of a sample (``img0``, ``cf``), or None."""
    return next((path for n, path, _ in _image_assets(run, row) if n == name), None)


def sample_detail(run: RunView, n: int, row: dict[str, Any]) -> dict[str, Any]:
    """Everything the sample page shows (URLs to figures and images, not their bytes)."""
    key = sample_key(row["id"])
    item = run.item(row) or {}
    facts = [["id", row["id"]]]
    for name in ("diagnosis", "label", "path_id", "mode", "task", "family", "finding", "answer_type", "score", "epoch"):
        if row.get(name) is not None:
            facts.append([name, str(row[name])])
    probe = row.get("probe")
    if probe:
        facts += [["pair kind", str(probe["kind"])], ["source", str(probe["source"])], ["group", str(probe["group"])],
                  ["original item", str(probe["original"])], ["counterfactual item", str(probe["counterfactual"])],
                  ["answer did what it should", f"{probe['followed']} of {probe['paired']} paired turns"
                   + ("" if probe["finished"] else " (the counterfactual is not finished)")]]
    if isinstance(row.get("skipped"), dict):
        facts.append(["not asked", str(row["skipped"].get("reason") or row["skipped"].get("kind"))])
    record, window = item.get("record") or {}, item.get("window")
    if record:
        facts.append(["record", f"{record.get('db', '?')}/{record.get('id', '?')} ({record.get('path', '?')})"])
    if window:
        facts.append(["window", f"{window['t0_s']:.3f}-{window['t1_s']:.3f} s from the recording start"])
    figures = [{**spec, "url": figure_url(n, key, spec["name"])} for spec in figure_specs(run, row)]
    assets = [{"name": name, "caption": caption, "url": asset_url(n, key, name, path.suffix.lower())}
              for name, path, caption in _image_assets(run, row)]
    cf = counterfactual_of(run, row)
    if cf is not None:
        cf = {"description": cf["description"], "turns": cf["turns"], "image": cf["image"],
              "url": next((a["url"] for a in assets if a["name"] == "cf"), None)}
    return {"key": key, "id": row["id"], "run": n, "kind": run.kind, "facts": facts, "options": item.get("options"),
            "turns": [_turn_json(t) for t in row.get("turns") or []], "judge": row.get("judge"), "figures": figures,
            "assets": [a for a in assets if a["name"] != "cf"], "counterfactual": cf}


def render_sample_figure(run: RunView, row: dict[str, Any], name: str) -> bytes | None:
    """The PNG of one of a sample's figures (see :func:`figure_specs`), or None when it has no such figure."""
    from ecgtrace.views._report_images import render_figure_png

    spec = next((s for s in figure_specs(run, row) if s["name"] == name), None)
    if spec is None:
        return None
    if name == "cf":  # the edited strip from its window file, the edited spans shaded as in the report
        from ecgtrace.views._report_probe import strip_png

        cf = counterfactual_of(run, row) or {}
        return strip_png(run.base_dir or run.root, cf.get("window"), cf.get("spans_ms") or [], px_per_mm=VIEWER_PX_PER_MM)
    item = run.item(row) or {}
    images = _image_assets(run, row)
    asset = next((p for n, p, _ in images if n == "img0"), None)
    drawn = render_figure_png(item.get("record"), item.get("window"), run.roots, spec["true"], spec["chosen"], asset,
                              px_per_mm=VIEWER_PX_PER_MM)
    return None if drawn is None else drawn[0]


# ------------------------------------------------------------------ two runs

def _differences(a: RunView, b: RunView) -> tuple[list[dict[str, Any]], int]:
    """Turns both runs asked whose outcome or answer differs, in sample order of run A (capped at MAX_DIFFS)."""
    rows_b = {row["id"]: row for row in b.rows}
    diffs: list[dict[str, Any]] = []
    total = 0
    for row in a.rows:
        other = rows_b.get(row["id"])
        if other is None:
            continue
        turns_b = {t.get("index"): t for t in other.get("turns") or []}
        for ta in row.get("turns") or []:
            tb = turns_b.get(ta.get("index"))
            if tb is None or not ta.get("asked", True) or not tb.get("asked", True):
                continue
            if bool(ta.get("correct")) == bool(tb.get("correct")) and ta.get("parsed") == tb.get("parsed"):
                continue
            total += 1
            if len(diffs) < MAX_DIFFS:
                diffs.append({"key": sample_key(row["id"]), "id": row["id"], "index": ta.get("index"), "stage": ta.get("stage"),
                              "kind": ta.get("kind"), "truth": ta.get("answer"), "a_parsed": ta.get("parsed"), "b_parsed": tb.get("parsed"),
                              "a_ok": ta.get("correct"), "b_ok": tb.get("correct")})
    return diffs, total


def compare_data(runs: list[RunView], n_a: int, n_b: int) -> dict[str, Any]:
    """McNemar tests on the shared samples (:func:`ecgtrace.metrics.compare_runs` / :func:`~ecgtrace.agents.exam.qa_results.compare_qa`)
    and the turns where the two runs differ."""
    a, b = runs[n_a], runs[n_b]
    warnings = []
    if a.kind != b.kind:
        return {"a": n_a, "b": n_b, "error": f"cannot compare a {a.kind} run with a {b.kind} run"}
    if a.kind == "qa":
        from ecgtrace.agents.exam.qa_results import compare_qa

        result = compare_qa(a.rows, b.rows)
    else:
        from ecgtrace.metrics import compare_runs

        result = compare_runs(a.rows, b.rows)
    for key in ("dataset_sha256", "mode", "modality"):
        if a.identity.get(key) != b.identity.get(key):
            warnings.append(f"the runs differ in {key} ({a.identity.get(key)} vs {b.identity.get(key)}); only samples with the same id are paired")
    diffs, total = _differences(a, b)
    return {"a": n_a, "b": n_b, "kind": a.kind, "labels": [a.label, b.label], "shared": result["shared_samples"],
            "only_a": result["only_a"], "only_b": result["only_b"], "tests": result["tests"], "warnings": warnings,
            "diffs": diffs, "diffs_total": total}
