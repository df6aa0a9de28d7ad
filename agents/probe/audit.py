"""Counterfactuals of audit items: edit, confirm with the pipeline, build the item, pair its turns.

For one original item and one kind, :func:`counterfactual` returns the pair
record (:class:`ecgtrace.contracts.ProbePair` JSON) and, when kept, the
counterfactual item. Kept only when every check passes, in this order (the
first that fails is the drop reason):

1. the original is reproduced: its window's features, measured now, give the
   item's own path through its diagnosis graph (``original_not_reproduced``);
2. the edit can be made (:mod:`ecgtrace.agents.probe._audit_edits`; its reason otherwise);
3. the edited window's joins show no step above the noise (``seam_above_noise``);
4. the edited window's features give the intended ground truth, through the
   same measurement and graph: ``remove`` flips the diagnosis, ``move`` and
   ``control`` keep the path (``ground_truth_unchanged``, ``path_changed``);
5. the pipeline sees the edit as intended (:func:`ecgtrace.agents.probe._signal.confirm`);
6. the paired turns behave as intended: a ``move`` moves the wave answer and
   nothing else, a ``control`` changes no answer (``move_not_localized``,
   ``control_changed_answer:<stage>``).

``swap`` takes another item of the same diagnosis with the opposite label,
from the same record when there is one, and asks it in the original's words.
"""

from __future__ import annotations

import copy
from typing import Any

from ecgtrace.agents.audit._features import window_features
from ecgtrace.agents.audit._features_leads import unavailable_because
from ecgtrace.agents.audit.engine import MissingFeature, NotApplicable, evaluate
from ecgtrace.agents.probe import _audit_edits as ed
from ecgtrace.agents.probe._audit_item import align, chain_item, turn_pairs
from ecgtrace.agents.probe._files import ProbeFiles
from ecgtrace.agents.probe._signal import confirm
from ecgtrace.contracts.common import provenance
from ecgtrace.contracts.probe import ProbePair
from ecgtrace.rubrics.diagnosis_schema import DiagnosisGraph
from ecgtrace.tools import counterfactual as cf

METHOD = "ecgtrace.agents.probe.audit"
VERSION = "1"


def _pair(src_item: dict[str, Any], kind: str, cf_id: str, **fields: Any) -> dict[str, Any]:
    status = "dropped" if fields.get("reason") else "kept"
    prov = provenance("computed", METHOD, VERSION, {"counterfactual": cf.METHOD, "counterfactual_version": cf.COUNTERFACTUAL_VERSION})
    return ProbePair(id=cf_id, kind=kind, source="audit", original=src_item["id"], status=status, group=src_item["diagnosis"],  # type: ignore[arg-type]
                     finding=src_item["diagnosis"], provenance=prov, **fields).to_json()


def _truth(item: dict[str, Any]) -> dict[str, Any]:
    return {"label": bool(item["label"]), "path_id": item["path_id"]}


def reproduced(src: ed.Source, graph: DiagnosisGraph, graphs: dict[str, DiagnosisGraph]) -> str | None:
    """None when the original's path comes out of its window again, else the reason."""
    try:
        path = evaluate(graph, src.features.features, graphs)
    except NotApplicable as exc:
        return f"original_not_reproduced:{exc.reason}"
    except MissingFeature as exc:
        return f"original_not_reproduced:feature_unavailable:{exc.feature}" + unavailable_because(src.features.features, exc.lead)
    if path.path_id != src.item["path_id"] or bool(path.decision) != bool(src.item["label"]):
        return "original_not_reproduced"
    return None


def _move_map(src: ed.Source, draft: ed.Draft, wf: Any) -> dict[str, Any]:
    """Which original beat positions (s) the moved options are redrawn on, and the edited beats they go to."""
    fs = src.info.fs_hz
    samples, _ = src.ctx_beats()
    added = {round(t / 1000.0, 3): c for t, c in zip(draft.edited.record["beats_added_ms"], draft.edited.record["added_classes"])}

    def fact(cls_is_n: bool) -> dict[str, Any]:
        times = [t for t, c in added.items() if (c == "N") == cls_is_n]
        if not times:
            raise ed.Skip("move_bookkeeping_lost")
        return min(wf.beats, key=lambda b: abs(b["r_s"] - times[0]))

    s, d = draft.evidence
    return {"original_beats": src.features.beats, "redraw": {float(samples[s]) / fs: fact(True), float(samples[d]) / fs: fact(False)},
            "slide": ed.slide_of(draft.edited.record["shifts_ms"])}


def _check_turns(kind: str, turns: list[dict[str, Any]], left_out: list[str]) -> str | None:
    if kind == "move":
        if not any(t["expect"] == "follow" for t in turns):
            return "move_not_localized"
        changed = [t for t in turns if t["expect"] == "change"]
        return f"move_changed_answer:{changed[0]['stage']}" if changed else None
    if kind == "control":
        changed = [t for t in turns if t["expect"] != "same"]
        if changed:
            return f"control_changed_answer:{changed[0]['stage']}:{changed[0]['kind'] or ''}".rstrip(":")
        return f"control_changed_answer:{left_out[0]}" if left_out else None
    if not any(t["expect"] == "change" for t in turns):
        return "no_answer_changes"
    return None


