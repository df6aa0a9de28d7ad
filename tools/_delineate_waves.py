"""The waves inside each QRS complex (q, R, S, R'), their durations, notches and the J-point level.

Per beat and lead, on the lead's 40 Hz low-passed signal *without* baseline
removal (a median-filter baseline bends the ST segment), relative to the PR
level (:func:`pr_level`: the flattest 20 ms in the 80 ms before QRS onset):

* The QRS (onset .. offset) is cut into lobes where the signal crosses a dead
  band of ``max(DEAD_BAND_MV, DEAD_BAND_SHARE x peak-to-peak)`` around the PR
  level; two lobes of the same sign next to each other are one wave with a
  notch between them.
* Waves: a negative first lobe followed by a positive one is the **q wave**; no
  positive lobe at all is a **QS** complex; the first positive lobe is **R**;
  the negative lobe after it is **S**; a positive lobe after S is **R'**.
* Durations run between the zero crossings that bound a lobe (the QRS onset or
  offset at the edges): ``q_dur_ms``, ``r_dur_ms``, ``s_dur_ms``. The
  **R-peak time** runs from QRS onset to the peak of the last R wave (R' when
  present). An R wave is **notched** when it holds two peaks whose dip between
  them is at least ``NOTCH_PROMINENCE_SHARE`` of R (and ``NOTCH_MIN_MV``), or an
  M shape whose middle dip falls just below the baseline (R-s-R' with the s
  under ``M_NOTCH_S_SHARE`` of the smaller R).
* Patterns: ``qr`` (q then a dominant R), ``rs`` (no q, R smaller than the S
  after it), ``monophasic_r`` (R with no q of ``MONO_Q_SHARE`` of R, no S of
  ``MONO_S_SHARE`` of R, no R' unless M-shaped), ``rsr_prime`` (R' of at least
  ``RSR_MIN_MV``). For ``monophasic_r`` a terminal S counts only as deep as the
  signal comes back up from it by the J point: a descent that ends in a depressed
  J point is the discordant ST segment of a bundle-branch block, not an S wave.
* ``st_j_mv``: level at the window's J point (+-10 ms mean): the upper quartile
  of the leads' QRS offsets, so a lead whose own offset comes early is not read
  on its S wave; ``st_j60_mv`` at J + 60 ms; ``qrs_pos_mv``/``qrs_neg_mv``: the largest positive and
  negative deflections inside the QRS (both >= 0).

Missing values are NaN; booleans are stored as 0.0/1.0 (NaN when not measured).
"""

from __future__ import annotations

import numpy as np

DEAD_BAND_MV = 0.02
DEAD_BAND_SHARE = 0.04
NOTCH_MIN_MV = 0.04
NOTCH_PROMINENCE_SHARE = 0.08
MONO_S_SHARE = 0.2  # a terminal negative deflection this small (share of R) leaves an R monophasic (discordant ST onset) ...
MONO_Q_SHARE = 0.1  # ... and so does an initial one this small
M_NOTCH_S_SHARE = 0.25  # R-s-R' with the s this shallow (share of the smaller R) is one notched, M-shaped R
RSR_MIN_MV = 0.05

MORPHOLOGY = (
    "q_dur_ms", "q_amp_mv", "r_dur_ms", "s_dur_ms", "r_peak_time_ms", "qrs_pos_mv", "qrs_neg_mv", "st_j_mv", "st_j60_mv",
    "r_notched", "qs_pattern", "qr_pattern", "rs_pattern", "monophasic_r", "rsr_prime", "r_prime_amp_mv",
)


