"""The plots of a run as plain-JSON specs, drawn by the viewer (JavaScript, SVG in the browser) and the report (:mod:`ecgtrace.views.svg`).

What is plotted is decided here once; both drawers only draw. Metric and
stage names are read from ``results.json`` (whatever keys it has), never
from a fixed list, so renamed or added metrics show up by themselves.

Spec types (every number a plain float, proportions in [0, 1])::

    {"type": "bars", "id", "title", "ymax", "percent": bool, "caption",
     "bars": [{"label", "value", "lo", "hi", "k"?, "n", "link"?}],
     "refs": [{"name": "chance" | "prior", "values": [level | None per bar]}]}
    {"type": "histogram", "id", "title", "xlabel", "caption",
     "bins": [{"label", "count", "lo", "hi"}]}                       # lo/hi None for open-ended bins
    {"type": "heatmap", "id", "title", "caption", "rows": [..], "cols": [..],
     "cells": [[{"value", "k", "n", "link"} | None, ...], ...]}

``link`` holds sample-table filters (``diagnosis``, ``stage``, ``outcome``) a
click in the viewer applies.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ecgtrace.views.levels import reference_levels
from ecgtrace.views.run_view import RunView

DEPTH_EDGES = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)
COUNT_LIMIT = 5  # count errors beyond +-5 events share an open-ended bin
TIMING_EDGES_MS = (-2000.0, -1000.0, -500.0, -300.0, -150.0, -50.0, 50.0, 150.0, 300.0, 500.0, 1000.0, 2000.0)


def ordered_stages(keys: Any) -> list[str]:
    """Stage keys in asking order (the known ones first, grounding kinds after grounding), then any others sorted."""
    from ecgtrace.metrics import STAGE_KEYS

    keys = set(keys)
    return [k for k in STAGE_KEYS if k in keys] + sorted(keys - set(STAGE_KEYS))


def _bar(label: str, metric: dict[str, Any], link: dict[str, Any] | None = None) -> dict[str, Any] | None:
    if not isinstance(metric, dict) or metric.get("value") is None:
        return None
    lo, hi = metric.get("ci95") or (metric["value"], metric["value"])
    bar = {"label": label, "value": float(metric["value"]), "lo": float(lo), "hi": float(hi), "n": int(metric.get("n") or 0)}
    if "k" in metric:
        bar["k"] = int(metric["k"])
    if link:
        bar["link"] = link
    return bar


def _with_refs(bars: list[dict[str, Any]], levels: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": name, "values": [levels[name].get(b["label"]) for b in bars]} for name in ("chance", "prior")
            if any(levels[name].get(b["label"]) is not None for b in bars)]


def _caption(levels: dict[str, Any], first: str) -> str:
    return " · ".join([first, *(levels["notes"][k] for k in ("chance", "prior") if levels["notes"].get(k))])


# ------------------------------------------------------------------ audit

def stage_bars(run: RunView, levels: dict[str, Any]) -> dict[str, Any]:
    """Per-stage accuracy of the whole run with Wilson 95% intervals, chance and prior as lines."""
    stages = (run.results.get("overall") or {}).get("stages") or {}
    bars = [b for b in (_bar(k, stages[k], {"stage": k}) for k in ordered_stages(stages)) if b]
    return {"type": "bars", "id": "stages", "title": "Accuracy per stage", "ymax": 1.0, "percent": True, "bars": bars,
            "refs": _with_refs(bars, levels),
            "caption": _caption(levels, "Share of asked turns answered correctly, Wilson 95% intervals.")}


def sample_depths(run: RunView) -> list[float]:
    """Each sample's depth (0-4) as :func:`ecgtrace.metrics.sample_outcomes` defines it; samples without one are left out."""
    return [float(o["depth"]) for o in run.outcomes() if o.get("depth") is not None]


