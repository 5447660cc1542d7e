"""The fast paths of the NumPy face give what the distributed path gives.

* the 1x1-grid shortcut (one local BLAS call: SYRK, SYR2K, TRMM, SYMM, TRSM) against the panel
  pipeline on the same grid (``method='summa'``, or TRSM's local limit lowered to zero) and
  against NumPy;
* ``A.T @ A`` / ``A.H @ A`` / ``A @ A.T``: the full symmetric (Hermitian) result, its fill done
  locally on one process and by a distributed transpose on several;
* device triangle masks: a NaN in the unreferenced triangle never reaches a result; a NaN in the
  referenced triangle is reported by ``solve_triangular``'s ``check_finite`` on every rank.

Runs on every grid of the rank count (``grid`` fixture) and on a 1x1 grid per process
(``COMM_SELF``, CPU backend only: the GPU backend refuses grids on ``COMM_SELF``).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from mpi4py import MPI

import blasmp_array as bm
from blasmp_array.ops.blas3 import trsm as trsm_module
from blasmp_array.ops.engine._triangle import symmetric_from_triangle

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from blas3_reference import (  # noqa: E402
    DTYPES,
    assert_within_bound,
    high,
    op,
    poison,
    random_matrix,
    sym_from,
    tri_from,
)

BACKEND = os.environ.get("BLASMP_BACKEND", "cpu")
_SELF: list[bm.ProcessGrid] = []


def self_grid() -> bm.ProcessGrid:
    """A 1x1 grid of this process alone (one per test run)."""
    if not _SELF:
        _SELF.append(bm.ProcessGrid(1, 1, comm=MPI.COMM_SELF, backend="cpu"))
    return _SELF[0]


needs_cpu = pytest.mark.skipif(BACKEND != "cpu", reason="1x1 grids on COMM_SELF: CPU backend")


def dist(x: np.ndarray, grid: bm.ProcessGrid, block: tuple[int, int]) -> bm.BlockCyclicArray:
    return bm.from_numpy(x, block=block, grid=grid)


# -- the 1x1 shortcut against the pipeline on the same grid ----------------------------------
@needs_cpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("view", ["N", "T", "H"])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("lower", [True, False])
def test_local_trmm_symm_match_pipeline(dtype, view, side, lower):
    g = self_grid()
    rng = np.random.default_rng(3)
    m, n = 13, 7
    na = m if side == "left" else n
    # a: the matrix of the view, NaN in the triangle the call must not read
    a = poison(random_matrix(rng, (na, na), dtype), "upper" if lower else "lower")
    stored = {"N": a, "T": a.T, "H": a.conj().T}[view]
    X = dist(stored, g, (4, 4))
    A = {"N": X, "T": X.T, "H": X.H}[view]
    b = random_matrix(rng, (m, n), dtype)
    B = dist(b, g, (4, 3) if side == "left" else (3, 4))
    for unit in (False, True):
        fast = bm.linalg.trmm(A, B, side=side, lower=lower, unit_diagonal=unit, alpha=2)
        slow = bm.linalg.trmm(
            A, B, side=side, lower=lower, unit_diagonal=unit, alpha=2, method="summa"
        )
        t = tri_from(a, lower, unit)
        ref = 2 * (high(t) @ high(b) if side == "left" else high(b) @ high(t))
        scale = 2 * (np.abs(t) @ np.abs(b) if side == "left" else np.abs(b) @ np.abs(t))
        assert_within_bound(fast.to_numpy(), ref, scale, na, dtype, "trmm 1x1 local")
        assert_within_bound(slow.to_numpy(), ref, scale, na, dtype, "trmm 1x1 summa")
    c0 = random_matrix(rng, (m, n), dtype)
    fast = bm.linalg.symm(A, B, C=dist(c0, g, B.block), side=side, lower=lower, beta=3)
    slow = bm.linalg.symm(
        A, B, C=dist(c0, g, B.block), side=side, lower=lower, beta=3, method="summa"
    )
    s = sym_from(np.nan_to_num(a, nan=0.0), lower)
    ref = (high(s) @ high(b) if side == "left" else high(b) @ high(s)) + 3 * high(c0)
    scale = (np.abs(s) @ np.abs(b) if side == "left" else np.abs(b) @ np.abs(s)) + 3 * abs(c0)
    assert_within_bound(fast.to_numpy(), ref, scale, na, dtype, "symm 1x1 local")
    assert_within_bound(slow.to_numpy(), ref, scale, na, dtype, "symm 1x1 summa")


@pytest.mark.parametrize("dtype", DTYPES)
def test_backend_trmm_out_of_place(grid, dtype):
    """The local TRMM with ``out`` (the 1x1 shortcut's call): ``out`` gets ``2 op(a) b`` (or
    ``2 b op(a)``) within the bound, ``b`` (a strided view) is unchanged, nothing outside
    ``out``'s view is written."""
    be = grid.backend
    rng = np.random.default_rng(5)
    m, n = 7, 5
    for side, uplo, trans in (("L", "L", "N"), ("R", "U", "T"), ("L", "U", "C")):
        na = m if side == "L" else n
        a = random_matrix(rng, (na, na), dtype)
        big = random_matrix(rng, (m + 2, n + 3), dtype)
        b_dev = be.asarray(big)
        outer = be.asarray(np.full((m + 1, n + 1), np.nan, dtype=dtype))
        be.trmm(
            2,
            be.asarray(a),
            b_dev[1 : m + 1, 2 : n + 2],
            side,
            uplo,
            trans,
            "N",
            be.compute,
            out=outer[1:, 1:],
        )
        be.synchronize()
        got = be.asnumpy(outer)
        assert np.array_equal(be.asnumpy(b_dev), big), "b was written"
        assert np.all(np.isnan(got[0])) and np.all(np.isnan(got[:, 0])), "written outside out"
        t = op(tri_from(a, uplo == "L", False), trans)
        b = big[1 : m + 1, 2 : n + 2]
        ref = 2 * (high(t) @ high(b) if side == "L" else high(b) @ high(t))
        scale = 2 * (np.abs(t) @ np.abs(b) if side == "L" else np.abs(b) @ np.abs(t))
        assert_within_bound(got[1:, 1:], ref, scale, na, dtype, f"trmm out= {side}{uplo}{trans}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_symmetric_from_triangle_on_this_backend(grid, dtype, uplo):
    """The one-process symmetric fill (one CuPy kernel on the GPU, panels on the host), in
    place and into another array, against NumPy; the other triangle starts as NaN."""
    be, xp = grid.backend, grid.backend.xp
    rng = np.random.default_rng(5)
    n = 37
    a = poison(random_matrix(rng, (n, n), dtype), "upper" if uplo == "L" else "lower")
    tri = np.nan_to_num(a, nan=0.0)
    strict = tri - np.diag(np.diag(tri))
    for conjugate in (False, True):
        other = strict.conj().T if conjugate and a.dtype.kind == "c" else strict.T
        want = tri + other
        x = xp.asarray(a).copy()
        out = xp.full((n, n), np.nan, dtype=a.dtype)
        symmetric_from_triangle(xp, x, uplo, conjugate, out)
        np.testing.assert_array_equal(be.asnumpy(out), want)
        symmetric_from_triangle(xp, x, uplo, conjugate, x)  # in place
        np.testing.assert_array_equal(be.asnumpy(x), want)


@needs_cpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans", ["N", "T", "C"])
@pytest.mark.parametrize("lower", [True, False])
def test_local_syr2k_and_syrk_beta_match_pipeline(dtype, trans, lower):
    g = self_grid()
    rng = np.random.default_rng(5)
    n, k = 11, 6
    herm = trans == "C" and np.dtype(dtype).kind == "c"
    shape = (n, k) if trans == "N" else (k, n)
    a, b = random_matrix(rng, shape, dtype), random_matrix(rng, shape, dtype)
    c0 = poison(random_matrix(rng, (n, n), dtype), "upper" if lower else "lower")
    if herm:
        c0[np.diag_indices(n)] = c0.diagonal().real
    A, B = dist(a, g, (4, 4)), dist(b, g, (4, 4))
    opa, opb = op(a, trans), op(b, trans)
    tail = (lambda x: x.conj().T) if herm else (lambda x: x.T)
    ref2 = 2 * high(opa) @ high(tail(opb)) + 2 * high(opb) @ high(tail(opa)) - high(c0)
    c0_abs = np.abs(np.nan_to_num(c0))
    scale2 = 2 * (np.abs(opa) @ np.abs(opb).T + np.abs(opb) @ np.abs(opa).T) + c0_abs
    ref1 = 2 * high(opa) @ high(tail(opa)) - high(c0)
    scale1 = 2 * np.abs(opa) @ np.abs(opa).T + c0_abs
    tri = np.tril if lower else np.triu
    keep = tri(np.ones((n, n), bool))
    for method in ("auto", "summa"):
        C2 = dist(c0, g, (4, 4))
        bm.linalg.syr2k(A, B, C=C2, trans=trans, lower=lower, alpha=2, beta=-1, method=method)
        C1 = dist(c0, g, (4, 4))
        bm.linalg.syrk(A, C=C1, trans=trans, lower=lower, alpha=2, beta=-1, method=method)
        for got, ref, scale, what in ((C2, ref2, scale2, "syr2k"), (C1, ref1, scale1, "syrk")):
            c = got.to_numpy()
            # the other triangle (NaN-poisoned) is untouched, the referenced one updated
            assert np.isnan(c[~keep]).all(), f"{what} {method}: wrote the other triangle"
            assert_within_bound(
                np.where(keep, c, 0), np.where(keep, ref, 0), scale, 2 * k, dtype, what
            )


@needs_cpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans", ["N", "T", "C"])
@pytest.mark.parametrize("lower", [True, False])
def test_local_trsm_matches_pipeline(dtype, trans, lower, monkeypatch):
    g = self_grid()
    rng = np.random.default_rng(7)
    n, k = 14, 5
    a = random_matrix(rng, (n, n), dtype) + n * np.eye(n, dtype=dtype)
    a = poison(a, "upper" if lower else "lower")
    b = random_matrix(rng, (n, k), dtype)
    A, B = dist(a, g, (4, 4)), dist(b, g, (4, 3))
    t = op(tri_from(a, lower, False), trans)
    for local_limit in (None, 0):  # None: one local call; 0: the pipeline on the 1x1 grid
        monkeypatch.setitem(trsm_module._LOCAL_TRSM_MAX_N, "cpu", local_limit)
        x = bm.linalg.solve_triangular(A, B, trans=trans, lower=lower).to_numpy()
        # normwise backward error ||op(A) x - b|| / ((||op(A)|| ||x|| + ||b||) n eps)
        res = np.linalg.norm(high(t) @ high(x) - high(b), np.inf)
        denom = np.linalg.norm(t, np.inf) * np.linalg.norm(x, np.inf) + np.linalg.norm(b, np.inf)
        c = 2.0 if np.dtype(dtype).kind == "c" else 1.0
        assert float(res / denom) <= 4 * c * (n + 2) * np.finfo(dtype).eps, local_limit


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("trans", ["N", "T", "C"])
@pytest.mark.parametrize("lower", [True, False])
def test_one_process_trsm_paths(grid, dtype, side, trans, lower, monkeypatch):
    """On the fixture's 1x1 grid (any backend) one vendor call and the pipeline meet the
    backward-error bound, with alpha and a unit diagonal (larger grids: the pipeline twice)."""
    rng = np.random.default_rng(17)
    n, k = 19, 6
    a = poison(random_matrix(rng, (n, n), dtype) / n, "upper" if lower else "lower")
    np.fill_diagonal(a, np.nan)  # unit diagonal: never read
    b = random_matrix(rng, (n, k) if side == "left" else (k, n), dtype)
    A = dist(a, grid, (4, 4))
    B = dist(b, grid, (4, 3) if side == "left" else (3, 4))
    t = op(tri_from(a, lower, True), trans)
    for limit in (None, 0):  # None: one local call; 0: the pipeline on the 1x1 grid
        monkeypatch.setitem(trsm_module._LOCAL_TRSM_MAX_N, grid.backend.name, limit)
        x = bm.linalg.trsm(
            A, B, side=side, lower=lower, trans=trans, unit_diagonal=True, alpha=2
        ).to_numpy()
        lhs = high(t) @ high(x) if side == "left" else high(x) @ high(t)
        res = np.linalg.norm(lhs - 2 * high(b), np.inf)
        norm_b = 2 * np.linalg.norm(b, np.inf)
        denom = np.linalg.norm(t, np.inf) * np.linalg.norm(x, np.inf) + norm_b
        c = 2.0 if np.dtype(dtype).kind == "c" else 1.0
        assert float(res / denom) <= 4 * c * (n + 2) * np.finfo(dtype).eps, limit


# -- A.T @ A on every grid ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form", ["ATA", "AAT", "AHA", "AAH"])
@pytest.mark.parametrize("shape,block", [((13, 9), (4, 4)), ((7, 10), (3, 5)), ((5, 5), (8, 8))])
def test_matmul_self_product_full_result(grid, dtype, form, shape, block):
    rng = np.random.default_rng(11)
    a = random_matrix(rng, shape, dtype)
    A = dist(a, grid, block)
    left = {"ATA": A.T, "AAT": A, "AHA": A.H, "AAH": A}[form]
    right = {"ATA": A, "AAT": A.T, "AHA": A, "AAH": A.H}[form]
    la = {"ATA": a.T, "AAT": a, "AHA": a.conj().T, "AAH": a}[form]
    ra = {"ATA": a, "AAT": a.T, "AHA": a, "AAH": a.conj().T}[form]
    got = (left @ right).to_numpy()
    ref = high(la) @ high(ra)
    assert_within_bound(got, ref, np.abs(la) @ np.abs(ra), la.shape[1], dtype, f"{form}")
    if form in ("ATA", "AAT"):
        np.testing.assert_array_equal(got, got.T)  # the fill copies: exactly symmetric
    else:
        np.testing.assert_array_equal(got, got.conj().T)


@needs_cpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_self_product_local_equals_distributed(grid, dtype):
    """The 1x1 shortcut (SYRK + local mirror) gives what the grid computes, within the bound."""
    rng = np.random.default_rng(13)
    a = random_matrix(rng, (17, 9), dtype)
    dist_result = (dist(a, grid, (4, 4)).H @ dist(a, grid, (4, 4))).to_numpy()
    local = dist(a, self_grid(), (4, 4))
    local_result = (local.H @ local).to_numpy()
    ah = a.conj().T
    scale = np.abs(ah) @ np.abs(a)
    assert_within_bound(local_result, high(ah) @ high(a), scale, 17, dtype, "1x1")
    assert_within_bound(dist_result, high(ah) @ high(a), scale, 17, dtype, "grid")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "views,shape", [("NN", (7, 7, 5)), ("TN", (6, 6, 4)), ("NT", (13, 3, 8)), ("TT", (5, 0, 6))]
)
def test_one_process_gemm_matches_the_general_path(grid, dtype, views, shape, monkeypatch):
    """``A @ B`` on one process takes the local product (``gemm_one_process``), with the
    general path's layout and result (``k = 0`` included: zeros, never the NaN poison); grids
    of several processes, conjugated views and mixed dtypes take the general path."""
    from blasmp_array.ops.blas3 import matmul as matmul_module

    m, k, n = shape
    rng = np.random.default_rng(17)
    a = random_matrix(rng, (k, m) if views[0] == "T" else (m, k), dtype)
    b = random_matrix(rng, (n, k) if views[1] == "T" else (k, n), dtype)
    kb = 4 if views[0] == "T" else 3  # the K block of op(A); op(B)'s conforms to it
    A, B = dist(a, grid, (4, 3)), dist(b, grid, (5, kb) if views[1] == "T" else (kb, 5))
    left, right = (A.T if views[0] == "T" else A), (B.T if views[1] == "T" else B)
    la, ra = (a.T if views[0] == "T" else a), (b.T if views[1] == "T" else b)
    taken = []
    real = matmul_module.gemm_one_process
    monkeypatch.setattr(
        matmul_module, "gemm_one_process", lambda x, y: taken.append(real(x, y)) or taken[-1]
    )
    got = left @ right
    assert (taken[-1] is not None) == (grid.size == 1)
    assert got.shape == (m, n) and got.block == (left.block[0], right.block[1])
    monkeypatch.setattr(matmul_module, "gemm_one_process", lambda x, y: None)
    general = left @ right
    assert general.layout == got.layout
    scale = np.abs(la) @ np.abs(ra)
    assert_within_bound(got.to_numpy(), high(la) @ high(ra), scale, max(k, 1), dtype, views)
    monkeypatch.setattr(matmul_module, "gemm_one_process", real)
    if grid.size == 1 and m == k:  # a square op(A) times itself: GEMM; times its transpose: SYRK
        assert real(left, left) is not None and real(left, left.T) is None
        assert_within_bound(
            (left @ left).to_numpy(), high(la) @ high(la), np.abs(la) @ np.abs(la), k, dtype
        )
    assert real(A.conj(), A.T) is None or np.dtype(dtype).kind != "c"
    other = {"f": "d", "d": "f", "F": "D", "D": "F"}[np.dtype(dtype).char]  # mixed precision
    assert real(left, dist(ra.astype(other), grid, (kb, 5))) is None


