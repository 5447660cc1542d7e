"""Distributed tests of indexing: submatrix views, element reads, assignment into windows, and
the BLAS3 operators on views (inputs and outputs), against NumPy on the gathered matrices."""

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
from blas3_reference import assert_within_bound, high  # noqa: E402

_GRIDS: dict = {}


def grid_shapes(size: int) -> list[tuple[int, int]]:
    return list(dict.fromkeys([(1, size), (size, 1), bm.square_grid_shape(size)]))


def cached_grid(nprow: int, npcol: int) -> bm.ProcessGrid:
    """One grid per shape for the module (MPICH allows only about 2000 communicators)."""
    if (nprow, npcol) not in _GRIDS:
        backend = os.environ.get("BLASMP_BACKEND", "cpu")
        _GRIDS[(nprow, npcol)] = bm.ProcessGrid(nprow, npcol, backend=backend)
    return _GRIDS[(nprow, npcol)]


DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
SHAPE = (13, 11)
BLOCK = (3, 2)


def _matrix(grid, dtype=np.float64, shape=SHAPE, block=BLOCK, seed=1):
    A = bm.random.standard_normal(shape, seed=seed, block=block, grid=grid, dtype=dtype)
    return A, A.to_numpy()


def _same_everywhere(value) -> bool:
    mine = repr(value)
    return all(x == mine for x in MPI.COMM_WORLD.allgather(mine))


def _get(A, key):
    """``A[key]`` (never a copy: indexing warns nothing) and whether it is a window view."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", bm.RedistributionWarning)
        V = A[key]
    return V, V.is_window


def _ref(a, key):
    """NumPy's ``a[key]``: an integer index drops its axis."""
    return a[key]


def _ref2d(a, key):
    """NumPy's ``a[key]`` with integer indices kept as length-1 dimensions."""
    parts = list(key) if isinstance(key, tuple) else [key]
    if Ellipsis in parts:
        at = parts.index(Ellipsis)
        parts = parts[:at] + [slice(None)] * (3 - len(parts)) + parts[at + 1 :]
    parts += [slice(None)] * (2 - len(parts))
    parts = [slice(p, (p + 1) or None) if isinstance(p, int) else p for p in parts]
    return a[tuple(parts)]


KEYS = [
    (slice(3, 12), slice(2, 9)),  # aligned: a view
    (slice(1, 10), slice(3, 8)),  # inside blocks: a copy
    (slice(4, 6), slice(1, 2)),  # within one block: a view
    (5, slice(None)),
    (slice(None), 4),
    (slice(2, 9), -3),
    (slice(-4, None), Ellipsis),
    (Ellipsis, slice(-3, -1)),
    (slice(6, 3), slice(None)),  # empty
    slice(3, 6),
    Ellipsis,
]


@pytest.mark.parametrize("dtype", DTYPES)
def test_getitem_matches_numpy(grid, dtype):
    A, a = _matrix(grid, dtype)
    for key in KEYS:
        for X, x in ((A, a), (A.T, a.T), (A.conj(), a.conj())):
            V, copied = _get(X, key)
            assert isinstance(V, bm.BlockCyclicArray)
            ref = _ref(x, key)
            np.testing.assert_array_equal(V.to_numpy(), ref)
            assert V.shape == ref.shape and V.ndim == ref.ndim and V.dtype == A.dtype
    # window views exactly where the window is not block-cyclic
    for key in KEYS[:3]:
        V, copied = _get(A, key)
        assert copied == (
            not window_is_view(A.layout, (key[0].start, key[0].stop), (key[1].start, key[1].stop))
        )
        assert V.block == A.block


def test_views_share_storage(grid):
    A, a = _matrix(grid)
    V, copied = _get(A, (slice(3, 12), slice(2, 9)))
    assert not copied
    V[...] = 0  # writing into the view writes into A
    a[3:12, 2:9] = 0
    np.testing.assert_array_equal(A.to_numpy(), a)
    col, copied = _get(A, (slice(None), 5))
    assert not copied and col.shape == (13,)
    col *= 2  # an in-place ufunc on a one-column view
    a[:, 5] *= 2
    np.testing.assert_array_equal(A.to_numpy(), a)
    # a view of a view
    W, copied = _get(A[3:12, 2:10], (slice(3, 6), slice(2, 8)))
    assert not copied
    np.testing.assert_array_equal(W.to_numpy(), a[6:9, 4:10])


