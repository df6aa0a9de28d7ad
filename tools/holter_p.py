"""P waves on detected beats of a long recording: every atrial activation, conducted or not.

AV block, non-conducted PACs and junctional rhythm are decided by P waves that a
beat list does not carry. This module finds them in the signal, chunk by chunk
(bounded memory on 24 h Holters), with ``method="template"``:

1. Band-pass 0.5-25 Hz. Per chunk, the median QRS-T complex of the regular
   narrow (class ``N``) beats, from ``qrst_pre_ms`` before R to ``qrst_post_ms``
   after it (cut short before the next P), is fitted (least-squares scale) and
   subtracted from every N beat, so a P wave on a T wave stays visible. Around
   other beats (V, F, Q: another QRS-T shape) no P is looked for.
2. The P template is the median residual before the regular N beats; its peak
   is the largest multi-lead deflection ``p_search_ms`` before R. A record (or
   chunk) whose template does not stand out of the beat-to-beat residual
   (``min_p_snr``) has no visible P waves: no P is reported there, and the
   reason is recorded (``status``), instead of guessing.
3. P peaks: local maxima of the multi-lead normalised cross-correlation with the
   template of at least ``min_corr``, at a scale of ``min_scale``-``max_scale``
   of the template, outside each QRS (``qrs_guard_ms``), outside artifact
   spans, at least ``min_pp_ms`` apart.

Each beat's conducted P is found with the AV-conduction rule of
:func:`ecgtrace.tools._rhythm_conduction.conducted_p`; ``p_present`` is True
where it exists. Thresholds were set on the synthetic holtercare record and
MIT-BIH DS1 (tuned); DS2, LTAFDB, CPSC 2021 are scored only (``benchmarks/rhythm.py``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.signal import butter, sosfiltfilt

from ecgtrace.tools.af import _runs
from ecgtrace.tools._holter_p_search import Workspace, _windows, align_beats, allowed_masks, pick_peaks, sliding_corr, subtract_qrst
from ecgtrace.tools._rhythm_conduction import DEFAULT_CONDUCTION_PARAMS, conducted_p
from ecgtrace.tools.records import RecordInfo, chunk_bounds, open_record, read_samples

HOLTER_P_VERSION = "2"
DEFAULT_P_PARAMS: dict[str, Any] = {
    "band_hz": (0.5, 25.0),
    "qrst_pre_ms": 70.0,
    "qrst_post_ms": 560.0,
    "p_search_ms": (300.0, 110.0),
    "p_halfwidth_ms": 60.0,
    "min_template_beats": 20,
    "min_p_snr": 1.5,
    "min_corr": 0.80,
    "min_scale": 0.5,
    "max_scale": 2.0,
    "qrs_guard_ms": (110.0, 90.0),
    "other_beat_guard_ms": (120.0, 480.0),
    "t_zone_ms": 420.0,
    "t_zone_min_corr": 0.93,
    "min_pp_ms": 240.0,
    "align_ms": 40.0,
    "on_time_tol": 0.12,
    "blocked_min_corr": 0.92,
    "max_extra_p_share": 0.02,
    "chunk_s": 600.0,
    "overlap_s": 5.0,
}


@dataclass
class PWaves:
    """P-wave peaks of a record and each beat's conducted P.

    Attributes:
        p_samples: Every P-wave peak found (sample index, sorted).
        p_present: Bool per beat: a conducted P precedes it.
        pr_ms: Per beat, R minus its conducted P peak (ms; NaN without one).
        p_known: Bool per beat: the beat lies in a chunk where P waves are visible (elsewhere
            ``p_present`` False means "not known", never "absent").
        r_fiducial: Per beat, the R peak aligned on its chunk's median QRS (N beats; others as given):
            PR is measured to it, so the beat detector's jitter is no PR change.
        status: ``ok``, or why no P waves are reported (``no visible P waves``).
        chunks: Per chunk ``{start, stop, status, snr, pr_template_ms}``.
        provenance: ``{source, method, version, params}``.
    """

    p_samples: np.ndarray
    p_present: np.ndarray
    pr_ms: np.ndarray
    p_known: np.ndarray
    r_fiducial: np.ndarray
    status: str
    chunks: list[dict[str, Any]] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)


def _bandpass(x: np.ndarray, fs_hz: float, band_hz: tuple[float, float]) -> np.ndarray:
    x = np.where(np.isfinite(x), x, 0.0)
    sos = butter(2, [band_hz[0], min(band_hz[1], 0.45 * fs_hz)], btype="bandpass", fs=fs_hz, output="sos")
    return sosfiltfilt(sos, x, axis=0) if x.shape[0] > 60 else x - np.median(x, axis=0)


def _regular_normals(beats: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """N beats whose neighbours are N and whose RR before and after are within 20 % of the local median."""
    n = beats.size
    ok = classes == "N"
    if n < 5:
        return np.zeros(n, bool)
    rr = np.diff(beats).astype(np.float64)
    med = float(np.median(rr))
    prev = np.concatenate([[np.nan], rr])
    nxt = np.concatenate([rr, [np.nan]])
    ok &= np.abs(prev - med) <= 0.2 * med
    ok &= np.abs(nxt - med) <= 0.2 * med
    ok[1:] &= classes[:-1] == "N"
    ok[:-1] &= classes[1:] == "N"
    return ok








def _p_template(res: np.ndarray, beats: np.ndarray, good: np.ndarray, fs_hz: float,
                p: dict[str, Any]) -> tuple[np.ndarray | None, int, float, np.ndarray]:
    """``(template (2h+1, leads) or None, R minus P peak in samples, SNR, leads where P shows)`` from the residual before regular N beats.

    A lead where the template stays under ``min_p_snr`` of the beat-to-beat
    residual (a noisy lead, or one where P is flat) is left out of the search:
    in the multi-lead correlation its noise would drown the leads that show P.
    """
    far, near = (int(v * fs_hz / 1000) for v in p["p_search_ms"])
    half = int(p["p_halfwidth_ms"] * fs_hz / 1000)
    use = good & (beats - far - half >= 0)
    if use.sum() < p["min_template_beats"]:
        return None, 0, 0.0, np.zeros(res.shape[1], bool)
    w = _windows(res, beats[use], -far - half, -near + half + 1)  # (beats, time, leads)
    w = w - np.median(w, axis=1, keepdims=True)  # the T-P baseline of each beat is the zero, not the filter's offset
    med = np.median(w, axis=0)
    spread = np.median(np.abs(w - med[None]), axis=0) * 1.4826  # per-beat residual around the median
    score = (np.abs(med) / np.maximum(spread.mean(axis=0), 1e-9)[None, :]).sum(axis=1)
    k = half + int(np.argmax(score[half : score.size - half]))
    tpl = med[k - half : k + half + 1]
    lead_snr = np.ptp(tpl, axis=0) / np.maximum(spread.mean(axis=0), 1e-9)
    shows_p = lead_snr >= p["min_p_snr"]
    shows_p[int(np.argmax(lead_snr))] = True
    return tpl - tpl.mean(axis=0), far + half - k, float(lead_snr.max()), shows_p






def _keep_blocked(p_samples: np.ndarray, corr: np.ndarray, conducted: np.ndarray, beats: np.ndarray, fs_hz: float, p: dict[str, Any]) -> np.ndarray:
    """Mask of P peaks to keep: every conducted P; a P without QRS only when the atrial rhythm vouches for it.

    A dropped sinus P (AV block) comes on time: the P-P before and after it are
    within ``on_time_tol`` of the local median P-P (one of them may span two
    cycles, where a P hid in a QRS). A non-conducted PAC comes
    early (P-P under ``premature_pp_ratio`` x the median) and must match the
    template closely (``blocked_min_corr``) off the T wave (an early P on a T wave
    cannot be told from the T wave's residue here). Any other P without QRS is a T-wave
    or noise residue more often than an atrial beat: dropped.
    """
    keep = np.zeros(p_samples.size, bool)
    keep[conducted[conducted >= 0]] = True
    pp = np.diff(p_samples).astype(np.float64)
    prev = np.searchsorted(beats, p_samples, side="right") - 1
    on_t = (prev >= 0) & (p_samples - beats[np.maximum(prev, 0)] < p["t_zone_ms"] * fs_hz / 1000)
    for k in np.flatnonzero(~keep):
        if k == 0 or k + 1 >= p_samples.size:
            continue
        ref = float(np.median(pp[max(k - 5, 0) : k + 5]))
        before, after = pp[k - 1] / ref, pp[k] / ref
        # a P hidden in a QRS doubles one P-P: on time means each side is 1 (or 2) cycles, one side exactly 1
        near = [min(abs(r - 1.0), abs(r - 2.0) / 2.0) <= p["on_time_tol"] for r in (before, after)]
        on_time = all(near) and min(abs(before - 1.0), abs(after - 1.0)) <= p["on_time_tol"]
        early = before < DEFAULT_CONDUCTION_PARAMS["premature_pp_ratio"] and corr[k] >= p["blocked_min_corr"] and not on_t[k]
        keep[k] = on_time or early
    return keep




def _chunk_p(x: np.ndarray, beats: np.ndarray, classes: np.ndarray, fs_hz: float, p: dict[str, Any],
             work: Workspace | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
    """``(P peaks, their correlation, aligned R peaks, chunk status)`` of one chunk (samples local to the chunk).

    ``work``: buffers carried from the previous chunk of the same search (none is kept in the result).
    """
    f = np.ascontiguousarray(_bandpass(np.asarray(x, dtype=np.float64), fs_hz, p["band_hz"]))  # sample-major: beat windows gather whole rows
    is_n = classes == "N"
    good = _regular_normals(beats, classes)
    beats = align_beats(f, beats, good, is_n, fs_hz, p)
    guess = int(0.16 * fs_hz)
    res = subtract_qrst(f, beats, good, is_n, fs_hz, guess, p)
    tpl, pr, snr, shows_p = _p_template(res, beats, good, fs_hz, p)
    if tpl is None:
        return np.zeros(0, np.int64), np.zeros(0), beats, {"status": "too few regular N beats for a P template", "snr": None, "pr_template_ms": None}
    info = {"snr": round(snr, 2), "pr_template_ms": round(pr * 1000 / fs_hz, 1), "p_leads": [int(j) for j in np.flatnonzero(shows_p)]}
    if snr < p["min_p_snr"]:
        return np.zeros(0, np.int64), np.zeros(0), beats, {**info, "status": "no visible P waves (template under the beat-to-beat residual)"}
    corr, scale = sliding_corr(res[:, shows_p], tpl[:, shows_p], work)
    bad = ~np.isfinite(x).all(axis=1)  # finite in float32 is finite in float64: no copy
    allowed, t_zone = allowed_masks(f.shape[0], beats, is_n, fs_hz, p)
    peaks = pick_peaks(corr, scale, allowed & ~bad, t_zone, fs_hz, p)
    return peaks, corr[peaks], beats, {**info, "status": "ok"}


def _between_normals(p_samples: np.ndarray, beats: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """True where the beats before and after a P are both N: next to an ectopic beat a sinus P is blocked by it
    (concealed conduction, a compensatory pause), which is no AV block and no PAC."""
    i = np.searchsorted(beats, p_samples, side="right") - 1
    ok = (i >= 0) & (i + 1 < beats.size)
    out = np.zeros(p_samples.size, bool)
    out[ok] = (classes[i[ok]] == "N") & (classes[i[ok] + 1] == "N")
    return out


def _extra_p_trusted(p_samples: np.ndarray, extra: np.ndarray, beats: np.ndarray, classes: np.ndarray, chunks: list[dict[str, Any]], fs_hz: float,
                     p: dict[str, Any]) -> np.ndarray:
    """Per P peak: True where the extra (non-conducted) P waves of its chunk can be trusted.

    In plain sinus rhythm an RR interval holds no P of its own; when more than
    ``max_extra_p_share`` of a chunk's regular sinus RR intervals hold one (not
    counting runs of 3 or more in a row: the 2:1 pattern), the extra P waves
    there are T-wave or noise residue: all are dropped and the chunk says so.
    """
    trusted = np.zeros(p_samples.size, bool)
    good = _regular_normals(beats, classes)
    extra_p = p_samples[extra]
    for c in chunks:
        if c["status"] != "ok":
            continue
        idx = np.flatnonzero(good[1:] & good[:-1] & (beats[1:] >= c["start"]) & (beats[1:] < c["stop"])) + 1  # RR (i-1, i]
        if idx.size == 0:
            continue
        lo = np.searchsorted(extra_p, beats[idx - 1] + int(0.1 * fs_hz), side="right")
        hi = np.searchsorted(extra_p, beats[idx] - int(DEFAULT_CONDUCTION_PARAMS["min_pr_s"] * fs_hz), side="left")
        has = hi > lo
        sporadic = has.copy()
        for a, b in _runs(has):
            if b - a + 1 >= 3 and np.all(np.diff(idx[a : b + 1]) == 1):
                sporadic[a : b + 1] = False
        share = float(sporadic.mean())
        c["extra_p_share"] = round(share, 4)
        ok = share <= p["max_extra_p_share"]
        if not ok:
            c["extra_p_status"] = f"extra P waves not trusted: {share:.1%} of regular sinus RR intervals hold one"
        trusted |= ok & (p_samples >= c["start"]) & (p_samples < c["stop"])
    return trusted


def _p_of_chunk(info: RecordInfo, start: int, stop: int, leads: list[int], beats: np.ndarray, classes: np.ndarray,
                p: dict[str, Any], work: Workspace | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
    """One chunk read and searched (``beats`` are its own): ``(P peaks, their correlation, aligned R peaks, status)``, record samples."""
    window = read_samples(info, start, stop, leads)
    peaks, pcorr, aligned, meta = _chunk_p(window.signal_mv, beats - start, classes, float(info.fs_hz), p, work)
    return peaks + start, pcorr, aligned, meta


def _map_chunks(jobs: list[tuple[Any, ...]], workers: int) -> list[tuple[Any, ...]]:
    """:func:`_p_of_chunk` of every job, in order: here, or in ``workers`` processes that die with this one."""
    if workers <= 1 or len(jobs) <= 1:
        work = Workspace()  # one set of buffers for the whole serial pass
        return [_p_of_chunk(*job, work) for job in jobs]
    from ecgtrace.workers import worker_pool

    with worker_pool(min(workers, len(jobs))) as pool:
        return list(pool.map(_p_of_chunk, *zip(*jobs)))


def detect_p_waves(
    record: RecordInfo | str | os.PathLike[str],
    beat_samples: np.ndarray,
    beat_classes: Sequence[str] | np.ndarray,
    *,
    artifact_spans: Sequence[tuple[int, int]] = (),
    method: str = "template",
    workers: int = 1,
    **overrides: Any,
) -> PWaves:
    """Every P-wave peak of ``record`` and each beat's conducted P (see the module note).

    Args:
        record: Record path or opened :class:`RecordInfo` (its ``fs_hz`` is used).
        beat_samples: R peaks (samples, sorted).
        beat_classes: AAMI class per beat; only ``N`` beats shape the templates.
        artifact_spans: ``(start, stop)`` samples where no P is looked for.
        method: ``template`` (the only one).
        workers: processes for the chunks (each chunk is independent; the result does not depend on it).
        **overrides: Entries of :data:`DEFAULT_P_PARAMS`.
    """
    if method != "template":
        raise ValueError(f"unknown P-wave method {method!r} (known: template)")
    unknown = set(overrides) - set(DEFAULT_P_PARAMS)
    if unknown:
        raise TypeError(f"unknown P-wave parameter(s): {', '.join(sorted(unknown))}")
    p = {**DEFAULT_P_PARAMS, **overrides}
    info = record if isinstance(record, RecordInfo) else open_record(record)
    fs = float(info.fs_hz)
    beats = np.asarray(beat_samples, dtype=np.int64)
    classes = np.asarray(beat_classes).astype("<U1")
    usable = [j for j, lead in enumerate(info.leads) if lead not in info.unusable_leads] or list(range(len(info.leads)))  # by index: names may repeat
    fiducial = beats.copy()
    found: list[np.ndarray] = []
    found_corr: list[np.ndarray] = []
    chunks: list[dict[str, Any]] = []
    bounds = chunk_bounds(info.n_samples, max(int(round(p["chunk_s"] * fs)), 1), int(round(p["overlap_s"] * fs)))
    spans = [tuple(int(i) for i in np.searchsorted(beats, [b[0], b[1]])) for b in bounds]  # each chunk's beats
    jobs = [(info, b[0], b[1], usable, beats[lo:hi], classes[lo:hi], p) for b, (lo, hi) in zip(bounds, spans)]
    for (start, _stop, core_start, core_stop), (lo, hi), (peaks, pcorr, aligned, meta) in zip(bounds, spans, _map_chunks(jobs, workers)):
        core = (beats[lo:hi] >= core_start) & (beats[lo:hi] < core_stop)
        fiducial[lo:hi][core] = aligned[core] + start
        in_core = (peaks >= core_start) & (peaks < core_stop)
        found.append(peaks[in_core])
        found_corr.append(pcorr[in_core])
        chunks.append({"start": int(core_start), "stop": int(core_stop), **meta})
    p_samples = np.concatenate(found) if found else np.zeros(0, np.int64)
    p_corr = np.concatenate(found_corr) if found_corr else np.zeros(0)
    for a, b in artifact_spans:
        out = (p_samples < int(a)) | (p_samples >= int(b))
        p_samples, p_corr = p_samples[out], p_corr[out]
    if p_samples.size:
        cond = conducted_p(fiducial, p_samples, fs, DEFAULT_CONDUCTION_PARAMS)
        keep = _keep_blocked(p_samples, p_corr, cond, fiducial, fs, p)
        p_samples, cond_mask = p_samples[keep], np.isin(np.flatnonzero(keep), cond[cond >= 0])
        p_samples = p_samples[cond_mask | (_between_normals(p_samples, fiducial, classes) & _extra_p_trusted(p_samples, ~cond_mask, fiducial, classes, chunks, fs, p))]
    cond = conducted_p(fiducial, p_samples, fs, DEFAULT_CONDUCTION_PARAMS) if p_samples.size else np.full(beats.size, -1)
    pr_ms = np.where(cond >= 0, (fiducial - p_samples[np.maximum(cond, 0)]) * 1000.0 / fs, np.nan) if p_samples.size else np.full(beats.size, np.nan)
    n_ok = sum(c["status"] == "ok" for c in chunks)
    status = "ok" if n_ok == len(chunks) and chunks else (f"P waves visible in {n_ok} of {len(chunks)} chunks" if n_ok else (chunks[0]["status"] if chunks else "empty record"))
    known = np.zeros(beats.size, bool)
    for c in chunks:
        if c["status"] == "ok":
            known[(beats >= c["start"]) & (beats < c["stop"])] = True
    prov = {"source": "detected", "method": f"holter_p.detect_p_waves[{method}]", "version": HOLTER_P_VERSION,
            "params": {k: list(v) if isinstance(v, tuple) else v for k, v in p.items()}}
    return PWaves(p_samples=p_samples.astype(np.int64), p_present=cond >= 0, pr_ms=pr_ms, p_known=known, r_fiducial=fiducial, status=status, chunks=chunks, provenance=prov)
