"""1-D BlockCyclicArrays (vectors) and NumPy's semantics for mixed ranks, against NumPy.

Every test builds the same data on every rank, runs the distributed call and compares the
gathered result with NumPy's on the same data: shapes and dtypes exactly, values exactly where
the operation rounds once per element, within an error bound in units of eps where it sums.
Lengths include 0 and 1; blocks 1, 3 and larger than the vector; the grids of the ``grid``
fixture (1xN, Nx1, near-square).
"""

from __future__ import annotations

import copy
import os
import pickle
import sys
import warnings

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mpi4py import MPI

import blasmp_array as bm
from blasmp_array.array import as_vector
from blasmp_array.ops.blas3 import matvec

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from blas3_reference import assert_within_bound, eps, high  # noqa: E402
from conftest import cached_grid, grid_shapes, with_source  # noqa: E402

PROPERTY = settings(
    max_examples=12,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)

FLOATS = [np.float32, np.float64, np.complex64, np.complex128]
ALL_DTYPES = [*FLOATS, np.int32, np.int64, np.bool_]


def _data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) > 0.5
    if dt.kind in "iu":
        return rng.integers(-9, 10, shape).astype(dt)
    x = rng.standard_normal(shape)
    if dt.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dt)


def _same_everywhere(value) -> bool:
    mine = repr(value)
    return all(x == mine for x in MPI.COMM_WORLD.allgather(mine))


def _vec(x):
    """A distributed result, checked to be a vector, gathered."""
    assert isinstance(x, bm.BlockCyclicArray) and x.ndim == 1, x
    return x.to_numpy()


def _strict():
    """A context in which a RedistributionWarning fails the test (vectors move quietly)."""
    ctx = warnings.catch_warnings()
    ctx.__enter__()
    warnings.simplefilter("error", bm.RedistributionWarning)
    return ctx


# -- the 1-D array and its face ------------------------------------------------------------------
@pytest.mark.parametrize("n, block", [(0, 3), (1, 1), (7, 3), (13, 64)])
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_from_numpy_and_back(grid, comm, n, block, dtype):
    x = _data(n, dtype, seed=n)
    X = bm.from_numpy(x, block=block, grid=grid)
    assert X.shape == (n,) and X.ndim == 1 and X.size == n and len(X) == n
    assert X.dtype == x.dtype and X.block == (block,) and X.T is X
    assert X.layout.shape == (n, 1)  # stored as ScaLAPACK stores a vector: an n x 1 column
    got = X.to_numpy()
    assert got.shape == (n,) and got.dtype == x.dtype
    np.testing.assert_array_equal(got, x)
    root = comm.size - 1
    R = bm.from_numpy(x if comm.rank == root else None, block=block, grid=grid, root=root)
    np.testing.assert_array_equal(R.to_numpy(), x)
    only = X.to_numpy(root=0)
    assert (only is None) == (comm.rank != 0)
    # the local part: the elements of this process row, in process column 0 only
    loc = X.local
    assert loc.ndim == 1
    if grid.mycol != 0:
        assert loc.size == 0
    assert f"shape=({n},)" in repr(X)


def test_constructors(grid):
    for shape in (5, (5,)):
        np.testing.assert_array_equal(bm.zeros(shape, block=2, grid=grid).to_numpy(), np.zeros(5))
        np.testing.assert_array_equal(bm.ones(shape, block=2, grid=grid).to_numpy(), np.ones(5))
    F = bm.full(4, 2.5, grid=grid)
    assert F.shape == (4,) and np.all(F.to_numpy() == 2.5)
    ints = bm.full(3, np.int32(7), grid=grid)
    assert ints.dtype == np.int32
    assert bm.empty(6, dtype=np.int64, grid=grid).dtype == np.int64
    Z = bm.zeros((3, 2), dtype=int, grid=grid)
    assert Z.dtype == np.int64 and np.all(Z.to_numpy() == 0)
    X = bm.from_numpy(np.arange(6.0), block=4, grid=grid)
    for f, v in ((bm.zeros_like, 0), (bm.ones_like, 1), (np.zeros_like, 0), (np.ones_like, 1)):
        L = f(X)
        assert L.shape == (6,) and L.layout == X.layout and np.all(L.to_numpy() == v)
    assert np.full_like(X, 3, dtype=np.int32).dtype == np.int32
    assert bm.empty_like(X, shape=6).shape == (6,)
    with pytest.raises(ValueError, match="shape"):
        bm.zeros_like(X, shape=(6, 1))
    with pytest.raises(ValueError, match="block"):
        bm.zeros(5, block=0, grid=grid)


@pytest.mark.parametrize(
    "args, kw",
    [((10,), {}), ((2, 11, 3), {}), ((0.5, 3.1, 0.7), {}), ((5, 0, -1), {}), ((0,), {})]
    + [((1, 3), dict(dtype=np.float32)), ((3,), dict(dtype=np.int32))],
)
def test_arange(grid, args, kw):
    X = bm.arange(*args, block=2, grid=grid, **kw)
    ref = np.arange(*args, **kw)
    assert X.dtype == ref.dtype and X.shape == ref.shape
    np.testing.assert_array_equal(X.to_numpy(), ref)


