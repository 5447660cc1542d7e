"""Window views: submatrices that start inside a block (``A[i0:i1, j0:j1]`` with ``i0 % mb``
or ``j0 % nb`` nonzero, spanning several blocks), which are not block-cyclic matrices.

Every method, NumPy function, ufunc and operator is run on such windows (random shapes, blocks,
grids and offsets: the same draws on every rank) and compared with NumPy on the gathered
matrix; writes through a window land in the parent and nowhere else (the rest of the parent is
NaN-poisoned and checked); GEMM reads windows in place (no ViewCopyWarning)."""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mpi4py import MPI

import blasmp_array as bm
from blasmp_array import linalg
from blasmp_array.ops.engine.indexing import window_is_view

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from blas3_reference import assert_within_bound, eps, high  # noqa: E402
from conftest import cached_grid, grid_shapes  # noqa: E402

PROPERTY = settings(
    max_examples=15,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def _h(result):
    """A reduction's result on the host (an axis reduction is a distributed vector)."""
    return result.to_numpy() if isinstance(result, bm.BlockCyclicArray) else result


def _same_everywhere(value) -> bool:
    mine = repr(value)
    return all(x == mine for x in MPI.COMM_WORLD.allgather(mine))


def _inside(draw, n: int, b: int, min_len: int = 2) -> tuple[int, int]:
    """A window ``[i0, i1)`` of a length-``n`` dimension starting inside a block when the
    dimension allows it (``i0 % b != 0``), at least ``min_len`` long where ``n`` allows."""
    starts = [i for i in range(n) if i % b] or list(range(n))
    i0 = draw(st.sampled_from(starts))
    i1 = draw(st.integers(min(n, i0 + min_len), n)) if i0 < n else n
    return i0, max(i1, i0 + 1)


def _case(data, dtype=np.float64, square=False):
    """A grid, a parent ``A`` (and its NumPy copy) and a window of it starting inside a block."""
    gshape = data.draw(st.sampled_from(grid_shapes(MPI.COMM_WORLD.Get_size())))
    grid = cached_grid(*gshape)
    mb = data.draw(st.integers(2, 5))
    nb = mb if square else data.draw(st.integers(2, 5))
    m = data.draw(st.integers(mb + 2, 19))
    n = m if square else data.draw(st.integers(nb + 2, 19))
    rows = _inside(data.draw, m, mb)
    cols = rows if square else _inside(data.draw, n, nb)
    if square:
        n = m
    seed = data.draw(st.integers(0, 2**16))
    a = np.random.default_rng(seed).standard_normal((m, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * np.random.default_rng(seed + 1).standard_normal((m, n))
    a = a.astype(dtype)
    A = bm.from_numpy(a, block=(mb, nb), grid=grid)
    return grid, A, a, rows, cols


def _view(A, rows, cols):
    with warnings.catch_warnings():
        warnings.simplefilter("error", bm.RedistributionWarning)  # indexing never copies
        V = A[rows[0] : rows[1], cols[0] : cols[1]]
    assert V.is_window == (not window_is_view(A.layout, rows, cols))
    return V


def _sum_close(got, ref, absref, k, dtype):
    assert _same_everywhere(got)
    bound = 4 * max(k, 1) * eps(dtype) * np.asarray(absref) + np.finfo(np.float64).tiny
    assert np.all(np.abs(np.asarray(got, np.complex128) - ref) <= bound), (got, ref)


# -- reads: elements, windows of windows, methods, functions, ufuncs -------------------------
@PROPERTY
@given(data=st.data())
def test_reads_match_numpy(data):
    dtype = data.draw(st.sampled_from([np.float64, np.complex64]))
    grid, A, a, rows, cols = _case(data, dtype)
    V = _view(A, rows, cols)
    v = a[rows[0] : rows[1], cols[0] : cols[1]]
    h, w = v.shape
    np.testing.assert_array_equal(V.to_numpy(), v)
    np.testing.assert_array_equal(V.T.to_numpy(), v.T)
    np.testing.assert_array_equal(V.conj().to_numpy(), v.conj())
    i, j = data.draw(st.integers(0, h - 1)), data.draw(st.integers(0, w - 1))
    assert V[i, j] == v[i, j] and _same_everywhere(V[i, j])
    assert V.T[j, i] == v[i, j] and V.conj()[i, j] == np.conj(v[i, j])
    # a window of the window (composed with the parent's offset, no copy)
    W = V[i:h, j:w]
    np.testing.assert_array_equal(W.to_numpy(), v[i:h, j:w])
    np.testing.assert_array_equal(V[:, j].to_numpy(), v[:, j])
    assert len(V) == h and V.reshape(h, w) is V and V.shape == (h, w)
    with warnings.catch_warnings():
        warnings.simplefilter("error", bm.RedistributionWarning)  # reduced in the parent
        for X, x in ((V, v), (V.T, v.T)):
            for axis in (None, 0, 1):
                k = x.size if axis is None else x.shape[axis]
                ax_abs = np.abs(x).astype(np.float64)
                _sum_close(_h(X.sum(axis=axis)), x.sum(axis=axis), ax_abs.sum(axis=axis), k, dtype)
                _sum_close(
                    _h(X.mean(axis=axis)), x.mean(axis=axis), ax_abs.mean(axis=axis), k, dtype
                )
                var_ref = x.var(axis=axis)
                _sum_close(_h(X.var(axis=axis)), var_ref, 4 * (ax_abs**2).mean(axis=axis), k, dtype)
                if dtype == np.float64:
                    np.testing.assert_array_equal(_h(X.max(axis=axis)), x.max(axis=axis))
                    np.testing.assert_array_equal(_h(X.min(axis=axis)), x.min(axis=axis))
                    np.testing.assert_array_equal(_h(X.any(axis=axis)), x.any(axis=axis))
                    np.testing.assert_array_equal(_h(X.argmin(axis=axis)), x.argmin(axis=axis))
                    np.testing.assert_array_equal(_h(X.argmax(axis=axis)), x.argmax(axis=axis))
        for ord_ in ("fro", 1, np.inf):
            ref = np.linalg.norm(v, ord_)
            _sum_close(np.linalg.norm(V, ord_), ref, ref, v.size, dtype)
            ref = np.linalg.norm(v.T, ord_)
            _sum_close(np.linalg.norm(V.T, ord_), ref, ref, v.size, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bm.ViewCopyWarning)
        for axis in (None, 0, 1):
            np.testing.assert_array_equal(
                _h((V.real > 0).all(axis=axis)), (v.real > 0).all(axis=axis)
            )
        _sum_close(np.trace(V), np.trace(v), np.abs(np.diagonal(v)).sum(), min(h, w), dtype)
        np.testing.assert_array_equal(np.diagonal(V).to_numpy(), np.diagonal(v))
        # elementwise: bitwise equal (one IEEE operation per element, same as NumPy's)
        np.testing.assert_array_equal((V * V + 1).to_numpy(), v * v + 1)
        np.testing.assert_array_equal((2 * V.T).to_numpy(), 2 * v.T)
        np.testing.assert_array_equal(
            np.where(V.real > 0, V, 0).to_numpy(), np.where(v.real > 0, v, 0)
        )
        np.testing.assert_array_equal(V.real.to_numpy(), v.real)
        np.testing.assert_array_equal(V.copy().to_numpy(), v)
        np.testing.assert_array_equal(V.astype(np.complex128).to_numpy(), v.astype(np.complex128))
        assert bool(np.allclose(V, V.copy()))
    np.testing.assert_array_equal(A.to_numpy(), a)  # reads change nothing


# -- writes: through the window into the parent, nothing else ---------------------------------
@PROPERTY
@given(data=st.data())
def test_writes_land_in_the_parent_only(data):
    grid, A, a, rows, cols = _case(data)
    (i0, i1), (j0, j1) = rows, cols
    h, w = i1 - i0, j1 - j0
    P = bm.full(A.shape, np.nan, block=A.block, grid=grid)
    p = np.full(a.shape, np.nan)
    V = _view(P, rows, cols)

    def check(what):
        np.testing.assert_array_equal(P.to_numpy(), p, err_msg=what)

    V[...] = 1.5
    p[i0:i1, j0:j1] = 1.5
    check("V[...] = scalar")
    V.fill(-2.0)
    p[i0:i1, j0:j1] = -2.0
    check("V.fill")
    x = np.random.default_rng(h * w).standard_normal((h, w))
    V[1:, :] = x[1:, :]
    p[i0 + 1 : i1, j0:j1] = x[1:, :]
    check("V[1:, :] = numpy")
    V[0, 0] = 7.0
    p[i0, j0] = 7.0
    check("V[0, 0] = scalar")
    V.T[...] = x.T[::-1]  # through the transposed window
    p[i0:i1, j0:j1] = x.T[::-1].T
    check("V.T[...] = numpy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bm.RedistributionWarning)
        V[...] = A[:h, :w]  # a BlockCyclicArray in another place: one exchange
        p[i0:i1, j0:j1] = a[:h, :w]
        check("V[...] = BlockCyclicArray")
        V += 1.0  # an in-place ufunc: out= a window view
        p[i0:i1, j0:j1] += 1.0
        check("V += 1")
        np.multiply(A[:h, :w], 3.0, out=V)
        p[i0:i1, j0:j1] = a[:h, :w] * 3.0
        check("np.multiply(..., out=V)")
        np.matmul(A[:h, :2], A[:2, :w], out=V)
        ref = high(a[:h, :2]) @ high(a[:2, :w])
        got = P.to_numpy()
        assert_within_bound(
            got[i0:i1, j0:j1], ref, np.abs(a[:h, :2]) @ np.abs(a[:2, :w]), 2, np.float64, "out=V"
        )
        p[i0:i1, j0:j1] = got[i0:i1, j0:j1]
        check("np.matmul(..., out=V)")


# -- operators: GEMM folds the window; the others copy it, and write back -----------------------
@PROPERTY
@given(data=st.data())
def test_gemm_reads_windows_in_place(data):
    grid, A, a, rows, cols = _case(data)
    V = _view(A, rows, cols)
    v = a[rows[0] : rows[1], cols[0] : cols[1]]
    h, w = v.shape
    mb, nb = A.block
    # B conforms with V's K blocking (nb); its window starts inside a block too
    kb = data.draw(st.integers(2, 5))
    b = np.random.default_rng(h + w).standard_normal((w + 3, 2 * kb + 3))
    B = bm.from_numpy(b, block=(nb, kb), grid=grid)
    W, wv = B[1 : w + 1, 1:], b[1 : w + 1, 1:]
    Bt = bm.from_numpy(np.ascontiguousarray(b.T), block=(kb, nb), grid=grid)
    Wt = Bt[1:, 1 : w + 1]  # the same numbers, stored transposed
    Vt = bm.from_numpy(np.ascontiguousarray(a.T), block=(nb, mb), grid=grid)
    Vt = Vt[cols[0] : cols[1], rows[0] : rows[1]]
    scale = np.abs(v) @ np.abs(wv)
    with warnings.catch_warnings():
        warnings.simplefilter("error", bm.RedistributionWarning)  # no copy of any operand
        for X, Y, what in (
            (V, W, "V @ W"),
            (Vt.T, W, "Vt.T @ W"),
            (V, Wt.T, "V @ Wt.T"),
            (Vt.T, Wt.T, "Vt.T @ Wt.T"),
        ):
            got = (X @ Y).to_numpy()
            assert_within_bound(got, high(v) @ high(wv), scale, w, np.float64, what)
        got = linalg.gemm(V, W, alpha=2.0).to_numpy()
        assert_within_bound(got, 2 * high(v) @ high(wv), 2 * scale, w, np.float64, "alpha")
        # SYRK reads windows in place too: A.T @ A and A @ A.T of a window, SYR2K of two
        for got, ref, sc, k, what in (
            ((V.T @ V).to_numpy(), high(v).T @ high(v), np.abs(v).T @ np.abs(v), h, "V.T @ V"),
            ((V @ V.T).to_numpy(), high(v) @ high(v).T, np.abs(v) @ np.abs(v).T, w, "V @ V.T"),
        ):
            assert_within_bound(got, ref, sc, k, np.float64, what)
        U, u = A[rows[0] : rows[1], : cols[1] - cols[0]], a[rows[0] : rows[1], :w]
        got = np.tril(linalg.syr2k(V, U, lower=True).to_numpy())
        ref = high(v) @ high(u).T + high(u) @ high(v).T
        sc = np.abs(v) @ np.abs(u).T + np.abs(u) @ np.abs(v).T
        assert_within_bound(got, np.tril(ref), np.tril(sc), 2 * w, np.float64, "syr2k(V, U)")
    # into a window of a NaN-poisoned C (a working copy, written back), beta reads it
    C = bm.full((h + 3, wv.shape[1] + 2), np.nan, block=(mb, kb), grid=grid)
    Cv = C[1 : h + 1, 1 : wv.shape[1] + 1]
    Cv[...] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", bm.RedistributionWarning)  # C's window: in place too
        out = linalg.gemm(V, W, C=Cv, beta=-1.0)
    assert out is Cv
    c = C.to_numpy()
    assert_within_bound(
        c[1 : h + 1, 1 : wv.shape[1] + 1], high(v) @ high(wv) - 1, scale + 1, w, np.float64, "C=V"
    )
    mask = np.ones(c.shape, bool)
    mask[1 : h + 1, 1 : wv.shape[1] + 1] = False
    assert np.isnan(c[mask]).all()
    np.testing.assert_array_equal(A.to_numpy(), a)  # inputs unchanged
    np.testing.assert_array_equal(B.to_numpy(), b)


@PROPERTY
@given(data=st.data())
def test_other_operators_on_windows(data):
    grid, A, a, rows, cols = _case(data, square=True)
    V = _view(A, rows, cols)
    v = a[rows[0] : rows[1], cols[0] : cols[1]]
    n = v.shape[0]
    t = np.tril(v) + n * np.eye(n)
    spd = v @ v.T + n * np.eye(n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bm.ViewCopyWarning)
        V[...] = t  # V: lower triangular, well conditioned
        S = linalg.syrk(V, lower=True).to_numpy()
        assert_within_bound(
            np.tril(S),
            np.tril(high(t) @ high(t).T),
            np.tril(np.abs(t) @ np.abs(t).T),
            n,
            np.float64,
            "syrk(V)",
        )
        got = linalg.trmm(V, V.T, lower=True).to_numpy()
        assert_within_bound(
            got, high(t) @ high(t).T, np.abs(t) @ np.abs(t).T, n, np.float64, "trmm(V, V.T)"
        )
        X = linalg.solve_triangular(V, V.T, lower=True).to_numpy()
        res = np.linalg.norm(t @ X - t.T) / (np.linalg.norm(t) * np.linalg.norm(X) * n)
        assert res <= 4 * eps(np.float64)
        # trmm overwrite_b into a window of B: written back into the parent
        B = bm.full(A.shape, np.nan, block=A.block, grid=grid)
        Bv = B[rows[0] : rows[1], cols[0] : cols[1]]
        Bv[...] = np.ones((n, n))
        out = linalg.trmm(V, Bv, lower=True, overwrite_b=True)
        assert out is Bv
        got = B.to_numpy()
        assert_within_bound(
            got[rows[0] : rows[1], cols[0] : cols[1]],
            high(t) @ np.ones((n, n)),
            np.abs(t) @ np.ones((n, n)),
            n,
            np.float64,
            "trmm overwrite_b",
        )
        mask = np.ones(got.shape, bool)
        mask[rows[0] : rows[1], cols[0] : cols[1]] = False
        assert np.isnan(got[mask]).all()
        # the factorizations read a copy of the window
        V[...] = spd
        L = linalg.cholesky(V, lower=True).to_numpy()
        res = np.linalg.norm(L @ L.T - spd) / (np.linalg.norm(spd) * n)
        assert res <= 8 * eps(np.float64)
        x = np.linalg.solve(V, A[rows[0] : rows[1], :1]).to_numpy()
        r = np.linalg.norm(spd @ x - a[rows[0] : rows[1], :1]) / (
            np.linalg.norm(spd) * np.linalg.norm(x) * n
        )
        assert r <= 8 * eps(np.float64)
    want = a.copy()
    want[rows[0] : rows[1], cols[0] : cols[1]] = spd
    np.testing.assert_array_equal(A.to_numpy(), want)


def test_operators_that_copy_say_so(grid):
    A = bm.random.standard_normal((12, 12), seed=3, block=4, grid=grid)
    V = A[1:11, 1:11]
    if not V.is_window:
        pytest.skip("on a 1x1 grid every window is a view")
    with pytest.warns(bm.ViewCopyWarning, match=r"window \[1:11, 1:11\].*copied"):
        _ = V + 1  # elementwise operations work on stored local matrices
    with warnings.catch_warnings():
        warnings.simplefilter("error", bm.ViewCopyWarning)
        V.to_numpy()  # a gather is an explicit copy: no warning
        V.copy()
        np.linalg.det(V)  # the factorisations' working copy is the only copy
        V.sum(axis=0), V.max(), np.linalg.norm(V)  # reductions read the parent
        _ = V @ A[1:11, 2:5]  # GEMM, SYRK and TRSM fold the window
        _ = V.T @ V
        _ = linalg.solve_triangular(V, A[1:11, 0:4], lower=True)


def test_bad_writes_through_windows_change_nothing(grid):
    A = bm.random.standard_normal((12, 10), seed=4, block=(4, 3), grid=grid)
    a = A.to_numpy()
    V = A[1:11, 1:9]
    with pytest.raises(ValueError, match="could not broadcast"):
        V[...] = np.ones((3, 3))
    with pytest.raises(ValueError, match="cannot assign a BlockCyclicArray of shape"):
        V[...] = A[:3, :3]
    with pytest.raises(IndexError, match="out of bounds"):
        V[10, 0] = 1.0
    with pytest.raises(IndexError, match="step"):
        V[::2, :] = 1.0
    with pytest.raises(TypeError, match="complex"):
        V[...] = 1j
    Z = A.astype(np.complex128)
    with pytest.raises(ValueError, match="lazy conjugated view"):
        Z[1:11, 1:9].conj()[...] = 1.0
    np.testing.assert_array_equal(A.to_numpy(), a)
    np.testing.assert_array_equal(Z.to_numpy(), a)


def _square_window_case(data):
    """A grid, a square block ``b``, a window order ``n`` and offsets ``(i0, j0)`` (rows inside
    a block, columns anywhere), ``k`` right-hand sides blocked by ``kb``, and a generator."""
    gshape = data.draw(st.sampled_from(grid_shapes(MPI.COMM_WORLD.Get_size())))
    b = data.draw(st.integers(2, 4))
    n = data.draw(st.integers(b + 1, 3 * b + 2))
    i0, j0 = data.draw(st.integers(1, b + 1)), data.draw(st.integers(0, b + 1))
    k, kb = data.draw(st.integers(1, 7)), data.draw(st.integers(1, 4))
    rng = np.random.default_rng(n * 100 + i0 * 10 + j0)
    return cached_grid(*gshape), b, n, i0, j0, k, kb, rng


@PROPERTY
@given(data=st.data())
def test_symm_and_trmm_read_windows_in_place(data):
    """Symmetric and triangular windows at any offsets (rows and columns offset differently,
    inside blocks): their triangles are the window's own, gathered and masked in place."""
    grid, b, n, i0, j0, k, kb, rng = _square_window_case(data)
    a = rng.standard_normal((n + i0 + 1, n + j0 + 2))
    A = bm.from_numpy(a, block=b, grid=grid)
    V, v = A[i0 : i0 + n, j0 : j0 + n], a[i0 : i0 + n, j0 : j0 + n]
    bl = rng.standard_normal((n + 1, k + 1))  # side='L': B is n x k, rows blocked like A
    br = rng.standard_normal((k + 2, n + 1))  # side='R': B is k x n
    BL = bm.from_numpy(bl, block=(b, kb), grid=grid)[1:, 1:]
    BR = bm.from_numpy(br, block=(kb, b), grid=grid)[2:, 1:]
    wl, wr = bl[1:, 1:], br[2:, 1:]
    with warnings.catch_warnings():
        warnings.simplefilter("error", bm.RedistributionWarning)  # nothing is copied
        for lower in (True, False):
            tri = np.tril if lower else np.triu
            s = tri(v) + tri(v, -1 if lower else 1).T
            for side, B, w in (("L", BL, wl), ("R", BR, wr)):
                got = linalg.symm(V, B, side=side, lower=lower).to_numpy()
                ref, sc = (
                    (s @ w, np.abs(s) @ np.abs(w))
                    if side == "L"
                    else (w @ s, np.abs(w) @ np.abs(s))
                )
                assert_within_bound(got, ref, sc, n, np.float64, f"symm {side} {lower}")
                for trans, unit in (("N", False), ("T", True)):
                    t = tri(v)
                    if unit:
                        t = t - np.diag(np.diag(t)) + np.eye(n)
                    t = t.T if trans == "T" else t
                    got = linalg.trmm(
                        V, B, side=side, lower=lower, trans=trans, unit_diagonal=unit
                    ).to_numpy()
                    ref, sc = (
                        (t @ w, np.abs(t) @ np.abs(w))
                        if side == "L"
                        else (w @ t, np.abs(w) @ np.abs(t))
                    )
                    assert_within_bound(got, ref, sc, n, np.float64, f"trmm {side}{lower}{trans}")
        # outputs at offsets inside blocks, written in place: SYMM's C, TRMM's and TRSM's B
        C = bm.full((n + 2, k + 3), np.nan, block=(b, kb), grid=grid)
        Cv = C[1 : n + 1, 2 : k + 2]
        Cv[...] = 1.0
        assert linalg.symm(V, BL, C=Cv, beta=2.0) is Cv
        got = C.to_numpy()
        s = np.tril(v) + np.tril(v, -1).T
        assert_within_bound(
            got[1 : n + 1, 2 : k + 2],
            s @ wl + 2,
            np.abs(s) @ np.abs(wl) + 2,
            n,
            np.float64,
            "symm C=window",
        )
        mask = np.ones(got.shape, bool)
        mask[1 : n + 1, 2 : k + 2] = False
        assert np.isnan(got[mask]).all()
        Cv[...] = wl
        assert linalg.trmm(V, Cv, lower=True, overwrite_b=True) is Cv
        t = np.tril(v)
        got = C.to_numpy()
        assert_within_bound(
            got[1 : n + 1, 2 : k + 2],
            t @ wl,
            np.abs(t) @ np.abs(wl),
            n,
            np.float64,
            "trmm B=window",
        )
        assert np.isnan(got[mask]).all()
        tw = np.tril(v) + n * np.eye(n)
        V[...] = tw
        Cv[...] = wl
        assert linalg.trsm(V, Cv, lower=True, overwrite_b=True) is Cv
        got = C.to_numpy()
        X = got[1 : n + 1, 2 : k + 2]
        res = np.linalg.norm(tw @ X - wl) / (np.linalg.norm(tw) * np.linalg.norm(X) * n)
        assert res <= 4 * eps(np.float64) and np.isnan(got[mask]).all()
        V[...] = v
        # SYRK/SYR2K into a window C (offsets inside blocks): only its triangle changes
        S = bm.full((n + i0 + 1, n + 2), np.nan, block=b, grid=grid)
        Sv = S[i0 : i0 + n, 2 : n + 2]
        for lower in (True, False):
            tri = np.tril if lower else np.triu
            Sv[...] = 1.0
            assert linalg.syrk(V, C=Sv, lower=lower, beta=2.0) is Sv
            got = S.to_numpy()
            sv = got[i0 : i0 + n, 2 : n + 2]
            assert_within_bound(
                tri(sv),
                tri(v @ v.T + 2),
                tri(np.abs(v) @ np.abs(v).T + 2),
                n,
                np.float64,
                f"syrk C=window {lower}",
            )
            np.testing.assert_array_equal(sv[tri(np.ones((n, n))) == 0], 1.0)  # other triangle
            mask = np.ones(got.shape, bool)
            mask[i0 : i0 + n, 2 : n + 2] = False
            assert np.isnan(got[mask]).all()
        Sv[...] = 0.0
        u = wl[:, :1] @ np.ones((1, n))
        U = bm.from_numpy(u, block=b, grid=grid)
        assert linalg.syr2k(V, U, C=Sv, lower=True) is Sv
        got = S.to_numpy()[i0 : i0 + n, 2 : n + 2]
        ref = v @ u.T + u @ v.T
        sc = np.abs(v) @ np.abs(u).T + np.abs(u) @ np.abs(v).T
        assert_within_bound(np.tril(got), np.tril(ref), np.tril(sc), 2 * n, np.float64, "syr2k")
        # the transposed window as the symmetric operand: its lower triangle is V's upper one
        got = linalg.symm(V.T, BL, lower=True).to_numpy()
        s = np.tril(v.T) + np.tril(v.T, -1).T
        assert_within_bound(got, s @ wl, np.abs(s) @ np.abs(wl), n, np.float64, "symm(V.T)")
    np.testing.assert_array_equal(A.to_numpy(), a)


@PROPERTY
@given(data=st.data())
def test_trsm_reads_windows_in_place(data):
    """solve_triangular / trsm with a triangular window at offsets inside blocks (rows and
    columns offset differently), every side/uplo/trans/diagonal, the finite and zero-diagonal
    checks read in the parent: backward error within the bound, nothing copied."""
    grid, b, n, i0, j0, k, kb, rng = _square_window_case(data)
    a = rng.standard_normal((n + i0 + 1, n + j0 + 2))
    a[i0 : i0 + n, j0 : j0 + n] += n * np.eye(n)  # well conditioned triangles
    A = bm.from_numpy(a, block=b, grid=grid)
    V, v = A[i0 : i0 + n, j0 : j0 + n], a[i0 : i0 + n, j0 : j0 + n]
    rhs = {"L": rng.standard_normal((n, k)), "R": rng.standard_normal((k, n))}
    B = {
        "L": bm.from_numpy(rhs["L"], block=(b, kb), grid=grid),
        "R": bm.from_numpy(rhs["R"], block=(kb, b), grid=grid),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error", bm.RedistributionWarning)  # nothing is copied
        for side in ("L", "R"):
            for lower in (True, False):
                for trans, unit in (("N", False), ("T", True), ("N", True)):
                    t = np.tril(v) if lower else np.triu(v)
                    if unit:
                        t = t - np.diag(np.diag(t)) + np.eye(n)
                    op_t = t.T if trans == "T" else t
                    X = linalg.trsm(
                        V, B[side], side=side, lower=lower, trans=trans, unit_diagonal=unit
                    ).to_numpy()
                    r = op_t @ X - rhs["L"] if side == "L" else X @ op_t - rhs["R"]
                    res = np.linalg.norm(r) / (np.linalg.norm(op_t) * np.linalg.norm(X) * n)
                    assert res <= 4 * eps(np.float64), (side, lower, trans, unit, res)
        X = linalg.solve_triangular(V.T, B["L"], lower=True).to_numpy()  # V's upper triangle
        t = np.triu(v).T
        res = np.linalg.norm(t @ X - rhs["L"]) / (np.linalg.norm(t) * np.linalg.norm(X) * n)
        assert res <= 4 * eps(np.float64)
        # the checks read the window's own triangle in the parent
        P = A.copy()
        P[i0, j0 + n - 1] = np.nan  # above the window's diagonal: not read by lower=True
        P[i0 - 1, j0] = np.inf  # outside the window
        linalg.solve_triangular(P[i0 : i0 + n, j0 : j0 + n], B["L"], lower=True)
        with pytest.raises(ValueError, match="infs or NaNs"):
            linalg.solve_triangular(P[i0 : i0 + n, j0 : j0 + n], B["L"], lower=False)
        P[i0 + n - 1, j0 + n - 1] = 0.0
        with pytest.raises(np.linalg.LinAlgError, match=rf"A\[{n - 1}, {n - 1}\] == 0"):
            linalg.solve_triangular(P[i0 : i0 + n, j0 : j0 + n], B["L"], lower=True)
    np.testing.assert_array_equal(A.to_numpy(), a)