@pytest.mark.parametrize("dtype", DTYPES)
def test_element_reads(grid, dtype):
    A, a = _matrix(grid, dtype)
    for i, j in ((0, 0), (4, 5), (-1, -1), (12, 0), (np.int64(7), 3)):
        v = A[i, j]
        assert isinstance(v, np.generic) and v.dtype == A.dtype
        assert v == a[i, j] and _same_everywhere(v)
        assert A.T[j, i] == a[i, j]
        assert A.conj()[i, j] == np.conj(a[i, j])
    assert A[4][1] == a[4, 1] and A[4].ndim == 1  # A[4] is row 4, a vector
    one = A[2:3, 7:8]
    assert one.item() == a[2, 7] if hasattr(one, "item") else True


BAD_KEYS = [
    (slice(0, 13, 2), slice(None)),
    (slice(None, None, -1), 0),
    ([0, 13], slice(None)),  # index arrays select (tests/mpi/test_selection.py), in bounds
    (np.array([True] * 12), slice(None)),  # a mask of the wrong length
    ([0, 1], [0, 1]),  # two index arrays
    (np.array([0.5]), 0),  # a float index array
    (True, 0),
    (None, 0),
    (0, 0, 0),
    (13, 0),
    (0, -12),
    (Ellipsis, Ellipsis),
    ("a", 0),
    (slice(0.5, 3), 0),
]


def test_bad_keys_raise_the_same_everywhere(grid):
    A, a = _matrix(grid)
    for key in BAD_KEYS:
        for op in ("get", "set"):
            with pytest.raises(IndexError) as e:
                if op == "get":
                    A[key]
                else:
                    A[key] = 1.0
            assert (
                "supported" in str(e.value)
                or "out of bounds" in str(e.value)
                or "ellipsis" in str(e.value)
                or "did not match" in str(e.value)
                or "integer (or boolean)" in str(e.value)
            )
            assert _same_everywhere(str(e.value))
    np.testing.assert_array_equal(A.to_numpy(), a)


def test_iteration_refused(grid):
    A, _ = _matrix(grid)
    assert len(A) == 13 and len(A.T) == 11
    with pytest.raises(TypeError, match="iterating"):
        iter(A)


# -- assignment ------------------------------------------------------------------------------
WINDOWS = [
    (slice(3, 9), slice(2, 8)),  # aligned
    (slice(1, 10), slice(3, 8)),  # unaligned
    (slice(None), 4),
    (7, slice(1, -1)),
]


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_setitem_scalar_numpy_and_arrays(grid, dtype):
    rng = np.random.default_rng(3)
    for key in WINDOWS:
        A, a = _matrix(grid, dtype)
        shape = _ref(a, key).shape  # NumPy's: 1-D where an integer drops an axis
        A[key] = 2.5
        a[key] = 2.5
        np.testing.assert_array_equal(A.to_numpy(), a)
        v = rng.standard_normal(shape).astype(dtype)
        A[key] = v
        a[key] = v
        np.testing.assert_array_equal(A.to_numpy(), a)
        row = rng.standard_normal((1, shape[-1])).astype(dtype)  # broadcast as NumPy
        A[key] = row
        a[key] = row
        np.testing.assert_array_equal(A.to_numpy(), a)
        for block, g in (((2, 5), grid), ((4, 4), cached_grid(*grid_shapes(grid.size)[0]))):
            b = rng.standard_normal(shape).astype(dtype)
            B = bm.from_numpy(b, block=block, grid=g)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", bm.RedistributionWarning)
                A[key] = B
            a[key] = b
            np.testing.assert_array_equal(A.to_numpy(), a)


def test_setitem_transposed_and_overlapping(grid):
    A, a = _matrix(grid)
    B = bm.random.standard_normal((5, 4), seed=4, block=(2, 3), grid=grid)
    A.T[2:6, 1:6] = B.T  # writes A[1:6, 2:6]
    a[1:6, 2:6] = B.to_numpy()
    np.testing.assert_array_equal(A.to_numpy(), a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bm.ViewCopyWarning)  # a copy unless the grid is 1x1
        A[0:6, 0:5] = A[4:10, 3:8]  # overlapping source and target: NumPy's copy semantics
    a[0:6, 0:5] = a[4:10, 3:8].copy()
    np.testing.assert_array_equal(A.to_numpy(), a)
    A[3:9, 2:6] = A[3:9, 2:6].T.T  # the same window
    v = np.arange(20.0).reshape(4, 5)
    A.T[1:5, 2:7] = v  # a NumPy value through a transposed view
    a[2:7, 1:5] = v.T
    A.T[0, :] = -1.0
    a[:, 0] = -1.0
    np.testing.assert_array_equal(A.to_numpy(), a)
    Z, _ = _matrix(grid, np.complex128)
    with pytest.raises(ValueError, match="conjugated view"):
        Z.conj()[0, 0] = 1.0