@pytest.mark.parametrize(
    "args, kw",
    [
        ((0, 1, 7), {}),
        ((0, 1, 7), dict(endpoint=False)),
        ((2, -3, 1), {}),
        ((0, 10, 5), dict(dtype=int)),
        ((-1, 10, 4), dict(dtype=np.int32)),
        ((1, 2, 0), {}),
        ((1j, 2, 4), {}),
    ],
)
def test_linspace(grid, args, kw):
    X = bm.linspace(*args, block=3, grid=grid, **kw)
    ref = np.linspace(*args, **kw)
    assert X.dtype == ref.dtype and X.shape == ref.shape
    np.testing.assert_array_equal(X.to_numpy(), ref)
    _, step = bm.linspace(0, 1, 5, retstep=True, grid=grid)
    assert step == np.linspace(0, 1, 5, retstep=True)[1]
    with pytest.raises(ValueError, match="num"):
        bm.linspace(0, 1, -1, grid=grid)
    with pytest.raises(ZeroDivisionError):
        bm.arange(0, 1, 0, grid=grid)


def test_reshape_faces_and_transpose(grid):
    x = np.arange(7.0)
    X = bm.from_numpy(x, block=3, grid=grid)
    C = X.reshape(7, 1)
    assert C.shape == (7, 1) and C.ndim == 2 and C.shares_storage(X._column)
    R = X.reshape(1, -1)
    assert R.shape == (1, 7) and R.is_view
    np.testing.assert_array_equal(R.to_numpy(), x[None, :])
    np.testing.assert_array_equal(X[:, None].to_numpy(), x[:, None])
    np.testing.assert_array_equal(X[None, :].to_numpy(), x[None, :])
    for back in (C.reshape(7), C.reshape(-1), R.reshape(-1), R.reshape((7,))):
        assert back.ndim == 1
        np.testing.assert_array_equal(back.to_numpy(), x)
    assert X.reshape(-1) is X and X.reshape(7) is X
    assert np.transpose(X) is X and X.H.shape == (7,)
    for bad in ((7, 2), (2, 7), (14,), (1, 1, 7)):
        with pytest.raises(ValueError, match="relabelling") as e:
            X.reshape(*bad)
        assert _same_everywhere(str(e.value))
    with pytest.raises(ValueError, match="ndim < 2"):
        _ = X.mT
    A = bm.from_numpy(np.arange(12.0).reshape(3, 4), block=2, grid=grid)
    a = A.to_numpy()
    for bad in (lambda: A.reshape(-1), lambda: A.ravel(), lambda: np.ravel(A), lambda: A.flatten()):
        with pytest.raises(ValueError, match="relabelling") as e:
            bad()
        assert _same_everywhere(str(e.value))
    # the relabellings through NumPy's names: ravel a view, flatten a copy
    assert np.ravel(X) is X and X.ravel("F") is X and np.reshape(X, (1, 7)).shape == (1, 7)
    col, row = A[:, 1:2], A[2:3, :]
    for M, ref in ((col, a[:, 1:2]), (row, a[2:3, :])):
        r, f = np.ravel(M), M.flatten()
        assert r.ndim == 1 and f.ndim == 1 and not f.shares_storage(M)
        np.testing.assert_array_equal(r.to_numpy(), ref.ravel())
        np.testing.assert_array_equal(f.to_numpy(), ref.flatten())
        assert np.reshape(M, -1).shape == ref.ravel().shape
    with pytest.raises(ValueError, match="order"):
        X.ravel("Q")
    with pytest.raises(TypeError, match=r"to_numpy\(\)\.tolist"):
        A.tolist()


def test_copy_deepcopy_pickle(grid):
    x = np.arange(5.0)
    X = bm.from_numpy(x, block=2, grid=grid)
    A = bm.from_numpy(np.ones((3, 3)), block=2, grid=grid)
    for Y, y in ((X, x), (A, np.ones((3, 3)))):
        for C in (copy.deepcopy(Y), copy.copy(Y)):
            assert isinstance(C, bm.BlockCyclicArray) and not C.shares_storage(Y)
            np.testing.assert_array_equal(C.to_numpy(), y)
        with pytest.raises(TypeError, match="to_numpy.*to_zarr") as e:
            pickle.dumps(Y)
        assert _same_everywhere(str(e.value))


