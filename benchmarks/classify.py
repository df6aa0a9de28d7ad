"""Benchmark AAMI beat classification (tools/classify.py) on MIT-BIH and SVDB 800.

Train/test honesty:
* The shipped model was trained on the MIT-BIH records in shared/data (DS1 + 100).
  On those records, the **test** numbers are leave-one-record-out (LORO): each
  record is classified by a forest refitted on the other 22 records (same
  features, same settings) -- the default ``--mode loro``.
  ``--mode shipped`` shows the shipped model on its own training records (a
  training fit, printed as such).
* SVDB 800 was never trained on: the shipped model's numbers there are a test.

Beats: the reference (.atr) positions, matched 1:1 (classification measured
independently of detection). ``--detected`` also runs tools/beats.detect_beats
and matches beats to the reference within ±150 ms.
AF mask: ``reference`` = beats inside (AFIB/(AFL intervals of the .atr
("reference AF mask", development only); ``detected`` = tools/af.detect_af.
Paced records 102 104 107 217 are excluded (standard protocol).

Usage:
    nice -n 10 .venv/bin/python benchmarks/classify.py [--mode loro|shipped] [--af reference|detected|none] [--detected]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from ecgtrace.tools import _classify_model as cm
from ecgtrace.tools import _classify_train as ct
from ecgtrace.tools import classify as cl
from ecgtrace.tools.annotations import AAMI_ORDER

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
MATCH_MS = 150.0


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


def run(args: argparse.Namespace) -> int:
    console = Console(width=160)
    data = Path(args.data)
    records = [r for r in (args.records or ct.TRAIN_RECORDS) if r not in ct.PACED_RECORDS]
    t0 = time.time()
    sets = {r: ct.record_data(data / "mitdb" / r) for r in records}
    svdb = ct.record_data(data / "svdb" / "800") if (data / "svdb" / "800.hea").exists() else None
    console.print(f"features of {len(sets) + (svdb is not None)} records in {time.time() - t0:.1f} s")
    shipped = cm.load_forest()
    rows, total = [], np.zeros((5, 5), dtype=np.int64)
    for r, d in sets.items():
        if args.mode == "loro":
            forest = ct.fit_forest([sets[q] for q in ct.TRAIN_RECORDS if q != r and q in sets], n_jobs=args.jobs)
            split = "test (LORO)"
        else:
            forest = shipped
            split = "TRAIN fit" if r in shipped.meta.get("trained_on", []) else "test"
        beats, fs = d["ann"].beat_samples, d["info"].fs_hz
        af = af_mask_for(d, args.af, beats)
        res = cl._decide(d["features"], beats, fs, af, (), 0, {}, forest=forest, auto_af=True)
        t1 = time.perf_counter()
        cl.classify_beats(d["info"], beats, fs, af_mask=af)
        elapsed = time.perf_counter() - t1
        m = confusion(d["y"], res.classes)
        total += m
        rows.append((r, split, m, elapsed))
    _print_rows(console, f"MIT-BIH, reference beats, AF mask: {args.af}, mode: {args.mode}", rows)
    _print_gross(console, "MIT-BIH gross (" + ("test: leave-one-record-out" if args.mode == "loro" else "shipped model: TRAINING FIT") + ")", total)
    if svdb is not None:
        beats, fs = svdb["ann"].beat_samples, svdb["info"].fs_hz
        res = cl._decide(svdb["features"], beats, fs, af_mask_for(svdb, args.af, beats), (), 0, {}, forest=shipped, auto_af=True)
        t1 = time.perf_counter()
        cl.classify_beats(svdb["info"], beats, fs)
        m = confusion(svdb["y"], res.classes)
        _print_rows(console, "SVDB 800 (128 Hz), shipped model, never trained on: test", [("800", "test", m, time.perf_counter() - t1)])
        _print_gross(console, "SVDB 800 confusion", m)
    if args.detected:
        _run_detected(console, sets, shipped, args)
    return 0


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


def _run_detected(console: Console, sets: dict, shipped: cm.Forest, args: argparse.Namespace) -> None:
    from ecgtrace.tools.beats import detect_beats

    rows, total = [], np.zeros((5, 5), dtype=np.int64)
    for r, d in sets.items():
        info, ref = d["info"], d["ann"]
        table = detect_beats(info, workers=1)
        t1 = time.perf_counter()
        af = af_mask_for(d, args.af, table.samples)
        res = cl.classify_beats(info, table.samples, info.fs_hz, af_mask=af, artifact_spans=table.artifact_spans)
        elapsed = time.perf_counter() - t1
        ri, di = match_detected(ref.beat_samples, table.samples, int(round(MATCH_MS * info.fs_hz / 1000.0)))
        m = confusion(ref.beat_classes[ri], res.classes[di])
        total += m
        rows.append((r, "TRAIN fit", m, elapsed))
    _print_rows(console, f"MIT-BIH, DETECTED beats (±{MATCH_MS:.0f} ms, matched beats only), shipped model, AF mask: {args.af}", rows)
    _print_gross(console, "MIT-BIH gross, detected beats (shipped model: training records)", total)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--mode", choices=("loro", "shipped"), default="loro")
    parser.add_argument("--af", choices=("reference", "detected", "none"), default="reference")
    parser.add_argument("--detected", action="store_true", help="also classify detected beats (tools/beats.py)")
    parser.add_argument("--records", nargs="*", help="MIT-BIH record names (default: DS1 + 100)")
    parser.add_argument("--jobs", type=int, default=1)
    return run(parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
