"""AAMI beat classification (N, S, V, F, Q) from the signal around given beat positions.

Order of the decision, per beat:

1. **Q** when the beat lies in an artifact span, or no lead is usable around it
   (NaN, flat, or the window leaves the record), or no dominant template could
   be learned.
2. A small random forest (``tools/data/beat_classifier.npz``) over
   record-relative features: RR prematurity and compensatory pause, QRS width,
   correlation/amplitude/area against the record's **own dominant beat**
   (an unsupervised median template re-learned every chunk from its
   regular-RR beats: no label of the record is ever used), P-wave evidence and
   noise, plus one general rule (a clean beat clearly wider than, and
   different from, the dominant beat is V when its look-alikes come early or
   before a pause: on-time wide beats are conduction, e.g. bundle-branch block). The forest was trained on *other* records only (MIT-BIH DS1; see
   ``benchmarks/train_classify_model.py`` and the train/test split in
   ``benchmarks/classify.py``).
3. A narrow beat the forest left N is S when it breaks the rhythm abruptly on both sides
   (early against the local median *and* against the preceding RR, then a longer RR) and its
   P wave does not match the dominant beat's (``PAC_RULE``): sinus arrhythmia shortens RRs
   gradually and keeps the sinus P.
4. Ventricular second look (:mod:`ecgtrace.tools._classify_ventricular`): a wide, very different beat
   without the dominant P wave is V whatever its timing; F stays F only with the dominant P and an
   intermediate QRS (still like the dominant one, and narrower than the record's V beats), else V. A narrow beat in a run started by a rhythm break whose RR is clearly short
   against the record's long-window RR is S (a run of atrial tachycardia).
5. **AF first**: inside the AF mask a beat is never S (an RR-irregular beat in
   AF is not a premature atrial beat); it falls back to the next most likely
   class.

Example:
    >>> from ecgtrace.tools.classify import classify_beats
    >>> result = classify_beats("data/mitdb/119", beat_samples, 360.0)  # doctest: +SKIP
    >>> result.to_json()["counts"]  # doctest: +SKIP
    {'N': 1540, 'S': 0, 'V': 444, 'F': 0, 'Q': 3}
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ecgtrace.errors import EcgTraceError
from ecgtrace.tools import _classify_model as cm
from ecgtrace.tools import _classify_pipeline as cp
from ecgtrace.tools import _classify_short as cs
from ecgtrace.tools import _classify_runs as cr
from ecgtrace.tools import _classify_ventricular as cv
from ecgtrace.tools.annotations import AAMI_ORDER
from ecgtrace.tools.records import RecordInfo, open_record, read_samples

METHOD = "rr-template-forest"
VERSION = "8"  # 8: paroxysmal atrial runs against the rhythm they broke into (_classify_runs.paroxysmal);
# 7: F stays F only with a QRS narrower than the record's V beats (_classify_ventricular.FUSION_WIDTH_RULE),
# and the ventricular rules also decide the provisional classes the AF detector sees (false AF in MIT-BIH 207 and 223);
# 6: an SVT run starts at a beat early against the beats before it, and bridges one interrupting beat
# (_classify_runs; DS1 leave-one-record-out S Se 46.2 -> 61.7 %, +P 91.8 -> 93.7 %);
# 5: deviant-V and fusion rules (_classify_ventricular), SVT runs vs the long RR (_classify_runs); on DS1
# 4: PAC_RULE (abrupt RR break on both sides + foreign P -> S); 3: wide-V rule needs ectopic timing of look-alikes;
# 2: model trained on MIT-BIH DS1 only; no S next to an artifact span

#: P wave present: pre-QRS segment correlates with the template's P and has a similar size.
P_WAVE_MIN_CORR = 0.5
P_WAVE_AMP_RANGE = (0.4, 2.5)
#: Decision weights on the forest's class probabilities. Chosen on the leave-one-record-out
#: outputs of the training records (MIT-BIH DS1), never on a test record: V x0.5 trades
#: 1 point of V sensitivity for 1 point of V +P; S x1.5 recovers S sensitivity.
DECISION_WEIGHTS = {"N": 1.0, "S": 1.5, "V": 0.5, "F": 1.0}
#: An S beat that does not follow an S beat must be at least this premature (1 - RR / local RR). Set on the
#: DS1 leave-one-record-out outputs: no DS1 S beat lost, S +P 91.4 -> 92.6 %.
S_MIN_PREMATURITY = 0.08
#: A beat whose preceding RR comes within this many seconds of an artifact span is never S (its prematurity is not evidence).
RR_ARTIFACT_MARGIN_S = 0.5
WIDE_V_RULE = cv.WIDE_V_RULE  # the wide-V rule lives with the other ventricular rules (_classify_ventricular)


#: Narrow premature beat with an abrupt RR break on both sides (an atrial premature beat the forest left N):
#: 1 - RR / local RR >= prematurity_min, RR / preceding RR <= rr_change_max (a sudden shortening, not the
#: gradual one of sinus arrhythmia) and next RR / RR >= return_min (the rhythm resets after it); the QRS looks
#: like the dominant beat's and the P wave does not (p_corr < p_corr_max). Chosen on the DS1 leave-one-record-out
#: outputs (grid over prematurity 0.1/0.15, rr_change 0.9/0.95, return 1.05/1.1, p_corr 0.3/0.5/0.7/off): S Se 28.6 -> 37.2 %,
#: +P 93.4 -> 91.2 %; without the P condition 38.3 / 87.0.
PAC_RULE = {"prematurity_min": 0.1, "rr_change_max": 0.9, "return_min": 1.1, "corr_qrs_mean_min": 0.9,
            "width_ratio_max": 1.2, "noise_ratio_max": 0.3, "p_corr_max": 0.5}


class ClassifyError(EcgTraceError):
    """Beat positions, masks or signal arrays that do not fit together."""


@dataclass(frozen=True)
class BeatClasses:
    """AAMI classes of beats plus the features that decided them.

    Attributes:
        classes: ``'<U1'`` array, one of N S V F Q per beat.
        features: per-beat numpy arrays. Always present: ``rr_prev_ms``,
            ``rr_next_ms``, ``local_rr_ms`` (median RR around the beat),
            ``prematurity`` (1 - rr_prev/local_rr), ``compensatory_ratio``
            ((rr_prev + rr_next) / (2 local_rr)), ``qrs_width_ms`` (energy-based
            QRS duration), ``template_corr_max`` / ``template_corr_mean``
            (QRS correlation with the dominant template over usable leads),
            ``p_wave_present`` (bool), ``in_af`` (bool), ``in_artifact`` (bool),
            ``proba_N``/``proba_S``/``proba_V``/``proba_F`` (model output), and
            the other model inputs.
        provenance: plain-JSON provenance dict (source "detected").
    """

    classes: np.ndarray
    features: dict[str, np.ndarray] = field(repr=False)
    provenance: dict[str, Any] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        return {c: int(np.count_nonzero(self.classes == c)) for c in AAMI_ORDER}

    def to_json(self) -> dict[str, Any]:
        """Plain-JSON summary (counts per class, no per-beat arrays)."""
        n = int(self.classes.size)
        return {
            "n_beats": n,
            "counts": self.counts(),
            "n_in_af": int(np.count_nonzero(self.features.get("in_af", np.zeros(0, bool)))),
            "n_p_wave_present": int(np.count_nonzero(self.features.get("p_wave_present", np.zeros(0, bool)))),
            "provenance": self.provenance,
        }


def classify_beats(
    record: RecordInfo | str | os.PathLike[str],
    beat_samples: np.ndarray,
    fs_hz: float,
    *,
    af_mask: np.ndarray | None = None,
    artifact_spans: Iterable[Any] = (),
    chunk_s: float = 600.0,
    auto_af: bool = True,
    workers: int = 1,
) -> BeatClasses:
    """Classify beats of a record read chunk by chunk (bounded memory).

    Args:
        record: an opened :class:`RecordInfo` or a record path.
        beat_samples: R-peak sample indices (sorted ascending, int).
        fs_hz: sampling rate of ``beat_samples`` (Hz); must equal the record's.
        af_mask: optional bool per beat, True inside AF/flutter (from
            ``tools.af.detect_af(...).beat_mask``); such beats are never S.
            When None and ``auto_af`` is true, the mask is computed here with
            ``tools.af.detect_af`` from the beats, this module's P-wave evidence
            and its provisional classes: the forest's with S read as N (S would veto AF) and the
            ventricular rules applied, so the detector leaves V beats out (AF first, even when
            the caller has no mask).
        artifact_spans: spans ``(start_sample, stop_sample)`` (or dicts with
            ``start_sample``/``stop_sample`` or ``onset_sample``/``offset_sample``)
            whose beats are labelled Q.
        chunk_s: chunk length (s) of the streaming pass.
        auto_af: detect AF internally when ``af_mask`` is None (pass False, or an
            all-False mask, to classify without any AF information).
        workers: processes for the feature pass over the chunks (the result does not depend on it).

    Raises:
        ClassifyError: beat positions unsorted, outside the record, or fs mismatch.
    """
    info = record if isinstance(record, RecordInfo) else open_record(record)
    beats = _check_beats(beat_samples, info.n_samples, f"{info.name}")
    if abs(float(fs_hz) - info.fs_hz) > 1e-6:
        raise ClassifyError(f"{info.name}: fs_hz={fs_hz:g} does not match the record's {info.fs_hz:g} Hz")
    usable = np.array([lead not in info.unusable_leads for lead in info.leads], dtype=bool)
    if cs.is_short(info.n_samples, info.fs_hz, beats.size):  # a 10 s ECG has too few beats for the forest's template
        classes, feats, short = cs.classify_short_array(read_samples(info, 0, info.n_samples).signal_mv, info.fs_hz, beats, lead_usable=usable,
                                                        af_mask=af_mask, in_artifact=_span_mask(beats, artifact_spans), auto_af=auto_af)
        params = {"record": info.name, "fs_hz": float(info.fs_hz), "leads": list(info.leads), "unusable_leads": list(info.unusable_leads), **short}
        return BeatClasses(classes=classes, features=feats, provenance={"source": "detected", "method": cs.METHOD, "version": cs.VERSION, "params": params})
    if beats.size:
        feats, n_templates = cp.features_from_record(info, beats, usable, chunk_s=chunk_s, overlap_s=2.0, workers=workers)
    else:
        feats, n_templates = cp.features_from_chunks(iter(()), beats, info.fs_hz, usable)
    params = {"record": info.name, "fs_hz": float(info.fs_hz), "chunk_s": float(chunk_s), "leads": list(info.leads),
              "unusable_leads": list(info.unusable_leads)}
    return _decide(feats, beats, info.fs_hz, af_mask, artifact_spans, n_templates, params, auto_af=auto_af)


def classify_beats_array(
    signal_mv: np.ndarray,
    fs_hz: float,
    beat_samples: np.ndarray,
    *,
    af_mask: np.ndarray | None = None,
    artifact_spans: Iterable[Any] = (),
    auto_af: bool = True,
) -> BeatClasses:
    """Classify beats of an in-memory window ``signal_mv`` of shape (n, n_leads) in mV.

    ``beat_samples`` index into ``signal_mv``. Flat or all-NaN leads are ignored;
    a beat with no usable lead around it is Q.
    """
    x = np.asarray(signal_mv, dtype=np.float32)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] == 0:
        raise ClassifyError(f"signal_mv must be (n_samples, n_leads), got shape {np.shape(signal_mv)}")
    if not np.isfinite(fs_hz) or fs_hz <= 0:
        raise ClassifyError(f"fs_hz must be > 0, got {fs_hz!r}")
    beats = _check_beats(beat_samples, x.shape[0], "signal window")
    feats, n_templates = cp.features_from_array(x, float(fs_hz), beats, chunk_samples=int(round(600.0 * fs_hz)))
    params = {"fs_hz": float(fs_hz), "n_samples": int(x.shape[0]), "n_leads": int(x.shape[1])}
    return _decide(feats, beats, float(fs_hz), af_mask, artifact_spans, n_templates, params, auto_af=auto_af)


def _check_beats(beat_samples: np.ndarray, n_samples: int, where: str) -> np.ndarray:
    beats = np.asarray(beat_samples)
    if beats.ndim != 1:
        raise ClassifyError(f"{where}: beat_samples must be 1-D, got shape {beats.shape}")
    if beats.size and not np.issubdtype(beats.dtype, np.integer):
        if not np.all(np.isfinite(beats)):
            raise ClassifyError(f"{where}: beat_samples contain NaN or inf")
        beats = np.round(beats)
    beats = beats.astype(np.int64)
    if beats.size and (beats.min() < 0 or beats.max() >= n_samples):
        raise ClassifyError(f"{where}: beat samples reach {int(beats.max())} but there are {n_samples} samples")
    if beats.size > 1 and np.any(np.diff(beats) <= 0):
        raise ClassifyError(f"{where}: beat_samples must be strictly increasing")
    return beats


def _s_runs_from_premature(is_s: np.ndarray, prematurity: np.ndarray) -> np.ndarray:
    """Of each run of consecutive S candidates, the beats from its first premature one (>= S_MIN_PREMATURITY) on."""
    keep = np.zeros(is_s.size, dtype=bool)
    i = 0
    while i < is_s.size:
        if not is_s[i]:
            i += 1
            continue
        j = i
        while j + 1 < is_s.size and is_s[j + 1]:
            j += 1
        early = np.flatnonzero(prematurity[i : j + 1] >= S_MIN_PREMATURITY)
        if early.size:
            keep[i + early[0] : j + 1] = True
        i = j + 1
    return keep


def _abrupt_premature_narrow(feats: dict[str, np.ndarray]) -> np.ndarray:
    """Beats that :data:`PAC_RULE` calls atrial premature: early against the local rhythm and against the
    preceding RR, followed by a longer RR, with the dominant beat's QRS (bool per beat)."""
    r = PAC_RULE
    rr_prev = np.maximum(feats["rr_prev_ms"], 1.0)
    return (
        (feats["prematurity"] >= r["prematurity_min"])
        & (feats["rr_change"] <= r["rr_change_max"])
        & (feats["rr_next_ms"] / rr_prev >= r["return_min"])
        & (feats["corr_qrs_mean"] >= r["corr_qrs_mean_min"])
        & (feats["width_ratio"] <= r["width_ratio_max"])
        & (feats["noise_ratio"] < r["noise_ratio_max"])
        & (feats["p_corr"] < r["p_corr_max"])
    )


