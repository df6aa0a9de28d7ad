"""Speed of the three modalities: signal text, ECG-paper PNG, MP4.

    .venv/bin/python benchmarks/render.py

Uses a 3-lead 250 Hz synthetic record (generated into a temporary folder).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path


def _best(fn, repeat: int = 5) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times), statistics.median(times)


def main() -> int:
    from rich.console import Console
    from rich.table import Table

    from ecgtrace.tools import render
    from ecgtrace.tools.records import open_record
    from ecgtrace.tools.synth import synthesize_holter

    with tempfile.TemporaryDirectory() as tmp:
        synth = synthesize_holter(tmp, name="bench", hours=0.1, fs_hz=250.0, n_leads=3, seed=1)
        info = open_record(synth.record_path)
        window = render.window_by_time(info, 100.0, 110.0)
        render.render_png(window)  # warm-up: font cache, imports
        table = Table(title="render speed (3 leads, 250 Hz)")
        for column in ("what", "best s", "median s", "output"):
            table.add_column(column, justify="right" if column != "what" else "left")
        best, med = _best(lambda: render.signal_to_text(window))
        table.add_row("text, 10 s", f"{best:.3f}", f"{med:.3f}", f"{len(render.signal_to_text(window)) / 1024:.0f} KiB")
        best, med = _best(lambda: render.render_png(window))
        png = render.render_png(window, highlight_spans_ms=[(102_000, 103_000)], overlay_spans_ms=[(105_000, 106_000)])
        table.add_row("PNG, 10 s", f"{best:.3f}", f"{med:.3f}", f"{png.layout.width_px}x{png.layout.height_px} px, {len(png.png) / 1024:.0f} KiB")
        best, med = _best(lambda: render.render_png(window, highlight_spans_ms=[(102_000, 103_000)], overlay_spans_ms=[(105_000, 106_000)]))
        table.add_row("PNG, 10 s, with spans", f"{best:.3f}", f"{med:.3f}", "")
        out = Path(tmp) / "v.mp4"
        for span_s, fps, speedup in ((60.0, 10.0, 2.0), (300.0, 10.0, 10.0)):
            started = time.perf_counter()
            video = render.render_mp4(info, 30.0, 30.0 + span_s, out, fps=fps, speedup=speedup)
            elapsed = time.perf_counter() - started
            table.add_row(
                f"MP4, {span_s:g} s span, {fps:g} fps, x{speedup:g}",
                f"{elapsed:.2f}",
                "",
                f"{video.n_frames} frames {video.width_px}x{video.height_px}, {out.stat().st_size / 1e6:.1f} MB",
            )
        Console(width=140).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
