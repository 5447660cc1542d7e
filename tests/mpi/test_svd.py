"""Distributed SVD: svd, svdvals, np.linalg.svd and np.linalg.svdvals (run on every rank under
mpiexec).

Pass/fail follows LAPACK's SVD tester (xCHKBD/xDRVBD), in units of eps:

* the decomposition: ``||A - U diag(s) V^H||_1 / (||A||_1 max(m, n) eps) < 60``;
* orthogonality: ``||I - U^H U||_1 / (m eps) < 60`` and the same for ``V``;
* the singular values: within ``60 max(m, n) eps ||A||_2`` of LAPACK's (NumPy on the gathered
  matrix, in float64), descending, non-negative.

Every fresh array is NaN-poisoned (``tests/mpi/conftest.py``), so an element left unwritten
fails the bounds; inputs are checked unchanged. The matrices include graded spectra, tight
clusters, repeated and zero singular values (rank-deficient).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from mpi4py import MPI

import blasmp_array as bm
from blasmp_array import creation
from blasmp_array.ops.lapack import svd as svd_mod
from blasmp_array.ops.lapack.svd import svd, svdvals

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from blas3_reference import DTYPES, eps, high, random_matrix  # noqa: E402
from conftest import cached_grid  # noqa: E402

THRESH = 60.0


def square_grid():
    return cached_grid(*bm.square_grid_shape(MPI.COMM_WORLD.Get_size()))


def norm1(x: np.ndarray) -> float:
    return float(np.abs(x).sum(axis=0).max()) if x.size else 0.0


def check_values(a: np.ndarray, s: np.ndarray, what: str) -> None:
    m, n = a.shape
    ref = np.linalg.svd(
        a.astype(np.complex128 if a.dtype.kind == "c" else np.float64), compute_uv=False
    )
    assert s.shape == ref.shape, f"{what}: {s.shape} singular values, want {ref.shape}"
    assert np.all(np.isfinite(s)), f"{what}: non-finite singular values"
    assert np.all(np.diff(s) <= 0) and np.all(s >= 0), f"{what}: not descending / negative"
    bound = THRESH * max(m, n) * eps(a.dtype) * max(float(ref[0]) if ref.size else 0.0, 1e-300)
    err = float(np.abs(s - ref).max()) if s.size else 0.0
    assert err <= bound, f"{what}: singular values off by {err:.3g} > {bound:.3g}"


def check_svd(a: np.ndarray, u: np.ndarray, s: np.ndarray, vh: np.ndarray, full: bool, what: str):
    m, n = a.shape
    k = min(m, n)
    assert u.shape == ((m, m) if full else (m, k)), f"{what}: U shape {u.shape}"
    assert vh.shape == ((n, n) if full else (k, n)), f"{what}: Vh shape {vh.shape}"
    assert np.all(np.isfinite(u)) and np.all(np.isfinite(vh)), f"{what}: non-finite vectors"
    check_values(a, s, what)
    e = eps(a.dtype)
    uh, vhh = high(u), high(vh)
    rec = (uh[:, :k] * high(s)) @ vhh[:k]
    anorm = max(norm1(a), 1e-300)
    res = norm1(high(a) - rec) / (anorm * max(m, n) * e)
    assert res < THRESH, f"{what}: ||A - U S V^H|| / (||A|| max(m,n) eps) = {res:.3g}"
    ou = norm1(np.eye(u.shape[1]) - uh.conj().T @ uh) / (m * e)
    ov = norm1(np.eye(vh.shape[0]) - vhh @ vhh.conj().T) / (n * e)
    assert ou < THRESH, f"{what}: ||I - U^H U|| / (m eps) = {ou:.3g}"
    assert ov < THRESH, f"{what}: ||I - V^H V|| / (n eps) = {ov:.3g}"


def with_values(m: int, n: int, s: np.ndarray, dtype, seed: int = 0) -> np.ndarray:
    """``U diag(s) V^H`` with random orthonormal ``U``, ``V`` (the same on every rank)."""
    rng = np.random.default_rng(seed)
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    u = np.linalg.qr(random_matrix(rng, (m, m), wide))[0][:, : s.size]
    v = np.linalg.qr(random_matrix(rng, (n, n), wide))[0][:, : s.size]
    return ((u * s) @ v.conj().T).astype(dtype)


def run(a: np.ndarray, block, grid, full: bool, method: str, what: str, driver="gesdd"):
    A = bm.from_numpy(a, block=block, grid=grid)
    U, S, Vh = svd(A, full_matrices=full, method=method, lapack_driver=driver)
    assert S.ndim == 1 and S.dtype == np.finfo(a.dtype).dtype
    assert U.grid.same_as(grid) and Vh.grid.same_as(grid)
    check_svd(a, U.to_numpy(), S.to_numpy(), Vh.to_numpy(), full, what)
    s2 = svd(A, compute_uv=False, method=method).to_numpy()
    check_values(a, s2, what + " compute_uv=False")
    np.testing.assert_array_equal(A.to_numpy(), a)  # input unchanged


# (m, n, block): square ragged, tall (QR route), mildly tall, wide, n inside one block
SHAPES = [(24, 24, 5), (37, 14, 4), (20, 15, 4), (13, 29, 6), (9, 7, 16)]


@pytest.mark.parametrize("method", ["auto", "band", "polar"])
@pytest.mark.parametrize("m,n,nb", SHAPES)
def test_svd_shapes(grid, m, n, nb, method):
    if method == "band" and (m, n) in ((20, 15), (9, 7)):
        return  # the band route's layouts are covered by the other shapes (time at 6 ranks)
    dtypes = [np.float64]
    if grid.shape == bm.square_grid_shape(grid.size):  # band: the slow route, two dtypes
        dtypes = DTYPES if method == "auto" else [np.float32, np.complex128]
    for i, dtype in enumerate(dtypes):
        rng = np.random.default_rng(m * 31 + n + i)
        a = random_matrix(rng, (m, n), dtype)
        run(
            a,
            nb,
            grid,
            full=(i + m) % 2 == 0 and (method != "polar" or m == n),  # polar: thin factors
            method=method,
            what=f"{m}x{n} nb={nb} {np.dtype(dtype).name} {method}",
        )


@pytest.mark.parametrize("route", ["host", "device"])
def test_gathered_routes_move_by_either_transport(grid, monkeypatch, route):
    """The gathered SVD (``method='gather'``, the polar route on several processes, and the
    band route's band) takes the matrix to process 0 and the factors back by either route of
    ``creation.ROUTE``: host
    MPI, or the one-sided exchange in row panels from and to the root's device (one row per
    panel here, so many exchanges)."""
    monkeypatch.setattr(creation, "PANEL_BYTES", 8)
    monkeypatch.setitem(creation.ROUTE, grid.backend.name, route)
    for i, (m, n, nb, dtype, full, method) in enumerate(
        [
            (17, 11, 4, np.float64, True, "gather"),
            (11, 17, 3, np.complex128, False, "gather"),
            (13, 13, 4, np.float32, False, "polar"),
            (14, 14, 3, np.complex64, True, "band"),  # the band's factors moved the same way
        ]
    ):
        a = random_matrix(np.random.default_rng(i), (m, n), dtype)
        run(a, nb, grid, full, method, f"{route} {m}x{n} {np.dtype(dtype).name} {method}")
    a = random_matrix(np.random.default_rng(7), (9, 14), np.float64)
    A = bm.from_numpy(a, block=4, grid=grid)
    check_values(a.T, svd(A.T, compute_uv=False, method="gather").to_numpy(), f"{route} A.T")


SPECTRA = {
    "graded": lambda k: np.logspace(0, -12, k),
    "cluster": lambda k: 1.0 + 1e-12 * np.arange(k),
    "repeated": lambda k: np.repeat([3.0, 1.0, 0.5], -(-k // 3))[:k],
    "rank-deficient": lambda k: np.concatenate([np.linspace(2, 1, k - k // 3), np.zeros(k // 3)]),
}


@pytest.mark.parametrize("kind", list(SPECTRA))
@pytest.mark.parametrize("method", ["auto", "band", "polar"])
def test_svd_spectra(kind, method):
    g = square_grid()
    for m, n, nb in ((30, 30, 8), (41, 18, 5))[: 1 if method == "band" else 2]:
        k = min(m, n)
        a = with_values(m, n, SPECTRA[kind](k), np.float64, seed=k)
        run(a, nb, g, full=m == n, method=method, what=f"{kind} {m}x{n} {method}")


@pytest.mark.parametrize("m,n,full", [(24, 24, True), (26, 20, False), (20, 26, False)])
def test_auto_takes_the_polar_route_from_the_backends_order(monkeypatch, m, n, full):
    """``method='auto'`` runs the polar route from ``Backend.polar_svd_n`` (the GPU's
    crossover) for the factors it gives, and LAPACK's below it, for tall matrices and for
    the full factors of a non-square one."""
    g = square_grid()
    calls = []
    real = svd_mod.svd_polar
    monkeypatch.setattr(svd_mod, "svd_polar", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(g.backend, "polar_svd_n", 16)
    a = random_matrix(np.random.default_rng(m + n), (m, n), np.float64)
    run(a, 5, g, full=full, method="auto", what=f"auto polar {m}x{n}")
    assert g.comm.allreduce(len(calls)) == 2  # the factors and the values, once each
    A = bm.from_numpy(a, block=5, grid=g)
    for skip in (
        lambda: svd(A[:, :11]),  # tall: the QR route
        lambda: svd(A[:15, :15]),  # below polar_svd_n
        lambda: svd(A, full_matrices=True) if m != n else None,  # the full factors
    ):
        calls.clear()
        skip()
        assert g.comm.allreduce(len(calls)) == 0


def test_band_values_dense_route():
    """A band wider than JW_MAX_BAND: the band's values by LAPACK's dense SVD."""
    g = square_grid()
    nb = svd_mod.JW_MAX_BAND + 3
    a = random_matrix(np.random.default_rng(7), (2 * nb + 5, 2 * nb + 5), np.complex128)
    A = bm.from_numpy(a, block=nb, grid=g)
    check_values(a, svd(A, compute_uv=False, method="band").to_numpy(), "dense band values")


def test_views_and_integers():
    g = square_grid()
    rng = np.random.default_rng(3)
    p = random_matrix(rng, (31, 27), np.float64)
    P = bm.from_numpy(p, block=4, grid=g)
    for view, ref in ((P[3:25, 2:20], p[3:25, 2:20]), (P.T, p.T), (P[4:, 8:].H, p[4:, 8:].T)):
        U, S, Vh = svd(view, full_matrices=False)
        check_svd(ref, U.to_numpy(), S.to_numpy(), Vh.to_numpy(), False, f"view {ref.shape}")
    c = random_matrix(rng, (12, 12), np.complex128)
    C = bm.from_numpy(c, block=5, grid=g)
    U, S, Vh = svd(C.H, method="band")
    check_svd(c.conj().T, U.to_numpy(), S.to_numpy(), Vh.to_numpy(), True, "A.H band")
    i = rng.integers(-5, 5, (15, 11))
    r = np.linalg.svd(bm.from_numpy(i, block=4, grid=g), full_matrices=False)
    assert r.U.dtype == np.float64
    check_svd(i.astype(np.float64), r.U.to_numpy(), r.S.to_numpy(), r.Vh.to_numpy(), False, "int")


def test_numpy_api_and_drivers():
    g = square_grid()
    a = random_matrix(np.random.default_rng(5), (19, 23), np.complex64)
    A = bm.from_numpy(a, block=6, grid=g)
    r = np.linalg.svd(A)
    assert type(r).__name__ == "SVDResult"
    check_svd(a, r.U.to_numpy(), r.S.to_numpy(), r.Vh.to_numpy(), True, "np.linalg.svd")
    r = np.linalg.svd(A, full_matrices=False, hermitian=False)
    check_svd(a, r.U.to_numpy(), r.S.to_numpy(), r.Vh.to_numpy(), False, "np reduced")
    check_values(a, np.linalg.svd(A, compute_uv=False).to_numpy(), "np values")
    check_values(a, svdvals(A).to_numpy(), "svdvals")
    check_values(a, bm.linalg.svdvals(A).to_numpy(), "bm.linalg.svdvals")
    if hasattr(np.linalg, "svdvals"):
        check_values(a, np.linalg.svdvals(A).to_numpy(), "np.linalg.svdvals")
    run(a, 6, g, True, "gather", "gesvd driver", driver="gesvd")
    empty = bm.from_numpy(np.zeros((0, 5)), block=2, grid=g)
    U, S, Vh = svd(empty)
    assert U.shape == (0, 0) and S.shape == (0,) and Vh.shape == (5, 5)
    np.testing.assert_array_equal(Vh.to_numpy(), np.eye(5))


def test_bad_input_same_on_every_rank():
    g = square_grid()
    a = random_matrix(np.random.default_rng(0), (10, 8), np.float64)
    for bad in (np.nan, np.inf):
        x = a.copy()
        x[7, 3] = bad
        X = bm.from_numpy(x, block=3, grid=g)
        with pytest.raises(ValueError):
            svd(X)
        with pytest.raises(ValueError):
            np.linalg.svd(X)
        with pytest.raises(ValueError):
            svdvals(X)
    A = bm.from_numpy(a, block=3, grid=g)
    with pytest.raises(ValueError, match="lapack_driver"):
        svd(A, lapack_driver="gesvj")
    with pytest.raises(ValueError, match="method"):
        svd(A, method="qdwh")
    with pytest.raises(ValueError, match="thin factors; pass full_matrices=False"):
        svd(A, method="polar")  # 10 x 8: the full U is 10 x 10
    with pytest.raises(TypeError):
        svd(A, full_matrices="yes")
    with pytest.raises(TypeError):
        svd(a)
    with pytest.raises(ValueError, match="2-D"):
        svd(bm.from_numpy(a[:, 0], block=3, grid=g))
