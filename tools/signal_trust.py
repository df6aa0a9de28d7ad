"""How far events found from the signal alone agree with expert annotations, per QA event kind.

A record without a reference ``.atr`` (a user's Holter) gets its beats, classes
and events from the detectors, and every QA item built on it takes them as
ground truth. ``benchmarks/signal_trust.py`` builds, on records that do have
expert annotations and that no detector was tuned on, both bundles (expert
and detected) and counts per event kind how many expert events the detectors
found (Se) and how many detected events the experts have (+P). It writes
those counts, stamped with every detector version, to
``tools/data/signal_trust.json``; :func:`kind_trust` reads them.

A kind is trusted when its Se and +P are both at least :data:`MIN_RATE`
over at least :data:`MIN_EVENTS` expert and detected events. A kind the table
has not measured, or a table measured with other detector versions than the
running ones, trusts nothing: the verdict says which and how to remeasure.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SIGNAL_TRUST_VERSION = "1"
#: Layout of the table file.
TRUST_FORMAT = 1
#: The shipped table (package data), written by ``benchmarks/signal_trust.py --write``.
TABLE_PATH = Path(__file__).resolve().parent / "data" / "signal_trust.json"
#: Se and +P a kind needs on untuned records, each.
MIN_RATE = 0.90
#: Expert events and detected events a kind needs, each, before its rates mean anything.
MIN_EVENTS = 10
REMEASURE = "rerun benchmarks/signal_trust.py --write tools/data/signal_trust.json"


@dataclass(frozen=True)
class KindTrust:
    """The verdict on one kind: trusted or not, and why, with the counts it rests on."""

    kind: str
    trusted: bool
    reason: str
    counts: tuple[int, int, int, int] = (0, 0, 0, 0)  # expert found, expert, detected correct, detected

    @property
    def brief(self) -> str:
        """One table cell: ``yes: Se 93% / +P 100%``, ``no: Se 77% / +P 86%``, ``no: too few expert events (5)`` ..."""
        found, n_reference, correct, n_detected = self.counts
        if not any(self.counts):
            if "other detector versions" in self.reason:
                return "no: measured with other detector versions"
            return "no: no usable trust table" if self.reason.startswith("no usable") else "no: not measured"
        se = f"Se {100 * found / n_reference:.0f}%" if n_reference else "Se -"
        ppv = f"+P {100 * correct / n_detected:.0f}%" if n_detected else "+P -"
        few = f" (too few events: {n_reference} expert, {n_detected} detected)" if min(n_reference, n_detected) < MIN_EVENTS else ""
        return f"{'yes' if self.trusted else 'no'}: {se} / {ppv}{few}"


def verdict(found: int, n_reference: int, correct: int, n_detected: int, kind: str = "") -> KindTrust:
    """Trust from the counts of one kind on untuned records."""
    counts = (int(found), int(n_reference), int(correct), int(n_detected))
    se = f"Se {100 * found / n_reference:.1f}% ({found}/{n_reference})" if n_reference else "Se - (no expert event)"
    ppv = f"+P {100 * correct / n_detected:.1f}% ({correct}/{n_detected})" if n_detected else "+P - (no detected event)"
    measured = f"{se}, {ppv} against expert annotations on untuned records"
    if n_reference < MIN_EVENTS or n_detected < MIN_EVENTS:
        return KindTrust(kind, False, f"not validated: {measured}; needs >= {MIN_EVENTS} expert and detected events", counts)
    if found / n_reference < MIN_RATE or correct / n_detected < MIN_RATE:
        return KindTrust(kind, False, f"{measured}; needs Se and +P >= {100 * MIN_RATE:.0f}%", counts)
    return KindTrust(kind, True, measured, counts)


@dataclass(frozen=True)
class TrustTable:
    """The measured counts per kind and the detector versions they were measured with."""

    versions: dict[str, str]
    counts: dict[str, tuple[int, int, int, int]]
    records: tuple[str, ...] = ()
    problem: str = ""  # why the file could not be used (then nothing is trusted)

    def stale_versions(self, running: dict[str, str]) -> list[str]:
        """``"classify 7 -> 8"`` for every detector whose running version differs from the measured one."""
        names = sorted(set(self.versions) | set(running))
        return [f"{n} {self.versions.get(n, '-')} -> {running.get(n, '-')}" for n in names if self.versions.get(n) != running.get(n)]

    def kind(self, kind: str, running: dict[str, str]) -> KindTrust:
        """The verdict on ``kind`` for detectors at the ``running`` versions."""
        if self.problem:
            return KindTrust(kind, False, f"no usable signal-trust table ({self.problem}): {REMEASURE}")
        stale = self.stale_versions(running)
        if stale:
            return KindTrust(kind, False, f"signal-trust table measured with other detector versions ({'; '.join(stale)}): {REMEASURE}")
        if kind not in self.counts:
            return KindTrust(kind, False, "not validated: no expert-annotated record measures it from the signal")
        return verdict(*self.counts[kind], kind=kind)


def read_trust_table(path: str | os.PathLike[str] = TABLE_PATH) -> TrustTable:
    """The table at ``path``; a missing or unreadable file is an empty table (nothing trusted), never an error."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        if raw.get("format") != TRUST_FORMAT:
            return TrustTable({}, {}, problem=f"format {raw.get('format')!r}, expected {TRUST_FORMAT}")
        counts = {str(k): tuple(int(x) for x in v["counts"]) for k, v in raw["kinds"].items()}
        return TrustTable({str(k): str(v) for k, v in raw["versions"].items()}, counts, tuple(raw.get("records") or ()))  # type: ignore[arg-type]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return TrustTable({}, {}, problem=f"{Path(path).name} unreadable: {type(exc).__name__}")


@functools.lru_cache(maxsize=1)
def _shipped() -> TrustTable:
    return read_trust_table(TABLE_PATH)


def kind_trust(kind: str, table: TrustTable | None = None) -> KindTrust:
    """Whether a QA item may take ``kind``'s events from the detectors as ground truth (the shipped table by default)."""
    from ecgtrace.tools.annotate import annotation_versions

    return (table or _shipped()).kind(kind, annotation_versions())


def table_identity(path: str | os.PathLike[str] = TABLE_PATH) -> str:
    """A digest of the table file (``absent`` without one): part of a build's versions, since it decides which items are kept."""
    import hashlib

    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return "absent"


def write_trust_table(path: str | os.PathLike[str], counts: dict[str, Any], *, records: list[str], command: str) -> None:
    """Write the measured counts with the running detector versions (atomic)."""
    from ecgtrace.jsonio import write_json_atomic
    from ecgtrace.tools.annotate import annotation_versions

    kinds = {}
    for kind, cell in sorted(counts.items()):
        v = verdict(*cell, kind=kind)
        kinds[kind] = {"counts": [int(x) for x in cell], "trusted": v.trusted, "reason": v.reason}
    write_json_atomic(Path(path), {"format": TRUST_FORMAT, "signal_trust_version": SIGNAL_TRUST_VERSION, "command": command,
                                   "counts": "[expert events found, expert events, detected events correct, detected events]",
                                   "min_rate": MIN_RATE, "min_events": MIN_EVENTS, "versions": annotation_versions(),
                                   "records": list(records), "kinds": kinds})


__all__ = ["MIN_EVENTS", "MIN_RATE", "TABLE_PATH", "TRUST_FORMAT", "KindTrust", "TrustTable", "kind_trust", "read_trust_table", "table_identity", "verdict",
           "write_trust_table"]
