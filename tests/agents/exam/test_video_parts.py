"""The video modality sent to a model: an item's MP4 as frames (``image_url`` parts) or as one ``video_url`` part.

The MP4 is rendered from the synthetic record: 11 frames at 5 frames per second (a 14 s span, 10 s window, 2x speed),
so the frames each setting picks are known by hand.
"""

from __future__ import annotations

import base64
import io
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ecgtrace.agents.exam.qa_runner import as_qa_item, build_messages, load_qa  # noqa: E402
from ecgtrace.agents.exam.preflight import PREFLIGHT_PROMPT  # noqa: E402
from ecgtrace.agents.exam.video_parts import VideoSettings, frame_indices, video_parts  # noqa: E402
from ecgtrace.cli import main  # noqa: E402
from ecgtrace.errors import QAFormatError  # noqa: E402
from ecgtrace.tools import render  # noqa: E402
from ecgtrace.tools.records import open_record  # noqa: E402
from tests.support.mock_openai import MockOpenAI, fixed  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture(scope="module")
def video_dataset(synth_record, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("video-ds")
    shutil.copytree(FIXTURES / "qa_assets", folder / "qa_assets")
    video = render.render_mp4(open_record(synth_record.record_path), 100.0, 114.0, folder / "qa_assets" / "v.mp4",
                              window_s=10.0, fps=5.0, speedup=2.0)
    assert video.n_frames == 11
    rows = [json.loads(line) for line in (FIXTURES / "qa_small.jsonl").read_text().splitlines()[:3]]
    rows[0]["modalities"]["video"] = rows[1]["modalities"]["video"] = "qa_assets/v.mp4"  # the third has none
    (folder / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_frame_indices_by_hand() -> None:
    assert frame_indices(11, 5.0, 1.0, 8) == [0, 5, 10]  # one frame a second of a 2.2 s video
    assert frame_indices(11, 5.0, 5.0, 8) == [0, 1, 3, 4, 6, 7, 9, 10]  # every frame, thinned evenly to 8
    assert frame_indices(11, 5.0, 5.0, 1) == [0] and frame_indices(0, 5.0, 1.0, 8) == []
    assert frame_indices(4, 5.0, 50.0, 8) == [0, 1, 2, 3]  # never more frames than the video has


def _decoded(url: str) -> np.ndarray:
    from PIL import Image

    assert url.startswith("data:image/png;base64,")
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB"))


def test_frames_and_video_url_parts(video_dataset: Path) -> None:
    import imageio_ffmpeg

    item = as_qa_item(load_qa(video_dataset).items[0])
    parts = video_parts(item, video_dataset, VideoSettings(send="frames", fps=1.0, max_frames=8))
    assert [p["type"] for p in parts] == ["text", "image_url", "image_url", "image_url"]
    assert "3 frames in time order (of 11 at 5 frames per second)" in parts[0]["text"]
    reader = imageio_ffmpeg.read_frames(str(video_dataset / "qa_assets" / "v.mp4"))
    meta = next(reader)
    width, height = meta["size"]
    frames = [np.frombuffer(f, dtype=np.uint8).reshape(height, width, 3) for f in reader]
    for part, index in zip(parts[1:], (0, 5, 10)):  # the frames sent are the video's own frames 0, 5 and 10
        assert np.array_equal(_decoded(part["image_url"]["url"]), frames[index])
    assert not np.array_equal(frames[0], frames[10])  # the window moves
    as_video = video_parts(item, video_dataset, VideoSettings(send="video_url"))
    assert [p["type"] for p in as_video] == ["text", "video_url"]
    assert base64.b64decode(as_video[1]["video_url"]["url"].split(",", 1)[1]) == (video_dataset / "qa_assets" / "v.mp4").read_bytes()
    message = build_messages(item, video_dataset, "video", video=VideoSettings(fps=5.0, max_frames=4))[-1]["content"]
    assert [p["type"] for p in message] == ["text", *["image_url"] * 4, "text"] and "A. Yes" in message[-1]["text"]
    with pytest.raises(QAFormatError, match="has no modalities.video"):
        video_parts(as_qa_item(load_qa(video_dataset).items[2]), video_dataset, VideoSettings())


def _asked(requests: list[dict]) -> list[dict]:
    """The user messages of the questions asked (the endpoint check before a run left out)."""
    return [m for body in requests for m in body["messages"] if m["role"] == "user" and m["content"] != PREFLIGHT_PROMPT]


def test_qa_eval_sends_the_video_per_run_settings(video_dataset: Path, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    with MockOpenAI(fixed("A. Yes"), keep_requests=100) as server:
        base = ["qa-eval", str(video_dataset), "--model", "openai:mock-vl", "--base-url", server.url, "--modality", "video", "--limit", "2",
                "--quiet"]
        assert main([*base, "--video-fps", "5", "--video-frames", "6", "--timeout", "15", "--run", str(tmp_path / "frames")]) == 0
        sent = _asked(server.requests)
        assert len(sent) == 2 and all(sum(p["type"] == "image_url" for p in m["content"]) == 6 for m in sent)
        assert main([*base, "--video-as", "video_url", "--timeout", "16", "--run", str(tmp_path / "url")]) == 0
        sent = _asked(server.requests)[2:]
        assert len(sent) == 2 and all([p["type"] for p in m["content"]] == ["text", "video_url", "text"] for m in sent)
        frames_id = json.loads((tmp_path / "frames" / "header.json").read_text())["identity"]
        assert frames_id["video"] == {"send": "frames", "fps": 5.0, "max_frames": 6}
        assert json.loads((tmp_path / "url" / "header.json").read_text())["identity"]["video"]["send"] == "video_url"
        # the third item has no video: one error line, nothing asked
        asked = server.stats["requests"]
        assert main([*base[:-3], "--timeout", "17", "--run", str(tmp_path / "none"), "--quiet"]) == 2
        assert "has no modalities.video" in capsys.readouterr().err and server.stats["requests"] == asked
