"""A probe run as the viewer shows it: one row per kept pair, the original's sample with its counterfactual beside it.

A probe run's ``samples.jsonl`` holds one :class:`~ecgtrace.contracts.ProbeSample`
per examined item (originals and counterfactuals alike). The viewer's pages
read audit and QA samples, so :func:`pair_rows` turns every kept pair whose
original was run (epoch 0) into one such sample: the original's own sample
row, its ``id`` the pair's, plus

* ``probe``: the pair's kind (remove, move, swap, control), source (audit or
  QA), group, the two item ids, the truth before and after, and how many
  paired turns did what they should (change, stay, follow);
* ``counterfactual``: the edited strip (image and window file in the probe
  set, the edited spans in ms), the edit's description and the answers on it
  (the counterfactual's turns), read by
  :func:`ecgtrace.views.viewer_sample.counterfactual_of`.

The headline metrics are the run's ``results.json`` (:mod:`ecgtrace.agents.probe.metrics`),
never recomputed here.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ecgtrace.contracts.runs import item_id_of
from ecgtrace.views.run_view import RunView

#: The paired metrics the viewer's overview shows (in this order), as ``ecgtrace probe`` prints them.
OVERVIEW_METRICS = (("sensitivity", "Sensitivity"), ("grounded_accuracy", "Grounded accuracy"), ("localization_follow", "Localization follow"),
                    ("invariance", "Invariance"), ("accuracy_original", "Acc. original"), ("accuracy_counterfactual", "Acc. counterfactual"))


def describe_edit(pair: dict[str, Any]) -> str:
    """One line on what the edit did: its meaning (or operation), where, and the truth before and after."""
    edit = pair.get("edit") or {}
    what = str(edit.get("meant") or edit.get("op") or pair["kind"])
    spans = edit.get("spans_ms") or []
    where = "; ".join(f"{a / 1000:.2f}-{b / 1000:.2f} s" for a, b in spans) if spans else "the whole window"
    return (f"{pair['kind']}: {what} (edited {where}); truth before {json.dumps(pair.get('before'), sort_keys=True)}, "
            f"after {json.dumps(pair.get('after'), sort_keys=True)}")


def _view_row(pair: dict[str, Any], o_row: dict[str, Any], c_row: dict[str, Any] | None) -> dict[str, Any]:
    from ecgtrace.views._report_probe import paired_turns

    done = [t["met"] for t in paired_turns(pair, o_row, c_row)]
    files = pair.get("files") or {}
    c_sample = (c_row or {}).get("sample") or {}
    return {**o_row["sample"], "id": pair["id"], "epoch": 0,
            "probe": {"kind": pair["kind"], "source": pair["source"], "group": pair["group"], "original": pair["original"],
                      "counterfactual": pair["id"], "before": pair.get("before"), "after": pair.get("after"),
                      "followed": sum(1 for m in done if m), "paired": sum(1 for m in done if m is not None),
                      "finished": c_row is not None and not c_sample.get("skipped")},
            "counterfactual": {"image": files.get("image"), "window": files.get("window"), "original_window": files.get("original_window"),
                               "spans_ms": (pair.get("edit") or {}).get("spans_ms") or [], "description": describe_edit(pair),
                               "turns": c_sample.get("turns") or []}}


def pair_rows(rows: list[dict[str, Any]], pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One viewer row per kept pair whose original finished in epoch 0 (a pair whose counterfactual did not finish shows no answers on it)."""
    first = {item_id_of(r): r for r in rows if not r.get("epoch")}
    out = []
    for pair in pairs:
        o_row = first.get(pair["original"])
        if pair["status"] != "kept" or o_row is None:
            continue
        out.append(_view_row(pair, o_row, first.get(pair["id"])))
    return out


def pair_view(run: RunView) -> RunView:
    """The probe run ``run`` with one row per kept pair (:func:`pair_rows`), its audit items and files from its probe set.

    Raises:
        RunError: the probe set is gone or unreadable (the pairs cannot be rebuilt without it).
    """
    from ecgtrace.errors import EcgTraceError, RunError
    from ecgtrace.graphs.probe_runner import load_probe_set

    folder, root = (run.results.get("probe_set") or {}).get("path"), run.root
    if not folder:
        raise RunError(f"{root}: results.json names no probe set; run the same ecgtrace probe command again to rewrite it")
    try:
        probe = load_probe_set(folder)
    except (EcgTraceError, OSError, ValueError) as exc:
        raise RunError(f"{root}: its probe set {folder} cannot be read ({exc}); the pairs cannot be shown without it") from None
    return dataclasses.replace(run, rows=pair_rows(run.rows, probe.pairs), item_models={it.id: it for it in probe.audit},
                               base_dir=probe.root.resolve())


def probe_overview(results: dict[str, Any]) -> dict[str, Any]:
    """Headline paired metrics (value, Wilson interval, counts, chance) overall, and the same per counterfactual kind."""
    def metrics(block: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for key, name in OVERVIEW_METRICS:
            m = block.get(key) or {}
            if m.get("value") is not None:
                out.append({"key": key, "name": name, "value": m["value"], "ci95": m["ci95"], "k": m.get("k"), "n": m.get("n"),
                            "chance": m.get("chance"), "percent": True})
        return out

    per_kind = [{"kind": kind, "pairs": block.get("n_pairs"), "metrics": metrics(block),
                 "mcnemar_p": (block.get("mcnemar") or {}).get("p_value")} for kind, block in (results.get("per_kind") or {}).items()]
    return {"metrics": metrics(results.get("overall") or {}), "per_kind": per_kind}
