"""MP4 of a window sliding over a span of a record, on ECG paper.

Each frame shows ``window_s`` seconds (default 10 s) of every lead at
25 mm/s and 10 mm/mV. Frame ``i`` starts at ``t0_s + i * speedup / fps``, so
the paper moves at ``speedup`` times real time. The trace is drawn once per
chunk of the span with matplotlib as a long paper strip, and frames are
crops of that strip (no matplotlib call per frame); the lead labels and
calibration pulses stay fixed on the left. Frames are encoded with the ffmpeg
binary that ships inside imageio-ffmpeg (nothing is downloaded).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import numpy as np

from ecgtrace.contracts.common import provenance
from ecgtrace.errors import EcgTraceError, WindowError
from ecgtrace.tools._render_paper import DEFAULT_WINDOW_S, LEFT_MM, MM_PER_S, _row_heights_mm, render_array
from ecgtrace.tools.records import RecordInfo, read_samples

VIDEO_VERSION = "1"


@dataclass(frozen=True)
class VideoRender:
    path: str
    n_frames: int
    width_px: int
    height_px: int
    fps: float
    speedup: float
    window_s: float
    frame_t0_s: list[float] = field(default_factory=list)
    elapsed_s: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "n_frames": self.n_frames,
            "width_px": self.width_px,
            "height_px": self.height_px,
            "fps": float(self.fps),
            "speedup": float(self.speedup),
            "window_s": float(self.window_s),
            "first_frame_t0_s": self.frame_t0_s[0] if self.frame_t0_s else None,
            "last_frame_t0_s": self.frame_t0_s[-1] if self.frame_t0_s else None,
            "provenance": provenance("computed", "ecgtrace.render.mp4", VIDEO_VERSION, dict(self.params)),
        }


def _span_row_layout(info: RecordInfo, a: int, b: int, leads: Any, piece: int) -> list[tuple[int, float]]:
    """Row heights that fit the whole span, read piece by piece (bounded memory)."""
    hi = lo = None
    for start in range(a, b, piece):
        sig = read_samples(info, start, min(start + piece, b), leads).signal_mv
        with np.errstate(all="ignore"):
            top, bottom = np.nanmax(sig, axis=0), np.nanmin(sig, axis=0)
        hi = top if hi is None else np.fmax(hi, top)
        lo = bottom if lo is None else np.fmin(lo, bottom)
    return _row_heights_mm(np.vstack([hi, lo]))


def render_mp4(
    info: RecordInfo,
    t0_s: float,
    t1_s: float,
    path: str | os.PathLike[str],
    *,
    window_s: float = 10.0,
    fps: float = 10.0,
    speedup: float = 1.0,
    leads: Any = None,
    px_per_mm: int = 5,
    chunk_s: float = 30.0,
    quality: float = 5.0,
) -> VideoRender:
    """Write an MP4 (H.264) of a ``window_s`` window sliding over ``[t0_s, t1_s)``.

    Args:
        info: the record.
        t0_s, t1_s: the span, in s from the recording start.
        path: output ``.mp4`` (written atomically).
        window_s: seconds visible in each frame (shorter spans show the span).
        fps: frames per second of the video.
        speedup: seconds of record per second of video (1 = real time).
        leads: lead names or indices (default: all).
        px_per_mm: resolution (5 px/mm -> 1250 px of trace for 10 s).
        chunk_s: the strip is drawn in chunks of this many seconds.
        quality: imageio-ffmpeg quality 0..10.
    """
    started = time.perf_counter()
    fs = info.fs_hz
    a, b = int(round(t0_s * fs)), int(round(t1_s * fs))
    if not 0 <= a < b <= info.n_samples:
        raise WindowError(f"{info.name}: span [{t0_s:.3f} s, {t1_s:.3f} s) is empty or outside the record [0, {info.duration_s:.3f} s)")
    t0_s, t1_s = a / fs, b / fs
    window_s = min(float(window_s), t1_s - t0_s)
    frame_t0 = mp4_frame_times(t0_s, t1_s, window_s=window_s, fps=fps, speedup=speedup)
    px_per_mm = int(px_per_mm)
    strip = _SlidingStrip(info, a, b, leads, window_s=window_s, chunk_s=max(float(math.ceil(chunk_s)), 1.0), px_per_mm=px_per_mm)
    target = Path(path)
    size = _encode_atomic(target, strip.frames(frame_t0), fps=fps, quality=quality)
    return VideoRender(
        path=str(target),
        n_frames=int(frame_t0.size),
        width_px=size[0],
        height_px=size[1],
        fps=float(fps),
        speedup=float(speedup),
        window_s=window_s,
        frame_t0_s=[round(float(t), 6) for t in frame_t0],
        elapsed_s=time.perf_counter() - started,
        params={"record": info.name, "t0_s": t0_s, "t1_s": t1_s, "leads": strip.lead_names, "px_per_mm": px_per_mm, "codec": "libx264"},
    )


class _SlidingStrip:
    """Frames of a window sliding over samples ``[a, b)``: the paper strip is drawn one chunk at a time (one chunk in
    memory) and every frame is a crop of it beside the fixed lead labels and calibration pulses."""

    def __init__(self, info: RecordInfo, a: int, b: int, leads: Any, *, window_s: float, chunk_s: float, px_per_mm: int):
        self.info, self.a, self.b, self.leads = info, a, b, leads
        self.window_s, self.chunk_s, self.px_per_mm = window_s, chunk_s, px_per_mm
        self.px_per_s = MM_PER_S * px_per_mm
        self.window_px = int(round(window_s * self.px_per_s))
        self.left_px = LEFT_MM * px_per_mm
        # the row heights of the whole span, so that rows do not jump from one chunk to the next
        self.rows = _span_row_layout(info, a, b, leads, int(600 * info.fs_hz))
        self.lead_names: list[str] = []

    def frames(self, frame_t0: np.ndarray) -> Iterator[np.ndarray]:
        """One (height, width, 3) uint8 frame per start time (s); the same buffer is refilled for each."""
        fs, t0_s = self.info.fs_hz, self.a / self.info.fs_hz
        frame = strip = np.zeros((0, 0, 3), dtype=np.uint8)
        chunk_index, chunk_t0 = -1, 0.0
        for tf in frame_t0:
            k = int((tf - t0_s + 1e-9) // self.chunk_s)
            if k != chunk_index:
                chunk_index = k
                c0 = self.a + int(round(k * self.chunk_s * fs))
                c1 = min(c0 + int(round((self.chunk_s + self.window_s) * fs)) + 2, self.b)
                window = read_samples(self.info, c0, c1, self.leads)
                self.lead_names = list(window.leads)
                strip, layout = render_array(window, px_per_mm=self.px_per_mm, title="", row_layout=self.rows)
                if frame.size == 0:
                    frame = self._blank_frame(strip, layout.paper_height_px)
                chunk_t0 = c0 / fs
            left, width = self.left_px, self.window_px
            offset = left + int(round((tf - chunk_t0) * self.px_per_s))
            piece = strip[:, offset : offset + width]
            frame[: piece.shape[0], left : left + piece.shape[1]] = piece
            if piece.shape[1] < width:
                frame[: strip.shape[0], left + piece.shape[1] : left + width] = 255
            yield frame

    def _blank_frame(self, strip: np.ndarray, paper_height_px: int) -> np.ndarray:
        """White frame (sides rounded up to H.264's 16-px macro blocks) with the strip's fixed left margin."""
        static = strip[:paper_height_px, : self.left_px]
        height = strip.shape[0] + (-strip.shape[0]) % 16
        width = self.left_px + self.window_px + (-(self.left_px + self.window_px)) % 16
        frame = np.full((height, width, 3), 255, dtype=np.uint8)
        frame[: static.shape[0], : self.left_px] = static
        return frame


def _encode_atomic(target: Path, frames: Iterator[np.ndarray], *, fps: float, quality: float) -> tuple[int, int]:
    """Encode ``frames`` with libx264 into a temporary file beside ``target``, then rename it; returns (width, height) px.

    Any failure (reading the record, drawing, ffmpeg) removes the temporary file and raises :class:`EcgTraceError`.
    """
    import imageio_ffmpeg

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp.mp4")
    writer = None
    size: tuple[int, int] | None = None
    try:
        for frame in frames:
            if writer is None:
                size = (frame.shape[1], frame.shape[0])
                writer = imageio_ffmpeg.write_frames(str(tmp), size, fps=fps, codec="libx264", quality=quality, macro_block_size=16,
                                                     ffmpeg_log_level="error", output_params=["-preset", "superfast"])
                writer.send(None)
            writer.send(frame)
        if writer is None or size is None:
            raise EcgTraceError(f"{target}: cannot write the video (no frames)")
        writer.close()
        writer = None
        os.replace(tmp, target)
    except Exception as exc:
        if writer is not None:
            try:
                writer.close()
            except Exception:
                pass
        tmp.unlink(missing_ok=True)
        if isinstance(exc, EcgTraceError):
            raise
        raise EcgTraceError(f"{target}: cannot write the video ({str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__})") from exc
    return size


def mp4_frame_times(t0_s: float, t1_s: float, *, window_s: float = DEFAULT_WINDOW_S, fps: float = 10.0, speedup: float = 1.0) -> np.ndarray:
    """Start time (s) of the window shown in each video frame: the frame count is ``len`` of this."""
    if fps <= 0 or speedup <= 0:
        raise EcgTraceError(f"fps and speedup must be > 0, got fps={fps}, speedup={speedup}")
    window_s = min(window_s, t1_s - t0_s)
    travel_s = max(t1_s - t0_s - window_s, 0.0)
    step_s = speedup / fps
    n = int(math.floor(travel_s / step_s + 1e-9)) + 1
    return t0_s + step_s * np.arange(n)
