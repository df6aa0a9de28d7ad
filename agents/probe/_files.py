"""The files of a probe set: each shown window as a signal file, and its assets drawn by the dataset's own renderers.

An original and its counterfactual are drawn by the same function with the
same settings (the audit builder's: ECG paper at the default resolution and
the signal as text named after the record; the QA writer's: ECG paper at
:data:`ecgtrace.agents.holter.assets.PX_PER_MM`), on the same time axis, so the
only difference a reader can see is the evidence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ecgtrace.jsonio import safe_join, write_text_atomic
from ecgtrace.tools.counterfactual import save_window
from ecgtrace.tools.records import SignalWindow

WINDOWS = "windows"
ASSETS = "assets"


class ProbeFiles:
    """Writes windows and assets under a probe set folder; every path it returns is relative to that folder."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def write(self, item_id: str, window: SignalWindow, *, record_name: str, source: str, **meta: Any) -> dict[str, str]:
        """``{"window", "image", "text"}`` of one shown window (``source``: ``audit`` or ``qa`` picks the renderer settings)."""
        from ecgtrace.tools.render import render_png, signal_to_text

        rel = {"window": f"{WINDOWS}/{item_id}.npz", "image": f"{ASSETS}/{item_id}.png", "text": f"{ASSETS}/{item_id}.txt"}
        save_window(safe_join(self.root, rel["window"]), window, item=item_id, record=record_name, **meta)
        if source == "qa":
            from ecgtrace.agents.holter.assets import PX_PER_MM

            render_png(window, safe_join(self.root, rel["image"]), px_per_mm=PX_PER_MM)
        else:
            render_png(window, safe_join(self.root, rel["image"]))
        write_text_atomic(safe_join(self.root, rel["text"]), signal_to_text(window, record=record_name))
        return rel

    def path(self, rel: str) -> Path:
        return safe_join(self.root, rel)
