"""Distributed tests of the NumPy face: ufuncs (elementwise), reductions and the strict
``__array_function__`` registry, checked against NumPy on the gathered matrices."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import blasmp_array as bm
from blasmp_array.ops.engine.elementwise import RedistributionWarning

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


_GRIDS: dict = {}


def _cached_grid(shape, backend):
    """A grid per shape for the whole module: every ProcessGrid holds two communicators, and
    MPICH allows only about 2000 per process."""
    if (shape, backend) not in _GRIDS:
        _GRIDS[(shape, backend)] = bm.ProcessGrid(*shape, backend=backend)
    return _GRIDS[(shape, backend)]


SHAPE = (13, 10)
BLOCK = (3, 4)


def _eps(dtype) -> float:
    return float(np.finfo(np.dtype(dtype)).eps)


def _pair(grid, dtype, shape=SHAPE, block=BLOCK):
    A = bm.random.standard_normal(shape, seed=1, block=block, grid=grid, dtype=dtype)
    B = bm.random.standard_normal(shape, seed=2, block=block, grid=grid, dtype=dtype)
    return A, B, A.to_numpy(), B.to_numpy()


def _check(got, ref, ulps=4):
    """``got`` (a BlockCyclicArray) equals NumPy's ``ref`` in dtype, and in value to a few units
    in the last place (elementwise results are single correctly- or faithfully-rounded ops)."""
    assert isinstance(got, bm.BlockCyclicArray), type(got)
    g = got.to_numpy()
    assert g.dtype == ref.dtype, (g.dtype, ref.dtype)
    assert g.shape == ref.shape
    if ref.dtype == np.bool_:
        np.testing.assert_array_equal(g, ref)
        return
    eps = _eps(ref.dtype)
    finite = np.abs(ref[np.isfinite(ref)])
    scale = finite.max() if finite.size else 1.0
    np.testing.assert_allclose(g, ref, rtol=ulps * eps, atol=ulps * eps * scale)


def _host(value, axis=0):
    """A reduction's result on the host: an axis reduction is a distributed vector (gathered
    here), a full reduction a NumPy scalar on every rank."""
    if axis is None or axis == (0, 1):
        assert not isinstance(value, bm.BlockCyclicArray)
        return value
    assert isinstance(value, bm.BlockCyclicArray) and value.ndim in (1, 2), type(value)
    return value.to_numpy()


def _same_on_all_ranks(comm, value) -> bool:
    mine = np.ascontiguousarray(value).tobytes()
    return all(x == mine for x in comm.allgather(mine))


# -- elementwise -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_binary_ufuncs(grid, dtype):
    A, B, a, b = _pair(grid, dtype)
    _check(A + B, a + b)
    _check(A - B, a - b)
    _check(A * B, a * b)
    _check(A / B, a / b)
    _check(np.divide(A, B), np.divide(a, b))
    _check(np.maximum(A, B), np.maximum(a, b))
    _check(np.minimum(A, B), np.minimum(a, b))
    _check(A == B, a == b)
    _check(A != A, a != a)
    _check(np.equal(A, A), np.equal(a, a))
    if np.dtype(dtype).kind == "f":
        _check(A < B, a < b)
        _check(A <= B, a <= b)
        _check(A > B, a > b)
        _check(A >= B, a >= b)
        _check(np.hypot(A, B), np.hypot(a, b))
        with np.errstate(invalid="ignore"):
            _check(A**B, a**b, ulps=16)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_unary_and_scalar_ufuncs(grid, dtype):
    A, _, a, _ = _pair(grid, dtype)
    with np.errstate(all="ignore"):
        _check(-A, -a)
        _check(+A, +a)
        _check(abs(A), abs(a))
        _check(np.absolute(A), np.absolute(a))
        _check(np.sqrt(A), np.sqrt(a))
        _check(np.exp(A), np.exp(a))
        _check(np.log(A), np.log(a))
        _check(np.square(A), np.square(a))
        _check(A + 2, a + 2)
        _check(2 - A, 2 - a)
        _check(A * np.float32(3), a * np.float32(3))
        _check(A * np.float64(3), a * np.float64(3))  # a strong NumPy scalar may promote
        _check(A / 2.5, a / 2.5)
        _check(1j * A, 1j * a)
        _check(A + np.array(2.0), a + np.array(2.0))
        _check(A**2, a**2)
        _check(np.power(A, 0.5), np.power(a, 0.5), ulps=8)
        _check(np.maximum(A, 0.0), np.maximum(a, 0.0))
        _check(A == 0, a == 0)
        _check(np.isfinite(np.log(A)), np.isfinite(np.log(a)))
        if np.dtype(dtype).kind == "f":
            _check(A > 0, a > 0)
            _check(0.5 <= A, 0.5 <= a)


def test_lazy_views_in_ufuncs(grid):
    dtype = np.complex128
    A, B, a, b = _pair(grid, dtype)
    S = A.T + B.T  # both transposed: computed on the stored matrices, no data movement
    assert S.is_view and S.shape == (10, 13)
    _check(S, a.T + b.T)
    _check(A.conj() * B, a.conj() * b)
    _check(np.conj(A) - B, a.conj() - b)
    assert np.conj(A).is_view and np.conjugate(A).shares_storage(A)
    C = bm.from_numpy(b.T.copy(), block=A.T.block, grid=grid)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # A.T materialises in C's layout: no redistribution
        _check(A.T + C, a.T + b.T)  # mixed: A.T is materialised (a distributed transpose)
    _check(A.H * 2, a.conj().T * 2)
    _check(np.real(A), a.real)
    _check(np.imag(A.conj()), -a.imag)
    _check(np.real(A.T), a.real.T)
    R = bm.zeros((3, 2), grid=grid)
    assert np.real(R) is R
    _check(np.imag(R), np.zeros((3, 2)))


def test_out_argument(grid):
    A, B, a, b = _pair(grid, np.float64)
    C = bm.zeros_like(A)
    assert np.add(A, B, out=C) is C
    _check(C, a + b)
    np.multiply(A, 2, out=(C,))
    _check(C, a * 2)
    C32 = bm.zeros_like(A, dtype=np.float32)  # same_kind: float64 -> float32 allowed
    np.subtract(A, B, out=C32)
    _check(C32, (a - b).astype(np.float32))
    Z = bm.zeros_like(A, dtype=np.complex128)
    with pytest.raises(TypeError, match="cast"):
        np.add(Z, 1, out=C)
    with pytest.raises(ValueError, match="view"):
        np.add(A.T, 1, out=C.T)
    with pytest.raises(ValueError, match="shape"):
        np.add(A, 1, out=bm.zeros((2, 2), grid=grid))
    np.copyto(C, B)
    _check(C, b)


def test_other_layout_is_redistributed_with_a_warning(grid, comm):
    A, B, a, b = _pair(grid, np.float32)
    B2 = bm.from_numpy(b, block=(5, 2), grid=grid)
    with pytest.warns(RedistributionWarning, match="all-to-all") as record:
        _check(A + B2, a + b)
    assert record[0].filename == __file__  # attributed to the caller's line
    if comm.size > 1:  # (with one process every grid is 1x1)
        shape = (comm.size, 1) if grid.shape != (comm.size, 1) else (1, comm.size)
        other = _cached_grid(shape, grid.backend.name)
        B3 = bm.from_numpy(b, block=BLOCK, grid=other)
        with pytest.warns(RedistributionWarning, match=f"{shape[0]}x{shape[1]}"):
            R = A * B3
        assert R.grid is grid
        _check(R, a * b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _check(A - B, a - b)  # same layout: no warning


def test_ufunc_errors(grid):
    A, B, a, _ = _pair(grid, np.float64)
    with pytest.raises(ValueError, match=r"broadcast together with shapes \(13, 10\) \(10, 13\)"):
        A + bm.zeros((10, 13), block=BLOCK, grid=grid)
    with pytest.raises(ValueError, match="broadcast"):
        A + a[:, :3]  # a replicated NumPy operand broadcasts as NumPy's, or not at all
    with pytest.raises(TypeError, match="list"):
        A + [1.0]
    with pytest.raises(TypeError, match="ldexp"):
        np.ldexp(A, 2)  # not registered: NumPy raises, naming the ufunc
    with pytest.raises(TypeError):
        np.add.reduce(A)  # only plain calls are implemented
    with pytest.raises(TypeError, match="float16"):
        np.sqrt(A > 0)  # NumPy's sqrt of bool is float16, which an array cannot hold
    with pytest.raises(TypeError, match="where"):
        np.add(A, B, where=True)


def test_unregistered_functions_raise_naming_them(grid):
    A = bm.ones((4, 4), block=2, grid=grid)
    for fn, name in (
        (lambda: np.kron(A, A), "kron"),
        (lambda: np.cumulative_sum(A, axis=0), "cumulative_sum"),
        (lambda: np.argwhere(A), "argwhere"),
    ):
        with pytest.raises(TypeError, match=name):
            fn()


# -- reductions --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=lambda d: np.dtype(d).name)
def test_sum_and_mean(grid, comm, dtype):
    A, _, a, _ = _pair(grid, dtype)
    m, n = SHAPE
    eps = _eps(dtype)
    ref = a.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
    for axis, count in ((None, m * n), (0, m), (1, n), (-1, n), ((0, 1), m * n)):
        s = _host(np.sum(A, axis=axis), axis)
        r = np.sum(ref, axis=axis)
        assert _same_on_all_ranks(comm, s)
        assert np.asarray(s).dtype == np.sum(a, axis=axis).dtype
        # recursive-summation bound: |s - r| <= count * eps * sum |a|
        bound = count * eps * np.sum(np.abs(ref), axis=axis)
        assert np.all(np.abs(s - r) <= bound), (axis, s, r)
        mu = _host(np.mean(A, axis=axis), axis)
        assert np.all(np.abs(mu - np.mean(ref, axis=axis)) <= bound / count)
    kd = np.sum(A, axis=0, keepdims=True)
    assert kd.shape == (1, n) and isinstance(kd, bm.BlockCyclicArray)
    # reductions of a transposed view reduce the other axis of the storage
    st = _host(np.sum(A.T, axis=0))
    assert st.shape == (m,)
    assert np.all(np.abs(st - ref.sum(axis=1)) <= n * eps * np.abs(ref).sum(axis=1))
    sc = np.sum(A.conj())
    assert abs(sc - ref.conj().sum()) <= m * n * eps * np.abs(ref).sum()


@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=lambda d: np.dtype(d).name)
def test_extrema_any_all(grid, comm, dtype):
    A, _, a, _ = _pair(grid, dtype)
    for axis in (None, 0, 1):
        for f in (np.max, np.min):
            got = _host(f(A, axis=axis), axis)
            assert _same_on_all_ranks(comm, got)
            np.testing.assert_array_equal(got, f(a, axis=axis))  # exact: no rounding
        for got, ref in (
            (np.max(A.T, axis=axis), np.max(a.T, axis=axis)),
            (np.any(A == 0, axis=axis), np.any(a == 0, axis=axis)),
            (np.all(A == A, axis=axis), np.all(a == a, axis=axis)),
        ):
            np.testing.assert_array_equal(_host(got, axis), ref)
    assert np.amax(A) == np.max(a) and np.amin(A) == np.min(a)
    assert np.all(A == A) and not np.any(A != A)
    Z = A.copy()
    Z.local[...] = 0
    assert not np.all(A == Z) and np.any(Z == 0)


@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=lambda d: np.dtype(d).name)
def test_trace(grid, comm, dtype):
    A, _, a, _ = _pair(grid, dtype, shape=(11, 14), block=(2, 3))
    eps = _eps(dtype)
    for k in (0, 1, -3, 13, -20):
        t = np.trace(A, k)
        assert _same_on_all_ranks(comm, t)
        assert np.asarray(t).dtype == np.trace(a, k).dtype
        d = np.diagonal(a, k).astype(np.complex128)
        assert abs(t - d.sum()) <= max(1, d.size) * eps * np.abs(d).sum()
    tt = np.trace(A.T, 2)
    d = np.diagonal(a.T, 2).astype(np.complex128)
    assert abs(tt - d.sum()) <= d.size * eps * np.abs(d).sum()


@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=lambda d: np.dtype(d).name)
def test_norms(grid, comm, dtype):
    A, _, a, _ = _pair(grid, dtype)
    m, n = SHAPE
    eps = _eps(dtype)
    ref = a.astype(np.complex128)
    for ord_ in (None, "fro", 1, -1, np.inf, -np.inf):
        got = np.linalg.norm(A, ord_)
        assert _same_on_all_ranks(comm, got)
        assert np.asarray(got).dtype == np.linalg.norm(a, ord_).dtype
        r = np.linalg.norm(ref, ord_)
        assert abs(got - r) <= (m * n + 2) * eps * r, (ord_, got, r)
        gt = np.linalg.norm(A.T, ord_)
        rt = np.linalg.norm(ref.T, ord_)
        assert abs(gt - rt) <= (m * n + 2) * eps * rt, (ord_, gt, rt)
    for ord_ in (2, -2, "nuc"):  # from the singular values (ops/face/spectral.py)
        got = np.linalg.norm(A, ord_)
        r = np.linalg.norm(ref, ord_)
        assert _same_on_all_ranks(comm, got)
        assert abs(got - r) <= 60 * max(m, n) * eps * np.linalg.norm(ref, 2) * min(m, n)
    with pytest.raises(ValueError, match="Invalid norm order"):
        np.linalg.norm(A, "bad")
    for axis in (0, 1):  # vector norms of the columns (rows): a distributed vector
        for ord_ in (None, 1, np.inf, -np.inf, 3):
            got = _host(np.linalg.norm(A, ord_, axis=axis))
            r = np.linalg.norm(ref, ord_, axis=axis)
            assert got.dtype == np.linalg.norm(a, ord_, axis=axis).dtype
            assert np.all(np.abs(got - r) <= (max(m, n) + 2) * eps * r), (axis, ord_)


def test_frobenius_norm_does_not_overflow_or_underflow(grid):
    m, n = 6, 5
    for value in (1e300, 1e-300):
        A = bm.full((m, n), value, block=2, grid=grid)
        got = np.linalg.norm(A)
        exact = value * np.sqrt(m * n)
        assert np.isfinite(got) and got > 0
        assert abs(got - exact) <= (m * n + 2) * _eps(np.float64) * exact
    Z = bm.zeros((3, 3), grid=grid)
    assert np.linalg.norm(Z) == 0.0
    Z.local[...] = np.nan
    assert np.isnan(np.linalg.norm(Z))


def test_empty_reductions(grid):
    E = bm.zeros((0, 3), block=2, grid=grid)
    assert np.sum(E) == 0
    np.testing.assert_array_equal(_host(np.sum(E, axis=0)), np.zeros(3))
    assert np.sum(E, axis=1).shape == (0,)
    assert np.linalg.norm(E) == 0.0
    assert not np.any(E) and np.all(E)
    with pytest.raises(ValueError, match="zero-size"):
        np.max(E)
    with pytest.raises(ValueError, match="zero-size"):
        np.min(E, axis=0)


def test_closeness_and_equality(grid, comm):
    A, B, a, b = _pair(grid, np.float64)
    eps = _eps(np.float64)
    assert np.allclose(A, A * (1 + 4 * eps))
    assert not np.allclose(A, B)
    assert np.allclose(A, a[0, 0], atol=2 * np.abs(a).max())
    assert not np.allclose(A, 0.0)
    _check(np.isclose(A, B), np.isclose(a, b))
    assert np.array_equal(A, A.copy())
    assert not np.array_equal(A, B)
    assert not np.array_equal(A, bm.zeros((2, 2), grid=grid))  # shapes differ: False
    N = bm.full(SHAPE, np.nan, block=BLOCK, grid=grid)
    assert not np.array_equal(N, N) and np.array_equal(N, N, equal_nan=True)
    assert np.allclose(N, N, equal_nan=True) and not np.allclose(N, N)
    assert np.allclose(A, a) and np.array_equal(A, a)  # replicated NumPy operands
    assert not np.array_equal(A, a[:, :3])


@pytest.mark.parametrize("k", [0, 2, -3, 20])
def test_triangles(grid, k):
    A, _, a, _ = _pair(grid, np.complex64, shape=(9, 12), block=(2, 5))
    _check(np.triu(A, k), np.triu(a, k), ulps=0)
    _check(np.tril(A, k), np.tril(a, k), ulps=0)
    _check(np.triu(A.T, k), np.triu(a.T, k), ulps=0)


def test_structure_functions(grid):
    A, _, a, _ = _pair(grid, np.float32)
    T = np.transpose(A)
    assert T.is_view and T.shape == (10, 13)
    _check(T, a.T, ulps=0)
    assert np.transpose(A, (0, 1)) is A
    with pytest.raises(ValueError, match="axes"):
        np.transpose(A, (0, 0))
    C = np.copy(A)
    C.local[...] = 0
    _check(A, a, ulps=0)  # the copy does not share storage
    for f, v in ((np.zeros_like, 0), (np.ones_like, 1)):
        Z = f(A)
        assert isinstance(Z, bm.BlockCyclicArray) and Z.layout == A.layout
        _check(Z, np.full(SHAPE, v, np.float32), ulps=0)
    F = np.full_like(A, 7, dtype=np.complex64)
    _check(F, np.full(SHAPE, 7, np.complex64), ulps=0)
    assert np.empty_like(A).layout == A.layout
    assert np.shape(A) == SHAPE and np.ndim(A) == 2 and np.size(A) == 130 and np.size(A, 1) == 10


def test_matmul_routes_to_linalg(grid):
    A, B, a, b = _pair(grid, np.float64, shape=(9, 7))
    with pytest.raises(TypeError, match="list"):
        np.matmul(A, b.T.tolist())
    C = A @ B.T
    c = a @ b.T
    k = a.shape[1]
    bound = 2 * k * _eps(np.float64) * (np.abs(a) @ np.abs(b.T))
    assert np.all(np.abs(C.to_numpy() - c) <= bound)
    D = np.dot(A.T, B)
    assert np.all(np.abs(D.to_numpy() - a.T @ b) <= 2 * 9 * _eps(np.float64) * (abs(a.T) @ abs(b)))
