"""Expert labels of a record, mapped onto diagnosis graphs (``labels:`` in each YAML).

Sources, by record kind:

* ``synthetic``: the generator's schedule (``NAME.schedule.json``) and its exact ``.atr`` beats;
* ``annotated``: reference ``.atr`` beats (MIT-BIH symbols) and rhythm aux notes;
* ``ptbxl``: ``ptbxl_database.csv`` SCP codes of human-validated records
  (likelihood 100 for diagnostic statements; any mention of a rhythm/form
  statement) and the ``heart_axis`` column;
* ``ludb``: ``ludb.csv`` diagnoses (or the header's diagnosis comments), and the
  rate from LUDB's own QRS marks for statements whose cut-offs are not the graph's;
* ``cinc``: SNOMED CT codes of the header's ``#Dx:`` line.

:meth:`RecordLabels.label` answers True, False or None (ambiguous: the window
straddles an event, or a PTB-XL code has a likelihood below 100). A graph whose
``labels:`` say nothing about the record's source is *unmapped* there: the
graph decision itself becomes the label (provenance ``computed``).
"""

from __future__ import annotations

import ast
import csv
import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ecgtrace.agents.audit._ludb_reference import LUDB_PR_VERSION, ludb_reference_pr_ms, ludb_reference_rate_bpm
from ecgtrace.rubrics.diagnosis_schema import DiagnosisGraph, LabelMap, StatementDoubt

__all__ = ["RecordLabels", "ludb_reference_pr_ms", "ludb_reference_rate_bpm", "record_labels"]

#: Rhythm labels in the MIT-BIH vocabulary (also LTAFDB, VFDB, SVDB): only these are
#: trusted as "absent when not annotated".
ANNOTATED_RHYTHMS = frozenset({"AB", "AFIB", "AFL", "B", "BII", "IVR", "N", "NOD", "P", "PREX", "SBR", "SVTA", "T", "VFL", "VT"})
COVER_SHARE = 0.8  # a rhythm/event covering this share of the window labels it positive


def _find_upward(start: Path, name: str, levels: int = 3) -> Path | None:
    folder = start.parent
    for _ in range(levels):
        if (folder / name).is_file():
            return folder / name
        folder = folder.parent
    return None


@functools.lru_cache(maxsize=4)
def _ptbxl_table(csv_path: str) -> dict[int, dict[str, str]]:
    with open(csv_path, newline="", encoding="utf-8") as handle:
        return {int(float(row["ecg_id"])): row for row in csv.DictReader(handle)}


@functools.lru_cache(maxsize=4)
def _scp_diagnostic(csv_path: str) -> frozenset[str]:
    with open(csv_path, newline="", encoding="utf-8") as handle:
        return frozenset(row[""] for row in csv.DictReader(handle) if row.get("diagnostic") == "1.0")


