"""Products beyond ``@``: ``np.dot``, ``np.vdot``, ``np.inner``, ``np.outer``,
``np.linalg.multi_dot`` and ``np.linalg.matrix_power``, and the replicated ndarray operands of
the products and solves.

Every product runs on :func:`.matmul.matmul` (GEMM, SYRK, the vector products) or on the local
inner products of :func:`.matmul.dot_vectors`; results follow NumPy's shapes: vectors where
NumPy gives 1-D arrays, a NumPy scalar on every rank where NumPy gives a scalar.

An ndarray operand beside a BlockCyclicArray is taken to be the same on every rank (one
collective checks it, :mod:`._replicated`) and laid out to fit its partner:
:func:`replicated_operands`.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..._dispatch import implements
from ...array import BLAS_DTYPES, BlockCyclicArray, as_vector
from ...creation import eye
from ...layout import BlockCyclicLayout
from ..blas3.gemm import gemm
from ..blas3.matmul import dot_vectors, matmul
from ..engine._replicated import check_replicated, distribute, is_replicated, replicated
from ..engine._vectors import vector_layout
from ..engine.elementwise import aligned, local_view
from .reductions import _no_extras, _require

__all__ = ["replicated_operands", "operand_like"]


def operand_like(h: Any, partner: BlockCyclicArray, left: bool, what: str) -> BlockCyclicArray:
    """The replicated ndarray ``h`` (1-D or 2-D) as a BlockCyclicArray that fits ``partner``
    in ``h @ partner`` (``left``) or ``partner @ h``: its K dimension blocked like the
    partner's, on the partner's grid. No communication (check with
    :func:`._replicated.check_replicated` first)."""
    if h.ndim not in (1, 2):
        raise ValueError(
            f"{what}: an operand of shape {tuple(h.shape)} is not a vector or a matrix"
        )
    # the partner's block along the shared (K) dimension
    if partner.ndim == 1:
        kb = partner.block[0]
    else:
        kb = partner.block[0] if left else partner.block[1]
    g = partner.grid
    if h.ndim == 1:
        return as_vector(distribute(h.reshape(-1, 1), vector_layout(h.shape[0], kb, g), g))
    return distribute(h, BlockCyclicLayout(tuple(h.shape), (kb, kb), g.shape), g)  # type: ignore[arg-type]


def replicated_operands(a: Any, b: Any, what: str) -> tuple[BlockCyclicArray, BlockCyclicArray]:
    """``(a, b)`` for a product or solve: an ndarray beside a BlockCyclicArray becomes one laid
    out to fit it (after the cross-rank check); ``TypeError`` for anything else."""
    bca = [isinstance(x, BlockCyclicArray) for x in (a, b)]
    if all(bca):
        return a, b
    for x, is_bca in zip((a, b), bca, strict=True):
        if not is_bca and not is_replicated(x):
            raise TypeError(
                f"{what}: an operand is a {type(x).__name__}; products take BlockCyclicArrays "
                "and ndarrays given on every rank (a scalar multiplies with `*`)"
            )
    if not any(bca):
        raise TypeError(f"{what}: no BlockCyclicArray operand")
    partner = a if bca[0] else b
    host = b if bca[0] else a
    check_replicated([replicated(host)], partner.grid, what)
    made = operand_like(host, partner, left=not bca[0], what=what)
    return (a, made) if bca[0] else (made, b)


# -- NumPy's product functions -----------------------------------------------------------------
@implements(np.vdot)
def _vdot(a: Any, b: Any) -> Any:
    """``np.vdot``: ``sum(conj(a) * b)`` over vectors or matrices of one shape; a scalar on
    every rank."""
    x, y = replicated_operands(a, b, "np.vdot")
    if x.shape != y.shape:
        raise ValueError(
            f"np.vdot: shapes {x.shape} and {y.shape} differ (BlockCyclicArrays are not "
            "flattened, so they must have the same shape)"
        )
    if x.ndim == 1:
        return dot_vectors(x, y, "np.vdot", conj=True)
    return _vdot_matrices(x, y)


def _vdot_matrices(x: BlockCyclicArray, y: BlockCyclicArray) -> Any:
    if x._transposed and y._transposed:
        xs, ys = local_view(x.T), local_view(y.T)  # the same pairs, as stored
    else:
        xs, ys = x.resolve(), y.resolve()
    ys = aligned(ys, xs, "np.vdot")
    dt = np.result_type(x.dtype, y.dtype)
    backend, xp = xs.backend, xs.backend.xp
    part = None
    if xs._data.size:
        part = backend.asnumpy(xp.vdot(xs._data.astype(dt), ys._data.astype(dt)))
    valid = [p for p in backend.allgather(part) if p is not None]
    return dt.type(functools.reduce(np.add, valid)) if valid else dt.type(0)


@implements(np.dot)
def _dot(a: Any, b: Any, out: Any = None) -> Any:
    """``np.dot``: ``a @ b`` for vectors and matrices (``x @ y`` a scalar), ``a * b`` with a
    scalar."""
    if not isinstance(a, BlockCyclicArray) or not isinstance(b, BlockCyclicArray):
        if np.ndim(a) == 0 or np.ndim(b) == 0:
            return np.multiply(a, b) if out is None else np.multiply(a, b, out=out)
    return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)


@implements(np.inner)
def _inner(a: Any, b: Any) -> Any:
    """``np.inner``: the sum over the last axes -- ``x @ y`` (a scalar), ``A @ x``, ``B @ x``
    for ``inner(x, B)``, ``A @ B.T`` for two matrices; a scalar multiplies."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return np.multiply(a, b)
    x, y = replicated_operands(a, b, "np.inner")
    if x.ndim == 1:
        return matmul(y, x) if y.ndim == 2 else matmul(x, y)
    return matmul(x, y if y.ndim == 1 else y.T)