def _rr_touches_spans(beats: np.ndarray, spans: Iterable[Any], margin: int) -> np.ndarray:
    """True where an artifact span overlaps ``[previous beat - margin, beat]`` (the preceding RR is not trustworthy)."""
    out = np.zeros(beats.size, dtype=bool)
    if beats.size < 2:
        return out
    for lo, hi in _span_bounds(spans):
        out[1:] |= (beats[:-1] - margin < hi) & (beats[1:] >= lo)
    return out


def _span_bounds(spans: Iterable[Any]) -> list[tuple[int, int]]:
    bounds = []
    for span in spans or ():
        if isinstance(span, dict):
            lo = span.get("start_sample", span.get("onset_sample"))
            hi = span.get("stop_sample", span.get("offset_sample"))
        elif hasattr(span, "start_sample"):
            lo, hi = span.start_sample, span.stop_sample
        else:
            lo, hi = span[0], span[1]
        if lo is None or hi is None:
            raise ClassifyError(f"artifact span {span!r} has no start/stop sample")
        bounds.append((int(lo), int(hi)))
    return bounds


def _span_mask(beats: np.ndarray, spans: Iterable[Any]) -> np.ndarray:
    mask = np.zeros(beats.size, dtype=bool)
    for lo, hi in _span_bounds(spans):
        mask |= (beats >= lo) & (beats < hi)
    return mask


