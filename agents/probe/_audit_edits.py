"""Which edit each audit item gets, by kind and diagnosis, and making it on the item's window.

* ``remove`` (the evidence taken out; the diagnosis should flip):

  ========================================  =====================================================
  diagnosis (label)                          edit
  ========================================  =====================================================
  pvc, vt, ventricular bigeminy/trigeminy   every V beat of the window removed, sinus rhythm restored
  pac, svt                                  every S beat removed, sinus rhythm restored
  sinus pause                               the missing beat(s) put into the long RR
  first-degree AV block                     every P wave moved to a PR of 160 ms
  af (present)                              P waves restored (the record's own sinus P wave)
  af (absent, irregular RR)                 P waves removed
  ST elevation / depression / ischaemia     the ST segment brought back to the PR baseline
  LBBB / RBBB                               every beat replaced by a narrow beat of the same record
  ========================================  =====================================================

* ``move``: the only ectopic beat of a PVC or PAC window moved to the place of
  a normal beat offered as a decoy of its wave questions (the places most of
  them offer first; a question that does not offer the new place is left out
  of the pair, with why). A PAC's two timing shifts must cancel, and the
  options between its two places slide with the signal (:func:`shift_harm`);
  a place whose seam shows above the noise is passed over for the next;
* ``control``: one normal beat, away from any ectopic beat, replaced by the
  window's median normal beat.

Every edit works on the item's window with context (:func:`ecgtrace.agents.probe._signal.context_window`)
and is seeded by the item id. An item that gets no edit of a kind says why
(:class:`Skip`).
"""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ecgtrace.agents.audit._features import BeatTable, WindowFeatures, window_features
from ecgtrace.agents.probe._signal import SYMBOL_OF_CLASS, beat_marks, context_window, crop, item_bounds
from ecgtrace.tools import counterfactual as cf
from ecgtrace.tools.records import RecordInfo, SignalWindow, read_samples

ECTOPIC_CLASS = {"pvc": "V", "vt": "V", "ventricular_bigeminy": "V", "ventricular_trigeminy": "V", "pac": "S", "svt": "S"}
MOVABLE = {"pvc": "V", "pac": "S"}
ST_DIAGNOSES = ("st_elevation", "st_depression", "anterior_ischemia", "inferior_ischemia", "lateral_ischemia")
WIDE_DIAGNOSES = ("lbbb", "rbbb", "lbbb_beats", "rbbb_beats")
#: PR (ms) a first-degree AV block counterfactual is given.
NORMAL_PR_MS = 160.0
#: A window lends its P wave (AF) or its narrow beat (bundle branch block) to another when it has these.
SINUS_P_PCT = 80.0
NARROW_QRS_MS = 110.0


class Skip(Exception):
    """This item gets no counterfactual of this kind (reason in args[0])."""


@dataclass
class Source:
    """What is known of one audit item: its record, beat table, window, context and features."""

    item: dict[str, Any]
    info: RecordInfo
    table: BeatTable
    bounds: tuple[int, int]
    window: SignalWindow
    ctx: SignalWindow
    features: WindowFeatures

    @property
    def ctx_index(self) -> np.ndarray:
        s = np.asarray(self.table.samples, dtype=np.int64)
        return np.flatnonzero((s >= self.ctx.sampfrom) & (s < self.ctx.sampto))

    def ctx_beats(self) -> tuple[np.ndarray, np.ndarray]:
        k = self.ctx_index
        return np.asarray(self.table.samples, dtype=np.int64)[k], np.asarray(self.table.classes).astype(str)[k]

    def in_window(self) -> list[int]:
        """Indices (into :meth:`ctx_beats`) of the beats inside the item's window."""
        s, _ = self.ctx_beats()
        return [k for k, x in enumerate(s.tolist()) if self.bounds[0] <= x < self.bounds[1]]

    def rng(self, kind: str, seed: int) -> np.random.Generator:
        return np.random.default_rng([int(seed), zlib.crc32(f"{self.item['id']}:{kind}".encode())])


def source_of(item: dict[str, Any], info: RecordInfo, table: BeatTable) -> Source:
    from ecgtrace.tools.records import read_window

    a, b = item_bounds(info, item["window"])
    window = read_window(info, item["window"]["t0_s"], item["window"]["t1_s"])
    return Source(item=item, info=info, table=table, bounds=(a, b), window=window, ctx=context_window(info, item["window"]["t0_s"], item["window"]["t1_s"]),
                  features=window_features(window, table))