# -- triangles: NaN outside is never read, NaN inside is reported ------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular_check_finite_reads_only_its_triangle(grid, dtype, lower, unit):
    rng = np.random.default_rng(17)
    n = 11
    a = random_matrix(rng, (n, n), dtype) + n * np.eye(n, dtype=dtype)
    a = poison(a, "upper" if lower else "lower")
    if unit:
        a = poison(a, "diag")
    b = random_matrix(rng, (n, 3), dtype)
    A, B = dist(a, grid, (3, 3)), dist(b, grid, (3, 2))
    x = bm.linalg.solve_triangular(A, B, lower=lower, unit_diagonal=unit).to_numpy()
    assert np.isfinite(x).all()
    t = tri_from(a, lower, unit)
    res = np.linalg.norm(high(t) @ high(x) - high(b), np.inf)
    denom = np.linalg.norm(t, np.inf) * np.linalg.norm(x, np.inf) + np.linalg.norm(b, np.inf)
    c = 2.0 if np.dtype(dtype).kind == "c" else 1.0
    assert float(res / denom) <= 4 * c * (n + 2) * np.finfo(dtype).eps
    # a NaN (or inf) inside the referenced triangle: ValueError on every rank
    for i, j, bad in ((n - 1, 0, np.nan), (4, 4, np.inf), (6, 2, np.nan)):
        if unit and i == j:
            continue
        r, cix = (i, j) if lower else (j, i)
        a2 = a.copy()
        a2[r, cix] = bad
        with pytest.raises(ValueError, match="infs or NaNs"):
            bm.linalg.solve_triangular(dist(a2, grid, (3, 3)), B, lower=lower, unit_diagonal=unit)
    b2 = b.copy()
    b2[n // 2, 1] = np.nan
    with pytest.raises(ValueError, match=r"\(b does\)"):
        bm.linalg.solve_triangular(A, dist(b2, grid, (3, 2)), lower=lower, unit_diagonal=unit)


@pytest.mark.parametrize("dtype", DTYPES)
def test_syrk_beta_scales_only_its_triangle(grid, dtype):
    rng = np.random.default_rng(19)
    n, k = 10, 4
    a = random_matrix(rng, (n, k), dtype)
    for lower in (True, False):
        c0 = poison(random_matrix(rng, (n, n), dtype), "upper" if lower else "lower")
        C = dist(c0, grid, (3, 3))
        bm.linalg.syrk(dist(a, grid, (3, 3)), C=C, lower=lower, beta=0.5)
        c = C.to_numpy()
        keep = (np.tril if lower else np.triu)(np.ones((n, n), bool))
        assert np.isnan(c[~keep]).all()
        ref = high(a) @ high(a.T) + 0.5 * high(c0)
        scale = np.abs(a) @ np.abs(a.T) + 0.5 * np.abs(np.nan_to_num(c0))
        assert_within_bound(np.where(keep, c, 0), np.where(keep, ref, 0), scale, k, dtype, "")


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_self_product_of_two_equal_views_is_recognised(grid, dtype, monkeypatch):
    """``A[v].T @ A[v]`` (two view objects of one window) runs SYRK/HERK, on every rank alike;
    a different window of the same parent is a GEMM."""
    from blasmp_array.ops.blas3 import matmul as matmul_module

    calls: list[str] = []
    rank_k = matmul_module.rank_k
    monkeypatch.setattr(
        matmul_module, "rank_k", lambda *a, **k: (calls.append(a[0]), rank_k(*a, **k))[1]
    )
    rng = np.random.default_rng(23)
    a = random_matrix(rng, (16, 12), dtype)
    A = dist(a, grid, (4, 4))
    v, w = (slice(4, 16), slice(0, 8)), (slice(0, 12), slice(0, 8))
    got = (A[v].H @ A[v]).to_numpy()
    av = a[4:16, 0:8]
    ref = high(av.conj().T) @ high(av)
    assert_within_bound(got, ref, np.abs(av.T) @ np.abs(av), 12, dtype, "A[v].H @ A[v]")
    assert len(calls) == 1
    other = (A[w].H @ A[v]).to_numpy()  # another window: GEMM
    aw = a[0:12, 0:8]
    scale = np.abs(aw.T) @ np.abs(av)
    assert_within_bound(other, high(aw.conj().T) @ high(av), scale, 12, dtype, "gemm")
    assert len(calls) == 1


# -- elementwise operands of one layout: one local call, none of the engine --------------------
def test_same_layout_ufuncs_skip_the_engine_and_match_numpy(grid, monkeypatch):
    """Arrays of one layout on one grid beside scalars combine with one local ufunc call per
    rank (the engine is never entered), into fresh storage, with NumPy's values and dtypes;
    views, broadcasts, bad result dtypes and integer powers still take the engine."""
    from blasmp_array.ops.engine import elementwise as ew

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((9, 7)), rng.standard_normal((9, 7))
    i = rng.integers(-5, 5, (9, 7)).astype(np.int32)
    x, y = rng.standard_normal(11), rng.standard_normal(11)
    A, B, K = (bm.from_numpy(v, block=(2, 3), grid=grid) for v in (a, b, i))
    X, Y = (bm.from_numpy(v, block=3, grid=grid) for v in (x, y))
    entered = []
    real = ew.elementwise
    monkeypatch.setattr(ew, "elementwise", lambda *p, **k: entered.append(1) or real(*p, **k))
    for got, want in (
        (A + B, a + b),
        (A * 2.0, a * 2.0),
        (3 - A, 3 - a),
        (K / 2, i / 2),
        (K + 1, i + 1),
        (K * np.float32(1.5), i * np.float32(1.5)),
        (A > B, a > b),
        (np.logical_and(A, K), np.logical_and(a, i)),
        (np.sqrt(np.abs(A)), np.sqrt(np.abs(a))),
        (X * Y, x * y),
        (np.maximum(X, 0.0), np.maximum(x, 0.0)),
        (A**2, a**2),
    ):
        assert isinstance(got, bm.BlockCyclicArray) and got.shape == want.shape
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        np.testing.assert_array_equal(got.to_numpy(), want)
    assert not entered
    S = A + B
    assert not S.shares_storage(A) and not S.shares_storage(B)
    C = bm.from_numpy(b, block=(3, 2), grid=grid)  # another layout: redistributed
    for engine in (lambda: A.T + B.T, lambda: A + X[:7], lambda: K**2):
        entered.clear()
        engine()
        assert entered
    entered.clear()
    with pytest.warns(bm.RedistributionWarning):
        np.testing.assert_array_equal((A + C).to_numpy(), a + b)
    assert entered
    entered.clear()
    with pytest.raises(TypeError, match="float16"):
        np.sqrt(A > 0)  # NumPy gives float16 for bool, which arrays do not hold
    with pytest.raises(ValueError, match="negative integer powers"):
        K**-1


def test_one_process_allgather_returns_copies():
    """One process's allgather skips the pickled round trip but still hands back copies of
    arrays (a caller may write into what it gathered)."""
    be = bm.ProcessGrid(1, 1, comm=MPI.COMM_SELF).backend if BACKEND == "cpu" else None
    if be is None:
        pytest.skip("a 1x1 grid on COMM_SELF: CPU backend")
    v = np.arange(4.0)
    (got,) = be.allgather(v)
    got[0] = 9.0
    assert v[0] == 0.0
    part = (1.5, 2)
    assert be.allgather(part) == [part] and be.allreduce(3.0) == 3.0
    assert be.allgather([1, 2]) == [[1, 2]]
