"""Beat classes on 10 s records: the short-record classifier vs the Holter forest, on MIT-BIH 10 s windows.

PTB-XL, LUDB and CinC records last 10 s (8-15 beats) and have no beat labels, so
the short-record rules (``tools/_classify_short.py``) are measured on 10 s tiles
of the shared MIT-BIH records, whose ``.atr`` beats are labelled by experts.
Each tile is classified on its own (the reference beat positions, so
classification is measured apart from detection), as a 10 s record would be.

Split (fixed): the non-paced MIT-BIH records in sorted order, even positions
are the **tuning** half (the thresholds in ``_classify_short.RULES`` were set
looking at them), odd positions the **untuned** half. Both are printed, marked.

Peers in the same run: the Holter forest (``classify_beats_array``) on the same
10 s tile, and on the whole 30 min record (where it learns its template; the
shipped forest was trained on these DS1 records, so that column is a training
fit, an upper bound rather than a test).

A second table runs the audit's own path (``annotate_record`` -> ``classify_beats``) on
every shared PTB-XL record at 100 Hz and at 500 Hz and counts the records whose beats
are all ``Q`` (the issue's target: none), the share of Q beats and the Q reasons.

    nice -n 10 .venv/bin/python benchmarks/classify_short.py [--limit N] [--tile-s 10] [--no-ptbxl]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from ecgtrace.tools import _classify_short as cs
from ecgtrace.tools import classify as cl
from ecgtrace.tools.annotations import AAMI_ORDER, read_reference_annotations
from ecgtrace.tools.records import open_record, read_samples

sys.path.insert(0, str(Path(__file__).resolve().parent))
from classify import confusion  # noqa: E402  (the sibling benchmark's AAMI confusion matrix: one home)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
PACED = ("102", "104", "107", "217")


def split_records(data: Path = DATA) -> dict[str, list[str]]:
    """``{"tuning": [...], "untuned": [...]}``: alternate non-paced MIT-BIH records in sorted order."""
    names = sorted(p.stem for p in (data / "mitdb").glob("*.atr") if p.stem not in PACED)
    return {"tuning": names[0::2], "untuned": names[1::2]}


def tile_classes(signal: np.ndarray, fs: float, beats: np.ndarray, tile: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(beat indices, short-record classes, forest classes) over every full tile of the record."""
    idx_all, short_all, forest_all = [], [], []
    for start in range(0, signal.shape[0] - tile + 1, tile):
        inside = np.flatnonzero((beats >= start) & (beats < start + tile))
        if inside.size < 2:
            continue
        local = beats[inside] - start
        x = signal[start : start + tile]
        short, _, _ = cs.classify_short_array(x, fs, local)
        forest = cl.classify_beats_array(x, fs, local).classes
        idx_all.append(inside)
        short_all.append(short)
        forest_all.append(forest)
    if not idx_all:
        return np.zeros(0, dtype=np.int64), np.zeros(0, "<U1"), np.zeros(0, "<U1")
    return np.concatenate(idx_all), np.concatenate(short_all), np.concatenate(forest_all)


def row(name: str, m: np.ndarray) -> list[str]:
    def se_pp(cls: str) -> tuple[str, str]:
        k = AAMI_ORDER.index(cls)
        tp, ref, pred = m[k, k], m[k].sum(), m[:, k].sum()
        return (f"{100 * tp / ref:.1f}" if ref else "-"), (f"{100 * tp / pred:.1f}" if pred else "-")

    n = m.sum()
    q = m[:, AAMI_ORDER.index("Q")].sum()
    v, s = se_pp("V"), se_pp("S")
    n_ok = m[0, 0] / max(m[0].sum(), 1)
    return [name, str(n), f"{100 * q / max(n, 1):.1f}", f"{100 * n_ok:.1f}", *v, *s, str(m[1].sum()), str(m[2].sum())]


