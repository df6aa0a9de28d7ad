"""Open ECG records, read windows and iterate over long recordings in chunks.

Supported inputs are local WFDB records (``.hea`` plus signal files: formats
212, 16 and the others wfdb reads, including the ``.mat`` files of CinC) and
EDF/EDF+ files. Signals are returned in millivolts as ``float32`` arrays of
shape ``(n_samples, n_leads)``.

Memory stays bounded: a window is read with ``sampfrom``/``sampto``, never by
decoding the whole record (a 24 h x 3-lead record decoded at once costs about
774 MB in float64).
"""

from __future__ import annotations

import copy
import math
import os
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ecgtrace.errors import RecordError, WindowError
from ecgtrace.tools._record_header import (
    MAX_FS_HZ,
    MAX_HEADER_BYTES,
    MAX_SIGNALS,
    RecordInfo,
    _check_record_line,
    _mv_scale,
    check_lead_name,
    parse_patient,
    require_regular_file,
    wfdb_header,
)
from ecgtrace.tools.edf import open_edf, read_edf_samples

# bytes per sample for the formats whose file size we can check exactly
_BYTES_PER_SAMPLE = {"8": 1.0, "16": 2.0, "24": 3.0, "32": 4.0, "61": 2.0, "80": 1.0, "160": 2.0, "212": 1.5, "310": 4 / 3, "311": 4 / 3}
_SUPPORTED_FORMATS = set(_BYTES_PER_SAMPLE) | {"508", "516", "524"}

#: Flat means a peak-to-peak excursion under this many mV over a whole probe window.
FLAT_LEAD_PTP_MV = 0.01


@dataclass(frozen=True)
class SignalWindow:
    """A slice of a record in mV: ``signal_mv[i, j]`` is lead ``leads[j]`` at sample ``sampfrom + i``."""

    signal_mv: np.ndarray
    fs_hz: float
    sampfrom: int
    leads: tuple[str, ...]

    @property
    def sampto(self) -> int:
        return self.sampfrom + self.signal_mv.shape[0]

    @property
    def t0_s(self) -> float:
        return self.sampfrom / self.fs_hz


@dataclass(frozen=True)
class Chunk:
    """One piece of a chunked pass over a record.

    ``signal_mv`` covers samples ``[start, start + len)``, which include an
    overlap on each side for detector warm-up. Only events whose sample lies in
    the core ``[core_start, core_stop)`` belong to this chunk: the cores tile the
    record exactly, so each event is kept once.
    """

    signal_mv: np.ndarray
    fs_hz: float
    start: int
    core_start: int
    core_stop: int
    index: int

    def in_core(self, samples: np.ndarray) -> np.ndarray:
        """Mask of absolute sample indices that belong to this chunk's core."""
        return (samples >= self.core_start) & (samples < self.core_stop)


def resolve_record_path(path: str | os.PathLike[str]) -> tuple[Path, str]:
    """Return ``(record base path without extension, kind)`` for a user-given path."""
    raw = Path(path)
    if raw.suffix.lower() in {".edf", ".bdf"}:
        if not raw.exists():
            raise RecordError(f"{raw}: EDF file not found")
        return require_regular_file(raw, "the EDF file"), "edf"
    if raw.suffix.lower() in {".hea", ".dat", ".mat", ".atr"}:
        raw = raw.with_suffix("")
    if not raw.with_suffix(".hea").exists() and not Path(str(raw) + ".hea").exists():
        if Path(str(raw) + ".edf").exists():
            return require_regular_file(Path(str(raw) + ".edf"), "the EDF file"), "edf"
        raise RecordError(f"{raw}: no header file {raw.name}.hea (and no .edf) found")
    require_regular_file(Path(str(raw) + ".hea"), "the header")
    return raw, "wfdb"


def open_record(path: str | os.PathLike[str], *, check_leads: bool = True) -> RecordInfo:
    """Read and validate a record's header.

    Args:
        path: A WFDB record (``dir/100``, ``dir/100.hea``) or an EDF file.
        check_leads: Probe a few short windows spread over the record and mark
            leads that are all-NaN or flat as unusable (with a warning).

    Raises:
        RecordError: the header is missing, corrupt or contradictory, the format
            is unsupported, the sampling rate is not positive, the record is
            empty, or a signal file is missing or truncated.
    """
    base, kind = resolve_record_path(path)
    if kind == "edf":

        info = open_edf(base)
    else:
        info = _open_wfdb(base)
    if check_leads and info.leads:
        info = assess_leads(info)
    return info


