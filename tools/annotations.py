"""Reference annotations: beats mapped to AAMI classes and rhythm intervals.

Expert annotations (``.atr`` and similar) are the first source of ground truth
in ecgtrace. Beats keep their original MIT-BIH symbol next to the AAMI class;
rhythm intervals are read from aux notes such as ``(N`` or ``(AFIB``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ecgtrace.contracts.common import provenance
from ecgtrace.errors import AnnotationError

#: MIT-BIH beat symbols per AAMI EC57 class. Everything else is not a beat.
AAMI_CLASSES: dict[str, tuple[str, ...]] = {
    "N": ("N", "L", "R", "e", "j", "B"),
    "S": ("A", "a", "J", "S"),
    "V": ("V", "E"),
    "F": ("F",),
    "Q": ("/", "f", "Q"),
}
SYMBOL_TO_AAMI: dict[str, str] = {symbol: cls for cls, symbols in AAMI_CLASSES.items() for symbol in symbols}
#: Version of the reference-annotation reader (its provenance and the annotation cache key).
ANNOTATIONS_VERSION = "1"
AAMI_ORDER: tuple[str, ...] = ("N", "S", "V", "F", "Q")
#: Non-beat symbols kept as marks: P-wave peak, non-conducted P wave (blocked PAC), ventricular flutter wave.
MARK_SYMBOLS: tuple[str, ...] = ("p", "x", "!")

# Control characters that real files carry in aux notes: NUL padding in MIT-BIH,
# a leading "\x01 Aux" in LTAFDB.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def clean_aux_note(note: str | None) -> str:
    """Strip NUL bytes and other control characters from an aux note."""
    if not note:
        return ""
    return _CONTROL.sub("", note).strip()


def rhythm_label(note: str | None) -> str | None:
    """``"(AFIB\\x00"`` -> ``"AFIB"``; None when the note is not a rhythm change."""
    cleaned = clean_aux_note(note)
    if not cleaned.startswith("("):
        return None
    label = cleaned[1:].strip()
    return label or None


@dataclass(frozen=True)
class ReferenceAnnotations:
    """Beats and rhythm intervals read from an annotation file.

    Attributes:
        beat_samples: R-peak sample index of every beat (int64).
        beat_symbols: the original symbol of each beat.
        beat_classes: the AAMI class (N, S, V, F, Q) of each beat.
        rhythm_intervals: plain-JSON dicts ``{label, onset_sample, offset_sample,
            onset_ms, offset_ms}``; an interval runs until the next rhythm note
            or the end of the record.
        marks: non-beat marks by symbol, sample indices (int64): ``p`` (P-wave
            peak), ``x`` (non-conducted P wave, blocked PAC), ``!`` (ventricular
            flutter wave); only symbols of :data:`MARK_SYMBOLS` that occur.
    """

    record: str
    extension: str
    fs_hz: float
    n_samples: int
    beat_samples: np.ndarray
    beat_symbols: np.ndarray
    beat_classes: np.ndarray
    rhythm_intervals: list[dict[str, Any]] = field(default_factory=list)
    marks: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def provenance(self) -> dict[str, Any]:
        return provenance("reference", f"annotation file .{self.extension}", ANNOTATIONS_VERSION, {"record": self.record})

    def class_counts(self) -> dict[str, int]:
        return {cls: int(np.count_nonzero(self.beat_classes == cls)) for cls in AAMI_ORDER}

    def beat_times_ms(self) -> np.ndarray:
        return np.round(self.beat_samples * (1000.0 / self.fs_hz)).astype(np.int64)

    def to_json(self) -> dict[str, Any]:
        return {
            "record": self.record,
            "extension": self.extension,
            "fs_hz": float(self.fs_hz),
            "n_beats": int(self.beat_samples.size),
            "beats_per_class": self.class_counts(),
            "rhythm_intervals": self.rhythm_intervals,
            "provenance": self.provenance,
        }


def read_reference_annotations(
    record_path: str | os.PathLike[str],
    extension: str = "atr",
    *,
    fs_hz: float | None = None,
    n_samples: int | None = None,
) -> ReferenceAnnotations:
    """Read beats and rhythm intervals from ``<record>.<extension>``.

    Args:
        record_path: Record base path (``dir/100``); the annotation file is
            ``dir/100.<extension>``. Annotation-only databases (LTAFDB, NSR2DB)
            need no signal files.
        extension: Annotation file extension (``atr``, ``ecg``, ``qrs`` ...).
        fs_hz: Sampling rate, required when neither the annotation file nor a
            header states it (LTAFDB: 128).
        n_samples: Record length; taken from the header when there is one. It
            closes the last rhythm interval and checks that beats fit the record.

    Raises:
        AnnotationError: missing or unreadable file, no sampling rate, or
            annotations that do not match the record.
    """
    import wfdb

    base = Path(record_path)
    if base.suffix.lower() in {".hea", ".dat", ".atr"}:
        base = base.with_suffix("")
    ann_file = Path(f"{base}.{extension}")
    if not ann_file.exists():
        raise AnnotationError(f"{ann_file}: annotation file not found")
    if not ann_file.is_file():
        raise AnnotationError(f"{ann_file}: not a regular file (a FIFO or folder); give the annotation file itself")
    header_fs, header_len = _header_fs_and_length(base)
    try:
        ann = wfdb.rdann(str(base), extension)
    except Exception as exc:
        raise AnnotationError(f"{ann_file}: unreadable annotation file ({str(exc).strip()[:160] or type(exc).__name__})") from None
    fs = _sampling_rate(ann_file, fs_hz, header_fs, float(ann.fs) if ann.fs else None)
    samples = np.asarray(ann.sample, dtype=np.int64)
    symbols = np.asarray(ann.symbol, dtype=object)
    aux = list(ann.aux_note) if ann.aux_note is not None else [""] * samples.size
    length = n_samples or header_len or (int(samples.max()) + 1 if samples.size else 0)
    samples, symbols, aux = _within_record(ann_file, samples, symbols, aux, length)
    is_beat = np.array([symbol in SYMBOL_TO_AAMI for symbol in symbols], dtype=bool)
    beat_symbols = symbols[is_beat].astype(str) if is_beat.any() else np.array([], dtype=str)
    return ReferenceAnnotations(
        record=base.name,
        extension=extension,
        fs_hz=float(fs),
        n_samples=int(length),
        beat_samples=samples[is_beat],
        beat_symbols=beat_symbols,
        beat_classes=np.array([SYMBOL_TO_AAMI[s] for s in beat_symbols], dtype="<U1"),
        rhythm_intervals=_rhythm_intervals(samples, aux, fs, length),
        marks={m: samples[symbols == m] for m in MARK_SYMBOLS if np.any(symbols == m)},
    )


def _sampling_rate(ann_file: Path, fs_hz: float | None, header_fs: float | None, ann_fs: float | None) -> float:
    """The rate the caller gives, else the header's, else the annotation file's (Hz); any two that disagree are an error."""
    fs = fs_hz or header_fs or ann_fs
    if not fs or fs <= 0:
        raise AnnotationError(f"{ann_file}: no sampling rate in the file or a header; pass fs_hz")
    if header_fs and ann_fs and abs(header_fs - ann_fs) > 1e-6:
        raise AnnotationError(f"{ann_file}: annotation sampling rate {ann_fs:g} Hz does not match the record's {header_fs:g} Hz")
    if fs_hz and header_fs and abs(fs_hz - header_fs) > 1e-6:
        raise AnnotationError(f"{ann_file}: fs_hz={fs_hz:g} contradicts the header's {header_fs:g} Hz")
    return float(fs)


def _within_record(ann_file: Path, samples: np.ndarray, symbols: np.ndarray, aux: list[str],
                   length: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The annotations less a mark on the sample just past the end; an annotation outside the record is an error."""
    if samples.size and length and samples.max() == length:
        # some databases (CPSC 2021) mark the sample just past the end; such a mark holds no beat
        keep = samples < length
        samples, symbols, aux = samples[keep], symbols[keep], [a for a, k in zip(aux, keep) if k]
    if samples.size and (samples.min() < 0 or (length and samples.max() >= length)):
        raise AnnotationError(
            f"{ann_file}: annotations reach sample {int(samples.max())} but the record has {length} samples; "
            "the file does not match this record"
        )
    return samples, symbols, aux


