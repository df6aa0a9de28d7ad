"""The video modality sent to a model: frames of an item's MP4 as images, or the MP4 itself as ``video_url``.

A QA item built with ``--modalities video`` has an MP4 of a 10 s window
sliding over its evidence (:func:`ecgtrace.tools.render.render_mp4`).
``ecgtrace qa-eval --modality video`` sends it one of two ways
(:class:`VideoSettings`, chosen per run and part of the run's identity):

* ``frames`` (any vision model): ``image_url`` parts, one PNG per frame taken
  every ``1 / fps`` seconds of video, at most ``max_frames`` of them spread
  evenly over the video when there would be more;
* ``video_url`` (servers that take video, such as vLLM with a video model):
  one ``{"type": "video_url", "video_url": {"url": "data:video/mp4;base64,..."}}``
  part.

An intro line says what the frames are, so the model knows they are one
window moving in time. Frames are decoded with the ffmpeg that ships in
imageio-ffmpeg (nothing is downloaded) and cached by file, size, time and settings.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from ecgtrace.agents.exam.messages import resolve_asset
from ecgtrace.contracts.qa import QAItem
from ecgtrace.errors import QAFormatError

SEND_MODES = ("frames", "video_url")


@dataclass(frozen=True)
class VideoSettings:
    """How the video of an item is sent: as ``frames`` (``fps`` frames per second of video, at most ``max_frames``) or as ``video_url``."""

    send: Literal["frames", "video_url"] = "frames"
    fps: float = 1.0
    max_frames: int = 8

    def to_json(self) -> dict[str, Any]:
        return {"send": self.send, "fps": self.fps, "max_frames": self.max_frames}


def video_path(item: QAItem, base_dir: str | Path) -> Path:
    """The item's MP4, inside the dataset folder.

    Raises:
        QAFormatError: the item has no video, or its file is missing.
    """
    rel = item.modalities.video
    if not rel:
        raise QAFormatError(f"item {item.id!r} has no modalities.video, needed for --modality video (build with --modalities video)")
    path = resolve_asset(base_dir, rel, QAFormatError)
    if not path.is_file():
        raise QAFormatError(f"item {item.id!r}: modalities.video file not found: {path}")
    return path


def frame_indices(n_frames: int, video_fps: float, fps: float, max_frames: int) -> list[int]:
    """Frames to send: one every ``1 / fps`` s of a video of ``n_frames`` at ``video_fps``, thinned evenly to ``max_frames``."""
    if n_frames <= 0:
        return []
    step = max(video_fps / fps, 1.0)
    picks = sorted({min(int(round(k * step)), n_frames - 1) for k in range(int((n_frames - 1) / step) + 1)})
    if len(picks) > max_frames:
        picks = [picks[int(round(k * (len(picks) - 1) / (max_frames - 1)))] for k in range(max_frames)] if max_frames > 1 else [picks[0]]
    return picks


def _png(frame: bytes, size: tuple[int, int]) -> str:
    import matplotlib.image as mpimg
    import numpy as np

    width, height = size
    array = np.frombuffer(frame, dtype=np.uint8).reshape(height, width, 3)
    buffer = io.BytesIO()
    mpimg.imsave(buffer, array, format="png")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


@lru_cache(maxsize=16)
def _frames(path: str, mtime_ns: int, size: int, fps: float, max_frames: int) -> tuple[tuple[str, ...], float, int]:
    """``(PNG data URIs, video fps, frame count)`` of the chosen frames."""
    import imageio_ffmpeg

    reader = imageio_ffmpeg.read_frames(path)
    try:
        meta = next(reader)
        video_fps = float(meta.get("fps") or 1.0)
        n_frames = int(round(float(meta.get("duration") or 0.0) * video_fps)) or 1
        wanted = set(frame_indices(n_frames, video_fps, fps, max_frames))
        chosen = [_png(frame, meta["size"]) for index, frame in enumerate(reader) if index in wanted]
    except (StopIteration, OSError, RuntimeError) as exc:
        raise QAFormatError(f"{path}: cannot read the video ({exc})") from None
    finally:
        reader.close()
    return tuple(chosen), video_fps, n_frames


def video_parts(item: QAItem, base_dir: str | Path, settings: VideoSettings) -> list[dict[str, Any]]:
    """The content parts that show the item's video: an intro line, then the frames or the ``video_url`` part."""
    path = video_path(item, base_dir)
    stat = path.stat()
    if settings.send == "video_url":
        url = "data:video/mp4;base64," + base64.b64encode(path.read_bytes()).decode("ascii")
        return [{"type": "text", "text": "ECG video: a 10-second window of the trace sliding in time over the part of the recording asked about."},
                {"type": "video_url", "video_url": {"url": url}}]
    frames, video_fps, n_frames = _frames(str(path), stat.st_mtime_ns, stat.st_size, float(settings.fps), int(settings.max_frames))
    intro = (f"ECG video as {len(frames)} frames in time order (of {n_frames} at {video_fps:g} frames per second): each frame shows a "
             "10-second window of the trace, sliding in time over the part of the recording asked about.")
    return [{"type": "text", "text": intro}, *({"type": "image_url", "image_url": {"url": url}} for url in frames)]


def video_messages(item: QAItem, base_dir: str | Path, settings: VideoSettings, *, system_prompt: str | None, prompt: str) -> list[dict[str, Any]]:
    """Chat messages for one QA item shown as video: [system], the video parts and the question in one user message."""
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*messages, {"role": "user", "content": [*video_parts(item, base_dir, settings), {"type": "text", "text": prompt}]}]
