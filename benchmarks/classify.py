"""Benchmark AAMI beat classification (tools/classify.py), inter-patient, on records it was never trained on.

Protocol (``benchmarks/_protocol.py``): the shipped model is fitted on MIT-BIH
DS1 only (``benchmarks/train_classify_model.py``), and its decision weights and
rules were set on DS1. Columns:

* ``DS1 tuned (LORO)``: each DS1 record classified by a forest refitted on the
  other 21 DS1 records (same features and settings); still *tuned*, since the
  settings were chosen on DS1.
* ``MIT-BIH DS2``: the one DS2 record present (100, never trained on from
  model 2 on) plus the QTDB excerpts of DS2 records (sel103 ... sel232, 250 Hz,
  15 min; sel213/sel221/sel232 are rich in V, F and S beats), shipped model.
* ``QTDB untuned``: the other QTDB records with ``.atr`` beats that are not
  excerpts of a shared MIT-BIH record, shipped model.
* ``SVDB 800`` (128 Hz), shipped model; and the synthetic Holter (its own .atr).

``UNTUNED gross`` pools MIT-BIH DS2, QTDB-untuned and SVDB (the issue-14 targets: V Se
and +P >= 95%, S Se >= 75% with +P >= 80%). Fusion beats called V count
against V +P; the EC57 variant that excuses them is printed beside it.

Beats: the reference (.atr) positions (classification measured independently
of detection); ``--detected`` also runs tools/beats.detect_beats and matches
beats to the reference within +-150 ms. AF mask: ``detected`` (default, as in
production: tools/af.detect_af inside classify), ``reference`` ((AFIB/(AFL of
the .atr, development only) or ``none``. Paced records are excluded.

Usage:
    nice -n 10 .venv/bin/python benchmarks/classify.py [--af detected|reference|none] [--detected] [--no-loro]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _protocol import QTDB_DS2, qtdb_detection_status, qtdb_status  # noqa: E402

from ecgtrace.tools import _classify_model as cm  # noqa: E402
from ecgtrace.tools import _classify_train as ct  # noqa: E402
from ecgtrace.tools import classify as cl  # noqa: E402
from ecgtrace.tools.annotations import AAMI_ORDER  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
MATCH_MS = 150.0
DS2_GROUP = "MIT-BIH DS2 (100 + QTDB sel of DS2)"


def confusion(ref: np.ndarray, pred: np.ndarray) -> np.ndarray:
    m = np.zeros((5, 5), dtype=np.int64)
    for i, r in enumerate(AAMI_ORDER):
        for j, p in enumerate(AAMI_ORDER):
            m[i, j] = int(np.count_nonzero((ref == r) & (pred == p)))
    return m


def se_pp(cm_: np.ndarray, cls: str, *, fusion_as_v_ok: bool = False) -> tuple[int, int, int]:
    """(TP, FN, FP) for one class from a 5x5 confusion matrix (rows reference)."""
    k = AAMI_ORDER.index(cls)
    tp = int(cm_[k, k])
    fn = int(cm_[k].sum() - tp)
    col = cm_[:, k].copy()
    if fusion_as_v_ok and cls == "V":
        col[AAMI_ORDER.index("F")] = 0
    fp = int(col.sum() - tp)
    return tp, fn, fp


def pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.1f}" if b else "-"


def match_detected(ref_samples: np.ndarray, det_samples: np.ndarray, tol: int) -> tuple[np.ndarray, np.ndarray]:
    """Greedy nearest matching; returns (ref_index, det_index) of matched pairs."""
    j = np.clip(np.searchsorted(det_samples, ref_samples), 1, max(det_samples.size - 1, 1))
    cand = np.stack([j - 1, j], axis=1) if det_samples.size > 1 else np.zeros((ref_samples.size, 1), dtype=np.int64)
    dist = np.abs(det_samples[cand] - ref_samples[:, None])
    best = cand[np.arange(ref_samples.size), dist.argmin(axis=1)]
    ok = dist.min(axis=1) <= tol
    ri, di = np.nonzero(ok)[0], best[ok]
    _, first = np.unique(di, return_index=True)
    return ri[first], di[first]


def af_mask_for(d: dict, how: str, beats: np.ndarray) -> np.ndarray | None:
    """Reference AF mask from the .atr (development only), all-False for "none", None for "detected"
    (classify then runs tools.af.detect_af itself, before any S decision)."""
    if how == "none":
        return np.zeros(beats.size, dtype=bool)
    if how == "detected":
        return None
    ann = d["ann"]
    mask = np.zeros(beats.size, dtype=bool)
    for iv in ann.rhythm_intervals:
        if iv["label"] in ("AFIB", "AFL"):
            mask |= (beats >= iv["onset_sample"]) & (beats < iv["offset_sample"])
    return mask


def _untuned_records(data: Path) -> list[tuple[str, str, Path]]:
    """(group, name, path) of every untuned record with beat labels, as far as ``data`` holds them.

    MIT-BIH DS2 is record 100 plus the QTDB excerpts of DS2 records (250 Hz, 15 min); QTDB is the rest.
    """
    out = [(DS2_GROUP, r, data / "mitdb" / r) for r in ct.DS2_RECORDS if (data / "mitdb" / f"{r}.hea").exists()]
    qtdb = data / "qtdb"
    untuned = [p.stem for p in sorted(qtdb.glob("*.atr")) if qtdb_status(p.stem) == "untuned"]
    out += [(DS2_GROUP, n, qtdb / n) for n in untuned if n in QTDB_DS2]
    out += [("QTDB untuned", n, qtdb / n) for n in untuned if n not in QTDB_DS2]
    out += [("SVDB 800", "800", data / "svdb" / "800")] if (data / "svdb" / "800.hea").exists() else []
    return out


def _classify(d: dict, forest: cm.Forest, how: str) -> tuple[np.ndarray, float]:
    """Classes of the reference beats of one record and the seconds classify_beats takes on it."""
    beats, fs = d["ann"].beat_samples, d["info"].fs_hz
    af = af_mask_for(d, how, beats)
    t1 = time.perf_counter()
    res = cl._decide(d["features"], beats, fs, af, (), 0, {}, forest=forest, auto_af=True)
    feature_s = d.get("feature_s", 0.0)
    return res.classes, feature_s + time.perf_counter() - t1


def run(args: argparse.Namespace) -> int:
    console = Console(width=180)
    data = Path(args.data)
    shipped = cm.load_forest()
    trained_on = set(shipped.meta.get("trained_on", []))
    console.print(f"shipped model trained on {len(trained_on)} records: {' '.join(sorted(trained_on))}", highlight=False)
    leaked = trained_on - set(ct.DS1_RECORDS)
    if leaked:
        console.print(f"[red]the shipped model was trained on {' '.join(sorted(leaked))}, outside DS1: their rows are NOT a test[/red]")
    groups: dict[str, np.ndarray] = {}
    rows = []
    if not args.no_loro:
        ds1 = {r: _timed_record(data / "mitdb" / r) for r in ct.DS1_RECORDS if (data / "mitdb" / f"{r}.hea").exists()}
        total = np.zeros((5, 5), dtype=np.int64)
        for r, d in ds1.items():
            forest = ct.fit_forest([ds1[q] for q in ds1 if q != r], n_jobs=args.jobs)
            pred, elapsed = _classify(d, forest, args.af)
            m = confusion(d["y"], pred)
            total += m
            rows.append((r, "DS1 tuned (LORO)", m, elapsed))
        groups["DS1 tuned (LORO)"] = total
    for group, name, path in _untuned_records(data):
        d = _timed_record(path)
        status = "TRAIN fit" if name in trained_on else "untuned"
        pred, elapsed = _classify(d, shipped, args.af)
        m = confusion(d["y"], pred)
        groups[group] = groups.get(group, np.zeros((5, 5), dtype=np.int64)) + m
        rows.append((name, f"{group} ({status})", m, elapsed))
    if not args.no_synth:
        d = _synthetic_record()
        pred, elapsed = _classify(d, shipped, args.af)
        groups["synthetic"] = confusion(d["y"], pred)
        rows.append(("synth", "synthetic (untuned)", groups["synthetic"], elapsed))
    _print_rows(console, f"Per record, reference beats, AF mask: {args.af}", rows)
    untuned = sum((m for g, m in groups.items() if g in (DS2_GROUP, "QTDB untuned", "SVDB 800")), np.zeros((5, 5), dtype=np.int64))
    groups["UNTUNED gross"] = untuned
    _print_summary(console, groups)
    _print_gross(console, "UNTUNED gross (MIT-BIH DS2 + QTDB untuned + SVDB 800, shipped model)", untuned)
    if args.detected:
        _run_detected(console, data, shipped, args)
    return 0


def _timed_record(path: Path) -> dict:
    t0 = time.perf_counter()
    d = ct.record_data(path)
    d["feature_s"] = time.perf_counter() - t0
    return d


def _synthetic_record() -> dict:
    import tempfile

    from ecgtrace.tools.synth import synthesize_holter

    with tempfile.TemporaryDirectory(prefix="ecgtrace-classify-") as tmp:
        result = synthesize_holter(tmp, name="holter", hours=0.5, fs_hz=250.0, n_leads=3, seed=7)
        return _timed_record(Path(result.record_path))


def _print_summary(console: Console, groups: dict[str, np.ndarray]) -> None:
    t = Table(title="Summary per group (targets on UNTUNED: V Se >= 95, V +P >= 95, S Se >= 75, S +P >= 80; F->V counts against V +P)")
    for col in ("group", "beats", "V ref", "V Se %", "V +P %", "V +P % (EC57, F->V excused)", "S ref", "S Se %", "S +P %"):
        t.add_column(col, justify="right")
    for g, m in groups.items():
        vt, vfn, vfp = se_pp(m, "V")
        _, _, vfp57 = se_pp(m, "V", fusion_as_v_ok=True)
        st, sfn, sfp = se_pp(m, "S")
        t.add_row(g, str(int(m.sum())), str(vt + vfn), pct(vt, vt + vfn), pct(vt, vt + vfp), pct(vt, vt + vfp57), str(st + sfn),
                  pct(st, st + sfn), pct(st, st + sfp), style="bold" if g == "UNTUNED gross" else None)
    console.print(t)


def _print_rows(console: Console, title: str, rows) -> None:
    t = Table(title=title)
    for col in ("record", "split", "beats", "V ref", "V Se %", "V +P %", "V FP (of F)", "S ref", "S Se %", "S +P %", "time s"):
        t.add_column(col, justify="right")
    for r, split, m, elapsed in rows:
        vt, vfn, vfp = se_pp(m, "V")
        st, sfn, sfp = se_pp(m, "S")
        f_as_v = int(m[AAMI_ORDER.index("F"), AAMI_ORDER.index("V")])
        t.add_row(r, split, str(int(m.sum())), str(vt + vfn), pct(vt, vt + vfn), pct(vt, vt + vfp), f"{vfp} ({f_as_v})",
                  str(st + sfn), pct(st, st + sfn), pct(st, st + sfp), f"{elapsed:.2f}")
    console.print(t)


def _print_gross(console: Console, title: str, m: np.ndarray) -> None:
    vt, vfn, vfp = se_pp(m, "V")
    _, _, vfp_ec57 = se_pp(m, "V", fusion_as_v_ok=True)
    st, sfn, sfp = se_pp(m, "S")
    console.print(f"[bold]{title}[/bold]: V Se {pct(vt, vt + vfn)} % +P {pct(vt, vt + vfp)} % "
                  f"(+P {pct(vt, vt + vfp_ec57)} % not counting F->V) | S Se {pct(st, st + sfn)} % +P {pct(st, st + sfp)} % "
                  f"| accuracy {pct(int(np.trace(m)), int(m.sum()))} %")
    t = Table(title="confusion (rows reference, columns predicted)")
    t.add_column("ref \\ pred")
    for c in AAMI_ORDER:
        t.add_column(c, justify="right")
    for i, c in enumerate(AAMI_ORDER):
        t.add_row(c, *[str(int(v)) for v in m[i]])
    console.print(t)


def _run_detected(console: Console, data: Path, shipped: cm.Forest, args: argparse.Namespace) -> None:
    from ecgtrace.tools.beats import detect_beats

    rows, total = [], np.zeros((5, 5), dtype=np.int64)
    for group, name, path in _untuned_records(data):
        d = ct.record_data(path)
        info, ref = d["info"], d["ann"]
        table = detect_beats(info, workers=1)
        t1 = time.perf_counter()
        af = af_mask_for(d, args.af, table.samples)
        res = cl.classify_beats(info, table.samples, info.fs_hz, af_mask=af, artifact_spans=table.artifact_spans)
        elapsed = time.perf_counter() - t1
        ri, di = match_detected(ref.beat_samples, table.samples, int(round(MATCH_MS * info.fs_hz / 1000.0)))
        m = confusion(ref.beat_classes[ri], res.classes[di])
        total += m
        # detected beats: a record examined for the detector (benchmarks/_protocol.py) says so
        status = qtdb_detection_status(name) if path.parent.name == "qtdb" else "untuned"
        rows.append((name, f"{group} ({status})", m, elapsed))
    _print_rows(console, f"Untuned records, DETECTED beats (+-{MATCH_MS:.0f} ms, matched beats only), shipped model, AF mask: {args.af}", rows)
    _print_gross(console, "UNTUNED gross, detected beats", total)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--af", choices=("reference", "detected", "none"), default="detected")
    parser.add_argument("--detected", action="store_true", help="also classify detected beats (tools/beats.py) on the untuned records")
    parser.add_argument("--no-loro", action="store_true", help="skip the DS1 leave-one-record-out rows")
    parser.add_argument("--no-synth", action="store_true", help="skip the synthetic record")
    parser.add_argument("--jobs", type=int, default=1)
    return run(parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