@dataclass
class Draft:
    """An edit made on a source's context: the tools' result, and what it was meant to do."""

    kind: str
    edited: cf.Edited
    evidence: list[int]  # indices into the source's ctx beats the edit is about
    meant: str
    may_become: dict[str, tuple[str, ...]] | None = None  # class changes the edit implies (see _signal.confirm)

    def reclassify(self, classes: dict[int, str]) -> None:
        """Adopt the pipeline's classes for the beats whose class the edit changed (indices after the edit)."""
        if classes:
            new = self.edited.beat_classes.copy()
            for i, cls in classes.items():
                new[int(i)] = cls
            self.edited = dataclasses.replace(self.edited, beat_classes=new)


def _seed(src: Source, kind: str, seed: int) -> int:
    return int(src.rng(kind, seed).integers(2**31))


def remove(src: Source, lenders: Lenders, seed: int) -> Draft:
    """The ``remove`` edit of one item (table in the module docstring); ``lenders`` give P waves and narrow beats."""
    dx, label = src.item["diagnosis"], bool(src.item["label"])
    samples, classes = src.ctx_beats()
    inside = src.in_window()
    s = _seed(src, "remove", seed)
    if dx in ECTOPIC_CLASS and label:
        targets = [k for k in inside if classes[k] == ECTOPIC_CLASS[dx]]
        if not targets:
            raise Skip(f"no_{ECTOPIC_CLASS[dx]}_beat_in_window")
        return Draft("remove", cf.remove_beats(src.ctx, samples, classes, targets, seed=s), targets, "ectopic beats removed")
    if dx == "sinus_pause" and label:
        opener = next((b for b in src.features.beats if b.get("opens_long_rr")), None)
        if opener is None:
            raise Skip("no_long_rr_marked")
        k = int(np.argmin(np.abs(samples - round(opener["r_s"] * src.info.fs_hz))))
        return Draft("remove", cf.fill_pause(src.ctx, samples, classes, k, seed=s), [k, k + 1], "pause filled")
    if dx == "first_degree_av_block" and label:
        m = beat_marks(src.ctx, samples)
        return Draft("remove", cf.shorten_pr(src.ctx, samples, classes, m["p_on"], m["p_off"], m["qrs_on"], target_pr_ms=NORMAL_PR_MS, seed=s), [],
                     f"PR shortened to {NORMAL_PR_MS:g} ms")
    if dx == "af" and label:
        return Draft("remove", cf.restore_p_waves(src.ctx, samples, classes, _sinus_p_wave(src, lenders), seed=s), [], "P waves restored",
                     may_become={"N": ("S",)})  # an early beat with a P wave is a premature atrial beat
    if dx == "af" and not label and (src.features.features.get("rr_irregularity_pct") or 0) > 10:
        m = beat_marks(src.ctx, samples)
        return Draft("remove", cf.remove_p_waves(src.ctx, samples, classes, m["p_on"], m["p_off"], seed=s), [], "P waves removed")
    if dx in ST_DIAGNOSES and label:
        m = beat_marks(src.ctx, samples)
        return Draft("remove", cf.flatten_st(src.ctx, samples, classes, m["qrs_on"], m["qrs_off"], seed=s), [], "ST segment brought to baseline")
    if dx in WIDE_DIAGNOSES and label:
        narrow = _narrow_beat(src, lenders)
        return Draft("remove", cf.replace_beats(src.ctx, samples, classes, inside, template=narrow, seed=s), [], "wide beats replaced by a narrow beat")
    raise Skip(f"not_applicable:no_remove_edit:{dx}:{'present' if label else 'absent'}")


@dataclass
class Lenders:
    """Other windows of the dataset, by the features the builder stored with them; opened (``make``) only when lent from."""

    pool: list[dict[str, Any]]
    make: Any  # item -> Source

    def lend(self, src: Source, wanted: Any, what: str) -> Source:
        same = sorted((it for it in self.pool if it["record"]["path"] == src.item["record"]["path"] and it["id"] != src.item["id"]
                       and wanted(it["provenance"]["params"].get("features") or {})), key=lambda it: it["id"])
        if not same:
            raise Skip(f"no_{what}_elsewhere_in_record")
        return self.make(same[0])


