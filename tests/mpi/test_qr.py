"""Distributed QR: qr, qr_multiply and np.linalg.qr (run on every rank under mpiexec).

Pass/fail follows LAPACK's and ScaLAPACK's QR testers (xQRT01, PxQRINFO), in units of eps:

* the factorisation: ``||A - Q R||_1 / (||A||_1 max(m, n) eps) < 30``;
* orthogonality: ``||I - Q^H Q||_1 / (m eps) < 30``;

with ``R`` checked upper trapezoidal (exact zeros below the diagonal) and every fresh array
NaN-poisoned (``tests/mpi/conftest.py``), so an element left unwritten fails the bounds. The
condition-number ladder builds ``A = U diag(s) V^H`` with known singular values (a geometric
sequence from 1 to ``1 / kappa``) and checks both the bounds and which algorithm ran:
CholeskyQR2 below its stability limit (``kappa <~ u^{-1/2}``), the shifted CholeskyQR3 above
it, Householder QR past ``1 / u``. Inputs are checked unchanged. The exhaustive parameter
product is marked ``full_sweep``.
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pytest
from mpi4py import MPI

import blasmp_array as bm
from blasmp_array.ops.engine import devices
from blasmp_array.ops.lapack import _cholqr, _cholqr_panel, _householder, _qr_local
from blasmp_array.ops.lapack import qr as qr_module
from blasmp_array.ops.lapack.qr import qr, qr_multiply

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from blas3_reference import DTYPES, eps, high, random_matrix  # noqa: E402
from conftest import cached_grid, on_one_device  # noqa: E402

#: the testers' threshold (LAPACK's dchkqr: THRESH = 30 in its input files)
THRESH = 30.0

# (m, n, block): tall-skinny (CholeskyQR), square and ragged, wide, n inside one block, block 1
SHAPES = [(60, 9, 4), (23, 23, 5), (13, 29, 4), (31, 7, 16), (9, 6, 1), (40, 26, 6)]


@pytest.fixture(autouse=True)
def grid_pipeline(monkeypatch):
    """Every test but the gathered route's runs the grid's pipeline, also where the ranks share
    one GPU (whose ``qr`` would otherwise gather the matrix, ``ops/lapack/_qr_gathered.py``)."""
    monkeypatch.setattr(devices, "ON_ONE_DEVICE", False)


def square_grid():
    """The near-square grid of this rank count (tests of arguments and shapes need one)."""
    return cached_grid(*bm.square_grid_shape(MPI.COMM_WORLD.Get_size()))


def ratios(
    a: np.ndarray, q: np.ndarray, r: np.ndarray, extended: bool = True
) -> tuple[float, float]:
    """The testers' two ratios (in units of eps) of a computed ``a = q r``, the products in
    extended precision (``extended=False``: in the data's own, for matrices of device size)."""
    m, n = a.shape
    e = eps(a.dtype)
    ah, qh, rh = (high(x) for x in (a, q, r)) if extended else (a, q, r)
    anorm = max(float(np.abs(a).sum(axis=0).max()) if a.size else 0.0, 1e-300)
    resid = float(np.abs(ah - qh @ rh).sum(axis=0).max()) if a.size else 0.0
    orth = np.eye(q.shape[1]) - qh.conj().T @ qh
    o = float(np.abs(orth).sum(axis=0).max()) if q.size else 0.0
    return resid / (anorm * max(m, n, 1) * e), o / (max(m, 1) * e)


def assert_qr(a: np.ndarray, q: np.ndarray, r: np.ndarray, what: str) -> None:
    assert np.all(np.isfinite(q)) and np.all(np.isfinite(r)), f"{what}: non-finite entries"
    assert np.all(np.tril(r, -1) == 0), f"{what}: R is not upper triangular"
    res, orth = ratios(a, q, r)
    assert res < THRESH, f"{what}: ||A - QR|| / (||A|| max(m,n) eps) = {res:.3g}"
    assert orth < THRESH, f"{what}: ||I - Q^H Q|| / (m eps) = {orth:.3g}"


def conditioned(m: int, n: int, kappa: float, dtype, seed: int = 0) -> np.ndarray:
    """``U diag(s) V^H`` with ``s`` geometric from 1 to ``1 / kappa`` (same on every rank)."""
    rng = np.random.default_rng(seed)
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    u = np.linalg.qr(random_matrix(rng, (m, n), wide))[0]
    v = np.linalg.qr(random_matrix(rng, (n, n), wide))[0]
    s = np.logspace(0, -np.log10(kappa), n)
    return ((u * s) @ v.conj().T).astype(dtype)


def run_case(grid, dtype, m, n, nb, mode, method="auto"):
    rng = np.random.default_rng(m * 100 + n + nb)
    a = random_matrix(rng, (m, n), dtype)
    A = bm.from_numpy(a, block=(nb, nb), grid=grid)
    before = A.to_numpy()
    out = qr(A, mode=mode, method=method)
    k = min(m, n)
    if mode == "r":
        (R,) = out
        assert R.shape == (m, n)
        r = R.to_numpy()
        assert np.all(np.tril(r, -1) == 0)
        # the same R as the economic call's, below which zeros
        Q2, R2 = qr(A, mode="economic", method=method)
        assert np.array_equal(r[:k], R2.to_numpy())
        assert_qr(a, Q2.to_numpy(), r[:k], f"mode='r' {m}x{n}")
    else:
        Q, R = out
        ncols = m if mode == "full" else k
        assert Q.shape == (m, ncols) and R.shape == (ncols, n)
        assert Q.grid is A.grid and R.grid is A.grid
        assert_qr(a, Q.to_numpy(), R.to_numpy(), f"{mode} {m}x{n} nb={nb} {method}")
    assert np.array_equal(A.to_numpy(), before), "input modified"


SAMPLE = [
    (dt, SHAPES[(2 * i + j) % len(SHAPES)], mode)
    for i, dt in enumerate(DTYPES)
    for j, mode in enumerate(("economic", "full" if i % 2 else "r"))
]


@pytest.mark.parametrize(
    "dtype,shape,mode",
    SAMPLE,
    ids=[f"{np.dtype(d).name}-{s[0]}x{s[1]}b{s[2]}-{mo}" for d, s, mo in SAMPLE],
)
def test_qr(grid, dtype, shape, mode):
    run_case(grid, dtype, *shape, mode)


GATHERED = [
    (np.float64, (23, 23, 5), "economic"),
    (np.complex64, (13, 29, 4), "full"),
    (np.float32, (40, 26, 6), "r"),
    (np.complex128, (31, 7, 16), "full"),
]


@pytest.fixture
def one_device(monkeypatch):
    """Every rank names one device; the calls of the gathered route are counted."""
    return on_one_device(monkeypatch, qr_module, "gathered_qr")


@pytest.mark.parametrize(
    "dtype,shape,mode",
    GATHERED,
    ids=[f"{np.dtype(d).name}-{s[0]}x{s[1]}b{s[2]}-{mo}" for d, s, mo in GATHERED],
)
def test_gathered_route(grid, dtype, shape, mode, one_device):
    """Ranks on one device factor the matrix on process 0 (Householder QR there) and scatter
    the factors: the testers' bounds, ``R``'s exact zeros and the layouts of the grid's route;
    one process never gathers."""
    run_case(grid, dtype, *shape, mode, "householder")
    assert bool(one_device) == (grid.size > 1)


def test_gathered_route_of_views(grid, one_device):
    """``np.linalg.qr`` of a transposed view and of a window view, gathered as viewed."""
    rng = np.random.default_rng(5)
    a = random_matrix(rng, (27, 19), np.float64)
    A = bm.from_numpy(a, block=(4, 4), grid=grid)
    for view, ref in ((A.T, a.T), (A[1:, 2:], a[1:, 2:])):
        q, r = np.linalg.qr(view)
        assert q.shape == (ref.shape[0], min(ref.shape)) and q.block == (4, 4)
        assert_qr(ref, q.to_numpy(), r.to_numpy(), f"view {ref.shape}")
    assert np.array_equal(A.to_numpy(), a)
    assert bool(one_device) == (grid.size > 1)


def test_gathered_route_needs_room_on_the_device(grid, one_device, monkeypatch):
    """Where process 0's device has not the room for the gathered matrix and its factors,
    the ranks run the pipeline, decided alike on every rank."""
    monkeypatch.setattr(grid.backend, "device_bytes_free", lambda: 1 << 20)
    run_case(grid, np.float64, 23, 23, 5, "economic", "householder")
    assert one_device == []


def test_gathered_route_error_on_every_rank(grid, one_device, monkeypatch):
    """An error of process 0's factorisation is raised on every rank (nothing hangs); on one
    process the one-process factorisation raises it."""

    def fail(be, a):
        raise MemoryError("out of device memory (test)")

    monkeypatch.setattr(_householder, "local_geqrf", fail)
    A = bm.from_numpy(np.eye(12), block=(4, 4), grid=grid)
    with pytest.raises(MemoryError, match="test"):
        np.linalg.qr(A)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_householder_with_geqrf_panels(grid, dtype, monkeypatch):
    """The panels factored by ``geqrf`` with ``T`` from its scalars (``xlarft``: the GPU's
    way; the CPU uses ``geqrt``): the bounds hold on every grid, and so does
    ``qr_multiply``'s application of the same reflectors."""
    monkeypatch.setattr(grid.backend, "has_geqrt", False)
    for mode in ("economic", "full", "r"):
        run_case(grid, dtype, 29, 17, 4, mode, "householder")
    run_case(grid, dtype, 11, 19, 3, "full", "householder")


@pytest.mark.parametrize("dtype,method", [(np.float64, "cholqr"), (np.complex64, "householder")])
def test_forced_method(grid, dtype, method):
    """Each algorithm on a shape the automatic choice gives to the other one."""
    shape = (30, 20, 4) if method == "cholqr" else (64, 6, 5)
    run_case(grid, dtype, *shape, "economic", method)


@pytest.mark.full_sweep
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES + [(64, 64, 8), (65, 20, 64), (5, 40, 3), (1, 7, 2)])
@pytest.mark.parametrize("mode", ["economic", "full", "r"])
@pytest.mark.parametrize("method", ["auto", "householder"])
def test_qr_full(grid, dtype, shape, mode, method):
    run_case(grid, dtype, *shape, mode, method)


