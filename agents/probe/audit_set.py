"""The audit half of a probe set: each chosen original, every counterfactual kind of it, and the items to write.

Records are opened, and their beat tables read (reference annotations, else
the project's detectors, as the audit builder does), once per record.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ecgtrace.agents.probe import _audit_edits as ed
from ecgtrace.agents.probe._files import ProbeFiles
from ecgtrace.agents.probe.audit import _pair, edited_counterfactual, original_item, reproduced, swap_counterfactual


class _Records:
    """Opened records and their beat tables, once per record path."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir
        self._open: dict[str, Any] = {}

    def get(self, path: str) -> tuple[Any, Any]:
        if path not in self._open:
            from ecgtrace.agents.audit.builder import beat_table
            from ecgtrace.tools.records import open_record

            info = open_record(path)
            self._open[path] = (info, beat_table(info, None, self.cache_dir)[0])
        return self._open[path]

    def source(self, item: dict[str, Any]) -> ed.Source:
        info, table = self.get(item["record"]["path"])
        return ed.source_of(item, info, table)

    def window(self, item: dict[str, Any]) -> tuple[Any, str]:
        info, _ = self.get(item["record"]["path"])
        return ed.read_item_window(info, item), info.name


def probe_audit(chosen: list[dict[str, Any]], pool: list[dict[str, Any]], kinds: list[str], out: Path, seed: int,
                progress: Callable[[str], None] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(pairs, items)``: every pair record of the chosen originals, and the originals with a kept counterfactual followed by those."""
    from ecgtrace.errors import EcgTraceError
    from ecgtrace.rubrics.diagnosis_schema import load_diagnoses

    graphs = load_diagnoses()
    files = ProbeFiles(out)
    records = _Records(out / "cache")
    lenders = ed.Lenders(pool=pool, make=records.source)
    pairs: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    for n, o in enumerate(chosen):
        if progress:
            progress(f"audit {n + 1}/{len(chosen)}: {o['id']}")
        graph = graphs.get(o["diagnosis"])
        try:
            src = records.source(o) if graph is not None else None
        except EcgTraceError as exc:  # a record that cannot be read costs its items only
            src, why = None, f"record_unreadable:{str(exc)[:80]}"
        else:
            why = "unknown_diagnosis_graph" if graph is None else reproduced(src, graph, graphs)  # type: ignore[arg-type]
        if why:
            pairs += [_pair(o, kind, f"{o['id']}.cf-{kind}", reason=why) for kind in kinds]
            continue
        assert src is not None and graph is not None
        kept: list[dict[str, Any]] = []
        for kind in kinds:
            if kind == "swap":
                pair, c = swap_counterfactual(src, pool, graph, files, seed, records.window)
            else:
                pair, c = edited_counterfactual(src, lenders, kind, graph, graphs, files, seed)
            pairs.append(pair)
            if c is not None:
                kept.append(c)
        if kept:
            items += [original_item(src, files), *kept]
    return pairs, items
