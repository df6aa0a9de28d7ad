"""Single-lead wave delineation around known R peaks (the engine of :mod:`measure`).

Per lead (``fs_hz`` explicit, everything in samples local to the window):

1. Baseline: two median filters (200 ms, then 600 ms) estimate the baseline,
   which is subtracted (``y``). ``xf`` is ``y`` low-passed at 40 Hz; ``d`` is
   the slope of ``xf`` in mV/s.
2. QRS: the lead's main deflection is the largest ``|xf|`` within +-50 ms of
   the beat. From there the QRS extends left and right while ``|d|`` keeps
   reaching ``k_sig`` of the beat's maximum slope (gaps up to ``gap_ms``
   allowed, so notches and small q/s waves are kept). The onset is where the
   slope falls below ``k_on`` times the first slope peak; the offset where it
   falls below ``k_off`` times the last. With ``qrs_median_beat``, dominant beats
   then take their QRS offset from the lead's median beat (same rule, projected by
   alignment: :func:`ecgtrace.tools._delineate_consistency.median_beat_qrs`).
3. P and T are read on ``xs``: ``y`` with every QRS bridged by a straight line
   (so the filter cannot smear the QRS into its neighbours), low-passed at
   ``pt_lowpass_hz`` (20 Hz).
4. T: the largest interior extremum of ``xs`` (relative to the PR level)
   between the QRS end and a bound that scales with the RR interval (QT
   ceiling ``qt_max_ms * RR^(1/3)``). Its end (and onset) come from the
   trapezium-area method (Vazquez-Seisdedos et al. 2011): from the steepest
   point after the peak, the end is the point that maximizes the trapezium
   area between the curve and a fixed far point ``t_far_ms`` later.
5. P: the largest interior extremum of ``xs`` in the 340 ms before the QRS
   onset (and after the previous T end). A beat has a P wave when it is at
   least ``p_min_mv``, ``p_snr`` times the local noise, and falls back by half
   its height on both sides. Onset and offset: walking out from the steepest
   point on each side until the slope fades below ``k_p`` of it.
   :func:`ecgtrace.tools._delineate_p.p_wave_rule` decides per lead whether P waves are present at all.

Missing points are ``-1``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
import numpy as np

from ecgtrace.tools._delineate_consistency import median_beat_qrs
from ecgtrace.tools._delineate_net import net_beat_marks
from ecgtrace.tools._delineate_filters import bridge_nan, bridge_qrs, lowpass, preprocess

POINTS = ("p_on", "p_peak", "p_off", "qrs_on", "r_peak", "qrs_off", "t_on", "t_peak", "t_off")
AMPLITUDES = ("iso_mv", "p_amp_mv", "r_amp_mv", "s_amp_mv", "t_amp_mv", "st_j60_mv")


@dataclass(frozen=True)
class DelineationParams:
    """Tunable constants (durations in ms, fractions of a slope peak).

    Set by a coordinate search on the tuning half of the fixed split in
    ``benchmarks/delineation.py`` (QTDB even positions, LUDB 1-60), at the
    internal 500 Hz rate; the other half is reported untouched.
    """

    k_sig: float = 0.07  # slope that still belongs to the QRS (before its main peak), as a fraction of its max
    k_sig_off: float = 0.09  # the same after the main peak
    gap_ms: float = 32.0  # longest stretch of low slope inside one QRS (after the main peak)
    gap_on_ms: float = 12.0  # the same before the main peak (shorter: keeps a close P wave out)
    qrs_search_ms: float = 130.0  # farthest a QRS boundary may lie from the main peak
    k_on: float = 0.06  # onset: slope below this fraction of the first slope peak
    k_off: float = 0.25  # offset: slope below this fraction of the last slope peak
    qrs_bound_hz: float = 40.0  # low-pass of the slope used for the QRS boundaries
    local_min_stop: bool = False  # also stop a QRS boundary at a local minimum of the slope
    t_lo_ms: float = 40.0  # T search starts this long after the QRS end
    qt_max_ms: float = 520.0  # QT ceiling at RR = 1 s (scaled by RR^(1/3))
    t_far_ms: float = 200.0  # trapezium far point after the steepest T descent
    t_biphasic: float = 0.6  # a later opposite lobe this large (vs the T peak) carries the T end
    t_min_mv: float = 0.02  # T smaller than this is "flat": no T marks
    p_window_ms: float = 340.0  # P search span before the QRS onset
    p_gap_ms: float = 20.0  # P search ends this long before the QRS onset
    p_far_ms: float = 50.0  # farthest a P boundary lies from its steepest point
    pt_lowpass_hz: float = 20.0  # low-pass for the P and T analysis
    k_p: float = 0.4  # P boundary: slope below this fraction of the steepest P slope
    p_min_mv: float = 0.015  # minimum P amplitude
    p_quiet_ratio: float = 1.5  # median P amplitude against the peak-to-peak of the T-P stretch before it
    p_share: float = 0.65  # a lead has P waves when found in this share of its narrow-QRS beats ...
    p_pr_iqr_ms: float = 30.0  # ... with a PR interquartile range up to this
    wide_qrs_ms: float = 120.0  # beats wider than max(this, median + 30 ms) count as ventricular (no P)
    p_after_t_peak_ms: float = 0.0  # > 0: P search starts this long after the previous T peak (else after its end)
    p_pr_iqr_locked_ms: float = 20.0  # a PR this steady (interquartile range, >= 4 beats) keeps P waves whatever the T-P stretch holds
    p_span_min_ms: float = 100.0  # a T end closer than this to the next QRS onset leaves no room for a P wave ...
    p_after_t_peak_fast_ms: float = 80.0  # ... then the P search starts this long after the T peak instead
    p_drop: float = 0.3  # the signal must fall back by this share of the P height on both sides
    p_snr: float = 2.0  # P amplitude against the local high-frequency noise (SD)
    qrs_median_beat: bool = True  # QRS on/off of dominant beats from the lead's median beat (_delineate_consistency.median_beat_qrs)
    # Which boundaries come from the wave net (_delineate_net) where it sees the wave, when the caller gives its probabilities;
    # the rules above still find the beat's waves, P presence, peaks and amplitudes, and every boundary the net misses.
    net_qrs: bool = True  # QRS on/off (then the median-beat offset above is not used: it corrects the rules' offset)
    net_p: bool = True  # P on/off (and peak) of a beat the rules give a P wave (the rules decide whether it has one)
    net_t: bool = True  # T off

    def to_json(self) -> dict[str, float | bool]:
        return {k: (v if isinstance(v, bool) else float(v)) for k, v in asdict(self).items()}


def _trapezium(z: np.ndarray, xm: int, xr: int) -> int:
    """Index in [xm, xr] (either order) maximizing the trapezium area to the fixed point xr."""
    if xr == xm:
        return xm
    step = 1 if xr > xm else -1
    idx = np.arange(xm, xr + step, step)
    area = (z[xm] - z[idx]) * np.abs(2 * xr - idx - xm)
    return int(idx[int(np.argmax(area))])


def _slope_fade(slope: np.ndarray, xm: int, bound: int, k: float) -> int:
    """Walk from the steepest point ``xm`` towards ``bound`` until ``|slope|`` < k * ``|slope[xm]|``."""
    step = 1 if bound >= xm else -1
    limit = k * abs(float(slope[xm]))
    i = xm
    while i != bound and abs(float(slope[i])) >= limit:
        i += step
    return i


def _interior_extremum(z: np.ndarray, lo: int, hi: int) -> int:
    """Index of the largest ``|z|`` in [lo, hi) that is a local extremum (not a window edge); -1 if none."""
    if hi - lo < 3:
        return -1
    seg = z[lo:hi]
    a = np.abs(seg)
    inner = np.flatnonzero((a[1:-1] >= a[:-2]) & (a[1:-1] >= a[2:])) + 1
    if inner.size == 0:
        return -1
    return lo + int(inner[np.argmax(a[inner])])


def _qrs_bounds(d: np.ndarray, main: int, lo: int, hi: int, fs_hz: float, p: DelineationParams, db: np.ndarray | None = None) -> tuple[int, int]:
    absd = np.abs(d)
    core = absd[max(main - int(0.08 * fs_hz), lo) : min(main + int(0.08 * fs_hz), hi) + 1]
    dmax = float(core.max()) if core.size else 0.0
    if dmax <= 0:
        return -1, -1
    thr = p.k_sig * dmax
    gap = max(int(p.gap_ms * fs_hz / 1000.0), 1)
    gap_on = max(int(p.gap_on_ms * fs_hz / 1000.0), 1)
    first = main
    i = main
    while i > lo:
        i -= 1
        if absd[i] >= thr:
            first = i
        elif first - i > gap_on:
            break
    last = main
    i = main
    thr_off = p.k_sig_off * dmax
    while i < hi:
        i += 1
        if absd[i] >= thr_off:
            last = i
        elif i - last > gap:
            break
    w = max(int(0.02 * fs_hz), 1)
    # boundaries: walk out on the boundary slope ``db`` until it fades below a
    # fraction of its own peak, or (optionally) stops falling (a local minimum)
    b = absd if db is None else np.abs(db)
    k0 = int(np.argmax(b[first : first + w + 1])) + first
    on, limit = min(first, k0), p.k_on * float(b[k0])
    while on > lo and b[on] >= limit and not (p.local_min_stop and on < k0 and b[on - 1] > b[on]):
        on -= 1
    k1 = max(last - w, 0) + int(np.argmax(b[max(last - w, 0) : last + 1]))
    off, limit = max(last, k1), p.k_off * float(b[k1])
    while off < hi and b[off] >= limit and not (p.local_min_stop and off > k1 and b[off + 1] > b[off]):
        off += 1
    return on, off


def _beat_context(beats: np.ndarray, i: int, med_rr: float) -> tuple[int | None, int | None, float]:
    """(previous R, next R, preceding RR in samples; the median RR for the first beat)."""
    prev_r = int(beats[i - 1]) if i > 0 else None
    next_r = int(beats[i + 1]) if i + 1 < beats.size else None
    rr_prev = float(beats[i] - prev_r) if prev_r is not None else med_rr
    return prev_r, next_r, rr_prev


def _empty_result(nb: int) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {k: np.full(nb, -1, dtype=np.int64) for k in POINTS}
    out.update({k: np.full(nb, np.nan) for k in AMPLITUDES})
    out["p_present"] = np.zeros(nb, dtype=bool)
    out["p_quiet_ratio"] = np.full(nb, np.nan)
    out["p_on_rule"] = np.full(nb, -1, dtype=np.int64)  # the rules' P onset, before the net's: the P-wave decisions read it
    return out


def _net_pair(net: dict[str, np.ndarray] | None, on_key: str, off_key: str, i: int) -> tuple[int, int] | None:
    """Beat ``i``'s net boundaries rounded to samples; None where the net has no such wave for it."""
    if net is None or not (np.isfinite(net[on_key][i]) and np.isfinite(net[off_key][i])):
        return None
    return int(round(float(net[on_key][i]))), int(round(float(net[off_key][i])))


