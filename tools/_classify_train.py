"""Training helpers for the beat classifier (internal; needs scikit-learn, imported lazily).

Used by ``benchmarks/train_classify_model.py`` (fits and ships the model) and
``benchmarks/classify.py`` (leave-one-record-out evaluation). Features are
computed by the same pipeline as inference, on the reference beat positions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ecgtrace.tools import _classify_model as cm
from ecgtrace.tools import _classify_pipeline as cp
from ecgtrace.tools.annotations import read_reference_annotations
from ecgtrace.tools.records import iter_chunks, open_record

#: MIT-BIH inter-patient training set DS1 (de Chazal et al. 2004): the only records the shipped model is fitted on.
DS1_RECORDS: tuple[str, ...] = (
    "101", "106", "108", "109", "112", "114", "115", "116", "118", "119", "122", "124",
    "201", "203", "205", "207", "208", "209", "215", "220", "223", "230",
)
#: MIT-BIH inter-patient test set DS2 (score only). Only 100 is in ../shared/data.
DS2_RECORDS: tuple[str, ...] = (
    "100", "103", "105", "111", "113", "117", "121", "123", "200", "202", "210", "212",
    "213", "214", "219", "221", "222", "228", "231", "232", "233", "234",
)
#: Records the shipped model is trained on (DS1 only: 100 and every other database stay untouched).
TRAIN_RECORDS: tuple[str, ...] = DS1_RECORDS
PACED_RECORDS: tuple[str, ...] = ("102", "104", "107", "217")

#: Model inputs, in order. All are record-relative or scale-free except local_rr_ms and the widths.
MODEL_FEATURES: tuple[str, ...] = (
    "prematurity", "compensatory_ratio", "rr_next_ratio", "rr_change", "local_rr_ms",
    "corr_qrs_max", "corr_qrs_mean", "corr_qrs_min", "corr_full_mean", "corr_t_mean",
    "rmsd_qrs_mean", "rmsd_qrs_min", "amp_ratio_mean", "amp_ratio_max", "slope_ratio_mean", "polarity_agree",
    "qrs_width_ms", "template_width_ms", "width_ratio", "p_corr", "p_amp_ratio", "pre_energy_ratio",
    "area_ratio_mean", "noise_ratio",
    "prev_corr_qrs_mean", "next_corr_qrs_mean", "prev_width_ratio", "next_width_ratio",
    "prev_noise_ratio", "next_noise_ratio",
    "sim_frac", "clu_prematurity", "clu_compensatory_ratio", "clu_width_ratio", "clu_corr_qrs_mean",
    "clu_amp_ratio_mean", "clu_noise_ratio",
)
FOREST_PARAMS: dict[str, Any] = {"n_estimators": 40, "max_depth": 10, "min_samples_leaf": 5, "random_state": 0}
TRAIN_CLASSES: tuple[str, ...] = ("N", "S", "V", "F")


def reference_af_mask(ann) -> np.ndarray:
    """Reference AF mask: beats inside ``(AFIB``/``(AFL`` rhythm intervals of the .atr."""
    mask = np.zeros(ann.beat_samples.size, dtype=bool)
    for iv in ann.rhythm_intervals:
        if iv["label"] in ("AFIB", "AFL"):
            mask |= (ann.beat_samples >= iv["onset_sample"]) & (ann.beat_samples < iv["offset_sample"])
    return mask


def record_data(record_path: str | Path, chunk_s: float = 600.0) -> dict[str, Any]:
    """Features on the reference beat positions, the reference classes and the reference AF mask."""
    info = open_record(record_path)
    ann = read_reference_annotations(record_path)
    usable = np.array([lead not in info.unusable_leads for lead in info.leads], dtype=bool)
    feats, _ = cp.features_from_chunks(iter_chunks(info, chunk_s, 2.0), ann.beat_samples, info.fs_hz, usable)
    return {"name": info.name, "info": info, "ann": ann, "features": feats, "y": ann.beat_classes, "af": reference_af_mask(ann)}


def matrix(feats: dict[str, np.ndarray]) -> np.ndarray:
    from ecgtrace.tools.classify import feature_matrix

    return feature_matrix(feats, MODEL_FEATURES)


def fit_forest(datasets: list[dict[str, Any]], *, n_jobs: int = 1, meta: dict[str, Any] | None = None) -> cm.Forest:
    """Fit a random forest on the N/S/V/F beats of ``datasets`` and flatten it."""
    from sklearn.ensemble import RandomForestClassifier

    Xs, ys = [], []
    for d in datasets:
        keep = np.isin(d["y"], TRAIN_CLASSES)
        Xs.append(matrix(d["features"])[keep])
        ys.append(d["y"][keep])
    model = RandomForestClassifier(n_jobs=n_jobs, **FOREST_PARAMS).fit(np.vstack(Xs), np.concatenate(ys))
    info = {"trained_on": [d["name"] for d in datasets], "n_trees": FOREST_PARAMS["n_estimators"],
            "max_depth": FOREST_PARAMS["max_depth"], "n_train_beats": int(sum(y.size for y in ys)), **(meta or {})}
    return cm.forest_from_sklearn(model, list(MODEL_FEATURES), info)