def _sinus_p_wave(src: Source, lenders: Lenders) -> Any:
    donor = lenders.lend(src, lambda f: (f.get("p_wave_present_pct") or 0) >= SINUS_P_PCT and (f.get("rr_irregularity_pct") or 0) < 10, "sinus_p_wave")
    samples, classes = donor.ctx_beats()
    m = beat_marks(donor.ctx, samples)
    return cf.p_wave_template(donor.ctx, samples, classes, m["qrs_on"])


def _narrow_beat(src: Source, lenders: Lenders) -> Any:
    donor = lenders.lend(src, lambda f: (f.get("qrs_ms") or 1e9) <= NARROW_QRS_MS, "narrow_beat")
    samples, classes = donor.ctx_beats()
    return cf.median_beat(donor.ctx, samples, classes)


def _wave_questions(item: dict[str, Any]) -> list[dict[str, Any]]:
    return [g for loop in item["loops"] for g in loop["grounding"] if g["kind"] == "wave"]


def move(src: Source, seed: int) -> Draft:
    """The ``move`` edit: the window's only ectopic beat to the place of a normal beat offered as a decoy."""
    from ecgtrace.agents.audit._questions import _beat_span
    from ecgtrace.agents.exam._visual_prior import option_range_s

    dx = src.item["diagnosis"]
    if dx not in MOVABLE or not src.item["label"]:
        raise Skip(f"not_applicable:no_move_edit:{dx}:{'present' if src.item['label'] else 'absent'}")
    samples, classes = src.ctx_beats()
    inside = src.in_window()
    questions = _wave_questions(src.item)
    if not questions:
        raise Skip("no_wave_question_to_localize")
    answer = option_range_s(questions[0]["answer"])
    fs = src.info.fs_hz
    facts = {int(round(b["r_s"] * fs)): b for b in src.features.beats}
    hit = [k for k in inside if answer and answer[0] <= samples[k] / fs <= answer[1]]
    if len(hit) != 1 or classes[hit[0]] != MOVABLE[dx]:
        raise Skip("wave_answer_is_not_one_ectopic_beat")
    s = hit[0]
    if not (0 < s < len(classes) - 1 and classes[s - 1] == classes[s + 1] == "N"):
        raise Skip("ectopic_beat_not_between_normal_beats")
    # a wave question about this beat follows it only where it offers the new place: prefer places every such question offers
    about = [[option_range_s(o) for o in g["options"]] for g in questions
             if (span := option_range_s(g["answer"])) and span[0] <= samples[s] / fs <= span[1]]
    offered: dict[int, int] = {}
    for k in inside:
        if abs(k - s) < 3 or classes[k] != "N" or k - 1 < 0 or k + 1 >= len(classes) or classes[k - 1] != "N" or classes[k + 1] != "N":
            continue
        beat = facts.get(int(samples[k]))
        if beat is None or beat["premature"]:
            continue
        a, b = _beat_span(beat)
        n = sum(any(sp and sp[0] <= (a + b) / 2 <= sp[1] for sp in spans) for spans in about)
        if n:
            offered[k] = n
    if not offered:
        raise Skip("no_decoy_beat_to_move_to")
    rng = src.rng("move-dest", seed)
    ranked = sorted(offered, key=lambda k: (-offered[k], float(rng.random())))
    spans = [sp for g in questions for o in g["options"] if (sp := option_range_s(o))]
    why = "move_needs_a_timing_shift"
    for dest in ranked:
        try:
            edited = cf.move_beat(src.ctx, samples, classes, s, dest, seed=_seed(src, "move", seed))
        except cf.CounterfactualError as exc:  # this place cannot take the beat: try the next one, keep the reason
            why = str(exc)
            continue
        why = shift_harm(edited.record["shifts_ms"], spans, (samples[s] / fs, samples[dest] / fs))
        seam = cf.seam_ratio(src.ctx, edited) if why is None else 0.0
        if seam > cf.MAX_SEAM_SIGMAS:  # the same check the pipeline makes next, asked of each place in turn
            why = f"seam_above_noise:{seam:.1f}_sigmas"
        elif why is None:
            return Draft("move", edited, [s, dest], "ectopic beat moved to a normal beat's place")
    raise Skip(why)


