"""Distributed tests of the array methods (reductions, ``astype``, ``fill``, ``item``,
``reshape``, ...) against NumPy on the gathered matrix."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from mpi4py import MPI

import blasmp_array as bm

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
SHAPE = (13, 10)
BLOCK = (3, 4)

_GRIDS: dict = {}


def grid_shapes(size: int) -> list[tuple[int, int]]:
    return list(dict.fromkeys([(1, size), (size, 1), bm.square_grid_shape(size)]))


@pytest.fixture(params=grid_shapes(MPI.COMM_WORLD.Get_size()), ids=lambda s: f"{s[0]}x{s[1]}")
def grid(request):
    if request.param not in _GRIDS:
        backend = os.environ.get("BLASMP_BACKEND", "cpu")
        _GRIDS[request.param] = bm.ProcessGrid(*request.param, backend=backend)
    return _GRIDS[request.param]


def _eps(dtype) -> float:
    return float(np.finfo(np.dtype(dtype)).eps)


def _same_everywhere(value) -> bool:
    mine = np.ascontiguousarray(value).tobytes() + repr(np.asarray(value).dtype).encode()
    return all(x == mine for x in MPI.COMM_WORLD.allgather(mine))


def _sum_bound(a, k, dtype):
    """Error bound of a sum of ``k`` terms: ``k * eps * sum |x|`` (summation order differs)."""
    return 2 * max(k, 1) * _eps(dtype) * a


def _check_reduction(got, ref, bound):
    if isinstance(got, bm.BlockCyclicArray):  # a reduction along an axis: a distributed vector
        got = got.to_numpy()
    assert _same_everywhere(got)
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    assert np.all(np.abs(got.astype(np.complex128) - ref) <= bound), (got, ref)


@pytest.mark.parametrize(
    "dtype, transposed",
    [(np.float32, False), (np.float64, True), (np.complex64, True), (np.complex128, False)],
)
def test_reductions_match_numpy(grid, dtype, transposed):
    A = bm.random.standard_normal(SHAPE, seed=3, block=BLOCK, grid=grid, dtype=dtype)
    a = A.to_numpy()
    if transposed:
        A, a = A.T, a.T
    absa = np.abs(a).astype(np.float64)
    for axis in (None, 0, 1, (0, 1)):
        for keepdims in (False, True) if axis in (None, 1) else (False,):
            kw = dict(axis=axis, keepdims=keepdims)
            k = a.size if axis in (None, (0, 1)) else a.shape[axis]
            s_abs = np.sum(absa, **kw)
            _check_reduction(A.sum(**kw), a.sum(**kw), _sum_bound(s_abs, k, dtype))
            _check_reduction(A.mean(**kw), a.mean(**kw), _sum_bound(s_abs, k, dtype) / k)
            for name in ("min", "max"):
                if dtype in (np.complex64, np.complex128):
                    continue  # NumPy's complex order is lexicographic: checked below
                _check_reduction(getattr(A, name)(**kw), getattr(a, name)(**kw), 0)
            # var: |x - mean|^2 summed; bound on the order of k eps var + eps mean^2
            v_ref = a.astype(np.complex128).var(**kw)
            bound = 8 * k * _eps(dtype) * (np.mean(absa**2, **kw) + 1)
            got = A.var(**kw)
            got = got.to_numpy() if isinstance(got, bm.BlockCyclicArray) else got
            assert np.asarray(got).dtype == a.var(**kw).dtype
            _check_reduction(got, np.asarray(got), 0)  # identical everywhere
            assert np.all(np.abs(got - v_ref) <= bound)
            std = A.std(**kw)
            std = std.to_numpy() if isinstance(std, bm.BlockCyclicArray) else std
            assert np.all(np.abs(std - np.sqrt(v_ref)) <= np.sqrt(bound) + bound)
            _check_reduction(A.any(**kw), (a != 0).any(**kw), 0)
            _check_reduction(A.all(**kw), (a != 0).all(**kw), 0)
            if axis != (0, 1):
                for name in ("argmin", "argmax"):
                    got = getattr(A, name)(**kw)
                    _check_reduction(got, getattr(a, name)(**kw), 0)
    p = A[0:3, 0:4].prod()
    np.testing.assert_allclose(p, a[0:3, 0:4].prod(), rtol=24 * _eps(dtype))
    assert A.var(ddof=1) == pytest.approx(a.astype(np.complex128).var(ddof=1), rel=1e-3)


def test_extrema_ties_and_nan(grid):
    a = np.zeros(SHAPE)
    a[[2, 7, 11], [3, 1, 9]] = 5.0  # ties: the first in row-major order wins
    a[9, 0] = -5.0
    a[4, 8] = -5.0
    A = bm.from_numpy(a, block=BLOCK, grid=grid)
    for X, x in ((A, a), (A.T, a.T)):
        for axis in (None, 0, 1):
            assert np.array_equal(X.argmax(axis=axis), x.argmax(axis=axis))
            assert np.array_equal(X.argmin(axis=axis), x.argmin(axis=axis))
    a[6, 6] = np.nan
    A[6, 6] = np.nan
    assert np.isnan(A.max()) and A.argmax() == a.argmax() and A.argmin() == a.argmin()
    z = (a + 1j * a[::-1]).astype(np.complex128)
    Z = bm.from_numpy(z, block=BLOCK, grid=grid)
    assert (
        Z.argmax() == z.argmax()
        and Z.argmin(axis=0).to_numpy().tolist() == z.argmin(axis=0).tolist()
    )


def test_empty_and_bad_arguments(grid):
    A = bm.zeros(SHAPE, block=BLOCK, grid=grid)
    E = A[0:0, :]
    assert E.sum() == 0 and E.prod() == 1
    for fn in (E.max, E.argmax, E.mean):
        with pytest.raises(ValueError) as e:
            fn()
        assert _same_everywhere(str(e.value))
    with pytest.raises(np.exceptions.AxisError):
        A.sum(axis=2)
    with pytest.raises(TypeError, match="out="):
        np.argmax(A, out=np.empty(10, np.intp))


@pytest.mark.parametrize("dtype", DTYPES)
def test_small_methods(grid, dtype):
    A = bm.random.standard_normal(SHAPE, seed=5, block=BLOCK, grid=grid, dtype=dtype)
    a = A.to_numpy()
    np.testing.assert_array_equal(A.real.to_numpy(), a.real)
    np.testing.assert_array_equal(A.imag.to_numpy(), a.imag)
    np.testing.assert_array_equal(A.T.real.to_numpy(), a.T.real)
    np.testing.assert_array_equal(A.conj().imag.to_numpy(), a.conj().imag)
    C = A.copy()
    C.fill(2)
    assert np.all(C.to_numpy() == 2) and np.array_equal(A.to_numpy(), a)
    C.T.fill(3)
    assert np.all(C.to_numpy() == 3)
    B = A.astype(np.complex128)
    assert B.dtype == np.complex128 and np.array_equal(B.to_numpy(), a.astype(np.complex128))
    assert A.item(3, 4) == a.item(3, 4) and A.item(-1) == a.item(-1) and A.item(17) == a.item(17)
    assert type(A.item(0, 0)) is type(a.item(0, 0))
    assert A[2:3, 5:6].item() == a[2, 5]
    assert A.reshape(SHAPE) is A and A.reshape(-1, SHAPE[1]) is A and A.reshape(13, 10) is A
    for bad in ((10, 13), (-1,), (130,), (1, 13, 10)):
        with pytest.raises(ValueError, match="relabelling") as e:
            A.reshape(*bad)
        assert _same_everywhere(str(e.value))
    with pytest.raises(ValueError, match="size 1"):
        A.item()
    with pytest.raises(TypeError):
        C.fill(np.ones(3))
    if np.dtype(dtype).kind != "c":
        with pytest.raises(TypeError, match="complex"):
            C.fill(1j)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(A) == 13


def test_methods_on_bool_results(grid):
    A = bm.random.standard_normal(SHAPE, seed=6, block=BLOCK, grid=grid)
    a = A.to_numpy()
    assert np.isfinite(A).all() is not None and bool(np.isfinite(A).all())
    assert (A > 0).sum() == (a > 0).sum() and _same_everywhere((A > 0).sum())
    np.testing.assert_array_equal((A > 0).any(axis=1).to_numpy(), (a > 0).any(axis=1))
    A[3, 4] = np.inf
    assert not np.isfinite(A).all() and np.isinf(A).any()
