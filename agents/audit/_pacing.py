"""Pacing spikes seen on the signal, for ``paced_beat_pct`` where the record has no reference beat symbols.

A pacemaker's stimulus lasts about 0.5-1 ms; after the recorder's filters it is
a deflection one or two samples wide at 100-500 Hz, seen at the same instant in
most leads (the stimulus projects onto every lead). Physiological waves are
wider: at 100 Hz even a narrow QRS spans 6 or more samples. So a spike is
where the signal leaves a 5-sample running median by at least
:data:`SPIKE_RESIDUAL_MV` in at least :data:`SPIKE_MIN_LEADS` leads at once.

A ventricular stimulus comes at the start of the paced QRS, well before its
main deflection: a beat counts as paced when a spike lies between
:data:`SPIKE_BEFORE_ONSET_MS` before its QRS onset (median over the leads) and
:data:`SPIKE_BEFORE_R_MS` before its R peak. A narrow beat's R peak comes
20-50 ms after its onset, so its own peak never falls in that span.

This is what the detector *sees*: spikes smeared below the threshold by a low
sampling rate are not seen, as P waves the delineator misses are not. The
thresholds were set on the tuned PTB-XL records (ecg_id 1-150, 100 Hz; two of
them paced, 143 and 144): there 83 % of the paced beats show a spike, and no
unpaced record more than 38 % of its beats (ecg_id 60, a 20-30 ms QRS that
itself spans two samples, narrow, so ``paced_rhythm``'s wide-QRS criterion
rules it out); see ``benchmarks/audit_items.py`` for the split.

A record whose every lead was scaled to one size (LUDB: 1.000 mV peak to peak)
has no mV, but a stimulus keeps its size against the lead's own QRS: such a
record is read with every lead at 1 mV peak to peak (:func:`unit_peak_to_peak`),
so the threshold is a tenth of the lead's size. Checked on the tuned LUDB
records (1-60): 3 of 3 ventricular-paced records show spikes before at least
half of their beats, and no other record with a wide QRS does.
"""

from __future__ import annotations

import numpy as np
from scipy.signal import medfilt

PACING_VERSION = "3"  # 3: the spike may lie 40 ms before the QRS onset (was 20); 2: records without mV are read at 1 mV per lead
MEDIAN_SAMPLES = 5  # running median that removes deflections of 1-2 samples and keeps waves of 3 or more
SPIKE_RESIDUAL_MV = 0.1  # a spike leaves the running median by at least this ...
SPIKE_MIN_LEADS = 5  # ... in at least this many leads at the same sample
#: A ventricular spike lies from this long before the QRS onset ... The wave net (measure version 7) marks a paced
#: QRS onset as LUDB's cardiologists do, after the stimulus (20-40 ms after it on PTB-XL 143 at 100 Hz), where the rules
#: had marked it before. On the tuned records (PTB-XL 1-150, LUDB 1-60) 20 ms then found spikes before 67 % of 143's
#: beats and 33 % of LUDB 8's; 30 to 60 ms all give 83 % and 67 % (the rules' figures), with no unpaced record above
#: 38 % (PTB-XL 60, as before): 40 ms is the middle of that plateau.
SPIKE_BEFORE_ONSET_MS = 40.0
SPIKE_BEFORE_R_MS = 50.0  # ... up to this long before the R peak


def spike_leads(signal_mv: np.ndarray) -> np.ndarray:
    """Per sample: how many leads leave their 5-sample running median by at least SPIKE_RESIDUAL_MV."""
    x = np.nan_to_num(np.asarray(signal_mv, dtype=float))
    if x.ndim == 1:
        x = x[:, None]
    if x.shape[0] < MEDIAN_SAMPLES:
        return np.zeros(x.shape[0], dtype=int)
    smooth = np.stack([medfilt(x[:, j], MEDIAN_SAMPLES) for j in range(x.shape[1])], axis=1)
    return (np.abs(x - smooth) >= SPIKE_RESIDUAL_MV).sum(axis=1)


def unit_peak_to_peak(signal_mv: np.ndarray) -> np.ndarray:
    """Every lead scaled to 1 mV peak to peak (a flat or all-NaN lead is left as it is)."""
    x = np.asarray(signal_mv, dtype=float)
    x2 = x[:, None] if x.ndim == 1 else x
    if x2.shape[0] == 0:
        return x
    finite = np.isfinite(x2)
    ptp = np.where(finite, x2, -np.inf).max(axis=0) - np.where(finite, x2, np.inf).min(axis=0)  # -inf on an all-NaN lead
    scale = np.where(np.isfinite(ptp) & (ptp > 0), ptp, 1.0)
    out = x2 / scale[None, :]
    return out[:, 0] if x.ndim == 1 else out


def paced_beats(signal_mv: np.ndarray, fs_hz: float, qrs_on: np.ndarray, r_peaks: np.ndarray) -> np.ndarray:
    """Per beat (samples relative to the window): True when a pacing spike precedes its main deflection.

    ``qrs_on`` is each beat's QRS onset (NaN or negative: not delineated, and the
    beat is not called paced); ``r_peaks`` its R peak.
    """
    x = np.asarray(signal_mv, dtype=float)
    counts = spike_leads(x)
    min_leads = min(SPIKE_MIN_LEADS, x.shape[1] if x.ndim == 2 else 1)  # fewer leads than that: every lead must see it
    out = np.zeros(len(r_peaks), dtype=bool)
    for k, (on, r) in enumerate(zip(np.asarray(qrs_on, dtype=float), np.asarray(r_peaks, dtype=float))):
        if not np.isfinite(on) or on < 0:
            continue
        lo = max(int(round(on - SPIKE_BEFORE_ONSET_MS * fs_hz / 1000.0)), 0)
        hi = min(int(round(r - SPIKE_BEFORE_R_MS * fs_hz / 1000.0)), counts.size - 1)
        out[k] = hi >= lo and bool(counts[lo : hi + 1].max() >= min_leads)
    return out
