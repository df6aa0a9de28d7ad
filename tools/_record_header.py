"""What a record's header says: the :class:`RecordInfo` summary, units and patient fields.

Shared by the WFDB reader (:mod:`ecgtrace.tools.records`) and the EDF reader
(:mod:`ecgtrace.tools.edf`), so neither imports the other's internals.
"""

from __future__ import annotations

import os
import re
import stat
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
