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

import math
import os
import re
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
    _mv_scale,
    check_lead_name,
    parse_patient,
    require_regular_file,
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
    import wfdb

    name = base.name
    _check_record_line(base)
    try:
        header = wfdb.rdheader(str(base))
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


_WFDB_NUMBER = r"\d*\.?\d*"
#: ``fs[/counter_freq[(base_counter)]]`` as the WFDB header format writes it (no exponent, no sign).
_FS_FIELD = re.compile(rf"({_WFDB_NUMBER})(/-?{_WFDB_NUMBER}(\(-?{_WFDB_NUMBER}\))?)?")
#: ``adc_gain[(baseline)][/units]``; wfdb misreads anything else (``nan`` turns the rest of the line into the lead name).
_GAIN_FIELD = re.compile(rf"-?{_WFDB_NUMBER}(e[+-]?\d+)?(\(-?\d+\))?(/[\w^\-?%/]*)?")


def _check_record_line(base: Path) -> None:
    """Check the header's record and signal lines ourselves, before wfdb reads them.

    wfdb reads ``-250`` as a rate of 250 Hz, ``1e9`` as 1 Hz with zero samples,
    ``nan`` as a gain by shifting the line into the lead name, and spends a
    minute on a header declaring 100,000 signals; each is refused here with
    what is wrong.
    """
    header = Path(f"{base}.hea")
    try:
        size = require_regular_file(header, "the header").stat().st_size
        if size > MAX_HEADER_BYTES:
            raise RecordError(f"{header}: {size} bytes is not a WFDB header (at most {MAX_HEADER_BYTES})")
        text = header.read_text(encoding="latin-1")
    except OSError as exc:
        raise RecordError(f"{base}.hea: cannot read header ({exc.strerror})") from None
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    tokens = lines[0].split() if lines else []
    if len(tokens) < 2 or not tokens[1].isdigit():
        raise RecordError(f"{base}.hea: corrupt header (the record line must give a name and a signal count)")
    n_sig = int(tokens[1])
    if n_sig > MAX_SIGNALS:
        raise RecordError(f"{base}.hea: declares {n_sig} signals; at most {MAX_SIGNALS} are supported")
    if len(tokens) >= 3:
        _check_fs_token(base, tokens[2])
    if len(tokens) >= 4 and not tokens[3].isdigit():
        raise RecordError(f"{base}.hea: corrupt header (sample count {tokens[3]!r} is not a whole number)")
    if "/" in tokens[0]:
        return  # multi-segment: refused with its own message once wfdb has read it
    if len(lines) - 1 < n_sig:
        raise RecordError(f"{base}.hea: contradictory header: declares {n_sig} signals but has {len(lines) - 1} signal lines")
    for number, line in enumerate(lines[1 : 1 + n_sig], start=1):
        _check_signal_line(base, number, line)


def _check_fs_token(base: Path, token: str) -> None:
    match = _FS_FIELD.fullmatch(token)
    if match is None or not any(ch.isdigit() for ch in match.group(1)):
        raise RecordError(f"{base}.hea: corrupt header (sampling rate {token!r} is not a positive decimal number)")
    fs_value = float(match.group(1))
    if not math.isfinite(fs_value) or fs_value <= 0:
        raise RecordError(f"{base}.hea: sampling rate must be > 0 Hz, header says {token}")
    if fs_value > MAX_FS_HZ:
        raise RecordError(f"{base}.hea: sampling rate {fs_value:g} Hz is above {MAX_FS_HZ:g} Hz; not an ECG recording")


def _check_signal_line(base: Path, number: int, line: str) -> None:
    """One signal line: a gain wfdb can read, a lead name without control characters."""
    tokens = line.split()
    if len(tokens) >= 3 and (_GAIN_FIELD.fullmatch(tokens[2]) is None or not any(ch.isdigit() for ch in tokens[2].split("(")[0].split("/")[0])):
        raise RecordError(f"{base}.hea: signal {number} has an invalid ADC gain {tokens[2]!r}")
    if len(tokens) >= 9:
        check_lead_name(f"{base}.hea", " ".join(tokens[8:]))
    elif "\x00" in line:
        raise RecordError(f"{base}.hea: signal line {number} holds NUL bytes (a corrupt header)")


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
    import wfdb

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            record = wfdb.rdrecord(info.path, sampfrom=sampfrom, sampto=sampto, channels=indices, physical=True, return_res=32)
    except Exception as exc:
        raise RecordError(f"{info.path}: cannot read samples {sampfrom}..{sampto} ({_one_line(exc)})") from None
    signal = np.asarray(record.p_signal, dtype=np.float32)
    if signal.shape != (sampto - sampfrom, len(indices)):
        raise RecordError(f"{info.path}: expected {sampto - sampfrom} samples x {len(indices)} leads, read {signal.shape}")
    scales = np.array([_mv_scale(info.units[i]) for i in indices], dtype=np.float32)
    if np.any(scales != 1.0):
        signal = signal * scales
    return signal


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