def _histogram(values: list[float], edges: tuple[float, ...], labels: list[str], *, open_ends: bool) -> list[dict[str, Any]]:
    """Counts per bin; with ``open_ends`` values below the first / above the last edge get their own bins."""
    bounds = ([(None, edges[0])] if open_ends else []) + list(zip(edges[:-1], edges[1:])) + ([(edges[-1], None)] if open_ends else [])
    counts = [0] * len(bounds)
    for v in values:
        for i, (lo, hi) in enumerate(bounds):
            last = i == len(bounds) - 1
            if (lo is None or v >= lo) and (hi is None or v < hi or (last and v <= hi)):
                counts[i] += 1
                break
    return [{"label": label, "count": c, "lo": lo, "hi": hi} for label, c, (lo, hi) in zip(labels, counts, bounds)]


def depth_histogram(run: RunView) -> dict[str, Any]:
    depths = sample_depths(run)
    labels = [f"{a:g}-{b:g}" for a, b in zip(DEPTH_EDGES[:-1], DEPTH_EDGES[1:])]
    mean = f"mean {sum(depths) / len(depths):.2f} over {len(depths)} samples" if depths else "no sample has a loop with grounding"
    return {"type": "histogram", "id": "depth", "title": "Reasoning depth per sample (0-4)", "xlabel": "depth",
            "bins": _histogram(depths, DEPTH_EDGES, labels, open_ends=False),
            "caption": f"How far each sample's loops got before the first wrong step; {mean}."}


def diagnosis_heatmap(run: RunView) -> dict[str, Any]:
    """Accuracy per diagnosis (rows) and stage (columns), from results.json's per-diagnosis blocks."""
    per = run.results.get("per_diagnosis") or {}
    cols = ordered_stages({k for b in per.values() for k in (b.get("stages") or {})})
    cells = [[_cell(per[d].get("stages", {}).get(c), {"diagnosis": d, "stage": c}) for c in cols] for d in per]
    return {"type": "heatmap", "id": "heatmap", "title": "Accuracy per diagnosis and stage", "rows": list(per), "cols": cols,
            "cells": cells, "caption": "Share of asked turns answered correctly; empty where a diagnosis has no turn of that stage."}


def _cell(metric: Any, link: dict[str, Any]) -> dict[str, Any] | None:
    if not isinstance(metric, dict) or metric.get("value") is None:
        return None
    return {"value": float(metric["value"]), "k": int(metric.get("k") or 0), "n": int(metric.get("n") or 0), "link": link}


# ------------------------------------------------------------------ QA

def task_bars(run: RunView, levels: dict[str, Any]) -> dict[str, Any]:
    per = run.results.get("per_task") or {}
    bars = [b for b in (_bar(t, per[t].get("accuracy"), {"stage": t}) for t in per) if b]
    return {"type": "bars", "id": "tasks", "title": "Accuracy per task", "ymax": 1.0, "percent": True, "bars": bars,
            "refs": _with_refs(bars, levels),
            "caption": _caption(levels, "Closed: exact option; numeric: within tolerance; timestamps: F1 = 1. Wilson 95% intervals.")}


def score_bars(run: RunView) -> dict[str, Any]:
    per = run.results.get("per_task") or {}
    bars = [b for b in (_bar(t, per[t].get("mean_score"), {"stage": t}) for t in per) if b]
    return {"type": "bars", "id": "scores", "title": "Mean item score per task (0-100)", "ymax": 100.0, "percent": False,
            "bars": bars, "refs": [], "caption": "Every task, open ones included; normal 95% intervals of the mean."}


