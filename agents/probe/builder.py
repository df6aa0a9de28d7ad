"""Build a probe set from a dataset folder: originals, their counterfactuals, every drop with its reason.

:func:`build_probe_set` reads ``audit.jsonl`` and/or ``qa.jsonl`` of a dataset
(through their contracts), picks originals (at most ``max_per_group`` per
diagnosis and label, per QA task and finding, in id order; ``limit`` in all
per file), makes every counterfactual kind asked for each
(:mod:`ecgtrace.agents.probe.audit`, :mod:`ecgtrace.agents.probe.qa`) and
writes the probe set folder (layout in :mod:`ecgtrace.contracts.probe`). The
dataset folder is only read. Deterministic: the same dataset, kinds, seed and
limits give the same files. ``probe.json`` is written last, so a folder with
it is complete; :func:`open_probe_set` reuses such a folder when it was built
from the same dataset with the same settings and refuses one built otherwise.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ecgtrace.contracts.common import provenance
from ecgtrace.contracts.probe import ProbeManifest
from ecgtrace.contracts.vocabulary import COUNTERFACTUAL_KINDS
from ecgtrace.errors import EcgTraceError

BUILDER_METHOD = "ecgtrace.agents.probe.builder"
PROBE_BUILDER_VERSION = "1"
MANIFEST = "probe.json"
PAIRS = "pairs.jsonl"


class ProbeSetError(EcgTraceError):
    """A probe set folder cannot be built or reused (another dataset or settings, no items to probe)."""


def _sha(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def identity(dataset: str | Path, *, kinds: list[str], seed: int, max_per_group: int, limit: int | None,
             only: list[str] | None = None) -> dict[str, Any]:
    """What decides a probe set's content: the dataset files' hashes, the kinds, seed, limits and the builder versions."""
    from ecgtrace.contracts.datasets import dataset_file
    from ecgtrace.tools.counterfactual import COUNTERFACTUAL_VERSION

    root = Path(dataset)
    files = {kind: dataset_file(root, kind) for kind in ("audit", "qa")} if root.is_dir() else {_kind_of(root): root}
    return {"audit_sha256": _sha(files["audit"]) if "audit" in files else None, "qa_sha256": _sha(files["qa"]) if "qa" in files else None,
            "kinds": list(kinds), "seed": int(seed), "max_per_group": int(max_per_group), "limit": limit, "only": sorted(only) if only else None,
            "builder_version": PROBE_BUILDER_VERSION, "counterfactual_version": COUNTERFACTUAL_VERSION}


def _kind_of(path: Path) -> str:
    from ecgtrace.contracts.datasets import kind_of_file

    return kind_of_file(path)


def check_kinds(kinds: list[str]) -> list[str]:
    bad = [k for k in kinds if k not in COUNTERFACTUAL_KINDS]
    if bad or not kinds:
        raise ProbeSetError(f"--kinds: unknown kind {bad[0]!r}; choose from {', '.join(COUNTERFACTUAL_KINDS)}" if bad else "--kinds: none given")
    return [k for k in COUNTERFACTUAL_KINDS if k in kinds]


def open_probe_set(out_dir: str | Path, ident: dict[str, Any]) -> dict[str, Any] | None:
    """The manifest of a finished probe set built with ``ident``; None when the folder holds none yet."""
    import json

    path = Path(out_dir) / MANIFEST
    if not path.is_file():
        return None
    manifest = json.loads(path.read_text(encoding="utf-8"))
    old = manifest.get("dataset", {}).get("identity")
    if old != ident:
        diffs = [k for k in sorted(set(old or {}) | set(ident)) if (old or {}).get(k) != ident.get(k)]
        raise ProbeSetError(f"{out_dir} holds a probe set built from another dataset or with other settings ({', '.join(diffs[:3])}); "
                            "use another --probe-set folder")
    return manifest


def pick_originals(items: list[dict[str, Any]], group: Callable[[dict[str, Any]], str], max_per_group: int, limit: int | None,
                   family: Callable[[str], str] | None = None) -> list[dict[str, Any]]:
    """At most ``max_per_group`` items per group, groups taken in turn (round robin, id order), at most ``limit`` in all.

    ``family`` (a group's family, e.g. its QA task): groups are taken one
    family after another (each family's first group, then each one's second
    ...), so a small ``limit`` still covers every family instead of the first
    family's groups only.
    """
    buckets: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in sorted(items, key=lambda it: it["id"]):
        if len(buckets[group(item)]) < max_per_group:
            buckets[group(item)].append(item)
    order = sorted(buckets)
    if family is not None:
        members: dict[str, list[str]] = defaultdict(list)
        for g in order:
            members[family(g)].append(g)
        order = sorted(order, key=lambda g: (members[family(g)].index(g), family(g)))
    out: list[dict[str, Any]] = []
    for rank in range(max_per_group):
        out += [buckets[g][rank] for g in order if rank < len(buckets[g])]
    return out[:limit] if limit else out


def _reason_key(reason: str) -> str:
    """A drop reason without its measured detail (``seam_above_noise:7.2_sigmas`` -> ``seam_above_noise``)."""
    return reason.split(":")[0] if reason.startswith("seam_") else reason


def _applicable(pair: dict[str, Any]) -> bool:
    """False for a counterfactual that was never attempted: no edit of its kind exists for the item's diagnosis and label."""
    return not (pair["reason"] or "").startswith("not_applicable:")


def _counts(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for source in sorted({p["source"] for p in pairs}):
        mine = [p for p in pairs if p["source"] == source]
        by_kind: dict[str, Any] = {}
        for kind in COUNTERFACTUAL_KINDS:
            ps = [p for p in mine if p["kind"] == kind]
            if ps:
                tried = [p for p in ps if _applicable(p)]
                reasons = Counter(_reason_key(p["reason"]) for p in tried if p["reason"])
                by_kind[kind] = {"kept": sum(p["status"] == "kept" for p in ps), "dropped": sum(p["status"] == "dropped" for p in tried),
                                 "not_applicable": len(ps) - len(tried), "reasons": dict(sorted(reasons.items())),
                                 "kept_per_group": dict(sorted(Counter(p["group"] for p in ps if p["status"] == "kept").items()))}
        out[source] = by_kind
    return out


def build_probe_set(dataset: str | Path, out_dir: str | Path, *, kinds: list[str] | tuple[str, ...] = COUNTERFACTUAL_KINDS, seed: int = 0,
                    max_per_group: int = 2, limit: int | None = None, only: list[str] | None = None,
                    progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Build (or reuse) the probe set of ``dataset`` in ``out_dir``; returns its manifest (see the module docstring).

    ``only``: diagnoses (audit) and QA tasks to take originals from (default: all).
    """
    from ecgtrace.contracts.datasets import dataset_file, load_items
    from ecgtrace.jsonio import write_json_atomic, write_jsonl_atomic

    kinds = check_kinds(list(kinds))
    ident = identity(dataset, kinds=kinds, seed=seed, max_per_group=max_per_group, limit=limit, only=only)
    done = open_probe_set(out_dir, ident)
    if done is not None:
        return done
    root = Path(dataset)
    sources = [k for k in ("audit", "qa") if (dataset_file(root, k).is_file() if root.is_dir() else _kind_of(root) == k)]
    if not sources:
        raise ProbeSetError(f"{dataset}: no audit.jsonl or qa.jsonl to probe")
    out = Path(out_dir)
    pairs: list[dict[str, Any]] = []
    written: dict[str, list[dict[str, Any]]] = {}
    n_originals = 0
    for source in sources:
        loaded = load_items(dataset_file(root, source) if root.is_dir() else root, source)
        pool = [it.to_json() for it in loaded.items]
        if source == "audit":
            from ecgtrace.agents.probe.audit_set import probe_audit

            wanted = [it for it in pool if not only or it["diagnosis"] in only]
            chosen = pick_originals(wanted, lambda it: f"{it['diagnosis']}:{it['label']}", max_per_group, limit)
            got, items = probe_audit(chosen, pool, kinds, out, seed, progress)
        else:
            from ecgtrace.agents.probe.qa import probe_qa, qa_group

            wanted = [it for it in pool if qa_group(it) and (not only or it["task"] in only)]
            chosen = pick_originals(wanted, qa_group, max_per_group, limit, family=lambda g: g.split(":")[0])  # presence, counting, timing in turn
            got, items = probe_qa(chosen, pool, kinds, out, seed, progress, base_dir=loaded.base_dir)
        n_originals += len(chosen)
        pairs += got
        written[source] = items
    ids = [it["id"] for items in written.values() for it in items]
    if len(ids) != len(set(ids)):
        raise ProbeSetError("an audit item and a QA item share an id; a probe run could not tell their samples apart")
    write_jsonl_atomic(out / PAIRS, pairs)
    for source, items in written.items():
        if items:
            write_jsonl_atomic(dataset_file(out, source), items)
        else:  # no original of this source kept a counterfactual: no file, so the set still loads (pairs.jsonl says why)
            dataset_file(out, source).unlink(missing_ok=True)
    if not n_originals:
        raise ProbeSetError(f"{dataset}: no item to probe" + (f" among {', '.join(only)}" if only else ""))
    manifest = ProbeManifest(dataset={"path": str(root), "identity": ident}, kinds=kinds, seed=int(seed), limit=limit, n_originals=n_originals,  # type: ignore[arg-type]
                             n_pairs=len(pairs), counts=_counts(pairs),
                             provenance=provenance("computed", BUILDER_METHOD, PROBE_BUILDER_VERSION, {"max_per_group": max_per_group})).to_json()
    write_json_atomic(out / MANIFEST, manifest)
    return manifest
