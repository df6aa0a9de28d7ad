"""The four text encodings of an ECG window, checked against the synthetic record's truth and hand-made signals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ecgtrace.tools.records import SignalWindow, open_record, read_window
from ecgtrace.tools.render import parse_signal_text, signal_to_text
from ecgtrace.tools.text_encodings import (EncodingError, TextEncoding, encode_signal_text, encode_window, resample_mv, text_encoding,
                                           window_from_text)


@pytest.fixture(scope="module")
def record(synth_record):
    return open_record(synth_record.record_path)


def _rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def _sine_window(fs_hz: float = 250.0, seconds: float = 4.0, sampfrom: int = 2500) -> SignalWindow:
    t = (sampfrom + np.arange(int(seconds * fs_hz))) / fs_hz
    signal = np.column_stack([np.sin(2 * np.pi * 5.0 * t), 0.5 * np.cos(2 * np.pi * 2.0 * t)])
    return SignalWindow(signal_mv=signal, fs_hz=fs_hz, sampfrom=sampfrom, leads=("II", "V5"))


def test_raw_is_the_signal_text_and_a_lead_subset_keeps_its_numbers(record) -> None:
    window = read_window(record, 120.0, 130.0)
    assert encode_window(window, "raw", record="holter") == signal_to_text(window, record="holter")
    subset = parse_signal_text(encode_window(window, "raw", leads=["V5", "MLII"]))
    full = parse_signal_text(signal_to_text(window))
    assert subset.leads == ("V5", "MLII")
    assert np.array_equal(subset.signal_mv, full.signal_mv[:, [2, 0]]) and np.array_equal(subset.times_s, full.times_s)


def test_compact_is_integer_microvolts_with_the_time_axis_stated(record) -> None:
    window = read_window(record, 120.0, 130.0)
    text = encode_window(window, "compact", record="holter")
    assert "# units: integer microvolts (uV) per lead; 1000 uV = 1 mV" in text
    assert "# t0_s: 120 (seconds from the recording start of the first row; row k is at t0_s + k / fs_hz)" in text
    assert "# fs_hz: 250\n" in text
    rows = _rows(text)
    assert rows[0] == "MLII,V1,V5" and len(rows) == 1 + 2500
    values = np.array([[int(v) for v in row.split(",")] for row in rows[1:]])
    assert np.array_equal(values, np.round(np.asarray(window.signal_mv, dtype=np.float64) * 1000).astype(int))
    # the same numbers as the raw text, to its 1 uV resolution
    assert np.array_equal(values, np.round(parse_signal_text(signal_to_text(window)).signal_mv * 1000).astype(int))


def test_downsampled_follows_the_signal_at_the_new_rate() -> None:
    window = _sine_window()
    text = encode_window(window, "downsampled", fs_hz=100)
    parsed = parse_signal_text(text)
    assert parsed.fs_hz == 100.0 and parsed.leads == ("II", "V5") and parsed.signal_mv.shape == (400, 2)
    assert "# resampled: from 250 Hz to 100 Hz" in text
    assert parsed.times_s[0] == pytest.approx(10.0) and np.allclose(np.diff(parsed.times_s), 0.01)
    t = parsed.times_s
    truth = np.column_stack([np.sin(2 * np.pi * 5.0 * t), 0.5 * np.cos(2 * np.pi * 2.0 * t)])
    inner = slice(10, -10)  # the filter's edges
    assert np.max(np.abs(parsed.signal_mv[inner] - truth[inner])) < 0.01
    # a tone above the new Nyquist rate (60 Hz at 100 Hz) is filtered out, not folded back as a 40 Hz alias
    tone = SignalWindow(signal_mv=np.sin(2 * np.pi * 60.0 * np.arange(1000) / 250.0)[:, None], fs_hz=250.0, sampfrom=0, leads=("II",))
    assert np.max(np.abs(resample_mv(tone.signal_mv, 250.0, 100.0)[0][20:-20])) < 0.05


def test_missing_samples_stay_missing() -> None:
    window = _sine_window()
    signal = window.signal_mv.copy()
    signal[500:520, 0] = np.nan
    holed = SignalWindow(signal_mv=signal, fs_hz=250.0, sampfrom=2500, leads=("II", "V5"))
    compact = _rows(encode_window(holed, "compact"))
    assert compact[501].split(",")[0] == "" and compact[501].split(",")[1] != ""
    down = parse_signal_text(encode_window(holed, "downsampled", fs_hz=125))
    assert np.isnan(down.signal_mv[250:260, 0]).all() and np.isfinite(down.signal_mv[:, 1]).all()


def test_summary_gives_the_detected_beats_and_their_measurements(record, synth_record) -> None:
    import wfdb

    window = read_window(record, 120.0, 130.0)
    text = encode_window(window, "summary", record="holter")
    assert "no beat labels are given" in text and "ecgtrace.tools.beats" in text
    lines = text.splitlines()
    start = lines.index("beat,t_s,rr_ms")
    beats = []
    for line in lines[start + 1:]:
        if line.startswith("lead "):
            break
        beats.append(line.split(","))
    times = np.array([float(b[1]) for b in beats])
    ann = wfdb.rdann(str(synth_record.record_path), "atr")
    truth = ann.sample[(ann.sample >= 120.3 * 250) & (ann.sample < 129.7 * 250)] / 250.0
    assert all(np.min(np.abs(times - t)) < 0.04 for t in truth)  # every true beat is there
    assert len(times) <= len(truth) + 2
    rr = [float(b[2]) for b in beats[1:]]
    assert rr == pytest.approx(np.diff(times) * 1000, abs=1.0)
    table = _lead_table(lines, "MLII")
    qrs = np.nanmedian(table["qrs_ms"])
    pr = np.nanmedian(table["pr_ms"])
    assert abs(qrs - 90.5) < 15 and abs(pr - 160.0) < 20  # the generator's normal beat


def test_summary_sees_a_long_pr_and_no_p_waves_in_af(record) -> None:
    avb1 = _lead_table(encode_window(read_window(record, 1300.0, 1310.0), "summary").splitlines(), "MLII")
    assert abs(np.nanmedian(avb1["pr_ms"]) - 280.0) < 30
    af_lines = encode_window(read_window(record, 540.0, 550.0), "summary").splitlines()
    for lead in ("MLII", "V1", "V5"):
        table = _lead_table(af_lines, lead)
        assert np.isnan(table["p_mv"]).mean() >= 0.8, lead  # "p_mv empty: no P wave found"


def _lead_table(lines: list[str], lead: str) -> dict[str, np.ndarray]:
    start = lines.index(f"lead {lead}")
    columns = lines[start + 1].split(",")
    rows = []
    for line in lines[start + 2:]:
        if line.startswith("lead "):
            break
        rows.append([float(v) if v else math.nan for v in line.split(",")])
    data = np.array(rows)
    return {name: data[:, j] for j, name in enumerate(columns)}


def test_an_asset_keeps_its_other_blocks_and_each_window_is_reencoded(record) -> None:
    w1, w2 = read_window(record, 120.0, 122.0), read_window(record, 540.0, 542.0)
    hourly = "# per-hour summary (times in ms from the recording start)\nhour,t0_ms,t1_ms,beats\n0,0,3600000,4000\n"
    asset = "\n".join([hourly, signal_to_text(w1, record="holter"), signal_to_text(w2, record="holter")])
    out = encode_signal_text(asset, text_encoding("compact", 100))
    assert out.startswith(hourly)
    assert out.count("# format: ecgtrace-signal-compact/1") == 2 and "ecgtrace-signal-text/1" not in out
    assert "# t0_s: 120 " in out and "# t0_s: 540 " in out
    assert encode_signal_text(asset, TextEncoding()) == asset  # raw: the asset itself
    window, name = window_from_text(signal_to_text(w1, record="holter"))
    assert name == "holter" and window.sampfrom == w1.sampfrom and window.leads == w1.leads
    with pytest.raises(EncodingError, match="holds no ecgtrace-signal-text/1 signal"):
        encode_signal_text("time_s,MLII_mV\n0.000,0.012\n", text_encoding("summary"))


def test_bad_choices_are_one_line_errors(record) -> None:
    window = read_window(record, 120.0, 121.0)
    with pytest.raises(EncodingError, match=r"lead 'II' is not in this window \(leads: MLII, V1, V5\)"):
        encode_window(window, "compact", leads=["II"])
    with pytest.raises(EncodingError, match="must not exceed the record's 250 Hz"):
        encode_window(window, "downsampled", fs_hz=500)
    with pytest.raises(EncodingError, match="downsampled needs --text-fs"):
        text_encoding("downsampled")
    with pytest.raises(EncodingError, match="does not apply to --text-encoding raw"):
        text_encoding("raw", 100)
    with pytest.raises(EncodingError, match="at least 50 Hz"):
        text_encoding("compact", 20)
    with pytest.raises(EncodingError, match="unknown text encoding"):
        text_encoding("base64")
    assert text_encoding("compact", None, "MLII, V5").leads == ("MLII", "V5")


def test_encodings_are_deterministic_and_smaller(record) -> None:
    window = read_window(record, 120.0, 130.0)
    sizes = {}
    for method, fs_hz in (("raw", None), ("downsampled", 100.0), ("compact", None), ("compact", 100.0), ("summary", None)):
        first = encode_window(window, method, fs_hz=fs_hz)
        assert encode_window(window, method, fs_hz=fs_hz) == first
        sizes[(method, fs_hz)] = len(first)
    assert sizes[("summary", None)] < sizes[("compact", 100.0)] < sizes[("downsampled", 100.0)] < sizes[("raw", None)]
    assert sizes[("compact", None)] < 0.5 * sizes[("raw", None)]
    assert TextEncoding.from_json(text_encoding("compact", 100, "MLII").to_json()) == text_encoding("compact", 100, "MLII")
