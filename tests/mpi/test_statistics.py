"""np.nansum, np.nanmean, np.nanmax, np.nanmin, np.ptp, np.average, A.dot and divmod on
BlockCyclicArrays (run on every rank under mpiexec, on every grid of the rank count), against
NumPy on the same data. Sums of ``k`` terms are held to ``4 k eps`` times the sum of the
magnitudes; maxima, minima and counts to equality."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import blasmp_array as bm


def host(x):
    return x.to_numpy() if isinstance(x, bm.BlockCyclicArray) else np.asarray(x)


def close(got, want, terms, scale):
    bound = 4 * max(terms, 1) * np.finfo(np.float64).eps * np.asarray(scale)
    got, want = np.asarray(host(got)), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    same_nan = np.isnan(got) == np.isnan(want)
    assert same_nan.all() and np.all(np.abs(np.nan_to_num(got - want)) <= bound), (got, want)


@pytest.mark.parametrize("m, n, b", [(7, 5, 2), (4, 9, 3)])
def test_nan_reductions_ptp_average(grid, m, n, b):
    rng = np.random.default_rng(m * n)
    a = rng.standard_normal((m, n))
    a[rng.random((m, n)) < 0.3] = np.nan
    a[:, 1] = np.nan  # an all-NaN column
    A = bm.from_numpy(a, block=b, grid=grid)
    mag = np.nansum(np.abs(a))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's and ours: the all-NaN slice
        for axis in (None, 0, 1):
            close(np.nansum(A, axis=axis), np.nansum(a, axis=axis), m * n, mag)
            close(np.nanmean(A, axis=axis), np.nanmean(a, axis=axis), m * n, mag)
            for fn in (np.nanmax, np.nanmin):
                close(fn(A, axis=axis), fn(a, axis=axis), 0, 0)
        close(np.nansum(A, axis=0, keepdims=True), np.nansum(a, axis=0, keepdims=True), m, mag)
    allnan = bm.from_numpy(np.full((3, 3), np.nan), block=2, grid=grid)
    with pytest.warns(RuntimeWarning, match="All-NaN"):
        assert np.isnan(np.nanmax(allnan))
    g = np.nan_to_num(a)
    G = bm.from_numpy(g, block=b, grid=grid)
    w = rng.random((m, n))
    W = bm.from_numpy(w, block=b, grid=grid)
    for axis in (None, 0, 1):
        close(np.ptp(G, axis=axis), np.ptp(g, axis=axis), 0, 0)
        close(np.average(G, axis=axis), np.average(g, axis=axis), m * n, np.abs(g).sum())
        got, want = (
            np.average(G, axis=axis, weights=W, returned=True),
            np.average(g, axis=axis, weights=w, returned=True),
        )
        close(
            got[0], want[0], 2 * m * n, np.abs(g).sum() * w.sum() / np.min(np.atleast_1d(want[1]))
        )
        close(got[1], want[1], m * n, w.sum())
    avg, count = np.average(G, axis=1, returned=True)
    close(count, np.average(g, axis=1, returned=True)[1], 0, 0)
    with pytest.raises(TypeError, match="weights"):
        np.average(G, weights=bm.from_numpy(w[:, :2].copy(), block=b, grid=grid))


def test_dot_method_and_divmod(grid):
    a = np.arange(20.0).reshape(4, 5) - 7
    x = np.arange(5.0)
    A = bm.from_numpy(a, block=2, grid=grid)
    X = bm.from_numpy(x, block=2, grid=grid)
    assert np.array_equal(A.dot(X).to_numpy(), a.dot(x))
    assert np.array_equal(A.T.dot(A).to_numpy(), a.T.dot(a))
    assert X.dot(X) == x.dot(x)
    q, r = divmod(A, 3)
    assert np.array_equal(q.to_numpy(), a // 3) and np.array_equal(r.to_numpy(), a % 3)
    q, r = np.divmod(A, A + 10)
    assert np.array_equal(q.to_numpy(), a // (a + 10)) and np.array_equal(
        r.to_numpy(), a % (a + 10)
    )
