"""Faint-beat check (tools/_beats_faint.py): blocked P waves in long pauses are no beats; small true QRS complexes stay."""

from __future__ import annotations

import numpy as np
import pytest

from ecgtrace.tools._beats_faint import faint_beats
from ecgtrace.tools.beats import DetectorParams, detect_beats_array

FS_HZ = 250.0


def _bump(t_s: np.ndarray, centre_s: float, sigma_s: float) -> np.ndarray:
    return np.exp(-0.5 * ((t_s - centre_s) / sigma_s) ** 2)


def _pauses_with_blocked_p(pause_s: float, p_mv: float = 0.1, noise_mv: float = 0.005, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """90 s at 50 beats/min (1.2 s RR), every 12th RR a pause of ``pause_s`` with P waves marching on every 0.9 s.

    QRS: R 1 mV (sigma 12 ms) then S; T 0.25 mV; each beat's own P (sigma 20 ms) 160 ms before it.
    Returns the signal (n, 2) and the true R times (s).
    """
    rng = np.random.default_rng(seed)
    t = np.arange(int(90 * FS_HZ)) / FS_HZ
    x = np.zeros(t.size)
    r_s: list[float] = []
    c, k = 1.0, 0
    while c < 88.0:
        r_s.append(c)
        x += _bump(t, c, 0.012) - 0.25 * _bump(t, c + 0.03, 0.01) + 0.25 * _bump(t, c + 0.3, 0.05) + p_mv * _bump(t, c - 0.16, 0.02)
        k += 1
        nxt = c + (pause_s if k % 12 == 0 else 1.2)
        if k % 12 == 0:
            for p_s in np.arange(c + 0.9, nxt - 0.4, 0.9):  # non-conducted P waves inside the pause
                x += p_mv * _bump(t, p_s, 0.02)
        c = nxt
    lead0 = x + rng.normal(0.0, noise_mv, t.size)
    lead1 = 0.6 * x + rng.normal(0.0, noise_mv, t.size)
    return np.stack([lead0, lead1], axis=1), np.array(r_s)


def _extra_and_missed(detected_s: np.ndarray, truth_s: np.ndarray) -> tuple[int, int]:
    extra = int(sum(np.min(np.abs(truth_s - d)) > 0.15 for d in detected_s))
    missed = int(sum(np.min(np.abs(detected_s - r)) > 0.15 for r in truth_s))
    return extra, missed


@pytest.mark.parametrize("pause_s", [4.5, 6.0])
def test_blocked_p_waves_in_long_pauses_are_not_beats(pause_s):
    signal, truth_s = _pauses_with_blocked_p(pause_s)
    detected = np.asarray(detect_beats_array(signal, FS_HZ).samples) / FS_HZ
    assert _extra_and_missed(detected, truth_s) == (0, 0)
    # without the check the pause's collapsed level lets the P waves through (beat detector version 3)
    unchecked = np.asarray(detect_beats_array(signal, FS_HZ, params=DetectorParams(faint_ratio=0.0)).samples) / FS_HZ
    extra, missed = _extra_and_missed(unchecked, truth_s)
    assert extra >= 10 and missed == 0


def test_small_true_beats_are_kept():
    """Every third QRS a quarter of the size of the others on both leads (a small ectopic beat): all are beats."""
    t = np.arange(int(60 * FS_HZ)) / FS_HZ
    r_s = np.arange(1.0, 59.0, 0.8)
    x = np.zeros(t.size)
    for i, c in enumerate(r_s):
        size = 0.25 if i % 3 == 2 else 1.0
        x += size * (_bump(t, c, 0.012) - 0.25 * _bump(t, c + 0.03, 0.01)) + 0.25 * _bump(t, c + 0.3, 0.05)
    signal = np.stack([x, 0.6 * x], axis=1) + np.random.default_rng(3).normal(0.0, 0.005, (t.size, 2))
    detected = np.asarray(detect_beats_array(signal, FS_HZ).samples) / FS_HZ
    assert _extra_and_missed(detected, r_s) == (0, 0)


def _env_with(energies: np.ndarray, beats: np.ndarray, n: int) -> np.ndarray:
    env = np.zeros((energies.shape[1], n))
    env[:, beats] = energies.T
    return env


def test_faint_beats_against_hand_computed_neighbours():
    beats = np.arange(250, 2250, 250)  # 8 beats, 1 s apart at 250 Hz: all within each other's 5 s window but the ends
    n = 2500
    counted = np.ones((2, beats.size), dtype=bool)
    energy = np.ones((beats.size, 2))
    energy[3] = [0.05, 0.08]  # under 0.12 x the upper quartile (1.0) on both leads: faint
    energy[5] = [0.05, 0.5]  # small on one lead, normal on the other: a beat
    out = faint_beats(_env_with(energy, beats, n), counted, beats, FS_HZ, 0.12, 5.0)
    assert out.tolist() == [False, False, False, True, False, False, False, False]
    # the lead that shows beat 5 has no quality there: only the faint lead is read
    counted[1, 5] = False
    assert faint_beats(_env_with(energy, beats, n), counted, beats, FS_HZ, 0.12, 5.0)[5]
    # a beat with fewer than two neighbours in the window is never faint; ratio 0 switches the check off
    lone = np.array([250, 2000, 2250])
    assert not faint_beats(_env_with(np.array([[1.0, 1.0], [0.01, 0.01], [1.0, 1.0]]), lone, n), np.ones((2, 3), bool), lone, FS_HZ, 0.12, 0.5).any()
    assert not faint_beats(_env_with(energy, beats, n), np.ones((2, beats.size), bool), beats, FS_HZ, 0.0, 5.0).any()
