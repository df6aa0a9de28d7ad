"""Counterfactuals of QA items: presence, counting and timing of beat events, confirmed by the same event logic.

The QA answers come from rhythm events found in the record's beat stream
(:func:`ecgtrace.agents.holter.annotator.beat_stream_events`, the function
the dataset's annotator uses). A counterfactual edits the window's signal
(:mod:`ecgtrace.tools.counterfactual`), the beat stream with it, and finds the
events again in the stream around the window (:data:`SEGMENT_S` either side):

* ``remove``: presence (Yes) - every event of the asked kind in the window
  taken out (its ectopic beats removed, a pause filled), the answer becomes No;
  counting - the last event in the window taken out, the count drops by one
  (kept only when the new count is among the original's options);
* ``move``: timing of single-beat events (PVC, PAC) - one event moved to a
  normal beat's place; the options are drawn again around the new onsets with
  the dataset's own distractor rule, the answer at the original's position;
* ``swap``: presence - another window of the dataset with the same kind and
  the opposite answer;
* ``control``: one normal beat clear of ectopy replaced by the window's median
  normal beat; the answer must not change.

The original must come out of the recomputation again, and the pipeline must
see each edit as intended (:func:`ecgtrace.agents.probe._signal.confirm`).
"""

from __future__ import annotations

import copy
import random
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from ecgtrace.agents.probe._files import ProbeFiles
from ecgtrace.agents.probe._signal import SYMBOL_OF_CLASS, confirm, context_window, crop, item_bounds
from ecgtrace.contracts.common import provenance
from ecgtrace.contracts.probe import ProbePair
from ecgtrace.contracts.qa import QAItem
from ecgtrace.contracts.vocabulary import COVERING_KINDS
from ecgtrace.tools import counterfactual as cf

METHOD = "ecgtrace.agents.probe.qa"
VERSION = "1"
QA_TASKS = ("closed_presence", "closed_count", "closed_timing")
#: The class of the beats each beat event is made of (what ``remove`` takes out).
EVENT_CLASS = {"pvc": "V", "pac": "S", "v_couplet": "V", "s_couplet": "S", "vt": "V", "svt": "S", "v_bigeminy": "V", "v_trigeminy": "V"}
MOVABLE = ("pvc", "pac")
#: Events are found again in the beat stream this far (s) either side of the window.
SEGMENT_S = 60.0


class Skip(Exception):
    """No counterfactual of this kind for this item (reason in args[0])."""


def item_kind(item: dict[str, Any]) -> str | None:
    return item.get("finding") or ((item.get("provenance") or {}).get("params") or {}).get("kind")


def qa_group(item: dict[str, Any]) -> str | None:
    """``task:kind`` (presence: ``task:kind:answer``) of a QA item a probe can edit (closed presence, count or timing in a window), else None."""
    if item.get("task") not in QA_TASKS or not item.get("window") or not item.get("record") or not item.get("options"):
        return None
    kind = item_kind(item)
    if not kind:
        return None
    return f"{item['task']}:{kind}" + (f":{item['answer']}" if item["task"] == "closed_presence" else "")