@functools.lru_cache(maxsize=4)
def _ludb_table(csv_path: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    with open(csv_path, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            lines = [line.strip() for key, value in row.items() if key not in ("ID", "Sex", "Age") for line in (value or "").splitlines()]
            out[str(row["ID"]).strip()] = [line for line in lines if line]
    return out


def _ludb_match(lines: list[str], pattern: str) -> bool:
    """A diagnosis line, or one of its ``:``-separated parts, starts with ``pattern`` (case-insensitive)."""
    pattern = pattern.strip().lower()
    return any(line.strip().lower().startswith(pattern) or any(part.strip().lower().startswith(pattern) for part in line.split(":")) for line in lines)


@dataclass
class RecordLabels:
    """Expert labels of one record (see the module docstring)."""

    kind: str
    method: str
    fs_hz: float
    n_samples: int
    events: list[dict[str, Any]] = field(default_factory=list)
    ref: Any = None  # ReferenceAnnotations
    scp_positive: set[str] = field(default_factory=set)
    scp_uncertain: set[str] = field(default_factory=set)
    scp_likelihood: dict[str, float] = field(default_factory=dict)
    axis: str | None = None
    ludb_lines: list[str] = field(default_factory=list)
    ludb_rate_bpm: float | None = None  # from LUDB's own QRS marks (cardiologists'), not from our detectors
    ludb_pr_ms: float | None = None  # from LUDB's own P and QRS onset marks
    snomed: set[str] = field(default_factory=set)

    @property
    def source(self) -> str:
        return "synthetic" if self.kind == "synthetic" else ("reference" if self.kind != "none" else "computed")

    @property
    def noise_spans_s(self) -> list[tuple[float, float]]:
        return [(e["onset_ms"] / 1000.0, e["offset_ms"] / 1000.0) for e in self.events if e.get("kind") == "noise"]

    def mapped(self, graph: DiagnosisGraph) -> bool:
        lm = graph.labels
        if self.kind == "synthetic":
            return bool(lm.synthetic or lm.beat_symbols)
        if self.kind == "annotated":
            return bool(lm.beat_symbols) or any(r in ANNOTATED_RHYTHMS for r in lm.rhythms)
        if self.kind == "ptbxl":
            return bool(lm.scp) or (bool(lm.ptbxl_axis) and bool(self.axis))
        if self.kind == "ludb":
            return bool(lm.ludb or lm.ludb_ambiguous)  # only ambiguous positives: the other records are still negatives
        if self.kind == "cinc":
            return bool(lm.snomed)
        return False

    # ------------------------------------------------------------------ labels

    def label(self, graph: DiagnosisGraph, t0_s: float, t1_s: float) -> bool | None:
        """True/False for the window, None when ambiguous (only call when :meth:`mapped`)."""
        return self.label_reason(graph, t0_s, t1_s)[0]

    def label_reason(self, graph: DiagnosisGraph, t0_s: float, t1_s: float) -> tuple[bool | None, str]:
        """``(label, why)``: why is empty unless the label is None (then it names the code that made it doubtful)."""
        lm = graph.labels
        if self.kind == "ptbxl":
            return self._ptbxl_reason(lm)
        if self.kind == "ludb":
            return self._ludb_reason(lm)
        if self.kind == "cinc":
            if self.snomed & set(lm.snomed):
                return self._settled(lm, True, "")
            related = sorted(self.snomed & set(lm.snomed_ambiguous))
            return (None, f"snomed {related[0]} (related statement)") if related else self._settled(lm, False, "")
        votes = []
        if lm.beat_symbols and self.ref is not None:
            votes.append(self._beat_vote(lm, t0_s, t1_s))
        if self.kind == "synthetic" and lm.synthetic and not lm.beat_symbols:
            spans = [(e["onset_ms"] / 1000.0, e["offset_ms"] / 1000.0) for e in self.events if e["kind"] in lm.synthetic]
            votes.append(_span_vote(spans, t0_s, t1_s, None))
        if self.kind == "annotated" and any(r in ANNOTATED_RHYTHMS for r in lm.rhythms):
            spans = [(iv["onset_sample"] / self.fs_hz, iv["offset_sample"] / self.fs_hz) for iv in self.ref.rhythm_intervals if iv["label"] in lm.rhythms]
            votes.append(_span_vote(spans, t0_s, t1_s, lm.rhythm_mode))
        label = _combine(votes)
        return label, "window straddles a labelled event" if label is None else ""

    def _ptbxl_reason(self, lm: LabelMap) -> tuple[bool | None, str]:
        """PTB-XL: SCP codes (likelihoods) and heart_axis vote; then the co-statement rules."""
        votes: list[bool | None] = []
        why = ""
        if lm.scp:
            if any(c in self.scp_positive for c in lm.scp):
                votes.append(True)
            elif doubtful := [c for c in lm.scp if c in self.scp_uncertain]:
                votes.append(None)
                why = f"scp {doubtful[0]} likelihood {self.scp_likelihood.get(doubtful[0], 0):g}"
            elif related := [c for c in lm.scp_ambiguous if c in self.scp_positive | self.scp_uncertain]:
                votes.append(None)
                why = f"scp {related[0]} (related statement)"
            elif lm.scp_absent_ambiguous:
                votes.append(None)
                why = f"scp {lm.scp[0]} absent: {lm.scp_absent_ambiguous}"
            else:
                votes.append(False)
        if lm.ptbxl_axis and self.axis:
            if self.axis in lm.ptbxl_axis_ambiguous:
                votes.append(None)
                why = why or f"ptbxl heart_axis {self.axis} does not settle the threshold"
            else:
                votes.append(self.axis in lm.ptbxl_axis)
        label = _combine(votes)
        return self._settled(lm, label, (why or "ptbxl labels disagree") if label is None else "")

    def _ludb_reason(self, lm: LabelMap) -> tuple[bool | None, str]:
        """LUDB: the statement, unless LUDB's own rate or PR marks put the record between the two conventions' cut-offs."""
        band = lm.ludb_rate_doubtful_bpm
        if band is not None and self.ludb_rate_bpm is not None and band[0] <= self.ludb_rate_bpm <= band[1]:
            return None, f"ludb rate convention: {self.ludb_rate_bpm:.1f} bpm by LUDB's QRS marks lies in {band[0]:g}-{band[1]:g} bpm"
        band = lm.ludb_pr_doubtful_ms
        if band is not None and self.ludb_pr_ms is not None and band[0] <= self.ludb_pr_ms <= band[1]:
            stated = "yes" if any(_ludb_match(self.ludb_lines, p) for p in lm.ludb) else "no"
            return None, (f"ludb pr tolerance (statement {stated}): {self.ludb_pr_ms:.0f} ms by LUDB's P/QRS onset marks lies in "
                          f"{band[0]:g}-{band[1]:g} ms (the cut-off +- the marks' tolerance)")
        if any(_ludb_match(self.ludb_lines, p) for p in lm.ludb):
            return self._settled(lm, True, "")
        related = [p for p in lm.ludb_ambiguous if _ludb_match(self.ludb_lines, p)]
        return (None, f"ludb {related[0]!r} (related statement)") if related else self._settled(lm, False, "")

    def _co_statement_doubt(self, rule: StatementDoubt | None, side: str) -> str:
        """Why this record's label on ``side`` ('positive' or 'absent') does not settle the graph beside one of ``rule``'s statements, or ''."""
        if rule is None:
            return ""
        if self.kind == "ptbxl":
            found = sorted(self.scp_positive & set(rule.scp))
        elif self.kind == "cinc":
            found = sorted(self.snomed & set(rule.snomed))
        else:
            found = [p for p in rule.ludb if _ludb_match(self.ludb_lines, p)]
        return f"{side} beside {self.kind} {found[0]}: {rule.reason}" if found else ""

    def _settled(self, lm: LabelMap, label: bool | None, why: str) -> tuple[bool | None, str]:
        """``(label, why)`` after the co-statement rules: a positive or a negative beside a doubting statement becomes None."""
        if label is True and (doubt := self._co_statement_doubt(lm.positive_doubtful_with, "positive")):
            return None, doubt
        if label is False and (doubt := self._co_statement_doubt(lm.absent_doubtful_with, "absent")):
            return None, doubt
        return label, why

    def _beat_vote(self, lm: LabelMap, t0_s: float, t1_s: float) -> bool | None:
        samples = self.ref.beat_samples
        inside = (samples >= t0_s * self.fs_hz) & (samples < t1_s * self.fs_hz)
        n = int(inside.sum())
        hits = int(np.isin(self.ref.beat_symbols[inside], lm.beat_symbols).sum()) if n else 0
        if hits == 0:
            return False
        if lm.min_beat_pct is not None:
            return True if 100.0 * hits / n >= lm.min_beat_pct else None
        return True if hits >= lm.min_beats else None

    # ------------------------------------------------------------------ where positives are

    def positive_windows(self, graph: DiagnosisGraph, window_s: float, rng: np.random.Generator, limit: int) -> list[float]:
        """Candidate window starts (s) likely to be positive, from the labels' own events."""
        duration = self.n_samples / self.fs_hz
        if self.kind in ("ptbxl", "ludb", "cinc"):
            return [0.0]
        lm = graph.labels
        starts: list[float] = []
        if lm.beat_symbols and self.ref is not None:
            hit = np.flatnonzero(np.isin(self.ref.beat_symbols, lm.beat_symbols))
            if lm.min_beat_pct is not None:  # dense beat labels: tile where they are
                times = self.ref.beat_samples[hit] / self.fs_hz
                starts += sorted({float(np.floor(t / window_s) * window_s) for t in times})
            else:
                for k in rng.permutation(hit)[: 3 * limit]:
                    t = self.ref.beat_samples[k] / self.fs_hz
                    starts.append(t - rng.uniform(1.5, window_s - 1.5))
        spans: list[tuple[float, float]] = []
        if self.kind == "synthetic" and lm.synthetic:
            spans = [(e["onset_ms"] / 1000.0, e["offset_ms"] / 1000.0) for e in self.events if e["kind"] in lm.synthetic]
        elif self.kind == "annotated" and self.ref is not None:
            spans = [(iv["onset_sample"] / self.fs_hz, iv["offset_sample"] / self.fs_hz) for iv in self.ref.rhythm_intervals if iv["label"] in lm.rhythms]
        for on, off in spans:
            length = off - on
            if length >= window_s:  # several windows inside a long episode
                n = int(min(limit, length // window_s))
                starts += [float(x) for x in rng.uniform(on, off - window_s, size=n)]
            elif length <= window_s - 1.0:
                starts.append(on - rng.uniform(0.5, window_s - length - 0.5))
        cleaned = sorted({round(float(min(max(s, 0.0), max(duration - window_s, 0.0))), 2) for s in starts})
        order = rng.permutation(len(cleaned))
        return [cleaned[i] for i in order[: 3 * limit]]


def _span_vote(spans: list[tuple[float, float]], t0_s: float, t1_s: float, mode: str | None) -> bool | None:
    width = t1_s - t0_s
    overlapping = [(a, b) for a, b in spans if b > t0_s and a < t1_s]
    if not overlapping:
        return False
    covered = sum(min(b, t1_s) - max(a, t0_s) for a, b in overlapping)
    contains = any(a >= t0_s and b <= t1_s for a, b in overlapping)
    if mode in (None, "any", "contain") and contains:
        return True
    if mode in (None, "any", "cover") and covered >= COVER_SHARE * width:
        return True
    return None


def _combine(votes: list[bool | None]) -> bool | None:
    if any(v is True for v in votes):
        return True
    if votes and all(v is False for v in votes):
        return False
    return None


def record_labels(record_path: str | Path, info: Any, ref: Any) -> RecordLabels:
    """Find the expert labels that come with a record (``ref``: its reference annotations or None)."""
    base = Path(info.path)
    common = {"fs_hz": float(info.fs_hz), "n_samples": int(info.n_samples), "ref": ref}
    schedule = Path(f"{base}.schedule.json")
    if schedule.is_file():
        events = json.loads(schedule.read_text(encoding="utf-8")).get("events", [])
        return RecordLabels(kind="synthetic", method="schedule.json + .atr", events=events, **common)
    ptbxl_csv = _find_upward(base, "ptbxl_database.csv")
    match = re.match(r"^(\d{5})_(lr|hr)$", base.name)
    if ptbxl_csv is not None and match:
        row = _ptbxl_table(str(ptbxl_csv)).get(int(match.group(1)))
        if row is not None and row.get("validated_by_human") == "True":
            scp_csv = ptbxl_csv.parent / "scp_statements.csv"
            diagnostic = _scp_diagnostic(str(scp_csv)) if scp_csv.is_file() else frozenset()
            codes = ast.literal_eval(row["scp_codes"])
            positive = {c for c, v in codes.items() if float(v) >= 100.0 or c not in diagnostic}
            uncertain = set(codes) - positive
            return RecordLabels(kind="ptbxl", method="ptbxl_database.csv scp_codes (validated_by_human)", scp_positive=positive,
                                scp_uncertain=uncertain, scp_likelihood={c: float(v) for c, v in codes.items()}, axis=(row.get("heart_axis") or None), **common)
        return RecordLabels(kind="none", method="ptbxl record not validated by a human", **common)
    ludb_csv = _find_upward(base, "ludb.csv")
    if ludb_csv is not None and base.name.isdigit():
        lines = _ludb_table(str(ludb_csv)).get(base.name)
        if lines is not None:
            fs_hz = float(info.fs_hz)
            method = f"ludb.csv; rate and PR (v{LUDB_PR_VERSION}) from LUDB's wave marks"
            return RecordLabels(kind="ludb", method=method, ludb_lines=lines, ludb_rate_bpm=ludb_reference_rate_bpm(base, fs_hz),
                                ludb_pr_ms=ludb_reference_pr_ms(base, fs_hz), **common)
    dx = [c.split(":", 1)[1] for c in info.comments if c.strip().lower().startswith("dx:")]
    if dx:
        codes = {code.strip() for code in dx[0].split(",") if code.strip()}
        return RecordLabels(kind="cinc", method="header #Dx SNOMED CT codes", snomed=codes, **common)
    if ref is not None:
        return RecordLabels(kind="annotated", method=f"reference annotations .{ref.extension}", **common)
    return RecordLabels(kind="none", method="no expert labels", **common)