def qa_errors(rows: list[dict[str, Any]]) -> tuple[list[float], list[float], int, int]:
    """Signed count errors (events) and timing errors (ms, each predicted time to the nearest true one), and how
    many count / timing items had no readable answer."""
    from ecgtrace.agents.exam.qa_families import numeric_truth
    from ecgtrace.agents.exam.reply_values import parse_number, parse_times_ms

    counts: list[float] = []
    times: list[float] = []
    no_count = no_time = 0
    for row in rows:
        item, turn = row.get("item") or {}, (row.get("turns") or [{}])[0]
        kind, parsed = row.get("answer_type") or item.get("answer_type"), turn.get("parsed")
        truth_text = turn.get("answer")
        if kind == "integer":
            truth = numeric_truth({**item, "answer": truth_text, "answer_type": kind})
            pred = parsed if isinstance(parsed, int | float) and not isinstance(parsed, bool) else parse_number(parsed)
            if truth is None or pred is None or not turn.get("parse_ok"):
                no_count += 1
            else:
                counts.append(float(pred) - truth)
        elif kind in ("time_ms", "timestamps_ms"):
            true_t = parse_times_ms(str(truth_text))
            pred_t = [float(p) for p in parsed if isinstance(p, int | float)] if isinstance(parsed, list) else (
                [float(parsed)] if isinstance(parsed, int | float) and not isinstance(parsed, bool) else parse_times_ms(parsed))
            if not true_t or not pred_t or not turn.get("parse_ok"):
                no_time += 1
            else:
                times += [min((p - t for t in true_t), key=abs) for p in pred_t]
    return counts, times, no_count, no_time


def _signed_label(lo: float | None, hi: float | None) -> str:
    if lo is None:
        return f"< {hi:g}"
    if hi is None:
        return f">= {lo:g}"
    return f"+-{hi:g}" if lo == -hi else f"{lo:g} to {hi:g}"


def error_histograms(run: RunView) -> list[dict[str, Any]]:
    counts, times, no_count, no_time = qa_errors(run.rows)
    out = []
    if counts or no_count:
        edges = tuple(k - 0.5 for k in range(-COUNT_LIMIT, COUNT_LIMIT + 2))
        labels = [f"<= {-COUNT_LIMIT - 1}"] + [f"{k:+d}" if k else "0" for k in range(-COUNT_LIMIT, COUNT_LIMIT + 1)] + [f">= +{COUNT_LIMIT + 1}"]
        out.append({"type": "histogram", "id": "count_error", "title": "Count error (answer - truth, events)", "xlabel": "events",
                    "bins": _histogram(counts, edges, labels, open_ends=True),
                    "caption": f"{len(counts)} count answers; {no_count} without a readable number."})
    if times or no_time:
        edges = TIMING_EDGES_MS
        labels = [_signed_label(lo, hi) for lo, hi in zip((None, *edges), (*edges, None))]
        bins = _histogram(times, edges, labels, open_ends=True)
        mae = f"median |error| {_median([abs(t) for t in times]):.0f} ms" if times else "no readable time"
        out.append({"type": "histogram", "id": "timing_error", "title": "Timing error (answer - nearest true time, ms)", "xlabel": "ms",
                    "bins": bins, "caption": f"{len(times)} predicted times ({mae}); {no_time} timing items without a readable time."})
    return out


def _median(values: list[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def finding_heatmap(run: RunView) -> dict[str, Any] | None:
    """QA: share correct per finding (rows) and task (columns), over the items with a binary outcome."""
    from ecgtrace.metrics import proportion

    groups: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for row in run.rows:
        if row.get("finding") and row.get("correct") is not None:
            groups[(str(row["finding"]), str(row.get("task")))].append(bool(row["correct"]))
    if not groups:
        return None
    rows = sorted({f for f, _ in groups})
    cols = [t for t in (run.results.get("per_task") or {}) if any((f, t) in groups for f in rows)]
    cells = [[_cell(proportion(sum(groups[(f, t)]), len(groups[(f, t)])), {"diagnosis": f, "stage": t}) if (f, t) in groups else None
              for t in cols] for f in rows]
    return {"type": "heatmap", "id": "heatmap", "title": "Accuracy per finding and task", "rows": rows, "cols": cols, "cells": cells,
            "caption": "Share of items answered correctly (items with a right/wrong outcome only)."}


def run_plots(run: RunView, others: list[RunView] | None = None) -> list[dict[str, Any]]:
    """Every plot of a run, in the order they are shown."""
    levels = reference_levels(run, others)
    if run.kind == "qa":
        plots = [task_bars(run, levels), score_bars(run), *error_histograms(run), finding_heatmap(run)]
    else:
        plots = [stage_bars(run, levels), depth_histogram(run), diagnosis_heatmap(run)]
    return [p for p in plots if p and (p.get("bars") or p.get("bins") or p.get("cells"))]
