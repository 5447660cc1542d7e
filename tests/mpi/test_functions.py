"""Distributed tests of the NumPy functions of ``ops/face/functions.py`` (diagonals, where,
stacking, vdot/dot/outer, einsum, clip, nan_to_num) and the vector norms, against NumPy on the
gathered matrices."""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pytest
from mpi4py import MPI

import blasmp_array as bm

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from blas3_reference import assert_within_bound, high  # noqa: E402

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
SHAPE = (7, 5)
BLOCK = (2, 3)
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
    mine = repr(value)
    return all(x == mine for x in MPI.COMM_WORLD.allgather(mine))


def _matrix(grid, dtype=np.float64, shape=SHAPE, block=BLOCK, seed=0):
    A = bm.random.standard_normal(shape, seed=seed, block=block, grid=grid, dtype=dtype)
    return A, A.to_numpy()


def _product_check(got, x, y, dtype, what):
    ref = high(x) @ high(y)
    scale = np.abs(x).astype(np.float64) @ np.abs(y).astype(np.float64)
    assert_within_bound(got, ref, scale, x.shape[1], dtype, what)


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_diagonals(grid, dtype):
    A, a = _matrix(grid, dtype)
    for k in (-7, -1, 0, 2, 5):
        for X, x in ((A, a), (A.T, a.T), (A.conj(), a.conj())):
            d = np.diagonal(X, k)
            assert isinstance(d, bm.BlockCyclicArray) and d.ndim == 1  # a distributed vector
            np.testing.assert_array_equal(d.to_numpy(), np.diagonal(x, k))
            np.testing.assert_array_equal(np.diag(X, k).to_numpy(), np.diag(x, k))
    np.testing.assert_array_equal(np.diagonal(A, 1, 1, 0).to_numpy(), np.diagonal(a, 1, 1, 0))
    # a vector builds the diagonal matrix; an n x 1 or 1 x n matrix gives its diagonal (NumPy)
    for v, ref in ((A[:, 1], a[:, 1]), (A[2], a[2]), (A[2:6, 4], a[2:6, 4]), (A[2:3, :], a[2:3])):
        for k in (0, 2, -1):
            D = np.diag(v, k)
            assert isinstance(D, bm.BlockCyclicArray) and D.ndim == ref.ndim % 2 + 1
            np.testing.assert_array_equal(D.to_numpy(), np.diag(ref, k))


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_where_clip_nan_to_num(grid, dtype):
    A, a = _matrix(grid, dtype)
    B, b = _matrix(grid, dtype, seed=1)
    np.testing.assert_array_equal(np.where(A.real > 0, A, B).to_numpy(), np.where(a.real > 0, a, b))
    np.testing.assert_array_equal(np.where(A.real > 0, A, 0).to_numpy(), np.where(a.real > 0, a, 0))
    np.testing.assert_array_equal(
        np.where(A.T.real > 0, 1.5, B.T).to_numpy(), np.where(a.T.real > 0, 1.5, b.T)
    )
    C = bm.random.standard_normal(SHAPE, seed=1, block=(3, 3), grid=grid, dtype=dtype)
    with pytest.warns(bm.RedistributionWarning):
        W = np.where(A.real > 0, A, C)
    np.testing.assert_array_equal(W.to_numpy(), np.where(a.real > 0, a, b))
    with pytest.raises(TypeError, match="np.where"):
        np.where(A.real > 0)
    if np.dtype(dtype).kind != "c":
        np.testing.assert_array_equal(np.clip(A, -0.5, 0.5).to_numpy(), np.clip(a, -0.5, 0.5))
        np.testing.assert_array_equal(np.clip(A, None, 0.5).to_numpy(), np.clip(a, None, 0.5))
        np.testing.assert_array_equal(A.T.clip(min=0).to_numpy(), a.T.clip(min=0))
        np.testing.assert_array_equal(np.clip(A, B, 1.0).to_numpy(), np.clip(a, b, 1.0))
        assert A.clip(-0.1) is not A
    bad = a.copy()
    bad[1, 1], bad[2, 2], bad[3, 3] = np.nan, np.inf, -np.inf
    N = bm.from_numpy(bad, block=BLOCK, grid=grid)
    np.testing.assert_array_equal(np.nan_to_num(N).to_numpy(), np.nan_to_num(bad))
    np.testing.assert_array_equal(
        np.nan_to_num(N.T, nan=5, posinf=1).to_numpy(), np.nan_to_num(bad.T, nan=5, posinf=1)
    )
    assert np.isnan(N.to_numpy()[1, 1])  # copy=True left N alone
    assert np.nan_to_num(N, copy=False) is N
    np.testing.assert_array_equal(N.to_numpy(), np.nan_to_num(bad))


