"""The per-process WFDB header cache and the window reader built on it (``records.read_samples``).

Expectations are wfdb's own: ``wfdb.rdrecord`` (which parses the header on every
call) must give the very same float32 samples, and a header rewritten on disk
must be parsed again.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import wfdb

from ecgtrace.tools import _record_header as rh
from ecgtrace.tools.records import open_record, read_samples


def _rdrecord(base: str, sampfrom: int, sampto: int, channels: list[int]) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        record = wfdb.rdrecord(base, sampfrom=sampfrom, sampto=sampto, channels=channels, physical=True, return_res=32)
    return np.asarray(record.p_signal, dtype=np.float32)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def _write(tmp_path: Path, name: str, signal_mv: np.ndarray, fmt: str, gain: float = 200.0, baseline: int = 0) -> Path:
    n_leads = signal_mv.shape[1]
    wfdb.wrsamp(name, fs=250.0, units=["mV"] * n_leads, sig_name=[f"L{i}" for i in range(n_leads)], p_signal=signal_mv,
                fmt=[fmt] * n_leads, adc_gain=[gain] * n_leads, baseline=[baseline] * n_leads, write_dir=str(tmp_path))
    return tmp_path / name


@pytest.mark.parametrize("fmt", ["16", "212", "80"])
def test_windows_equal_rdrecord_bit_for_bit_with_missing_samples(tmp_path, fmt):
    rng = np.random.default_rng(3)
    signal = np.cumsum(rng.normal(0, 0.05, (5_000, 3)), axis=0)
    signal[100:130, 1] = np.nan  # written as the format's missing-sample code, read back as NaN
    signal = np.clip(signal, -0.8, 0.8)  # within 8 bits at this gain and baseline
    # an odd gain (not a float32 value) and a baseline: the float64 division of wfdb's conversion is what must match
    base = _write(tmp_path, f"r{fmt}", signal, fmt, gain=123.457, baseline=-17)
    info = open_record(base, check_leads=False)
    for sampfrom, sampto in [(0, 5_000), (90, 140), (4_321, 5_000)]:
        for channels in ([0, 1, 2], [1], [2, 0]):
            got = read_samples(info, sampfrom, sampto, channels).signal_mv
            assert _same_bits(got, _rdrecord(str(base), sampfrom, sampto, channels))
    assert np.isnan(read_samples(info, 100, 130, [1]).signal_mv).all()


def test_synthetic_and_mitdb_windows_equal_rdrecord(synth_record, shared_data):
    for base in (synth_record.record_path, shared_data / "mitdb" / "223"):
        info = open_record(base, check_leads=False)
        for sampfrom in (0, info.n_samples // 2, info.n_samples - 2_000):
            got = read_samples(info, sampfrom, sampfrom + 2_000).signal_mv
            assert _same_bits(got, _rdrecord(str(base), sampfrom, sampfrom + 2_000, list(range(len(info.leads)))))


def test_the_header_is_parsed_once_and_left_unchanged(tmp_path, monkeypatch):
    base = _write(tmp_path, "once", np.zeros((2_000, 2)) + 0.5, "16")
    calls = []
    real = wfdb.rdheader
    monkeypatch.setattr(wfdb, "rdheader", lambda *a, **k: calls.append(a) or real(*a, **k))
    info = open_record(base, check_leads=False)
    header = rh.wfdb_header(base)
    before = {k: (list(v) if isinstance(v, list) else v) for k, v in vars(header).items()}
    for start in range(0, 2_000, 100):
        read_samples(info, start, start + 100)
    assert len(calls) == 1  # open_record parsed it; twenty window reads reused it
    assert {k: (list(v) if isinstance(v, list) else v) for k, v in vars(header).items()} == before


def test_a_rewritten_header_is_parsed_again(tmp_path):
    signal = np.full((1_000, 1), 0.5)
    base = _write(tmp_path, "changed", signal, "16", gain=200.0)
    info = open_record(base, check_leads=False)
    assert read_samples(info, 0, 10).signal_mv[0, 0] == np.float32(0.5)
    hea = Path(f"{base}.hea")
    text = hea.read_text()
    stat = hea.stat()
    assert " 200.0(0)/mV " in text
    hea.write_text(text.replace(" 200.0(0)/mV ", " 400.0(0)/mV "))  # same size: the digital samples now mean half as many mV
    os.utime(hea, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert read_samples(info, 0, 10).signal_mv[0, 0] == np.float32(0.25)
    hea.write_text(text.replace(" 200.0(0)/mV ", " 1000.0(0)/mV "))  # another size
    assert read_samples(info, 0, 10).signal_mv[0, 0] == np.float32(0.1)


def test_a_missing_header_is_an_error_not_a_stale_hit(tmp_path):
    base = _write(tmp_path, "gone", np.zeros((500, 1)), "16")
    info = open_record(base, check_leads=False)
    read_samples(info, 0, 10)
    Path(f"{base}.hea").unlink()
    from ecgtrace.errors import RecordError

    with pytest.raises(RecordError, match="cannot read samples"):
        read_samples(info, 0, 10)


def test_the_cache_holds_at_most_its_size(tmp_path, monkeypatch):
    monkeypatch.setattr(rh, "HEADER_CACHE_SIZE", 3)
    monkeypatch.setattr(rh, "_WFDB_HEADERS", type(rh._WFDB_HEADERS)())
    for k in range(5):
        rh.wfdb_header(_write(tmp_path, f"n{k}", np.zeros((100, 1)), "16"))
    assert len(rh._WFDB_HEADERS) == 3
    assert all(key.endswith(("n2.hea", "n3.hea", "n4.hea")) for key in rh._WFDB_HEADERS)
