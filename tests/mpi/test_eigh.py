"""Distributed Hermitian eigensolver: eigh, eigvalsh, np.linalg.eigh/eigvalsh (run on every rank
under mpiexec).

Pass/fail follows LAPACK's eigensolver tester (xDRVST), in units of eps, threshold 60:

* the residual ``||A V - V diag(w)||_1 / (||A||_1 n eps)``;
* orthogonality ``||I - V^H V||_1 / (n eps)``;
* the eigenvalues against LAPACK's (``numpy.linalg.eigvalsh`` of the gathered matrix in
  double precision): ``max |w - w_ref| / (n eps ||A||_1)``.

The matrices: random Hermitian, graded spectra, a tight cluster, many equal eigenvalues
(``Q diag(1, 1, 1, 2, 2, ...) Q^H``), rank deficient; real and complex, single and double. The
triangle that must not be read is NaN-poisoned (so is every fresh array, ``conftest.py``), and
inputs are checked unchanged. Sizes are ragged (not multiples of the block) and one operand is
a window view.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from mpi4py import MPI

import blasmp_array as bm
from blasmp_array import creation
from blasmp_array.ops.lapack import eigh as eigh_mod

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from blas3_reference import eps, high, poison  # noqa: E402
from conftest import cached_grid  # noqa: E402

#: the testers' threshold
THRESH = 60.0


def square_grid():
    return cached_grid(*bm.square_grid_shape(MPI.COMM_WORLD.Get_size()))


@pytest.fixture
def two_stage_everywhere(monkeypatch):
    """The two-stage route on a 1x1 grid too (else one LAPACK call runs there)."""
    monkeypatch.setattr(eigh_mod, "_LOCAL_ON_ONE_PROCESS", False)


def _unitary(rng, n, dtype):
    x = rng.standard_normal((n, n))
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal((n, n))
    return np.linalg.qr(x)[0]


def hermitian(kind: str, n: int, dtype, seed: int = 0) -> np.ndarray:
    """A Hermitian test matrix of ``kind`` (the same on every rank)."""
    rng = np.random.default_rng(seed)
    single = np.dtype(dtype) in (np.float32, np.complex64)
    if kind == "random":
        x = rng.standard_normal((n, n))
        if np.dtype(dtype).kind == "c":
            x = x + 1j * rng.standard_normal((n, n))
        return ((x + x.conj().T) / 2).astype(dtype)
    if kind == "graded":
        d = np.logspace(0, -5 if single else -12, n) * np.where(np.arange(n) % 2, -1, 1)
    elif kind == "cluster":
        d = np.concatenate(
            [1 + np.arange(n // 2) * 10 * eps(dtype), np.linspace(-3, 3, n - n // 2)]
        )
    elif kind == "equal":
        d = np.repeat(np.arange(1, n // 3 + 2, dtype=float), 3)[:n]
    elif kind == "rankdef":
        d = rng.standard_normal(n)
        d[: n // 2] = 0
    else:
        raise ValueError(kind)
    q = _unitary(rng, n, dtype)
    a = (q * d) @ q.conj().T
    return ((a + a.conj().T) / 2).astype(dtype)


def ratios(a: np.ndarray, w: np.ndarray, v: np.ndarray | None) -> tuple[float, float, float]:
    """The tester's three ratios of a computed ``(w, v)`` of the Hermitian ``a``; eigenvalues of
    a subset are compared with the reference's ones of the same indices (``w`` then holds
    them at their positions)."""
    n = a.shape[0]
    e = eps(a.dtype)
    ah = high(a)
    anorm = max(float(np.abs(a).sum(axis=0).max()), np.finfo(float).tiny)
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    ref = np.linalg.eigvalsh(a.astype(wide))
    err = float(np.abs(w - ref[: w.size]).max()) / (n * e * anorm) if w.size else 0.0
    if v is None:
        return 0.0, 0.0, err
    vh = high(v)
    res = float(np.abs(ah @ vh - vh * high(w)).sum(axis=0).max()) / (anorm * n * e)
    orth = float(np.abs(np.eye(v.shape[1]) - vh.conj().T @ vh).sum(axis=0).max()) / (n * e)
    return res, orth, err


def assert_eig(a, w, v, what, ref_offset=0):
    assert np.all(np.isfinite(w)), f"{what}: non-finite eigenvalues"
    assert np.all(np.diff(w) >= 0), f"{what}: eigenvalues not ascending"
    if v is not None:
        assert np.all(np.isfinite(v)), f"{what}: non-finite eigenvectors"
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    ref = np.linalg.eigvalsh(a.astype(wide))[ref_offset : ref_offset + w.size]
    res, orth, _ = ratios(a, w, v)
    err = float(np.abs(w - ref).max()) / (a.shape[0] * eps(a.dtype) * np.abs(a).sum(0).max())
    assert res < THRESH, f"{what}: ||AV - VW|| / (||A|| n eps) = {res:.3g}"
    assert orth < THRESH, f"{what}: ||I - V^H V|| / (n eps) = {orth:.3g}"
    assert err < THRESH, f"{what}: |w - w_lapack| / (n eps ||A||) = {err:.3g}"


def gathered(x) -> np.ndarray:
    out = x.to_numpy()
    assert out is not None
    return out


CASES = [
    (np.float64, "random", True, 37, 5),
    (np.complex128, "graded", False, 37, 5),
    (np.float32, "equal", True, 30, 4),
    (np.complex64, "cluster", False, 29, 6),
    (np.float64, "rankdef", False, 26, 7),
    (np.float64, "equal", True, 7, 8),  # one block: no reduction step
]


@pytest.mark.parametrize(
    "dtype,kind,lower,n,nb",
    CASES,
    ids=[f"{np.dtype(c[0]).name}-{c[1]}-{'L' if c[2] else 'U'}-{c[3]}b{c[4]}" for c in CASES],
)
def test_eigh_two_stage(grid, two_stage_everywhere, dtype, kind, lower, n, nb):
    a = hermitian(kind, n, dtype, seed=n)
    given = poison(a, "upper" if lower else "lower")  # the triangle not read
    A = bm.from_numpy(given, block=(nb, nb), grid=grid)
    w, V = bm.linalg.eigh(A, lower=lower, method="two-stage")
    assert w.ndim == 1 and w.shape == (n,) and w.dtype == np.finfo(dtype).dtype
    assert V.shape == (n, n) and V.dtype == dtype and V.grid is grid
    assert_eig(a, gathered(w), gathered(V), f"eigh {kind}")
    vals = bm.linalg.eigvalsh(A, lower=lower, method="two-stage")
    assert vals.ndim == 1
    assert_eig(a, gathered(vals), None, f"eigvalsh {kind}")
    assert np.array_equal(gathered(A), given, equal_nan=True), "input modified"


def _device_band_width(be, monkeypatch, dtype, vectors) -> int:
    """The bandwidth the backend solves on its device (the GPU's chase kernels; with
    ``vectors`` where its cuSOLVER has the tridiagonal divide and conquer); elsewhere a stand-in
    width over SciPy's band solver, so that the device routes' logic (stage 1 and its
    back-transformation on the local matrix) runs there."""
    if be.band_eig_width(dtype, vectors) is None:
        monkeypatch.setattr(
            type(be), "band_eig_width",
            lambda self, dt, vectors: None if np.dtype(dt).kind != "f" else 8,
        )  # fmt: skip
    assert be.band_eig_width(np.complex128, vectors) is None
    return int(be.band_eig_width(dtype, vectors))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["random", "graded", "cluster", "equal", "rankdef"])
def test_eigh_band_solved_on_the_device(grid, monkeypatch, dtype, kind):
    """Eigenvectors where the backend solves the band on the device (the GPU: the chase keeping
    its reflectors, cuSOLVER's tridiagonal divide and conquer, the chase's and stage 1's
    back-transformations as GEMMs): one process by default from ``DEVICE_BAND_N_VECTORS``,
    either triangle, the input unchanged, subsets by index and by value; on several processes
    the distributed two-stage route and the gathered route's root."""
    width = _device_band_width(grid.backend, monkeypatch, dtype, True)
    monkeypatch.setattr(eigh_mod, "DEVICE_BAND_N_VECTORS", 1)
    nb = 2 * width + 3
    n = 3 * nb + 11
    a = hermitian(kind, n, dtype, seed=n + 1)
    for lower in (True, False):
        given = poison(a, "upper" if lower else "lower")
        A = bm.from_numpy(given, block=(nb, nb), grid=grid)
        if grid.size == 1:  # the default route
            w, V = np.linalg.eigh(A, UPLO="L" if lower else "U")
        else:
            w, V = bm.linalg.eigh(A, lower=lower, method="two-stage")
        assert "band solve" in eigh_mod.LAST_PROFILE, "not the two-stage route"
        assert V.dtype == dtype and V.shape == (n, n)
        if grid.size == 1:  # (the distributed route works in the device's band as its block)
            assert tuple(V.block) == (nb, nb)
        assert_eig(a, gathered(w), gathered(V), f"eigh {kind}, lower={lower}")
        assert np.array_equal(gathered(A), given, equal_nan=True), "input modified"
    ws, Vs = bm.linalg.eigh(A, lower=False, subset_by_index=(4, 17), method="two-stage")
    assert Vs.shape == (n, 14)
    assert_eig(a, gathered(ws), gathered(Vs), "eigh by index", ref_offset=4)
    ref = np.linalg.eigvalsh(a.astype(np.float64))
    widest = np.argsort(np.diff(ref))[::-1]  # the interval's ends in the widest gaps
    i, j = sorted(int(g) for g in widest[:2])
    vl, vu = (ref[i] + ref[i + 1]) / 2, (ref[j] + ref[j + 1]) / 2
    wv, Vv = bm.linalg.eigh(A, lower=False, subset_by_value=(vl, vu), method="two-stage")
    assert Vv.shape == (n, j - i)
    assert_eig(a, gathered(wv), gathered(Vv), "eigh by value", ref_offset=i + 1)
    if grid.size > 1:  # gathered: the root runs the one-process route on its device
        wg, Vg = bm.linalg.eigh(A, lower=False, method="gathered")
        on_root = grid.comm.bcast("band solve" in eigh_mod.LAST_PROFILE, root=0)
        assert on_root, "the root did not solve a band"
        assert_eig(a, gathered(wg), gathered(Vg), "eigh gathered")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["random", "graded", "equal"])
