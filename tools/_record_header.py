"""What a record's header says: the :class:`RecordInfo` summary, units and patient fields.

Shared by the WFDB reader (:mod:`ecgtrace.tools.records`) and the EDF reader
(:mod:`ecgtrace.tools.edf`), so neither imports the other's internals.
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ecgtrace.errors import RecordError, WindowError

#: More signals than this in one record is refused before anything is parsed (a 12-lead Holter has 12; PSGs a few dozen).
MAX_SIGNALS = 256
#: Sampling rates above this are refused (ECG recorders sample at 128 Hz-10 kHz).
MAX_FS_HZ = 100_000.0
#: A WFDB header of 256 signals is ~20 kB; anything larger than this is not a header.
MAX_HEADER_BYTES = 1 << 20
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def require_regular_file(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` when it is a regular file; a FIFO, device or folder would hang or mislead every reader.

    Raises:
        RecordError: it is missing or not a regular file.
    """
    target = Path(path)
    try:
        mode = target.stat().st_mode
    except OSError as exc:
        raise RecordError(f"{target}: cannot open {what} ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise RecordError(f"{target}: {what} is {kind}; give a regular file")
    return target


def check_lead_name(source: object, name: str) -> str:
    """A lead name as it may enter a dataset: no NUL or other control characters, not empty.

    Raises:
        RecordError: the name holds control characters (a corrupt header).
    """
    if _CONTROL.search(name):
        raise RecordError(f"{source}: lead name {name!r} holds control characters (a corrupt header)")
    if not name.strip():
        raise RecordError(f"{source}: a lead has no name")
    return name

_MV_PER_UNIT = {"mv": 1.0, "uv": 1e-3, "µv": 1e-3, "μv": 1e-3, "v": 1e3, "nu": 1.0, "": 1.0}


@dataclass(frozen=True)
class RecordInfo:
    """Header summary of a record; cheap to build, holds no samples."""

    path: str
    name: str
    kind: str  # "wfdb" or "edf"
    fs_hz: float
    n_samples: int
    leads: tuple[str, ...]
    units: tuple[str, ...]
    gains: tuple[float, ...]
    formats: tuple[str, ...]
    comments: tuple[str, ...] = ()
    patient: dict[str, Any] = field(default_factory=dict)
    unusable_leads: tuple[str, ...] = ()

    @property
    def duration_s(self) -> float:
        return self.n_samples / self.fs_hz

    @property
    def usable_leads(self) -> tuple[str, ...]:
        return tuple(lead for lead in self.leads if lead not in self.unusable_leads)

    def lead_index(self, lead: str | int) -> int:
        """Index of a lead given by name (case-insensitive) or position."""
        if isinstance(lead, int):
            if not 0 <= lead < len(self.leads):
                raise WindowError(f"{self.name}: lead index {lead} out of range 0..{len(self.leads) - 1}")
            return lead
        lowered = [name.lower() for name in self.leads]
        if lead.lower() not in lowered:
            raise WindowError(f"{self.name}: no lead named {lead!r}; leads are {', '.join(self.leads)}")
        return lowered.index(lead.lower())

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "name": self.name,
            "kind": self.kind,
            "fs_hz": float(self.fs_hz),
            "n_samples": int(self.n_samples),
            "duration_s": round(float(self.duration_s), 6),
            "leads": list(self.leads),
            "units": list(self.units),
            "gains": [float(g) for g in self.gains],
            "formats": list(self.formats),
            "comments": list(self.comments),
            "patient": dict(self.patient),
            "unusable_leads": list(self.unusable_leads),
        }


_PATIENT_PATTERNS = {
    "age": re.compile(r"<?\bage\b>?\s*[:=]?\s*(\d{1,3})", re.IGNORECASE),
    "sex": re.compile(r"<?\bsex\b>?\s*[:=]?\s*(male|female|m|f)\b", re.IGNORECASE),
}


def parse_patient(comments: Sequence[str]) -> dict[str, Any]:
    """Patient fields from header comments; fields that are absent stay absent.

    Recognizes MIT-BIH (``69 M 1085 1629 x1``), LUDB (``<age>: 51``) and
    CinC/NSR2DB (``Age: 64 Sex: F``) conventions.
    """
    patient: dict[str, Any] = {}
    text = " ".join(comments)
    age = _PATIENT_PATTERNS["age"].search(text)
    sex = _PATIENT_PATTERNS["sex"].search(text)
    if age is None and sex is None and comments:
        # MIT-BIH: first comment line starts "<age> <sex> ..."
        match = re.match(r"\s*(\d{1,3})\s+([MF])\b", comments[0])
        if match:
            age, sex = match, match
            patient["age_years"] = int(match.group(1))
            patient["sex"] = "male" if match.group(2) == "M" else "female"
            return patient
    if age is not None and 0 < int(age.group(1)) < 130:
        patient["age_years"] = int(age.group(1))
    if sex is not None:
        patient["sex"] = "male" if sex.group(1).lower().startswith("m") else "female"
    diagnoses = [c.split(":", 1)[1].strip() for c in comments if c.lower().startswith(("dx:", "diagnos"))]
    if diagnoses and diagnoses[0]:
        patient["dx"] = diagnoses[0]
    return patient


def _mv_scale(unit: str) -> float:
    return _MV_PER_UNIT.get(unit.strip().lower(), 1.0)


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


#: Parsed WFDB headers kept per process (most recently used last); at most this many records.
HEADER_CACHE_SIZE = 32
_WFDB_HEADERS: OrderedDict[str, tuple[tuple[int, ...], Any]] = OrderedDict()


def wfdb_header(base: str | os.PathLike[str]) -> Any:
    """``wfdb.rdheader(base)``, parsed once per version of ``base.hea``: every chunk of a 24 h record reads the same header.

    The entry is keyed by the header's absolute path and used only while the
    file's modification time, size, inode and change time are those it was parsed
    from, so a rewritten header is parsed again. The object is shared: copy it
    (``copy.copy``) before setting any attribute.
    """
    import wfdb

    path = os.path.abspath(f"{base}.hea")
    st = os.stat(path)
    stamp = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
    hit = _WFDB_HEADERS.get(path)
    if hit is not None and hit[0] == stamp:
        _WFDB_HEADERS.move_to_end(path)
        return hit[1]
    header = wfdb.rdheader(str(base))
    _WFDB_HEADERS[path] = (stamp, header)
    _WFDB_HEADERS.move_to_end(path)
    while len(_WFDB_HEADERS) > HEADER_CACHE_SIZE:
        _WFDB_HEADERS.popitem(last=False)
    return header