def _ladder(dtype):
    """``(kappa, algorithms that may run)``: below CholeskyQR2's limit, at it (rounding decides
    there), and between it and the shifted CholeskyQR3's (about ``1 / (sqrt(m n) u)``): 1e2,
    1e8, 1e12 in double; 1e1, 1e3, 3e4 in single."""
    both = {"cholqr2", "shifted cholqr3"}
    if np.dtype(dtype) in (np.float32, np.complex64):
        return [(1e1, {"cholqr2"}), (1e3, both), (3e4, {"shifted cholqr3"})]
    return [(1e2, {"cholqr2"}), (1e8, both), (1e12, {"shifted cholqr3"})]


def ladder(grid, dtype):
    m, n, nb = 96, 12, 5
    for kappa, expect in _ladder(dtype):
        a = conditioned(m, n, kappa, dtype, seed=int(np.log10(kappa)))
        A = bm.from_numpy(a, block=(nb, nb), grid=grid)
        done = _cholqr.cholesky_qr(A)
        assert done is not None, f"kappa={kappa:g}: CholeskyQR broke down"
        q, r, method = done
        assert method in expect, f"kappa={kappa:g}: {method} ran, {expect} expected"
        # Q and R on A's grid (not the one-column grid the passes ran on), in A's blocks
        assert q.grid is grid and r.grid is grid
        assert q.block == (nb, nb) and r.block == (nb, nb)
        assert_qr(a, q.to_numpy(), r.to_numpy(), f"{method} kappa={kappa:g}")
        # the public call, and Householder QR at the top rung, meet the same bounds
        for meth in ("auto", "householder") if kappa == _ladder(dtype)[-1][0] else ("auto",):
            Q, R = qr(A, mode="economic", method=meth)
            assert_qr(a, Q.to_numpy(), R.to_numpy(), f"qr({meth}) kappa={kappa:g}")


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_condition_ladder(grid, dtype):
    ladder(grid, dtype)


