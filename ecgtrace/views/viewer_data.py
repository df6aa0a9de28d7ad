"""What the viewer shows, as plain JSON: the run list, a run's overview, its sample index, one sample, a comparison.

The server (:mod:`ecgtrace.views.viewer_server`) answers these on request;
the static export (:mod:`ecgtrace.views.viewer_static`) writes them to files.
Both place them under the same names (:func:`data_name`), so the browser app
is one and the same. Samples are named by :func:`~ecgtrace.views.run_view.sample_key`
(ids may hold any character); figures and item images are separate files
loaded on demand, never inlined.

Model text is passed through as data: the browser app puts every string into
the page with ``textContent``, never as markup.
"""

from __future__ import annotations

from typing import Any

from ecgtrace.views.levels import stage_keys
from ecgtrace.views.run_view import RunView, sample_key
from ecgtrace.views.usage import run_usage, sample_tokens

VIEWER_FORMAT = "ecgtrace-viewer/1"
MAX_TURN_TEXT = 50_000  # characters of one prompt / answer / reasoning sent to the browser
SEARCH_CHARS = 1_200  # characters of model text per sample the search box looks through
MAX_DIFFS = 20_000  # differing turns listed in a comparison
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
#: Headline metrics get these names on screen; any other key of results.json is shown under its own name.
METRIC_NAMES = {"ida": "IDA", "gt_rda": "GT-RDA", "decision_acc": "Decision acc.", "completion": "Completion", "depth": "Depth (0-4)",
                "closed_accuracy": "Closed accuracy", "mean_score": "Mean score (0-100)"}


def data_name(*parts: str) -> str:
    """The name of a data file under ``data/`` (``r0/overview`` -> ``data/r0/overview.js``)."""
    return "/".join(parts)


def figure_url(n: int, key: str, name: str) -> str:
    return f"data/r{n}/fig/{key}/{name}.png"


def asset_url(n: int, key: str, name: str, suffix: str) -> str:
    return f"data/r{n}/asset/{key}/{name}{suffix}"


# ------------------------------------------------------------------ run list and overview

def app_data(runs: list[RunView]) -> dict[str, Any]:
    """The served runs and which pairs can be compared (same kind, shared samples)."""
    listed = [{"n": n, "label": r.label, "folder": r.root.name, "kind": r.kind, "model": r.model, "run_id": r.header.get("run_id"),
               "samples": len(r.rows)} for n, r in enumerate(runs)]
    ids = [{row["id"] for row in r.rows} for r in runs]
    # probe runs are not compared (their rows mix audit and QA samples; McNemar between two probe runs is not defined here)
    pairs = [[a, b] for a in range(len(runs)) for b in range(a + 1, len(runs))
             if runs[a].kind == runs[b].kind != "probe" and ids[a] & ids[b]]
    return {"format": VIEWER_FORMAT, "runs": listed, "pairs": pairs}