def _qrs_pass(xf: np.ndarray, d: np.ndarray, db: np.ndarray, beats: np.ndarray, fs_hz: float, p: DelineationParams, out: dict[str, np.ndarray],
              net: dict[str, np.ndarray] | None = None) -> None:
    """QRS onset, main peak and offset of every beat, with the PR level, R/S amplitudes and ST at J+60 ms.

    ``net``: the wave net's per-beat marks (:func:`~ecgtrace.tools._delineate_net.net_beat_marks`); with
    ``p.net_qrs`` its QRS boundaries replace the slope rule's wherever it has them.
    """
    n = xf.size
    ms = fs_hz / 1000.0
    rr = np.diff(beats)
    med_rr = float(np.median(rr)) if rr.size else fs_hz
    for i, r in enumerate(beats):
        if not 0 <= r < n:
            continue
        prev_r, next_r, rr_prev = _beat_context(beats, i, med_rr)
        lo_q = max(r - int(p.qrs_search_ms * ms), 0, (prev_r + int(0.6 * rr_prev)) if prev_r is not None else 0)
        hi_q = min(r + int(p.qrs_search_ms * ms), n - 1, (next_r - int(0.25 * (next_r - r))) if next_r is not None else n - 1)
        w = int(0.05 * fs_hz)
        a, b = max(r - w, 0), min(r + w + 1, n)
        main = a + int(np.argmax(np.abs(xf[a:b])))
        on, off = _qrs_bounds(d, main, lo_q, hi_q, fs_hz, p, db)
        learned = _net_pair(net, "qrs_on", "qrs_off", i) if p.net_qrs else None
        if learned is not None:
            on, off = learned
            if not on <= main <= off:  # the largest deflection near the beat is not in its QRS (a pacing spike): R is within
                main = on + int(np.argmax(np.abs(xf[on : off + 1])))
        if on < 0:
            continue
        out["qrs_on"][i], out["qrs_off"][i], out["r_peak"][i] = on, off, main
        iso = float(np.mean(xf[max(on - int(0.02 * fs_hz), 0) : on + 1]))
        out["iso_mv"][i] = iso
        qrs = xf[on : off + 1] - iso
        k_max = int(np.argmax(qrs))
        out["r_amp_mv"][i] = max(float(qrs[k_max]), 0.0)
        out["s_amp_mv"][i] = min(float(qrs[k_max:].min()), 0.0)
        j60 = off + int(round(60 * ms))
        if j60 < n:
            h = max(int(0.01 * fs_hz), 1)
            out["st_j60_mv"][i] = float(np.mean(xf[max(j60 - h, 0) : j60 + h + 1])) - iso


