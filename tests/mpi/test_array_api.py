"""NumPy 2's array-API names (np.linalg.matrix_norm, vector_norm, matrix_transpose, vecdot,
outer, diagonal, trace, matmul; np.matrix_transpose and the ufuncs np.vecdot, np.matvec,
np.vecmat) on BlockCyclicArrays, against NumPy on the same data (run on every rank under
mpiexec, on every grid of the rank count).

Sums and norms of ``k`` terms are held to ``4 k eps`` times the sum of the magnitudes; exact
results (transposes, diagonals, the maximum) to equality.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import blasmp_array as bm

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from blas3_reference import eps, random_matrix  # noqa: E402

pytestmark = pytest.mark.skipif(
    not hasattr(np.linalg, "matrix_norm"), reason="NumPy < 2 has no array-API names"
)

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def host(x):
    return x.to_numpy() if isinstance(x, bm.BlockCyclicArray) else np.asarray(x)


def close(got, want, dtype, terms, scale):
    bound = 4 * max(terms, 1) * eps(dtype) * np.asarray(scale) + np.finfo(np.float64).tiny
    assert np.shape(got) == np.shape(want)
    assert np.all(np.abs(np.asarray(got) - np.asarray(want)) <= bound), (got, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("m, n, nb", [(7, 5, 2), (1, 4, 3), (9, 9, 4)])
def test_array_api_names(grid, dtype, m, n, nb):
    rng = np.random.default_rng(m * n)
    a = random_matrix(rng, (m, n), dtype)
    x, y = random_matrix(rng, (m, 2), dtype).T
    A = bm.from_numpy(a, block=nb, grid=grid)
    X, Y = (bm.from_numpy(v, block=nb, grid=grid) for v in (x, y))

    for f in (np.matrix_transpose, np.linalg.matrix_transpose):
        t = f(A)
        assert isinstance(t, bm.BlockCyclicArray) and np.array_equal(t.to_numpy(), a.T)
    assert np.array_equal(host(np.linalg.diagonal(A, offset=1)), np.linalg.diagonal(a, offset=1))
    close(np.linalg.trace(A), np.linalg.trace(a), dtype, m, np.abs(np.diagonal(a)).sum())
    close(
        host(np.linalg.matmul(A.T, X)), np.linalg.matmul(a.T, x), dtype, m, np.abs(a.T) @ np.abs(x)
    )
    close(host(np.linalg.outer(X, Y)), np.linalg.outer(x, y), dtype, 1, np.abs(np.outer(x, y)))

    # vecdot: the conjugated inner product, of two vectors or along an axis of a matrix
    close(np.linalg.vecdot(X, Y), np.linalg.vecdot(x, y), dtype, m, np.abs(x) @ np.abs(y))
    close(np.vecdot(X, Y), np.vecdot(x, y), dtype, m, np.abs(x) @ np.abs(y))
    B = A * 2
    for axis in (0, 1, -1):
        close(
            host(np.vecdot(A, B, axis=axis)),
            np.vecdot(a, a * 2, axis=axis),
            dtype,
            max(m, n),
            (np.abs(a) * np.abs(2 * a)).sum(axis=axis),
        )
    if hasattr(np, "matvec"):
        close(host(np.matvec(A.T, X)), np.matvec(a.T, x), dtype, m, np.abs(a.T) @ np.abs(x))
        close(host(np.vecmat(X, A)), np.vecmat(x, a), dtype, m, np.abs(x) @ np.abs(a))

    mags = np.abs(a)
    for ord in ("fro", 1, np.inf, -np.inf, -1):
        close(
            np.linalg.matrix_norm(A, ord=ord),
            np.linalg.matrix_norm(a, ord=ord),
            dtype,
            m * n,
            mags.sum(),
        )
    assert np.linalg.matrix_norm(A, keepdims=True).shape == (1, 1)
    for ord in (2, 1, np.inf, -np.inf, 0, 3, 0.5):
        want = np.linalg.vector_norm(a, ord=ord)
        got = np.linalg.vector_norm(A, ord=ord)
        assert np.dtype(type(got)) == want.dtype, ord
        # ord=0 counts exactly; -inf is the least |a_ij|, whose complex abs rounds differently
        # on the device (CuPy's hypot) than in NumPy
        scale = want if ord != 0 else 0
        close(got, want, dtype, m * n, scale)
        close(
            np.linalg.vector_norm(X, ord=ord),
            np.linalg.vector_norm(x, ord=ord),
            dtype,
            m,
            np.linalg.vector_norm(x, ord=ord),
        )
    close(
        np.linalg.vector_norm(A, axis=(0, 1)),
        np.linalg.vector_norm(a, axis=(0, 1)),
        dtype,
        m * n,
        np.linalg.norm(a),
    )
    close(
        host(np.linalg.vector_norm(A, axis=0)),
        np.linalg.vector_norm(a, axis=0),
        dtype,
        m,
        np.linalg.vector_norm(a, axis=0),
    )
    assert np.linalg.vector_norm(A, keepdims=True).shape == (1, 1)


def test_array_api_bad_input(grid):
    A = bm.from_numpy(np.ones((4, 3)), block=2, grid=grid)
    X = bm.from_numpy(np.ones(4), block=2, grid=grid)
    with pytest.raises(ValueError, match="one-dimensional"):
        np.linalg.outer(A, X)
    with pytest.raises(ValueError, match="2-D"):
        np.linalg.matrix_transpose(X)
    with pytest.raises(ValueError, match="2-D"):
        np.linalg.matrix_norm(X)
    with pytest.raises(TypeError, match="axis= only"):
        np.vecdot(X, X, keepdims=True)
    if hasattr(np, "matvec"):
        with pytest.raises(ValueError, match="dimensions"):
            np.matvec(X, X)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=lambda d: np.dtype(d).name)
def test_numpy_spellings(grid, dtype):
    """np.swapaxes, np.permute_dims, np.count_nonzero and np.tensordot of matrices and
    vectors."""
    rng = np.random.default_rng(3)
    a, b = random_matrix(rng, (6, 5), dtype), random_matrix(rng, (6, 5), dtype)
    x = random_matrix(rng, (5, 1), dtype)[:, 0]
    a[a.real > 1] = 0
    A, B, X = (bm.from_numpy(v, block=2, grid=grid) for v in (a, b, x))
    assert np.array_equal(np.swapaxes(A, 0, 1).to_numpy(), a.T)
    assert np.array_equal(np.swapaxes(A, 1, 1).to_numpy(), a)
    if hasattr(np, "permute_dims"):
        assert np.array_equal(np.permute_dims(A, (1, 0)).to_numpy(), a.T)
    n = np.count_nonzero(A)
    assert n == np.count_nonzero(a) and np.dtype(type(n)) == np.intp
    assert np.array_equal(host(np.count_nonzero(A, axis=0)), np.count_nonzero(a, axis=0))
    for axes in (([0], [0]), ([1], [1]), 1 if False else ([0], [0])):
        got, want = host(np.tensordot(A, B, axes=axes)), np.tensordot(a, b, axes=axes)
        ka = a.shape[axes[0][0]]
        ta = a if axes[0][0] == 1 else a.T
        tb = b if axes[1][0] == 0 else b.T
        close(got, want, dtype, ka, np.abs(ta) @ np.abs(tb))
    close(
        host(np.tensordot(A, X, axes=1)),
        np.tensordot(a, x, axes=1),
        dtype,
        5,
        np.abs(a) @ np.abs(x),
    )
    close(
        np.tensordot(A, B, axes=2),
        np.tensordot(a, b, axes=2),
        dtype,
        30,
        (np.abs(a) * np.abs(b)).sum(),
    )
    close(
        np.tensordot(A, B.T, axes=([0, 1], [1, 0])),
        np.tensordot(a, b.T, axes=([0, 1], [1, 0])),
        dtype,
        30,
        (np.abs(a) * np.abs(b)).sum(),
    )
    if hasattr(np.linalg, "tensordot"):
        close(
            host(np.linalg.tensordot(A, X, axes=1)),
            np.tensordot(a, x, axes=1),
            dtype,
            5,
            np.abs(a) @ np.abs(x),
        )
    with pytest.raises(ValueError, match="not supported"):
        np.tensordot(A, B, axes=0)
    with pytest.raises(ValueError, match="shape-mismatch"):
        np.tensordot(A, B, axes=([1], [0]))