class Stream:
    """A record's beats (reference, else detected), symbols and noise spans, and the events found in them."""

    def __init__(self, info: Any, table: Any, noise_ms: list[list[int]], ref: Any = None) -> None:
        self.info, self.table, self.noise_ms, self.ref = info, table, noise_ms, ref
        self.has_notes = bool(ref is not None and ref.rhythm_intervals)
        self.samples = np.asarray(table.samples, dtype=np.int64)
        self.classes = np.asarray(table.classes).astype(str)
        self.symbols = None if table.symbols is None else np.asarray(table.symbols).astype(str)

    def answer(self, item: dict[str, Any], samples: np.ndarray | None = None, classes: np.ndarray | None = None,
               symbols: np.ndarray | None = None) -> tuple[str, list[dict[str, Any]]]:
        """The item's answer from the events of its kind in its window (of the given stream, default the record's)."""
        from ecgtrace.agents.holter.annotator import beat_stream_events, rhythm_note_events
        from ecgtrace.agents.holter.distractors import format_ms_list

        s = self.samples if samples is None else samples
        c = self.classes if classes is None else classes
        y = self.symbols if symbols is None else symbols
        fs = self.info.fs_hz
        t0, t1 = int(round(item["window"]["t0_s"] * 1000)), int(round(item["window"]["t1_s"] * 1000))
        keep = (s >= (t0 / 1000.0 - SEGMENT_S) * fs) & (s < (t1 / 1000.0 + SEGMENT_S) * fs)
        extra = {"beat_symbols": y[keep]} if y is not None else None
        events = beat_stream_events(s[keep], c[keep], fs, self.info.n_samples, self.noise_ms, has_rhythm_notes=self.has_notes, extra=extra)
        if self.has_notes:  # episodes only the rhythm notes reveal (AF, first-degree AV block, sinus brady/tachycardia), as the annotator adds them
            events += rhythm_note_events(s[keep], self.ref.rhythm_intervals, fs)
        kind = item_kind(item)
        inside = [e for e in events if e["kind"] == kind and e["onset_ms"] >= t0 and e["offset_ms"] < t1]
        covering = [e for e in events if e["kind"] == kind and kind in COVERING_KINDS and e["offset_ms"] >= t0 and e["onset_ms"] < t1]
        if item["task"] == "closed_presence":
            return ("Yes" if inside or covering else "No"), inside or covering
        if item["task"] == "closed_count":
            return str(len(inside)), inside
        return format_ms_list(sorted(e["onset_ms"] for e in inside)), inside


def _rng(item: dict[str, Any], kind: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), zlib.crc32(f"{item['id']}:{kind}".encode())])


def _pair(o: dict[str, Any], kind: str, **fields: Any) -> dict[str, Any]:
    status = "dropped" if fields.get("reason") else "kept"
    prov = provenance("computed", METHOD, VERSION, {"counterfactual": cf.METHOD, "counterfactual_version": cf.COUNTERFACTUAL_VERSION})
    return ProbePair(id=f"{o['id']}.cf-{kind}", kind=kind, source="qa", original=o["id"], status=status, group=o["task"], finding=item_kind(o),  # type: ignore[arg-type]
                     provenance=prov, before={"answer": o["answer"]}, **fields).to_json()


def _edit(o: dict[str, Any], kind: str, stream: Stream, ctx: Any, bounds: tuple[int, int], seed: int) -> tuple[cf.Edited, list[int]]:
    """The edit of one QA item (module docstring) on its context; returns it and the beats it is about (context indices)."""
    k = np.flatnonzero((stream.samples >= ctx.sampfrom) & (stream.samples < ctx.sampto))
    samples, classes = stream.samples[k], stream.classes[k]
    inside = [i for i, s in enumerate(samples.tolist()) if bounds[0] <= s < bounds[1]]
    ev_kind, task = item_kind(o), o["task"]
    _, events = stream.answer(o)
    s = int(_rng(o, kind, seed).integers(2**31))
    if kind == "control":
        ok = [i for i in inside[2:-2] if all(classes[j] == "N" for j in range(i - 2, i + 3))]
        if not ok:
            raise Skip("no_normal_beat_clear_of_ectopy")
        i = ok[int(_rng(o, "control-beat", seed).integers(len(ok)))]
        return cf.replace_beats(ctx, samples, classes, [i], seed=s), [i]
    if kind == "remove" and task in ("closed_presence", "closed_count") and o["answer"] not in ("No", "0"):
        chosen = events if task == "closed_presence" else events[-1:]
        if ev_kind == "pause":
            if len(chosen) != 1:
                raise Skip("one_pause_at_a_time")
            opener = int(np.argmin(np.abs(samples - chosen[0]["onset_ms"] * stream.info.fs_hz / 1000.0)))
            return cf.fill_pause(ctx, samples, classes, opener, seed=s), [opener]
        if ev_kind not in EVENT_CLASS:
            raise Skip(f"not_applicable:no_remove_edit:{ev_kind}")
        lo = [e["onset_ms"] * stream.info.fs_hz / 1000.0 - 1 for e in chosen]
        hi = [e["offset_ms"] * stream.info.fs_hz / 1000.0 + 1 for e in chosen]
        targets = [i for i in inside if classes[i] == EVENT_CLASS[ev_kind] and any(a <= samples[i] <= b for a, b in zip(lo, hi))]
        if not targets:
            raise Skip("event_beats_not_found")
        return cf.remove_beats(ctx, samples, classes, targets, seed=s), targets
    if kind == "move" and task == "closed_timing" and ev_kind in MOVABLE and events:
        src = int(np.argmin(np.abs(samples - events[0]["onset_ms"] * stream.info.fs_hz / 1000.0)))
        dest = [i for i in inside[1:-1] if abs(i - src) >= 3 and classes[i - 1] == classes[i] == classes[i + 1] == "N"]
        if not dest:
            raise Skip("no_normal_beat_to_move_to")
        d = dest[int(_rng(o, "move-dest", seed).integers(len(dest)))]
        edited = cf.move_beat(ctx, samples, classes, src, d, seed=s)
        return edited, [src, d]
    raise Skip(f"not_applicable:no_{kind}_edit:{task}:{ev_kind}")