def _t_wave(z: np.ndarray, on: int, off: int, next_r: int | None, rr_prev: float, fs_hz: float, p: DelineationParams) -> tuple[int, int, int, float] | None:
    """``(t_on, t_peak, t_off, t_amp_mv)`` of one beat on ``z`` (P/T signal minus the PR level); None: no T."""
    n = z.size
    ms = fs_hz / 1000.0
    rr_s = min(max(rr_prev / fs_hz, 0.3), 2.0)
    t_lo = off + int(p.t_lo_ms * ms)
    t_hi = min(on + int(p.qt_max_ms * ms * rr_s ** (1 / 3)), n - 1)
    if next_r is not None:
        t_hi = min(t_hi, next_r - int(0.12 * fs_hz))
    tp = _interior_extremum(z, t_lo, t_hi)
    if tp < 0 or abs(z[tp]) < p.t_min_mv:
        return None
    zz = (1.0 if z[tp] > 0 else -1.0) * z
    slope = np.gradient(zz)
    # biphasic T: the end follows the last lobe, which may be the smaller one
    last, last_zz = tp, zz
    lobe = _interior_extremum(np.minimum(zz, 0.0), tp + int(0.04 * fs_hz), t_hi)
    if lobe >= 0 and -zz[lobe] >= max(p.t_biphasic * zz[tp], p.t_min_mv):
        last, last_zz = lobe, -zz
    last_slope = np.gradient(last_zz)
    t_end = -1
    seg_hi = min(last + int(0.15 * fs_hz), t_hi + int(0.1 * fs_hz), n - 1)
    if seg_hi > last + 1:
        xm = last + int(np.argmin(last_slope[last:seg_hi]))
        far = min(xm + int(p.t_far_ms * ms), n - 1)
        if next_r is not None:
            far = min(far, next_r - int(0.1 * fs_hz))
        if far > xm:
            t_end = _trapezium(last_zz, xm, far)
    t_on = -1
    if t_lo < tp - 1:
        xm_on = t_lo + int(np.argmax(slope[t_lo:tp]))
        near = max(xm_on - int(0.12 * fs_hz), off)
        t_on = _trapezium(zz, xm_on, near) if near < xm_on else off
    return t_on, tp, t_end, float(z[tp])


