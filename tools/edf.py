"""EDF/EDF+ records: header through our own parser, windows by seeking data records.

wfdb reads EDF files too (``wfdb.rdrecord("x.edf")``), but it decodes the whole
file; a Holter EDF is long, so windows are read here by seeking to the data
records that cover them. Annotation channels (``EDF Annotations``) are skipped.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ecgtrace.errors import RecordError
from ecgtrace.tools._record_header import MAX_FS_HZ, MAX_SIGNALS, RecordInfo, _mv_scale, check_lead_name, parse_patient, require_regular_file

_EDF_ANNOTATIONS = "EDF Annotations"


def _fields(raw: bytes, count: int, width: int) -> list[str]:
    return [raw[i * width : (i + 1) * width].decode("latin-1").strip() for i in range(count)]


def read_edf_header(path: Path) -> dict:
    """Parse the EDF header; raise RecordError on anything contradictory."""
    require_regular_file(path, "the EDF file")
    try:
        with open(path, "rb") as handle:
            fixed = handle.read(256)
            if len(fixed) < 256:
                raise RecordError(f"{path}: truncated EDF header ({len(fixed)} of 256 bytes)")
            n_signals = int(fixed[252:256].decode("latin-1").strip() or 0)
            if n_signals > MAX_SIGNALS:
                raise RecordError(f"{path}: EDF header declares {n_signals} signals; at most {MAX_SIGNALS} are supported")
            rest = handle.read(256 * max(n_signals, 0))
    except (ValueError, UnicodeDecodeError):
        raise RecordError(f"{path}: corrupt EDF header (number of signals unreadable)") from None
    if n_signals <= 0 or len(rest) < 256 * n_signals:
        raise RecordError(f"{path}: corrupt EDF header ({n_signals} signals declared)")
    try:
        header_bytes = int(fixed[184:192].decode("latin-1").strip())
        n_records = int(fixed[236:244].decode("latin-1").strip())
        record_s = float(fixed[244:252].decode("latin-1").strip())
    except ValueError:
        raise RecordError(f"{path}: corrupt EDF header (record count or duration unreadable)") from None
    if header_bytes != 256 * (n_signals + 1):
        # the data start there; a negative or short value would make every read seek before the file or into the header
        raise RecordError(f"{path}: corrupt EDF header (header size {header_bytes} bytes; {n_signals} signals need {256 * (n_signals + 1)})")
    offsets = {"label": 16, "transducer": 80, "unit": 8, "pmin": 8, "pmax": 8, "dmin": 8, "dmax": 8, "prefilter": 80, "nsamp": 8, "reserved": 32}
    cursor = 0
    table: dict[str, list[str]] = {}
    for key, width in offsets.items():
        table[key] = _fields(rest[cursor : cursor + width * n_signals], n_signals, width)
        cursor += width * n_signals
    try:
        nsamp = [int(v) for v in table["nsamp"]]
        pmin, pmax = [float(v) for v in table["pmin"]], [float(v) for v in table["pmax"]]
        dmin, dmax = [int(float(v)) for v in table["dmin"]], [int(float(v)) for v in table["dmax"]]
    except ValueError:
        raise RecordError(f"{path}: corrupt EDF header (signal ranges unreadable)") from None
    if any(n <= 0 for n in nsamp):
        raise RecordError(f"{path}: corrupt EDF header (samples per data record must be > 0, header says {nsamp})")
    for label in table["label"]:
        check_lead_name(path, label)
    patient_id = fixed[8:88].decode("latin-1").strip()
    return {
        "header_bytes": header_bytes,
        "n_records": n_records,
        "record_s": record_s,
        "labels": table["label"],
        "units": table["unit"],
        "nsamp": nsamp,
        "pmin": pmin,
        "pmax": pmax,
        "dmin": dmin,
        "dmax": dmax,
        "patient_id": patient_id,
        "bdf": path.suffix.lower() == ".bdf",
    }


def open_edf(path: Path) -> RecordInfo:
    header = read_edf_header(path)
    signals = [i for i, label in enumerate(header["labels"]) if label != _EDF_ANNOTATIONS]
    if not signals:
        raise RecordError(f"{path}: EDF file holds no signals")
    if header["record_s"] <= 0 or not math.isfinite(header["record_s"]):
        raise RecordError(f"{path}: EDF data-record duration must be > 0 s, header says {header['record_s']}")
    rates = {header["nsamp"][i] / header["record_s"] for i in signals}
    if len(rates) != 1:
        raise RecordError(f"{path}: signals have different sampling rates {sorted(rates)}; resample them first")
    fs_hz = rates.pop()
    if fs_hz <= 0:
        raise RecordError(f"{path}: sampling rate must be > 0 Hz")
    if fs_hz > MAX_FS_HZ:
        raise RecordError(f"{path}: sampling rate {fs_hz:g} Hz is above {MAX_FS_HZ:g} Hz; not an ECG recording")
    if header["n_records"] <= 0:
        raise RecordError(f"{path}: zero-length record (0 data records)")
    sample_bytes = 3 if header["bdf"] else 2
    record_bytes = sum(header["nsamp"]) * sample_bytes
    expected = header["header_bytes"] + header["n_records"] * record_bytes
    actual = path.stat().st_size
    if actual < expected:
        raise RecordError(f"{path}: truncated EDF file: {actual} bytes, header promises {expected}")
    gains = []
    for i in signals:
        span_d = header["dmax"][i] - header["dmin"][i]
        span_p = header["pmax"][i] - header["pmin"][i]
        if span_d == 0 or span_p == 0:
            raise RecordError(f"{path}: signal {header['labels'][i]!r} has an empty digital or physical range")
        gains.append(span_d / span_p)
    n_samples = header["n_records"] * header["nsamp"][signals[0]]
    comments = (header["patient_id"],) if header["patient_id"] else ()
    return RecordInfo(
        path=str(path),
        name=path.stem,
        kind="edf",
        fs_hz=float(fs_hz),
        n_samples=int(n_samples),
        leads=tuple(header["labels"][i] for i in signals),
        units=tuple(header["units"][i] or "mV" for i in signals),
        gains=tuple(float(g) for g in gains),
        formats=("bdf" if header["bdf"] else "edf",) * len(signals),
        comments=comments,
        patient=parse_patient(comments),
    )


def read_edf_samples(info: RecordInfo, sampfrom: int, sampto: int, lead_indices: list[int]) -> np.ndarray:
    """Samples ``[sampfrom, sampto)`` of the chosen leads in mV, reading only the data records needed."""
    path = Path(info.path)
    header = read_edf_header(path)
    signals = [i for i, label in enumerate(header["labels"]) if label != _EDF_ANNOTATIONS]
    per_record = header["nsamp"][signals[0]]
    first_rec, last_rec = sampfrom // per_record, (sampto - 1) // per_record
    sample_bytes = 3 if header["bdf"] else 2
    record_words = sum(header["nsamp"])
    n_recs = last_rec - first_rec + 1
    with open(path, "rb") as handle:
        handle.seek(header["header_bytes"] + first_rec * record_words * sample_bytes)
        raw = handle.read(n_recs * record_words * sample_bytes)
    if len(raw) < n_recs * record_words * sample_bytes:
        raise RecordError(f"{path}: truncated EDF file while reading samples {sampfrom}..{sampto}")
    if header["bdf"]:
        b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        words = (b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)).astype(np.int32)
        words = np.where(words >= 1 << 23, words - (1 << 24), words)
    else:
        words = np.frombuffer(raw, dtype="<i2").astype(np.int32)
    words = words.reshape(n_recs, record_words)
    starts = np.concatenate([[0], np.cumsum(header["nsamp"])])
    out = np.empty((sampto - sampfrom, len(lead_indices)), dtype=np.float32)
    skip = sampfrom - first_rec * per_record
    for column, lead in enumerate(lead_indices):
        sig = signals[lead]
        digital = words[:, starts[sig] : starts[sig + 1]].reshape(-1)[skip : skip + (sampto - sampfrom)]
        gain = (header["dmax"][sig] - header["dmin"][sig]) / (header["pmax"][sig] - header["pmin"][sig])
        physical = (digital - header["dmin"][sig]) / gain + header["pmin"][sig]
        out[:, column] = physical * _mv_scale(info.units[lead])
    return out
