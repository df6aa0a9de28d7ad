"""One run folder as the report and the viewer read it: header, finished samples, results, dataset items.

Reading only: nothing here writes into a run folder or a dataset folder. The
header's ``kind`` says what the run examined. Audit samples name their item
by id; the item itself (window, record, grounding answers, assets) comes from
the dataset the header's ``settings.dataset_path`` points to, when it is still
there. QA samples carry their item.

Files a sample may show (item images, a counterfactual strip) are resolved
with :func:`ecgtrace.jsonio.safe_join` inside the run folder or the dataset
folder (symlinks resolved first), never anywhere else.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ecgtrace.errors import EcgTraceError
from ecgtrace.runlog import RESULTS, load_run_samples


def sample_key(sample_id: str) -> str:
    """A short, file-name-safe key for a sample id (ids may hold any character; keys go into URLs and file names)."""
    return "s" + hashlib.sha256(sample_id.encode("utf-8")).hexdigest()[:20]


def read_results(root: Path, rows: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """``results.json`` of the run, or the metrics computed from its rows when the file is missing or unreadable."""
    path = root / RESULTS
    if path.is_file():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            pass
    if kind == "qa":
        from ecgtrace.agents.exam.qa_results import summarize_qa

        return {"kind": "qa", "n_items": len(rows), "n_finished": len(rows), **summarize_qa(rows)}
    from ecgtrace.metrics import summarize

    return {"n_items": len(rows), "n_finished": len(rows), **summarize(rows)}


def dataset_items(header: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], Path | None]:
    """The run's audit items by id (windows, grounding answers, assets) and the dataset folder; QA rows carry their item."""
    path = (header.get("settings") or {}).get("dataset_path")
    base_dir = Path(path).parent if path else None
    if header["kind"] != "audit" or not path or not Path(path).is_file():
        return {}, base_dir
    from ecgtrace.contracts.datasets import load_items

    try:
        return {item.id: item.to_json() for item in load_items(path, "audit").items}, base_dir
    except EcgTraceError:  # a run whose dataset is unreadable is still shown, without figures
        return {}, base_dir


@dataclass
class RunView:
    """A run folder, read once. ``items`` holds audit items by id (empty for QA runs and when the dataset is gone)."""

    root: Path
    header: dict[str, Any]
    rows: list[dict[str, Any]]
    results: dict[str, Any]
    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    base_dir: Path | None = None

    @property
    def kind(self) -> str:
        return self.header["kind"]

    @property
    def identity(self) -> dict[str, Any]:
        return self.header.get("identity") or {}

    @property
    def model(self) -> str:
        return str(self.identity.get("model") or "?")

    @property
    def label(self) -> str:
        """How the run is named on screen: its model and its folder."""
        return f"{self.model} ({self.root.name})"

    @property
    def roots(self) -> list[Path]:
        """Folders a relative record path may be relative to, in the order the report tries them."""
        return [p for p in (self.base_dir, self.root, Path.cwd()) if p is not None]

    def item(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """The item a sample examined: the dataset's audit item, or the QA row's own."""
        if self.kind == "qa":
            return row.get("item") or None
        return self.items.get(row["id"])

    def by_key(self) -> dict[str, dict[str, Any]]:
        """Samples by :func:`sample_key`."""
        return {sample_key(row["id"]): row for row in self.rows}

    def resolve_file(self, rel: Any) -> Path | None:
        """A file a sample names (an asset, a counterfactual strip), inside the dataset folder or the run folder, or None.

        Absolute paths, ``..`` and symlinks that lead out of both folders are refused (None).
        """
        from ecgtrace.jsonio import safe_join

        if not isinstance(rel, str) or not rel or Path(rel).is_absolute():
            return None
        for base in (self.base_dir, self.root):
            if base is None:
                continue
            try:
                path = safe_join(base, rel)
            except EcgTraceError:
                continue
            if path.is_file():
                return path
        return None


def open_run(path: str | os.PathLike[str]) -> RunView:
    """Read the run folder ``path`` (a clear :class:`~ecgtrace.errors.RunError` when it is not one)."""
    root = Path(path).resolve()
    header, rows = load_run_samples(root)
    items, base_dir = dataset_items(header)
    return RunView(root=root, header=header, rows=rows, results=read_results(root, rows, header["kind"]), items=items,
                   base_dir=base_dir.resolve() if base_dir is not None else None)
