"""Busy RR gaps (:mod:`ecgtrace.tools._rhythm_gaps`) on hand-built two-lead signals whose gap content is known."""

from __future__ import annotations

import numpy as np
import pytest

from ecgtrace.tools._rhythm_gaps import DEFAULT_GAP_PARAMS, gap_activity, measure_gaps
from ecgtrace.tools.records import open_record

FS = 250.0


def _gap_signal(gap_s: float, content: str) -> tuple[np.ndarray, int, int]:
    """Two leads: a 1.2 mV QRS (Gaussian, SD 10 ms) at 1 s and one ``gap_s`` later, and between them ``content``:
    ``quiet`` (a 0.1 mV blocked P wave in the middle of the gap), ``drift`` (a 0.8 mV baseline ramp), ``compressions``
    (a 2 Hz, 1.2 mV peak-to-peak wave: chest compressions) or ``t_wave`` (a 0.5 mV T wave 0.3 s after the first QRS)."""
    n = int((gap_s + 2.0) * FS)
    t = np.arange(n) / FS
    r1, r2 = 1.0, 1.0 + gap_s
    x = 1.2 * (np.exp(-0.5 * ((t - r1) / 0.01) ** 2) + np.exp(-0.5 * ((t - r2) / 0.01) ** 2))
    if content == "quiet":
        x += 0.1 * np.exp(-0.5 * ((t - (r1 + r2) / 2) / 0.03) ** 2)
    elif content == "drift":
        x += 0.8 * (t - r1) / gap_s
    elif content == "compressions":
        x += np.where((t > r1 + 0.1) & (t < r2 - 0.1), 0.6 * np.sin(2 * np.pi * 2.0 * t), 0.0)
    elif content == "t_wave":
        x += 0.5 * np.exp(-0.5 * ((t - (r1 + 0.3)) / 0.05) ** 2)
    sig = np.column_stack([x, -0.6 * x])
    return sig, int(r1 * FS), int(r2 * FS)


@pytest.mark.parametrize(("content", "busy"), [("quiet", False), ("drift", False), ("t_wave", False), ("compressions", True)])
def test_gap_activity_against_the_qrs(content: str, busy: bool) -> None:
    sig, a, b = _gap_signal(3.5, content)
    activity = gap_activity(sig, a, b, FS)
    assert (activity >= DEFAULT_GAP_PARAMS["busy_ratio"]) is busy, (content, activity)
    if content == "quiet":  # the blocked P wave's 0.1 mV against the 1.2 mV QRS
        assert activity == pytest.approx(0.1 / 1.2, abs=0.01)
    if content == "compressions":  # the wave's full 1.2 mV range against the QRS's
        assert activity == pytest.approx(1.0, abs=0.1)


def test_a_gap_too_short_to_have_a_middle_or_without_leads_is_unknown() -> None:
    sig, a, _ = _gap_signal(3.5, "compressions")
    assert np.isnan(gap_activity(sig, a, a + int(0.8 * FS), FS))  # 0.45 s after, 0.25 s before: no 0.2 s middle left
    assert np.isnan(gap_activity(np.full_like(sig, np.nan), a, a + int(3.5 * FS), FS))


def test_measure_gaps_reads_the_record_and_skips_vf_spans(tmp_path) -> None:
    quiet, a1, b1 = _gap_signal(3.5, "quiet")
    noisy, a2, b2 = _gap_signal(3.5, "compressions")
    sig = np.vstack([quiet, noisy]).astype(np.float32)
    offset = quiet.shape[0]
    import wfdb

    wfdb.wrsamp("gaps", fs=FS, units=["mV", "mV"], sig_name=["I", "II"], p_signal=sig.astype(np.float64), fmt=["16", "16"], write_dir=str(tmp_path))
    info = open_record(tmp_path / "gaps")
    beats = np.array([a1, b1, offset + a2, offset + b2])
    found = measure_gaps(info, beats)
    assert [(g["onset_sample"], g["offset_sample"], g["busy"]) for g in found] == [(a1, b1, False), (offset + a2, offset + b2, True)]
    assert found[0]["activity"] == pytest.approx(0.1 / 1.2, abs=0.01) and found[1]["activity"] >= DEFAULT_GAP_PARAMS["busy_ratio"]
    # the RR from b1 to offset + a2 (2 s of flat signal between the two halves) is not longer than min_gap_s: not listed
    vf = [(offset + a2 + 100, offset + a2 + 200)]  # a VF/VFL span inside the second gap: that gap is not read
    assert [(g["onset_sample"], g["offset_sample"]) for g in measure_gaps(info, beats, vf)] == [(a1, b1)]
