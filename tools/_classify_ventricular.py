"""Ventricular second-look rules on top of the forest (internal to :mod:`ecgtrace.tools.classify`).

:data:`WIDE_V_RULE` (a wide, different beat whose look-alikes come early or before a pause) comes first;
then the second look. The rules use only record-relative features (no reference label of the record; the width rule compares
a beat with the beats this classifier itself called V):

* :data:`DEVIANT_V_RULE` (version 5): a clean beat the forest left N whose QRS is wider than and very
  different from the record's dominant beat, and that is not preceded by the dominant beat's P wave,
  is V. The forest leans on timing and leaves on-time (late-coupled) V beats N; the wide-V rule of
  :mod:`ecgtrace.tools.classify` deliberately needs ectopic timing, so as not to call intermittent
  bundle-branch block V. A conducted beat keeps the sinus P; this rule needs that P to be missing.
* :data:`FUSION_RULE` (version 5): a beat the forest calls F is V unless it looks like a fusion beat:
  a fusion beat is a sinus impulse meeting a ventricular one, so it is preceded by the dominant P
  wave and its QRS lies between the dominant and the ventricular shape (it still correlates with
  the dominant QRS). The forest learnt F almost only from MIT-BIH 208 (373 of DS1's 415 F beats).
  Version 7 adds the other side of "between": a fusion QRS is also narrower than the record's own
  ventricular beats (:data:`FUSION_WIDTH_RULE`). A late-coupled V beat that follows the sinus P keeps
  the P and some likeness to the dominant beat, but its QRS is as wide as the other V beats.
"""

from __future__ import annotations

import numpy as np

#: General "wide and different from the dominant beat" rule: a clean beat whose QRS (and that of
#: its look-alikes) is clearly wider than the record's dominant beat, and whose shape differs,
#: is ventricular whatever the forest says (the forest under-calls wide V beats that still
#: correlate ~0.8 with the dominant beat, e.g. MIT-BIH 223). Thresholds set on DS1 (training) records.
#: Version 3: the rule also needs ectopic timing of the beat's look-alikes (early, or followed by a pause). DS1
#: leave-one-record-out (v2 model and weights): without it V Se 94.8 / +P 89.5; (clu_prematurity >= 0.03 or
#: clu_compensatory >= 1.1) 94.5 / 90.5 (kept); (0.0, 1.05) 94.8 / 90.1; (0.05, 1.15) 94.2 / 90.6 (S 93.1 +P).
WIDE_V_RULE = {"clu_width_ratio_min": 1.4, "width_ratio_min": 1.3, "corr_qrs_mean_max": 0.9, "noise_ratio_max": 0.3,
               "clu_prematurity_min": 0.03, "clu_compensatory_min": 1.1}

#: Chosen on the DS1 leave-one-record-out outputs (grid width 1.15/1.25, corr 0.6/0.75, p_corr 0.2/0.4):
#: V Se 94.5 -> 97.0 %, V +P 90.5 -> 90.4 % (the smallest N->V cost of the grid; V->N 200 -> 106, mostly 223 and 203).
DEVIANT_V_RULE = {"width_ratio_min": 1.15, "corr_qrs_mean_max": 0.6, "p_corr_max": 0.2, "noise_ratio_max": 0.3}

#: F keeps F only with the dominant P before it (p_corr >= p_corr_min) and an intermediate QRS
#: (corr_qrs_mean >= corr_qrs_mean_min). Chosen on the DS1 reference labels (the LORO forests almost never
#: output F, since 208 carries the F beats): of the grid p_corr 0.2/0.3/0.4 x corr 0.5/0.6/0.65, the pair with the
#: smallest (true F sent to V) + (true V kept F) rate, 14.2 % + 8.1 %, among those that keep the shipped model's
#: V +P on its training record 208 at >= 95 % (0.4/0.65, 16.9 % + 3.0 %, drops it to 94.6 %).
FUSION_RULE = {"p_corr_min": 0.2, "corr_qrs_mean_min": 0.65}

