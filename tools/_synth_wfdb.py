"""The WFDB files of a synthetic record (:mod:`ecgtrace.tools.synth`): header and reference annotations.

Both are written into a private temporary folder next to the record and moved
into place, so a killed run never leaves a half-written ``.hea`` or ``.atr``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ecgtrace.tools._synth_schedule import P_PEAK_OFFSET_S, Beat, _Walker


def write_header(base: Path, digital: np.ndarray, fs_hz: float, leads: tuple[str, ...], *, adc_gain: float, comment: str, rng: np.random.Generator) -> None:
    """``NAME.hea`` for the format-16 ``digital`` samples (checksums, first values), with a drawn age and sex; atomic."""
    import wfdb

    checksums = [int(c) for c in (digital.astype(np.int64).sum(axis=0) % 65536)]
    checksums = [c - 65536 if c > 32767 else c for c in checksums]
    n = len(leads)
    age = int(rng.integers(35, 85))
    sex = "M" if rng.random() < 0.5 else "F"
    record = wfdb.Record(
        record_name=base.name,
        n_sig=n,
        fs=fs_hz,
        sig_len=int(digital.shape[0]),
        file_name=[f"{base.name}.dat"] * n,
        fmt=["16"] * n,
        adc_gain=[adc_gain] * n,
        baseline=[0] * n,
        units=["mV"] * n,
        adc_res=[16] * n,
        adc_zero=[0] * n,
        init_value=[int(v) for v in digital[0]],
        checksum=checksums,
        block_size=[0] * n,
        sig_name=list(leads),
        comments=[f"Age: {age} Sex: {sex}", comment],
    )
    tmp_dir = base.parent / f".{base.name}.hea.tmp"
    tmp_dir.mkdir(exist_ok=True)
    try:
        record.wrheader(write_dir=str(tmp_dir))
        os.replace(tmp_dir / f"{base.name}.hea", f"{base}.hea")
    finally:
        for leftover in tmp_dir.glob("*"):
            leftover.unlink()
        tmp_dir.rmdir()


def write_annotations(base: Path, beats: list[Beat], fs_hz: float, qrs_onset_ms: float, walker: _Walker | None = None) -> None:
    """Every beat, plus a '+' rhythm-change annotation (aux '(AFIB' ...) at the first beat of each rhythm.

    With a holtercare ``walker``: rhythm changes without beats (VF, VFL), ``x`` at each
    non-conducted PAC's P peak and a ``p`` mark at every P-wave peak (``qrs_onset_ms``: a normal QRS onset
    from its R peak, where the PR interval ends). Atomic.
    """
    import wfdb

    rows: list[tuple[int, int, str, str]] = []  # (sample, order within a sample, symbol, aux)
    current = None
    extra = sorted(walker.markers) if walker is not None else []
    k = 0
    for beat in beats:
        sample = int(round(beat.t_s * fs_hz))
        while k < len(extra) and extra[k][0] <= beat.t_s:
            t, symbol, aux = extra[k]
            rows.append((int(round(t * fs_hz)), 0, symbol, aux))
            current = aux[1:] if aux.startswith("(") else current
            k += 1
        if beat.rhythm != current:
            rows.append((sample, 1, "+", "(" + beat.rhythm))
            current = beat.rhythm
        rows.append((sample, 2, beat.symbol, ""))
    if walker is not None:
        rows += _p_marks(beats, walker, fs_hz, qrs_onset_ms)
        rows.sort(key=lambda r: (r[0], r[1]))
    samples = [r[0] for r in rows]
    symbols = [r[2] for r in rows]
    aux_notes = [r[3] for r in rows]
    tmp_dir = base.parent / f".{base.name}.atr.tmp"
    tmp_dir.mkdir(exist_ok=True)
    try:
        wfdb.wrann(base.name, "atr", np.array(samples, dtype=np.int64), symbol=symbols, aux_note=aux_notes, fs=fs_hz, write_dir=str(tmp_dir))
        os.replace(tmp_dir / f"{base.name}.atr", f"{base}.atr")
    finally:
        for leftover in tmp_dir.glob("*"):
            leftover.unlink()
        tmp_dir.rmdir()


def _p_marks(beats: list[Beat], walker: _Walker, fs_hz: float, qrs_onset_ms: float) -> list[tuple[int, int, str, str]]:
    """``p`` at every P-wave peak (conducted or not); ``x`` for the blocked ectopic P of a non-conducted PAC."""
    rows = []
    for beat in beats:
        if beat.pr_ms > 0:
            shape = "A" if beat.symbol == "A" else "N"
            t = beat.t_s + qrs_onset_ms / 1000.0 - beat.pr_ms / 1000.0 + P_PEAK_OFFSET_S[shape]
            rows.append((int(round(t * fs_hz)), 3, "p", ""))
    for onset, shape in walker.atrial_waves:
        t = int(round((onset + P_PEAK_OFFSET_S[shape]) * fs_hz))
        rows.append((t, 3, "x" if shape == "A" else "p", ""))
    return rows