def slide_of(shifts_ms: list[dict[str, Any]]) -> tuple[float, float, float] | None:
    """``(lo_s, hi_s, by_s)``: the stretch a move's two timing shifts slid, and by how much; None without shifts.

    A non-compensatory ectopic beat (a PAC resetting the sinus node) needs time
    inserted where it was and as much taken out where it goes (or the other way
    round): the beats between the two places slide by that much, everything
    else stays where it was.
    """
    if not shifts_ms:
        return None
    first, second = sorted(shifts_ms, key=lambda sh: sh["at_ms"]) if len(shifts_ms) == 2 else (None, None)
    if first is None or abs(first["by_ms"] + second["by_ms"]) > 8.0:  # 8 ms: two roundings to a sample at >= 250 Hz
        raise Skip("move_needs_a_timing_shift")
    return first["at_ms"] / 1000.0, second["at_ms"] / 1000.0, first["by_ms"] / 1000.0


def shift_harm(shifts_ms: list[dict[str, Any]], spans: list[tuple[float, float]], moved_s: tuple[float, float]) -> str | None:
    """Why a move's timing shifts would change what an option shows, or None when every option keeps its meaning.

    The options that hold the two places are redrawn on the edited beats, the
    options inside the slid stretch (:func:`slide_of`) slide with it; an option
    across either end of the stretch would show other signal, so the move is
    refused then.
    """
    try:
        slide = slide_of(shifts_ms)
    except Skip as exc:
        return str(exc)
    if slide is None:
        return None
    lo, hi, _ = slide
    redrawn = [sp for sp in spans if any(sp[0] <= t <= sp[1] for t in moved_s)]
    if any(sp[0] <= lo <= sp[1] or sp[0] <= hi <= sp[1] for sp in spans if sp not in redrawn):
        return "move_timing_shift_under_an_option"
    return None


def control(src: Source, seed: int) -> Draft:
    """The ``control`` edit: one normal beat away from any ectopic beat replaced by the window's median normal beat."""
    samples, classes = src.ctx_beats()
    inside = src.in_window()
    fs = src.info.fs_hz
    premature = {int(round(b["r_s"] * fs)) for b in src.features.beats if b["premature"]}
    ok = [k for k in inside[1:-1] if all(0 <= j < len(classes) and classes[j] == "N" and int(samples[j]) not in premature for j in range(k - 2, k + 3))]
    if not ok:
        raise Skip("no_normal_beat_clear_of_ectopy")
    k = ok[int(src.rng("control-beat", seed).integers(len(ok)))]
    return Draft("control", cf.replace_beats(src.ctx, samples, classes, [k], seed=_seed(src, "control", seed)), [k], "a normal beat replaced by the median normal beat")


def edited_table(src: Source, draft: Draft) -> BeatTable:
    """The record's beat table with the context's beats replaced by the edited ones (symbols carried or set by class)."""
    k = src.ctx_index
    samples = np.asarray(src.table.samples, dtype=np.int64)
    classes = np.asarray(src.table.classes).astype(str)
    e = draft.edited
    new_s = np.concatenate([samples[: k[0]], e.beat_samples, samples[k[-1] + 1 :]]) if k.size else samples
    new_c = np.concatenate([classes[: k[0]], e.beat_classes.astype(str), classes[k[-1] + 1 :]]) if k.size else classes
    symbols = None
    if src.table.symbols is not None:
        sym = np.asarray(src.table.symbols).astype(str)
        ctx_sym = sym[k]
        mid = np.array([ctx_sym[o] if o >= 0 else SYMBOL_OF_CLASS.get(c, c) for o, c in zip(e.origin.tolist(), e.beat_classes.tolist())], dtype=sym.dtype)
        symbols = np.concatenate([sym[: k[0]], mid, sym[k[-1] + 1 :]])
    prov = {**src.table.provenance, "counterfactual": {"op": e.record["op"], "method": e.record["method"], "version": e.record["version"]}}
    return BeatTable(new_s, new_c, symbols, prov, classes_known=src.table.classes_known)


def edited_window(src: Source, draft: Draft) -> SignalWindow:
    """The item's window cut from the edited context (refused when a deletion pulled filler into it)."""
    if draft.edited.valid_to < src.bounds[1]:
        raise Skip("edit_pulled_filler_into_window")
    return crop(draft.edited.window, *src.bounds)


def read_item_window(info: RecordInfo, item: dict[str, Any]) -> SignalWindow:
    return read_samples(info, *item_bounds(info, item["window"]))