#: F keeps F only with a QRS narrower than ``v_width_share_max`` of the median width (against the dominant
#: beat) of the record's V beats, and only where the record has at least ``min_v_beats`` of them. Chosen as
#: FUSION_RULE was, on the DS1 reference labels of the beats that pass FUSION_RULE (356 F, 308 V; the record's
#: V width from the leave-one-record-out labels): (true F sent to V) + (true V kept F) for 0.7 / 0.75 / 0.8 /
#: 0.85 / 0.9 / 0.95 is 35.0 / 24.4 / 21.9 / 13.4 / 17.9 / 26.9 %, and of those the shipped model keeps V +P
#: >= 95 % on its training record 208 only at 0.95 (95.4 %; 0.9: 94.9 %, 0.85: 94.3 %).
FUSION_WIDTH_RULE = {"v_width_share_max": 0.95, "min_v_beats": 5}


def wide_v(feats: dict[str, np.ndarray]) -> np.ndarray:
    """Beats that :data:`WIDE_V_RULE` calls ventricular (bool per beat)."""
    r = WIDE_V_RULE
    return (
        (feats["clu_width_ratio"] >= r["clu_width_ratio_min"])
        & (feats["width_ratio"] >= r["width_ratio_min"])
        & (feats["corr_qrs_mean"] < r["corr_qrs_mean_max"])
        & (feats["noise_ratio"] < r["noise_ratio_max"])
        # ectopic timing of the beat's look-alikes: a cluster of wide beats that come on time
        # (intermittent bundle-branch block, 2:1 conduction) is conduction, not ventricular ectopy
        & ((feats["clu_prematurity"] >= r["clu_prematurity_min"]) | (feats["clu_compensatory_ratio"] >= r["clu_compensatory_min"]))
    )


def deviant_v(feats: dict[str, np.ndarray]) -> np.ndarray:
    """Beats that :data:`DEVIANT_V_RULE` calls ventricular whatever their timing (bool per beat)."""
    r = DEVIANT_V_RULE
    return (
        (feats["width_ratio"] >= r["width_ratio_min"])
        & (feats["corr_qrs_mean"] < r["corr_qrs_mean_max"])
        & (feats["p_corr"] < r["p_corr_max"])
        & (feats["noise_ratio"] < r["noise_ratio_max"])
    )


def not_fusion(feats: dict[str, np.ndarray]) -> np.ndarray:
    """Beats that lack what a fusion beat needs under :data:`FUSION_RULE` (bool per beat)."""
    r = FUSION_RULE
    return (feats["p_corr"] < r["p_corr_min"]) | (feats["corr_qrs_mean"] < r["corr_qrs_mean_min"])


def as_wide_as_v(feats: dict[str, np.ndarray], labels: np.ndarray) -> np.ndarray:
    """Beats whose QRS is as wide as the record's V beats under :data:`FUSION_WIDTH_RULE` (bool per beat).

    All False where the record has too few V beats to say how wide they are.
    """
    r = FUSION_WIDTH_RULE
    width = np.asarray(feats["width_ratio"], dtype=np.float64)
    v_width = width[(labels == "V") & np.isfinite(width)]
    if v_width.size < r["min_v_beats"]:
        return np.zeros(labels.shape, dtype=bool)
    return np.nan_to_num(width, nan=0.0) >= r["v_width_share_max"] * float(np.median(v_width))


def apply(labels: np.ndarray, feats: dict[str, np.ndarray]) -> np.ndarray:
    """Labels after the rules: N or S -> V for wide beats, N -> V for deviant ones, F -> V for beats that cannot be fusion."""
    labels = np.where(wide_v(feats) & ((labels == "N") | (labels == "S")), "V", labels)
    labels = np.where((labels == "N") & deviant_v(feats), "V", labels)
    labels = np.where((labels == "F") & not_fusion(feats), "V", labels)
    return np.where((labels == "F") & as_wide_as_v(feats, labels), "V", labels)