def ptbxl_q_table(console: Console, limit: int | None) -> None:
    """Records with every beat Q, at each rate, through annotate_record (fresh, uncached)."""
    import tempfile
    from collections import Counter

    from ecgtrace.tools.annotate import annotate_record

    table = Table(title="PTB-XL through annotate_record: records whose beats are all Q")
    for col in ("rate", "records", "all-Q records", "Q beats", "beats", "N", "S", "V", "Q reasons"):
        table.add_column(col, justify="right")
    with tempfile.TemporaryDirectory() as cache:
        for rate, pattern in (("100 Hz", "records100/*/*_lr.hea"), ("500 Hz", "records500/*/*_hr.hea")):
            headers = sorted((DATA / "ptbxl").glob(pattern))[:limit]
            counts: Counter = Counter()
            reasons: Counter = Counter()
            all_q = []
            for header in headers:
                ann = annotate_record(header.with_suffix(""), cache_dir=cache, use_cache=False, workers=1)
                counts.update(ann.beat_classes.tolist())
                reasons.update(ann.provenance["params"].get("classes_provenance", {}).get("params", {}).get("q_reasons", {}))
                if ann.beat_classes.size and np.all(ann.beat_classes == "Q"):
                    all_q.append(header.stem)
            total = sum(counts.values())
            table.add_row(rate, str(len(headers)), f"{len(all_q)}" + (f" ({', '.join(all_q[:5])})" if all_q else ""),
                          f"{100 * counts['Q'] / max(total, 1):.1f}%", str(total), str(counts["N"]), str(counts["S"]), str(counts["V"]),
                          ", ".join(f"{k} {v}" for k, v in reasons.most_common()))
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tile-s", type=float, default=10.0)
    parser.add_argument("--limit", type=int, default=None, help="records per half (quick run)")
    parser.add_argument("--no-whole", action="store_true", help="skip the forest on whole records (faster)")
    parser.add_argument("--no-ptbxl", action="store_true", help="skip the PTB-XL all-Q table")
    args = parser.parse_args(argv)
    if not (DATA / "mitdb").is_dir():
        print(f"no shared data at {DATA}", file=sys.stderr)
        return 2
    warnings.simplefilter("ignore")
    console = Console(width=160)
    table = Table(title=f"MIT-BIH {args.tile_s:g} s tiles, reference beat positions (Se/+P in %)")
    for col in ("half", "method", "beats", "Q %", "N Se", "V Se", "V +P", "S Se", "S +P", "ref S", "ref V"):
        table.add_column(col, justify="right")
    started = time.perf_counter()
    for half, names in split_records().items():
        totals = {"short rules, 10 s": np.zeros((5, 5), np.int64), "forest, 10 s": np.zeros((5, 5), np.int64), "forest, whole record": np.zeros((5, 5), np.int64)}
        for name in names[: args.limit]:
            base = DATA / "mitdb" / name
            info = open_record(base)
            ref = read_reference_annotations(base)
            signal = read_samples(info, 0, info.n_samples).signal_mv
            tile = int(round(args.tile_s * info.fs_hz))
            idx, short, forest = tile_classes(signal, info.fs_hz, ref.beat_samples, tile)
            truth = ref.beat_classes[idx]
            totals["short rules, 10 s"] += confusion(truth, short)
            totals["forest, 10 s"] += confusion(truth, forest)
            if not args.no_whole:
                whole = cl.classify_beats(info, ref.beat_samples, info.fs_hz).classes[idx]
                totals["forest, whole record"] += confusion(truth, whole)
        for method, m in totals.items():
            if method == "forest, whole record" and args.no_whole:
                continue
            table.add_row(*row(f"{half} ({len(names[: args.limit])} rec)", m)[:1], method, *row(method, m)[1:])
    console.print(table)
    if not args.no_ptbxl:
        ptbxl_q_table(console, args.limit)
    console.print(f"[dim]{time.perf_counter() - started:.0f} s; tuning: {', '.join(split_records()['tuning'])}; untuned: {', '.join(split_records()['untuned'])}[/dim]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