def _open_wfdb(base: Path) -> RecordInfo:
    name = base.name
    _check_record_line(base)
    try:
        header = wfdb_header(base)  # parsed here once; every window read of the record reuses it
    except FileNotFoundError:
        raise RecordError(f"{base}.hea: header file not found") from None
    except Exception as exc:  # wfdb raises bare ValueError/IndexError on bad headers
        raise RecordError(f"{base}.hea: corrupt header ({_one_line(exc)})") from None
    if getattr(header, "n_seg", None):
        raise RecordError(f"{base}.hea: multi-segment records are not supported")
    fs_hz = float(header.fs or 0)
    if not math.isfinite(fs_hz) or fs_hz <= 0:
        raise RecordError(f"{base}.hea: sampling rate must be > 0 Hz, header says {header.fs!r}")
    n_sig = int(header.n_sig or 0)
    n_samples = int(header.sig_len or 0)
    if n_sig == 0:
        raise RecordError(f"{base}.hea: record has no signals (annotation-only); read its annotations with fs={fs_hz:g}")
    if n_samples <= 0:
        raise RecordError(f"{base}.hea: zero-length record (0 samples)")
    for attr in ("file_name", "fmt", "adc_gain", "sig_name", "units"):
        values = getattr(header, attr, None)
        if values is None or len(values) != n_sig:
            raise RecordError(f"{base}.hea: contradictory header: {attr} lists {0 if values is None else len(values)} entries for {n_sig} signals")
    formats = tuple(str(f) for f in header.fmt)
    for fmt in formats:
        if fmt not in _SUPPORTED_FORMATS:
            raise RecordError(f"{base}.hea: unsupported signal format {fmt!r}")
    gains = tuple(float(g) for g in header.adc_gain)
    for lead, gain in zip(header.sig_name, gains):
        if not math.isfinite(gain) or gain == 0:
            raise RecordError(f"{base}.hea: lead {lead!r} has an invalid ADC gain {gain!r}")
    _check_signal_files(base, header, n_samples)
    for lead in header.sig_name:
        check_lead_name(f"{base}.hea", str(lead))
    comments = tuple(str(c) for c in (header.comments or []))
    return RecordInfo(
        path=str(base),
        name=name,
        kind="wfdb",
        fs_hz=fs_hz,
        n_samples=n_samples,
        leads=tuple(str(s) for s in header.sig_name),
        units=tuple(str(u) for u in header.units),
        gains=gains,
        formats=formats,
        comments=comments,
        patient=parse_patient(comments),
    )


def _check_signal_files(base: Path, header: Any, n_samples: int) -> None:
    """Each signal file must exist and hold every sample the header promises."""
    per_file: dict[str, list[tuple[str, int, int]]] = {}
    for file_name, fmt, spf, offset in zip(header.file_name, header.fmt, header.samps_per_frame or [1] * header.n_sig, header.byte_offset or [None] * header.n_sig):
        per_file.setdefault(file_name, []).append((str(fmt), int(spf or 1), int(offset or 0)))
    for file_name, signals in per_file.items():
        file_path = base.parent / file_name
        if not file_path.exists():
            raise RecordError(f"{file_path}: signal file not found (named in {base.name}.hea)")
        require_regular_file(file_path, "the signal file")
        if file_path.suffix.lower() == ".mat":
            continue  # wfdb checks .mat containers itself
        if any(fmt not in _BYTES_PER_SAMPLE for fmt, _, _ in signals):
            continue
        bytes_per_frame = sum(_BYTES_PER_SAMPLE[fmt] * spf for fmt, spf, _ in signals)
        expected = signals[0][2] + math.floor(n_samples * bytes_per_frame)
        actual = file_path.stat().st_size
        if actual < expected:
            have = int((actual - signals[0][2]) / bytes_per_frame) if bytes_per_frame else 0
            raise RecordError(f"{file_path}: truncated signal file: {actual} bytes hold about {max(have, 0)} of the {n_samples} samples the header promises")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


def read_samples(info: RecordInfo, sampfrom: int, sampto: int, leads: Sequence[str | int] | None = None) -> SignalWindow:
    """Read samples ``[sampfrom, sampto)`` of the chosen leads in mV (float32).

    Only this range is decoded. Leads are given by name or index; by default all.
    """
    if not 0 <= sampfrom < sampto <= info.n_samples:
        raise WindowError(
            f"{info.name}: window [{sampfrom / info.fs_hz:.3f} s, {sampto / info.fs_hz:.3f} s) "
            f"is outside the record [0, {info.duration_s:.3f} s)"
        )
    indices = [info.lead_index(lead) for lead in leads] if leads is not None else list(range(len(info.leads)))
    if not indices:
        raise WindowError(f"{info.name}: no leads requested")
    if info.kind == "edf":

        signal = read_edf_samples(info, sampfrom, sampto, indices)
    else:
        signal = _read_wfdb_samples(info, sampfrom, sampto, indices)
    return SignalWindow(signal_mv=signal, fs_hz=info.fs_hz, sampfrom=sampfrom, leads=tuple(info.leads[i] for i in indices))


