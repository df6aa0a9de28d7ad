"""Is ``audit.jsonl`` up to date? A rerun of ``ecgtrace build`` keeps it when nothing that decides it changed.

Rebuilding the audit items of a 24 h record takes about a minute (features of
every window, then a PNG and a text file per item); the same inputs give the
same bytes, so :func:`audit_build_key` names the inputs and
:func:`current_audit_summary` says whether the folder already holds that build.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def audit_build_key(record_hashes: dict[str, str], *, seed: int, max_per_diagnosis: int = 4, diagnoses: list[str] | None = None) -> str:
    """What decides ``audit.jsonl``: record contents, seed, limits, builder/feature/engine/render/measure versions (with the wave net's hash), diagnosis YAML bytes.

    ``record_hashes`` maps each record path to its content hash. Two builds with
    the same key write the same bytes, so a rerun with an equal key can keep the file.
    """
    import hashlib
    import json

    from ecgtrace.agents.audit._features import FEATURES_VERSION
    from ecgtrace.agents.audit.builder import BUILDER_VERSION
    from ecgtrace.agents.audit.engine import ENGINE_VERSION
    from ecgtrace.rubrics.loading import builtin_dir
    from ecgtrace.tools.measure import measure_identity
    from ecgtrace.tools.render import RENDER_VERSION

    yaml_digest = hashlib.sha256()
    for path in sorted(Path(builtin_dir("diagnoses")).glob("*.yaml")):
        yaml_digest.update(path.name.encode() + b"\0" + path.read_bytes())
    payload = {"records": sorted(record_hashes.items()), "seed": int(seed), "max_per_diagnosis": max_per_diagnosis, "diagnoses": diagnoses,
               "builder": BUILDER_VERSION, "features": FEATURES_VERSION, "engine": ENGINE_VERSION, "render": RENDER_VERSION,
               "measure": measure_identity(), "graphs": yaml_digest.hexdigest()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:24]


def current_audit_summary(out_dir: str | os.PathLike[str], key: str) -> dict[str, Any] | None:
    """The summary of the ``audit.jsonl`` in ``out_dir`` when it was built with ``key`` and every asset it names exists; else None."""
    import json

    from ecgtrace.errors import EcgTraceError
    from ecgtrace.jsonio import read_jsonl

    out = Path(out_dir)
    try:
        summary = json.loads((out / "audit_summary.json").read_text(encoding="utf-8"))
        rows = list(read_jsonl(out / "audit.jsonl"))
    except (OSError, ValueError, EcgTraceError):
        return None
    if summary.get("build_key") != key or len(rows) != summary.get("n_items"):
        return None
    assets = [path for row in rows for path in (row.get("assets") or {}).values() if path]
    return summary if all((out / path).is_file() for path in assets) else None
