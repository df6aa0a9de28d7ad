"""Hostile records: each is refused with one clear error before any work (issue 17), never hung on or used silently.

Every input is built here: a FIFO named ``x.hea``, a header declaring 100,000
signals, a sparse all-flat record of 2e9 samples (never really written), an EDF
with a negative header size, a ``nan`` gain, NUL bytes in a lead name, a
sampling rate of 1e9, and reference ``.atr`` files that are empty, another
record's, or bit-flipped.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from ecgtrace.errors import AnnotationError, RecordError
from ecgtrace.tools.records import open_record


def _copy(record: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for path in record.parent.glob(f"{record.name}.*"):
        shutil.copy(path, folder / path.name)
    return folder / record.name


def _header_lines(base: Path) -> list[str]:
    return Path(f"{base}.hea").read_text(encoding="latin-1").splitlines()


def _write_header(base: Path, lines: list[str]) -> None:
    Path(f"{base}.hea").write_bytes(("\n".join(lines) + "\n").encode("latin-1"))


# ----------------------------------------------------------------- files that are not what they seem

def test_a_fifo_header_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "x.hea")  # opening it for reading would block forever
    started = time.monotonic()
    with pytest.raises(RecordError, match="FIFO"):
        open_record(tmp_path / "x")
    with pytest.raises(RecordError, match="FIFO"):
        open_record(tmp_path / "x.hea")
    assert time.monotonic() - started < 2


def test_a_fifo_signal_file_or_annotation_file_is_refused(tiny_record, tmp_path):
    from ecgtrace.tools.annotations import read_reference_annotations

    base = _copy(tiny_record, tmp_path / "fifo_dat")
    Path(f"{base}.dat").unlink()
    os.mkfifo(f"{base}.dat")
    with pytest.raises(RecordError, match="FIFO"):
        open_record(base)
    other = _copy(tiny_record, tmp_path / "fifo_atr")
    Path(f"{other}.atr").unlink()
    os.mkfifo(f"{other}.atr")
    with pytest.raises(AnnotationError, match="not a regular file"):
        read_reference_annotations(other)


def test_a_header_declaring_100000_signals_is_refused_in_a_blink(tmp_path):
    base = tmp_path / "big"
    lines = ["big 100000 250 1000", *(f"big.dat 16 200/mV 16 0 0 0 0 L{i}" for i in range(3))]
    _write_header(base, lines)
    Path(f"{base}.dat").write_bytes(b"\0" * 2000)
    started = time.monotonic()
    with pytest.raises(RecordError, match="100000 signals; at most 256"):
        open_record(base)
    # the same header with every signal line written out (3.4 MB) is refused by its size, unparsed
    _write_header(base, ["big 100000 250 1000", *(f"big.dat 16 200/mV 16 0 0 0 0 L{i}" for i in range(100_000))])
    with pytest.raises(RecordError, match="is not a WFDB header"):
        open_record(base)
    assert time.monotonic() - started < 2


def _sparse_flat_record(folder: Path, n_samples: int = 2_000_000_000) -> Path:
    folder.mkdir()
    base = folder / "s"
    _write_header(base, [f"s 1 250 {n_samples}", "s.dat 16 200/mV 16 0 0 0 0 MLII"])
    with open(f"{base}.dat", "wb") as handle:
        handle.truncate(2 * n_samples)  # 4 GB of zeros that take no disk space
    return base


def test_a_flat_record_of_2e9_samples_is_refused_before_any_work(tmp_path):
    from ecgtrace.agents.holter.annotator import load_record
    from ecgtrace.tools.annotate import annotate_record

    base = _sparse_flat_record(tmp_path / "sparse")
    started = time.monotonic()
    with pytest.warns(UserWarning, match="flat"), pytest.raises(RecordError, match="no usable lead"):
        annotate_record(base, cache_dir=tmp_path / "cache", workers=1)
    with pytest.warns(UserWarning, match="flat"), pytest.raises(RecordError, match="no usable lead"):
        load_record(base)  # the build's first step (and its check of every record before any worker)
    assert time.monotonic() - started < 20  # before: minutes of detection on 92 days of zeros
    assert not (tmp_path / "cache").exists()


# ----------------------------------------------------------------- header fields wfdb misreads

def test_a_nan_gain_is_refused_instead_of_becoming_a_lead_name(tiny_record, tmp_path):
    base = _copy(tiny_record, tmp_path / "nan")
    lines = _header_lines(base)
    fields = lines[1].split()
    fields[2] = "nan(0)/mV"
    lines[1] = " ".join(fields)
    _write_header(base, lines)
    with pytest.raises(RecordError, match=r"signal 1 has an invalid ADC gain 'nan\(0\)/mV'"):
        open_record(base)


def test_nul_bytes_in_a_lead_name_are_refused(tiny_record, tmp_path):
    base = _copy(tiny_record, tmp_path / "nul")
    lines = _header_lines(base)
    lines[1] = lines[1].replace("MLII", "ML\x00II")
    _write_header(base, lines)
    with pytest.raises(RecordError, match="control characters"):
        open_record(base)


@pytest.mark.parametrize("fs, message", [("1e9", "is not a positive decimal number"), ("1000000000", "above 100000 Hz"),
                                         ("-250", "is not a positive decimal number"), ("0", "must be > 0 Hz")])
def test_an_impossible_sampling_rate_says_what_is_wrong(tiny_record, tmp_path, fs, message):
    base = _copy(tiny_record, tmp_path / "fs")
    lines = _header_lines(base)
    fields = lines[0].split()
    fields[2] = fs
    lines[0] = " ".join(fields)
    _write_header(base, lines)
    with pytest.raises(RecordError, match=message) as caught:
        open_record(base)
    assert "zero-length" not in str(caught.value)  # what wfdb's reading of "1e9" made of it


def _edf(path: Path, *, header_bytes: int | None = None, labels: tuple[str, ...] = ("ECG",)) -> Path:
    ns = len(labels)
    hb = 256 * (ns + 1) if header_bytes is None else header_bytes
    fixed = (b"0       " + b"X".ljust(80) + b"Y".ljust(80) + b"01.01.01" + b"01.01.01" + str(hb).encode().ljust(8) + b"".ljust(44)
             + b"10".ljust(8) + b"1".ljust(8) + str(ns).encode().ljust(4))

    def cols(values: list[str], width: int) -> bytes:
        return b"".join(v.encode("latin-1").ljust(width) for v in values)

    table = (cols(list(labels), 16) + cols([""] * ns, 80) + cols(["mV"] * ns, 8) + cols(["-5"] * ns, 8) + cols(["5"] * ns, 8)
             + cols(["-32768"] * ns, 8) + cols(["32767"] * ns, 8) + cols([""] * ns, 80) + cols(["250"] * ns, 8) + cols([""] * ns, 32))
    rng = np.random.default_rng(0)
    path.write_bytes(fixed + table + rng.integers(-3000, 3000, size=250 * ns * 10, dtype="<i2").tobytes())
    return path


def test_an_edf_with_a_negative_header_size_is_refused(tmp_path):
    assert open_record(_edf(tmp_path / "ok.edf")).n_samples == 2500
    with pytest.raises(RecordError, match="header size -512 bytes"):
        open_record(_edf(tmp_path / "neg.edf", header_bytes=-512))
    with pytest.raises(RecordError, match="control characters"):
        open_record(_edf(tmp_path / "nul.edf", labels=("EC\x00G",)))


# ----------------------------------------------------------------- reference annotations that are not this record's

def _flip_first_beat_delay(atr: Path, bit: int) -> None:
    """Flip a bit of the first annotation's time delay (MIT format: 10 low bits of each 16-bit word): every later one moves."""
    data = bytearray(atr.read_bytes())
    for offset in range(0, len(data) - 1, 2):
        word = data[offset] | (data[offset + 1] << 8)
        code = word >> 10
        if 1 <= code <= 49:  # a beat or rhythm annotation, not a SKIP/AUX/NUM word
            data[offset] ^= 1 << bit
            break
    atr.write_bytes(bytes(data))