def _stream_after(stream: Stream, ctx: Any, edited: cf.Edited) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    k = np.flatnonzero((stream.samples >= ctx.sampfrom) & (stream.samples < ctx.sampto))
    a, b = k[0], k[-1] + 1
    samples = np.concatenate([stream.samples[:a], edited.beat_samples, stream.samples[b:]])
    classes = np.concatenate([stream.classes[:a], edited.beat_classes.astype(str), stream.classes[b:]])
    symbols = None
    if stream.symbols is not None:
        mid = np.array([stream.symbols[k[o]] if o >= 0 else SYMBOL_OF_CLASS.get(c, c) for o, c in zip(edited.origin.tolist(), edited.beat_classes.tolist())])
        symbols = np.concatenate([stream.symbols[:a], mid.astype(stream.symbols.dtype), stream.symbols[b:]])
    return samples, classes, symbols


def _timing_options(o: dict[str, Any], answer: str, events: list[dict[str, Any]], stream_after: tuple, stream: Stream, seed: int) -> list[str] | None:
    """The original's option layout around the moved onsets: the dataset's distractor rule, the answer where the original had it."""
    from ecgtrace.agents.holter.distractors import format_ms_list, timing_distractors

    onsets = sorted(e["onset_ms"] for e in events)
    fs = stream.info.fs_hz
    t0, t1 = o["window"]["t0_s"] * 1000.0, o["window"]["t1_s"] * 1000.0
    beats_ms = [int(round(s * 1000.0 / fs)) for s in stream_after[0].tolist() if t0 <= s * 1000.0 / fs < t1]
    tol = float((o.get("provenance") or {}).get("params", {}).get("tolerance_ms") or 150)
    rng = random.Random(f"{seed}:{o['id']}:move-options")
    sets = timing_distractors(onsets, event_ms=onsets, filler_ms=beats_ms, rng=rng, tol_ms=tol, n=len(o["options"]) - 1)
    if len(sets) != len(o["options"]) - 1:
        return None
    options = [format_ms_list(v) for v in sets]
    options.insert(o["options"].index(o["answer"]), answer)
    return options if len(set(options)) == len(options) else None


