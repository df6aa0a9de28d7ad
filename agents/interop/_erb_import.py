"""``ecgtrace import erb``: ERB samples -> an ecgtrace audit dataset (``audit.jsonl``, assets, ``rejected.jsonl``).

Every sample is checked (:func:`ecgtrace.agents.interop._erb_samples.parse_sample`),
its record found under the ``--records`` roots by ERB's own path rules
(:mod:`ecgtrace.agents.interop._records`), the record drawn once as a 12-lead
image and written once as text (shared by the samples on it), and the sample
written as an :class:`ecgtrace.contracts.AuditItem` with provenance
``{source: "erb", method, version, params: {metadata (verbatim), file, line, ...}}``.
A sample that cannot be imported (record missing or unreadable, options that
repeat, an answer not among its options, ...) goes to ``rejected.jsonl`` with
its file, line, code and reason; the others are kept. A rerun reuses the
assets already drawn and rewrites the three files atomically.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from pathlib import Path
from typing import Any

from ecgtrace.agents.interop._erb_samples import ErbSample, Rejected, item_json, parse_sample, read_source
from ecgtrace.agents.interop._records import (AssetSettings, RecordMissing, mimic_record, open_12lead, ptbxl_record,
                                              render_12lead_assets)
from ecgtrace.contracts.audit import AuditItem
from ecgtrace.contracts.common import RecordRef, provenance
from ecgtrace.errors import EcgTraceError, InteropError
from ecgtrace.jsonio import write_json_atomic, write_jsonl_atomic

IMPORT_VERSION = "1"
METHOD = "ecgtrace.agents.interop.erb"


def _check_out_dir(out: Path, source: Path, roots: list[Path]) -> None:
    """Input folders are never written to: the output may not lie inside a source folder or a records root."""
    target = out.resolve()
    for folder in [*([source] if source.is_dir() else []), *roots]:
        base = folder.resolve()
        if target == base or base in target.parents:
            raise InteropError(f"--out {out} lies inside the input folder {folder}; choose an output folder of its own")


def _file_hash(path: Path) -> str | None:
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _locate(sample: ErbSample, roots: list[Path], rate_hz: int) -> Path:
    if sample.data_source == "ptbxl":
        return ptbxl_record(roots, sample.ecg_id, rate_hz)
    return mimic_record(roots, sample.ecg_id, sample.metadata.get("subject_id"))


def _render_one(job: tuple[str, str, str, AssetSettings, str]) -> tuple[dict[str, str] | None, dict[str, Any] | None, str | None]:
    """(asset paths, record ref JSON, None) or (None, None, why): one record's assets; runs in a worker process."""
    path, out_dir, stem, settings, db = job
    try:
        info = open_12lead(path)
        assets = render_12lead_assets(info, out_dir, stem, settings)
    except EcgTraceError as exc:
        return None, None, str(exc)
    ref = RecordRef(db=db, id=info.name, path=str(info.path),
                    fs_hz=float(info.fs_hz), leads=list(info.leads), duration_s=round(float(info.duration_s), 3)).to_json()
    return assets, ref, None


def _render_all(jobs: dict[Path, tuple[str, str, str, AssetSettings, str]], workers: int) -> dict[Path, tuple[Any, Any, str | None]]:
    keys = list(jobs)
    if workers > 1 and len(keys) > 1:
        from ecgtrace.workers import worker_pool

        with worker_pool(workers) as pool:  # workers die with this process and stop at once on Ctrl-C/SIGTERM
            return dict(zip(keys, pool.map(_render_one, [jobs[k] for k in keys], chunksize=4)))
    return {k: _render_one(jobs[k]) for k in keys}


def _reject(rows: list[dict[str, Any]], source: Any, sample_id: Any, code: str, reason: str) -> None:
    rows.append({"file": source.file, "line": source.line, "sample_id": None if sample_id is None else str(sample_id),
                 "code": code, "reason": reason})


def _parse_all(found: list[Any], roots: list[Path], rate_hz: int, rejected: list[dict[str, Any]]) -> list[tuple[Any, ErbSample, Path]]:
    """Check every sample and find its record; what fails goes to ``rejected`` (file, line, code, reason)."""
    parsed: list[tuple[Any, ErbSample, Path]] = []
    first_line: dict[str, str] = {}
    for entry in found:
        sample: ErbSample | None = None
        try:
            sample = parse_sample(entry)
            if sample.item_id in first_line:
                raise Rejected("duplicate_id", f"sample id {sample.sample_id} of {sample.data_source}/{sample.target_dx} "
                                               f"already seen at {first_line[sample.item_id]}")
            first_line[sample.item_id] = entry.where
            parsed.append((entry, sample, _locate(sample, roots, rate_hz)))
        except Rejected as exc:
            meta = entry.obj.get("metadata") if isinstance(entry.obj, dict) else None
            _reject(rejected, entry, meta.get("id") if isinstance(meta, dict) else None, exc.code, exc.reason)
        except EcgTraceError as exc:
            code = "record_missing" if isinstance(exc, RecordMissing) else "record_unreadable"
            _reject(rejected, entry, sample.sample_id if sample else None, code, str(exc))
    return parsed