def _p_bounds(z: np.ndarray, on: int, prev_r: int | None, prev_t_peak: int, prev_t_off: int, fs_hz: float, p: DelineationParams) -> tuple[int, int]:
    """The P search span ``[p_lo, p_hi)`` before a QRS onset (after the previous beat's T)."""
    ms = fs_hz / 1000.0
    p_hi = on - int(p.p_gap_ms * ms)
    p_lo = max(on - int(p.p_window_ms * ms), 0)
    if prev_r is not None:
        p_lo = max(p_lo, prev_r + int(0.2 * fs_hz))
        if p.p_after_t_peak_ms > 0 and prev_t_peak >= 0:
            p_lo = max(p_lo, prev_t_peak + int(p.p_after_t_peak_ms * ms))
        elif prev_t_off >= 0 and (on - prev_t_off >= int(p.p_span_min_ms * ms) or prev_t_peak < 0):
            p_lo = max(p_lo, prev_t_off + int(0.02 * fs_hz))
        elif prev_t_off >= 0:
            # fast rates: the P wave rides on the end of the T wave, whose marked end may already hold it
            p_lo = max(p_lo, prev_t_peak + int(p.p_after_t_peak_fast_ms * ms))
    return p_lo, p_hi


def p_candidate(z: np.ndarray, hf_noise: np.ndarray, p_lo: int, p_hi: int, limit: int, fs_hz: float, p: DelineationParams) -> dict[str, float] | None:
    """The largest P-like deflection of ``z`` in ``[p_lo, p_hi)``: peak, onset, offset, amplitude and whether it passes as a P wave.

    ``limit`` bounds the offset walk (the QRS onset). A P wave stands ``p_min_mv``
    and ``p_snr`` x the local noise tall and falls back by ``p_drop`` of its
    height on both sides.
    """
    ms = fs_hz / 1000.0
    pp = _interior_extremum(z, p_lo, p_hi)
    if pp < 0:
        return None
    amp = float(z[pp])
    noise = float(np.std(hf_noise[max(p_lo, 0) : max(p_hi, p_lo + 1)])) if p_hi > p_lo else 0.0
    zz = (1.0 if amp > 0 else -1.0) * z
    slope = np.gradient(zz)
    left = max(pp - int(0.08 * fs_hz), 0)
    right = min(pp + int(0.08 * fs_hz), limit)
    if pp - left < 2 or right - pp < 2:
        return None
    xm_l = left + int(np.argmax(slope[left:pp]))
    xm_r = pp + int(np.argmin(slope[pp:right]))
    p_on = _slope_fade(slope, xm_l, max(xm_l - int(p.p_far_ms * ms), 0), p.k_p)
    p_off = _slope_fade(slope, xm_r, min(xm_r + int(p.p_far_ms * ms), limit), p.k_p)
    drop = min(zz[pp] - zz[p_on], zz[pp] - zz[p_off])
    present = abs(amp) >= p.p_min_mv and abs(amp) >= p.p_snr * noise and drop >= p.p_drop * abs(amp)
    return {"peak": pp, "on": p_on, "off": p_off, "amp": amp, "present": bool(present)}


