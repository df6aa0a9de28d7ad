"""Atrial activity found apart from the QRS: non-conducted P waves, the atrial rate, AV dissociation.

The per-beat delineation looks for one P wave before each QRS. Second- and
third-degree AV block need the P waves that are *not* followed by a QRS, so:

1. P template per lead: the median of the P waves the delineator found
   (``p_on - 20 ms .. p_off + 20 ms``, aligned on each beat's P peak taken
   over all leads, so that the templates of different leads line up), on the leads
   whose template P is at least ``MIN_TEMPLATE_MV``. The P waves found before
   the window rule removed them count too, so that P waves at a variable PR
   (AV dissociation) still give a template.
2. Scan: the template slides over the stretches between beats that hold no
   QRS, T wave or P wave already found (from the T end, or R + 200 ms, to the
   next beat's P onset or QRS onset); a place where the mean correlation over
   the template leads reaches ``MIN_CORR`` at a size ``AMP_RANGE`` of the
   template's is a P wave (at least ``MIN_PP_MS`` from any other).
3. ``nonconducted_p_count``: P waves found by the scan (no QRS follows them
   within the stretch); ``atrial_rate_bpm``: 60000 / the median P-P interval
   over every P wave (found before a QRS or by the scan), leaving out intervals
   longer than 1.6 x the shortest quartile (a P hidden in a QRS or T wave);
   ``av_dissociation``: P waves in most beats, atrial rate faster than the
   ventricular rate by ``DISSOCIATION_RATIO`` and a PR interval that wanders
   (interquartile range > ``PR_IQR_DISSOCIATED_MS``).

Positions are local samples at the delineation rate; the result is plain JSON
in ms from the window start.
"""

from __future__ import annotations

from typing import Any

import numpy as np

MIN_TEMPLATE_MV = 0.05
MIN_CORR = 0.8
AMP_RANGE = (0.5, 2.0)
MIN_PP_MS = 200.0
DISSOCIATION_RATIO = 1.2
PR_IQR_DISSOCIATED_MS = 40.0
PAD_MS = 20.0


def _templates(results: list[dict[str, np.ndarray]], xs_key: str, fs_hz: float) -> tuple[list[int], np.ndarray, int, int]:
    """(template leads, templates (n_leads, W), samples before / after the P peak)."""
    pad = int(round(PAD_MS * fs_hz / 1000.0))
    widths = []
    for res in results:
        ok = res["p_peak_found"] >= 0
        widths += list(res["p_peak_found"][ok] - res["p_on_found"][ok]) + list(res["p_off_found"][ok] - res["p_peak_found"][ok])
    if not widths:
        return [], np.zeros((0, 0)), 0, 0
    half = int(np.median(widths)) + pad
    centres = _beat_p_peaks(results, "p_peak_found")  # one time per beat for every lead: P peaks differ between leads
    leads, rows = [], []
    for j, res in enumerate(results):
        x = res[xs_key]
        peaks = [int(k) for k, own in zip(centres, res["p_peak_found"]) if own >= 0 and k - half >= 0 and k + half < x.size]
        if len(peaks) < 2:
            continue
        segs = np.stack([x[k - half : k + half + 1] - np.mean(x[k - half : k - half + pad + 1]) for k in peaks])
        t = np.median(segs, axis=0)
        if np.ptp(t) >= MIN_TEMPLATE_MV:
            leads.append(j)
            rows.append(t)
    return leads, (np.stack(rows) if rows else np.zeros((0, 2 * half + 1))), half, half


def _scan(results: list[dict[str, np.ndarray]], leads: list[int], tmpl: np.ndarray, half: int, lo: int, hi: int, fs_hz: float) -> list[int]:
    """P-wave peaks (local samples) matching the template inside ``[lo, hi)``."""
    if hi - lo <= 2 * half + 1 or not leads:
        return []
    corr_sum = np.zeros(hi - lo - 2 * half)
    amp_ok = np.ones_like(corr_sum, dtype=bool)
    t_c = tmpl - tmpl.mean(axis=1, keepdims=True)
    for row, j in enumerate(leads):
        x = results[j]["xs"][lo:hi]
        views = np.lib.stride_tricks.sliding_window_view(x, 2 * half + 1)
        v = views - views.mean(axis=1, keepdims=True)
        num = v @ t_c[row]
        den = np.sqrt((v * v).sum(axis=1) * (t_c[row] ** 2).sum()) + 1e-9
        corr_sum += num / den
        ratio = np.ptp(views, axis=1) / max(float(np.ptp(tmpl[row])), 1e-6)
        amp_ok &= (ratio >= AMP_RANGE[0]) & (ratio <= AMP_RANGE[1])
    corr = corr_sum / len(leads)
    score = np.where(amp_ok & (corr >= MIN_CORR), corr, -np.inf)
    found: list[int] = []
    gap = int(MIN_PP_MS * fs_hz / 1000.0)
    for k in np.argsort(-score):
        if not np.isfinite(score[k]):
            break
        centre = lo + int(k) + half
        if all(abs(centre - f) >= gap for f in found):
            found.append(centre)
    return sorted(found)


