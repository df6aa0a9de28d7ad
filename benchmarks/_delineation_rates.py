"""100 Hz against 500 Hz: the same PTB-XL records measured at both rates (issue 13's rate-independence target).

Each record's measurements (per-lead medians over its own detected beats) at 100 Hz minus those at
500 Hz, per record (median over leads) and pooled over leads; ``benchmarks/delineation.py`` prints
the table.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ecgtrace.tools.measure import detect_window_beats, measure_window
from ecgtrace.tools.records import open_record, read_samples

RATE_QUANTITIES = (("qrs_ms", "QRS", "ms", 3.0), ("pr_ms", "PR", "ms", 5.0), ("qt_ms", "QT", "ms", 5.0), ("r_amp_mv", "R amp", "mV", None),
                   ("s_amp_mv", "S amp", "mV", None), ("t_amp_mv", "T amp", "mV", None), ("st_j60_mv", "ST J+60", "mV", None),
                   ("st_j_mv", "ST J", "mV", None), ("r_peak_time_ms", "R-peak time", "ms", None), ("q_dur_ms", "Q dur", "ms", None))


def rate_pairs(data: Path, limit: int | None = None) -> list[tuple[int, Path, Path]]:
    """PTB-XL records present at both 100 Hz and 500 Hz: (ecg_id, low-rate base, high-rate base)."""
    folder = data / "ptbxl"
    hi = {int(p.stem[:5]): p.with_suffix("") for p in folder.glob("records500/*/*_hr.hea")}
    lo = {int(p.stem[:5]): p.with_suffix("") for p in folder.glob("records100/*/*_lr.hea")}
    both = sorted(set(hi) & set(lo))
    return [(k, lo[k], hi[k]) for k in both[:limit]]


def record_values(base: Path) -> dict[str, dict[str, float | None]]:
    """Per-lead medians of the RATE_QUANTITIES on a whole record, its own detected beats."""
    info = open_record(base, check_leads=False)
    window = read_samples(info, 0, info.n_samples)
    m = measure_window(window, detect_window_beats(window)[0])
    return {lead: {q: lm.values[q]["value"] for q, *_ in RATE_QUANTITIES} for lead, lm in m.per_lead.items()}


def run_rates(data: Path, limit: int | None) -> dict[str, dict[str, list[float]]]:
    """Differences 100 Hz - 500 Hz per quantity: ``record`` (median over leads, one per record) and ``lead`` (pooled)."""
    diffs: dict[str, dict[str, list[float]]] = {q: {"record": [], "lead": []} for q, *_ in RATE_QUANTITIES}
    for _, lo, hi in rate_pairs(data, limit):
        a, b = record_values(lo), record_values(hi)
        for q, *_ in RATE_QUANTITIES:
            pairs = [(a[lead][q], b[lead][q]) for lead in a if lead in b and a[lead][q] is not None and b[lead][q] is not None]
            diffs[q]["lead"] += [x - y for x, y in pairs]
            if pairs:
                diffs[q]["record"].append(float(np.median([x for x, _ in pairs]) - np.median([y for _, y in pairs])))
    return diffs


def print_rates(title: str, diffs: dict[str, dict[str, list[float]]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in ("quantity", "target med |d|", "records", "med |d| rec", "med d rec", "p90 |d| rec", "lead values", "med |d| lead", "p90 |d| lead"):
        table.add_column(col, justify="right")
    for q, label, unit, target in RATE_QUANTITIES:
        rec, lead = np.abs(diffs[q]["record"]), np.abs(diffs[q]["lead"])
        if rec.size == 0:
            continue
        scale = 1.0 if unit == "ms" else 1000.0  # amplitudes in uV
        u = unit if unit == "ms" else "uV"
        med = float(np.median(rec)) * scale
        ok = "" if target is None else ("[green]" if med <= target else "[red]")
        table.add_row(label, "-" if target is None else f"{target:g} {u}", str(rec.size), f"{ok}{med:.1f}{'[/]' if ok else ''} {u}",
                      f"{np.median(diffs[q]['record']) * scale:+.1f}", f"{np.percentile(rec, 90) * scale:.1f}", str(lead.size),
                      f"{np.median(lead) * scale:.1f}", f"{np.percentile(lead, 90) * scale:.1f}")
    Console(width=160).print(table)