def _header_fs_and_length(base: Path) -> tuple[float | None, int | None]:
    import wfdb

    if not Path(f"{base}.hea").exists():
        return None, None
    try:
        header = wfdb.rdheader(str(base))
    except Exception:
        return None, None
    return (float(header.fs) if header.fs else None), (int(header.sig_len) if header.sig_len else None)


def _rhythm_intervals(samples: np.ndarray, aux: list[str], fs_hz: float, n_samples: int) -> list[dict[str, Any]]:
    changes = [(int(sample), label) for sample, note in zip(samples, aux) if (label := rhythm_label(note))]
    intervals: list[dict[str, Any]] = []
    for k, (onset, label) in enumerate(changes):
        offset = changes[k + 1][0] if k + 1 < len(changes) else max(n_samples, onset + 1)
        if intervals and intervals[-1]["label"] == label and intervals[-1]["offset_sample"] == onset:
            intervals[-1]["offset_sample"] = offset  # a repeated note continues the same rhythm
            intervals[-1]["offset_ms"] = int(round(offset * 1000.0 / fs_hz))
            continue
        intervals.append(
            {
                "label": label,
                "onset_sample": onset,
                "offset_sample": offset,
                "onset_ms": int(round(onset * 1000.0 / fs_hz)),
                "offset_ms": int(round(offset * 1000.0 / fs_hz)),
            }
        )
    return intervals