def import_erb(source: str | os.PathLike[str], roots: list[str | os.PathLike[str]], out_dir: str | os.PathLike[str], *,
               rate_hz: int = 500, settings: AssetSettings = AssetSettings(), release: str | None = None, workers: int = 1,
               limit: int | None = None) -> dict[str, Any]:
    """Import ERB samples into ``out_dir``; returns the summary also written to ``out_dir/import_summary.json``.

    Args:
        source: ERB JSONL, a per-sample JSON file, or a folder of them (``data/<source>/<dx>/<id>.json``).
        roots: folders holding PTB-XL (``records500/``, ``records100/``) and MIMIC-IV-ECG (``files/``).
        rate_hz: PTB-XL rate, 500 (``records500/..._hr``) or 100 (``records100/..._lr``); MIMIC-IV-ECG is 500 Hz.
        settings: image layout, text rate, resolution and which assets to draw.
        release: the ERB release the file comes from (kept in provenance), e.g. a Hugging Face revision.
        workers: processes drawing assets at once.
        limit: only the first ``limit`` samples of the file.

    Raises:
        InteropError: the source is not ERB's format, the output lies in an input folder, or no sample could be kept.
    """
    src, out, root_paths = Path(source), Path(out_dir), [Path(r) for r in roots]
    if not src.exists():
        raise InteropError(f"{src}: no such file or folder")
    if int(rate_hz) not in (500, 100):
        raise InteropError(f"--rate must be 500 or 100 (Hz), got {rate_hz}")
    missing_roots = [str(r) for r in root_paths if not r.is_dir()]
    if missing_roots:
        raise InteropError(f"--records folder not found: {', '.join(missing_roots)}")
    _check_out_dir(out, src, root_paths)
    found = read_source(src)
    found = found[:limit] if limit else found
    rejected: list[dict[str, Any]] = []
    parsed = _parse_all(found, root_paths, int(rate_hz), rejected)
    jobs = {path: (str(path), str(out), f"{s.data_source}-{s.ecg_id}", settings, s.data_source) for _, s, path in parsed}
    rendered = _render_all(jobs, max(1, int(workers)))
    src_hash = _file_hash(src)
    items: list[dict[str, Any]] = []
    for entry, sample, path in parsed:
        assets, ref, why = rendered[path]
        if why is not None:
            _reject(rejected, entry, sample.sample_id, "record_unreadable", why)
            continue
        params = {"sample_id": sample.sample_id, "metadata": sample.metadata, "keys": sample.style, "file": entry.file, "line": entry.line, "file_sha256": src_hash,
                  "release": release, "rate_hz": int(rate_hz) if sample.data_source == "ptbxl" else None,
                  "assets": settings.to_json(), "target_dx": sample.target_dx}
        item = item_json(sample, record=ref, assets=assets,
                         provenance=provenance("erb", METHOD, IMPORT_VERSION, params))
        try:
            items.append(AuditItem.model_validate(item).to_json())
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            _reject(rejected, entry, sample.sample_id, "malformed", str(exc).splitlines()[0][:300])
    return _write(out, src, items, rejected, found, release, int(rate_hz), settings)


def _write(out: Path, src: Path, items: list[dict[str, Any]], rejected: list[dict[str, Any]], found: list[Any], release: str | None,
           rate_hz: int, settings: AssetSettings) -> dict[str, Any]:
    rejected.sort(key=lambda r: (r["file"], r["line"] or 0))
    write_jsonl_atomic(out / "rejected.jsonl", rejected)
    codes = Counter(r["code"] for r in rejected)
    summary = {"source": str(src), "n_samples": len(found), "n_items": len(items), "n_rejected": len(rejected),
               "rejected_by_code": dict(sorted(codes.items())), "rate_hz": rate_hz, "assets": settings.to_json(),
               "per_diagnosis": dict(sorted(Counter(i["diagnosis"] for i in items).items())), "release": release,
               "provenance": provenance("computed", METHOD, IMPORT_VERSION, {"release": release})}
    why = f" ({len(rejected)} rejected: {', '.join(f'{n} {c}' for c, n in sorted(codes.items()))}; see {out / 'rejected.jsonl'})" if rejected else ""
    if not items:
        write_json_atomic(out / "import_summary.json", summary)
        raise InteropError(f"no ERB sample of {src} could be imported{why}")
    write_jsonl_atomic(out / "audit.jsonl", items)
    summary["line"] = f"imported {len(items)} of {len(found)} ERB samples into {out / 'audit.jsonl'}{why}"
    write_json_atomic(out / "import_summary.json", summary)
    return summary
