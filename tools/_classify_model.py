"""A small random-forest beat model stored as plain numpy arrays (internal).

The forest is trained by ``benchmarks/train_classify_model.py`` (scikit-learn)
and exported to ``tools/data/beat_classifier.npz``; inference here needs numpy
only, so no pickle and no scikit-learn version coupling at run time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

MODEL_PATH = Path(__file__).resolve().parent / "data" / "beat_classifier.npz"


@dataclass(frozen=True)
class Forest:
    """Flattened trees: node arrays are concatenated, ``roots[t]`` is tree t's first node."""

    feature_names: tuple[str, ...]
    classes: tuple[str, ...]
    feature: np.ndarray  # int32, -1 for leaves
    threshold: np.ndarray  # float64 (scikit-learn's split values, compared with float32 inputs)
    left: np.ndarray  # int32 global node index, -1 for leaves
    right: np.ndarray
    value: np.ndarray  # (n_nodes, n_classes) float32 class fractions
    roots: np.ndarray  # int32
    max_depth: int
    meta: dict[str, Any]

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Mean class fractions over trees, (n, n_classes)."""
        X = np.asarray(X, dtype=np.float32)
        n = X.shape[0]
        if n == 0:
            return np.zeros((0, len(self.classes)), dtype=np.float32)
        # leaves loop onto themselves (feature 0, threshold +inf), so every row walks max_depth steps
        leaf = self.feature < 0
        own = np.arange(self.feature.size, dtype=np.intp)
        feat = np.where(leaf, 0, self.feature).astype(np.intp)
        thr = np.where(leaf, np.inf, self.threshold.astype(np.float64))
        children = np.stack([np.where(leaf, own, self.left), np.where(leaf, own, self.right)], axis=1).ravel()
        XT = np.ascontiguousarray(X.T)
        rows = np.arange(n, dtype=np.intp)
        out = np.zeros((n, self.value.shape[1]), dtype=np.float64)
        for root in self.roots:
            node = np.full(n, root, dtype=np.intp)
            for _ in range(self.max_depth):
                node = children[2 * node + (XT[feat[node], rows] > thr[node])]
            out += self.value[node]
        return (out / self.roots.size).astype(np.float32)

    def save(self, path: str | Path) -> None:
        np.savez_compressed(
            path,
            feature=self.feature, threshold=self.threshold, left=self.left, right=self.right,
            value=self.value, roots=self.roots,
            header=np.array(json.dumps({"feature_names": list(self.feature_names), "classes": list(self.classes),
                                        "max_depth": int(self.max_depth), "meta": self.meta})),
        )


def forest_from_sklearn(model: Any, feature_names: list[str], meta: dict[str, Any]) -> Forest:
    """Flatten a fitted ``RandomForestClassifier`` (training-time helper)."""
    feats, thrs, lefts, rights, vals, roots = [], [], [], [], [], []
    offset = 0
    depth = 0
    for est in model.estimators_:
        t = est.tree_
        roots.append(offset)
        is_leaf = t.children_left < 0
        feats.append(np.where(is_leaf, -1, t.feature).astype(np.int32))
        thrs.append(t.threshold.astype(np.float64))
        lefts.append(np.where(is_leaf, -1, t.children_left + offset).astype(np.int32))
        rights.append(np.where(is_leaf, -1, t.children_right + offset).astype(np.int32))
        v = t.value[:, 0, :].astype(np.float64)
        vals.append((v / np.maximum(v.sum(axis=1, keepdims=True), 1e-12)).astype(np.float32))
        offset += t.node_count
        depth = max(depth, int(t.max_depth))
    return Forest(
        feature_names=tuple(feature_names),
        classes=tuple(str(c) for c in model.classes_),
        feature=np.concatenate(feats), threshold=np.concatenate(thrs),
        left=np.concatenate(lefts), right=np.concatenate(rights),
        value=np.concatenate(vals), roots=np.array(roots, dtype=np.int32),
        max_depth=depth, meta=meta,
    )


@lru_cache(maxsize=4)
def load_forest(path: str | None = None) -> Forest:
    """Load the shipped model (cached)."""
    p = Path(path) if path else MODEL_PATH
    with np.load(p, allow_pickle=False) as z:
        header = json.loads(str(z["header"]))
        return Forest(
            feature_names=tuple(header["feature_names"]), classes=tuple(header["classes"]),
            feature=z["feature"], threshold=z["threshold"], left=z["left"], right=z["right"],
            value=z["value"], roots=z["roots"], max_depth=int(header["max_depth"]), meta=header["meta"],
        )
