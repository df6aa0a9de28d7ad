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

import gc
import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ecgtrace.errors import EcgTraceError, RunError
from ecgtrace.runlog import RESULTS, load_run_samples


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a large run is read or summarised.

    A 10,000-sample run is millions of small dicts and lists; every few thousand
    allocations the collector walks all of them, which made reading and
    summarising such a run 3-5 times slower. The data has no cycles to collect.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def sample_key(sample_id: str) -> str:
    """A short, file-name-safe key for a sample id (ids may hold any character; keys go into URLs and file names)."""
    return "s" + hashlib.sha256(sample_id.encode("utf-8")).hexdigest()[:20]


def read_results(root: Path, rows: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """``results.json`` of the run, or the metrics computed from its rows when the file is missing or unreadable (or, for an
    audit, was computed with older metric definitions: see :func:`ecgtrace.metrics.current_results`)."""
    path = root / RESULTS
    # metrics are those of the first epoch's asked samples (run controls may add repeats and skipped samples)
    first = [r for r in rows if not r.get("epoch")]
    asked = [r for r in first if not r.get("skipped")]
    if path.is_file():
        try:
            results = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            pass
        else:
            if kind in ("qa", "probe"):
                return results
            from ecgtrace.metrics import current_results

            return current_results(results, asked)  # a results.json of older audit metric definitions is recomputed
    if kind == "probe":  # its metrics need the probe set, which results.json names
        raise RunError(f"{root} has no readable {RESULTS}: run the same ecgtrace probe command again to finish it and write its results")
    if kind == "qa":
        from ecgtrace.agents.exam.qa_results import summarize_qa

        return {"kind": "qa", "n_items": len(first), "n_finished": len(first), **summarize_qa(asked)}
    from ecgtrace.metrics import summarize

    return {"n_items": len(first), "n_finished": len(first), **summarize(asked)}


def dataset_models(header: dict[str, Any]) -> tuple[dict[str, Any], Path | None]:
    """The run's audit items by id (:class:`~ecgtrace.contracts.AuditItem`) and the dataset folder; {} when unreadable."""
    path = (header.get("settings") or {}).get("dataset_path")
    base_dir = Path(path).parent if path else None
    if header["kind"] != "audit" or not path or not Path(path).is_file():
        return {}, base_dir
    from ecgtrace.contracts.datasets import load_items

    try:
        return {item.id: item for item in load_items(path, "audit").items}, base_dir
    except EcgTraceError:  # a run whose dataset is unreadable is still shown, without figures
        return {}, base_dir


def _item_id(row: dict[str, Any]) -> str:
    """The item a sample row examined: its id, less the ``#<epoch>`` of a repeated epoch."""
    from ecgtrace.contracts.runs import item_id_of

    return item_id_of(row)


@dataclass
class RunView:
    """A run folder, read once. ``item_models`` holds the dataset's audit items by id
    (:class:`~ecgtrace.contracts.AuditItem`; empty for QA runs and when the dataset is gone)."""

    root: Path
    header: dict[str, Any]
    rows: list[dict[str, Any]]
    results: dict[str, Any]
    base_dir: Path | None = None
    item_models: dict[str, Any] = field(default_factory=dict)
    _item_json: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    _outcomes: list[dict[str, Any]] | None = field(default=None, repr=False)

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

    def row_kind(self, row: dict[str, Any]) -> str:
        """``audit`` or ``qa``: what kind of sample a row is (a probe run's pair rows are either, by their source)."""
        return str((row.get("probe") or {}).get("source") or self.kind) if self.kind == "probe" else self.kind

    def item(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """The item a sample examined as JSON: the dataset's audit item (converted when first asked), or the QA row's own."""
        if self.row_kind(row) == "qa":
            return row.get("item") or None
        sample_id = row["probe"]["original"] if self.kind == "probe" else _item_id(row)
        if sample_id not in self._item_json:
            model = self.item_models.get(sample_id)
            if model is None:
                return None
            self._item_json[sample_id] = model.to_json()
        return self._item_json[sample_id]

    def outcomes(self) -> list[dict[str, Any]]:
        """:func:`ecgtrace.metrics.sample_outcomes` of every audit sample, in row order (computed once)."""
        if self._outcomes is None:
            from ecgtrace.metrics import sample_outcomes

            self._outcomes = [sample_outcomes(row) for row in self.rows] if self.kind == "audit" else [{} for _ in self.rows]
        return self._outcomes

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
    with paused_gc():
        header, rows = load_run_samples(root)
        models, base_dir = dataset_models(header)
        results = read_results(root, rows, header["kind"])
    return RunView(root=root, header=header, rows=rows, results=results, item_models=models,
                   base_dir=base_dir.resolve() if base_dir is not None else None)