@pytest.mark.parametrize("solve", ["split", "inverse"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_condition_ladder_with_gemm_passes(grid, dtype, solve, monkeypatch):
    """The whole-rows passes as GEMMs (the GPU's ``Backend.cholqr_gemms``): the Gram matrix as
    a batched GEMM of row chunks (real dtypes; complex ones keep the HERK) and ``X R^{-1}``
    split into halves with GEMMs down to leaves of 2, or as one GEMM by the explicit
    ``R^{-1}``: the same ladder, the same bounds. The passes run on whole rows on every grid
    (the others' matrices moved to their one-column grid), but for the lazy transposes."""
    monkeypatch.setattr(_cholqr, "GRAM_ROWS", 7)  # 96 rows: ragged chunks, per rank too
    monkeypatch.setattr(_cholqr, "TRSM_LEAF", 2)
    monkeypatch.setattr(_cholqr, "INVERSE", solve == "inverse")
    calls: dict[str, int] = {"gram": 0, "inverse": 0}

    def counted(name, fn):
        return lambda *a: (calls.__setitem__(name, calls[name] + 1), fn(*a))[1]

    monkeypatch.setattr(_cholqr, "_chunked_gram", counted("gram", _cholqr._chunked_gram))
    monkeypatch.setattr(
        _cholqr, "_multiply_by_inverse", counted("inverse", _cholqr._multiply_by_inverse)
    )
    ladder(grid, dtype)
    assert bool(calls["gram"]) == (np.dtype(dtype).kind != "c")
    assert bool(calls["inverse"]) == (solve == "inverse")
    # the solve alone: q r = x to within the substitution's backward error
    be = grid.backend
    rng = np.random.default_rng(grid.rank)
    r = np.triu(random_matrix(rng, (11, 11), dtype)) + 4 * np.eye(11, dtype=dtype)
    r_poisoned = r + np.tril(np.full((11, 11), np.nan, dtype), -1)  # the lower triangle unread
    x = random_matrix(rng, (9, 11), dtype)
    if solve == "split":
        q = be.asarray(x.copy())
        _cholqr._solve_upper_right(be, be.asarray(r_poisoned), q, 2)
    else:
        q = be.asarray(np.full_like(x, np.nan))
        _cholqr._multiply_by_inverse(be, be.asarray(r_poisoned), be.asarray(x), q)
    be.synchronize()
    q = be.asnumpy(q)
    resid = np.abs(high(q) @ high(r) - high(x)).max()
    # the inverse's residual |r r^-1 - I| <= c u |r| |r^-1|, carried through x r^-1 r
    scale = (np.abs(q) @ np.abs(r)).max()
    if solve == "inverse":
        inv = np.linalg.inv(r.astype(np.complex128))
        scale = max(scale, (np.abs(x) @ np.abs(inv) @ np.abs(r)).max())
    bound = THRESH * 11 * eps(dtype) * scale
    assert resid <= bound, f"{solve} solve: |q r - x| = {resid:.3g} > {bound:.3g}"


#: the tests of the GPU's stream ordering, at sizes where the host runs ahead of the kernels
device_size = pytest.mark.skipif(
    os.environ.get("BLASMP_BACKEND") != "gpu",
    reason="the GPU's streams: a size at which the kernels outlive the host's next steps",
)


@device_size
@pytest.mark.parametrize("shape", [(16384, 1024), (131072, 256)])
def test_tall_qr_at_device_size(grid, shape):
    """CholeskyQR2 with the backend's default passes at a size where each pass's GEMMs run
    long enough for the host to allocate the next Gram matrix meanwhile (CuPy's pool hands a
    temporary the host dropped to the next allocation of the host's stream, which does not
    wait for the compute stream): CholeskyQR2 ran, and ``Q R = A`` and ``Q^T Q = I`` to the
    testers' bounds (in float64 on the host: the extended-precision check of the small cases
    would take minutes here)."""
    m, n = shape
    A = bm.random.standard_normal((m, n), seed=7, grid=grid)
    a = A.to_numpy()
    done = _cholqr.cholesky_qr(A)
    assert done is not None and done[2] == "cholqr2", f"{shape}: {done and done[2]} ran"
    q, r = done[0].to_numpy(), done[1].to_numpy()
    assert np.all(np.isfinite(q)) and np.all(np.tril(r, -1) == 0)
    resid, orth = ratios(a, q, r, extended=False)
    assert resid < THRESH and orth < THRESH, f"{shape}: ratios {resid:.3g}, {orth:.3g}"


@device_size
def test_householder_qr_at_device_size(grid, monkeypatch):
    """Householder QR and its ``Q`` at a size where the host runs blocks ahead of the compute
    stream (one process: ``Q`` formed in blocks of 256 reflectors, whose ``T`` and its
    temporaries are dropped by the host while the kernels still read them unless kept; several:
    the pipeline's column sums): the testers' bounds, in float64 on the host."""
    monkeypatch.setenv("BLASMP_QR_LOCAL_Q_BLOCK", "256")
    n = 4096
    A = bm.random.standard_normal((n, n), seed=8, grid=grid)
    a = A.to_numpy()
    Q, R = qr(A, mode="economic", method="householder")
    q, r = Q.to_numpy(), R.to_numpy()
    assert np.all(np.isfinite(q)) and np.all(np.tril(r, -1) == 0)
    resid, orth = ratios(a, q, r, extended=False)
    assert resid < THRESH and orth < THRESH, f"ratios {resid:.3g}, {orth:.3g}"


@pytest.mark.full_sweep
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_condition_ladder_full(grid, dtype):
    ladder(grid, dtype)


def test_cholqr_through_the_operators(grid, monkeypatch):
    """The passes run on whole local rows (a grid of several process columns moves the matrix
    to its one-column grid); the distributed SYRK/Cholesky/TRSM passes (what a lazy
    transpose runs) meet the same bounds on every grid too."""
    monkeypatch.setattr(_cholqr, "_WHOLE_ROWS", False)
    for kappa in (1e2, 1e12):
        a = conditioned(64, 9, kappa, np.complex128, seed=5)
        done = _cholqr.cholesky_qr(bm.from_numpy(a, block=(4, 4), grid=grid))
        assert done is not None
        assert_qr(a, done[0].to_numpy(), done[1].to_numpy(), f"{done[2]} kappa={kappa:g}")


def test_beyond_one_over_eps_falls_back_to_householder(grid, monkeypatch):
    """kappa ~ 1e17 (float64) or an exactly rank-deficient matrix: both CholeskyQRs break
    down, Householder QR completes (as LAPACK: a zero on R's diagonal is no error)."""
    m, n, nb = 80, 10, 4
    a = conditioned(m, n, 1e17, np.float64, seed=3)
    b = a.copy()
    b[:, 6] = b[:, 1] - 2 * b[:, 4]  # rank deficient
    calls = []
    real = _householder.factor
    monkeypatch.setattr(_householder, "factor", lambda *x, **k: calls.append(1) or real(*x, **k))
    for x in (a, b):
        X = bm.from_numpy(x, block=(nb, nb), grid=grid)
        assert _cholqr.cholesky_qr(X) is None
        Q, R = qr(X, mode="economic")
        assert_qr(x, Q.to_numpy(), R.to_numpy(), "fallback")
    assert len(calls) == 2
    r = np.abs(np.diagonal(R.to_numpy()))
    assert r[6] < 1e-12 * r.max(), "the dependent column has no zero on R's diagonal"


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_householder_pipeline_on_one_process(grid, dtype, monkeypatch):
    """A 1x1 grid calls LAPACK once by default; the blocked pipeline on one process (the
    other path of the 1x1 grid) meets the same bounds, and so does its application of Q."""
    if grid.size > 1:
        pytest.skip("the switch concerns a 1x1 grid; the others run the pipeline anyway")
    monkeypatch.setattr(_householder, "_LOCAL_ON_ONE_PROCESS", False)
    for mode in ("economic", "full"):
        run_case(grid, dtype, 29, 17, 4, mode, "householder")
        run_case(grid, dtype, 11, 19, 3, mode, "householder")
    # the one-process Q formed in blocks of reflectors instead of the library's orgqr
    monkeypatch.setattr(_householder, "_LOCAL_ON_ONE_PROCESS", True)
    monkeypatch.setenv("BLASMP_QR_LOCAL_Q_BLOCK", "5")
    for mode in ("economic", "full"):
        run_case(grid, dtype, 29, 17, 4, mode, "householder")
        run_case(grid, dtype, 11, 19, 3, mode, "householder")


# -- one process: the blocked QR with the panel on the comm stream (ops/lapack/_qr_local.py) -------
# (m, n, panel): square, tall, wide, ragged, one panel, one-column panels
LOCAL = [(37, 37, 5), (41, 23, 6), (23, 41, 6), (12, 12, 16), (9, 30, 4), (30, 9, 4), (7, 5, 1)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_householder_qr_with_cholqr_panels(grid, dtype, monkeypatch):
    """The distributed Householder QR with its tall panels factored by CholeskyQR2 and
    Householder reconstruction (the GPU's panels, forced here): the testers' bounds for tall,
    square and wide shapes; a matrix with a dependent column makes a panel's verdict 0 on every
    process, which then gathers it again for ``geqrf`` (counted: one more panel gather)."""
    monkeypatch.setattr(grid.backend, "has_geqrt", False)
    monkeypatch.setattr(_qr_local, "CHOLQR_PANEL", True)
    monkeypatch.delenv("BLASMP_QR_PANEL", raising=False)
    monkeypatch.setattr(_householder, "_LOCAL_ON_ONE_PROCESS", False)
    for m, n in ((40, 12), (24, 24), (13, 30)):
        run_case(grid, dtype, m, n, 4, "economic", "householder")
    gathers = []
    real = _householder._Pipeline._gather
    monkeypatch.setattr(
        _householder._Pipeline,
        "_gather",
        lambda self, k, after: (gathers.append(k), real(self, k, after))[1],
    )
    a = random_matrix(np.random.default_rng(9), (40, 12), dtype)
    a[:, 6] = a[:, 5]  # in block column 1
    Q, R = qr(bm.from_numpy(a, block=(4, 4), grid=grid), mode="economic", method="householder")
    assert_qr(a, Q.to_numpy(), R.to_numpy(), "cholqr panels, a dependent column")
    assert gathers.count(1) == 2, f"the panel gathers per step: {gathers}"


PANEL_FACTORS = ["geqrt", "geqrf+larft", "cholqr"]


@pytest.mark.parametrize("factor", PANEL_FACTORS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", LOCAL, ids=[f"{m}x{n}-p{p}" for m, n, p in LOCAL])
def test_geqrf_lookahead(grid, dtype, case, factor, monkeypatch):
    """Each rank on its own matrix (no communication; on several ranks the CPU backend's
    streams are threads): LAPACK's layout, so the library's ``orgqr`` forms ``Q`` from it and
    the testers' bounds hold; the input unchanged; ``R`` as LAPACK's ``geqrf`` gives it (the
    same algorithm, blocked differently: equal to within the QR's backward error). Every panel
    factorisation runs: with ``T`` (``geqrt``, the CPU), without it (``geqrf`` and ``xlarft``),
    and CholeskyQR2 with Householder reconstruction for the tall panels (the GPU; ``geqrf``
    for the others). The result and the panel buffers are fresh arrays, NaN-poisoned."""
    import scipy.linalg as sla

    m, n, nb = case
    be = grid.backend
    monkeypatch.setattr(be, "has_geqrt", factor == "geqrt" and be.has_geqrt)
    monkeypatch.setattr(_qr_local, "CHOLQR_PANEL", factor == "cholqr")
    monkeypatch.delenv("BLASMP_QR_PANEL", raising=False)
    a = random_matrix(np.random.default_rng(grid.rank + 10 * m + n), (m, n), dtype)
    dev = be.asarray(a.copy())
    fa, tau = _qr_local.geqrf_lookahead(be, dev, nb)
    np.testing.assert_array_equal(be.asnumpy(dev), a, err_msg="the input was modified")
    assert fa.flags.f_contiguous and tau.shape == (min(m, n),)  # on the device: LAPACK's layout
    fa, tau = be.asnumpy(fa), be.asnumpy(tau)
    assert np.isfinite(fa).all() and np.isfinite(tau).all()
    k = min(m, n)
    orgqr = sla.get_lapack_funcs("ungqr" if np.iscomplexobj(a) else "orgqr", (fa,))
    q, _, info = orgqr(fa[:, :k].copy(order="F"), tau)
    assert info == 0
    r = np.triu(fa[:k])
    assert_qr(a, q, r, f"geqrf_lookahead {m}x{n} panel {nb}")
    ref = sla.get_lapack_funcs("geqrf", (a,))(a.copy())[0]
    scale = np.abs(np.triu(ref[:k])).max()
    gap = np.abs(r - np.triu(ref[:k])).max() / (scale * max(m, n) * eps(dtype))
    assert gap < THRESH, f"R differs from LAPACK's by {gap:.3g} x max(m, n) eps ||R||"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(40, 8), (100, 37), (9, 4), (64, 32)])
def test_cholqr_panel_reconstructs_householder_reflectors(grid, dtype, shape):
    """``_cholqr_panel.factor`` on a tall panel gives what LAPACK's ``xgeqrt`` gives: the
    reflectors below ``R`` with ``tau`` (the library's ``orgqr`` forms ``Q`` from them alone),
    ``T`` with ``I - V T V^H`` equal to that ``Q`` on its first columns, ``R`` equal to
    ``xgeqrf``'s (signs included) to within the backward error; the flag says 1. Outputs
    NaN-poisoned."""
    import scipy.linalg as sla

    m, b = shape
    be = grid.backend
    xp = be.xp
    a = random_matrix(np.random.default_rng(m + b + grid.rank), (m, b), dtype)
    panel = xp.asarray(np.asfortranarray(a))
    tau, t = xp.full(b, np.nan, dtype), xp.full((b, b), np.nan, dtype)
    flag = xp.full(1, 7, np.int32)
    work = _cholqr_panel.Workspace(xp, m, b, dtype)
    _cholqr_panel.factor(be, work, panel, tau, t, flag, be.compute)
    be.synchronize()
    assert int(be.asnumpy(flag)[0]) == 1
    fa, tau, t = (np.asarray(be.asnumpy(x)) for x in (panel, tau, t))
    assert np.isfinite(fa).all() and np.isfinite(tau).all() and np.isfinite(t).all()
    orgqr = sla.get_lapack_funcs("ungqr" if np.iscomplexobj(a) else "orgqr", (fa,))
    q, _, info = orgqr(np.asfortranarray(fa), tau)
    assert info == 0
    r = np.triu(fa[:b])
    assert_qr(a, q, r, f"cholqr panel {m}x{b}")
    np.testing.assert_array_equal(t, np.triu(t), err_msg="T is not upper triangular")
    v = np.tril(fa, -1) + np.eye(m, b, dtype=dtype)
    qt = (np.eye(m, dtype=dtype) - v @ t @ v.conj().T)[:, :b]
    gap = np.abs(qt - q).max() / (m * eps(dtype))
    assert gap < THRESH, f"I - V T V^H differs from orgqr's Q by {gap:.3g} m eps"
    ref = sla.get_lapack_funcs("geqrf", (a,))(a.copy())[0]
    rgap = np.abs(r - np.triu(ref[:b])).max() / (np.abs(r).max() * m * eps(dtype))
    assert rgap < THRESH, f"R differs from LAPACK's by {rgap:.3g} x m eps ||R||"


@pytest.mark.parametrize("leaf", ["rows", "registers"])
@pytest.mark.parametrize("n, width", [(10, 3), (40, 32)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_modified_lu_chooses_signs_that_bound_the_pivots(grid, dtype, n, width, leaf, monkeypatch):
    """``_cholqr_panel.modified_lu`` (blocked over the backend's leaf): ``a - D = L U`` with
    ``L`` unit lower, ``D`` of signs +-1 and ``|u_jj| >= 1`` for the top of an orthonormal
    matrix; leaves of 3 columns over 10 exercise the TRSM and GEMM between them, 40 rows the
    GPU's register leaf with several rows per thread. Both GPU leaf kernels run
    (``_gpu_orhr.REGISTER_LEAF``); the CPU has one."""
    import scipy.linalg as sla

    from blasmp_array.backends import _gpu_orhr

    be = grid.backend
    if leaf == "registers" and be.name != "gpu":
        pytest.skip("the register leaf is the GPU backend's")
    monkeypatch.setattr(_gpu_orhr, "REGISTER_LEAF", leaf == "registers")
    monkeypatch.setattr(_cholqr_panel, "LEAF", width)
    q = sla.qr(random_matrix(np.random.default_rng(n), (3 * n, n), dtype), mode="economic")[0]
    top = np.ascontiguousarray(q[:n])
    dev, d = be.xp.asarray(top.copy()), be.xp.full(n, np.nan, dtype)
    _cholqr_panel.modified_lu(be, dev, d, be.compute)
    be.synchronize()
    lu, d = np.asarray(be.asnumpy(dev)), np.asarray(be.asnumpy(d))
    assert set(np.unique(d.real)) <= {-1.0, 1.0} and not d.imag.any()
    lower, upper = np.tril(lu, -1) + np.eye(n), np.triu(lu)
    assert np.abs(np.diagonal(upper)).min() >= 1 - n * eps(dtype)
    gap = np.abs(lower @ upper - (top - np.diag(d))).max() / (n * eps(dtype))
    assert gap < THRESH, f"L U departs from a - D by {gap:.3g} n eps"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cholqr_panel_out_of_range_is_factored_again(grid, dtype, monkeypatch):
    """A panel out of CholeskyQR2's range (exactly dependent columns: the Cholesky breaks
    down or the first pass departs from orthonormality) reports 0, and the look-ahead factors
    it again by ``geqrf``: the result still meets the testers' bounds, with the zero on
    ``R``'s diagonal that LAPACK gives."""
    import scipy.linalg as sla

    be = grid.backend
    monkeypatch.setattr(be, "has_geqrt", False)
    monkeypatch.setattr(_qr_local, "CHOLQR_PANEL", True)
    monkeypatch.delenv("BLASMP_QR_PANEL", raising=False)
    m, n, nb = 48, 16, 4
    a = random_matrix(np.random.default_rng(3), (m, n), dtype)
    a[:, 6] = a[:, 5]  # inside the second panel
    verdicts = []
    real = _qr_local._GeqrfSteps.take
    monkeypatch.setattr(
        _qr_local._GeqrfSteps,
        "take",
        lambda self, *args: (lambda st: (verdicts.append(st["redo"]), st)[1])(real(self, *args)),
    )
    fa, tau = _qr_local.geqrf_lookahead(be, be.xp.asarray(a.copy()), nb)
    assert verdicts[1] and not verdicts[0], f"the verdicts per panel: {verdicts}"
    fa, tau = np.asarray(be.asnumpy(fa)), np.asarray(be.asnumpy(tau))
    orgqr = sla.get_lapack_funcs("orgqr", (fa,))
    q, _, info = orgqr(fa.copy(order="F"), tau)
    assert info == 0
    r = np.triu(fa[:n])
    assert_qr(a, q, r, "geqrf_lookahead with a dependent column")
    assert abs(r[6, 6]) <= THRESH * m * eps(dtype) * np.abs(r).max()


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_one_process_qr_uses_the_lookahead_where_streams_are_concurrent(grid, dtype, monkeypatch):
    """Through ``np.linalg.qr``, ``mode='r'`` and ``lstsq``: one process with
    ``backend.concurrent_streams`` (the GPU) runs the blocked QR with look-ahead from
    ``LOOKAHEAD_MIN`` columns on, and the results meet the testers' bounds; smaller matrices
    and several processes do not use it."""
    be = grid.backend
    monkeypatch.setattr(be, "concurrent_streams", True)
    monkeypatch.setattr(_qr_local, "PANEL", 4)
    monkeypatch.setattr(_qr_local, "LOOKAHEAD_MIN", 9)
    monkeypatch.setattr(_qr_local, "Q_BLOCK", 4)
    monkeypatch.delenv("BLASMP_QR_LOCAL_Q_BLOCK", raising=False)
    calls, blocked = [], []
    real = _qr_local.geqrf_lookahead
    monkeypatch.setattr(
        _qr_local, "geqrf_lookahead", lambda *a, **k: (calls.append(1), real(*a, **k))[1]
    )
    real_q = _householder._blocked_q
    monkeypatch.setattr(
        _householder, "_blocked_q", lambda *a: (blocked.append(a[-1]), real_q(*a))[1]
    )
    for m, n in ((23, 17), (8, 8)):
        a = random_matrix(np.random.default_rng(m), (m, n), dtype)
        A = bm.from_numpy(a, block=(3, 3), grid=grid)
        Q, R = np.linalg.qr(A)
        assert_qr(a, Q.to_numpy(), R.to_numpy(), f"np.linalg.qr {m}x{n}")
        R2 = np.linalg.qr(A, mode="r")
        np.testing.assert_allclose(
            np.abs(R2.to_numpy()), np.abs(R.to_numpy()), atol=THRESH * m * eps(dtype) * 10
        )
    b = random_matrix(np.random.default_rng(3), (23, 2), dtype)
    a = random_matrix(np.random.default_rng(23), (23, 17), dtype)
    x = bm.linalg.lstsq(
        bm.from_numpy(a, block=(3, 3), grid=grid), bm.from_numpy(b, block=(3, 3), grid=grid)
    )[0]
    ref = np.linalg.lstsq(a.astype(np.complex128), b.astype(np.complex128), rcond=None)[0]
    err = np.abs(x.to_numpy() - ref).max() / np.abs(ref).max()
    assert err < 1e3 * eps(dtype) * np.linalg.cond(a), f"lstsq through the look-ahead QR: {err:.3g}"
    assert len(calls) == (3 if grid.size == 1 else 0)
    assert blocked == ([4] if grid.size == 1 else [])  # Q of the 23 x 17 matrix, not of 8 x 8


def test_numpy_qr():
    grid = square_grid()
    m, n, nb = 33, 14, 4
    a = random_matrix(np.random.default_rng(2), (m, n), np.float64)
    A = bm.from_numpy(a, block=(nb, nb), grid=grid)
    res = np.linalg.qr(A)
    assert type(res).__name__ == "QRResult"
    assert res.Q.shape == (m, n) and res.R.shape == (n, n)
    assert_qr(a, res.Q.to_numpy(), res.R.to_numpy(), "np.linalg.qr")
    Q, R = np.linalg.qr(A, mode="complete")
    assert Q.shape == (m, m) and R.shape == (m, n)
    assert_qr(a, Q.to_numpy(), R.to_numpy(), "complete")
    R = np.linalg.qr(A, mode="r")
    assert isinstance(R, bm.BlockCyclicArray) and R.shape == (n, n)
    assert np.array_equal(R.to_numpy(), res.R.to_numpy())
    # R agrees with NumPy's up to the signs of its rows
    ref = np.linalg.qr(a, mode="r")
    np.testing.assert_allclose(np.abs(R.to_numpy()), np.abs(ref), atol=1e-12 * n)
    with pytest.raises(NotImplementedError, match="raw"):
        np.linalg.qr(A, mode="raw")
    ai = np.arange(m * n).reshape(m, n) % 11 - 5  # integers are factored in float64, as NumPy's
    Qi, Ri = np.linalg.qr(bm.from_numpy(ai, block=(nb, nb), grid=grid))
    assert Qi.dtype == Ri.dtype == np.linalg.qr(ai).Q.dtype
    assert_qr(ai.astype(np.float64), Qi.to_numpy(), Ri.to_numpy(), "integer input")


@pytest.mark.parametrize("dtype,method", [(np.float64, "householder"), (np.complex64, "cholqr")])
def test_qr_multiply(grid, dtype, method):
    """``Q c`` and ``c Q`` (and with ``conj(Q)``) against the explicit economic ``Q`` of the
    same algorithm: componentwise GEMM-like bound ``k eps |Q| |c|``."""
    from blas3_reference import check_bound

    m, n, nb = (40, 9, 4) if method == "cholqr" else (26, 17, 5)
    rng = np.random.default_rng(5)
    a = random_matrix(rng, (m, n), dtype)
    A = bm.from_numpy(a, block=(nb, nb), grid=grid)
    q, r = (x.to_numpy() for x in qr(A, mode="economic", method=method))
    k = min(m, n)
    for mode in ("left", "right"):
        c = random_matrix(rng, (k, 3) if mode == "left" else (4, m), dtype)
        C = bm.from_numpy(c, block=(3, 2), grid=grid)
        for conjugate in (False, True):
            qq = q.conj() if conjugate else q
            CQ, R = qr_multiply(A, C, mode=mode, conjugate=conjugate, method=method)
            ref = high(qq) @ high(c) if mode == "left" else high(c) @ high(qq)
            scale = np.abs(qq) @ np.abs(c) if mode == "left" else np.abs(c) @ np.abs(qq)
            ok, worst = check_bound(CQ.to_numpy(), ref, scale, 4 * m, dtype)
            assert ok, f"{mode} conjugate={conjugate}: {worst:.3g} x bound"
            assert np.array_equal(R.to_numpy(), r)
        assert np.array_equal(C.to_numpy(), c), "c modified"
        # a vector c is a column for Q c and a row for c Q (SciPy's rule); the product is 1-D
        v = random_matrix(rng, (k if mode == "left" else m, 1), dtype)[:, 0]
        CQ, _ = qr_multiply(A, bm.from_numpy(v, block=3, grid=grid), mode=mode, method=method)
        ref = high(q) @ high(v) if mode == "left" else high(v) @ high(q)
        scale = np.abs(q) @ np.abs(v) if mode == "left" else np.abs(v) @ np.abs(q)
        assert CQ.ndim == 1 and CQ.shape == ref.shape
        ok, worst = check_bound(CQ.to_numpy(), ref, scale, 4 * m, dtype)
        assert ok, f"{mode}, a vector c: {worst:.3g} x bound"
    with pytest.raises(ValueError, match="does not fit"):
        qr_multiply(A, bm.from_numpy(np.ones((m, 2)), block=(4, 2), grid=grid), mode="left")


def test_window_and_views(grid):
    """A window view A[i:, j:] (offsets inside a block) is read in place by CholeskyQR and is
    the working copy of Householder QR (no ViewCopyWarning either way); A.T is materialised;
    non-square blocks are moved with a warning."""
    big = random_matrix(np.random.default_rng(8), (70, 30), np.float64)
    P = bm.from_numpy(big, block=(6, 6), grid=grid)
    cases = (
        ((3, 70), (2, 9), "cholqr"),
        ((5, 40), (1, 30), "householder"),
        ((6, 70), (6, 12), "cholqr"),  # block-aligned: a view whose first block is elsewhere
        ((6, 40), (12, 30), "householder"),
    )
    for rows, cols, method in cases:
        a = big[slice(*rows), slice(*cols)]
        with warnings.catch_warnings():
            warnings.simplefilter("error", bm.ViewCopyWarning)
            Q, R = qr(P[slice(*rows), slice(*cols)], mode="economic", method=method)
        assert_qr(a, Q.to_numpy(), R.to_numpy(), f"window {method}")
    assert np.array_equal(P.to_numpy(), big)
    T = bm.from_numpy(big[:20, :12].T.copy(), block=(5, 5), grid=grid).T  # a 20x12 view
    Q, R = qr(T, mode="economic")
    assert_qr(big[:20, :12], Q.to_numpy(), R.to_numpy(), "A.T")
    N = bm.from_numpy(big[:25, :25], block=(4, 6), grid=grid)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        Q, R = qr(N, method="householder")
    assert any("non-square blocks" in str(w.message) for w in rec) or grid.size == 1
    assert_qr(big[:25, :25], Q.to_numpy(), R.to_numpy(), "non-square blocks")


def test_overwrite_a():
    grid = square_grid()
    a = random_matrix(np.random.default_rng(4), (21, 21), np.float64)
    A = bm.from_numpy(a, block=(4, 4), grid=grid)
    Q, R = qr(A, overwrite_a=True)
    assert_qr(a, Q.to_numpy(), R.to_numpy(), "overwrite_a")
    if grid.size > 1:  # the pipeline factored in A's storage: LAPACK's geqrf layout
        assert np.allclose(np.triu(A.to_numpy()), R.to_numpy(), atol=1e-12)


def test_zero_size():
    grid = square_grid()
    for m, n in ((0, 4), (5, 0)):
        A = bm.from_numpy(np.zeros((m, n)), block=(2, 2), grid=grid)
        Q, R = qr(A, mode="economic")
        assert Q.shape == (m, min(m, n)) and R.shape == (min(m, n), n)
        Q, R = qr(A)
        assert Q.shape == (m, m) and R.shape == (m, n)


def test_bad_input():
    grid = square_grid()
    a = random_matrix(np.random.default_rng(1), (12, 5), np.float64)
    bad = a.copy()
    bad[7, 3] = np.nan
    B = bm.from_numpy(bad, block=(3, 3), grid=grid)
    for mode in ("full", "economic", "r"):
        with pytest.raises(ValueError, match="infs or NaNs"):
            qr(B, mode=mode)
    A = bm.from_numpy(a, block=(3, 3), grid=grid)
    with pytest.raises(NotImplementedError, match="raw"):
        qr(A, mode="raw")
    with pytest.raises(NotImplementedError, match="pivoting"):
        qr(A, pivoting=True)
    with pytest.raises(ValueError, match="mode"):
        qr(A, mode="reduced")
    with pytest.raises(TypeError, match="BlockCyclicArray"):
        qr(a)
    with pytest.raises(ValueError, match="method"):
        qr(A, method="tsqr")
    W = bm.from_numpy(a.T.copy(), block=(3, 3), grid=grid)
    with pytest.raises(ValueError, match="m >= n"):
        qr(W, mode="economic", method="cholqr")
    with pytest.raises(ValueError, match="economic"):
        qr(A, mode="full", method="cholqr")
    with pytest.raises(TypeError, match="must be a BlockCyclicArray, got ndarray"):
        qr_multiply(A, np.ones((5, 2)))


def test_every_rank_agrees_and_repeats(grid):
    """Same bits on every rank's gathered copy, and over repeated calls (races between the
    streams or the exchanges would show as differing bits)."""
    a = random_matrix(np.random.default_rng(6), (30, 22), np.float64)
    A = bm.from_numpy(a, block=(4, 4), grid=grid)
    first = [x.to_numpy() for x in qr(A, method="householder")]
    allq = MPI.COMM_WORLD.allgather(first[0])
    assert all(np.array_equal(allq[0], x) for x in allq)
    for _ in range(1):
        again = [x.to_numpy() for x in qr(A, method="householder")]
        assert all(np.array_equal(x, y) for x, y in zip(first, again, strict=True))


@pytest.mark.parametrize("dtype", DTYPES)
def test_backend_geqrf_orgqr_ormqr(grid, dtype):
    """The local kernels on strided views: geqrf then orgqr and ormqr reproduce a."""
    be = grid.backend
    m, n = 11, 6
    a = random_matrix(np.random.default_rng(7), (m, n), dtype)
    big = np.full((m + 2, n + 3), np.nan, dtype=dtype)
    big[1 : m + 1, 2 : n + 2] = a
    dev = be.asarray(big)
    view = dev[1 : m + 1, 2 : n + 2]
    tau = be.xp.zeros(n, dtype)
    info = be.xp.full(1, -7, dtype=np.int32)
    be.geqrf(view, tau, info, be.compute)
    be.synchronize()
    f = be.asnumpy(dev)[1 : m + 1, 2 : n + 2]
    assert int(be.asnumpy(info)[0]) == 0
    q = be.asarray(np.array(f))
    be.orgqr(q, tau, info, be.compute)
    c = be.asarray(np.triu(f[:n]).astype(dtype))
    cq = be.xp.zeros((m, n), dtype)
    cq[:n] = c
    be.ormqr("L", "N", view, tau, cq, info, be.compute)
    be.synchronize()
    assert_qr(a, be.asnumpy(q), np.triu(f[:n]), "geqrf/orgqr")
    res = np.abs(be.asnumpy(cq) - a).max() / (np.abs(a).max() * m * eps(dtype))
    assert res < THRESH, f"ormqr: {res:.3g}"
    assert np.all(np.isnan(be.asnumpy(dev)[0])), "geqrf wrote outside its view"


# -- the working block (ops/engine/_factor_block.py) -----------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_working_block(grid, dtype, monkeypatch):
    """Householder QR factors in the rule's block where the backend has a "qr" row (the GPU's):
    ``np.linalg.qr``, ``qr_multiply`` and ``lstsq`` (``m >= n`` and ``m < n``) within the
    testers' bounds, their results in the layouts they have without the rule, no
    RedistributionWarning."""
    from blas3_reference import check_bound

    from blasmp_array.ops.engine import _factor_block
    from blasmp_array.ops.lapack.qr import lstsq

    m, n, nb, wb = 41, 37, 3, 8  # on 6 ranks (1 x 6) the rule still finds 4 > 3
    rng = np.random.default_rng(17)
    a = random_matrix(rng, (m, n), dtype)
    c = random_matrix(rng, (n, 2), dtype)
    b = random_matrix(rng, (m, 2), dtype)
    A = bm.from_numpy(a, block=(nb, nb), grid=grid)
    C = bm.from_numpy(c, block=(nb, 2), grid=grid)
    W = bm.from_numpy(np.ascontiguousarray(a.conj().T), block=(nb, nb), grid=grid)  # n x m, wide
    # lstsq's right-hand sides are window views: copied into the operator's workspace, no warning
    Bw = bm.from_numpy(np.vstack([np.zeros((1, 2), dtype), b]), block=(nb, 2), grid=grid)[1:, :]
    Cw = bm.from_numpy(np.vstack([np.zeros((1, 2), dtype), c]), block=(nb, 2), grid=grid)[1:, :]
    calls = [
        lambda: np.linalg.qr(A),
        lambda: qr_multiply(A, C, mode="left"),
        lambda: qr_multiply(A, bm.from_numpy(np.ascontiguousarray(b.T), block=(2, nb), grid=grid)),
        lambda: lstsq(A, Bw),
        lambda: lstsq(W, Cw),
    ]
    plain = [call() for call in calls]  # the layouts without the rule
    table = {"qr": ((0, wb),)}
    monkeypatch.setattr(_factor_block, "TABLE", {grid.backend.name: table})
    monkeypatch.setattr(_factor_block, "MIN_BLOCK", 1)
    monkeypatch.setattr(_factor_block, "MIN_BLOCKS_PER_PROCESS", 1)
    seen: list = []
    factor = _householder.factor
    monkeypatch.setattr(
        _householder, "factor", lambda w, **kw: (seen.append(tuple(w.block)), factor(w, **kw))[1]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", bm.RedistributionWarning)
        warnings.simplefilter("error", bm.ViewCopyWarning)
        got = [call() for call in calls]
    working = _factor_block.working_block(grid.backend.name, grid.shape, n, "qr", nb)
    assert seen == [(working, working)] * len(calls)
    assert working > nb or grid.size == 1
    for before, after in zip(plain, got, strict=True):
        for x, y in zip(before, after, strict=False):
            if isinstance(x, bm.BlockCyclicArray):
                assert y.layout == x.layout, f"{y.layout} where the plain call gives {x.layout}"
    q, r = (x.to_numpy() for x in got[0])
    assert_qr(a, q, r, "np.linalg.qr in the working block")
    qc = got[1][0].to_numpy()
    ok, worst = check_bound(qc, high(q) @ high(c), np.abs(q) @ np.abs(c), 4 * m, dtype)
    assert ok, f"Q c: {worst:.3g} x bound"
    bq = got[2][0].to_numpy()
    ok, worst = check_bound(bq, high(b.T) @ high(q), np.abs(b.T) @ np.abs(q), 4 * m, dtype)
    assert ok, f"b^T Q: {worst:.3g} x bound"
    from test_lstsq import assert_lstsq

    assert_lstsq(a, b, got[3][0].to_numpy(), got[3][1], "lstsq (m > n) in the working block")
    wide = np.ascontiguousarray(a.conj().T)
    assert_lstsq(wide, c, got[4][0].to_numpy(), got[4][1], "lstsq (m < n) in the working block")


def test_gathered_route_in_the_working_block(grid, one_device, monkeypatch):
    """Ranks on one device gather the working copy (the rule's block) and scatter ``Q`` and
    ``R`` in it; the results come back in the layouts of the call without the rule."""
    from blasmp_array.ops.engine import _factor_block
    from blasmp_array.ops.lapack import _qr_gathered

    m, n, nb, wb = 41, 37, 3, 8
    a = random_matrix(np.random.default_rng(19), (m, n), np.float64)
    A = bm.from_numpy(a, block=(nb, nb), grid=grid)
    plain = np.linalg.qr(A)
    monkeypatch.setattr(_factor_block, "TABLE", {grid.backend.name: {"qr": ((0, wb),)}})
    monkeypatch.setattr(_factor_block, "MIN_BLOCK", 1)
    monkeypatch.setattr(_factor_block, "MIN_BLOCKS_PER_PROCESS", 1)
    scattered: list = []
    real = _qr_gathered.scatter_from_backend
    monkeypatch.setattr(
        _qr_gathered,
        "scatter_from_backend",
        lambda *x, **kw: scattered.append(x[2]) or real(*x, **kw),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", bm.RedistributionWarning)
        q, r = np.linalg.qr(A)
    working = _factor_block.working_block(grid.backend.name, grid.shape, n, "qr", nb)
    assert scattered == ([(working, working)] * 2 if grid.size > 1 else [])
    assert q.layout == plain[0].layout and r.layout == plain[1].layout
    assert_qr(a, q.to_numpy(), r.to_numpy(), "gathered QR in the working block")