def test_stacking(grid):
    A, a = _matrix(grid)
    B, b = _matrix(grid, np.float32, shape=(3, 5), block=(3, 3), seed=2)
    got = np.concatenate([A, B, A[2:4, :]])
    assert got.dtype == np.float64 and got.block == A.block
    np.testing.assert_array_equal(got.to_numpy(), np.concatenate([a, b, a[2:4]]))
    np.testing.assert_array_equal(np.vstack([A, B]).to_numpy(), np.vstack([a, b]))
    np.testing.assert_array_equal(
        np.hstack([A, A.T.T, A[:, 2:3]]).to_numpy(), np.hstack([a, a, a[:, 2:3]])
    )
    np.testing.assert_array_equal(
        np.concatenate([A.T, A.T], axis=1).to_numpy(), np.hstack([a.T, a.T])
    )
    np.testing.assert_array_equal(
        np.block([[A, A[:, :2]], [B, B[:, 1:3]]]).to_numpy(),
        np.block([[a, a[:, :2]], [b, b[:, 1:3]]]),
    )
    for fn, exc in (
        (lambda: np.concatenate([A, A.T]), ValueError),
        (lambda: np.hstack([A, B]), ValueError),
        (lambda: np.concatenate([A, A], axis=None), ValueError),
        (lambda: np.concatenate([A, A], axis=2), np.exceptions.AxisError),
        (lambda: np.concatenate([A, a]), TypeError),
    ):
        with pytest.raises(exc) as e:
            fn()
        assert _same_everywhere(str(e.value))


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_products(grid, dtype):
    A, a = _matrix(grid, dtype)
    B, b = _matrix(grid, dtype, seed=1)
    got = np.vdot(A, B)
    ref = np.vdot(high(a), high(b))
    assert _same_everywhere(got) and np.asarray(got).dtype == np.dtype(dtype)
    assert abs(got - ref) <= 4 * a.size * _eps(dtype) * np.vdot(np.abs(a), np.abs(b))
    assert abs(np.vdot(A.T, B.T) - ref) <= 4 * a.size * _eps(dtype) * np.vdot(np.abs(a), np.abs(b))
    with pytest.raises(ValueError, match="same shape"):
        np.vdot(A, A.T)
    _product_check(np.dot(A, B.T).to_numpy(), a, b.T, dtype, "np.dot")
    np.testing.assert_array_equal(np.dot(A, 2).to_numpy(), a * 2)
    # outer of vectors: a rank-1 GEMM (no redistribution warnings)
    with warnings.catch_warnings():
        warnings.simplefilter("error", bm.RedistributionWarning)
        for u, v, ru, rv in (
            (A[:, 0], B[1, :], a[:, 0], b[1, :]),
            (A[2, :], B[:, 4], a[2, :], b[:, 4]),
            (A[2:6, 3], A[2:6, 3], a[2:6, 3], a[2:6, 3]),
        ):
            _product_check(np.outer(u, v).to_numpy(), ru[:, None], rv[None, :], dtype, "outer")
    with pytest.raises(ValueError, match="vectors"):
        np.outer(A, B)