def test_bad_assignment_changes_nothing(grid):
    A, a = _matrix(grid)
    cases = [
        ((slice(0, 3), slice(0, 3)), np.ones((2, 3)), ValueError),
        ((slice(0, 3), slice(0, 3)), bm.zeros((3, 4), block=(3, 2), grid=grid), ValueError),
        ((slice(0, 3), slice(0, 3)), 1j, TypeError),
        ((slice(0, 3), slice(0, 3)), bm.zeros((3, 3), grid=grid, dtype=np.complex128), TypeError),
        ((slice(0, 3), slice(0, 3)), "text", TypeError),
    ]
    for key, value, exc in cases:
        with pytest.raises(exc) as e:
            A[key] = value
        assert _same_everywhere(str(e.value))
    np.testing.assert_array_equal(A.to_numpy(), a)


# -- operators on views ----------------------------------------------------------------------
def _gemm_check(got, x, y, dtype, what):
    ref = high(x) @ high(y)
    scale = np.abs(x).astype(np.float64) @ np.abs(y).astype(np.float64)
    assert_within_bound(got, ref, scale, x.shape[1], dtype, what)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_gemm_on_views(grid, dtype):
    A, a = _matrix(grid, dtype, shape=(14, 12), block=(3, 2), seed=1)
    B, b = _matrix(grid, dtype, shape=(12, 13), block=(2, 4), seed=2)
    V, W = A[3:12, 4:12], B[4:12, 8:13]  # aligned offsets: nonzero source processes
    _gemm_check((V @ W).to_numpy(), a[3:12, 4:12], b[4:12, 8:13], dtype, "view @ view")
    _gemm_check((V.T @ A[3:12, 0:6]).to_numpy(), a[3:12, 4:12].T, a[3:12, 0:6], dtype, "V.T @ A")
    # output: C = C[v] writes into the parent, NaN elsewhere stays
    C = bm.full((16, 10), np.nan, block=(3, 4), grid=grid, dtype=dtype)
    out = linalg.gemm(V, W, C=C[6:15, 4:9])
    c = C.to_numpy()
    _gemm_check(c[6:15, 4:9], a[3:12, 4:12], b[4:12, 8:13], dtype, "gemm into C[v]")
    mask = np.ones(c.shape, bool)
    mask[6:15, 4:9] = False
    assert np.isnan(c[mask]).all()
    _gemm_check(out.to_numpy(), a[3:12, 4:12], b[4:12, 8:13], dtype, "returned view")
    # beta != 0 reads the view
    C[6:15, 4:9] = 1.0
    linalg.gemm(V, W, C=C[6:15, 4:9], beta=2.0)
    c2 = C.to_numpy()
    ref = a[3:12, 4:12].astype(np.complex128) @ b[4:12, 8:13] + 2
    np.testing.assert_allclose(c2[6:15, 4:9], ref, rtol=1e-4 if dtype == np.complex64 else 1e-12)
    assert np.isnan(c2[mask]).all()


def test_syrk_and_trsm_on_views(grid):
    dtype = np.float64
    A, a = _matrix(grid, dtype, shape=(14, 12), block=(3, 3), seed=5)
    V = A[3:12, 3:12]
    S = linalg.syrk(V, lower=True)
    s, v = S.to_numpy(), a[3:12, 3:12]
    scale = np.abs(v) @ np.abs(v).T
    assert_within_bound(np.tril(s), np.tril(high(v) @ high(v).T), np.tril(scale), 9, dtype, "syrk")
    # syrk into a view of a poisoned C
    C = bm.full((15, 15), np.nan, block=(3, 3), grid=grid)
    Cv = C[6:15, 3:12]
    Cv[...] = 0.0
    linalg.syrk(V, C=Cv, lower=True)
    c = C.to_numpy()
    assert_within_bound(
        np.tril(c[6:15, 3:12]), np.tril(high(v) @ high(v).T), np.tril(scale), 9, dtype, "syrk C[v]"
    )
    mask = np.ones(c.shape, bool)
    mask[6:15, 3:12] = False
    assert np.isnan(c[mask]).all()
    # trsm: triangular view, right-hand sides a view
    n = 9
    t = np.tril(a[3:12, 3:12]) + n * np.eye(n)
    T = bm.from_numpy(np.pad(t, ((3, 2), (3, 0))), block=(3, 3), grid=grid)
    Bm, bm_ = _matrix(grid, dtype, shape=(12, 8), block=(3, 2), seed=6)
    X = linalg.trsm(T[3:12, 3:12], Bm[3:12, 2:8], lower=True)
    x = X.to_numpy()
    res = np.linalg.norm(t @ x - bm_[3:12, 2:8]) / (np.linalg.norm(t) * np.linalg.norm(x) * n)
    assert res <= 4 * np.finfo(dtype).eps
    np.testing.assert_array_equal(Bm.to_numpy(), bm_)  # input unchanged


