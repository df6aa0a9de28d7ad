"""Render each item's modalities as files under ``assets/``; its chat messages come from the one message builder.

* text: the window's samples as text (``tools.render.signal_to_text``, mV with
  3 decimals and a time axis from the recording start);
* image: the window on ECG paper (``tools.render.render_png``), no highlight
  (a highlight would give the answer away);
* video (opt-in): a 10 s window sliding across the evidence span (``render_mp4``).

Whole-record items (reports, 24 h counts, HR extrema) carry per-hour summaries
and their evidence windows (at most a few 10 s windows), never 24 h of samples.
Annotation-only records have no samples: their text is the beat list.
Paths in items are relative to the dataset folder (``assets/<id>.png``).
"""

from __future__ import annotations

import os
from typing import Any

from ecgtrace.agents.exam.messages import dataset_messages
from ecgtrace.agents.holter.facts import Facts
from ecgtrace.jsonio import safe_join, write_text_atomic

MODALITIES_VERSION = "1"
PX_PER_MM = 5
VIDEO_MAX_SPAN_MS = 300_000


def hourly_text(facts: Facts) -> str:
    """Per-hour summary table (beats and heart rate) of the whole recording."""
    rows = ["# per-hour summary (times in ms from the recording start)", "hour,t0_ms,t1_ms,beats,mean_hr_bpm,min_hr_bpm,max_hr_bpm"]
    for h in facts.hr.get("hourly", []):
        rows.append(",".join(str(h[k]) if h[k] is not None else "" for k in ("hour", "t0_ms", "t1_ms", "beats", "mean_hr_bpm", "min_hr_bpm", "max_hr_bpm")))
    return "\n".join(rows) + "\n"


def beat_list_text(facts: Facts, t0: int, t1: int) -> str:
    """R-peak times of a window, for records without samples (beat labels are left out: they would give answers away)."""
    i0, i1 = facts.beat_range(t0, t1)
    rows = [f"# R-peak times from {t0} ms to {t1} ms (annotation-only record: no samples)", "t_ms"]
    rows += [str(int(facts.beat_ms[i])) for i in range(i0, i1)]
    return "\n".join(rows) + "\n"


def render_item(facts: Facts, item: dict[str, Any], out_dir: str | os.PathLike[str], modalities: list[str]) -> dict[str, Any]:
    """Write the item's assets and return ``{text, image, video}`` (relative paths; ``image`` is a list)."""
    from ecgtrace.tools.record_source import record_info
    from ecgtrace.tools.records import read_samples
    from ecgtrace.tools.render import render_mp4, render_png, signal_to_text

    has_signal = bool(facts.record["leads"])
    info = record_info(facts.record["path"]) if has_signal else None  # opened once per worker process, not once per item
    windows = item["_display_ms"]
    whole_record = item["window"] is None
    texts: list[str] = [hourly_text(facts)] if whole_record else []
    images: list[str] = []
    fs = facts.fs_hz
    for k, (t0, t1) in enumerate(windows):
        if info is not None:
            sampfrom = max(int(round(t0 * fs / 1000.0)), 0)
            sampto = min(int(round(t1 * fs / 1000.0)), info.n_samples)
            window = read_samples(info, sampfrom, max(sampto, sampfrom + 1))
            if "text" in modalities:
                texts.append(signal_to_text(window, record=facts.record["id"]))
            if "image" in modalities:
                name = f"{item['id']}.png" if len(windows) == 1 else f"{item['id']}-{k}.png"
                render_png(window, safe_join(out_dir, "assets", name), px_per_mm=PX_PER_MM)
                images.append(f"assets/{name}")
        elif "text" in modalities:
            texts.append(beat_list_text(facts, t0, t1))
    result: dict[str, Any] = {"text": None, "image": images, "video": None}
    if "text" in modalities and texts:
        write_text_atomic(safe_join(out_dir, "assets", f"{item['id']}.txt"), "\n".join(texts))
        result["text"] = f"assets/{item['id']}.txt"
    if "video" in modalities and info is not None:
        t0 = min(ev["t0_ms"] for ev in item["evidence"]) - 2000
        t1 = max(ev["t1_ms"] for ev in item["evidence"]) + 2000
        if item["window"] is not None:
            t0, t1 = int(item["window"]["t0_s"] * 1000), int(item["window"]["t1_s"] * 1000)
        if t1 - t0 <= VIDEO_MAX_SPAN_MS:
            t0, t1 = max(t0, 0), min(max(t1, t0 + 10_000), facts.duration_ms)
            render_mp4(info, t0 / 1000.0, t1 / 1000.0, safe_join(out_dir, "assets", f"{item['id']}.mp4"))
            result["video"] = f"assets/{item['id']}.mp4"
    return result


def _render_job(job: tuple[str, dict[str, Any], str, list[str]]) -> tuple[dict[str, Any], float]:
    import time

    from ecgtrace.agents.holter.facts import load_facts

    facts_path, item, out_dir, modalities = job
    start = time.process_time()
    mods = render_item(load_facts(facts_path), item, out_dir, modalities)
    return mods, time.process_time() - start


def render_items(facts_path: str, items: list[dict[str, Any]], out_dir: str, modalities: list[str], *, jobs: int = 1) -> list[tuple[dict[str, Any], float]]:
    """``(modalities, cpu seconds)`` per item, rendered in ``jobs`` worker processes when there is enough work (same files either way)."""
    work = [(facts_path, item, out_dir, modalities) for item in items]
    if jobs <= 1 or len(items) < 8 or modalities == ["text"]:
        return [_render_job(job) for job in work]
    from ecgtrace.workers import worker_pool

    with worker_pool(jobs, start_method="forkserver") as pool:
        return list(pool.map(_render_job, work, chunksize=2))


#: The item's stored chat messages per modality (``build_messages(row, out_dir, context_text)``): the one message builder.
build_messages = dataset_messages