def test_reference_annotations_are_checked_against_the_signal(tiny_record, tiny_record_b, tmp_path):
    from ecgtrace.tools.reference_check import checked_reference

    info = open_record(tiny_record)
    assert checked_reference(info).beat_samples.size > 100  # its own file agrees (F1 1.0 here)

    empty = _copy(tiny_record, tmp_path / "empty")
    Path(f"{empty}.atr").write_bytes(b"")
    with pytest.raises(AnnotationError, match="holds no beat annotations"):
        checked_reference(open_record(empty))

    foreign = _copy(tiny_record, tmp_path / "foreign")
    shutil.copy(f"{tiny_record_b}.atr", f"{foreign}.atr")  # another record's beats, same rate and length
    with pytest.raises(AnnotationError, match="do not match this record's signal"):
        checked_reference(open_record(foreign))

    flipped = _copy(tiny_record, tmp_path / "flipped")
    _flip_first_beat_delay(Path(f"{flipped}.atr"), bit=6)  # +-64 samples (0.5 s at 128 Hz) for every beat
    with pytest.raises(AnnotationError, match="do not match"):
        checked_reference(open_record(flipped))


def test_every_consumer_of_reference_beats_refuses_a_foreign_file(tiny_record, tiny_record_b, tmp_path):
    from ecgtrace.agents.holter.annotator import load_record
    from ecgtrace.cli import main
    from ecgtrace.tools.annotate import annotate_record

    foreign = _copy(tiny_record, tmp_path / "foreign")
    shutil.copy(f"{tiny_record_b}.atr", f"{foreign}.atr")
    with pytest.raises(AnnotationError, match="do not match"):
        load_record(foreign)  # build, templates preview
    with pytest.raises(AnnotationError, match="do not match"):
        annotate_record(foreign, cache_dir=tmp_path / "cache", prefer_reference=True, workers=1)
    assert main(["delineate", str(foreign), "--out", str(tmp_path / "waves")]) == 2
    assert not (tmp_path / "waves").exists()
    empty = _copy(tiny_record, tmp_path / "empty")
    Path(f"{empty}.atr").write_bytes(b"")
    with pytest.raises(AnnotationError, match="holds no beat annotations"):
        load_record(empty)  # before: 0 reference beats, "normal sinus rhythm" as ground truth