def test_einsum(grid):
    dtype = np.float64
    A, a = _matrix(grid, dtype)
    B, b = _matrix(grid, dtype, shape=(5, 6), block=(3, 2), seed=3)
    S, s = _matrix(grid, dtype, shape=(6, 6), block=(2, 2), seed=4)
    for spec, ops, x, y in (
        ("ij,jk->ik", (A, B), a, b),
        ("ij,jk", (A, B), a, b),
        ("ji,jk->ik", (A, A), a.T, a),  # A.T @ A: SYRK
        ("ij,kj->ik", (A, A), a, a.T),
        ("ab,bc->ca", (A, B), b.T, a.T),
        ("kj, ki -> ij", (A, A), a.T, a),
    ):
        _product_check(np.einsum(spec, *ops).to_numpy(), x, y, dtype, spec)
    assert np.einsum("ii", S) == pytest.approx(
        np.trace(s), abs=6 * 6 * _eps(dtype) * np.abs(s).sum()
    )
    assert np.einsum("ii->", S) == np.trace(S)
    np.testing.assert_array_equal(np.einsum("ij->ji", A).to_numpy(), a.T)
    assert np.einsum("ij->", A) == np.sum(A)
    np.testing.assert_array_equal(np.einsum("ij->j", A).to_numpy(), np.sum(A, axis=0).to_numpy())
    for spec, ops in (
        ("ij,jk,kl->il", (A, B, S)),
        ("ij,ij->ij", (A, A)),
        ("ii->i", (S,)),
        ("i,i", (A, A)),
        ("...ij,jk", (A, B)),
    ):
        with pytest.raises(ValueError, match="not supported") as e:
            np.einsum(spec, *ops)
        assert _same_everywhere(str(e.value))


def test_norms(grid):
    A, a = _matrix(grid, np.complex128)
    for ord_ in (None, "fro", 1, -1, np.inf, -np.inf):
        assert np.linalg.norm(A, ord_) == pytest.approx(np.linalg.norm(a, ord_), rel=1e-13)
    for v, x in ((A[:, 2:3], a[:, 2:3]), (A[3:4, :], a[3:4, :])):
        for ord_ in (2, -2, "nuc"):
            assert np.linalg.norm(v, ord_) == pytest.approx(np.linalg.norm(x, ord_), rel=1e-13)
    for ord_ in (2, -2, "nuc"):  # of the matrix: from its singular values (ops/face/spectral.py)
        got = np.linalg.norm(A, ord_)
        assert got == pytest.approx(np.linalg.norm(a, ord_), rel=1e-12)
        assert _same_everywhere(float(got))


def test_unsupported_functions_stay_strict(grid):
    A, _ = _matrix(grid)
    for fn, name in (
        (lambda: np.kron(A, A), "kron"),
        (lambda: np.argwhere(A), "argwhere"),
    ):
        with pytest.raises(TypeError, match=name):
            fn()
    # implemented for vectors only: a matrix gets a ValueError that says what to do instead
    for fn in (np.sort, np.median):
        with pytest.raises(ValueError, match="only vectors"):
            fn(A)


# -- chains, powers, diagonals, scans, np.save ------------------------------------------------
def test_multi_dot(grid):
    A, a = _matrix(grid, np.float64, shape=(6, 9), block=(2, 3))
    B, b = _matrix(grid, np.float64, shape=(9, 4), block=(3, 2), seed=2)
    C, c = _matrix(grid, np.float64, shape=(4, 7), block=(2, 2), seed=3)
    x = np.arange(6.0) - 2
    y = np.arange(7.0) / 3
    X = bm.from_numpy(x, block=2, grid=grid)
    Y = bm.from_numpy(y, block=2, grid=grid)
    for ops, refs in (
        ((A, B), (a, b)),
        ((A, B, C), (a, b, c)),
        ((X, A, B, C), (x, a, b, c)),
        ((A, B, C, Y), (a, b, c, y)),
    ):
        got = np.linalg.multi_dot(list(ops))
        ref = np.linalg.multi_dot(list(refs))
        assert got.shape == ref.shape
        scale = np.linalg.multi_dot([np.abs(r) for r in refs])
        assert np.all(np.abs(got.to_numpy() - ref) <= 4 * 9 * _eps(np.float64) * scale * 3)
    s = np.linalg.multi_dot([X, A, B, C, Y])
    r = np.linalg.multi_dot([x, a, b, c, y])
    assert np.ndim(s) == 0 and _same_everywhere(s)
    assert abs(s - r) <= 4 * 9 * 3 * _eps(np.float64) * np.linalg.multi_dot(
        [np.abs(x), np.abs(a), np.abs(b), np.abs(c), np.abs(y)]
    )
    with pytest.raises(ValueError, match="aligned"):
        np.linalg.multi_dot([A, C])
    with pytest.raises(ValueError, match="vector"):
        np.linalg.multi_dot([A, X, B])