def _t_end_limit(out: dict[str, np.ndarray], i: int, next_r: int | None, n: int, fs_hz: float) -> int:
    """The latest sample beat ``i``'s T wave may end on: before the next beat's QRS onset and 100 ms before its R peak."""
    limit = n - 1 if next_r is None else next_r - int(0.1 * fs_hz)
    if i + 1 < out["qrs_on"].size and out["qrs_on"][i + 1] >= 0:
        limit = min(limit, int(out["qrs_on"][i + 1]) - 1)
    return limit


def _pt_pass(xs: np.ndarray, hf_noise: np.ndarray, beats: np.ndarray, fs_hz: float, p: DelineationParams, out: dict[str, np.ndarray],
             net: dict[str, np.ndarray] | None = None) -> None:
    """T and P waves of every beat whose QRS was found (``net``: see :func:`_qrs_pass`; ``p.net_t``, ``p.net_p``)."""
    rr = np.diff(beats)
    med_rr = float(np.median(rr)) if rr.size else fs_hz
    for i in range(beats.size):
        on, off = int(out["qrs_on"][i]), int(out["qrs_off"][i])
        if on < 0:
            continue
        prev_r, next_r, rr_prev = _beat_context(beats, i, med_rr)
        z = xs - float(out["iso_mv"][i])
        t = _t_wave(z, on, off, next_r, rr_prev, fs_hz, p)
        if t is not None:
            out["t_on"][i], out["t_peak"][i], out["t_off"][i], out["t_amp_mv"][i] = t
            learned = _net_pair(net, "t_on", "t_off", i) if p.net_t else None
            if learned is not None and t[1] < learned[1] <= _t_end_limit(out, i, next_r, xs.size, fs_hz):
                out["t_off"][i] = learned[1]  # the net's T end, where it ends the T wave the rules found
        prev_t_peak = int(out["t_peak"][i - 1]) if i > 0 else -1
        prev_t_off = int(out["t_off"][i - 1]) if i > 0 else -1
        p_lo, p_hi = _p_bounds(z, on, prev_r, prev_t_peak, prev_t_off, fs_hz, p)
        cand = p_candidate(z, hf_noise, p_lo, p_hi, on, fs_hz, p)
        if cand is None:
            continue
        # the T-P stretch before a true P wave is quiet; in AF it holds more f waves like this one
        tp_lo = max(prev_r + int(0.2 * fs_hz) if prev_r is not None else 0, prev_t_off + int(0.02 * fs_hz) if prev_t_off >= 0 else 0)
        tp_hi = int(cand["on"]) - int(0.01 * fs_hz)
        if tp_hi - tp_lo >= int(0.06 * fs_hz):
            out["p_quiet_ratio"][i] = abs(cand["amp"]) / max(float(np.ptp(z[tp_lo:tp_hi])), 1e-6)
        out["p_amp_mv"][i] = cand["amp"]
        if cand["present"]:
            out["p_peak"][i], out["p_on"][i], out["p_off"][i] = int(cand["peak"]), int(cand["on"]), int(cand["off"])
            out["p_present"][i] = True
            out["p_on_rule"][i] = int(cand["on"])
            learned = _net_pair(net, "p_on", "p_off", i) if p.net_p else None
            if learned is not None and learned[1] < on:
                # the net's P wave before this QRS; where the rules' peak lies outside it, they took another deflection for it
                out["p_on"][i], out["p_off"][i] = learned
                if not learned[0] <= cand["peak"] <= learned[1]:
                    peak = learned[0] + int(np.argmax(np.abs(z[learned[0] : learned[1] + 1])))
                    out["p_peak"][i], out["p_amp_mv"][i] = peak, float(z[peak])


