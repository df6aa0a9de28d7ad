"""Fixtures for the interop tests: ERB fixture files and a synthetic PTB-XL / MIMIC-IV-ECG record tree.

The synthetic tree follows the databases' own path rules (``records500/00000/00001_hr``,
``records100/00000/00001_lr``, ``files/p1972/p19729398/s41084804/41084804``) with
12-lead, 10 s WFDB records whose lead names are spelt as PTB-XL spells them
(``AVR``, ``AVL``, ``AVF``), so the tests run where ``../shared/data`` is absent.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
ERB = ROOT / "tests" / "fixtures" / "erb"
PTBXL_LEADS = ["I", "II", "III", "AVR", "AVL", "AVF", "V1", "V2", "V3", "V4", "V5", "V6"]
#: ecg_ids the fixtures name whose record exists (21837 is missing on purpose)
PTBXL_IDS = (1, 3, 4, 5, 6, 7, 8, 9, 12, 15, 20, 21, 25, 30)
MIMIC = ("19729398", "41084804")


def synthetic_12lead(fs_hz: int, seed: int, seconds: float = 10.0) -> np.ndarray:
    """(n, 12) mV: P-QRS-T Gaussians every 0.8 s, a lead-dependent gain and a little noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * fs_hz)) / fs_hz
    beat = np.zeros_like(t)
    for r in np.arange(0.4, seconds, 0.8):
        for offset, width, amp in ((-0.16, 0.025, 0.15), (0.0, 0.012, 1.0), (0.25, 0.04, 0.3)):
            beat += amp * np.exp(-0.5 * ((t - r - offset) / width) ** 2)
    gains = np.array([1.0, 1.2, 0.3, -0.9, 0.5, 0.7, -0.6, 0.4, 0.9, 1.3, 1.1, 0.8])
    return beat[:, None] * gains[None, :] + rng.normal(0, 0.01, (t.size, 12))


def write_record(base: Path, fs_hz: int, seed: int) -> None:
    """A WFDB format-16 record (1 uV per unit), written with numpy (``wfdb.wrsamp`` is far slower)."""
    base.parent.mkdir(parents=True, exist_ok=True)
    digital = np.round(synthetic_12lead(fs_hz, seed) * 1000).astype("<i2")
    digital.tofile(f"{base}.dat")
    lines = [f"{base.name} 12 {fs_hz} {digital.shape[0]}"]
    for j, lead in enumerate(PTBXL_LEADS):
        checksum = int(digital[:, j].astype(np.int64).sum()) % 65536
        checksum = checksum - 65536 if checksum > 32767 else checksum
        lines.append(f"{base.name}.dat 16 1000.0(0)/mV 16 0 {int(digital[0, j])} {checksum} 0 {lead}")
    Path(f"{base}.hea").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="session")
def erb_records(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``{"ptbxl": root with records500/ and records100/, "mimic": root with files/}``."""
    root = tmp_path_factory.mktemp("erb_records")
    ptbxl, mimic = root / "ptbxl", root / "mimic"
    for ecg_id in PTBXL_IDS:
        folder = f"{ecg_id // 1000 * 1000:05d}"
        write_record(ptbxl / "records500" / folder / f"{ecg_id:05d}_hr", 500, ecg_id)
        write_record(ptbxl / "records100" / folder / f"{ecg_id:05d}_lr", 100, ecg_id)
    subject, study = MIMIC
    write_record(mimic / "files" / f"p{subject[:4]}" / f"p{subject}" / f"s{study}" / study, 500, 99)
    return {"ptbxl": ptbxl, "mimic": mimic}


@pytest.fixture(scope="session")
def erb_fixtures() -> Path:
    return ERB