def feature_matrix(feats: dict[str, np.ndarray], names: Sequence[str]) -> np.ndarray:
    """Model input matrix (n_beats, n_features) float32 in ``names`` order."""
    missing = [n for n in names if n not in feats]
    if missing:
        raise ClassifyError(f"classifier model expects features {missing} that the pipeline does not compute")
    X = np.column_stack([np.asarray(feats[n], dtype=np.float64) for n in names]) if names else np.zeros((0, 0))
    return np.nan_to_num(X, nan=0.0, posinf=1e6, neginf=-1e6).astype(np.float32)


def _p_wave_present(feats: dict[str, np.ndarray], no_signal: np.ndarray) -> np.ndarray:
    return (
        (feats["p_corr"] >= P_WAVE_MIN_CORR)
        & (feats["p_amp_ratio"] >= P_WAVE_AMP_RANGE[0])
        & (feats["p_amp_ratio"] <= P_WAVE_AMP_RANGE[1])
        & ~no_signal
    )


def _labels_with_s_rules(score: np.ndarray, classes: Sequence[str], feats: dict[str, np.ndarray], in_af: np.ndarray,
                         rr_unreliable: np.ndarray) -> np.ndarray:
    """Forest labels under the S constraints (AF first, trustworthy RR, premature run start), plus :data:`PAC_RULE`."""
    names = np.array(classes)
    if score.shape[0] == 0:
        return np.array([], dtype="<U1")
    if "S" not in classes:
        return names[score.argmax(axis=1)]
    si = list(classes).index("S")
    score[in_af, si] = -1.0  # AF first: never S inside AF
    # prematurity is only evidence when the preceding beat's position is: not next to an artifact span
    score[rr_unreliable, si] = -1.0
    # an S beat comes early, or continues a run of S beats: a P shape alone (fast sinus rates merge P into T) is not S
    score[~_s_runs_from_premature(names[score.argmax(axis=1)] == "S", feats["prematurity"]), si] = -1.0
    labels = names[score.argmax(axis=1)]
    pac = _abrupt_premature_narrow(feats) & ~in_af & ~rr_unreliable & (labels == "N")
    labels = np.where(pac, "S", labels)
    return np.where(cr.svt_run(feats, labels, in_af | rr_unreliable), "S", labels)


