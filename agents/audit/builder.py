"""Build reasoning-audit items: ground-truth reasoning paths measured from the signal.

For each record and each diagnosis graph (``rubrics/diagnoses/*.yaml``):

1. choose windows (the graph's ``window_s``, 10 s by default): windows where the
   record's expert labels put the diagnosis, plus tiles spread over the record;
2. compute the window's features: beats and classes from reference annotations
   when the record has them (else the project's detectors), intervals and
   amplitudes from :func:`ecgtrace.tools.measure.measure_window` on the window;
3. evaluate the graph (:func:`ecgtrace.agents.audit.engine.evaluate`) to
   get the ground-truth path, and drop the window when that path hinges on
   one measurement within its tolerance of a threshold
   (:mod:`ecgtrace.agents.audit._doubt`, reason ``measurement_doubtful:...``);
4. where the record has expert labels for this diagnosis, keep the window only
   when the label agrees with the graph decision (ECG-Reasoning-Benchmark
   protocol); every dropped window is counted with its reason;
5. balance positives and negatives, write the questions
   (:mod:`ecgtrace.agents.audit._questions`; grounding is asked on absent
   findings too, as ERB's "To verify that ..." checks, wherever the signal
   settles the answer) as :class:`AuditItem` lines, and
   balance their surface over the set (:mod:`ecgtrace.agents.audit._surface`:
   the correct criterion is not the longest option, finding answers are half
   Yes, half No), so that the answers cannot be read off the question text;
   lead questions get thresholds and wordings whose answers are proper lead
   subsets where the signal allows, and all-lead answers are kept only at the
   rate of a uniform draw over lead subsets (:mod:`ecgtrace.agents.audit._leads`);
   measurement answers are spread evenly over the option positions, never
   offering a bin the finding rules out, and questions that could only answer
   at an over-used edge are dropped (``balance_measurement_position``,
   :func:`ecgtrace.agents.audit._questions.balance_measurement`).

Steps 1-5 per record are here (:func:`build_record`); the dataset over many
records, balanced again over the final set and written with its assets, is
:mod:`ecgtrace.agents.audit.dataset`. Deterministic: the same records, graphs
and seed give a byte-identical ``audit.jsonl`` (assets included).
"""

from __future__ import annotations

import os
import re
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ecgtrace.agents.audit._features import FEATURES_VERSION, BeatTable, WindowFeatures, window_features
from ecgtrace.agents.audit._features_leads import unavailable_because
from ecgtrace.agents.audit._labels import record_labels
from ecgtrace.agents.audit._leads import balance_leads
from ecgtrace.agents.audit._questions import balance_measurement, build_loops
from ecgtrace.agents.audit._surface import balance_surface
from ecgtrace.agents.audit._doubt import DOUBT_VERSION, find_doubt
from ecgtrace.agents.audit.engine import ENGINE_VERSION, MissingFeature, NotApplicable, evaluate
from ecgtrace.contracts.audit import YES_NO, AuditItem
from ecgtrace.contracts.common import RecordRef
from ecgtrace.errors import EcgTraceError
from ecgtrace.rubrics.diagnosis_schema import DiagnosisGraph, load_diagnoses
from ecgtrace.tools.records import RecordInfo, open_record, read_window

BUILDER_VERSION = "6"  # 6: windows whose path hinges on a measurement within its tolerance of a threshold are dropped
METHOD = "ecgtrace.agents.audit_builder"
KNOWN_DBS = ("mitdb", "ltafdb", "qtdb", "ludb", "ptbxl", "cinc2021_12lead", "vfdb", "cpsc2021", "svdb", "nsr2db")


@dataclass
class RecordBuild:
    """Items of one record, with why windows were dropped and how labels agreed.

    ``drops[diagnosis][reason]`` counts dropped windows. ``agreement[diagnosis]``
    counts windows with an expert label: ``checked``, ``agreed``, and the
    same split by expert label (``expert_yes``, ``expert_yes_agreed``,
    ``expert_no``, ``expert_no_agreed``); windows dropped as measurement-doubtful
    are not checked but counted apart by expert label (``doubtful_expert_yes``,
    ``doubtful_expert_yes_agreed`` ...: would the graph have agreed).
    """

    items: list[dict[str, Any]] = field(default_factory=list)
    drops: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    agreement: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    disagreements: list[dict[str, Any]] = field(default_factory=list)
    label_kind: str = "none"


def _rng(seed: int, *parts: str) -> np.random.Generator:
    return np.random.default_rng([int(seed), zlib.crc32(":".join(parts).encode("utf-8"))])


def _db_name(info: RecordInfo, synthetic: bool) -> str:
    if synthetic:
        return "synthetic"
    for parent in Path(info.path).parents:
        if parent.name in KNOWN_DBS:
            return parent.name
    return Path(info.path).parent.name or "local"


