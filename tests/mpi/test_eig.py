"""The nonsymmetric eigenproblem: np.linalg.eig/eigvals and bm.linalg.eig/eigvals (run on every
rank under mpiexec).

Pass/fail follows LAPACK's nonsymmetric eigensolver tester (xDRVEV), threshold 60: the residual
``||A V - V diag(w)||_1 / (||A||_1 n eps)``, unit-norm eigenvectors ``| ||v_i||_2 - 1 | / (n eps)``,
and the eigenvalues against LAPACK's (``numpy.linalg.eigvals`` of the gathered matrix), each
within its condition number times ``n eps ||A||_1`` (``cond_i = 1 / |y_i^H x_i|`` from SciPy's
left and right eigenvectors)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import scipy.linalg

import blasmp_array as bm

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from blas3_reference import eps, high  # noqa: E402

THRESH = 60.0


def _matrix(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((n, n))
    return a.astype(dtype)


def _assert_eig(a, w, v, what):
    n = a.shape[0]
    e = eps(a.dtype)
    ah = high(a)
    anorm = float(np.abs(ah).sum(axis=0).max())
    wide = np.complex128
    ref, yl, xr = scipy.linalg.eig(a.astype(wide), left=True, right=True)
    cond = 1 / np.maximum(np.abs(np.sum(yl.conj() * xr, axis=0)), np.finfo(float).tiny)
    # match each computed eigenvalue with the nearest reference one (LAPACK's order may differ
    # with the threads of the gathered call)
    idx = np.argmin(np.abs(w[:, None] - ref[None, :]), axis=1)
    assert np.unique(idx).size == n, f"{what}: eigenvalues do not match LAPACK's one to one"
    err = np.abs(w - ref[idx]) / (n * e * anorm * cond[idx])
    assert err.max() < THRESH, f"{what}: |w - w_lapack| / (cond n eps ||A||) = {err.max():.3g}"
    if v is None:
        return
    vh = high(v)
    res = float(np.abs(ah @ vh - vh * high(w)).sum(axis=0).max()) / (anorm * n * e)
    assert res < THRESH, f"{what}: ||AV - VW|| / (||A|| n eps) = {res:.3g}"
    norms = np.linalg.norm(vh, axis=0)
    assert np.abs(norms - 1).max() / (n * e) < THRESH, f"{what}: eigenvectors not unit norm"


@pytest.mark.parametrize(
    "dtype", [np.float64, np.float32, np.complex128, np.complex64], ids=lambda d: np.dtype(d).name
)
@pytest.mark.parametrize("n,nb", [(13, 4), (7, 8), (1, 3)])
def test_eig_matches_lapack(grid, dtype, n, nb):
    a = _matrix(n, dtype, seed=n)
    A = bm.from_numpy(a, block=(nb, nb), grid=grid)
    w, V = np.linalg.eig(A)
    assert isinstance(w, bm.BlockCyclicArray) and w.ndim == 1 and w.shape == (n,)
    assert V.shape == (n, n) and V.grid is grid
    wh, vh = w.to_numpy(), V.to_numpy()
    want_w, want_v = np.linalg.eig(a)
    assert wh.dtype == want_w.dtype and vh.dtype == want_v.dtype  # NumPy's real-or-complex rule
    _assert_eig(a, wh, vh, "np.linalg.eig")
    _assert_eig(a, np.linalg.eigvals(A).to_numpy(), None, "np.linalg.eigvals")
    ws, vs = bm.linalg.eig(A)
    assert ws.dtype.kind == "c"  # SciPy's: complex eigenvalues always
    _assert_eig(a, ws.to_numpy(), vs.to_numpy(), "bm.linalg.eig")
    assert bm.linalg.eigvals(A).dtype.kind == "c"
    assert np.array_equal(A.to_numpy(), a), "input modified"


def test_real_spectrum_follows_numpy(grid):
    """A real spectrum comes back with the dtypes NumPy's own eig gives for it (real up to
    NumPy 2.4, whatever the installed NumPy's rule is), and the right values."""
    rng = np.random.default_rng(5)
    # a permuted triangular matrix: LAPACK finds its spectrum (1..11) exactly real
    t = np.triu(rng.standard_normal((11, 11)), 1) + np.diag(np.arange(1.0, 12.0))
    p = rng.permutation(11)
    a = t[p][:, p]
    want_w, want_v = np.linalg.eig(a)
    A = bm.from_numpy(a, block=3, grid=grid)
    w, V = np.linalg.eig(A)
    assert w.dtype == want_w.dtype and V.dtype == want_v.dtype
    _assert_eig(a, w.to_numpy(), V.to_numpy(), "real spectrum")
    np.testing.assert_allclose(np.sort(w.to_numpy().real), np.arange(1.0, 12.0), rtol=1e-12)
    assert np.all(w.to_numpy().imag == 0)


def test_views_and_integers(grid):
    a = _matrix(12, np.float64, seed=3)
    A = bm.from_numpy(a, block=4, grid=grid)
    win = A[4:12, 4:12]
    _assert_eig(a[4:12, 4:12], np.linalg.eigvals(win).to_numpy(), None, "window view")
    w, V = np.linalg.eig(A.T)
    _assert_eig(a.T.copy(), w.to_numpy(), V.to_numpy(), "transposed view")
    ai = np.arange(16).reshape(4, 4) % 5
    Ai = bm.from_numpy(ai, block=2, grid=grid)
    _assert_eig(ai.astype(np.float64), np.linalg.eigvals(Ai).to_numpy(), None, "integers")


def test_errors(grid):
    A = bm.from_numpy(np.eye(6), block=2, grid=grid)
    R = bm.from_numpy(np.ones((6, 4)), block=2, grid=grid)
    for fn in (np.linalg.eig, np.linalg.eigvals, bm.linalg.eig, bm.linalg.eigvals):
        with pytest.raises(np.linalg.LinAlgError, match="square"):
            fn(R)
    bad = np.eye(6)
    bad[4, 1] = np.nan
    B = bm.from_numpy(bad, block=2, grid=grid)
    with pytest.raises(np.linalg.LinAlgError, match="inf|NaN|finite"):
        np.linalg.eig(B)
    with pytest.raises(ValueError, match="inf|NaN|finite"):
        bm.linalg.eigvals(B)
    # unchecked, NumPy's LAPACK call on process 0 refuses it: the same error on every rank
    with pytest.raises(np.linalg.LinAlgError, match="inf|NaN"):
        bm.linalg.eigvals(B, check_finite=False)
    with pytest.raises(NotImplementedError, match="generalized"):
        bm.linalg.eig(A, A)
    with pytest.raises(NotImplementedError, match="left"):
        bm.linalg.eig(A, left=True)
    with pytest.raises(NotImplementedError, match="homogeneous"):
        bm.linalg.eigvals(A, homogeneous_eigvals=True)
    with pytest.raises(TypeError, match="BlockCyclicArray"):
        bm.linalg.eig(np.eye(3))