def _read_wfdb_samples(info: RecordInfo, sampfrom: int, sampto: int, indices: list[int]) -> np.ndarray:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            signal = np.asarray(_wfdb_physical(info.path, sampfrom, sampto, indices), dtype=np.float32)
    except Exception as exc:
        raise RecordError(f"{info.path}: cannot read samples {sampfrom}..{sampto} ({_one_line(exc)})") from None
    if signal.shape != (sampto - sampfrom, len(indices)):
        raise RecordError(f"{info.path}: expected {sampto - sampfrom} samples x {len(indices)} leads, read {signal.shape}")
    scales = np.array([_mv_scale(info.units[i]) for i in indices], dtype=np.float32)
    if np.any(scales != 1.0):
        signal = signal * scales
    return signal


def _wfdb_physical(base: str, sampfrom: int, sampto: int, channels: list[int]) -> np.ndarray:
    """``wfdb.rdrecord(base, sampfrom=, sampto=, channels=, physical=True, return_res=32).p_signal`` on the cached header.

    rdrecord parses the header again on every call (about 6 ms, pandas-backed,
    and a 24 h record is read in 144 chunks by each of four passes). These are
    the steps of its single-segment branch, on a copy of the header
    :func:`~ecgtrace.tools._record_header.wfdb_header` keeps, so the samples are
    the ones rdrecord returns (``tests/tools/test_records.py`` compares them); the
    checksum of the window, which rdrecord recomputes and nothing here uses, is
    skipped. Multi-segment headers, or one without a signal length, go through rdrecord.
    """
    import wfdb
    from wfdb.io import _signal

    header = wfdb_header(base)
    if not isinstance(header, wfdb.Record) or header.sig_len is None:
        return wfdb.rdrecord(base, sampfrom=sampfrom, sampto=sampto, channels=channels, physical=True, return_res=32).p_signal
    record = copy.copy(header)  # every step below sets attributes on the copy; the lists it shares are not changed in place
    record.check_read_inputs(sampfrom, sampto, channels, True, True, 32)
    record.e_d_signal = _signal._rd_segment(
        file_name=record.file_name, dir_name=os.path.abspath(os.path.dirname(base)), pn_dir=None, fmt=record.fmt, n_sig=record.n_sig,
        sig_len=record.sig_len, byte_offset=record.byte_offset, samps_per_frame=record.samps_per_frame, skew=record.skew,
        init_value=record.init_value, sampfrom=sampfrom, sampto=sampto, channels=channels, ignore_skew=False, no_file=False,
        sig_data=None, return_res=32,
    )
    record.sig_len = sampto - sampfrom  # the window's length: _arrange_fields then keeps the header's checksums instead of summing the window
    record._arrange_fields(channels=channels, sampfrom=sampfrom, smooth_frames=True)
    if record.d_signal.dtype.itemsize <= 2 and all(abs(int(b)) < 1 << 23 for b in record.baseline):
        return _physical_mv32(record.d_signal, record.baseline, record.adc_gain, _signal._digi_nan(record.fmt))
    record.dac(expanded=False, return_res=32, inplace=True)
    record.convert_dtype(True, 32, True)
    return record.p_signal


def _physical_mv32(digital: np.ndarray, baseline: Sequence[int], gain: Sequence[float], nan_codes: Sequence[int]) -> np.ndarray:
    """wfdb's ``dac(return_res=32)`` of 8/16-bit samples, bit for bit, at about half its cost.

    wfdb casts to float32, then subtracts the baseline and divides by the gain in
    float64 loops over the (n, leads) array with a length-3 inner dimension, rounding to float32 after each.
    For samples of 16 bits or fewer and a baseline under 2**23 the difference is
    an integer that float32 holds exactly, so one float64 pass per lead,
    rounded once at the end, gives the same values.
    """
    out = np.empty(digital.shape, np.float32)
    lead_f64 = np.empty(digital.shape[0], np.float64)
    for j in range(digital.shape[1]):
        column = digital[:, j]
        np.subtract(column, np.float64(baseline[j]), out=lead_f64)
        lead_f64 /= np.float64(gain[j])
        out[:, j] = lead_f64
        missing = column == nan_codes[j]
        if missing.any():
            out[missing, j] = np.nan
    return out