def _safe_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def beat_table(info: RecordInfo, annotation: str | None, cache_dir: Path | None) -> tuple[BeatTable, Any]:
    """Reference beats (``<record>.<annotation>``, default ``atr`` when present), else detected ones."""
    from ecgtrace.tools.reference_check import checked_reference

    extension = annotation or "atr"
    if annotation != "none" and Path(f"{info.path}.{extension}").is_file():
        ref = checked_reference(info, extension)  # an empty, foreign or corrupt file never becomes ground truth
        return BeatTable(ref.beat_samples, ref.beat_classes, ref.beat_symbols, ref.provenance), ref
    if annotation not in (None, "none"):
        raise EcgTraceError(f"{info.path}.{annotation}: annotation file not found")
    from ecgtrace.tools.annotate import annotate_record

    try:  # cache: ``cache_dir``, else annotate's default store in the user cache, shared with `ecgtrace annotate`
        ann = annotate_record(info.path, cache_dir=cache_dir, workers=1)
    except (EcgTraceError, ImportError, OSError) as exc:  # no usable beat classifier: R peaks only, classes unknown
        from ecgtrace.tools.beats import detect_beats

        beats = detect_beats(info, workers=1)
        classes = np.full(beats.samples.size, "N", dtype="<U1")
        why = f"unknown ({type(exc).__name__}: {str(exc)[:120]})"
        prov = {**beats.provenance, "params": {**beats.provenance.get("params", {}), "classes": why}}
        return BeatTable(beats.samples, classes, None, prov, classes_known=False), None
    return BeatTable(np.asarray(ann.beat_samples), np.asarray(ann.beat_classes), None, dict(ann.provenance)), None


def _applicable(graph: DiagnosisGraph, info: RecordInfo) -> str | None:
    leads = {lead.strip().upper() for lead in info.usable_leads}
    if len(leads) < graph.requires.min_leads:
        return f"not_applicable:needs_{graph.requires.min_leads}_leads"
    missing = [lead for lead in graph.requires.leads if lead.strip().upper() not in leads]
    return f"not_applicable:needs_lead_{missing[0]}" if missing else None