def test_eigvalsh_band_solved_on_the_device(grid, monkeypatch, dtype, kind):
    """Eigenvalues where the backend solves the band on the device (the GPU's chase and
    bisection kernels; on the CPU a stand-in width over SciPy's band solver): one process runs
    the two-stage route by default from ``DEVICE_BAND_N``, a block wider than the device's band
    is redistributed to it, subsets come from the same band solve."""
    width = _device_band_width(grid.backend, monkeypatch, dtype, False)
    monkeypatch.setattr(eigh_mod, "DEVICE_BAND_N", 1)
    nb = 2 * width + 3  # wider than the device's band: redistributed
    n = 3 * nb + 11
    a = hermitian(kind, n, dtype, seed=n)
    A = bm.from_numpy(poison(a, "upper"), block=(nb, nb), grid=grid)
    if grid.size == 1:  # the default route
        w = gathered(np.linalg.eigvalsh(A))
    else:
        w = gathered(bm.linalg.eigvalsh(A, method="two-stage"))
    assert "band solve" in eigh_mod.LAST_PROFILE, "not the two-stage route"
    assert w.dtype == dtype
    assert_eig(a, w, None, f"eigvalsh {kind}")
    sub = gathered(bm.linalg.eigvalsh(A, subset_by_index=(5, 20), method="two-stage"))
    assert_eig(a, sub, None, "eigvalsh by index", ref_offset=5)
    ref = np.linalg.eigvalsh(a.astype(np.float64))
    gaps = np.diff(ref)  # the interval's ends in wide gaps of the spectrum
    i, j = 5 + int(np.argmax(gaps[5:20])), 30 + int(np.argmax(gaps[30:50]))
    vl, vu = (ref[i] + ref[i + 1]) / 2, (ref[j] + ref[j + 1]) / 2
    inside = np.flatnonzero((ref > vl) & (ref <= vu))
    byv = gathered(bm.linalg.eigvalsh(A, subset_by_value=(vl, vu), method="two-stage"))
    assert byv.shape == inside.shape
    assert_eig(a, byv, None, "eigvalsh by value", ref_offset=int(inside[0]))
    if grid.size > 1:  # gathered: the root runs the one-process route on its device
        AU = bm.from_numpy(poison(a, "lower"), block=(nb, nb), grid=grid)
        for lower, M in ((True, A), (False, AU)):
            wg = gathered(bm.linalg.eigvalsh(M, lower=lower, method="gathered"))
            on_root = grid.comm.bcast("band solve" in eigh_mod.LAST_PROFILE, root=0)
            assert on_root, "the root did not solve a band"
            assert_eig(a, wg, None, f"eigvalsh gathered, lower={lower}")
        sub = gathered(bm.linalg.eigvalsh(A, subset_by_index=(5, 20), method="gathered"))
        assert_eig(a, sub, None, "eigvalsh gathered by index", ref_offset=5)