def counterfactual(o: dict[str, Any], kind: str, stream: Stream, pool: list[dict[str, Any]], files: ProbeFiles, seed: int,
                   originals_base: Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``(pair, item or None)`` for one QA item and kind."""
    if kind == "swap":
        return _swap(o, pool, stream, files, seed)
    info = stream.info
    bounds = item_bounds(info, o["window"])
    ctx = context_window(info, o["window"]["t0_s"], o["window"]["t1_s"])
    try:
        edited, evidence = _edit(o, kind, stream, ctx, bounds, seed)
        seam = cf.seam_ratio(ctx, edited)
        if seam > cf.MAX_SEAM_SIGMAS:
            raise Skip(f"seam_above_noise:{seam:.1f}_sigmas")
        if edited.valid_to < bounds[1]:
            raise Skip("edit_pulled_filler_into_window")
    except (Skip, cf.CounterfactualError) as exc:
        return _pair(o, kind, reason=str(exc)), None
    edit = dict(edited.record)
    k = np.flatnonzero((stream.samples >= ctx.sampfrom) & (stream.samples < ctx.sampto))
    spans = [(int(a * info.fs_hz / 1000), int(b * info.fs_hz / 1000)) for a, b in edit["spans_ms"]]
    reason, details = confirm(ctx, edited.window, (stream.samples[k], stream.classes[k]), (edited.beat_samples, edited.beat_classes), edited.origin,
                              evidence, spans, bounds)
    edit["pipeline"] = details
    if reason:
        return _pair(o, kind, reason=reason, edit=edit), None
    after_stream = _stream_after(stream, ctx, edited)
    answer, events = stream.answer(o, *after_stream)
    c = copy.deepcopy(o)
    c["id"] = f"{o['id']}.cf-{kind}"
    if kind == "move":
        options = _timing_options(o, answer, events, after_stream, stream, seed)
        if options is None or answer == o["answer"]:
            return _pair(o, kind, reason="move_not_localized" if answer == o["answer"] else "timing_options_not_redrawable", edit=edit,
                         after={"answer": answer}), None
        c["options"] = options
    elif answer not in o["options"]:
        return _pair(o, kind, reason=f"new_answer_not_among_options:{answer}", edit=edit, after={"answer": answer}), None
    expect = "same" if answer == o["answer"] else ("follow" if kind == "move" else "change")
    if (kind == "control") != (expect == "same"):
        return _pair(o, kind, reason="control_changed_answer" if kind == "control" else "ground_truth_unchanged", edit=edit, after={"answer": answer}), None
    c["answer"] = answer
    c["evidence"] = _evidence(o, events, bounds, info.fs_hz)
    window = crop(edited.window, *bounds)
    return _finish(o, c, kind, window, edit, expect, files, seed, info.name)


def _evidence(o: dict[str, Any], events: list[dict[str, Any]], bounds: tuple[int, int], fs: float) -> list[dict[str, Any]]:
    lead = (o.get("evidence") or [{}])[0].get("lead")
    if events:
        return [{"lead": lead, "t0_ms": int(e["onset_ms"]), "t1_ms": int(e["offset_ms"]), "beats": []} for e in events]
    return [{"lead": lead, "t0_ms": int(round(bounds[0] * 1000 / fs)), "t1_ms": int(round(bounds[1] * 1000 / fs)), "beats": []}]


def _finish(o: dict[str, Any], c: dict[str, Any], kind: str, window: Any, edit: dict[str, Any], expect: str, files: ProbeFiles, seed: int,
            record_name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    from ecgtrace.agents.exam.qa_scoring import family

    shown = files.write(c["id"], window, record_name=o["record"]["id"], source="qa", edit=edit)
    shown_item(c, shown, files)
    c["provenance"] = {**o["provenance"], "params": {**o["provenance"]["params"], "counterfactual": {"kind": kind, "of": o["id"], "edit": edit,
                                                                                                    "seed": int(seed)}}}
    QAItem.model_validate(c)
    turn = {"stage": o["task"], "kind": family(o), "original": 0, "counterfactual": 0, "expect": expect, "original_answer": o["answer"],
            "counterfactual_answer": c["answer"]}
    files_rel = {"original_window": f"windows/{o['id']}.npz", "original_image": f"assets/{o['id']}.png", "original_text": f"assets/{o['id']}.txt", **shown}
    return _pair(o, kind, edit=edit, after={"answer": c["answer"]}, turns=[turn], files=files_rel), c


def shown_item(item: dict[str, Any], shown: dict[str, str], files: ProbeFiles) -> None:
    """Point an item at its probe-set assets and rebuild its stored messages from them (the dataset writer's layout)."""
    from ecgtrace.agents.exam.messages import dataset_messages

    item["modalities"] = {"text": shown["text"], "image": [shown["image"]], "video": None}
    item["messages"] = dataset_messages(item, files.root)


def _swap(o: dict[str, Any], pool: list[dict[str, Any]], stream: Stream, files: ProbeFiles, seed: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    if o["task"] != "closed_presence":
        return _pair(o, "swap", reason=f"not_applicable:no_swap_edit:{o['task']}"), None
    opposite = sorted((it for it in pool if it["task"] == o["task"] and item_kind(it) == item_kind(o) and it["answer"] != o["answer"]
                       and it.get("record") and it.get("window")), key=lambda it: (it["record"]["path"] != o["record"]["path"], it["id"]))
    same = [it for it in opposite if it["record"]["path"] == o["record"]["path"]]
    choice = same or opposite
    if not choice:
        return _pair(o, "swap", reason="no_opposite_window_in_dataset"), None
    other = choice[int(_rng(o, "swap", seed).integers(len(choice)))]
    c = copy.deepcopy(other)
    c["id"] = f"{o['id']}.cf-swap"
    edit = {"op": "swap", "method": METHOD, "version": VERSION, "with": other["id"], "record": other["record"]["id"], "window": other["window"],
            "same_record": bool(same)}
    from ecgtrace.tools.record_source import record_info
    from ecgtrace.tools.records import read_samples

    info = record_info(other["record"]["path"])
    window = read_samples(info, *item_bounds(info, other["window"]))
    return _finish(o, c, "swap", window, edit, "change", files, seed, info.name)


def original_item(o: dict[str, Any], stream: Stream, files: ProbeFiles) -> dict[str, Any]:
    """The original, its window redrawn into the probe set by the QA writer's renderer."""
    from ecgtrace.tools.records import read_samples

    out = copy.deepcopy(o)
    window = read_samples(stream.info, *item_bounds(stream.info, o["window"]))
    shown_item(out, files.write(o["id"], window, record_name=o["record"]["id"], source="qa"), files)
    return out


def probe_qa(chosen: list[dict[str, Any]], pool: list[dict[str, Any]], kinds: list[str], out: Path, seed: int, progress: Any = None, *,
             base_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(pairs, items)`` of the QA half of a probe set (see :func:`ecgtrace.agents.probe.audit_set.probe_audit`)."""
    from ecgtrace.agents.audit.builder import beat_table
    from ecgtrace.agents.holter.annotator import reference_noise_spans
    from ecgtrace.errors import EcgTraceError
    from ecgtrace.tools.records import open_record

    files = ProbeFiles(out)
    streams: dict[str, Stream | str] = {}
    pairs: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    for n, o in enumerate(chosen):
        if progress:
            progress(f"qa {n + 1}/{len(chosen)}: {o['id']}")
        path = o["record"]["path"]
        if path not in streams:
            try:
                info = open_record(path)
                table, ref = beat_table(info, None, out / "cache")
                noise = reference_noise_spans(Path(info.path), info.fs_hz)[0] if ref is not None else []
                streams[path] = Stream(info, table, noise, ref)
            except EcgTraceError as exc:
                streams[path] = f"record_unreadable:{str(exc)[:80]}"
        stream = streams[path]
        if isinstance(stream, str) or stream.answer(o)[0] != o["answer"]:
            why = stream if isinstance(stream, str) else "original_not_reproduced"
            pairs += [_pair(o, kind, reason=why) for kind in kinds]
            continue
        kept = []
        for kind in kinds:
            pair, c = counterfactual(o, kind, stream, pool, files, seed, base_dir)
            pairs.append(pair)
            if c is not None:
                kept.append(c)
        if kept:
            items += [original_item(o, stream, files), *kept]
    return pairs, items