def read_window(info: RecordInfo, t0_s: float, t1_s: float, leads: Sequence[str | int] | None = None) -> SignalWindow:
    """Read the time window ``[t0_s, t1_s)`` (seconds from the record start) in mV."""
    if not (math.isfinite(t0_s) and math.isfinite(t1_s)) or t1_s <= t0_s:
        raise WindowError(f"{info.name}: window [{t0_s}, {t1_s}) s is empty or not finite")
    sampfrom = int(round(t0_s * info.fs_hz))
    sampto = int(round(t1_s * info.fs_hz))
    if sampfrom < 0 or sampto > info.n_samples:
        raise WindowError(f"{info.name}: window [{t0_s:.3f} s, {t1_s:.3f} s) is outside the record [0, {info.duration_s:.3f} s)")
    return read_samples(info, sampfrom, max(sampto, sampfrom + 1), leads)


def chunk_bounds(n_samples: int, chunk_samples: int, overlap_samples: int) -> list[tuple[int, int, int, int]]:
    """``(start, stop, core_start, core_stop)`` for each chunk; the cores tile ``[0, n_samples)``."""
    if chunk_samples <= 0 or overlap_samples < 0:
        raise ValueError("chunk length must be > 0 and overlap >= 0")
    bounds = []
    for core_start in range(0, n_samples, chunk_samples):
        core_stop = min(core_start + chunk_samples, n_samples)
        bounds.append((max(core_start - overlap_samples, 0), min(core_stop + overlap_samples, n_samples), core_start, core_stop))
    return bounds


def iter_chunks(
    info: RecordInfo,
    chunk_s: float = 600.0,
    overlap_s: float = 5.0,
    leads: Sequence[str | int] | None = None,
) -> Iterator[Chunk]:
    """Iterate over the whole record in overlapping chunks with bounded memory."""
    chunk_samples = max(int(round(chunk_s * info.fs_hz)), 1)
    overlap_samples = int(round(overlap_s * info.fs_hz))
    for index, (start, stop, core_start, core_stop) in enumerate(chunk_bounds(info.n_samples, chunk_samples, overlap_samples)):
        window = read_samples(info, start, stop, leads)
        yield Chunk(signal_mv=window.signal_mv, fs_hz=info.fs_hz, start=start, core_start=core_start, core_stop=core_stop, index=index)


def lead_is_unusable(trace_mv: np.ndarray) -> str | None:
    """Why a single-lead trace cannot be used (``"all NaN"``, ``"flat"``), or None."""
    finite = trace_mv[np.isfinite(trace_mv)]
    if finite.size == 0:
        return "all NaN"
    if finite.size < 0.5 * trace_mv.size:
        return "mostly NaN"
    if float(np.ptp(finite)) < FLAT_LEAD_PTP_MV:
        return "flat"
    return None


def assess_leads(info: RecordInfo, n_probes: int = 12, probe_s: float = 10.0) -> RecordInfo:
    """Mark leads unusable when every probe window on them is NaN or flat.

    Probes are ``n_probes`` windows of ``probe_s`` spread evenly over the
    record, so the cost is bounded whatever the record's length.
    """
    probe_samples = min(int(probe_s * info.fs_hz), info.n_samples)
    starts = np.unique(np.linspace(0, info.n_samples - probe_samples, num=n_probes).astype(np.int64))
    reasons: dict[str, set[str]] = {lead: set() for lead in info.leads}
    usable_somewhere = {lead: False for lead in info.leads}
    for start in starts:
        window = read_samples(info, int(start), int(start) + probe_samples)
        for j, lead in enumerate(info.leads):
            reason = lead_is_unusable(window.signal_mv[:, j])
            if reason is None:
                usable_somewhere[lead] = True
            else:
                reasons[lead].add(reason)
    unusable = tuple(lead for lead in info.leads if not usable_somewhere[lead])
    for lead in unusable:
        warnings.warn(f"{info.name}: lead {lead!r} is {' / '.join(sorted(reasons[lead]))} and is marked unusable", RecordWarning, stacklevel=2)
    return replace(info, unusable_leads=unusable)


def require_usable_leads(info: RecordInfo) -> RecordInfo:
    """``info`` when :func:`assess_leads` left at least one usable lead.

    Raises:
        RecordError: every lead is flat or NaN on every probe window; nothing
            can be detected or shown, so no work starts on it.
    """
    if info.leads and not info.usable_leads:
        raise RecordError(f"{info.path}: no usable lead (every lead of {', '.join(info.leads)} is flat or NaN over the whole "
                          "record); nothing to detect or show")
    return info


class RecordWarning(UserWarning):
    """A record problem that does not stop the work (a flat or NaN lead)."""