def _as_vector(v: BlockCyclicArray, what: str) -> BlockCyclicArray:
    """``v`` (a vector, or an ``n x 1`` / ``1 x n`` matrix, which NumPy flattens)."""
    if v.ndim == 1:
        return v
    if min(v.shape) != 1 and v.size != 0:
        raise ValueError(
            f"{what}: the operands must be vectors (or n x 1, 1 x n), got {v.shape}; flattening "
            "a distributed matrix is not supported"
        )
    return as_vector(v)


@implements(np.outer)
def _outer(a: Any, b: Any, out: Any = None) -> BlockCyclicArray:
    """``np.outer`` of two vectors (``n x 1``/``1 x n`` matrices are flattened, as NumPy's): a
    rank-1 GEMM, ``m x n``; integers and bools as the element-wise product of the column and
    the row, exact and in NumPy's dtype (the BLAS have no integer GEMM)."""
    _no_extras("np.outer", out)
    x, y = replicated_operands(a, b, "np.outer")
    xv = _as_vector(_require(x, "np.outer"), "np.outer")
    yv = _as_vector(_require(y, "np.outer"), "np.outer")
    if np.result_type(xv.dtype, yv.dtype) not in BLAS_DTYPES:
        return xv.reshape(-1, 1) * yv.reshape(1, -1)
    u, v = xv._column, yv._column.T
    # K has length 1: give v's stored K-dimension u's K block (the same distribution) so that
    # GEMM sees conforming blocks and copies nothing
    vs = v.storage
    kax = 1 if v._transposed else 0
    blk = list(vs.layout.block)
    blk[kax] = u.block[1]
    lay = BlockCyclicLayout(vs.layout.shape, (blk[0], blk[1]), vs.layout.grid_shape, vs.layout.src)
    v2 = BlockCyclicArray(
        vs._data, lay, vs.grid, transposed=v._transposed, conjugated=v._conjugated
    )
    return gemm(u, v2)


# -- chains and powers --------------------------------------------------------------------------
def _chain_order(dims: list[int]) -> list[list[int]]:
    """The cheapest parenthesisation of a chain of matrices ``dims[i] x dims[i + 1]`` (the
    classic dynamic programme, as NumPy's ``multi_dot``): ``split[i][j]``."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = -1
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] < 0 or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _multiply_chain(xs: list[BlockCyclicArray], split: list[list[int]], i: int, j: int) -> Any:
    if i == j:
        return xs[i]
    k = split[i][j]
    return matmul(_multiply_chain(xs, split, i, k), _multiply_chain(xs, split, k + 1, j))


@implements(np.linalg.multi_dot)
def _multi_dot(arrays: Any, *, out: Any = None) -> Any:
    """``np.linalg.multi_dot``: the product of a chain of matrices in the cheapest order (the
    classic dynamic programme over the flop counts), a vector allowed at either end (a row
    first, a column last; a scalar when both ends are vectors)."""
    _no_extras("np.linalg.multi_dot", out)
    if isinstance(arrays, BlockCyclicArray) or not isinstance(arrays, list | tuple):
        raise TypeError("np.linalg.multi_dot needs a sequence of BlockCyclicArrays")
    xs = [_require(x, "np.linalg.multi_dot") for x in arrays]
    if len(xs) < 2:
        raise ValueError("Expecting at least two arrays.")
    for i, x in enumerate(xs):
        if x.ndim == 1 and 0 < i < len(xs) - 1:
            raise ValueError(f"multi_dot: array {i} is a vector; only the first and last may be")
    # the chain as matrices: a vector first is a 1 x n row, a vector last an n x 1 column
    faces = [
        x.shape if x.ndim == 2 else (1, x.shape[0]) if i == 0 else (x.shape[0], 1)
        for i, x in enumerate(xs)
    ]
    for i in range(len(xs) - 1):
        if faces[i][1] != faces[i + 1][0]:
            raise ValueError(
                f"multi_dot: shapes {xs[i].shape} (array {i}) and {xs[i + 1].shape} (array "
                f"{i + 1}) not aligned"
            )
    dims = [faces[0][0]] + [f[1] for f in faces]
    return _multiply_chain(xs, _chain_order(dims), 0, len(xs) - 1)


@implements(np.linalg.matrix_power)
def _matrix_power(a: Any, n: Any) -> BlockCyclicArray:
    """``np.linalg.matrix_power``: ``a @ a @ ... @ a`` by repeated squaring (about ``2 log2 n``
    GEMMs); ``n == 0`` the identity, ``n < 0`` the power of ``np.linalg.inv(a)``. Integer
    matrices are computed in float64 (no integer GEMM)."""
    x = _require(a, "np.linalg.matrix_power")
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise TypeError("exponent must be an integer")
    if x.ndim != 2 or x.shape[0] != x.shape[1]:
        raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")
    k = int(n)
    if k == 0:
        return eye(x.shape[0], dtype=x.dtype, block=x.block, grid=x.grid)
    if x.dtype not in BLAS_DTYPES:
        x = x.astype(np.float64)
    if k < 0:
        x, k = np.linalg.inv(x), -k  # type: ignore[assignment]
    result: BlockCyclicArray | None = None
    square = x
    while True:
        if k & 1:
            result = square.copy() if result is None else matmul(result, square)
        k >>= 1
        if not k:
            break
        square = matmul(square, square)
    assert result is not None
    return result