@pytest.mark.parametrize("always", [False, True])
def test_auto_eigvalsh_route_above_gather_n(grid, monkeypatch, always):
    """Above ``GATHER_N``, eigenvalues alone take the distributed two-stage route on several
    processes, or the gathered one where the backend says ``eigvalsh_always_gathered`` (the
    GPU); eigenvectors are gathered either way. Every process takes the same route."""
    if grid.size == 1:
        pytest.skip("one process runs its own route")
    monkeypatch.setattr(eigh_mod, "GATHER_N", 8)
    monkeypatch.setattr(type(grid.backend), "eigvalsh_always_gathered", always)
    n = 29
    a = hermitian("random", n, np.float64, seed=n)
    A = bm.from_numpy(a, block=(4, 4), grid=grid)
    w = gathered(np.linalg.eigvalsh(A))
    routes = grid.comm.allgather("gather" in eigh_mod.LAST_PROFILE)
    assert routes == [always] * grid.size, routes
    assert_eig(a, w, None, f"eigvalsh auto, always_gathered={always}")
    np.linalg.eigh(A)
    assert all(grid.comm.allgather("gather" in eigh_mod.LAST_PROFILE))


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_numpy_gathered(grid, dtype):
    """np.linalg.eigh/eigvalsh (the automatic route: small matrices are gathered), UPLO."""
    n, nb = 23, 4
    a = hermitian("random", n, dtype, seed=3)
    A = bm.from_numpy(poison(a, "lower"), block=(nb, nb), grid=grid)
    res = np.linalg.eigh(A, UPLO="U")
    w, V = res
    assert isinstance(w, bm.BlockCyclicArray) and w.ndim == 1
    assert hasattr(res, "eigenvalues") and res.eigenvectors is V
    assert_eig(a, gathered(w), gathered(V), "np.linalg.eigh")
    vals = np.linalg.eigvalsh(A, UPLO="u")
    assert_eig(a, gathered(vals), None, "np.linalg.eigvalsh")
    B = bm.from_numpy(poison(a, "upper"), block=(nb, nb), grid=grid)
    assert_eig(a, gathered(np.linalg.eigvalsh(B)), None, "np.linalg.eigvalsh L")