# -- elementwise and broadcasting ----------------------------------------------------------------
def _assert_elementwise_equal(got, ref, complex_operands):
    """Bitwise for real results; complex ``abs`` and ``*`` may round differently in the GPU's
    kernels (hypot, fused multiply-add), so complex results hold to a few ulps of their size."""
    if complex_operands and ref.dtype.kind in "fc":
        np.testing.assert_allclose(got, ref, rtol=4 * eps(ref.dtype), atol=0)
    else:
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_elementwise_vectors(grid, dtype):
    n = 11
    x, y = _data(n, dtype, 1), _data(n, dtype, 2)
    X = bm.from_numpy(x, block=3, grid=grid)
    Y = bm.from_numpy(y, block=2, grid=grid)  # another layout: moved quietly (O(n))
    ctx = _strict()
    try:
        for got, ref in (
            (X == Y, x == y),
            (X < Y, x < y) if np.dtype(dtype).kind != "c" else (X != Y, x != y),
            (np.logical_or(X, Y), np.logical_or(x, y)),
            (np.abs(X), np.abs(x)),
            (np.where(X == Y, X, Y), np.where(x == y, x, y)),
        ):
            g = _vec(got)
            assert g.dtype == ref.dtype
            _assert_elementwise_equal(g, ref, np.dtype(dtype).kind == "c")
        if np.dtype(dtype) != np.bool_:
            for got, ref in ((X + Y, x + y), (X * Y, x * y), (X - 1, x - 1), (2 * X, 2 * x)):
                g = _vec(got)
                assert g.dtype == ref.dtype
                _assert_elementwise_equal(g, ref, np.dtype(dtype).kind == "c")
            if np.dtype(dtype).kind in "iu":
                np.testing.assert_array_equal(_vec(X // 4), x // 4)
                np.testing.assert_array_equal(_vec(X % 4), x % 4)
                t = _vec(X / 4)
                assert t.dtype == np.float64
                np.testing.assert_array_equal(t, x / 4)
    finally:
        ctx.__exit__(None, None, None)


def test_broadcasting_matrix_and_vector(grid):
    m, n = 9, 7
    a, x, y = _data((m, n), np.float64), _data(n, np.float64, 3), _data(m, np.float64, 4)
    A = bm.from_numpy(a, block=(2, 3), grid=grid)
    X = bm.from_numpy(x, block=4, grid=grid)
    Y = bm.from_numpy(y, block=2, grid=grid)
    for got, ref in (
        (A * X, a * x),
        (X * A, x * a),
        (A + Y.reshape(m, 1), a + y[:, None]),
        (A - Y[:, None], a - y[:, None]),
        (A.T * Y, a.T * y),
        (Y[:, None] * X[None, :], y[:, None] * x[None, :]),  # an outer broadcast
        (np.maximum(A, X), np.maximum(a, x)),
        (A > X, a > x),
        (np.where(A > 0, X, Y[:, None]), np.where(a > 0, x, y[:, None])),
        (A[:, 2:3] * A[1:2, :], a[:, 2:3] * a[1:2, :]),
    ):
        assert isinstance(got, bm.BlockCyclicArray) and got.shape == ref.shape
        np.testing.assert_array_equal(got.to_numpy(), ref)
    out = bm.zeros_like(A)
    np.multiply(A, X, out=out)
    np.testing.assert_array_equal(out.to_numpy(), a * x)
    with pytest.raises(ValueError, match="broadcast") as e:
        A + Y  # (9, 7) and (9,) do not broadcast
    assert _same_everywhere(str(e.value))
    with pytest.raises(ValueError, match="broadcast"):
        X + Y


def test_integer_and_bool_dtypes(grid):
    a = np.arange(20).reshape(4, 5) - 7
    A = bm.from_numpy(a, block=2, grid=grid)
    assert A.dtype == np.int64
    A32 = A.astype(np.int32)
    assert A32.dtype == np.int32 and np.array_equal(A32.to_numpy(), a.astype(np.int32))
    M = A > 0
    assert M.dtype == np.bool_
    B = bm.from_numpy(a > 0, block=2, grid=grid)
    assert B.dtype == np.bool_ and np.array_equal(M, B)
    for got, ref in (
        (A + 1, a + 1),
        (A * A32, a * a.astype(np.int32)),
        (A32 + np.int32(1), a.astype(np.int32) + np.int32(1)),
        (A / 2, a / 2),
        (A**2, a**2),
        (M & B, (a > 0) & (a > 0)),
        (M.astype(np.int64) + A, (a > 0).astype(np.int64) + a),
        (np.round(A.astype(np.float64) / 3), np.round(a / 3)),
        (np.round(A / 3, 1), np.round(a / 3, 1)),
        (np.around(A, -1), np.around(a, -1)),
    ):
        g = got.to_numpy()
        assert g.dtype == ref.dtype, (g.dtype, ref.dtype)
        np.testing.assert_array_equal(g, ref)
    assert A.sum() == a.sum() and A.sum().dtype == a.sum().dtype
    assert A32.sum().dtype == a.astype(np.int32).sum().dtype
    assert A.max() == a.max() and A.mean() == a.mean() and M.sum() == (a > 0).sum()
    np.testing.assert_array_equal(A.sum(axis=0).to_numpy(), a.sum(axis=0))
    assert np.linalg.norm(A) == pytest.approx(np.linalg.norm(a), rel=1e-15)
    assert np.linalg.norm(A).dtype == np.float64
    with pytest.raises(ValueError, match="negative integer powers"):
        A ** (-1)
    with pytest.raises(TypeError, match="subtract"):
        M - B  # NumPy refuses bool subtraction too


# -- indexing --------------------------------------------------------------------------------------
def test_indexing_vectors(grid, comm):
    m, n = 9, 8
    a = _data((m, n), np.complex128)
    A = bm.from_numpy(a, block=(2, 3), grid=grid)
    for key in (3, -1, (2, slice(None)), (slice(None), 4), (slice(1, 7), 5), (6, slice(2, 8))):
        got = A[key]
        ref = a[key]
        assert got.shape == ref.shape and got.ndim == 1
        np.testing.assert_array_equal(got.to_numpy(), ref)
        tkey = key[::-1] if isinstance(key, tuple) else (slice(None), key)
        np.testing.assert_array_equal(A.T[tkey].to_numpy(), a.T[tkey])
    assert A[2:3, :].shape == (1, n) and A[:, 4:5].shape == (m, 1)  # slices keep 2-D
    x = a[:, 1]
    X = A[:, 1]
    for k in (0, 4, -1):
        assert X[k] == x[k] and _same_everywhere(X[k])
    for key in (slice(2, 7), slice(None, 3), slice(-4, None), slice(5, 2), Ellipsis):
        np.testing.assert_array_equal(X[key].to_numpy(), x[key])
    assert X.conj()[2] == np.conj(x[2])
    assert X.item(3) == x.item(3)
    with pytest.raises(IndexError, match="out of bounds"):
        X[m]
    with pytest.raises(IndexError, match="too many"):
        X[1, 2]
    with pytest.raises(ValueError, match="size 1"):
        X.item()


def test_assignment_vectors(grid):
    m, n = 9, 8
    a = _data((m, n), np.float64)
    A = bm.from_numpy(a, block=(2, 3), grid=grid)
    v = _data(m, np.float64, 5)
    A[:, 2] = v
    a[:, 2] = v
    A[3] = 1.5
    a[3] = 1.5
    A[4, 1:6] = np.arange(5.0)
    a[4, 1:6] = np.arange(5.0)
    A[:, 6] = bm.from_numpy(v * 2, block=4, grid=grid)
    a[:, 6] = v * 2
    A[5, :] = A[:, 0][:n]  # a vector into a row (a window of a column)
    a[5, :] = a[:n, 0]
    np.testing.assert_array_equal(A.to_numpy(), a)
    X = bm.from_numpy(v, block=3, grid=grid)
    x = v.copy()
    X[2] = -1
    x[2] = -1
    X[4:7] = np.array([7.0, 8.0, 9.0])
    x[4:7] = [7.0, 8.0, 9.0]
    X[0:2] = bm.from_numpy(np.array([5.0, 6.0]), block=1, grid=grid)
    x[0:2] = [5.0, 6.0]
    np.testing.assert_array_equal(X.to_numpy(), x)
    with pytest.raises(ValueError, match="broadcast"):
        A[:, 2] = np.ones(m + 1)


# -- reductions ------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 12])
@pytest.mark.parametrize("dtype", [np.float32, np.complex128, np.int64], ids=str)
def test_vector_reductions(grid, comm, n, dtype):
    x = _data(n, dtype, 7)
    X = bm.from_numpy(x, block=5, grid=grid)
    h = high(x) if np.dtype(dtype).kind != "i" else x.astype(np.float64)
    absx = np.abs(h)
    bound = 4 * n * eps(dtype if np.dtype(dtype).kind != "i" else np.float64) * absx.sum()
    for axis in (None, 0, -1):
        s = X.sum(axis=axis)
        assert np.ndim(s) == 0 and _same_everywhere(s)
        assert np.asarray(s).dtype == x.sum().dtype
        assert abs(s - h.sum()) <= bound
        assert abs(X.mean(axis=axis) - h.mean()) <= bound / n
    assert X.sum(keepdims=True).shape == (1,)
    if np.dtype(dtype).kind != "c":
        assert X.max() == x.max() and X.min() == x.min()
    assert X.argmax() == x.argmax() and X.argmin() == x.argmin()
    assert bool(X.any()) == bool(x.any()) and bool(X.all()) == bool(x.all())
    assert abs(X.var() - h.var()) <= 8 * n * eps(np.float32) * (absx**2).mean() + 1e-300
    for ord_ in (None, 1, 2, np.inf, -np.inf, 0, 3, 0.5):
        got = np.linalg.norm(X, ord_)
        ref = np.linalg.norm(x, ord_)
        assert np.asarray(got).dtype == ref.dtype and _same_everywhere(got)
        assert abs(got - ref) <= 8 * n * eps(ref.dtype) * abs(ref), (ord_, got, ref)
    with pytest.raises(ValueError, match="Invalid norm order"):
        np.linalg.norm(X, "fro")
    with pytest.raises(np.exceptions.AxisError):
        X.sum(axis=1)
    with pytest.raises(ValueError, match="2-D|two dimensions|matrix"):
        np.trace(X)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.int32], ids=str)