#: Keys of :func:`delineate_lead`'s result that hold the lead's filtered signals (not per-beat values).
SIGNAL_KEYS = ("xf", "xs", "xl")


def delineate_lead(x_mv: np.ndarray, fs_hz: float, beats: np.ndarray, params: DelineationParams | None = None,
                   wave_prob: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Fiducial points (local sample indices, -1 when missing) and amplitudes (mV) per beat.

    ``wave_prob``: the wave net's class probabilities of this lead, ``(n, 4)`` on the same
    samples (:func:`~ecgtrace.tools._wave_net.wave_probabilities`); None delineates by
    the rules alone.

    Also returns (:data:`SIGNAL_KEYS`) the lead's 40 Hz signal ``xf``, its
    bridged P/T signal ``xs`` and ``xl``, the 40 Hz signal with its baseline
    left in (amplitudes and ST levels are read on it against each beat's PR level).
    """
    p = params or DelineationParams()
    n = int(np.asarray(x_mv).shape[0])
    beats = np.asarray(beats, dtype=np.int64)
    out = _empty_result(beats.size)
    if beats.size == 0 or n < int(0.3 * fs_hz):  # nothing to delineate: no marks, and the signals as they are
        out["xf"] = out["xs"] = out["xl"] = bridge_nan(x_mv)
        return out
    y, xf, _, d = preprocess(x_mv, fs_hz)
    db = d if p.qrs_bound_hz >= 40.0 else np.gradient(lowpass(y, p.qrs_bound_hz, fs_hz)) * fs_hz
    net = net_beat_marks(wave_prob, beats, fs_hz) if wave_prob is not None else None
    _qrs_pass(xf, d, db, beats, fs_hz, p, out, net)
    xs, hf_noise = bridge_qrs(y, out["qrs_on"], out["qrs_off"], fs_hz, p.pt_lowpass_hz)
    _pt_pass(xs, hf_noise, beats, fs_hz, p, out, net)
    out["xf"], out["xs"] = xf, xs
    if p.qrs_median_beat and not (net is not None and p.net_qrs):
        median_beat_qrs(out, fs_hz, lambda dt, main, lo, hi: _qrs_bounds(dt, main, lo, hi, fs_hz, p, None))
    out["xl"] = lowpass(bridge_nan(x_mv), 40.0, fs_hz)
    return out
