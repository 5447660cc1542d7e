"""Distributed linear least squares, lstsq (run on every rank under mpiexec).

Pass/fail follows LAPACK's least-squares tester (xDRVLS), in units of eps:

* ``m <= n`` (consistent systems): ``||b - A x||_1 / (max(m, n) ||A||_1 ||x||_1 eps) < 30``
  (xQRT16);
* ``m > n``: the residual is orthogonal to the range of ``A``:
  ``||r^H A||_1 / (max(m, n, k) ||A||_1 ||b||_1 eps) < 30`` (xQRT17, unscaled);
* ``m < n``: ``x`` is the minimum-norm solution, i.e. in the row space of ``A``:
  ``||x - A^H (A A^H)^{-1} A x|| / (||x|| eps max(m, n)) < 30`` (the role of xQRT14);

plus the residues against NumPy's, rank-deficient matrices raising ``LinAlgError`` naming the
column on every rank, bad inputs refused before any communication, inputs unchanged.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from mpi4py import MPI

import blasmp_array as bm
from blasmp_array.ops.lapack.qr import lstsq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from blas3_reference import DTYPES, eps, high, random_matrix  # noqa: E402
from conftest import cached_grid  # noqa: E402

THRESH = 30.0


def square_grid():
    return cached_grid(*bm.square_grid_shape(MPI.COMM_WORLD.Get_size()))


def norm1(x: np.ndarray) -> float:
    return float(np.abs(x).sum(axis=0).max()) if x.size else 0.0


def assert_lstsq(a, b, x, res, what: str) -> None:
    m, n = a.shape
    k = b.shape[1]
    e = eps(a.dtype)
    assert np.all(np.isfinite(x)), f"{what}: non-finite x"
    ah, bh, xh = high(a), high(b), high(x)
    r = bh - ah @ xh
    if m <= n:
        ratio = norm1(r) / (max(m, n) * norm1(a) * max(norm1(x), 1e-300) * e)
        assert ratio < THRESH, f"{what}: ||b - A x|| ratio {ratio:.3g}"
    else:
        ratio = norm1(r.conj().T @ ah) / (max(m, n, k) * norm1(a) * norm1(b) * e)
        assert ratio < THRESH, f"{what}: ||r^H A|| ratio {ratio:.3g}"
        ref = np.sum(np.abs(r.astype(np.complex128)) ** 2, axis=0)
        assert res.shape == (k,) and res.dtype == np.empty(0, a.dtype).real.dtype
        np.testing.assert_allclose(res, ref, rtol=100 * max(m, n) * e, atol=0)
    if m < n:
        aa = a.astype(np.complex128)
        proj = aa.conj().T @ np.linalg.solve(aa @ aa.conj().T, aa @ x.astype(np.complex128))
        ratio = np.linalg.norm(x - proj) / (np.linalg.norm(x) * e * max(m, n))
        assert ratio < THRESH, f"{what}: x is not in the row space of A ({ratio:.3g})"
    if m <= n:
        assert res.size == 0


def run_case(grid, dtype, m, n, k, nb, method="auto"):
    rng = np.random.default_rng(10 * m + n)
    a = random_matrix(rng, (m, n), dtype)
    b = random_matrix(rng, (m, k), dtype)
    A = bm.from_numpy(a, block=(nb, nb), grid=grid)
    B = bm.from_numpy(b, block=(nb, 2), grid=grid)
    X, res, rank, s = lstsq(A, B, method=method)
    assert rank == min(m, n) and s is None
    assert X.shape == (n, k) and X.grid is A.grid
    assert_lstsq(a, b, X.to_numpy(), res, f"{m}x{n} k={k} nb={nb} {method}")
    assert np.array_equal(A.to_numpy(), a) and np.array_equal(B.to_numpy(), b), "input modified"


# (m, n, k, block): tall (CholeskyQR), over-determined, square, under-determined (the QR of
# a^H: Householder), very wide (the QR of a^H: CholeskyQR)
CASES = [(48, 7, 3, 4), (30, 19, 2, 5), (17, 17, 1, 3), (11, 26, 2, 4), (9, 40, 3, 6)]
SAMPLE = [(dt, CASES[i % len(CASES)]) for i, dt in enumerate(DTYPES)]


@pytest.mark.parametrize(
    "dtype,case", SAMPLE, ids=[f"{np.dtype(d).name}-{c[0]}x{c[1]}" for d, c in SAMPLE]
)
def test_lstsq(grid, dtype, case):
    run_case(grid, dtype, *case)


@pytest.mark.parametrize("method", ["householder", "cholqr"])
def test_lstsq_forced_method(grid, method):
    run_case(grid, np.complex128, 36, 8, 2, 4, method)
    run_case(grid, np.float32, 9, 40, 2, 6, method)  # the QR of a^H


@pytest.mark.full_sweep
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES + [(64, 64, 4, 8), (1, 5, 1, 2), (70, 3, 5, 64)])
@pytest.mark.parametrize("method", ["auto", "householder"])
def test_lstsq_full(grid, dtype, case, method):
    run_case(grid, dtype, *case, method)


def test_rank_deficient(grid):
    """A dependent column (or, for m < n, row) raises LinAlgError naming it, on every rank
    (CholeskyQR breaks down there: the Householder fallback's R names it)."""
    method = "auto"
    rng = np.random.default_rng(3)
    a = random_matrix(rng, (40, 9), np.float64)
    a[:, 5] = a[:, 1] + 0.5 * a[:, 3]
    A = bm.from_numpy(a, block=(4, 4), grid=grid)
    B = bm.from_numpy(np.ones((40, 1)), block=(4, 1), grid=grid)
    with pytest.raises(np.linalg.LinAlgError, match="column 5 "):
        lstsq(A, B, method=method)
    w = random_matrix(rng, (7, 25), np.float64)
    w[4] = 2 * w[0] - w[2]
    W = bm.from_numpy(w, block=(3, 3), grid=grid)
    with pytest.raises(np.linalg.LinAlgError, match="row 4 "):
        lstsq(W, bm.from_numpy(np.ones((7, 2)), block=(3, 2), grid=grid), method=method)
    z = np.zeros((12, 3))
    with pytest.raises(np.linalg.LinAlgError, match="column 0 "):
        lstsq(bm.from_numpy(z, block=(3, 3), grid=grid), bm.from_numpy(np.ones((12, 1)), grid=grid))
    # the pooled buffers survive: a good problem after the failures
    run_case(grid, np.float64, 30, 6, 1, 4, method)


def test_cond():
    """``cond`` is the relative threshold of the rank test."""
    grid = square_grid()
    rng = np.random.default_rng(5)
    a = random_matrix(rng, (20, 4), np.float64) @ np.diag([1, 1, 1, 1e-9])
    A = bm.from_numpy(a, block=(4, 4), grid=grid)
    B = bm.from_numpy(np.ones((20, 1)), block=(4, 1), grid=grid)
    lstsq(A, B)  # 1e-9 > max(m, n) eps
    with pytest.raises(np.linalg.LinAlgError, match="column 3 "):
        lstsq(A, B, cond=1e-6)


def test_window_and_layouts(grid):
    """A window view of a (offsets inside a block) is read where it lies; b in another
    layout than a is redistributed."""
    rng = np.random.default_rng(9)
    big = random_matrix(rng, (50, 20), np.float64)
    P = bm.from_numpy(big, block=(6, 6), grid=grid)
    b = random_matrix(rng, (47, 2), np.float64)
    B = bm.from_numpy(b, block=(5, 1), grid=grid)
    for cols in ((2, 8), (1, 20)):
        X, res, _, _ = lstsq(P[3:, cols[0] : cols[1]], B)
        assert_lstsq(big[3:, cols[0] : cols[1]], b, X.to_numpy(), res, f"window {cols}")
    assert np.array_equal(P.to_numpy(), big)
    # b a window view too (checked for NaN where it lies), for a tall and a wide a, a NaN
    # outside the window ignored
    padded = np.vstack([np.full((1, 2), np.nan), b])
    Bw = bm.from_numpy(padded, block=(5, 1), grid=grid)[1:, :]
    X, res, _, _ = lstsq(P[3:, 2:8], Bw)
    assert_lstsq(big[3:, 2:8], b, X.to_numpy(), res, "window b")
    wide = np.ascontiguousarray(big[3:, :].T)  # 20 x 47
    W = bm.from_numpy(wide, block=(6, 6), grid=grid)
    X, res, _, _ = lstsq(W, Bw[:20, :])
    assert_lstsq(wide, b[:20], X.to_numpy(), res, "window b, wide a")
    bad = padded.copy()
    bad[5, 1] = np.inf
    with pytest.raises(ValueError, match="b does"):
        lstsq(P[3:, 2:8], bm.from_numpy(bad, block=(5, 1), grid=grid)[1:, :])


def test_zero_size():
    grid = square_grid()
    b = np.arange(6.0).reshape(3, 2)
    X, res, rank, s = lstsq(
        bm.from_numpy(np.zeros((3, 0)), block=(2, 2), grid=grid),
        bm.from_numpy(b, block=(2, 2), grid=grid),
    )
    assert X.shape == (0, 2) and rank == 0 and s is None
    np.testing.assert_allclose(res, np.sum(b**2, axis=0))
    X, res, rank, _ = lstsq(
        bm.from_numpy(np.zeros((0, 3)), block=(2, 2), grid=grid),
        bm.from_numpy(np.zeros((0, 2)), block=(2, 2), grid=grid),
    )
    assert X.shape == (3, 2) and res.size == 0 and np.all(X.to_numpy() == 0)


def test_bad_input():
    grid = square_grid()
    a = random_matrix(np.random.default_rng(2), (10, 4), np.float64)
    A = bm.from_numpy(a, block=(3, 3), grid=grid)
    b = np.ones((10, 2))
    B = bm.from_numpy(b, block=(3, 2), grid=grid)
    bad = b.copy()
    bad[4, 1] = np.nan
    with pytest.raises(ValueError, match="infs or NaNs"):
        lstsq(A, bm.from_numpy(bad, block=(3, 2), grid=grid))
    badA = a.copy()
    badA[0, 0] = np.inf
    with pytest.raises(ValueError, match="infs or NaNs"):
        lstsq(bm.from_numpy(badA, block=(3, 3), grid=grid), B)
    with pytest.raises(ValueError, match="rows"):
        lstsq(A, bm.from_numpy(np.ones((9, 2)), block=(3, 2), grid=grid))
    with pytest.raises(TypeError, match="must be a BlockCyclicArray, got ndarray"):
        lstsq(A, b[:, 0])
    with pytest.raises(ValueError, match="singular values"):
        lstsq(A, B, lapack_driver="gelsd")
    with pytest.raises(ValueError, match="cond"):
        lstsq(A, B, cond=-1.0)
    with pytest.raises(ValueError, match="method"):
        lstsq(A, B, method="svd")
