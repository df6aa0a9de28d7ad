"""Pacing spikes on the signal (``paced_beat_pct`` without reference symbols), on synthetic beats with known spikes."""

from __future__ import annotations

import numpy as np
import pytest

from ecgtrace.agents.audit._pacing import SPIKE_BEFORE_ONSET_MS, SPIKE_MIN_LEADS, SPIKE_RESIDUAL_MV, paced_beats, spike_leads

N_LEADS = 12


def _beats(fs_hz: float, qrs_ms: float, spike_mv: float | None, spike_before_onset_ms: float = 10.0, spike_leads_n: int = N_LEADS,
           n_beats: int = 8, rr_s: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """12 leads of Gaussian QRS complexes (width ``qrs_ms``, lead gains 0.5-1.6 mV, alternate signs) on a flat baseline.

    With ``spike_mv``, a one-sample stimulus of that height (alternate signs over the leads, as a stimulus
    projects onto each lead) ``spike_before_onset_ms`` before each QRS onset, in the first ``spike_leads_n`` leads.
    Returns (signal, QRS onsets, R peaks), samples relative to the window.
    """
    n = int(round((n_beats + 1) * rr_s * fs_hz))
    t = np.arange(n)
    x = np.zeros((n, N_LEADS))
    gains = np.linspace(0.5, 1.6, N_LEADS) * np.where(np.arange(N_LEADS) % 2 == 0, 1.0, -1.0)
    sigma = qrs_ms / 6.0 * fs_hz / 1000.0  # +-3 sigma spans the QRS
    r_peaks = np.array([int(round((k + 0.5) * rr_s * fs_hz)) for k in range(n_beats)])
    onsets = r_peaks - int(round(3 * sigma))
    for r in r_peaks:
        x += np.exp(-0.5 * ((t - r) / sigma) ** 2)[:, None] * gains
    if spike_mv is not None:
        for on in onsets:
            s = int(round(on - spike_before_onset_ms * fs_hz / 1000.0))
            x[s, :spike_leads_n] += spike_mv * np.where(np.arange(spike_leads_n) % 2 == 0, 1.0, -1.0)
    return x, onsets.astype(float), r_peaks.astype(float)


@pytest.mark.parametrize("fs_hz", [100.0, 500.0])
def test_a_stimulus_before_each_wide_qrs_marks_every_beat_paced(fs_hz: float) -> None:
    x, on, r = _beats(fs_hz, qrs_ms=160.0, spike_mv=0.4)
    assert paced_beats(x, fs_hz, on, r).all()


@pytest.mark.parametrize(("fs_hz", "qrs_ms"), [(100.0, 160.0), (100.0, 80.0), (500.0, 160.0), (500.0, 80.0)])
def test_smooth_beats_without_a_stimulus_are_not_paced(fs_hz: float, qrs_ms: float) -> None:
    """Physiological waves span more samples than the 5-sample median removes: no residual, no spike."""
    x, on, r = _beats(fs_hz, qrs_ms=qrs_ms, spike_mv=None)
    assert not paced_beats(x, fs_hz, on, r).any()
    # hand check: at 500 Hz nothing leaves the median; at 100 Hz only R peaks do (a 160 ms Gaussian of 1.6 mV: sigma 2.67
    # samples, the median of 5 reads exp(-0.5 (1/2.67)^2) = 0.93 of the peak, a 0.11 mV residual), and those lie after
    # the span a spike is looked for in (R - 50 ms)
    hits = np.flatnonzero(spike_leads(x) > 0)
    assert hits.size == 0 if fs_hz == 500.0 else np.abs(hits[:, None] - r[None, :]).min(axis=1).max() < 0.05 * fs_hz


def test_a_stimulus_seen_in_too_few_leads_or_too_small_is_not_a_spike() -> None:
    fs = 100.0
    x, on, r = _beats(fs, qrs_ms=160.0, spike_mv=0.4, spike_leads_n=SPIKE_MIN_LEADS - 1)
    assert not paced_beats(x, fs, on, r).any()
    x, on, r = _beats(fs, qrs_ms=160.0, spike_mv=0.8 * SPIKE_RESIDUAL_MV)  # below the residual threshold in every lead
    assert not paced_beats(x, fs, on, r).any()


def test_only_a_spike_before_the_main_deflection_counts() -> None:
    """A sharp deflection 20 ms before the span opens or with no delineated onset leaves the beat unpaced."""
    fs = 500.0
    x, on, r = _beats(fs, qrs_ms=160.0, spike_mv=0.4, spike_before_onset_ms=SPIKE_BEFORE_ONSET_MS + 20.0)
    assert not paced_beats(x, fs, on, r).any()
    x, on, r = _beats(fs, qrs_ms=160.0, spike_mv=0.4, spike_before_onset_ms=SPIKE_BEFORE_ONSET_MS - 5.0)
    assert paced_beats(x, fs, on, r).all()
    x, on, r = _beats(fs, qrs_ms=160.0, spike_mv=0.4)
    on[::2] = np.nan  # beats the delineation did not mark
    flags = paced_beats(x, fs, on, r)
    assert not flags[::2].any() and flags[1::2].all()


def test_a_spike_just_before_a_narrow_beat_lies_after_the_span() -> None:
    """Narrow beat at 100 Hz: onset is R - 30 ms, so a spike 10 ms before it (R - 40 ms) lies after the span's end at R - 50 ms."""
    fs = 100.0
    x, on, r = _beats(fs, qrs_ms=60.0, spike_mv=0.4)
    assert not paced_beats(x, fs, on, r).any()


def test_a_record_without_mv_is_read_at_one_mv_per_lead() -> None:
    """Every lead scaled to 1 mV peak to peak (LUDB's convention) by unit_peak_to_peak; a stimulus keeps its size
    against its lead's QRS, so the spikes of a paced record scaled to 0.1 mV lead by lead are found again."""
    from ecgtrace.agents.audit._pacing import unit_peak_to_peak

    fs = 500.0
    x, on, r = _beats(fs, qrs_ms=160.0, spike_mv=0.4)
    shrunk = x / (10.0 * np.ptp(x, axis=0))[None, :]  # each lead 0.1 "mV": every stimulus falls under the threshold
    assert not paced_beats(shrunk, fs, on, r).any()
    unit = unit_peak_to_peak(shrunk)
    assert np.allclose(np.ptp(unit, axis=0), 1.0)
    assert np.allclose(unit, x / np.ptp(x, axis=0)[None, :])
    assert paced_beats(unit, fs, on, r).all()
    flat = np.column_stack([np.zeros(50), np.full(50, np.nan), np.linspace(0.0, 2.0, 50)])
    out = unit_peak_to_peak(flat)
    assert (out[:, 0] == 0).all() and np.isnan(out[:, 1]).all() and np.ptp(out[:, 2]) == 1.0
