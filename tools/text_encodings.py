"""The ECG window as text for a language model, in four encodings of different size.

A 10 s, 3-lead, 250 Hz window written as raw samples is about 60,000 tokens for
tokenizers that split numbers into digits (SmolLM2, Mistral, Qwen, Gemma): more
than most local models' context. The encodings trade detail for size; each one
opens with ``#`` lines that say exactly what its numbers are.

* ``raw`` - :func:`ecgtrace.tools.render.signal_to_text`: one row per sample,
  ``t_s`` (s from the recording start) and each lead in mV with 3 decimals.
* ``downsampled`` - the same layout at ``fs_hz`` (anti-aliased polyphase
  resampling, :func:`scipy.signal.resample_poly`, Kaiser window, linear edge padding).
* ``compact`` - integer microvolts, no time column (the first row's time and
  the rate are stated once); optionally at ``fs_hz`` like ``downsampled``.
* ``summary`` - measurements instead of samples, as OpenTSLM-style adapters
  feed their models: R peaks found in the window by the project's detector
  (:func:`ecgtrace.tools.measure.detect_window_beats`, i.e.
  :mod:`ecgtrace.tools.beats`), RR intervals, and per lead and per beat the
  PR, QRS and QT intervals and the P, R, S, T amplitudes and ST level from
  :func:`ecgtrace.tools.measure.measure_window`. No beat labels (the beat
  classifier's output is never shown: it would be an answer).

Every encoding can keep a subset of the leads (``leads``). The encoders read
only the signal (a :class:`~ecgtrace.tools.records.SignalWindow`), or the raw
text asset an item already shows (:func:`encode_signal_text`, the same window as
the item's image); the same input always gives the same text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from ecgtrace.contracts.vocabulary import TEXT_ENCODINGS
from ecgtrace.errors import EcgTraceError
from ecgtrace.tools.records import SignalWindow
from ecgtrace.tools.render import TEXT_FORMAT, _time_decimals, parse_signal_text, signal_to_text

#: Bump when an encoding's text changes: it is part of a run's identity.
ENCODING_VERSION = "1"
COMPACT_FORMAT = "ecgtrace-signal-compact/1"
SUMMARY_FORMAT = "ecgtrace-beat-summary/1"
#: Lowest rate ``downsampled``/``compact`` accept: below it the QRS (20-40 Hz content) is gone.
MIN_FS_HZ = 50.0
#: The measurements a summary lists per beat and lead: (column, per-beat key of measure_window, unit, decimals).
SUMMARY_COLUMNS: tuple[tuple[str, str, str, int], ...] = (
    ("pr_ms", "pr_ms", "ms", 0), ("qrs_ms", "qrs_ms", "ms", 0), ("qt_ms", "qt_ms", "ms", 0),
    ("p_mv", "p_amp_mv", "mV", 3), ("r_mv", "r_amp_mv", "mV", 3), ("s_mv", "s_amp_mv", "mV", 3),
    ("t_mv", "t_amp_mv", "mV", 3), ("st_mv", "st_j60_mv", "mV", 3))


class EncodingError(EcgTraceError):
    """A window cannot be written in the chosen text encoding (unknown method, lead, rate or text)."""


@dataclass(frozen=True)
class TextEncoding:
    """How the ECG is written as text: ``method`` and its parameters.

    Attributes:
        method: one of :data:`TEXT_ENCODINGS`.
        fs_hz: output rate in Hz (``downsampled``: required; ``compact``: optional; else None).
        leads: the leads kept, in this order (None: every lead of the window).
    """

    method: str = "raw"
    fs_hz: float | None = None
    leads: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.method not in TEXT_ENCODINGS:
            raise EncodingError(f"unknown text encoding {self.method!r} (choose from {', '.join(TEXT_ENCODINGS)})")
        if self.fs_hz is not None and not (math.isfinite(self.fs_hz) and self.fs_hz >= MIN_FS_HZ):
            raise EncodingError(f"--text-fs must be at least {MIN_FS_HZ:g} Hz, got {self.fs_hz:g}")
        if self.method == "downsampled" and self.fs_hz is None:
            raise EncodingError("--text-encoding downsampled needs --text-fs HZ")
        if self.method in ("raw", "summary") and self.fs_hz is not None:
            raise EncodingError(f"--text-fs does not apply to --text-encoding {self.method} (use downsampled or compact)")
        if self.leads is not None and (not self.leads or len(set(self.leads)) != len(self.leads) or not all(self.leads)):
            raise EncodingError(f"--text-leads must name distinct leads, got {','.join(self.leads)!r}")

    @property
    def is_asset(self) -> bool:
        """True when the text is the raw asset itself (nothing to re-encode)."""
        return self.method == "raw" and self.leads is None

    def to_json(self) -> dict[str, Any]:
        """What a run's identity records: method, its parameters and the encoders' version."""
        return {"method": self.method, "fs_hz": self.fs_hz, "leads": list(self.leads) if self.leads else None,
                "version": ENCODING_VERSION}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> TextEncoding:
        data = data or {}
        leads = data.get("leads")
        return cls(method=data.get("method", "raw"), fs_hz=data.get("fs_hz"), leads=tuple(leads) if leads else None)


RAW = TextEncoding()


def text_encoding(method: str = "raw", fs_hz: float | None = None, leads: str | Sequence[str] | None = None) -> TextEncoding:
    """A checked :class:`TextEncoding`; ``leads`` may be a comma-separated string (``"II,V5"``)."""
    if isinstance(leads, str):
        leads = [name.strip() for name in leads.split(",")]
    return TextEncoding(method=method, fs_hz=float(fs_hz) if fs_hz is not None else None, leads=tuple(leads) if leads else None)


# ------------------------------------------------------------------ signal operations

def select_leads(window: SignalWindow, leads: Sequence[str] | None) -> SignalWindow:
    """The window with only ``leads`` (in that order); every lead when None."""
    if not leads:
        return window
    missing = [name for name in leads if name not in window.leads]
    if missing:
        raise EncodingError(f"lead {missing[0]!r} is not in this window (leads: {', '.join(window.leads)})")
    columns = [window.leads.index(name) for name in leads]
    return SignalWindow(signal_mv=np.asarray(window.signal_mv)[:, columns], fs_hz=window.fs_hz, sampfrom=window.sampfrom, leads=tuple(leads))


def resample_ratio(fs_in_hz: float, fs_out_hz: float) -> Fraction:
    """``up/down`` with ``fs_out = fs_in * up / down`` exactly (denominators up to 1000)."""
    ratio = Fraction(fs_out_hz / fs_in_hz).limit_denominator(1000)
    if ratio <= 0 or ratio > 1:
        raise EncodingError(f"--text-fs {fs_out_hz:g} Hz must not exceed the record's {fs_in_hz:g} Hz")
    return ratio


def resample_mv(signal_mv: np.ndarray, fs_in_hz: float, fs_out_hz: float) -> tuple[np.ndarray, float]:
    """``(signal at the new rate, exact new rate in Hz)``; row ``i`` lies at ``i / fs_out`` from the first input row.

    Anti-aliased polyphase resampling (:func:`scipy.signal.resample_poly`,
    Kaiser window beta 5, edges padded along a line so that a baseline offset
    does not ring). Missing samples (NaN) are bridged for the filter and stay
    missing in every output row whose nearest input sample was missing.
    """
    from scipy.signal import resample_poly

    ratio = resample_ratio(fs_in_hz, fs_out_hz)
    x = np.asarray(signal_mv, dtype=np.float64)
    if ratio == 1:
        return x.copy(), float(fs_in_hz)
    missing = ~np.isfinite(x)
    if missing.any():
        x = x.copy()
        rows = np.arange(x.shape[0])
        for j in range(x.shape[1]):
            good = ~missing[:, j]
            x[:, j] = np.interp(rows, rows[good], x[good, j]) if good.any() else 0.0
    y = resample_poly(x, ratio.numerator, ratio.denominator, axis=0, padtype="line")
    fs_out = float(fs_in_hz) * ratio.numerator / ratio.denominator
    if missing.any():
        nearest = np.minimum(np.round(np.arange(y.shape[0]) * fs_in_hz / fs_out).astype(np.int64), x.shape[0] - 1)
        y[missing[nearest]] = np.nan
    return y, fs_out


# ------------------------------------------------------------------ encoders

def _fmt(value: float, decimals: int) -> str:
    if not math.isfinite(value):
        return ""
    rounded = round(float(value), decimals) + 0.0  # + 0.0 turns -0.0 into 0.0
    return f"{rounded:.{decimals}f}" if decimals else str(int(rounded))


def _downsampled(window: SignalWindow, fs_hz: float, record: str | None) -> str:
    """The raw text layout (``t_s`` and mV, 3 decimals) at ``fs_hz``."""
    y, fs_out = resample_mv(window.signal_mv, window.fs_hz, fs_hz)
    step = window.fs_hz / fs_out
    on_grid = abs(step - round(step)) < 1e-9
    decimals = _time_decimals(window.fs_hz, int(round(step))) if on_grid else max(3, math.ceil(math.log10(fs_out)) + 1)
    times = window.t0_s + np.arange(y.shape[0]) / fs_out
    header = [
        f"# format: {TEXT_FORMAT}",
        f"# record: {record or ''}",
        f"# leads: {','.join(window.leads)}",
        f"# fs_hz: {fs_out:g}",
        "# decimate: 1",
        f"# effective_fs_hz: {fs_out:g}",
        f"# resampled: from {window.fs_hz:g} Hz to {fs_out:g} Hz (anti-aliased polyphase filter)",
        f"# n_rows: {y.shape[0]}",
        "# units: t_s = seconds from the recording start; leads in mV",
        "t_s," + ",".join(window.leads),
    ]
    values = (np.round(y, 3) + 0.0).tolist()  # + 0.0 turns -0.0 into 0.0
    time_fmt, mv_fmt = f"{{:.{decimals}f}}".format, "{:.3f}".format
    rows = [time_fmt(t) + "," + ",".join(mv_fmt(v) if v == v else "nan" for v in row) for t, row in zip(times.tolist(), values)]
    return "\n".join(header + rows) + "\n"


def _compact(window: SignalWindow, fs_hz: float | None, record: str | None) -> str:
    """Integer microvolts, one row per sample, no time column."""
    if fs_hz is not None:
        y, fs_out = resample_mv(window.signal_mv, window.fs_hz, fs_hz)
    else:
        y, fs_out = np.asarray(window.signal_mv, dtype=np.float64), float(window.fs_hz)
    resampled = f" (resampled from {window.fs_hz:g} Hz)" if fs_out != window.fs_hz else ""
    header = [
        f"# format: {COMPACT_FORMAT}",
        f"# record: {record or ''}",
        f"# leads: {','.join(window.leads)}",
        f"# fs_hz: {fs_out:g}{resampled}",
        f"# t0_s: {window.t0_s:.6g} (seconds from the recording start of the first row; row k is at t0_s + k / fs_hz)",
        f"# n_rows: {y.shape[0]}",
        "# units: integer microvolts (uV) per lead; 1000 uV = 1 mV; an empty field is a missing sample",
        ",".join(window.leads),
    ]
    micro = np.round(y * 1000.0)
    if np.isfinite(micro).all():
        rows = [",".join(map(str, row)) for row in micro.astype(np.int64).tolist()]
    else:
        rows = [",".join(str(int(v)) if math.isfinite(v) else "" for v in row) for row in micro.tolist()]
    return "\n".join(header + rows) + "\n"


def _summary(window: SignalWindow, record: str | None) -> str:
    """Beat times, RR and per-lead per-beat measurements (see the module docstring)."""
    from ecgtrace.tools.measure import MEASURE_VERSION, measure_window

    measured = measure_window(window)
    beats = np.asarray(measured.beat_samples, dtype=np.int64)
    t1_s = (window.sampfrom + window.signal_mv.shape[0]) / window.fs_hz
    lines = [
        f"# format: {SUMMARY_FORMAT}",
        f"# record: {record or ''}; window {window.t0_s:.3f} s to {t1_s:.3f} s from the recording start; "
        f"leads {', '.join(window.leads)}; measured at {window.fs_hz:g} Hz",
        f"# beats: R peaks found in this window by the ecgtrace detector ({measured.delineation.beat_source}); "
        "no beat labels are given",
        "# t_s = R-peak time in s from the recording start; rr_ms = time since the previous R peak in ms (empty for the first)",
        "# per lead and beat: pr_ms = P onset to QRS onset; qrs_ms = QRS onset to offset; qt_ms = QRS onset to T offset (ms); "
        "p_mv, r_mv, s_mv, t_mv = P, R, S, T wave amplitude and st_mv = ST level 60 ms after the QRS end, "
        "in mV from the PR baseline; an empty field was not measurable (p_mv empty: no P wave found)",
        f"# measurements: ecgtrace.tools.measure.measure_window version {MEASURE_VERSION} (delineation per lead)",
        f"# n_beats: {beats.size}",
    ]
    if beats.size == 0:
        return "\n".join([*lines, "no beats were found in this window"]) + "\n"
    rr = np.full(beats.size, np.nan)
    rr[1:] = np.diff(beats) * 1000.0 / window.fs_hz
    lines += ["beat,t_s,rr_ms", *(f"{k + 1},{b / window.fs_hz:.3f},{_fmt(r, 0)}" for k, (b, r) in enumerate(zip(beats, rr)))]
    for lead in window.leads:
        per_beat = measured.per_lead[lead].per_beat
        p_present = np.asarray(measured.delineation.per_lead[lead].p_present, dtype=bool)
        lines += [f"lead {lead}", "beat," + ",".join(name for name, _, _, _ in SUMMARY_COLUMNS)]
        for k in range(beats.size):
            cells = []
            for name, key, _, decimals in SUMMARY_COLUMNS:
                value = float(per_beat[key][k])
                if name == "p_mv" and not p_present[k]:  # a P candidate that failed the P test is not a P wave
                    value = math.nan
                cells.append(_fmt(value, decimals))
            lines.append(f"{k + 1}," + ",".join(cells))
    return "\n".join(lines) + "\n"


def encode_window(window: SignalWindow, method: str = "raw", *, fs_hz: float | None = None, leads: Sequence[str] | None = None,
                  record: str | None = None) -> str:
    """The window as text in encoding ``method`` (see the module docstring).

    Args:
        window: the signal in mV with its ``fs_hz`` and ``sampfrom``.
        method: ``raw``, ``compact``, ``downsampled`` or ``summary``.
        fs_hz: output rate in Hz for ``downsampled`` (required) and ``compact`` (optional).
        leads: the leads to keep, in order (None: all).
        record: the record's name for the header.
    """
    encoding = text_encoding(method, fs_hz, leads)
    shown = select_leads(window, encoding.leads)
    if encoding.method == "raw":
        return signal_to_text(shown, record=record)
    if encoding.method == "downsampled":
        return _downsampled(shown, float(encoding.fs_hz or 0), record)
    if encoding.method == "compact":
        return _compact(shown, encoding.fs_hz, record)
    return _summary(shown, record)


# ------------------------------------------------------------------ text assets

def _blocks(text: str) -> list[tuple[bool, str]]:
    """``[(is_signal, text)]``: the asset cut into raw signal blocks and whatever lies between them.

    A signal block starts at ``# format: ecgtrace-signal-text/1`` and ends
    before the next ``#`` line that follows its data rows (an hourly summary,
    another window) or at the end.
    """
    out: list[tuple[bool, list[str]]] = []
    in_signal = had_rows = False
    for line in text.splitlines(keepends=True):
        starts = line.startswith(f"# format: {TEXT_FORMAT}")
        if starts or (in_signal and had_rows and line.startswith("#")):
            in_signal, had_rows = starts, False
            out.append((starts, [line]))
            continue
        if not out:
            out.append((False, []))
        if in_signal and line.strip() and not line.startswith("#"):
            had_rows = True
        out[-1][1].append(line)
    return [(signal, "".join(lines)) for signal, lines in out]


def window_from_text(block: str) -> tuple[SignalWindow, str]:
    """``(window, record name)`` of one raw signal block (undecimated, values as written)."""
    parsed = parse_signal_text(block)
    if parsed.decimate != 1:
        raise EncodingError(f"the text asset was decimated by {parsed.decimate}; it cannot be re-encoded")
    if parsed.signal_mv.shape[0] == 0:
        raise EncodingError("the text asset holds no samples")
    window = SignalWindow(signal_mv=parsed.signal_mv, fs_hz=parsed.fs_hz, sampfrom=int(parsed.sample_indices[0]), leads=parsed.leads)
    return window, parsed.record


@lru_cache(maxsize=16)
def _parsed(text: str) -> tuple[tuple[bool, str, SignalWindow | None, str], ...]:
    """The asset's blocks, each signal block parsed once (several encodings of one asset share the parse)."""
    out = []
    for signal, block in _blocks(text):
        window, record = window_from_text(block) if signal else (None, "")
        out.append((signal, block, window, record))
    return tuple(out)


def encode_signal_text(text: str, encoding: TextEncoding) -> str:
    """A raw text asset with every signal block re-encoded; other blocks (hourly tables, beat lists) kept as they are.

    Raises:
        EncodingError: the asset holds no ``ecgtrace-signal-text/1`` block to re-encode.
    """
    if encoding.is_asset:
        return text
    blocks = _parsed(text)
    if not any(signal for signal, *_ in blocks):
        raise EncodingError(f"the text asset holds no {TEXT_FORMAT} signal to re-encode as {encoding.method}")
    out = []
    for signal, block, window, record in blocks:
        if window is None:
            out.append(block)
            continue
        out.append(encode_window(window, encoding.method, fs_hz=encoding.fs_hz, leads=encoding.leads, record=record or None))
    return "".join(part if part.endswith("\n") or i == len(out) - 1 else part + "\n" for i, part in enumerate(out))


__all__ = ["COMPACT_FORMAT", "ENCODING_VERSION", "EncodingError", "RAW", "SUMMARY_FORMAT", "TEXT_ENCODINGS", "TextEncoding",
           "encode_signal_text", "encode_window", "resample_mv", "select_leads", "text_encoding", "window_from_text"]