def headline_metrics(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Every interval-carrying metric of ``results.overall`` (read from the file, whatever its names)."""
    overall = results.get("overall") or {}
    out = []
    for key, value in overall.items():
        if isinstance(value, dict) and "ci95" in value and "value" in value:
            out.append({"key": key, "name": METRIC_NAMES.get(key, key), "value": value["value"], "ci95": value["ci95"],
                        "k": value.get("k"), "n": value.get("n"), "percent": "k" in value or key.endswith(("accuracy", "acc"))})
    return out


def run_facts(run: RunView) -> list[list[str]]:
    identity, settings = run.identity, run.header.get("settings") or {}
    facts = [["folder", str(run.root)], ["kind", run.kind], ["run id", str(run.header.get("run_id"))],
             ["created (UTC)", str(run.header.get("created_utc"))]]
    for key in ("model", "modality", "mode", "judge", "seed", "limit", "prompt_version", "scoring_version", "dataset_sha256"):
        if identity.get(key) is not None:
            facts.append([key, str(identity[key])])
    if settings.get("dataset_path"):
        facts.append(["dataset", str(settings["dataset_path"]) + ("" if run.item_models or run.kind == "qa" else " (not found: no figures)")])
    facts.append(["finished", f"{run.results.get('n_finished', len(run.rows))} of {run.results.get('n_items', '?')} samples"])
    return facts


def overview(run: RunView, others: list[RunView]) -> dict[str, Any]:
    from ecgtrace.views.plots import run_plots

    if run.kind == "probe":  # paired metrics from results.json, overall and per counterfactual kind; no per-stage plots
        from ecgtrace.views.viewer_probe import probe_overview

        paired = probe_overview(run.results)
        metrics, plots, per_kind = paired["metrics"], [], paired["per_kind"]
    else:
        metrics, plots, per_kind = headline_metrics(run.results), run_plots(run, others), None
    return {"kind": run.kind, "label": run.label, "facts": run_facts(run), "metrics": metrics, "per_kind": per_kind,
            "complete": run.results.get("complete", True), "plots": plots,
            "usage": run_usage(run.header, run.rows, run.results), "turns": (run.results.get("overall") or {}).get("turns")}


# ------------------------------------------------------------------ sample index

INDEX_COLUMNS = ("key", "id", "diagnosis", "task", "label", "asked", "right", "correct", "first_wrong", "wrong", "stages",
                 "parse", "errors", "depth", "score", "latency_ms", "tokens", "pkind", "source", "followed", "paired", "cf_right", "cf_asked")


def first_wrong_stage(turns: list[dict[str, Any]]) -> str | None:
    """The stage of the first wrong asked turn after the initial question (where the chain broke), as the debugger counts."""
    from ecgtrace.views.debugger import first_wrong_index

    index = first_wrong_index(turns)
    return next((str(t.get("stage")) for t in turns if t.get("index") == index), None) if index is not None else None


def _index_row(run: RunView, row: dict[str, Any], depth: float | None) -> list[Any]:
    turns = [t for t in row.get("turns") or [] if t.get("asked", True)]
    qa = run.row_kind(row) == "qa"
    keys = (lambda t: [str(row.get("task"))]) if qa else stage_keys
    right = sum(1 for t in turns if t.get("correct"))
    correct = row.get("correct") if qa else (right == len(turns) if turns else None)  # a skipped sample is neither
    latency = sum(float(t["latency_ms"]) for t in turns if isinstance(t.get("latency_ms"), int | float))
    return [sample_key(row["id"]), row["id"], row.get("finding") if qa else row.get("diagnosis"), row.get("task") if qa else None,
            row.get("label"), len(turns), right, correct, None if qa else first_wrong_stage(row.get("turns") or []),
            sorted({k for t in turns if t.get("correct") is False for k in keys(t)}), sorted({k for t in turns for k in keys(t)}),
            sum(1 for t in turns if not t.get("error") and not t.get("parse_ok", True)), sum(1 for t in turns if t.get("error")),
            depth, row.get("score") if qa else (round(right / len(turns), 4) if turns else None), round(latency, 1), sample_tokens(row),
            *_probe_columns(row)]


def _probe_columns(row: dict[str, Any]) -> list[Any]:
    """A pair row's kind, source, turns that did what they should (of those paired), and turns right on the edited strip."""
    probe = row.get("probe")
    if not probe:
        return [None] * 6
    cf = [t for t in (row.get("counterfactual") or {}).get("turns") or [] if t.get("asked", True)]
    return [probe["kind"], probe["source"], probe["followed"], probe["paired"], sum(1 for t in cf if t.get("correct")), len(cf)]


def sample_index(run: RunView) -> dict[str, Any]:
    """One compact row per sample (column names once) for the sortable, filterable table."""
    depths = [o.get("depth") for o in run.outcomes()]
    rows = [_index_row(run, r, None if d is None else round(float(d), 4)) for r, d in zip(run.rows, depths)]
    return {"columns": list(INDEX_COLUMNS), "rows": rows, "kind": run.kind}


def search_texts(run: RunView) -> dict[str, Any]:
    """Per sample (index order), lower-cased text the search box looks through: ids, labels, the model's answers."""
    out = []
    for row in run.rows:
        parts = [row["id"], str(row.get("diagnosis") or row.get("finding") or ""), str(row.get("task") or ""), str(row.get("path_id") or "")]
        for t in row.get("turns") or []:
            parts += [str(t.get("raw") or "")[:240], str(t.get("parse_reason") or ""), str(t.get("error") or "")]
        out.append(" ".join(p for p in parts if p)[:SEARCH_CHARS].lower())
    return {"texts": out}