def build_record(
    record_path: str | os.PathLike[str],
    *,
    seed: int = 0,
    annotation: str | None = None,
    max_per_diagnosis: int = 4,
    graphs: dict[str, DiagnosisGraph] | None = None,
    diagnoses: list[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> RecordBuild:
    """Items (without assets) of one record; see :func:`build_audit_items`."""
    info = open_record(record_path)
    table, ref = beat_table(info, annotation, Path(cache_dir) if cache_dir else None)
    labels = record_labels(record_path, info, ref)
    graphs = graphs if graphs is not None else load_diagnoses()
    wanted = [g for gid, g in sorted(graphs.items()) if diagnoses is None or gid in diagnoses]
    out = RecordBuild(label_kind=labels.kind)
    cache: dict[tuple[float, float], WindowFeatures | str] = {}
    duration = info.duration_s
    for graph in wanted:
        reason = _applicable(graph, info)
        if reason:
            out.drops[graph.id][reason] += 1
            continue
        rng = _rng(seed, info.name, graph.id)
        width = min(graph.window_s, duration)
        mapped = labels.mapped(graph)
        starts = labels.positive_windows(graph, width, rng, max_per_diagnosis) if mapped else []
        tiles = [round(k * width, 2) for k in range(int(duration // width))]
        starts += [tiles[int(i)] for i in rng.permutation(len(tiles))[: 4 * max_per_diagnosis]]
        kept = {True: 0, False: 0}
        seen: set[float] = set()
        for t0 in starts:
            if t0 in seen or t0 + width > duration + 1e-9:
                continue
            seen.add(t0)
            if kept[True] >= max_per_diagnosis and kept[False] >= max_per_diagnosis:
                break
            item = _candidate(graph, info, table, labels, mapped, t0, t0 + width, kept, max_per_diagnosis, cache, out, seed, graphs)
            if item is not None:
                out.items.append(item)
        _balance(out, graph.id, rng)
    balance_surface(out.items, graphs, _rng(seed, info.name, "surface"))
    balance_leads(out.items, graphs, _rng(seed, info.name, "leads"))
    balance_measurement(out.items, _rng(seed, info.name, "measurement"))
    return out


def _candidate(graph, info, table, labels, mapped, t0, t1, kept, limit, cache, out: RecordBuild, seed, graphs=None) -> dict[str, Any] | None:
    drops = out.drops[graph.id]
    if any(b > t0 and a < t1 for a, b in labels.noise_spans_s):
        drops["noise"] += 1
        return None
    expert, why = labels.label_reason(graph, t0, t1) if mapped else (None, "")
    if mapped and expert is None:
        drops[f"label_ambiguous:{why}"] += 1
        return None
    if mapped and kept[bool(expert)] >= limit:
        return None  # quota already full for this label: not examined
    key = (round(t0, 3), round(t1, 3))
    if key not in cache:
        window = read_window(info, t0, t1)
        wf = window_features(window, table)
        cache[key] = wf if wf.features.get("n_beats", 0) >= 3 else "too_few_beats"
    wf = cache[key]
    if isinstance(wf, str):
        drops[wf] += 1
        return None
    try:
        path = evaluate(graph, wf.features, graphs)
    except NotApplicable as exc:  # e.g. ischaemia's ST criteria beside complete LBBB: the graph says nothing there
        drops[exc.reason] += 1
        return None
    except MissingFeature as exc:
        drops[f"feature_unavailable:{exc.feature}" + unavailable_because(wf.features, exc.lead)] += 1
        return None
    side = "expert_yes" if expert else "expert_no"
    if (doubt := find_doubt(graph, wf.features, graphs)) is not None:  # decided before, and whatever, the expert says
        drops[doubt.reason] += 1
        if mapped:  # counted apart, so that no agreement is bought with an unseen drop
            out.agreement[graph.id][f"doubtful_{side}"] += 1
            out.agreement[graph.id][f"doubtful_{side}_agreed"] += int(path.decision == expert)
        return None
    if mapped:
        stats = out.agreement[graph.id]
        stats["checked"] += 1
        stats[side] += 1
        if path.decision != expert:
            drops[f"label_disagrees:{side}"] += 1
            out.disagreements.append({"record": info.name, "diagnosis": graph.id, "t0_s": round(t0, 3), "expert": expert, "path": path.to_json()})
            return None
        stats["agreed"] += 1
        stats[f"{side}_agreed"] += 1
    if kept[path.decision] >= limit:
        drops["balance"] += 1
        return None
    kept[path.decision] += 1
    return _assemble(graph, info, labels, mapped, expert, wf, path, t0, t1, seed, table.provenance)


def _assemble(graph, info, labels, mapped, expert, wf: WindowFeatures, path, t0, t1, seed, beats_provenance) -> dict[str, Any]:
    db = _db_name(info, labels.kind == "synthetic")
    item_id = _safe_id(f"{db}-{info.name}-{graph.id}-{int(round(t0 * 1000)):09d}")
    qrng = _rng(seed, item_id, "questions")  # own stream: question wording never shifts which windows are chosen
    loops, skipped, lead_entries, measure_entries = build_loops(graph, path, wf.features, wf.beats, list(info.usable_leads), t0, t1, qrng)
    source = labels.source if mapped else "computed"
    item = {
        "id": item_id,
        "record": RecordRef(db=db, id=info.name, path=str(info.path), fs_hz=float(info.fs_hz), leads=list(info.leads), duration_s=round(float(info.duration_s), 3)).to_json(),
        "window": {"t0_s": round(float(t0), 3), "t1_s": round(float(t1), 3)},
        "diagnosis": graph.id,
        "label": bool(path.decision),
        "path_id": path.path_id,
        "initial": {"question": graph.questions[int(qrng.integers(len(graph.questions)))], "options": list(YES_NO), "answer": YES_NO[0] if path.decision else YES_NO[1]},
        "loops": loops,
        "assets": {"image": None, "text": None},
        "provenance": {
            "source": source,
            "method": METHOD,
            "version": BUILDER_VERSION,
            "params": {
                "seed": int(seed),
                "graph": {"id": graph.id, "version": graph.version, "set": graph.set},
                "engine_version": ENGINE_VERSION,
                "doubt_version": DOUBT_VERSION,
                "features_version": FEATURES_VERSION,
                "label": {"source": source, "method": labels.method if mapped else "graph decision on measured features", "expert": expert},
                "beats": beats_provenance,
                "measurement": wf.measure_provenance,
                "path": path.to_json(),
                "features": {k: v for k, v in wf.features.items() if v is not None},
                "grounding_skipped": skipped,
                "lead_grounding": lead_entries,
                "measurement_grounding": measure_entries,
                "times": "wave options are seconds from the recording start (the assets' time axis)",
            },
        },
    }
    AuditItem.model_validate(item)  # a malformed item is a bug here, not the user's
    return item


def _balance(out: RecordBuild, diagnosis: str, rng: np.random.Generator) -> None:
    """Keep as many negatives as positives (at least one negative when there is no positive)."""
    mine = [k for k, item in enumerate(out.items) if item["diagnosis"] == diagnosis]
    pos = [k for k in mine if out.items[k]["label"]]
    neg = [k for k in mine if not out.items[k]["label"]]
    for group, other in ((pos, neg), (neg, pos)):
        allowed = max(len(other), 1)
        if len(group) > allowed:
            drop = set(group[int(i)] for i in rng.permutation(len(group))[allowed:])
            out.drops[diagnosis]["balance"] += len(drop)
            out.items[:] = [item for k, item in enumerate(out.items) if k not in drop]
            return