@pytest.mark.parametrize("route", ["host", "device"])
def test_gathered_route_moves_by_either_transport(grid, monkeypatch, route):
    """The gathered route takes the matrix to process 0 and the eigenvectors back by either
    route of ``creation.ROUTE``: host MPI, or the one-sided exchange in row panels from and to
    the root's device (one row per panel here, so many exchanges); a transposed view and
    subsets (a non-square block of eigenvectors) included."""
    monkeypatch.setattr(creation, "PANEL_BYTES", 8)
    monkeypatch.setitem(creation.ROUTE, grid.backend.name, route)
    for dtype, lower in ((np.float64, True), (np.complex128, False)):
        n, nb = 19, 4
        a = hermitian("random", n, dtype, seed=9)
        A = bm.from_numpy(a, block=(nb, nb), grid=grid)
        w, V = bm.linalg.eigh(A, lower=lower, method="gathered")
        assert_eig(a, gathered(w), gathered(V), f"{route} eigh {np.dtype(dtype).name}")
        w, V = bm.linalg.eigh(A.T, subset_by_index=(2, 9), method="gathered")
        assert V.shape == (n, 8)
        assert_eig(a.T, gathered(w), gathered(V), f"{route} eigh A.T subset", ref_offset=2)
        vals = bm.linalg.eigvalsh(A, lower=lower, method="gathered")
        assert_eig(a, gathered(vals), None, f"{route} eigvalsh {np.dtype(dtype).name}")


@pytest.mark.parametrize("method", ["two-stage", "gathered"])
def test_subsets(grid, two_stage_everywhere, method):
    n, nb = 31, 6
    a = hermitian("random", n, np.float64, seed=5)
    A = bm.from_numpy(a, block=(nb, nb), grid=grid)
    w, V = bm.linalg.eigh(A, subset_by_index=(4, 12), method=method)
    assert w.shape == (9,) and V.shape == (n, 9)
    assert_eig(a, gathered(w), gathered(V), "subset_by_index", ref_offset=4)
    ref = np.linalg.eigvalsh(a)
    lo, hi = float(ref[9] + ref[10]) / 2, float(ref[20] + ref[21]) / 2
    w2, V2 = bm.linalg.eigh(A, subset_by_value=(lo, hi), method=method)
    assert w2.shape == (11,) and V2.shape == (n, 11)
    assert_eig(a, gathered(w2), gathered(V2), "subset_by_value", ref_offset=10)
    vals = bm.linalg.eigvalsh(A, subset_by_index=[0, 2], method=method)
    assert_eig(a, gathered(vals), None, "eigvalsh subset")
    w3, V3 = bm.linalg.eigh(A, subset_by_value=(1e3, 1e4), method=method)
    assert w3.shape == (0,) and V3.shape == (n, 0)


