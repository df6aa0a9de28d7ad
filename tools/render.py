"""Windows of a record and their three modalities: text, ECG-paper PNG, MP4.

* Windows: :func:`window_by_time`, :func:`window_by_event` (a 10 s window
  centred on a schedule/detector event, clipped to the record) and
  :func:`window_by_beats` (a range of beats, padded). All return a
  :class:`~ecgtrace.tools.records.SignalWindow` read with ``sampfrom``/``sampto``.
* Text: :func:`signal_to_text` writes the signal in mV with 3 decimals, one row
  per sample, with an explicit time axis in seconds from the recording start;
  :func:`parse_signal_text` reads it back. The round trip is exact to the
  rounding of the text: ``|parsed - signal| <= 0.0005 mV`` (0.5 uV).
* PNG / MP4: :func:`render_png` and :func:`render_mp4` draw standard ECG paper
  (25 mm/s, 10 mm/mV); :func:`render_12lead_png` draws a 12-lead ECG as the
  standard 3x4 print with a rhythm strip, or with its leads stacked. matplotlib and imageio-ffmpeg are imported only when
  these are called.

Times are seconds (``*_s``) or milliseconds (``*_ms``) from the record start.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ecgtrace.errors import EcgTraceError, WindowError
from ecgtrace.tools.records import RecordInfo, SignalWindow, read_samples, read_window

from ecgtrace.tools._render_paper import DEFAULT_WINDOW_S, PAPER_NOTE, PaperRender
from ecgtrace.tools._render_paper import render_png as _render_png
from ecgtrace.tools._render_video import VideoRender, mp4_frame_times
from ecgtrace.tools._render_video import render_mp4 as _render_mp4

__all__ = ["DEFAULT_WINDOW_S", "PAPER_NOTE", "mp4_frame_times", "render_12lead_png", "render_mp4", "render_png", "signal_to_text"]

RENDER_VERSION = "1"
TEXT_FORMAT = "ecgtrace-signal-text/1"


# --------------------------------------------------------------------------- windows


def window_by_time(info: RecordInfo, t0_s: float, t1_s: float, leads: Sequence[str | int] | None = None) -> SignalWindow:
    """The window ``[t0_s, t1_s)`` (s from the record start); see :func:`records.read_window`."""
    return read_window(info, t0_s, t1_s, leads)


def centred_bounds(info: RecordInfo, onset_ms: float, offset_ms: float, window_s: float = DEFAULT_WINDOW_S) -> tuple[int, int]:
    """``(sampfrom, sampto)`` of a ``window_s`` window centred on ``[onset_ms, offset_ms]``.

    A span longer than ``window_s`` gets the span plus 1 s on each side. The
    window is shifted, not shrunk, to stay inside the record, and only
    shrinks when the record itself is shorter.
    """
    if not (math.isfinite(onset_ms) and math.isfinite(offset_ms)) or offset_ms < onset_ms:
        raise WindowError(f"{info.name}: event span [{onset_ms}, {offset_ms}] ms is not a valid span")
    if window_s <= 0:
        raise WindowError(f"{info.name}: window length must be > 0 s, got {window_s}")
    fs = info.fs_hz
    span_s = (offset_ms - onset_ms) / 1000.0
    length = int(round(max(window_s, span_s + 2.0) * fs))
    length = min(length, info.n_samples)
    centre = 0.5 * (onset_ms + offset_ms) / 1000.0 * fs
    start = int(round(centre - length / 2))
    start = min(max(start, 0), info.n_samples - length)
    if onset_ms / 1000.0 * fs > info.n_samples or offset_ms < 0:
        raise WindowError(f"{info.name}: event span [{onset_ms:.0f}, {offset_ms:.0f}] ms lies outside the record [0, {info.duration_s * 1000:.0f}] ms")
    return start, start + length


def window_by_event(
    info: RecordInfo,
    event: Mapping[str, Any],
    *,
    window_s: float = DEFAULT_WINDOW_S,
    leads: Sequence[str | int] | None = None,
) -> SignalWindow:
    """A ``window_s`` window centred on an event dict with ``onset_ms``/``offset_ms``.

    The event is any dict with those keys (a synthetic schedule event, a
    detected rhythm episode, a QA evidence span with ``t0_ms``/``t1_ms``).
    """
    try:
        onset = float(event["onset_ms"] if "onset_ms" in event else event["t0_ms"])
        offset = float(event["offset_ms"] if "offset_ms" in event else event["t1_ms"])
    except (KeyError, TypeError, ValueError):
        raise WindowError(f"{info.name}: event needs numeric onset_ms/offset_ms (or t0_ms/t1_ms), got keys {sorted(event)}") from None
    sampfrom, sampto = centred_bounds(info, onset, offset, window_s)
    return read_samples(info, sampfrom, sampto, leads)


def window_by_beats(
    info: RecordInfo,
    beat_samples: np.ndarray | Sequence[int],
    first: int,
    last: int | None = None,
    *,
    pad_s: float = 1.0,
    leads: Sequence[str | int] | None = None,
) -> SignalWindow:
    """The window from beat ``first`` to beat ``last`` (inclusive indices), padded by ``pad_s``."""
    beats = np.asarray(beat_samples, dtype=np.int64)
    last = first if last is None else last
    if beats.ndim != 1 or not 0 <= first <= last < beats.size:
        raise WindowError(f"{info.name}: beat range {first}..{last} is outside 0..{beats.size - 1}")
    pad = int(round(pad_s * info.fs_hz))
    sampfrom = max(int(beats[first]) - pad, 0)
    sampto = min(int(beats[last]) + pad + 1, info.n_samples)
    return read_samples(info, sampfrom, sampto, leads)


# --------------------------------------------------------------------------- text


def _time_decimals(fs_hz: float, step: int) -> int:
    """Fewest decimals (>= 3) whose rounded times still map back to their sample index."""
    probe = np.arange(0, int(10 * fs_hz) + step, step, dtype=np.int64) + 123457
    for decimals in range(3, 8):
        times = np.round(probe / fs_hz, decimals)
        if np.array_equal(np.round(times * fs_hz).astype(np.int64), probe):
            return decimals
    return 8


def signal_to_text(window: SignalWindow, *, decimate: int = 1, record: str | None = None) -> str:
    """Serialize a window as text: one row per sample, ``t_s`` then one column per lead.

    Values are mV with 3 decimals (1 uV resolution); ``t_s`` is seconds from the
    recording start. A ``#`` header names the format, record, leads, sampling
    rate, decimation and units. ``decimate=k`` keeps every k-th sample (plain
    subsampling, no filtering), so the effective rate is ``fs_hz / k``.
    """
    if int(decimate) != decimate or decimate < 1:
        raise EcgTraceError(f"decimate must be a positive integer, got {decimate!r}")
    decimate = int(decimate)
    signal = np.asarray(window.signal_mv, dtype=np.float64)[::decimate]
    index = window.sampfrom + np.arange(0, window.signal_mv.shape[0], decimate, dtype=np.int64)
    decimals = _time_decimals(window.fs_hz, decimate)
    header = [
        f"# format: {TEXT_FORMAT}",
        f"# record: {record or ''}",
        f"# leads: {','.join(window.leads)}",
        f"# fs_hz: {window.fs_hz:g}",
        f"# decimate: {decimate}",
        f"# effective_fs_hz: {window.fs_hz / decimate:g}",
        f"# sampfrom: {window.sampfrom}",
        f"# n_rows: {signal.shape[0]}",
        "# units: t_s = seconds from the recording start; leads in mV",
        "t_s," + ",".join(window.leads),
    ]
    times = index / window.fs_hz
    rounded = np.round(signal, 3) + 0.0  # + 0.0 turns -0.0 into 0.0
    lines = [f"{t:.{decimals}f}," + ",".join("nan" if not math.isfinite(v) else f"{v:.3f}" for v in row) for t, row in zip(times, rounded)]
    return "\n".join(header + lines) + "\n"


@dataclass(frozen=True)
class ParsedSignalText:
    """What :func:`parse_signal_text` reads back.

    Attributes:
        signal_mv: ``(n_rows, n_leads)`` float64 values in mV.
        times_s: seconds from the recording start of each row.
        sample_indices: absolute sample index of each row (``round(t_s * fs_hz)``).
        fs_hz: the record's sampling rate (before decimation).
    """

    signal_mv: np.ndarray
    times_s: np.ndarray
    sample_indices: np.ndarray
    leads: tuple[str, ...]
    fs_hz: float
    decimate: int
    record: str

    def to_window(self) -> SignalWindow:
        """Back to a float32 SignalWindow (only for undecimated text)."""
        if self.decimate != 1:
            raise EcgTraceError(f"text was decimated by {self.decimate}; it is not a contiguous window")
        start = int(self.sample_indices[0]) if self.sample_indices.size else 0
        return SignalWindow(signal_mv=self.signal_mv.astype(np.float32), fs_hz=self.fs_hz, sampfrom=start, leads=self.leads)


def parse_signal_text(text: str) -> ParsedSignalText:
    """Parse the output of :func:`signal_to_text`; raises EcgTraceError on malformed text."""
    meta: dict[str, str] = {}
    rows: list[list[float]] = []
    columns: list[str] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            key, _, value = line[1:].partition(":")
            meta[key.strip()] = value.strip()
            continue
        if columns is None:
            columns = [c.strip() for c in line.split(",")]
            if columns[0] != "t_s":
                raise EcgTraceError(f"signal text line {number}: expected a 't_s,...' column header, got {line[:60]!r}")
            continue
        parts = line.split(",")
        if len(parts) != len(columns):
            raise EcgTraceError(f"signal text line {number}: {len(parts)} fields, expected {len(columns)}")
        try:
            rows.append([float(p) for p in parts])
        except ValueError:
            raise EcgTraceError(f"signal text line {number}: not numeric: {line[:60]!r}") from None
    if columns is None or "fs_hz" not in meta:
        raise EcgTraceError("signal text: missing header (no 'fs_hz' or no column line)")
    data = np.asarray(rows, dtype=np.float64).reshape(-1, len(columns))
    fs_hz = float(meta["fs_hz"])
    return ParsedSignalText(
        signal_mv=data[:, 1:],
        times_s=data[:, 0],
        sample_indices=np.round(data[:, 0] * fs_hz).astype(np.int64),
        leads=tuple(columns[1:]),
        fs_hz=fs_hz,
        decimate=int(meta.get("decimate", "1") or 1),
        record=meta.get("record", ""),
    )


# --------------------------------------------------------------------------- images and video


def render_png(window: SignalWindow, path: Any = None, **kwargs: Any) -> PaperRender:
    """Draw the window on ECG paper; see :func:`ecgtrace.tools._render_paper.render_png`."""
    return _render_png(window, path, **kwargs)


def render_12lead_png(window: SignalWindow, path: Any = None, **kwargs: Any) -> PaperRender:
    """Draw a 12-lead window (3x4 + rhythm strip, or stacked); see :func:`ecgtrace.tools._render_12lead.render_12lead_png`."""
    from ecgtrace.tools._render_12lead import render_12lead_png as _render_12lead

    return _render_12lead(window, path, **kwargs)


def render_mp4(info: RecordInfo, t0_s: float, t1_s: float, path: Any, **kwargs: Any) -> VideoRender:
    """A sliding 10 s window over ``[t0_s, t1_s)``; see :func:`ecgtrace.tools._render_video.render_mp4`."""
    return _render_mp4(info, t0_s, t1_s, path, **kwargs)
