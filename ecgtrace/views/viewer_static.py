"""``ecgtrace view --static DIR``: the viewer as one folder of files, for sharing (open ``index.html``, or serve it anywhere).

The same app and the same data files as the server (:mod:`ecgtrace.views.viewer_site`),
written once: every sample's file, figures up to ``max_images`` (drawn now:
first every sample's window, then the per-turn figures; a sample whose figures
were not drawn says so), the
images the model was shown, and every comparison of two runs. Run folders and
dataset folders are only read: ``DIR`` may not lie inside one. A folder that
already holds something other than an earlier export is refused; an earlier
export is replaced whole (built beside it, then renamed into place).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ecgtrace.errors import RunError
from ecgtrace.jsonio import safe_join, write_text_atomic
from ecgtrace.views.run_view import paused_gc, sample_key
from ecgtrace.views.viewer_data import app_data
from ecgtrace.views.viewer_site import APP_FILES, ViewerSite, app_file, js_payload

MARKER = ".ecgtrace-viewer"


def _check_out_dir(site: ViewerSite, out: Path) -> None:
    """Refuse a folder inside a run or dataset folder, and a non-empty folder that is not an earlier export."""
    for run in site.runs:
        for folder in (run.root, run.base_dir):
            if folder is not None and (out == folder or folder in out.parents):
                raise RunError(f"--static {out} is inside {folder}: the viewer never writes into run or dataset folders; choose another folder")
    if out.exists() and not out.is_dir():
        raise RunError(f"--static {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise RunError(f"--static {out} is not empty and holds no earlier viewer export; choose an empty or new folder")


def _write(out: Path, rel: str, data: bytes) -> None:
    """A file of the export being built: plain writes into the partial folder (the folder as a whole is renamed into place)."""
    target = safe_join(out, *rel.split("/"))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def _draw(site: ViewerSite, out: Path, n: int, row: dict[str, Any], names: set[str], budget: list[int]) -> set[str]:
    """Draw the figures ``names`` of one sample while the budget lasts; returns the names drawn."""
    from ecgtrace.views.viewer_sample import figure_specs, render_sample_figure

    run, key, drawn = site.runs[n], sample_key(row["id"]), set()
    for spec in figure_specs(run, row):
        if spec["name"] not in names or budget[0] <= 0:
            continue
        png = render_sample_figure(run, row, spec["name"])
        if png is not None:
            _write(out, f"data/r{n}/fig/{key}/{spec['name']}.png", png)
            drawn.add(spec["name"])
            budget[0] -= 1
    return drawn


def _sample_files(site: ViewerSite, out: Path, n: int, windows: dict[str, set[str]], budget: list[int]) -> int:
    """One run's sample files, the turn figures drawn while the budget lasts, the images copied; returns the figures left out."""
    from ecgtrace.views.viewer_sample import asset_file, sample_detail

    run = site.runs[n]
    skipped = 0
    for row in run.rows:
        key = sample_key(row["id"])
        detail = sample_detail(run, n, row)
        turn_figures = {f["name"] for f in detail["figures"] if f["name"] != "window"}
        drawn = windows.get(key, set()) | _draw(site, out, n, row, turn_figures, budget)
        kept = [f for f in detail["figures"] if f["name"] in drawn]
        detail["figures_not_exported"] = len(detail["figures"]) - len(kept)
        skipped += detail["figures_not_exported"]
        detail["figures"] = kept
        for entry in [*detail["assets"], *([detail["counterfactual"]] if detail["counterfactual"] and detail["counterfactual"].get("url") else [])]:
            name = entry["url"].rsplit("/", 1)[-1].split(".")[0]
            path = asset_file(run, row, name)
            if path is not None:
                _write(out, entry["url"], path.read_bytes())
        _write(out, f"data/r{n}/s/{key}.js", js_payload(f"r{n}/s/{key}", detail))
    return skipped


def export_static(site: ViewerSite, out_dir: str | Path, *, max_images: int = 1000,
                  progress: Callable[[str, int, int], Any] | None = None) -> dict[str, Any]:
    """Write the viewer for ``site``'s runs into ``out_dir``; returns what was written.

    ``max_images`` caps the figures drawn over all runs (0: none); ``progress(what, done, total)`` is told after each run.
    The export is built in a partial folder beside ``out_dir`` and renamed into place when complete, so a reader
    (or a rerun after a crash) sees the earlier export or the new one, never half of one; one fsync per file
    would cost more than the export itself (10,000 samples: 90 s of 100).
    """
    out = Path(out_dir).resolve()
    _check_out_dir(site, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    try:
        with paused_gc():
            summary = _export_into(site, partial, max_images, progress)
        write_text_atomic(partial / MARKER, f"ecgtrace viewer export of {len(site.runs)} run(s)\n")
        os.sync()  # once, before the rename makes the export visible
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        if out.exists():
            out.rename(old)  # an earlier export of ours (checked above): replaced whole
        partial.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return {**summary, "out": str(out), "index": str(out / "index.html")}


def _export_into(site: ViewerSite, out: Path, max_images: int, progress: Callable[[str, int, int], Any] | None) -> dict[str, Any]:
    for name in APP_FILES:
        _write(out, name if name == "index.html" else f"app/{name}", app_file(name) or b"")
    names = ["app"] + [f"r{n}/{what}" for n in range(len(site.runs)) for what in ("overview", "index", "text")]
    names += [f"cmp/{a}-{b}" for a, b in app_data(site.runs)["pairs"]]
    for name in names:
        data = site.data(name)
        if data is not None:
            _write(out, f"data/{name}.js", data)
    budget = [max(0, int(max_images))]
    # every sample's window first (what a reader looks at), then the per-turn figures while the budget lasts
    windows = [{sample_key(row["id"]): _draw(site, out, n, row, {"window"}, budget) for row in run.rows} for n, run in enumerate(site.runs)]
    samples = skipped = 0
    for n, run in enumerate(site.runs):
        skipped += _sample_files(site, out, n, windows[n], budget)
        samples += len(run.rows)
        if progress:
            progress(run.label, n + 1, len(site.runs))
    return {"runs": len(site.runs), "samples": samples, "figures": max(0, int(max_images)) - budget[0], "figures_left_out": skipped}
