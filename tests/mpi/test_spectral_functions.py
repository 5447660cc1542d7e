"""The functions on top of the distributed SVD: np.linalg.norm (2, -2, 'nuc'), cond,
matrix_rank, pinv, np.linalg.lstsq and lstsq(lapack_driver='gelsd') (run on every rank under
mpiexec), against NumPy/SciPy on the gathered matrix.

Bounds in units of eps: norms and condition numbers relative ``60 max(m, n) eps`` (times the
condition number where it multiplies); ``pinv`` by the four Moore-Penrose conditions, each
``< 60 max(m, n) eps ||A|| ||X||``-scaled, and against NumPy; least squares by the distance
to NumPy's minimum-norm solution relative to ``60 max(m, n) eps kappa(A)``.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import scipy.linalg as sl
from mpi4py import MPI

import blasmp_array as bm

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from blas3_reference import eps, random_matrix  # noqa: E402
from conftest import cached_grid  # noqa: E402

THRESH = 60.0


def square_grid():
    return cached_grid(*bm.square_grid_shape(MPI.COMM_WORLD.Get_size()))


def low_rank(m: int, n: int, r: int, dtype, seed: int = 0) -> np.ndarray:
    """A rank-``r`` ``m x n`` matrix with singular values from 2 to 1 (well separated from
    the zeros)."""
    rng = np.random.default_rng(seed)
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    u = np.linalg.qr(random_matrix(rng, (m, m), wide))[0][:, :r]
    v = np.linalg.qr(random_matrix(rng, (n, n), wide))[0][:, :r]
    return ((u * np.linspace(2, 1, r)) @ v.conj().T).astype(dtype)


def close(x: float, ref: float, tol: float, what: str) -> None:
    assert abs(x - ref) <= tol * max(abs(ref), 1e-300), f"{what}: {x!r} vs {ref!r}"


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_norms_cond_rank(grid, dtype):
    rng = np.random.default_rng(11)
    for m, n, nb in ((17, 12, 4), (9, 21, 5)):
        a = random_matrix(rng, (m, n), dtype)
        A = bm.from_numpy(a, block=nb, grid=grid)
        a64 = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
        tol = THRESH * max(m, n) * eps(dtype)
        s = np.linalg.svd(a64, compute_uv=False)
        for o in (2, -2, "nuc"):
            r = np.linalg.norm(A, o)
            assert r.dtype == np.finfo(dtype).dtype
            close(float(r), float(np.linalg.norm(a64, o)), tol * s[0] / s[-1], f"norm {o}")
        assert np.linalg.norm(A, 2, keepdims=True).shape == (1, 1)
        close(float(np.linalg.norm(A, "fro")), float(np.linalg.norm(a64, "fro")), tol, "fro")
        for p in (None, 2, -2):
            close(
                float(np.linalg.cond(A, p)),
                float(np.linalg.cond(a64, p)),
                tol * s[0] / s[-1],
                f"cond {p}",
            )
        assert np.linalg.matrix_rank(A) == min(m, n)
    sq = random_matrix(rng, (10, 10), dtype)
    SQ = bm.from_numpy(sq, block=3, grid=grid)
    sq64 = sq.astype(np.complex128 if sq.dtype.kind == "c" else np.float64)
    kappa = float(np.linalg.cond(sq64))
    for p in (1, -1, np.inf, -np.inf, "fro"):
        close(
            float(np.linalg.cond(SQ, p)),
            float(np.linalg.cond(sq64, p)),
            THRESH * 10 * eps(dtype) * kappa,
            f"cond {p}",
        )


def test_rank_deficient_rank_and_cond():
    g = square_grid()
    a = low_rank(26, 19, 7, np.float64, seed=2)
    A = bm.from_numpy(a, block=4, grid=g)
    assert np.linalg.matrix_rank(A) == np.linalg.matrix_rank(a) == 7
    assert np.linalg.matrix_rank(A, tol=1.5) == np.linalg.matrix_rank(a, tol=1.5)
    assert np.linalg.matrix_rank(A, rtol=0.6) == np.linalg.matrix_rank(a, rtol=0.6)
    assert np.linalg.matrix_rank(A, hermitian=False) == 7
    with pytest.raises(ValueError, match="both"):
        np.linalg.matrix_rank(A, tol=1.0, rtol=0.1)
    assert np.linalg.cond(A) > 1e14
    z = bm.from_numpy(np.zeros((6, 6)), block=2, grid=g)
    assert np.linalg.matrix_rank(z) == 0
    assert np.linalg.cond(z, 1) == np.inf
    v = bm.from_numpy(np.arange(5.0), block=2, grid=g)
    assert np.linalg.matrix_rank(v) == 1
    nan = a.copy()
    nan[3, 3] = np.nan
    N = bm.from_numpy(nan, block=4, grid=g)
    for call in (
        lambda: np.linalg.norm(N, 2),
        lambda: np.linalg.cond(N),
        lambda: np.linalg.matrix_rank(N),
        lambda: np.linalg.pinv(N),
        lambda: np.linalg.svd(N),
    ):
        with pytest.raises(np.linalg.LinAlgError, match="infs or NaNs"):  # as NumPy's
            call()


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_pinv(grid, dtype):
    for m, n, r, nb in ((23, 15, 15, 4), (14, 25, 9, 5)):
        a = low_rank(m, n, r, dtype, seed=m)
        A = bm.from_numpy(a, block=nb, grid=grid)
        X = np.linalg.pinv(A, rtol=None)  # max(m, n) eps: drops the rounding's singular values
        assert X.shape == (n, m) and X.grid.same_as(grid)
        x = X.to_numpy().astype(np.complex128)
        ah = a.astype(np.complex128)
        scale = THRESH * max(m, n) * eps(dtype)
        na, nx = np.linalg.norm(ah, 2), np.linalg.norm(x, 2)
        assert np.linalg.norm(ah @ x @ ah - ah, 2) <= scale * na * nx * na, "A X A = A"
        assert np.linalg.norm(x @ ah @ x - x, 2) <= scale * nx * na * nx, "X A X = X"
        ax, xa = ah @ x, x @ ah
        assert np.linalg.norm(ax - ax.conj().T, 2) <= scale * na * nx, "(A X)^H = A X"
        assert np.linalg.norm(xa - xa.conj().T, 2) <= scale * na * nx, "(X A)^H = X A"
        ref = np.linalg.pinv(ah, rtol=max(m, n) * eps(dtype))
        assert np.linalg.norm(x - ref, 2) <= scale * nx * 2, "pinv vs NumPy"
    a = low_rank(12, 12, 12, np.float64)
    A = bm.from_numpy(a, block=5, grid=grid)
    # rcond above the smallest singular value (1) over the largest (2): only s = 2 kept
    x = np.linalg.pinv(A, rcond=0.99).to_numpy()
    np.testing.assert_allclose(x, np.linalg.pinv(a, rcond=0.99), atol=1e-12)
    np.testing.assert_allclose(np.linalg.pinv(A, rtol=0.99).to_numpy(), x, atol=1e-12)
    with pytest.raises(ValueError, match="both"):
        np.linalg.pinv(A, rcond=0.1, rtol=0.1)


def lstsq_close(x: np.ndarray, ref: np.ndarray, a: np.ndarray, what: str) -> None:
    s = np.linalg.svd(a.astype(np.complex128), compute_uv=False)
    s = s[s > s[0] * 1e-10]
    tol = THRESH * max(a.shape) * eps(a.dtype) * (s[0] / s[-1]) * max(np.abs(ref).max(), 1e-300)
    assert np.abs(x - ref).max() <= tol, f"{what}: off by {np.abs(x - ref).max():.3g} > {tol:.3g}"


def test_lstsq_minimum_norm():
    g = square_grid()
    rng = np.random.default_rng(4)
    for dtype in (np.float64, np.complex128):
        for m, n, r, nb in ((28, 17, 9, 4), (13, 26, 8, 5)):
            a = low_rank(m, n, r, dtype, seed=n)
            b = random_matrix(rng, (m, 3), dtype)
            A = bm.from_numpy(a, block=nb, grid=g)
            B = bm.from_numpy(b, block=nb, grid=g)
            x, res, rank, s = np.linalg.lstsq(A, B)
            xr, resr, rankr, sr = np.linalg.lstsq(a, b)
            assert rank == rankr == r and res.shape == resr.shape == (0,)
            lstsq_close(x.to_numpy(), xr, a, f"np.linalg.lstsq {m}x{n} {np.dtype(dtype).name}")
            np.testing.assert_allclose(s.to_numpy(), sr, atol=1e-12 * sr[0])
            # the tail singular values sit near eps * s1, gelsd's default cutoff: an explicit
            # cond keeps the rank a property of the matrix, not of the eigensolver's rounding
            x, res, rank, s = bm.linalg.lstsq(A, B, lapack_driver="gelsd", cond=1e-10)
            xr, resr, rankr, sr = sl.lstsq(a, b, lapack_driver="gelsd", cond=1e-10)
            # SciPy's documented rule (some versions return residues for any rank when m > n)
            assert rank == rankr == r and res.shape == ((3,) if m > n and r == n else (0,))
            lstsq_close(x.to_numpy(), xr, a, f"gelsd {m}x{n}")
            x, _, rank, _ = bm.linalg.lstsq(A, B, lapack_driver="gelss", cond=0.6)
            xr, _, rankr, _ = sl.lstsq(a, b, lapack_driver="gelss", cond=0.6)
            assert rank == rankr
            lstsq_close(x.to_numpy(), xr, a, "gelss cond=0.6")


def test_lstsq_full_rank_residues_and_vectors():
    g = square_grid()
    rng = np.random.default_rng(9)
    a = random_matrix(rng, (30, 12), np.float32)
    b = random_matrix(rng, (30, 2), np.float32)
    A = bm.from_numpy(a, block=4, grid=g)
    B = bm.from_numpy(b, block=4, grid=g)
    x, res, rank, s = np.linalg.lstsq(A, B, rcond=None)
    xr, resr, rankr, _ = np.linalg.lstsq(a.astype(np.float64), b.astype(np.float64))
    assert rank == 12 and res.dtype == np.float32
    lstsq_close(x.to_numpy(), xr, a, "float32")
    np.testing.assert_allclose(res, resr, rtol=THRESH * 30 * eps(np.float32) * 10)
    bv = bm.from_numpy(b[:, 0], block=4, grid=g)
    x, res, rank, s = np.linalg.lstsq(A, bv)
    assert x.ndim == 1 and x.shape == (12,) and res.shape == (1,)
    lstsq_close(x.to_numpy(), xr[:, 0], a, "vector b")
    x, res, rank, s = bm.linalg.lstsq(A, bv, lapack_driver="gelsd")
    assert x.ndim == 1
    x, res, rank, s = np.linalg.lstsq(A, b[:, 0])  # a NumPy vector given on every rank
    assert x.ndim == 1 and res.shape == (1,)
    lstsq_close(x.to_numpy(), xr[:, 0], a, "NumPy vector b")
    x, res, rank, s = np.linalg.lstsq(A, b)
    lstsq_close(x.to_numpy(), xr, a, "NumPy matrix b")
    x, res, rank, s = bm.linalg.lstsq(A, B)  # QR (the default driver): unchanged
    assert s is None and rank == 12
    with pytest.raises(ValueError, match="lapack_driver"):
        bm.linalg.lstsq(A, B, lapack_driver="gelsx")
    bad = b.copy()
    bad[0, 0] = np.inf
    with pytest.raises(ValueError):
        np.linalg.lstsq(A, bm.from_numpy(bad, block=4, grid=g))
    with pytest.raises(ValueError, match="rows"):
        np.linalg.lstsq(A, bm.from_numpy(b[:20], block=4, grid=g))
