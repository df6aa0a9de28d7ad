"""Scoring AF episodes against reference episodes (internal; re-exported by :mod:`ecgtrace.tools.af`)."""

from __future__ import annotations

from typing import Any


def score_af_episodes(detected: list[dict[str, Any]], reference: list[dict[str, Any]], *, min_reference_s: float = 0.0) -> dict[str, Any]:
    """Episode- and duration-level Se/+P of detected vs reference AF episodes.

    Both lists hold dicts with ``onset_ms``/``offset_ms``. Episode Se: share of
    reference episodes (at least ``min_reference_s`` long) overlapped by a
    detected one; episode +P: share of detected episodes overlapping a
    reference one. Duration Se/+P: overlap time over reference / detected time
    (all reference episodes count for durations).
    """
    ref = sorted((int(e["onset_ms"]), int(e["offset_ms"])) for e in reference)
    det = sorted((int(e["onset_ms"]), int(e["offset_ms"])) for e in detected)

    def overlap_ms(a: tuple[int, int], spans: list[tuple[int, int]]) -> int:
        return sum(max(0, min(a[1], b[1]) - max(a[0], b[0])) for b in spans)

    def touches(a: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
        return any(min(a[1], b[1]) > max(a[0], b[0]) for b in spans)

    ref_long = [r for r in ref if (r[1] - r[0]) >= min_reference_s * 1000.0]
    tp_ref = sum(touches(r, det) for r in ref_long)
    tp_det = sum(touches(d, ref) for d in det)
    ref_ms = sum(r[1] - r[0] for r in ref)
    det_ms = sum(d[1] - d[0] for d in det)
    both_ms = sum(overlap_ms(d, ref) for d in det)
    return {
        "n_reference": len(ref_long),
        "n_detected": len(det),
        "episode_se": tp_ref / len(ref_long) if ref_long else None,
        "episode_ppv": tp_det / len(det) if det else None,
        "reference_s": ref_ms / 1000.0,
        "detected_s": det_ms / 1000.0,
        "overlap_s": both_ms / 1000.0,
        "duration_se": both_ms / ref_ms if ref_ms else None,
        "duration_ppv": both_ms / det_ms if det_ms else None,
    }
