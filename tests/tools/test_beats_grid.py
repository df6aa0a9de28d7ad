"""The beat detector's sliding block statistics (``_beats_grid.sliding``) against numpy's own nanmedian."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from ecgtrace.tools._beats_grid import nanmedian_rows, sliding


def _nanmedian_of_windows(values: np.ndarray, half: int) -> np.ndarray:
    padded = np.concatenate([np.full(half, np.nan), values.astype(np.float64), np.full(half, np.nan)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an all-NaN window is NaN either way
        return np.nanmedian(sliding_window_view(padded, 2 * half + 1), axis=1)


@pytest.mark.parametrize("seed", range(4))
def test_sliding_median_is_nanmedian_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    for trial in range(600):
        n, half = int(rng.integers(1, 90)), int(rng.integers(1, 12))
        values = rng.normal(size=n).astype(rng.choice([np.float32, np.float64]))
        if trial % 3 == 0:
            values = np.round(values)  # ties, and -0.0 next to 0.0
        if trial % 5 == 0:
            values[rng.integers(0, n)] = np.nan
        if trial % 7 == 0:
            values[rng.integers(0, n)] = np.inf
        if trial % 11 == 0:
            with np.errstate(over="ignore", invalid="ignore"):
                values = np.abs(values.astype(np.float64)) * 1e300  # (low + high) / 2 overflows as nanmedian's does
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = sliding(values, half, "median")
        want = _nanmedian_of_windows(values, half)
        assert np.array_equal(got.view(np.uint64), want.view(np.uint64)), (n, half, values)


def test_sliding_median_of_the_level_window_by_hand():
    # block +- 2: the edges hold 3 and 4 values (an even count averages its middle pair)
    got = sliding(np.array([5.0, 1.0, 4.0, 2.0, 3.0, 9.0]), 2, "median")
    np.testing.assert_array_equal(got, [4.0, 3.0, 3.0, 3.0, 3.5, 3.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nanmedian_rows_is_nanmedian_bit_for_bit(dtype):
    rng = np.random.default_rng(5)
    for trial in range(400):
        rows, width = int(rng.integers(1, 40)), int(rng.integers(1, 140))
        a = rng.normal(size=(rows, width)).astype(dtype)
        a[rng.random(a.shape) < rng.choice([0.0, 0.1, 0.5])] = np.nan  # NaN anywhere in a row (the search-back's RR context)
        if trial % 4 == 0:
            a = np.round(a * 3)  # ties
        if trial % 9 == 0:
            a[0] = np.nan  # a row without values: NaN, as nanmedian says
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got, want = nanmedian_rows(a), np.nanmedian(a, axis=1)
        assert got.dtype == want.dtype
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (trial, a)