def test_axis_reductions_are_distributed_vectors(grid, dtype):
    m, n = 10, 7
    a = _data((m, n), dtype, 8)
    A = bm.from_numpy(a, block=(3, 2), grid=grid)
    for X, x in ((A, a), (A.T, a.T)):
        for axis in (0, 1, -1):
            s = X.sum(axis=axis)
            assert isinstance(s, bm.BlockCyclicArray) and s.ndim == 1
            assert s.block == (X.block[1 - axis % 2],) and s.grid is grid
            got = s.to_numpy()
            ref = x.sum(axis=axis)
            assert got.dtype == ref.dtype
            scale = np.abs(x).astype(np.float64).sum(axis=axis)
            assert np.all(np.abs(got - ref) <= 4 * m * eps(np.complex64) * scale)
            for f in ("max", "min", "argmax", "argmin", "any", "all"):
                if np.dtype(dtype).kind == "c" and f in ("max", "min"):
                    continue
                g = getattr(X, f)(axis=axis)
                assert isinstance(g, bm.BlockCyclicArray) and g.ndim == 1
                np.testing.assert_array_equal(g.to_numpy(), getattr(x, f)(axis=axis))
            kd = X.mean(axis=axis, keepdims=True)
            assert (
                isinstance(kd, bm.BlockCyclicArray)
                and kd.shape == x.mean(axis=axis, keepdims=True).shape
            )
    d = np.diagonal(A, 1)
    assert isinstance(d, bm.BlockCyclicArray) and d.ndim == 1
    np.testing.assert_array_equal(d.to_numpy(), np.diagonal(a, 1))
    # the vector a reduction returns works on: centring the columns
    C = A - A.mean(axis=0)
    np.testing.assert_allclose(
        C.to_numpy(), a - a.mean(axis=0), rtol=0, atol=8 * m * eps(np.complex64) * np.abs(a).max()
    )