def edited_counterfactual(src: ed.Source, lenders: ed.Lenders, kind: str, graph: DiagnosisGraph, graphs: dict[str, DiagnosisGraph],
                          files: ProbeFiles, seed: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A ``remove``, ``move`` or ``control`` counterfactual of one item: ``(pair, item or None)``."""
    o = src.item
    cf_id = f"{o['id']}.cf-{kind}"
    try:
        draft = ed.remove(src, lenders, seed) if kind == "remove" else ed.move(src, seed) if kind == "move" else ed.control(src, seed)
        seam = cf.seam_ratio(src.ctx, draft.edited)
        if seam > cf.MAX_SEAM_SIGMAS:
            raise ed.Skip(f"seam_above_noise:{seam:.1f}_sigmas")
        window = ed.edited_window(src, draft)
    except (ed.Skip, cf.CounterfactualError) as exc:
        return _pair(o, kind, cf_id, reason=str(exc), before=_truth(o)), None
    edit = {**draft.edited.record, "meant": draft.meant}
    spans = [(int(a * src.info.fs_hz / 1000), int(b * src.info.fs_hz / 1000)) for a, b in edit["spans_ms"]]
    reason, details = confirm(src.ctx, draft.edited.window, src.ctx_beats(), (draft.edited.beat_samples, draft.edited.beat_classes), draft.edited.origin,
                              draft.evidence, spans, src.bounds, draft.may_become)
    edit["pipeline"] = details
    if reason:
        return _pair(o, kind, cf_id, reason=reason, before=_truth(o), edit=edit), None
    draft.reclassify(details.get("reclassified", {}))
    table = ed.edited_table(src, draft)
    wf = window_features(window, table)
    try:
        path = evaluate(graph, wf.features, graphs)
    except NotApplicable as exc:  # the edit made the window one the graph does not apply to (e.g. it now reads as LBBB)
        return _pair(o, kind, cf_id, reason=f"{exc.reason}_after_edit", before=_truth(o), edit=edit), None
    except MissingFeature as exc:
        return _pair(o, kind, cf_id, reason=f"feature_unavailable_after_edit:{exc.feature}" + unavailable_because(wf.features, exc.lead), before=_truth(o), edit=edit), None
    after = {"label": bool(path.decision), "path_id": path.path_id}
    flipped = bool(path.decision) != bool(o["label"])
    reason = ("ground_truth_unchanged" if kind == "remove" and not flipped else
              "path_changed" if kind != "remove" and path.path_id != o["path_id"] else None)
    if reason:
        return _pair(o, kind, cf_id, reason=reason, before=_truth(o), after=after, edit=edit), None
    try:
        move = _move_map(src, draft, wf) if kind == "move" else None
    except ed.Skip as exc:
        return _pair(o, kind, cf_id, reason=str(exc), before=_truth(o), after=after, edit=edit), None
    c = chain_item(o, graph, graphs, src.info, wf, path, seed, table.provenance)
    c["id"] = cf_id
    keys, left_out = align(c, o, graph, wf, move=move)
    turns = turn_pairs(o, c, keys, kind)
    reason = _check_turns(kind, turns, left_out)
    if reason:
        return _pair(o, kind, cf_id, reason=reason, before=_truth(o), after=after, edit=edit, turns=turns if turns else []), None
    edit["grounding_left_out"] = left_out
    shown = files.write(cf_id, window, record_name=src.info.name, source="audit", edit=edit)
    c["assets"] = {"image": shown["image"], "text": shown["text"]}
    c["provenance"]["params"]["counterfactual"] = {"kind": kind, "of": o["id"], "edit": edit, "seed": int(seed)}
    return _pair(o, kind, cf_id, before=_truth(o), after=after, edit=edit, turns=turns, files=_pair_files(o, shown)), c


def _pair_files(o: dict[str, Any], shown: dict[str, str]) -> dict[str, str]:
    return {"original_window": f"windows/{o['id']}.npz", "original_image": f"assets/{o['id']}.png", "original_text": f"assets/{o['id']}.txt", **shown}


def swap_counterfactual(src: ed.Source, pool: list[dict[str, Any]], graph: DiagnosisGraph, files: ProbeFiles, seed: int,
                        read_window: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The ``swap`` counterfactual: another window of the same diagnosis with the opposite label, asked in the original's words."""
    o = src.item
    cf_id = f"{o['id']}.cf-swap"
    opposite = [it for it in pool if it["diagnosis"] == o["diagnosis"] and bool(it["label"]) != bool(o["label"])]
    same = [it for it in opposite if it["record"]["path"] == o["record"]["path"]]
    choice = sorted(same or opposite, key=lambda it: it["id"])
    if not choice:
        return _pair(o, "swap", cf_id, reason="no_opposite_window_in_dataset", before=_truth(o)), None
    other = choice[int(src.rng("swap", seed).integers(len(choice)))]
    c = copy.deepcopy(other)
    c["id"] = cf_id
    keys, _ = align(c, o, graph, None, ground=False)
    turns = turn_pairs(o, c, keys, "swap")
    edit = {"op": "swap", "method": METHOD, "version": VERSION, "with": other["id"], "record": other["record"]["id"], "window": other["window"],
            "same_record": bool(same)}
    if not any(t["expect"] == "change" for t in turns):
        return _pair(o, "swap", cf_id, reason="no_answer_changes", before=_truth(o), after=_truth(other), edit=edit), None
    window, name = read_window(other)
    shown = files.write(cf_id, window, record_name=name, source="audit", edit=edit)
    c["assets"] = {"image": shown["image"], "text": shown["text"]}
    c["provenance"]["params"]["counterfactual"] = {"kind": "swap", "of": o["id"], "edit": edit, "seed": int(seed)}
    return _pair(o, "swap", cf_id, before=_truth(o), after=_truth(other), edit=edit, turns=turns, files=_pair_files(o, shown)), c


def original_item(src: ed.Source, files: ProbeFiles) -> dict[str, Any]:
    """The original as the probe set asks it: the same item, its window redrawn into the probe set by the same renderer."""
    o = copy.deepcopy(src.item)
    shown = files.write(o["id"], src.window, record_name=src.info.name, source="audit")
    o["assets"] = {"image": shown["image"], "text": shown["text"]}
    return o
