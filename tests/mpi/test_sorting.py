"""np.sort, np.argsort and np.unique of distributed vectors (run on every rank under
mpiexec, on every grid of the rank count), against NumPy on the same data: exact, since every
rank sorts the same gathered bytes."""

from __future__ import annotations

import numpy as np
import pytest

import blasmp_array as bm


def data(n: int, dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.integers(-3, 4, n).astype(dtype)  # repeats: ties for argsort, duplicates for unique
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.integers(-1, 2, n)
    if np.dtype(dtype).kind in "fc" and n > 2:
        v[n // 2] = np.nan
    return v


@pytest.mark.parametrize(
    "dtype",
    [np.float64, np.float32, np.complex128, np.int64, np.bool_],
    ids=lambda d: np.dtype(d).name,
)
@pytest.mark.parametrize("n, b", [(0, 2), (1, 3), (11, 2), (16, 5)])
def test_sort_argsort_unique(grid, dtype, n, b):
    v = data(n, dtype, n)
    X = bm.from_numpy(v, block=b, grid=grid)
    for got, want in (
        (np.sort(X), np.sort(v)),
        (np.sort(X, stable=True), np.sort(v, stable=True)),
        (np.argsort(X, kind="stable"), np.argsort(v, kind="stable")),
        (np.unique(X), np.unique(v)),
    ):
        assert isinstance(got, bm.BlockCyclicArray) and got.ndim == 1
        assert got.block == (b,) and got.dtype == want.dtype
        np.testing.assert_array_equal(got.to_numpy(), want)
    got = np.unique(X, return_index=True, return_inverse=True, return_counts=True)
    want = np.unique(v, return_index=True, return_inverse=True, return_counts=True)
    assert len(got) == len(want) == 4
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g.to_numpy(), w.reshape(-1))


@pytest.mark.parametrize("n", [1, 2, 11])
def test_order_statistics(grid, n):
    v = np.random.default_rng(n).standard_normal(n)
    X = bm.from_numpy(v, block=3, grid=grid)
    assert np.median(X) == np.median(v)
    assert np.percentile(X, 30) == np.percentile(v, 30)
    np.testing.assert_array_equal(np.quantile(X, [0.1, 0.5]), np.quantile(v, [0.1, 0.5]))
    assert np.quantile(X, 0.7, method="nearest") == np.quantile(v, 0.7, method="nearest")


def test_sorting_refuses_matrices(grid):
    A = bm.from_numpy(np.ones((4, 3)), block=2, grid=grid)
    for fn in (np.sort, np.argsort, np.unique, np.median):
        with pytest.raises(ValueError, match="only vectors"):
            fn(A)
    X = bm.from_numpy(np.ones(4), block=2, grid=grid)
    with pytest.raises(np.exceptions.AxisError):
        np.sort(X, axis=1)
