"""Peer R-peak detectors from PyPI, run on the same records as ecgtrace's (benchmarks only).

Each peer is a plain function ``(trace_mv, fs_hz) -> int64 sample indices`` on
one lead (every peer here is a single-lead detector; it gets the first usable
lead, as in each package's own examples). Packages come from the ``bench``
extra of ``pyproject.toml``; a peer whose package is missing is reported as
such, never silently skipped.

| name | package | algorithm |
|---|---|---|
| ``nk-<method>`` | neurokit2 | ``ecg_clean`` (the method's own cleaning where neurokit2 has one) + ``ecg_findpeaks(method=...)`` |
| ``sleepecg`` | sleepecg | ``detect_heartbeats`` (C backend; Pan-Tompkins-like with adaptive thresholds) |
| ``vg-fastnvg`` / ``vg-fastwhvg`` | vg-beat-detectors | visibility-graph detectors (Emrich et al. 2023) |
| ``ecgdet-<name>`` | py-ecg-detectors | ``Detectors(fs).<name>_detector`` (Porr & Howell) |
| ``gqrs`` | wfdb | ``wfdb.processing.gqrs_detect`` (port of PhysioNet's gqrs) |
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["DEFAULT_PEERS", "PEERS", "Peer", "peer_names", "run_peer"]

#: neurokit2 methods that have a matching ``ecg_clean`` method (others are cleaned with the default).
_NK_CLEAN = {"neurokit", "pantompkins1985", "hamilton2002", "elgendi2010", "engzeemod2012", "biosppy"}


@dataclass(frozen=True)
class Peer:
    name: str
    package: str
    detect: Callable[[np.ndarray, float], np.ndarray]

    def version(self) -> str:
        try:
            return importlib.metadata.version(self.package)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"


def _nk(method: str) -> Callable[[np.ndarray, float], np.ndarray]:
    def detect(trace: np.ndarray, fs_hz: float) -> np.ndarray:
        import neurokit2 as nk

        cleaned = nk.ecg_clean(trace, sampling_rate=fs_hz, method=method if method in _NK_CLEAN else "neurokit")
        return np.asarray(nk.ecg_findpeaks(cleaned, sampling_rate=fs_hz, method=method)["ECG_R_Peaks"], dtype=np.int64)

    return detect


def _sleepecg(trace: np.ndarray, fs_hz: float) -> np.ndarray:
    import sleepecg

    return np.asarray(sleepecg.detect_heartbeats(trace, fs_hz), dtype=np.int64)


def _vg(kind: str) -> Callable[[np.ndarray, float], np.ndarray]:
    def detect(trace: np.ndarray, fs_hz: float) -> np.ndarray:
        import vg_beat_detectors

        detector = getattr(vg_beat_detectors, kind)(sampling_frequency=int(round(fs_hz)))  # slices by fs: needs an int
        return np.asarray(detector.find_peaks(trace), dtype=np.int64)

    return detect


def _ecgdet(name: str) -> Callable[[np.ndarray, float], np.ndarray]:
    def detect(trace: np.ndarray, fs_hz: float) -> np.ndarray:
        from ecgdetectors import Detectors

        return np.asarray(getattr(Detectors(fs_hz), f"{name}_detector")(trace), dtype=np.int64)

    return detect


def _gqrs(trace: np.ndarray, fs_hz: float) -> np.ndarray:
    from wfdb import processing

    return np.asarray(processing.gqrs_detect(sig=trace, fs=fs_hz), dtype=np.int64)


PEERS: dict[str, Peer] = {
    p.name: p
    for p in (
        Peer("nk-neurokit", "neurokit2", _nk("neurokit")),
        Peer("nk-pantompkins1985", "neurokit2", _nk("pantompkins1985")),
        Peer("nk-hamilton2002", "neurokit2", _nk("hamilton2002")),
        Peer("nk-elgendi2010", "neurokit2", _nk("elgendi2010")),
        Peer("nk-engzeemod2012", "neurokit2", _nk("engzeemod2012")),
        Peer("nk-kalidas2017", "neurokit2", _nk("kalidas2017")),
        Peer("nk-rodrigues2021", "neurokit2", _nk("rodrigues2021")),
        Peer("nk-emrich2023", "neurokit2", _nk("emrich2023")),
        Peer("sleepecg", "sleepecg", _sleepecg),
        Peer("vg-fastnvg", "vg-beat-detectors", _vg("FastNVG")),
        Peer("vg-fastwhvg", "vg-beat-detectors", _vg("FastWHVG")),
        Peer("ecgdet-two_average", "py-ecg-detectors", _ecgdet("two_average")),
        Peer("ecgdet-swt", "py-ecg-detectors", _ecgdet("swt")),
        Peer("ecgdet-engzee", "py-ecg-detectors", _ecgdet("engzee")),
        Peer("gqrs", "wfdb", _gqrs),
    )
}


#: Peers run by default: every package, leaving out the ~13 s-per-record Engzee variants (``--peers all`` adds them).
DEFAULT_PEERS: tuple[str, ...] = tuple(n for n in PEERS if "engzee" not in n)


def peer_names(spec: str) -> list[str]:
    """``"all"``, ``"default"`` (:data:`DEFAULT_PEERS`), ``""`` (none) or a comma-separated list of :data:`PEERS` names."""
    if spec.strip() == "all":
        return list(PEERS)
    if spec.strip() == "default":
        return list(DEFAULT_PEERS)
    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        raise SystemExit(f"error: unknown peer detector(s) {', '.join(unknown)}; known: {', '.join(PEERS)}")
    return names


def run_peer(name: str, trace_mv: np.ndarray, fs_hz: float) -> np.ndarray:
    """Run one peer on one lead; NaN samples are replaced by 0 (no peer accepts NaN)."""
    trace = np.nan_to_num(np.asarray(trace_mv, dtype=np.float64))
    return np.unique(PEERS[name].detect(trace, float(fs_hz)))
