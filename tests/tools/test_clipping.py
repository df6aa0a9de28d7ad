"""Clipped leads: cut-off QRS peaks and long holds at the extreme are found; slow waves on one quantization level are not."""

from __future__ import annotations

import numpy as np
import pytest

from ecgtrace.tools.clipping import clipped_leads, clipped_plateaus, lead_clipped
from ecgtrace.tools.records import open_record, read_window

FS_HZ = 250.0
STEP_MV = 0.005  # QTDB's quantization step


def beats_trace(r_mv: np.ndarray, fs_hz: float = FS_HZ, rr_s: float = 0.8) -> np.ndarray:
    """Gaussian R waves (sigma 12 ms) and T waves (sigma 60 ms, 0.3 mV) on a slow 0.2 Hz wander, quantized to 5 uV."""
    t = np.arange(int((len(r_mv) + 1) * rr_s * fs_hz)) / fs_hz
    x = 0.1 * np.sin(2 * np.pi * 0.2 * t)
    for k, amp in enumerate(r_mv):
        r = (k + 0.5) * rr_s
        x += amp * np.exp(-0.5 * ((t - r) / 0.012) ** 2) + 0.3 * np.exp(-0.5 * ((t - r - 0.3) / 0.06) ** 2)
    return np.round(x / STEP_MV) * STEP_MV


def test_every_peak_cut_by_the_amplifier_is_a_plateau() -> None:
    r_mv = np.array([1.8, 1.0, 1.9, 1.7, 0.9, 2.0, 1.0, 1.8])
    x = beats_trace(r_mv)
    cut = np.minimum(x, 1.3)  # the amplifier stops at 1.3 mV: 5 of the 8 R waves go beyond it, each for > 16 ms
    above = np.diff(np.r_[0, (x >= 1.3).astype(np.int8), 0])
    cut_lengths = np.flatnonzero(above == -1) - np.flatnonzero(above == 1)
    assert cut_lengths.size == 5 and np.all(cut_lengths >= 0.016 * FS_HZ)
    plateaus = clipped_plateaus(cut, FS_HZ)
    assert sorted(n for _, n in plateaus) == sorted(cut_lengths.tolist())
    r_samples = ((np.arange(r_mv.size) + 0.5) * 0.8 * FS_HZ).astype(int)
    for start, n in plateaus:  # each plateau sits on an R peak that was cut
        assert np.any((r_samples >= start) & (r_samples < start + n))
    assert lead_clipped(cut, FS_HZ) and not lead_clipped(x, FS_HZ)


def test_one_cut_peak_is_not_enough_but_a_long_hold_is() -> None:
    x = beats_trace(np.array([1.0, 1.0, 1.6, 1.0, 1.0]))
    one_cut = np.minimum(x, 1.3)
    assert len(clipped_plateaus(one_cut, FS_HZ)) == 1 and not lead_clipped(one_cut, FS_HZ)
    held = x.copy()
    held[400:460] = x.min() - 0.5  # 240 ms at the ADC's lower limit, reached by a jump (baseline wander into the limit)
    assert lead_clipped(held, FS_HZ)


def test_slow_waves_lingering_on_one_level_are_not_clipping() -> None:
    """A trough that stays on one 5 uV step for 20-40 ms has edges under 1 mV/s, far below a QRS edge."""
    t = np.arange(int(10 * FS_HZ)) / FS_HZ
    x = np.round(0.4 * np.sin(2 * np.pi * 1.1 * t) / STEP_MV) * STEP_MV
    at_min = np.abs(x - x.min()) < 1e-9
    assert np.max(np.diff(np.flatnonzero(np.diff(np.r_[0, at_min, 0]) != 0))[::2]) >= 5  # plateaus of >= 20 ms exist
    assert clipped_plateaus(x, FS_HZ) == [] and not lead_clipped(x, FS_HZ)


def test_flat_and_missing_leads_are_left_to_the_flat_lead_check() -> None:
    assert not lead_clipped(np.zeros(2500), FS_HZ)  # constant: records.lead_is_unusable calls it flat
    x = beats_trace(np.full(8, 1.6))
    x[:200] = np.nan
    cut = np.minimum(x, 1.3)
    assert lead_clipped(cut, FS_HZ)  # NaN samples never join a plateau nor hide one
    assert not lead_clipped(np.full(100, np.nan), FS_HZ)


def test_the_rule_holds_at_100_hz() -> None:
    """At 100 Hz a plateau needs 3 samples (30 ms): a cut peak of 2 samples is not called clipped."""
    fs = 100.0
    x = beats_trace(np.full(8, 2.0), fs_hz=fs)
    assert lead_clipped(np.minimum(x, 1.2), fs)
    assert not lead_clipped(np.minimum(x, 1.95), fs)


def test_window_names_only_the_clipped_lead() -> None:
    x = beats_trace(np.full(8, 1.6))
    signal = np.column_stack([x, np.minimum(x, 1.3), 0.5 * x])
    assert clipped_leads(signal, FS_HZ, ("I", "II", "V1")) == ["II"]


def test_real_records_cut_and_uncut(shared_data) -> None:
    """QTDB sel42's first lead is cut at 2.555 mV in every QRS; its second lead, and PTB-XL's leads, are not cut."""
    sel42 = open_record(shared_data / "qtdb" / "sel42", check_leads=False)
    window = read_window(sel42, 0.0, 10.0)
    assert clipped_leads(window.signal_mv, window.fs_hz, window.leads) == [sel42.leads[0]]
    for ecg_id in (1, 41, 102, 139):
        info = open_record(shared_data / "ptbxl" / "records100" / "00000" / f"{ecg_id:05d}_lr")
        w = read_window(info, 0.0, info.duration_s)
        assert clipped_leads(w.signal_mv, w.fs_hz, w.leads) == []


@pytest.mark.parametrize("fs_hz", [100.0, 500.0])
def test_plateau_bounds_are_the_cut_samples(fs_hz: float) -> None:
    x = beats_trace(np.full(6, 1.6), fs_hz=fs_hz)
    cut = np.minimum(x, 1.3)
    for start, n in clipped_plateaus(cut, fs_hz):
        assert np.all(cut[start : start + n] == pytest.approx(1.3))
        assert cut[start - 1] < 1.3 and cut[start + n] < 1.3
