"""Selection along one axis -- index arrays and boolean masks, ``np.take`` -- and assignment
through them, against NumPy on the same data (every rank builds the same arrays)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from mpi4py import MPI

import blasmp_array as bm

SHAPE = (11, 9)
BLOCK = (3, 2)


def _same_everywhere(value) -> bool:
    mine = repr(value)
    return all(x == mine for x in MPI.COMM_WORLD.allgather(mine))


def _matrix(grid, dtype=np.float64, shape=SHAPE, block=BLOCK, seed=1):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    a = a.astype(dtype)
    return bm.from_numpy(a, block=block, grid=grid), a


def _keys(a):
    m, n = a.shape
    rows = np.array([3, 0, m - 1, 3, -2])  # repeats and negative positions
    cols = [n - 1, 1]
    mask_r = np.arange(m) % 3 == 1
    mask_c = np.arange(n) % 2 == 0
    return [
        rows,
        [1, 5, 7],
        (rows, slice(None)),
        (slice(None), cols),
        (slice(2, 9), cols),
        (Ellipsis, cols),
        mask_r,
        (slice(None), mask_c),
        (rows, 4),  # an integer drops its axis: a vector
        (2, cols),
        np.array([], dtype=np.int64),
        a.real > 0.3,  # a boolean matrix: elements in row-major order
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.complex128, np.int64, np.bool_], ids=str)
def test_select_matches_numpy(grid, dtype):
    A, a = _matrix(grid, np.float64)
    A, a = (
        A.astype(dtype) if dtype != np.bool_ else A > 0,
        a.astype(dtype) if dtype != np.bool_ else a > 0,
    )
    for X, x in ((A, a), (A.T, a.T), (A.conj(), a.conj())):
        for key in _keys(x.astype(np.complex128).real):
            ref = x[key]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", bm.ViewCopyWarning)
                got = X[key]
            assert isinstance(got, bm.BlockCyclicArray) and got.shape == ref.shape, (key, got)
            assert got.dtype == ref.dtype
            np.testing.assert_array_equal(got.to_numpy(), ref)


def test_distributed_indices_and_masks(grid):
    A, a = _matrix(grid)
    x, xh = A[:, 2], a[:, 2]
    for key, ref in (
        (x > 0, xh[xh > 0]),
        (bm.from_numpy(np.array([4, 0, 4]), block=2, grid=grid), xh[[4, 0, 4]]),
    ):
        np.testing.assert_array_equal(x[key].to_numpy(), ref)
    np.testing.assert_array_equal(A[A[:, 0] > 0].to_numpy(), a[a[:, 0] > 0])
    np.testing.assert_array_equal(A[:, A[0] < 0].to_numpy(), a[:, a[0] < 0])
    np.testing.assert_array_equal(A[A > 0].to_numpy(), a[a > 0])
    for axis in (0, 1):
        idx = [2, 0, 1]
        np.testing.assert_array_equal(np.take(A, idx, axis=axis).to_numpy(), np.take(a, idx, axis))
    np.testing.assert_array_equal(np.take(x, [3, 1]).to_numpy(), np.take(xh, [3, 1]))
    with pytest.raises(ValueError, match="flattens"):
        np.take(A, [1])


def test_select_errors_are_numpys(grid):
    A, a = _matrix(grid)
    m, n = SHAPE
    for key, exc, match in (
        ([0, m], IndexError, "out of bounds for axis 0 with size 11"),
        ((slice(None), [-n - 1]), IndexError, "out of bounds for axis 1"),
        (np.ones(m - 1, bool), IndexError, "boolean index did not match"),
        ((slice(None), np.ones(n + 1, bool)), IndexError, "boolean index did not match"),
        (np.array([1.0]), IndexError, "integer"),
        (([0], [1]), IndexError, "two axes"),
        (np.zeros((2, 2), int), IndexError, "1-D index"),
    ):
        for op in ("get", "set"):
            with pytest.raises(exc, match=match) as e:
                if op == "get":
                    A[key]
                else:
                    A[key] = 1.0
            assert _same_everywhere(str(e.value))
    np.testing.assert_array_equal(A.to_numpy(), a)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=str)
def test_select_assign(grid, dtype):
    A, a = _matrix(grid, dtype)
    m, n = SHAPE
    rng = np.random.default_rng(5)
    A[[1, 4, 1]] = 2.0
    a[[1, 4, 1]] = 2.0
    A[:, [0, 7]] = np.arange(2.0)  # a replicated row, broadcast
    a[:, [0, 7]] = np.arange(2.0)
    v = rng.standard_normal((m, 3)).astype(dtype)
    A[:, [2, 5, 2]] = v  # repeated positions: the last wins
    a[:, [2, 5, 2]] = v
    A[np.arange(m) > 7] = -1.0
    a[np.arange(m) > 7] = -1.0
    B, b = _matrix(grid, dtype, shape=(3, n), block=(2, 3), seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bm.RedistributionWarning)
        A[[6, 0, 6]] = B
    a[[6, 0, 6]] = b
    A[A.real > 1.0] = 0.0
    a[a.real > 1.0] = 0.0
    sel = a.real < -0.5
    vals = np.arange(sel.sum(), dtype=dtype)
    A[A.real < -0.5] = vals
    a[sel] = vals
    A.T[[3]] = 5.0  # through the transposed view: column 3
    a.T[[3]] = 5.0
    np.testing.assert_array_equal(A.to_numpy(), a)
    x = A[:, 1]
    xh = a[:, 1].copy()
    x[x.real > 0] = 9.0  # writes into A's column
    xh[xh.real > 0] = 9.0
    np.testing.assert_array_equal(A.to_numpy()[:, 1], xh)
    with pytest.raises(ValueError, match="broadcast|fit|cannot assign"):
        A[[1, 2]] = np.ones((3, n))