# -- products --------------------------------------------------------------------------------------
def _bound_check(got, x, y, dtype, what):
    """``got`` against ``x @ y`` (NumPy, in high precision) within GEMM's error bound."""
    ref = high(x) @ high(y)
    scale = np.abs(x).astype(np.float64) @ np.abs(y).astype(np.float64)
    k = x.shape[-1]
    assert_within_bound(np.asarray(got), np.asarray(ref), np.asarray(scale), k, dtype, what)


@pytest.fixture(params=["host", "exchange"])
def matvec_route(request, monkeypatch):
    """Each route of the distributed ``A @ x`` (``ops.blas3.matvec.ROUTE``; the device's is
    the exchange), on every backend."""
    monkeypatch.setattr(matvec, "ROUTE", request.param)
    return request.param


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize(
    "m, n, blocks", [(9, 7, ((2, 3), 3, 2)), (1, 5, ((1, 2), 2, 1)), (6, 0, ((2, 2), 2, 2))]
)
def test_matvec_vecmat_dot(grid, comm, dtype, m, n, blocks, matvec_route):
    ab, xb, yb = blocks
    a = _data((m, n), dtype, 1)
    x, y = _data(n, dtype, 2), _data(m, dtype, 3)
    A = bm.from_numpy(a, block=ab, grid=grid)
    X = bm.from_numpy(x, block=xb, grid=grid)  # blocks that do not conform: moved quietly
    Y = bm.from_numpy(y, block=yb, grid=grid)
    ctx = _strict()
    try:
        for got, xx, yy, what in (
            (A @ X, a, x, "A @ x"),
            (Y @ A, y, a, "y @ A"),
            (A.T @ Y, a.T, y, "A.T @ y"),
            (X @ A.T, x, a.T, "x @ A.T"),
            (A.conj().T @ Y, a.conj().T, y, "A.H @ y"),
            (np.dot(A, X), a, x, "np.dot(A, x)"),
            (np.inner(A, X), a, x, "np.inner(A, x)"),
            (np.matmul(A, x), a, x, "A @ x (NumPy x)"),
            (y @ A, y, a, "y (NumPy) @ A"),
        ):
            assert isinstance(got, bm.BlockCyclicArray) and got.ndim == 1, what
            assert got.dtype == np.dtype(dtype)
            _bound_check(got.to_numpy(), xx, yy, dtype, what)
        for got, u, v, ref in (
            (X @ X, x, x, x @ x),
            (np.dot(X, X), x, x, x @ x),
            (np.vdot(X, X), x, x, np.vdot(x, x)),
            (np.inner(Y, Y), y, y, np.inner(y, y)),
        ):
            assert np.ndim(got) == 0 and _same_everywhere(got)
            assert np.asarray(got).dtype == ref.dtype
            bound = 4 * max(u.size, 1) * eps(dtype) * (np.abs(u) @ np.abs(v)) + 1e-30
            assert abs(got - ref) <= bound
    finally:
        ctx.__exit__(None, None, None)
    outer = np.outer(Y, X)
    assert outer.shape == (m, n)
    _bound_check(outer.to_numpy(), y[:, None], x[None, :], dtype, "outer")
    with pytest.raises(ValueError, match="conform|mismatch") as e:
        A @ Y if m != n else A @ bm.zeros(n + 1, grid=grid)
    assert _same_everywhere(str(e.value))