def _beat_p_peaks(results: list[dict[str, np.ndarray]], key: str) -> np.ndarray:
    """Median over leads of each beat's P peak (-1: none in any lead)."""
    import warnings

    marks = np.stack([r[key] for r in results]).astype(np.float64)
    marks[marks < 0] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        med = np.nanmedian(marks, axis=0)
    return np.where(np.isfinite(med), np.round(med), -1).astype(np.int64)


def _stretches(results: list[dict[str, np.ndarray]], beats: np.ndarray, p_peaks: np.ndarray, half: int, fs_hz: float) -> list[tuple[int, int]]:
    """Between consecutive beats: from the T end (or R + 200 ms) to the next P wave (or QRS onset)."""
    out = []
    pad = int(PAD_MS * fs_hz / 1000.0)
    for i in range(beats.size - 1):
        t_off = [int(r["t_off"][i]) for r in results if r["t_off"][i] >= 0]
        start = max(int(np.median(t_off)) if t_off else -1, int(beats[i]) + int(0.2 * fs_hz)) + pad
        nxt_on = [int(r["qrs_on"][i + 1]) for r in results if r["qrs_on"][i + 1] >= 0]
        stop = int(np.median(nxt_on)) if nxt_on else int(beats[i + 1]) - int(0.05 * fs_hz)
        if p_peaks[i + 1] >= 0:
            stop = min(stop, int(p_peaks[i + 1]) - half)
        out.append((start - half, stop + half))  # the template centre ranges over [start, stop]
    return out


def atrial_activity(results: list[dict[str, np.ndarray]], beats: np.ndarray, fs_hz: float, p_waves: list[dict[str, Any]]) -> dict[str, Any]:
    """Non-conducted P waves, atrial rate and AV dissociation of a window (see the module docstring)."""
    ms = 1000.0 / fs_hz
    out: dict[str, Any] = {"nonconducted_p_count": None, "nonconducted_p_ms": [], "atrial_rate_bpm": None, "av_dissociation": None,
                           "p_wave_ms": [], "template_leads": 0, "method": "P template scan between beats",
                           "params": {"min_corr": MIN_CORR, "amp_range": list(AMP_RANGE), "min_pp_ms": MIN_PP_MS}}
    if beats.size < 2 or not results:
        return out
    leads, tmpl, half, _ = _templates(results, "xs", fs_hz)
    out["template_leads"] = len(leads)
    if not leads:
        return out
    kept = any(pw.get("window_present") for pw in p_waves)
    p_peaks = _beat_p_peaks(results, "p_peak" if kept else "p_peak_found")
    scanned: list[int] = []
    for lo, hi in _stretches(results, beats, p_peaks, half, fs_hz):
        scanned += _scan(results, leads, tmpl, half, max(lo, 0), min(hi, results[0]["xs"].size), fs_hz)
    all_p = np.sort(np.r_[p_peaks[p_peaks >= 0], np.asarray(scanned, dtype=np.int64)])
    out["p_wave_ms"] = [round(float(k) * ms, 1) for k in all_p]
    out["nonconducted_p_ms"] = [round(float(k) * ms, 1) for k in scanned]
    out["nonconducted_p_count"] = len(scanned)
    if all_p.size >= 3:
        pp = np.diff(all_p) * ms
        pp = pp[pp <= 1.6 * np.percentile(pp, 25)]
        out["atrial_rate_bpm"] = round(60000.0 / float(np.median(pp)), 1)
    rr = np.diff(beats) * ms
    share = float((p_peaks >= 0).mean())
    pr = [(int(np.median([r["qrs_on"][i] for r in results if r["qrs_on"][i] >= 0])) - int(p_peaks[i])) * ms
          for i in range(beats.size) if p_peaks[i] >= 0 and any(r["qrs_on"][i] >= 0 for r in results)]
    pr_iqr = float(np.subtract(*np.percentile(pr, [75, 25]))) if len(pr) >= 3 else None
    if out["atrial_rate_bpm"] is not None and pr_iqr is not None:
        v_rate = 60000.0 / float(np.median(rr))
        out["av_dissociation"] = bool(share >= 0.5 and out["atrial_rate_bpm"] >= DISSOCIATION_RATIO * v_rate and pr_iqr > PR_IQR_DISSOCIATED_MS)
        out["pr_iqr_ms"] = round(pr_iqr, 1)
    return out