def _lobes(seg: np.ndarray, band: float) -> list[dict[str, float]]:
    """Signed lobes of ``seg`` outside the dead band: start/end (zero crossings), peak index and amplitude.

    Samples inside the band belong to no lobe; two runs of one sign with only
    band samples between them are one wave, marked ``split`` (a notch).
    """
    sign = np.where(seg > band, 1, np.where(seg < -band, -1, 0))
    idx = np.flatnonzero(sign)
    lobes: list[dict[str, float]] = []
    for k in idx:
        s = float(sign[k])
        if lobes and lobes[-1]["sign"] == s:
            lobe = lobes[-1]
            if k > lobe["last"] + 1:
                lobe["split"] = 1.0
            lobe["last"] = float(k)
            if s * seg[k] > s * lobe["amp"]:
                lobe["peak"], lobe["amp"] = float(k), float(seg[k])
        else:
            lobes.append({"sign": s, "first": float(k), "last": float(k), "peak": float(k), "amp": float(seg[k]), "split": 0.0})
    n = seg.size
    for lobe in lobes:  # extend to the zero crossings on each side
        s, lo, hi = lobe["sign"], int(lobe["first"]), int(lobe["last"])
        while lo > 0 and s * seg[lo - 1] > 0:
            lo -= 1
        while hi < n - 1 and s * seg[hi + 1] > 0:
            hi += 1
        lobe["start"], lobe["end"] = float(lo), float(hi)
    return lobes


def _notched(seg: np.ndarray, lobe: dict[str, float]) -> bool:
    """Two peaks in one positive wave with a dip of at least NOTCH_PROMINENCE_SHARE of its height between them."""
    from scipy.signal import find_peaks

    a, b = int(lobe["start"]), int(lobe["end"])
    part = seg[a : b + 1]
    height = float(part.max()) if part.size else 0.0
    if height <= 0 or part.size < 5:
        return False
    prominence = max(NOTCH_MIN_MV, NOTCH_PROMINENCE_SHARE * height)
    padded = np.r_[0.0, part, 0.0]
    peaks, _ = find_peaks(padded, prominence=prominence)
    return bool(peaks.size >= 2 or lobe.get("split", 0.0) > 0)


J_SETTLE_MV_S = 3.0  # the J point is where the return from the last QRS wave slows below this (mV/s) ...
J_SETTLE_MAX_MS = 50.0  # ... at most this long after the QRS offset


def _settled(xl: np.ndarray, on: int, off: int, j: int, fs_hz: float) -> int:
    """The J point: from ``j``, on while the signal still returns faster than J_SETTLE_MV_S (a slow S upstroke).

    The QRS offset is where the QRS slope has faded against its own peak; on a
    deep S wave (V2-V5) the signal can still be 0.1-0.2 mV below the PR level
    there, and the ST level read at that point would be an S wave, not an ST
    depression.
    """
    limit = J_SETTLE_MV_S / fs_hz  # mV per sample
    stop = min(j + int(J_SETTLE_MAX_MS * fs_hz / 1000.0), xl.size - 2)
    step = max(int(round(0.004 * fs_hz)), 1)  # slope over 4 ms: steady against sample noise
    while j < stop and abs(float(xl[min(j + step, xl.size - 1)] - xl[j])) / step > limit:
        j += 1
    return j


def _rebound_mv(xl: np.ndarray, trough: int, j: int) -> float:
    """How far (mV) the signal comes back up from a terminal S trough at ``trough`` by the J point ``j``."""
    if j <= trough:
        return 0.0
    return float(np.max(xl[trough : j + 1]) - xl[trough])


PR_SEARCH_MS = 80.0  # the PR level is the flattest 20 ms within this span before QRS onset


def pr_level(xl: np.ndarray, on: int, fs_hz: float) -> float:
    """The PR (isoelectric) level before a QRS: mean of the flattest 20 ms in the PR_SEARCH_MS before its onset.

    Reading the 20 ms right before the onset lands on the q or R upstroke when the onset is marked late.
    """
    width = max(int(round(0.02 * fs_hz)), 2)
    lo = max(on - int(round(PR_SEARCH_MS * fs_hz / 1000.0)), 0)
    seg = xl[lo : on + 1]
    if seg.size <= width:
        return float(np.mean(xl[max(on - width, 0) : on + 1]))
    views = np.lib.stride_tricks.sliding_window_view(seg, width)
    k = int(np.argmin(np.ptp(views, axis=1)))
    return float(np.mean(views[k]))