def test_products_with_shifted_sources(grid, matvec_route):
    """A matrix and vectors whose first blocks lie on other processes than (0, 0): each route
    finds the pieces and the owners from the layouts alone."""
    pr, pc = grid.shape
    m, n = 11, 9
    a = _data((m, n), np.float64, 21)
    x, y = _data(n, np.float64, 22), _data(m, np.float64, 23)
    A = with_source(a, grid, (2, 3), (pr - 1, pc - 1))
    X = as_vector(with_source(x[:, None], grid, (3, 1), (pr // 2, pc - 1)))
    Y = as_vector(with_source(y[:, None], grid, (2, 1), (0, pc // 2)))
    for got, xx, yy, what in (
        (A @ X, a, x, "A @ x"),
        (Y @ A, y, a, "y @ A"),
        (A.T @ Y, a.T, y, "A.T @ y"),
    ):
        assert got.ndim == 1
        _bound_check(got.to_numpy(), xx, yy, np.float64, what)


def test_integer_products_promote(grid):
    a = np.arange(12).reshape(3, 4)
    x = np.arange(4)
    A = bm.from_numpy(a, block=2, grid=grid)
    X = bm.from_numpy(x, block=2, grid=grid)
    got = A @ X
    assert got.dtype == np.float64  # no integer BLAS: computed in float64
    np.testing.assert_array_equal(got.to_numpy(), (a @ x).astype(np.float64))
    d = X @ X
    assert d == x @ x and d.dtype == (x @ x).dtype  # the inner product stays exact
    B = (A > 3) @ A.T.astype(np.int32)
    assert B.dtype == np.float64 and np.array_equal(B.to_numpy(), ((a > 3) @ a.T).astype(float))
    y = np.arange(5) * 3 - 7  # np.outer is element-wise: exact, in NumPy's dtype
    Y = bm.from_numpy(y, block=3, grid=grid)
    for got, want in (
        (np.outer(X, Y), np.outer(x, y)),
        (np.outer(X > 1, Y < 0), np.outer(x > 1, y < 0)),
        (np.outer(X, Y.astype(np.float32)), np.outer(x, y.astype(np.float32))),
    ):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.to_numpy(), want)


# -- solves ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n, block", [(1, 1), (9, 2), (12, 5)])
def test_solves_with_vectors(grid, dtype, n, block):
    a = _data((n, n), dtype, 4) + n * np.eye(n, dtype=dtype)
    b = _data(n, dtype, 5)
    A = bm.from_numpy(a, block=block, grid=grid)
    B = bm.from_numpy(b, block=block, grid=grid)
    spd = a @ a.conj().T + n * np.eye(n, dtype=dtype)
    S = bm.from_numpy(spd, block=block, grid=grid)
    cases = [
        ("np.linalg.solve", np.linalg.solve(A, B), a, np.linalg.solve(a, b)),
        ("np.linalg.solve numpy b", np.linalg.solve(A, b), a, np.linalg.solve(a, b)),
        ("bm.linalg.solve", bm.linalg.solve(A, B), a, np.linalg.solve(a, b)),
        ("solve pos", bm.linalg.solve(S, B, assume_a="pos"), spd, np.linalg.solve(spd, b)),
        (
            "solve_triangular",
            bm.linalg.solve_triangular(A, B, lower=True),
            np.tril(a),
            sla.solve_triangular(a, b, lower=True),
        ),
        (
            "solve_triangular trans",
            bm.linalg.solve_triangular(A, b, trans="T"),
            np.triu(a).T,
            sla.solve_triangular(a, b, trans="T"),
        ),
        (
            "cho_solve",
            bm.linalg.cho_solve(bm.linalg.cho_factor(S), B),
            spd,
            sla.cho_solve(sla.cho_factor(spd), b),
        ),
        (
            "lu_solve",
            bm.linalg.lu_solve(bm.linalg.lu_factor(A), B),
            a,
            sla.lu_solve(sla.lu_factor(a), b),
        ),
    ]
    for what, got, mat, ref in cases:
        assert isinstance(got, bm.BlockCyclicArray) and got.ndim == 1, what
        xs = got.to_numpy()
        assert xs.shape == (n,) and xs.dtype == ref.dtype, what
        # backward error: ||mat x - b|| <= c n eps (||mat|| ||x|| + ||b||)
        r = np.linalg.norm(high(mat) @ high(xs) - high(b))
        tol = 30 * n * eps(dtype) * (np.linalg.norm(mat) * np.linalg.norm(xs) + np.linalg.norm(b))
        assert r <= tol, (what, r, tol)
    np.testing.assert_array_equal(B.to_numpy(), b)  # inputs unchanged
    X = bm.linalg.trsm(A, B, side="right", lower=True)
    assert X.ndim == 1
    np.testing.assert_allclose(
        X.to_numpy() @ np.tril(a),
        b,
        rtol=0,
        atol=50 * n * eps(dtype) * (np.abs(np.tril(a)).sum() * np.abs(X.to_numpy()).max() + 1),
    )


def test_integer_linear_algebra_promotes(grid):
    a = np.array([[4, 1, 0], [1, 3, 1], [0, 1, 2]])
    b = np.array([1, 2, 3])
    A = bm.from_numpy(a, block=2, grid=grid)
    x = np.linalg.solve(A, b)
    assert x.dtype == np.float64 and x.ndim == 1
    np.testing.assert_allclose(x.to_numpy(), np.linalg.solve(a, b), rtol=1e-14)
    assert np.linalg.det(A) == pytest.approx(np.linalg.det(a), rel=1e-14)
    np.testing.assert_allclose(
        np.linalg.inv(A).to_numpy(), np.linalg.inv(a), rtol=1e-14, atol=1e-15
    )
    np.testing.assert_allclose(np.linalg.cholesky(A).to_numpy(), np.linalg.cholesky(a), rtol=1e-14)
    assert np.linalg.slogdet(A)[1] == pytest.approx(np.linalg.slogdet(a)[1], rel=1e-14)


# -- replicated NumPy operands ---------------------------------------------------------------------
def test_replicated_operands(grid):
    m, n = 7, 5
    a, x = _data((m, n), np.float64, 1), _data(n, np.float64, 2)
    A = bm.from_numpy(a, block=(2, 3), grid=grid)
    for got, ref in (
        (A + a, a + a),
        (a - A, a - a),
        (A * x, a * x),
        (A > a[0], a > a[0]),
        (np.maximum(A, a[:, :1]), np.maximum(a, a[:, :1])),
        (np.where(A > 0, a, 0.0), np.where(a > 0, a, 0.0)),
    ):
        assert isinstance(got, bm.BlockCyclicArray)
        np.testing.assert_array_equal(got.to_numpy(), ref)
    _bound_check((A @ a.T).to_numpy(), a, a.T, np.float64, "A @ a.T")
    _bound_check((a.T @ A).to_numpy(), a.T, a, np.float64, "a.T @ A")
    assert np.allclose(A, a) and np.array_equal(A, a)
    with pytest.raises(TypeError, match="to_numpy"):
        np.asarray(A)  # implicit gathers stay refused


def test_ranks_that_disagree_raise_everywhere(grid, comm):
    m, n = 6, 4
    a = _data((m, n), np.float64, 1)
    A = bm.from_numpy(a, block=2, grid=grid)
    if comm.size == 1:
        return
    bad = a + (comm.rank == comm.size - 1)  # the last rank holds other values
    for call in (
        lambda: A + bad,
        lambda: A @ bad[0],
        lambda: np.linalg.solve(bm.from_numpy(np.eye(m), block=2, grid=grid), bad[:, 0]),
        lambda: A == bad,
    ):
        with pytest.raises(ValueError, match="same on every rank") as e:
            call()
        assert _same_everywhere(str(e.value))
    other_shape = a if comm.rank else a[:, :2]
    with pytest.raises(ValueError, match="shapes") as e:
        A * other_shape[0]
    assert _same_everywhere(str(e.value))
    np.testing.assert_array_equal(A.to_numpy(), a)  # nothing was written
    np.testing.assert_array_equal((A + a).to_numpy(), a + a)  # and the grid still works


# -- functions on vectors --------------------------------------------------------------------------
def test_vector_functions(grid):
    x, y = _data(6, np.float64, 1), _data(4, np.float64, 2)
    X = bm.from_numpy(x, block=4, grid=grid)
    Y = bm.from_numpy(y, block=1, grid=grid)
    for got, ref in (
        (np.concatenate([X, Y, X]), np.concatenate([x, y, x])),
        (np.hstack([X, Y]), np.hstack([x, y])),
        (np.block([X, Y]), np.block([x, y])),
    ):
        np.testing.assert_array_equal(_vec(got), ref)
    for got, ref in (
        (np.vstack([X, X]), np.vstack([x, x])),
        (np.stack([Y, Y, Y]), np.stack([y, y, y])),
        (np.stack([Y, Y], axis=1), np.stack([y, y], axis=1)),
        (np.column_stack([X, X]), np.column_stack([x, x])),
        (np.diag(X, 1), np.diag(x, 1)),
    ):
        assert got.ndim == 2
        np.testing.assert_array_equal(got.to_numpy(), ref)
    np.testing.assert_array_equal(_vec(np.clip(X, -0.5, 0.5)), np.clip(x, -0.5, 0.5))
    np.testing.assert_array_equal(_vec(np.real(X + 1j)), x)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(_vec(np.nan_to_num(X / 0.0)), np.nan_to_num(x / 0.0))
    with pytest.raises(ValueError, match="same number of dimensions"):
        np.concatenate([X, X.reshape(6, 1)])


# -- properties over grids, blocks and lengths -----------------------------------------------------
@PROPERTY
@given(data=st.data())
def test_property_vectors_match_numpy(data):
    gshape = data.draw(st.sampled_from(grid_shapes(MPI.COMM_WORLD.Get_size())))
    grid = cached_grid(*gshape)
    n = data.draw(st.integers(0, 17))
    m = data.draw(st.integers(1, 9))
    bx, by, bm_, bn = (data.draw(st.integers(1, 6)) for _ in range(4))
    dtype = data.draw(st.sampled_from([np.float64, np.complex128, np.int64]))
    seed = data.draw(st.integers(0, 2**16))
    x, y, a = _data(n, dtype, seed), _data(n, dtype, seed + 1), _data((m, n), dtype, seed + 2)
    X = bm.from_numpy(x, block=bx, grid=grid)
    Y = bm.from_numpy(y, block=by, grid=grid)
    A = bm.from_numpy(a, block=(bm_, bn), grid=grid)
    np.testing.assert_array_equal((X + Y).to_numpy(), x + y)
    np.testing.assert_array_equal((A * X).to_numpy(), a * x)
    np.testing.assert_array_equal((X > 0).to_numpy(), x > 0)
    if n:
        k = data.draw(st.integers(0, n - 1))
        j = data.draw(st.integers(k, n))
        assert X[k] == x[k]
        np.testing.assert_array_equal(X[k:j].to_numpy(), x[k:j])
        np.testing.assert_array_equal(A[:, k].to_numpy(), a[:, k])
        assert X.argmax() == x.argmax() if np.dtype(dtype).kind != "c" else True
    np.testing.assert_array_equal(A[m - 1].to_numpy(), a[m - 1])
    s = X.sum()
    assert abs(s - x.sum()) <= 4 * max(n, 1) * 1e-15 * np.abs(x).sum()
    ax = A.sum(axis=1).to_numpy()
    assert np.all(np.abs(ax - a.sum(axis=1)) <= 4 * max(n, 1) * 1e-15 * np.abs(a).sum(axis=1))
    route = data.draw(st.sampled_from(["host", "exchange"]))
    saved, matvec.ROUTE = matvec.ROUTE, route
    try:
        got = (A @ X).to_numpy()
        back = (A.T.conj() @ A[:, n // 2]).to_numpy() if n else None
    finally:
        matvec.ROUTE = saved
    ref = a.astype(np.complex128) @ x.astype(np.complex128)
    scale = np.abs(a).astype(float) @ np.abs(x).astype(float)
    assert np.all(np.abs(got - ref) <= 4 * max(n, 1) * 1e-15 * scale)
    if n:
        c = a[:, n // 2].astype(np.complex128)
        ref = a.conj().T.astype(np.complex128) @ c
        scale = np.abs(a).T.astype(float) @ np.abs(c)
        assert np.all(np.abs(back - ref) <= 4 * m * 1e-15 * scale)
    d = X @ Y
    assert abs(d - x @ y) <= 4 * max(n, 1) * 1e-15 * (np.abs(x) @ np.abs(y))


@pytest.mark.parametrize("dtype", [np.complex64, np.float64], ids=lambda d: np.dtype(d).name)
def test_products_with_views(grid, dtype, matvec_route):
    m, n = 7, 5
    a = _data((m, n), dtype, 11)
    x, y = _data(n, dtype, 12), _data(m, dtype, 13)
    A = bm.from_numpy(a, block=(2, 3), grid=grid)
    X = bm.from_numpy(x, block=3, grid=grid)
    Y = bm.from_numpy(y, block=2, grid=grid)
    for got, xx, yy, what in (
        (A.conj() @ X, a.conj(), x, "conj(A) @ x"),
        (X @ A.H, x, a.conj().T, "x @ A.H"),
        (Y @ A.conj(), y, a.conj(), "y @ conj(A)"),
        (A.T @ A[:, 1], a.T, a[:, 1], "A.T @ A[:, 1]"),
        (A[2] @ A.T, a[2], a.T, "A[2] @ A.T"),
        (A @ A[3].conj(), a, a[3].conj(), "A @ conj(A[3])"),
        (A[1:6, 1:4] @ X[1:4], a[1:6, 1:4], x[1:4], "window @ vector window"),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", bm.ViewCopyWarning)
            g = got.to_numpy()
        _bound_check(g, xx, yy, dtype, what)


@pytest.mark.gpu
@pytest.mark.skipif(
    os.environ.get("BLASMP_BACKEND") != "gpu", reason="needs BLASMP_BACKEND=gpu and a usable GPU"
)
def test_cupy_operands_are_replicated(grid, comm):
    import cupy

    m, n = 9, 6
    a, x = _data((m, n), np.float64, 1), _data(n, np.float64, 2)
    A = bm.from_numpy(a, block=(2, 3), grid=grid)
    ca, cx = cupy.asarray(a), cupy.asarray(x)
    np.testing.assert_array_equal((A + ca).to_numpy(), a + a)
    np.testing.assert_array_equal((A * cx).to_numpy(), a * x)
    _bound_check((A @ cx).to_numpy(), a, x, np.float64, "A @ cupy x")
    s = bm.from_numpy(a.T @ a + n * np.eye(n), block=3, grid=grid)
    got = np.linalg.solve(s, cx).to_numpy()
    np.testing.assert_allclose(got, np.linalg.solve(a.T @ a + n * np.eye(n), x), rtol=1e-10)
    np.testing.assert_array_equal(A[cupy.asarray([2, 0])].to_numpy(), a[[2, 0]])
    if comm.size > 1:
        bad = cupy.asarray(a + (comm.rank == comm.size - 1))
        with pytest.raises(ValueError, match="same on every rank") as e:
            A + bad
        assert _same_everywhere(str(e.value))
