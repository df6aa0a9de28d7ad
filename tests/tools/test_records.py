"""Record I/O: windows, chunks, headers, EDF, and every bad-input case."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import wfdb

from ecgtrace.errors import AnnotationError, RecordError, WindowError
from ecgtrace.tools.records import RecordWarning, chunk_bounds, iter_chunks, open_record, read_samples, read_window


def _copy_record(src_base: Path, dst_dir: Path) -> Path:
    for path in src_base.parent.glob(src_base.name + ".*"):
        shutil.copy(path, dst_dir / path.name)
    return dst_dir / src_base.name


def _write_record(tmp_path: Path, signal_mv: np.ndarray, fs_hz: float = 250.0, name: str = "rec", fmt: str = "16") -> Path:
    wfdb.wrsamp(name, fs=fs_hz, units=["mV"] * signal_mv.shape[1], sig_name=[f"L{i}" for i in range(signal_mv.shape[1])],
                p_signal=signal_mv, fmt=[fmt] * signal_mv.shape[1], adc_gain=[200.0] * signal_mv.shape[1],
                baseline=[0] * signal_mv.shape[1], write_dir=str(tmp_path))
    return tmp_path / name


def test_synthetic_header_summary(synth_record):
    info = open_record(synth_record.record_path)
    assert info.fs_hz == 250.0
    assert info.n_samples == 450_000
    assert info.leads == ("MLII", "V1", "V5")
    assert info.units == ("mV", "mV", "mV")
    assert info.duration_s == pytest.approx(1800.0)
    assert info.patient["age_years"] > 0 and info.patient["sex"] in {"male", "female"}
    assert info.unusable_leads == ()


def test_window_matches_whole_read(synth_record):
    info = open_record(synth_record.record_path)
    whole = wfdb.rdrecord(str(synth_record.record_path), sampfrom=0, sampto=20_000).p_signal
    window = read_window(info, 10.0, 20.0, leads=["V1", "MLII"])
    assert window.signal_mv.shape == (2500, 2)
    assert window.leads == ("V1", "MLII")
    np.testing.assert_allclose(window.signal_mv[:, 0], whole[2500:5000, 1], atol=1e-6)
    np.testing.assert_allclose(window.signal_mv[:, 1], whole[2500:5000, 0], atol=1e-6)


def test_chunks_reassemble_exactly_and_cores_tile(synth_record):
    info = open_record(synth_record.record_path)
    pieces = []
    previous_stop = 0
    for chunk in iter_chunks(info, chunk_s=333.3, overlap_s=4.0):
        assert chunk.core_start == previous_stop
        previous_stop = chunk.core_stop
        pieces.append(chunk.signal_mv[chunk.core_start - chunk.start : chunk.core_stop - chunk.start])
    assert previous_stop == info.n_samples
    reassembled = np.concatenate(pieces)
    direct = read_samples(info, 0, info.n_samples).signal_mv
    np.testing.assert_array_equal(reassembled, direct)


def test_event_exactly_on_a_seam_belongs_to_one_chunk():
    bounds = chunk_bounds(10_000, 2_500, 300)
    seam = 5_000
    owners = [k for k, (_, _, core_start, core_stop) in enumerate(bounds) if core_start <= seam < core_stop]
    assert owners == [2]
    # ...while both neighbours still see it in their overlap
    assert sum(start <= seam < stop for start, stop, _, _ in bounds) == 2


def test_mitdb_100_reads(shared_data):
    info = open_record(shared_data / "mitdb" / "100")
    assert (info.fs_hz, info.n_samples, info.leads) == (360.0, 650_000, ("MLII", "V5"))
    assert info.formats == ("212", "212")
    assert info.patient == {"age_years": 69, "sex": "male"}
    window = read_window(info, 0.0, 1.0)
    assert window.signal_mv.shape == (360, 2)


@pytest.mark.parametrize(
    "relative, fs_hz, n_leads",
    [
        ("qtdb/sel100", 250.0, 2),
        ("ludb/data/1", 500.0, 12),
        ("ptbxl/records100/00000/00001_lr", 100.0, 12),
        ("ptbxl/records500/00000/00001_hr", 500.0, 12),
        ("cinc2021_12lead/E07500", 500.0, 12),
        ("vfdb/418", 250.0, 2),
        ("cpsc2021/data_8_2", 200.0, 2),
        ("svdb/800", 128.0, 2),
    ],
)
def test_every_shared_database_reads(shared_data, relative, fs_hz, n_leads):
    info = open_record(shared_data / relative)
    assert info.fs_hz == fs_hz
    assert len(info.leads) == n_leads
    window = read_window(info, 1.0, 3.0)
    assert window.signal_mv.shape == (int(2 * fs_hz), n_leads)
    assert np.isfinite(window.signal_mv).all()


def test_every_mitdb_record_reads(shared_data):
    names = sorted(p.stem for p in (shared_data / "mitdb").glob("*.hea"))
    assert len(names) == 27
    for name in names:
        info = open_record(shared_data / "mitdb" / name, check_leads=False)
        assert info.fs_hz == 360.0 and info.n_samples == 650_000


def test_edf_window_matches_wfdb(tmp_path, synth_record):
    from wfdb.io.convert.edf import read_edf, wfdb_to_edf

    base = _copy_record(synth_record.record_path, tmp_path)
    edf_path = tmp_path / "holter.edf"
    wfdb_to_edf(str(base), output_filename=str(edf_path))
    info = open_record(edf_path)
    assert info.kind == "edf" and info.leads == ("MLII", "V1", "V5") and info.fs_hz == 250.0
    reference = read_edf(str(edf_path))
    window = read_samples(info, 1234, 5678, leads=["V5"])
    np.testing.assert_allclose(window.signal_mv[:, 0], reference.p_signal[1234:5678, 2], atol=1e-6)


# ---- bad input: one clear error each --------------------------------------------------------


def test_missing_header(tmp_path):
    with pytest.raises(RecordError, match="no header file"):
        open_record(tmp_path / "nothing")


def test_missing_signal_file(tmp_path, synth_record):
    base = _copy_record(synth_record.record_path, tmp_path)
    Path(f"{base}.dat").unlink()
    with pytest.raises(RecordError, match="signal file not found"):
        open_record(base)


def test_truncated_signal_file(tmp_path, synth_record):
    base = _copy_record(synth_record.record_path, tmp_path)
    dat = Path(f"{base}.dat")
    dat.write_bytes(dat.read_bytes()[:100_000])
    with pytest.raises(RecordError, match="truncated signal file"):
        open_record(base)


def test_corrupt_header(tmp_path):
    (tmp_path / "bad.hea").write_text("bad this is not a header\n")
    with pytest.raises(RecordError, match="corrupt header|sampling rate"):
        open_record(tmp_path / "bad")


def test_contradictory_header(tmp_path, synth_record):
    base = _copy_record(synth_record.record_path, tmp_path)
    header = Path(f"{base}.hea")
    lines = header.read_text().splitlines()
    lines[0] = lines[0].replace("holter 3", "holter 4", 1)  # claims 4 signals, lists 3
    header.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordError, match="corrupt header|contradictory header"):
        open_record(base)


def test_unsupported_format(tmp_path, synth_record):
    base = _copy_record(synth_record.record_path, tmp_path)
    header = Path(f"{base}.hea")
    header.write_text(header.read_text().replace("holter.dat 16", "holter.dat 999"))
    with pytest.raises(RecordError, match="unsupported signal format|corrupt header"):
        open_record(base)


@pytest.mark.parametrize("fs_text", ["0", "-250"])
def test_sampling_rate_not_positive(tmp_path, synth_record, fs_text):
    base = _copy_record(synth_record.record_path, tmp_path)
    header = Path(f"{base}.hea")
    lines = header.read_text().splitlines()
    parts = lines[0].split()
    parts[2] = fs_text
    lines[0] = " ".join(parts)
    header.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordError, match="sampling rate|corrupt header"):
        open_record(base)


def test_zero_length_record(tmp_path):
    (tmp_path / "empty.hea").write_text("empty 1 250 0\nempty.dat 16 200/mV 16 0 0 0 0 L0\n")
    (tmp_path / "empty.dat").write_bytes(b"")
    with pytest.raises(RecordError, match="zero-length"):
        open_record(tmp_path / "empty")


def test_window_outside_record(synth_record):
    info = open_record(synth_record.record_path)
    with pytest.raises(WindowError, match="outside the record"):
        read_window(info, 1795.0, 1805.0)
    with pytest.raises(WindowError, match="outside the record"):
        read_window(info, -1.0, 2.0)
    with pytest.raises(WindowError, match="empty"):
        read_window(info, 5.0, 5.0)


def test_unknown_lead(synth_record):
    info = open_record(synth_record.record_path)
    with pytest.raises(WindowError, match="no lead named 'V6'"):
        read_window(info, 0.0, 1.0, leads=["V6"])


def test_flat_and_nan_leads_are_marked_unusable(tmp_path):
    rng = np.random.default_rng(0)
    n = 250 * 120
    signal = np.column_stack([np.sin(np.arange(n) / 20.0) + rng.normal(0, 0.01, n), np.zeros(n), np.full(n, np.nan)])
    base = _write_record(tmp_path, signal)
    with pytest.warns(RecordWarning) as caught:
        info = open_record(base)
    assert info.unusable_leads == ("L1", "L2")
    assert info.usable_leads == ("L0",)
    messages = " ".join(str(w.message) for w in caught)
    assert "'L1' is flat" in messages and "'L2' is all NaN" in messages


def test_annotation_file_that_does_not_match(tmp_path, synth_record, shared_data):
    base = _copy_record(synth_record.record_path, tmp_path)
    # MIT-BIH 100's annotations run past the end of this record and carry another rate
    shutil.copy(shared_data / "mitdb" / "100.atr", f"{base}.atr")
    from ecgtrace.tools.annotations import read_reference_annotations

    with pytest.raises(AnnotationError, match="does not match"):
        read_reference_annotations(base)


def test_no_warning_on_clean_record(synth_record):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        open_record(synth_record.record_path)