def test_complex_diagonal_imaginary_part_ignored(grid, two_stage_everywhere):
    """The imaginary part of a complex diagonal is not read (as LAPACK's xheevd)."""
    n, nb = 21, 4
    a = hermitian("random", n, np.complex128, seed=11)
    noisy = a + np.diag(1j * np.linspace(1, 2, n))
    A = bm.from_numpy(noisy, block=(nb, nb), grid=grid)
    for method in ("two-stage", "gathered"):
        w, V = bm.linalg.eigh(A, method=method)
        assert_eig(a, gathered(w), gathered(V), f"imaginary diagonal {method}")


def test_window_and_integers(grid, two_stage_everywhere):
    """A window view (starting inside a block) and an integer matrix (float64)."""
    n, nb = 40, 4
    a = hermitian("random", n, np.complex128, seed=7)
    A = bm.from_numpy(a, block=(nb, nb), grid=grid)
    win = A[3:38, 3:38]
    w, V = bm.linalg.eigh(win, method="two-stage")
    assert_eig(a[3:38, 3:38], gathered(w), gathered(V), "window view")
    ai = np.arange(n * n).reshape(n, n) % 7
    ai = ai + ai.T
    Ai = bm.from_numpy(ai, block=(nb, nb), grid=grid)
    wi, Vi = bm.linalg.eigh(Ai, method="two-stage")
    assert Vi.dtype == np.float64
    assert_eig(ai.astype(np.float64), gathered(wi), gathered(Vi), "integers")


def test_views_and_blocks(grid, two_stage_everywhere):
    """A lazy view (``A.H``), non-square blocks (redistributed with a warning) and the
    automatic route."""
    n = 27
    a = hermitian("random", n, np.complex128, seed=13)
    A = bm.from_numpy(poison(a, "upper"), block=(4, 4), grid=grid)
    w, V = bm.linalg.eigh(A.H, lower=False, method="two-stage")  # upper of A^H = lower of A^H^H
    assert_eig(a, gathered(w), gathered(V), "A.H")
    B = bm.from_numpy(a, block=(4, 6), grid=grid)
    with pytest.warns(bm.RedistributionWarning):
        w2, V2 = bm.linalg.eigh(B)
    assert V2.block == (4, 4)
    assert_eig(a, gathered(w2), gathered(V2), "blocks (4, 6)")


def test_errors():
    g = square_grid()
    A = bm.from_numpy(np.eye(6), block=(2, 2), grid=g)
    R = bm.from_numpy(np.ones((6, 4)), block=(2, 2), grid=g)
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        np.linalg.eigh(R)
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        bm.linalg.eigvalsh(R)
    with pytest.raises(ValueError, match="UPLO"):
        np.linalg.eigh(A, UPLO="X")
    with pytest.raises(NotImplementedError, match="generalized"):
        bm.linalg.eigh(A, A)
    with pytest.raises(NotImplementedError, match="evr"):
        bm.linalg.eigh(A, driver="evr")
    with pytest.raises(ValueError, match="driver"):
        bm.linalg.eigh(A, driver="fast")
    with pytest.raises(ValueError, match="method"):
        bm.linalg.eigh(A, method="qdwh")
    with pytest.raises(TypeError):
        bm.linalg.eigh(A, lower="yes")
    with pytest.raises(ValueError, match="either index or value"):
        bm.linalg.eigh(A, subset_by_index=(0, 1), subset_by_value=(0, 1))
    with pytest.raises(ValueError, match="not valid"):
        bm.linalg.eigh(A, subset_by_index=(2, 6))
    with pytest.raises(ValueError, match="vl < vu"):
        bm.linalg.eigvalsh(A, subset_by_value=(2, 1))
    bad = np.eye(6)
    bad[4, 1] = np.nan  # in the lower triangle (read)
    B = bm.from_numpy(bad, block=(2, 2), grid=g)
    with pytest.raises(ValueError, match="infs or NaNs") as scipy_face:
        bm.linalg.eigh(B)
    assert type(scipy_face.value) is ValueError  # SciPy's check_finite error
    with pytest.raises(np.linalg.LinAlgError, match="infs or NaNs"):  # NumPy's error
        np.linalg.eigvalsh(B)
    inf = np.eye(6)
    inf[1, 4] = np.inf  # upper triangle
    C = bm.from_numpy(inf, block=(2, 2), grid=g)
    with pytest.raises(ValueError, match="infs or NaNs"):
        bm.linalg.eigvalsh(C, lower=False)
    assert np.allclose(gathered(bm.linalg.eigvalsh(C)), np.ones(6))  # the lower one is finite