@pytest.mark.parametrize("n", [0, 1, 2, 3, 6, -1, -2])
def test_matrix_power(grid, n):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((7, 7)) / 3 + np.eye(7)
    A = bm.from_numpy(a, block=3, grid=grid)
    got = np.linalg.matrix_power(A, n)
    ref = np.linalg.matrix_power(a, n)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    scale = np.linalg.matrix_power(np.abs(a) if n >= 0 else np.abs(np.linalg.inv(a)), abs(n))
    assert np.all(
        np.abs(got.to_numpy() - ref) <= 100 * 7 * max(abs(n), 1) * _eps(np.float64) * scale
    )
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        np.linalg.matrix_power(A[:, :3], 2)
    with pytest.raises(TypeError, match="integer"):
        np.linalg.matrix_power(A, 1.5)


def test_fill_diagonal(grid):
    for shape, val, wrap in (
        ((7, 7), 5.0, False),
        ((9, 4), [1.0, 2.0], False),
        ((13, 4), np.array([1.0, 2.0, 3.0]), True),
        ((3, 8), -1.0, False),
    ):
        A, a = _matrix(grid, np.float64, shape=shape, block=(2, 3))
        np.fill_diagonal(A, val, wrap=wrap)
        np.fill_diagonal(a, val, wrap=wrap)
        np.testing.assert_array_equal(A.to_numpy(), a)
        np.fill_diagonal(A.T, 9.0)
        np.fill_diagonal(a.T, 9.0)
        np.testing.assert_array_equal(A.to_numpy(), a)
    A, a = _matrix(grid, np.float64, shape=(5, 5), block=2)
    np.fill_diagonal(A, bm.arange(5.0, block=2, grid=grid))
    np.fill_diagonal(a, np.arange(5.0))
    np.testing.assert_array_equal(A.to_numpy(), a)
    with pytest.raises(ValueError, match="2-d"):
        np.fill_diagonal(A[0], 1.0)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.int32, np.bool_], ids=str)
def test_cumsum_cumprod(grid, dtype):
    rng = np.random.default_rng(6)
    a = rng.integers(-3, 4, (9, 8))
    a = (a > 0) if dtype == np.bool_ else a.astype(dtype)
    A = bm.from_numpy(a, block=(2, 3), grid=grid)
    for X, x in ((A, a), (A.T, a.T)):
        for axis in (0, 1, -1):
            for f in (np.cumsum, np.cumprod):
                got = f(X, axis=axis)
                ref = f(x, axis=axis)
                assert got.dtype == ref.dtype and got.shape == ref.shape
                np.testing.assert_array_equal(got.to_numpy(), ref)  # small integers: exact
    v = a[:, 1]
    V = A[:, 1]
    for f in (np.cumsum, np.cumprod):
        np.testing.assert_array_equal(f(V).to_numpy(), f(v))
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    assert np.cumsum(A, axis=0, dtype=wide).dtype == wide
    with pytest.raises(ValueError, match="flattens"):
        np.cumsum(A)
    f = bm.from_numpy(rng.standard_normal(40), block=3, grid=grid)
    s = np.cumsum(f).to_numpy()
    r = np.cumsum(f.to_numpy())
    bound = 4 * 40 * _eps(np.float64) * np.cumsum(np.abs(f.to_numpy()))
    assert np.all(np.abs(s - r) <= bound)


def test_np_save(grid, tmp_path_factory):
    A, a = _matrix(grid, np.float64)
    base = MPI.COMM_WORLD.bcast(
        str(tmp_path_factory.mktemp("save")) if MPI.COMM_WORLD.rank == 0 else None
    )
    path = os.path.join(base, "matrix")
    np.save(path, A)  # NumPy appends .npy
    np.save(path + ".npy", A)  # and replaces an existing file
    MPI.COMM_WORLD.Barrier()
    np.testing.assert_array_equal(np.load(path + ".npy"), a)
    with pytest.raises(TypeError, match="path"):
        np.save(open(os.devnull, "wb"), A)