def beat_morphology(xl: np.ndarray, on: int, off: int, fs_hz: float, j_point: int = -1) -> dict[str, float]:
    """Morphology of one beat (keys :data:`MORPHOLOGY`) from QRS ``on``..``off`` on the 40 Hz signal ``xl``.

    ``j_point``: where the ST levels are read (the window's J point, see :func:`global_j_point`);
    the lead's own QRS offset when -1.
    """
    out = {k: np.nan for k in MORPHOLOGY}
    n = xl.size
    pad = max(int(round(0.02 * fs_hz)), 1)
    half = max(int(round(0.01 * fs_hz)), 1)
    j = j_point if j_point >= 0 else off
    if on < 0 or off <= on or on - pad < 0 or max(off, j) + half >= n:
        return out
    ms = 1000.0 / fs_hz
    iso = pr_level(xl, on, fs_hz)
    seg = xl[on : off + 1] - iso
    out["qrs_pos_mv"] = max(float(seg.max()), 0.0)
    out["qrs_neg_mv"] = max(-float(seg.min()), 0.0)
    j = _settled(xl, on, off, j, fs_hz)
    out["st_j_mv"] = float(np.mean(xl[j - half : j + half + 1])) - iso
    j60 = j + int(round(0.06 * fs_hz))
    if j60 + half < n:
        out["st_j60_mv"] = float(np.mean(xl[j60 - half : j60 + half + 1])) - iso
    band = max(DEAD_BAND_MV, DEAD_BAND_SHARE * float(np.ptp(seg)))
    lobes = _lobes(seg, band)
    pos = [k for k, lobe in enumerate(lobes) if lobe["sign"] > 0]
    if not lobes:
        return out
    if not pos:  # QS: the whole complex is negative
        out.update(q_dur_ms=(off - on) * ms, q_amp_mv=out["qrs_neg_mv"], r_dur_ms=0.0, s_dur_ms=0.0, r_peak_time_ms=np.nan,
                   r_notched=0.0, qs_pattern=1.0, qr_pattern=0.0, rs_pattern=0.0, monophasic_r=0.0, rsr_prime=0.0, r_prime_amp_mv=0.0)
        return out
    first_r = pos[0]
    r = lobes[first_r]
    q = lobes[0] if first_r == 1 else None
    s = lobes[first_r + 1] if first_r + 1 < len(lobes) and lobes[first_r + 1]["sign"] < 0 else None
    r_prime = lobes[first_r + 2] if s is not None and first_r + 2 < len(lobes) and lobes[first_r + 2]["sign"] > 0 else None
    if r_prime is not None and r_prime["amp"] < RSR_MIN_MV:
        r_prime = None
    last_r = r_prime or r
    r_amp = r["amp"]
    s_amp = -s["amp"] if s is not None else 0.0
    q_amp = -q["amp"] if q is not None else 0.0
    out["q_dur_ms"] = (q["end"] + 1) * ms if q is not None else 0.0
    out["q_amp_mv"] = q_amp
    out["r_dur_ms"] = (r["end"] - r["start"] + 1) * ms
    out["s_dur_ms"] = ((s["end"] - s["start"] + 1) * ms) if s is not None else 0.0
    out["r_peak_time_ms"] = last_r["peak"] * ms
    m_shape = r_prime is not None and s_amp < M_NOTCH_S_SHARE * min(r_amp, r_prime["amp"])
    out["r_notched"] = float(m_shape or _notched(seg, max((lobes[k] for k in pos), key=lambda lobe: lobe["amp"])))
    out["qs_pattern"] = 0.0
    out["qr_pattern"] = float(q is not None and r_amp > max(s_amp, q_amp))
    out["rs_pattern"] = float(q is None and s is not None and r_amp < s_amp)
    big = max(r_amp, r_prime["amp"] if r_prime is not None else 0.0)
    s_wave = s_amp if s is None or r_prime is not None else min(s_amp, _rebound_mv(xl, on + int(s["peak"]), j))
    out["monophasic_r"] = float(q_amp < MONO_Q_SHARE * big and s_wave < MONO_S_SHARE * big and (r_prime is None or m_shape))
    out["rsr_prime"] = float(r_prime is not None)
    out["r_prime_amp_mv"] = r_prime["amp"] if r_prime is not None else 0.0
    return out


