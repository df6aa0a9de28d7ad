"""Train the shipped beat classifier: a small random forest on MIT-BIH DS1.

Inter-patient: the model is fitted on the 22 DS1 records only, on
their **reference** beat positions and labels (paced records excluded), and
written as plain numpy arrays to ``tools/data/beat_classifier.npz``. Records it
never saw (MIT-BIH DS2, SVDB, any Holter) are the test set; for numbers on the
training records themselves use the leave-one-record-out mode of
``benchmarks/classify.py``.

Usage:
    .venv/bin/python benchmarks/train_classify_model.py [--data ../shared/data] [--out tools/data/beat_classifier.npz]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ecgtrace.tools import _classify_model as cm
from ecgtrace.tools import _classify_train as ct
from ecgtrace.tools.classify import VERSION


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    parser.add_argument("--out", default=str(cm.MODEL_PATH))
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    t0 = time.time()
    datasets = [ct.record_data(Path(args.data) / "mitdb" / r) for r in ct.TRAIN_RECORDS]
    print(f"features of {len(datasets)} records in {time.time() - t0:.1f} s")
    forest = ct.fit_forest(datasets, n_jobs=args.jobs, meta={"version": VERSION, "database": "mitdb",
                                                             "labels": "reference .atr beat positions and AAMI classes",
                                                             "features": list(ct.MODEL_FEATURES)})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    forest.save(args.out)
    print(f"wrote {args.out} ({Path(args.out).stat().st_size / 1024:.0f} KiB, {forest.roots.size} trees, "
          f"{forest.feature.size} nodes) in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
