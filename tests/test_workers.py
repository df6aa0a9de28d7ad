"""Worker pools: BLAS single-threaded in each worker unless asked otherwise."""

from __future__ import annotations

from ecgtrace.workers import worker_pool


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [int(pool["num_threads"]) for pool in threadpool_info() if pool.get("user_api") == "blas"]


def test_workers_run_blas_single_threaded_by_default() -> None:
    import numpy  # noqa: F401  (loads its BLAS here, so the forked worker has one to report)

    here = _blas_threads()
    assert here, "numpy's BLAS not seen by threadpoolctl"
    with worker_pool(1) as pool:
        assert set(pool.submit(_blas_threads).result()) == {1}
    with worker_pool(1, blas_threads=None) as pool:
        assert pool.submit(_blas_threads).result() == here  # left as the library set it