def global_j_point(qrs_off_by_lead: np.ndarray) -> np.ndarray:
    """Per beat, the J point of the window: the upper quartile of the leads' QRS offsets (-1 where none).

    The J point ends the QRS in every lead; a lead whose own offset comes early
    (its last wave fading into the baseline) would read the ST level on the S wave.
    """
    import warnings

    marks = np.asarray(qrs_off_by_lead, dtype=np.float64)
    marks = np.where(marks >= 0, marks, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        j = np.nanpercentile(marks, 75, axis=0) if marks.size else np.zeros(0)
    return np.where(np.isfinite(j), np.round(j), -1).astype(np.int64)


def lead_morphology(xl: np.ndarray, qrs_on: np.ndarray, qrs_off: np.ndarray, fs_hz: float, j_point: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per-beat morphology arrays (keys :data:`MORPHOLOGY`) of one lead (``j_point``: per-beat ST read point, see :func:`global_j_point`)."""
    jp = np.full(len(qrs_on), -1, dtype=np.int64) if j_point is None else j_point
    rows = [beat_morphology(xl, int(a), int(b), fs_hz, int(j)) for a, b, j in zip(qrs_on, qrs_off, jp)]
    return {k: np.array([r[k] for r in rows], dtype=np.float64) for k in MORPHOLOGY}


#: Lead regions of ERB's MI and ischemia criteria.
REGIONS: dict[str, tuple[str, ...]] = {
    "anterior": ("V1", "V2", "V3", "V4"),
    "inferior": ("II", "III", "AVF"),
    "lateral": ("I", "AVL", "V5", "V6"),
}
#: Pathological Q (ERB): QS; or q > 30 ms deeper than 0.075 mV (anterior) or than 1/5 of the R after it (inferior,
#: lateral); or a deep S after a tiny r.
PATHOLOGICAL_Q = {"q_dur_ms": 30.0, "q_amp_anterior_mv": 0.075, "q_r_ratio": 0.2, "tiny_r_mv": 0.1, "deep_s_mv": 0.5}


def pathological_q(lead: str, m: dict[str, np.ndarray], r_amp_mv: np.ndarray, s_amp_mv: np.ndarray) -> np.ndarray:
    """Per-beat pathological Q (0/1, NaN where not measured) for a lead by its region's rule (see ``PATHOLOGICAL_Q``)."""
    t = PATHOLOGICAL_Q
    key = lead.strip().upper()
    with np.errstate(invalid="ignore"):
        qs = m["qs_pattern"] > 0.5
        long_q = m["q_dur_ms"] > t["q_dur_ms"]
        if key in REGIONS["anterior"]:
            deep = m["q_amp_mv"] > t["q_amp_anterior_mv"]
        else:
            deep = m["q_amp_mv"] > t["q_r_ratio"] * np.abs(r_amp_mv)
        tiny_r = (np.abs(r_amp_mv) < t["tiny_r_mv"]) & (np.abs(s_amp_mv) > t["deep_s_mv"]) & (m["q_dur_ms"] <= 0)
        value = (qs | (long_q & deep) | tiny_r).astype(np.float64)
    return np.where(np.isfinite(m["q_dur_ms"]), value, np.nan)
