"""What formats share: finding a benchmark's records on disk and rendering 12-lead assets for them.

Benchmarks name their ECGs by an id; the record itself is in the user's copy
of the public database. :func:`ptbxl_record` and :func:`mimic_record` apply
the databases' own path rules under a folder; :func:`open_12lead` opens the
record and checks it holds the 12 standard leads. :func:`render_12lead_assets`
writes the image (3x4 with a rhythm strip, or stacked) and the signal as text,
named by record and settings, so samples on one record share them and a rerun
reuses what a previous one wrote (writes are atomic: a file that exists is whole).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ecgtrace.contracts.vocabulary import TWELVE_LEADS, standard_lead_name
from ecgtrace.errors import RecordError
from ecgtrace.jsonio import safe_join, write_text_atomic
from ecgtrace.tools.records import RecordInfo, open_record, read_window

class RecordMissing(RecordError):
    """No root holds the record a benchmark sample names."""


#: PTB-XL's folders by sampling rate: (folder, file suffix).
PTBXL_RATES: dict[int, tuple[str, str]] = {500: ("records500", "hr"), 100: ("records100", "lr")}
ASSETS_VERSION = "1"


def ptbxl_record(roots: Sequence[str | os.PathLike[str]], ecg_id: Any, rate_hz: int = 500) -> Path:
    """The PTB-XL record ``records500/{id // 1000 * 1000:05d}/{id:05d}_hr`` (``records100/..._lr`` at 100 Hz) under a root.

    Raises:
        RecordError: ``ecg_id`` is not a positive integer, or no root holds the record.
    """
    try:
        number = int(str(ecg_id).strip())
    except ValueError:
        raise RecordError(f"ecg_id {ecg_id!r} is not a PTB-XL ecg_id (a positive integer)") from None
    if number <= 0:
        raise RecordError(f"ecg_id {ecg_id!r} is not a PTB-XL ecg_id (a positive integer)")
    folder, suffix = PTBXL_RATES[int(rate_hz)]
    rel = Path(folder) / f"{number // 1000 * 1000:05d}" / f"{number:05d}_{suffix}"
    return _first_existing(roots, [rel], f"PTB-XL record {rel}")


def mimic_record(roots: Sequence[str | os.PathLike[str]], study_id: Any, subject_id: Any = None) -> Path:
    """The MIMIC-IV-ECG record ``files/p{subject[:4]}/p{subject}/s{study}/{study}`` under a root.

    Without a ``subject_id`` (older files leave it out) the study folder is
    looked up among ``files/p*/p*/s{study}``.
    """
    study = str(study_id).strip()
    if not study.isdigit():
        raise RecordError(f"ecg_id {study_id!r} is not a MIMIC-IV-ECG study id")
    if subject_id not in (None, ""):
        subject = str(subject_id).strip()
        rel = Path("files") / f"p{subject[:4]}" / f"p{subject}" / f"s{study}" / study
        return _first_existing(roots, [rel], f"MIMIC-IV-ECG record {rel}")
    for root in roots:
        for hit in sorted(Path(root).glob(f"files/p*/p*/s{study}/{study}.hea")):
            return hit.with_suffix("")
    raise RecordMissing(f"MIMIC-IV-ECG record files/p*/p*/s{study}/{study} not found under {', '.join(str(r) for r in roots)}")


def _first_existing(roots: Sequence[str | os.PathLike[str]], rels: list[Path], what: str) -> Path:
    for root in roots:
        for rel in rels:
            base = Path(root) / rel
            if base.with_suffix(".hea").is_file():
                return base
    raise RecordMissing(f"{what} not found under {', '.join(str(r) for r in roots)}")


def open_12lead(path: str | os.PathLike[str]) -> RecordInfo:
    """Open a record and check that it has the 12 standard leads (names match case-insensitively: ``AVR`` = ``aVR``)."""
    info = open_record(path, check_leads=False)
    names = {standard_lead_name(lead) for lead in info.leads}
    missing = [lead for lead in TWELVE_LEADS if lead not in names]
    if missing:
        raise RecordError(f"{info.path}: not a 12-lead record (no lead {', '.join(missing)})")
    return info


@dataclass(frozen=True)
class AssetSettings:
    """How 12-lead assets are drawn: the image layout, the rate of the signal text, the image resolution."""

    layout: str = "3x4"
    text_rate_hz: float = 100.0
    px_per_mm: int = 10
    modalities: tuple[str, ...] = ("image", "text")

    def to_json(self) -> dict[str, Any]:
        return {"layout": self.layout, "text_rate_hz": self.text_rate_hz, "px_per_mm": self.px_per_mm,
                "modalities": list(self.modalities), "version": ASSETS_VERSION}


def asset_names(stem: str, info_fs_hz: float, settings: AssetSettings) -> dict[str, str]:
    """``{"image": "assets/<stem>-<fs>hz-<layout>.png", "text": "assets/<stem>-<fs>hz-text<rate>hz.txt"}`` for the modalities asked."""
    rate = f"{info_fs_hz:g}hz"
    names = {"image": f"assets/{stem}-{rate}-{settings.layout}.png", "text": f"assets/{stem}-{rate}-text{settings.text_rate_hz:g}hz.txt"}
    return {kind: rel for kind, rel in names.items() if kind in settings.modalities}


def text_decimation(fs_hz: float, text_rate_hz: float) -> int:
    """The integer subsampling step that brings ``fs_hz`` to ``text_rate_hz`` or just above it (1: keep every sample)."""
    return max(1, int(fs_hz // text_rate_hz)) if text_rate_hz > 0 else 1


def render_12lead_assets(info: RecordInfo, out_dir: str | os.PathLike[str], stem: str, settings: AssetSettings) -> dict[str, str]:
    """Write the whole record's image and signal text under ``out_dir/assets`` (skipped when present); their relative paths.

    The signal text holds the 12 leads in the standard order at about
    ``settings.text_rate_hz`` (plain subsampling, :func:`ecgtrace.tools.render.signal_to_text`).
    """
    from ecgtrace.tools._render_12lead import standard_order
    from ecgtrace.tools.render import render_12lead_png, signal_to_text

    names = asset_names(stem, info.fs_hz, settings)
    todo = {kind: rel for kind, rel in names.items() if not safe_join(out_dir, rel).is_file()}
    if todo:
        window = standard_order(read_window(info, 0.0, info.duration_s))
        if "image" in todo:
            render_12lead_png(window, safe_join(out_dir, todo["image"]), layout=settings.layout, px_per_mm=settings.px_per_mm)
        if "text" in todo:
            text = signal_to_text(window, decimate=text_decimation(info.fs_hz, settings.text_rate_hz), record=info.name)
            write_text_atomic(safe_join(out_dir, todo["text"]), text)
    return names
