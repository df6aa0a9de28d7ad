"""Windows, signal text, ECG-paper PNG and MP4 rendering."""

from __future__ import annotations

import io
import subprocess
import sys
import time

import numpy as np
import pytest

from ecgtrace.errors import EcgTraceError, WindowError
from ecgtrace.tools import render
from ecgtrace.tools._render_paper import MAJOR_RGB
from ecgtrace.tools.records import SignalWindow, open_record


@pytest.fixture(scope="module")
def info(synth_record):
    return open_record(synth_record.record_path)


@pytest.fixture(scope="module")
def window(info):
    return render.window_by_time(info, 140.0, 150.0)


def _decode(png: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


# ----------------------------------------------------------------- windows


def test_window_by_time_matches_samples(info, window):
    assert window.sampfrom == 140 * 250 and window.signal_mv.shape == (2500, 3)
    assert window.leads == ("MLII", "V1", "V5")


def test_window_by_event_is_centred_and_clipped(info, synth_record):
    event = next(e for e in synth_record.schedule["events"] if e["kind"] == "pvc")
    w = render.window_by_event(info, event)
    assert w.signal_mv.shape[0] == 2500
    centre_ms = (w.sampfrom + 1250) * 4
    assert abs(centre_ms - 0.5 * (event["onset_ms"] + event["offset_ms"])) <= 4
    # an event at the very start is shifted into the record, not shrunk
    start = render.window_by_event(info, {"onset_ms": 100, "offset_ms": 200})
    assert start.sampfrom == 0 and start.signal_mv.shape[0] == 2500
    end_ms = info.n_samples * 4
    end = render.window_by_event(info, {"t0_ms": end_ms - 300, "t1_ms": end_ms - 100})
    assert end.sampto == info.n_samples and end.signal_mv.shape[0] == 2500
    # a long event gets the whole span plus 1 s each side
    long = render.window_by_event(info, {"onset_ms": 60_000, "offset_ms": 80_000})
    assert long.sampfrom == 59 * 250 and long.sampto == 81 * 250
    with pytest.raises(WindowError):
        render.window_by_event(info, {"onset_ms": 5})


def test_window_by_beats(info):
    from ecgtrace.tools.annotations import read_reference_annotations

    beats = read_reference_annotations(info.path).beat_samples
    w = render.window_by_beats(info, beats, 10, 14, pad_s=0.5)
    assert w.sampfrom == beats[10] - 125 and w.sampto == beats[14] + 126
    with pytest.raises(WindowError):
        render.window_by_beats(info, beats, 5, beats.size)


# ----------------------------------------------------------------- text


def test_text_round_trip_within_half_a_microvolt(window):
    text = render.signal_to_text(window, record="holter")
    lines = text.splitlines()
    assert "# leads: MLII,V1,V5" in lines and "# fs_hz: 250" in lines
    assert lines[lines.index("t_s,MLII,V1,V5") + 1].startswith("140.000,")
    parsed = render.parse_signal_text(text)
    assert parsed.leads == window.leads and parsed.fs_hz == 250.0
    assert np.max(np.abs(parsed.signal_mv - window.signal_mv.astype(np.float64))) <= 0.0005 + 1e-9
    np.testing.assert_array_equal(parsed.sample_indices, window.sampfrom + np.arange(2500))
    back = parsed.to_window()
    assert back.sampfrom == window.sampfrom and back.signal_mv.shape == window.signal_mv.shape


def test_text_decimation_and_odd_rates():
    rng = np.random.default_rng(0)
    w = SignalWindow(signal_mv=rng.normal(0, 1, (360, 2)).astype(np.float32), fs_hz=360.0, sampfrom=360 * 3600, leads=("MLII", "V5"))
    parsed = render.parse_signal_text(render.signal_to_text(w, decimate=3))
    assert parsed.signal_mv.shape == (120, 2) and parsed.decimate == 3
    np.testing.assert_array_equal(parsed.sample_indices, w.sampfrom + np.arange(0, 360, 3))
    assert np.max(np.abs(parsed.signal_mv - w.signal_mv[::3])) <= 0.0005 + 1e-9
    with pytest.raises(EcgTraceError):
        render.signal_to_text(w, decimate=0)
    with pytest.raises(EcgTraceError):
        render.parse_signal_text("no header\n1,2\n")


# ----------------------------------------------------------------- PNG


def test_png_size_grid_scale_and_time_labels(window):
    result = render.render_png(window)
    layout = result.layout
    image = _decode(result.png)
    assert image.shape == (layout.height_px, layout.width_px, 3)
    assert layout.px_per_mm == 10 and layout.width_px == (20 + 250 + 5) * 10
    # major grid lines: every 5 mm = 50 px, found in the pixels themselves
    paper = image[: layout.paper_height_px]
    major_cols = np.flatnonzero(np.mean(np.all(paper == MAJOR_RGB, axis=2), axis=0) > 0.5)
    starts = major_cols[np.r_[True, np.diff(major_cols) > 1]]
    assert set(np.diff(starts)) == {5 * layout.px_per_mm}
    major_rows = np.flatnonzero(np.mean(np.all(paper == MAJOR_RGB, axis=2), axis=1) > 0.5)
    row_starts = major_rows[np.r_[True, np.diff(major_rows) > 1]]
    assert set(np.diff(row_starts)) == {5 * layout.px_per_mm}
    # 25 mm/s and 10 mm/mV: the tallest R wave of MLII sits where the scale puts it
    row = layout.lead_rows[0]
    mlii = window.signal_mv[:, 0]
    k = int(np.argmax(mlii))
    x = layout.trace_x0_px + k / window.fs_hz * 25 * layout.px_per_mm
    y = row["baseline_px"] - float(mlii[k]) * 10 * layout.px_per_mm
    band = image[row["top_px"] : row["top_px"] + row["height_px"], int(x) - 6 : int(x) + 7]
    dark_rows, dark_cols = np.nonzero(band.max(axis=2) < 90)
    assert abs(row["top_px"] + dark_rows.min() - y) <= 3
    assert abs(int(x) - 6 + dark_cols[np.argmin(dark_rows)] - x) <= 3
    # time labels: whole seconds of the window, 25 mm apart
    ticks = layout.time_ticks
    assert [t["label"] for t in ticks] == [f"{s} s" for s in range(140, 151)]
    assert [t["x_px"] for t in ticks] == [layout.trace_x0_px + 250 * i for i in range(11)]
    assert layout.to_json()["provenance"]["source"] == "computed"


def test_png_is_deterministic_fast_and_written(window, tmp_path):
    render.render_png(window)  # warm-up (font cache)
    started = time.perf_counter()
    first = render.render_png(window, tmp_path / "w.png")
    elapsed = time.perf_counter() - started
    second = render.render_png(window)
    assert first.png == second.png
    assert (tmp_path / "w.png").read_bytes() == first.png
    assert elapsed < 1.5  # about 0.1 s here; benchmarks/render.py measures it


def test_png_highlight_and_overlay_spans(window):
    plain = _decode(render.render_png(window).png)
    marked = render.render_png(window, highlight_spans_ms=[(142_000, 143_000)], overlay_spans_ms=[{"t0_ms": 145_000, "t1_ms": 146_000, "lead": "V1"}])
    image = _decode(marked.png)
    layout = marked.layout
    x_green = int(layout.x_px(142.5))
    changed = np.any(image[:, x_green] != plain[:, x_green], axis=1)
    green = image[changed, x_green]
    assert changed.sum() > 100 and np.mean(green[:, 1] > green[:, 0]) > 0.9
    x_out = int(layout.x_px(144.0))
    np.testing.assert_array_equal(image[:, x_out], plain[:, x_out])
    v1 = layout.lead_rows[1]
    box = image[v1["top_px"] : v1["top_px"] + v1["height_px"], int(layout.x_px(145.0)) : int(layout.x_px(146.0))]
    blue = (box[:, :, 2] > 150) & (box[:, :, 0] < 80)
    assert blue.sum() > 500
    mlii = layout.lead_rows[0]  # the overlay was for V1 only
    rows = slice(mlii["top_px"] + 5, mlii["top_px"] + mlii["height_px"] - 5)
    assert not np.any((image[rows, int(layout.x_px(145.5)), 2] > 150) & (image[rows, int(layout.x_px(145.5)), 0] < 80))
    with pytest.raises(EcgTraceError):
        render.render_png(window, highlight_spans_ms=[(5, 1)])


def test_render_module_does_not_import_matplotlib():
    code = "import sys\nimport ecgtrace.tools.render\nprint('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


# ----------------------------------------------------------------- MP4


def test_mp4_decodes_to_the_expected_frames(info, tmp_path):
    import imageio_ffmpeg

    times = render.mp4_frame_times(100.0, 114.0, window_s=10.0, fps=5.0, speedup=2.0)
    assert times.size == 11 and times[-1] == pytest.approx(104.0)
    video = render.render_mp4(info, 100.0, 114.0, tmp_path / "v.mp4", window_s=10.0, fps=5.0, speedup=2.0)
    assert video.n_frames == 11
    reader = imageio_ffmpeg.read_frames(str(tmp_path / "v.mp4"))
    meta = next(reader)
    frames = list(reader)
    assert len(frames) == 11
    assert tuple(meta["size"]) == (video.width_px, video.height_px)
    assert video.to_json()["provenance"]["method"] == "ecgtrace.render.mp4"
    with pytest.raises(WindowError):
        render.render_mp4(info, 10.0, 10.0, tmp_path / "empty.mp4")


def test_mp4_failing_midway_leaves_no_file(info, tmp_path, monkeypatch):
    """A drawing failure on the second chunk raises one EcgTraceError and leaves neither the video nor its temporary."""
    from ecgtrace.tools import _render_video

    real = _render_video.render_array
    calls = []

    def second_chunk_fails(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("disk full\nsecond line")
        return real(*args, **kwargs)

    monkeypatch.setattr(_render_video, "render_array", second_chunk_fails)
    with pytest.raises(EcgTraceError, match=r"cannot write the video \(disk full\)"):
        render.render_mp4(info, 100.0, 140.0, tmp_path / "v.mp4", window_s=4.0, fps=2.0, chunk_s=10.0)
    assert len(calls) == 2
    assert list(tmp_path.iterdir()) == []