def _decide(feats, beats, fs_hz, af_mask, artifact_spans, n_templates, params, forest: cm.Forest | None = None,
            auto_af: bool = False) -> BeatClasses:
    n = beats.size
    forest = forest or cm.load_forest()
    X = feature_matrix(feats, forest.feature_names)
    proba = forest.predict_proba(X) if n else np.zeros((0, len(forest.classes)), dtype=np.float32)
    classes = np.array(forest.classes)
    score = proba * np.array([DECISION_WEIGHTS.get(c, 1.0) for c in forest.classes], dtype=np.float32)[None, :]
    in_artifact = _span_mask(beats, artifact_spans)
    no_signal = (feats["n_leads_used"] <= 0) | ~feats["has_template"]
    p_wave = _p_wave_present(feats, no_signal)
    if af_mask is not None:
        in_af = np.asarray(af_mask, dtype=bool)
        if in_af.shape != (n,):
            raise ClassifyError(f"af_mask has {in_af.size} entries for {n} beats")
        af_source = "given"
    elif auto_af and n > 2:
        from ecgtrace.tools.af import detect_af

        # provisional classes only keep ventricular/unclassifiable beats out of the RR irregularity;
        # provisional S would veto AF (circular: RR irregularity is what made them S)
        provisional = np.where(classes[score.argmax(axis=1)] == "S", "N", classes[score.argmax(axis=1)])
        # the ventricular rules do not depend on AF: a wide beat the forest left N must not enter the RR irregularity
        provisional = np.where(in_artifact | no_signal, "Q", cv.apply(provisional, feats))
        in_af = np.asarray(detect_af(beats, fs_hz, beat_classes=provisional, p_wave_present=p_wave).beat_mask, dtype=bool)
        af_source = "tools.af.detect_af"
    else:
        in_af = np.zeros(n, dtype=bool)
        af_source = "none"
    rr_unreliable = _rr_touches_spans(beats, artifact_spans, int(round(RR_ARTIFACT_MARGIN_S * fs_hz)))
    labels = _labels_with_s_rules(score, forest.classes, feats, in_af, rr_unreliable)
    labels = np.where(in_artifact | no_signal, "Q", cv.apply(labels, feats)).astype("<U1")
    out = dict(feats)
    out["template_corr_max"] = feats["corr_qrs_max"]
    out["template_corr_mean"] = feats["corr_qrs_mean"]
    out["p_wave_present"] = p_wave
    out["in_af"] = in_af
    out["in_artifact"] = in_artifact
    for j, c in enumerate(forest.classes):
        out[f"proba_{c}"] = np.clip(proba[:, j], 0.0, 1.0)
    provenance = {
        "source": "detected",
        "method": METHOD,
        "version": VERSION,
        "params": {
            **params,
            "n_beats": int(n),
            "n_templates": int(n_templates),
            "af_mask": af_source,
            "decision_weights": dict(DECISION_WEIGHTS),
            "wide_v_rule": dict(WIDE_V_RULE),
            "pac_rule": dict(PAC_RULE),
            "deviant_v_rule": dict(cv.DEVIANT_V_RULE), "fusion_rule": dict(cv.FUSION_RULE),
            "fusion_width_rule": dict(cv.FUSION_WIDTH_RULE), "svt_run_rule": dict(cr.SVT_RUN_RULE),
            "rr_artifact_margin_s": RR_ARTIFACT_MARGIN_S,
            "s_min_prematurity": S_MIN_PREMATURITY,
            "n_rr_unreliable": int(np.count_nonzero(rr_unreliable)),
            "n_artifact_beats": int(np.count_nonzero(in_artifact)),
            "model": {k: forest.meta.get(k) for k in ("trained_on", "n_trees", "max_depth", "version") if k in forest.meta},
        },
    }
    return BeatClasses(classes=labels, features=out, provenance=provenance)