# -- a property test: random shapes, blocks, windows (the same draws on every rank) ----------
@settings(
    max_examples=12,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_windows_property(data):
    size = MPI.COMM_WORLD.Get_size()
    gshape = data.draw(st.sampled_from(grid_shapes(size)))
    grid = cached_grid(*gshape)
    m = data.draw(st.integers(1, 17))
    n = data.draw(st.integers(1, 17))
    mb = data.draw(st.integers(1, 6))
    nb = data.draw(st.integers(1, 6))
    i0 = data.draw(st.integers(0, m - 1))
    i1 = data.draw(st.integers(i0 + 1, m))
    j0 = data.draw(st.integers(0, n - 1))
    j1 = data.draw(st.integers(j0 + 1, n))
    A, a = _matrix(grid, np.float64, shape=(m, n), block=(mb, nb), seed=m * 31 + n)
    V, copied = _get(A, (slice(i0, i1), slice(j0, j1)))
    assert copied == (not window_is_view(A.layout, (i0, i1), (j0, j1)))
    np.testing.assert_array_equal(V.to_numpy(), a[i0:i1, j0:j1])
    # an operator on the window: V^T V through GEMM
    G = V.T @ V
    v = a[i0:i1, j0:j1]
    assert_within_bound(
        G.to_numpy(), high(v).T @ high(v), np.abs(v).T @ np.abs(v), i1 - i0, np.float64, "V.T @ V"
    )
    # assignment into the window leaves the rest untouched
    A[i0:i1, j0:j1] = np.nan
    got = A.to_numpy()
    a[i0:i1, j0:j1] = np.nan
    np.testing.assert_array_equal(got, a)


@pytest.mark.parametrize("transport", ["onesided", "alltoallv"])
@pytest.mark.parametrize("budget", [None, 64])
@pytest.mark.parametrize(
    "src_dtype, dst_dtype", [(np.float64, np.float64), (np.float32, np.complex128), (float, bool)]
)
def test_copy_window_between_layouts(grid, transport, budget, src_dtype, dst_dtype):
    """``Y[k0:, l0:][:h, :w] = X[i0:, j0:][:h, :w]`` across blocks, grids and source processes
    (offsets inside blocks), on both transports, with a tiny budget (one row per round) and a
    cast: every element of the window written, nothing else (a NaN-poisoned destination)."""
    from blasmp_array.ops.engine.redistribute import copy_window

    other = cached_grid(*grid.shape[::-1])
    x = np.random.default_rng(5).standard_normal((17, 15)).astype(src_dtype)
    x[x < 0] = 0  # zeros, so that the bool case has both values
    X = bm.from_numpy(x, block=(3, 4), grid=grid)
    if dst_dtype is bool:  # comparisons make bool arrays (creation functions do not)
        poison = False
        Y = bm.zeros((19, 14), block=(2, 5), grid=other) != 0
    else:
        poison = np.nan
        Y = bm.full((19, 14), poison, dtype=dst_dtype, block=(2, 5), grid=other)
    (i0, j0), (k0, l0), (h, w) = (2, 1), (3, 4), (13, 9)
    copy_window(X.storage, (i0, j0), Y.storage, (k0, l0), (h, w), budget, transport=transport)
    want = np.full(Y.shape, poison, dtype=dst_dtype)
    want[k0 : k0 + h, l0 : l0 + w] = x[i0 : i0 + h, j0 : j0 + w]
    np.testing.assert_array_equal(Y.to_numpy(), want)


def test_symm_trmm_syr2k_on_views(grid):
    A, a = _matrix(grid, np.float64, shape=(14, 14), block=(3, 3), seed=7)
    B, b = _matrix(grid, np.float64, shape=(14, 12), block=(3, 3), seed=8)
    V, W, v, w = A[3:12, 3:12], B[3:12, 6:12], a[3:12, 3:12], b[3:12, 6:12]
    with warnings.catch_warnings():
        warnings.simplefilter("error", bm.RedistributionWarning)  # views need no copy
        sym = np.tril(v) + np.tril(v, -1).T
        got = linalg.symm(V, W, lower=True).to_numpy()
        assert_within_bound(
            got, high(sym) @ high(w), np.abs(sym) @ np.abs(w), 9, np.float64, "symm"
        )
        got = linalg.trmm(V, W, lower=True).to_numpy()
        tri = np.tril(v)
        assert_within_bound(
            got, high(tri) @ high(w), np.abs(tri) @ np.abs(w), 9, np.float64, "trmm"
        )
        x = B[3:12, 0:9]
        xn = b[3:12, 0:9]
        got = np.tril(linalg.syr2k(V, x, lower=True).to_numpy())
        ref = high(v) @ high(xn).T + high(xn) @ high(v).T
        scale = np.abs(v) @ np.abs(xn).T + np.abs(xn) @ np.abs(v).T
        assert_within_bound(got, np.tril(ref), np.tril(scale), 18, np.float64, "syr2k")
    np.testing.assert_array_equal(A.to_numpy(), a)  # inputs unchanged
    np.testing.assert_array_equal(B.to_numpy(), b)
    # symm and syr2k into views of a NaN-poisoned C
    C = bm.full((15, 15), np.nan, block=3, grid=grid)
    linalg.symm(V, W, C=C[6:15, 0:6], lower=True)
    C[3:12, 6:15] = 0.0
    linalg.syr2k(V, x, C=C[3:12, 6:15], lower=True)
    c = C.to_numpy()
    assert_within_bound(
        c[6:15, 0:6], high(sym) @ high(w), np.abs(sym) @ np.abs(w), 9, np.float64, "symm C[v]"
    )
    assert_within_bound(
        np.tril(c[3:12, 6:15]), np.tril(ref), np.tril(scale), 18, np.float64, "syr2k C[v]"
    )
    mask = np.ones(c.shape, bool)
    mask[6:15, 0:6] = False
    mask[3:12, 6:15] = False
    assert np.isnan(c[mask]).all()


def test_outputs_into_views_through_a_working_copy(grid):
    """C views whose operator works on a copy (C on another grid, C's blocks not square for
    SYRK, TRMM's overwrite_b) are written back into the parent, the rest untouched."""
    other = cached_grid(*grid_shapes(grid.size)[0])
    A, a = _matrix(other, np.float64, shape=(9, 6), block=(3, 3), seed=11)
    B, b = _matrix(other, np.float64, shape=(6, 5), block=(3, 3), seed=12)
    C = bm.full((12, 8), np.nan, block=3, grid=grid)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bm.RedistributionWarning)
        linalg.gemm(A, B, C=C[3:12, 3:8])
    c = C.to_numpy()
    _gemm_check(c[3:12, 3:8], a, b, np.float64, "gemm into a view on another grid")
    mask = np.ones(c.shape, bool)
    mask[3:12, 3:8] = False
    assert np.isnan(c[mask]).all()
    # SYRK into a view with non-square blocks (computed on a working copy)
    S = bm.full((12, 12), np.nan, block=(3, 2), grid=grid)
    S[3:11, 4:12] = 0.0
    A8, a8 = _matrix(grid, np.float64, shape=(8, 6), block=(3, 3), seed=13)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bm.RedistributionWarning)
        linalg.syrk(A8, C=S[3:11, 4:12], lower=True)
    s = S.to_numpy()
    ref, scale = high(a8) @ high(a8).T, np.abs(a8) @ np.abs(a8).T
    assert_within_bound(np.tril(s[3:11, 4:12]), np.tril(ref), np.tril(scale), 6, np.float64, "syrk")
    mask = np.ones(s.shape, bool)
    mask[3:11, 4:12] = False
    assert np.isnan(s[mask]).all()
    # TRMM overwrite_b into a view
    t = np.tril(a[:6, :6]) + 6 * np.eye(6)
    T = bm.from_numpy(t, block=3, grid=grid)
    P = bm.full((12, 9), np.nan, block=3, grid=grid)
    P[3:9, 3:9] = np.outer(b[:, 0], b[:, 1]) + 1.0
    p0 = P.to_numpy()
    linalg.trmm(T, P[3:9, 3:9], lower=True, overwrite_b=True)
    p = P.to_numpy()
    ref, scale = high(t) @ high(p0[3:9, 3:9]), np.abs(t) @ np.abs(p0[3:9, 3:9])
    assert_within_bound(p[3:9, 3:9], ref, scale, 6, np.float64, "trmm overwrite_b into a view")
    mask = np.ones(p.shape, bool)
    mask[3:9, 3:9] = False
    assert np.isnan(p[mask]).all()
