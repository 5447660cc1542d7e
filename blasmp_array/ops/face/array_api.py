"""NumPy 2's array-API spellings of calls the library already makes, and NumPy's other
spellings of them (``np.swapaxes``, ``np.count_nonzero``, ``np.tensordot``).

NumPy 2.0 added the names of the Python array API standard beside its own:
``np.linalg.matrix_norm``, ``vector_norm``, ``matrix_transpose``, ``vecdot``, ``outer``,
``diagonal``, ``trace`` and ``matmul``, ``np.matrix_transpose``, and the generalized ufunc
``np.vecdot`` (2.2 added ``np.matvec`` and ``np.vecmat``). Code written against the standard
calls these; each is registered here as the NumPy call of the same meaning on
BlockCyclicArrays (``np.linalg.outer`` is ``np.outer`` for vectors, ``vecdot`` the conjugated
inner product along an axis, ...), so it runs the same distributed operator and raises the same
errors. A name the installed NumPy lacks is not registered.

``np.linalg.vector_norm`` of a matrix with ``axis=None`` is the norm of its elements as one
vector (the standard's rule, not ``np.linalg.norm``'s matrix norms): the elementwise and
reduction operators compute it without flattening anything.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._dispatch import implements, implements_ufunc
from ...array import BlockCyclicArray
from .reductions import _require

__all__: list[str] = []

_linalg = np.linalg


def _register(owner: Any, name: str) -> Any:
    """``implements(owner.name)`` where NumPy has it, else a decorator that leaves ``fn``
    unregistered. (``np.permute_dims`` is ``np.transpose`` itself: registered already.)"""
    fn = getattr(owner, name, None)
    return implements(fn) if fn is not None else (lambda impl: impl)


def _matrix(x: Any, what: str) -> BlockCyclicArray:
    x = _require(x, what)
    if x.ndim != 2:
        raise ValueError(f"{what}: the input must be a matrix (2-D), got shape {x.shape}")
    return x


@_register(np, "matrix_transpose")
@_register(_linalg, "matrix_transpose")
def _matrix_transpose(x: Any, /) -> BlockCyclicArray:
    """``np.matrix_transpose`` and ``np.linalg.matrix_transpose``: ``x.T``, a lazy view
    (NumPy's is a view too)."""
    return _matrix(x, "matrix_transpose").T


@_register(_linalg, "matmul")
def _linalg_matmul(x1: Any, x2: Any, /) -> Any:
    """``np.linalg.matmul``: ``np.matmul``."""
    return np.matmul(x1, x2)


@_register(_linalg, "outer")
def _linalg_outer(x1: Any, x2: Any, /) -> Any:
    """``np.linalg.outer``: ``np.outer`` of two vectors (matrices are refused, as NumPy's)."""
    for x in (x1, x2):
        if getattr(x, "ndim", 1) != 1:
            raise ValueError(
                f"np.linalg.outer: input arrays must be one-dimensional, got shape {x.shape}"
            )
    return np.outer(x1, x2)


@_register(_linalg, "diagonal")
def _linalg_diagonal(x: Any, /, *, offset: int = 0) -> Any:
    """``np.linalg.diagonal``: diagonal ``offset`` of a matrix, a distributed vector."""
    return np.diagonal(_matrix(x, "np.linalg.diagonal"), offset)


@_register(_linalg, "trace")
def _linalg_trace(x: Any, /, *, offset: int = 0, dtype: Any = None) -> Any:
    """``np.linalg.trace``: ``np.trace``, the same NumPy scalar on every rank."""
    return np.trace(_matrix(x, "np.linalg.trace"), offset, dtype=dtype)


@_register(_linalg, "matrix_norm")
def _matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:
    """``np.linalg.matrix_norm``: ``np.linalg.norm`` of a matrix (``ord`` 'fro', 'nuc', 1, -1,
    2, -2, inf, -inf)."""
    m: Any = _matrix(x, "np.linalg.matrix_norm")
    return np.linalg.norm(m, ord=ord, axis=None, keepdims=keepdims)


@_register(_linalg, "vector_norm")
def _vector_norm(x: Any, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Any:
    """``np.linalg.vector_norm``: of a vector, of each row or column of a matrix (``axis`` 1 or
    0: a distributed vector), or of all the elements of a matrix (``axis=None`` or ``(0, 1)``),
    for every ``ord`` of NumPy's."""
    x = _require(x, "np.linalg.vector_norm")
    if isinstance(axis, tuple) and sorted(a % x.ndim for a in axis) == list(range(x.ndim)):
        axis = None
    if x.ndim == 1 or axis is not None:
        return np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    dt = np.dtype(x.dtype)
    real = np.dtype(np.float64) if dt.kind in "biu" else np.abs(np.zeros(1, dt)).dtype
    if ord is None or ord == 2:
        out = np.linalg.norm(x)  # the Frobenius norm: the 2-norm of the elements
    elif ord == 0:
        out = np.sum(x != 0)
    elif ord == np.inf:
        out = np.max(np.abs(x))
    elif ord == -np.inf:
        out = np.min(np.abs(x))
    elif ord == 1:
        out = np.sum(np.abs(x))
    else:
        p = float(ord)
        out = np.sum(np.abs(x).astype(real) ** p) ** (1.0 / p)
    out = real.type(out)
    return np.full((1, 1), out) if keepdims else out


if hasattr(np, "vecdot") and isinstance(np.vecdot, np.ufunc):

    @implements_ufunc(np.vecdot)
    def _vecdot_ufunc(ufunc: np.ufunc, x1: Any, x2: Any, out: Any = None, **kw: Any) -> Any:
        """``np.vecdot(x1, x2, axis=-1)``: ``sum(conj(x1) * x2)`` along ``axis``."""
        return _vecdot(x1, x2, out, **kw)


@_register(_linalg, "vecdot")
def _linalg_vecdot(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """``np.linalg.vecdot``: ``sum(conj(x1) * x2)`` along ``axis``."""
    return _vecdot(x1, x2, None, axis=axis)


def _vecdot(x1: Any, x2: Any, out: Any, axis: int = -1, **kw: Any) -> Any:
    if out is not None or kw:
        raise TypeError(
            "np.vecdot on BlockCyclicArrays takes axis= only (no out=, keepdims=, axes=, ...)"
        )
    if getattr(x1, "ndim", 0) == 1 and getattr(x2, "ndim", 0) == 1:
        return np.vdot(x1, x2)  # one conjugated inner product, the same scalar on every rank
    ndim = max(getattr(x1, "ndim", 0), getattr(x2, "ndim", 0))
    return np.sum(np.conj(x1) * x2, axis=axis % ndim)


if hasattr(np, "matvec") and isinstance(np.matvec, np.ufunc):

    @implements_ufunc(np.matvec)
    def _matvec_ufunc(ufunc: np.ufunc, x1: Any, x2: Any, out: Any = None, **kw: Any) -> Any:
        """``np.matvec(A, x)``: ``A @ x`` for a matrix and a vector."""
        _plain(ufunc, out, kw, x1, 2, x2, 1)
        return np.matmul(x1, x2)

    @implements_ufunc(np.vecmat)
    def _vecmat_ufunc(ufunc: np.ufunc, x1: Any, x2: Any, out: Any = None, **kw: Any) -> Any:
        """``np.vecmat(x, A)``: ``conj(x) @ A`` for a vector and a matrix."""
        _plain(ufunc, out, kw, x1, 1, x2, 2)
        return np.matmul(np.conj(x1), x2)


def _plain(ufunc: Any, out: Any, kw: Any, x1: Any, n1: int, x2: Any, n2: int) -> None:
    if out is not None or kw:
        raise TypeError(f"np.{ufunc.__name__} on BlockCyclicArrays takes no keywords")
    if getattr(x1, "ndim", None) != n1 or getattr(x2, "ndim", None) != n2:
        raise ValueError(
            f"np.{ufunc.__name__}: needs operands of {n1} and {n2} dimensions (stacks of "
            "matrices are not distributed), got "
            f"{getattr(x1, 'shape', None)} and {getattr(x2, 'shape', None)}"
        )


# -- NumPy's other spellings ----------------------------------------------------------------------
@implements(np.swapaxes)
def _swapaxes(a: Any, axis1: int, axis2: int) -> Any:
    """``np.swapaxes``: ``A.T`` when the two axes differ, ``A`` itself when they are the same."""
    a = _require(a, "np.swapaxes")
    axes = [int(axis1), int(axis2)]
    for ax in axes:
        if not -a.ndim <= ax < a.ndim:
            raise np.exceptions.AxisError(ax, a.ndim)
    return a.T if axes[0] % a.ndim != axes[1] % a.ndim else a


@implements(np.count_nonzero)
def _count_nonzero(a: Any, axis: Any = None, *, keepdims: bool = False) -> Any:
    """``np.count_nonzero``: ``np.sum(a != 0)`` (an intp on every rank, or an int64 vector
    along ``axis``)."""
    a = _require(a, "np.count_nonzero")
    if axis is None and not keepdims:
        return np.intp(np.sum(a != 0))
    return np.sum(a != 0, axis=axis, dtype=np.int64, keepdims=keepdims)


@implements(np.tensordot)
def _tensordot(a: Any, b: Any, axes: Any = 2) -> Any:
    """``np.tensordot`` of matrices and vectors: the contraction of one axis of each is a
    product (``A @ B`` with the transposes the axes name, ``x @ y``), of both axes of two
    matrices the sum of their element-wise product; other contractions (none, or the outer
    products of matrices) are refused."""
    return _contract(a, b, axes, "np.tensordot")


@_register(_linalg, "tensordot")
def _linalg_tensordot(x1: Any, x2: Any, /, *, axes: Any = 2) -> Any:
    """``np.linalg.tensordot``: ``np.tensordot``."""
    return _contract(x1, x2, axes, "np.linalg.tensordot")


def _contract(a: Any, b: Any, axes: Any, what: str) -> Any:
    from .products import replicated_operands

    a, b = replicated_operands(a, b, what)
    if isinstance(axes, int | np.integer):
        n = int(axes)
        axes = (list(range(a.ndim - n, a.ndim)), list(range(n)))
    try:
        ia, ib = ([int(i) for i in np.atleast_1d(x)] for x in axes)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: axes must be an int or a pair of axis sequences") from None
    ia = [i % a.ndim for i in ia] if a.ndim else ia
    ib = [i % b.ndim for i in ib] if b.ndim else ib
    if len(ia) != len(ib) or any(a.shape[i] != b.shape[j] for i, j in zip(ia, ib, strict=True)):
        raise ValueError(f"{what}: shape-mismatch for sum ({a.shape}, {b.shape}, axes {axes})")
    if len(ia) == 1:  # one axis each: a product
        x = a.T if a.ndim == 2 and ia[0] == 0 else a
        y = b.T if b.ndim == 2 and ib[0] == 1 else b
        return np.matmul(x, y)
    if len(ia) == 2 and a.ndim == b.ndim == 2:  # both axes of two matrices: a full sum
        return np.sum(a * (b if ia == ib else b.T))
    raise ValueError(
        f"{what}: contracting {len(ia)} axes of shapes {a.shape} and {b.shape} is not supported "
        "for BlockCyclicArrays (one axis of each: a product; both axes of two matrices: a sum)"
    )


@implements_ufunc(np.divmod)
def _divmod(ufunc: np.ufunc, x1: Any, x2: Any, out: Any = None, **kw: Any) -> Any:
    """``np.divmod`` (and ``divmod(A, b)``): ``(np.floor_divide, np.remainder)``."""
    if out is not None or kw:
        raise TypeError("np.divmod on BlockCyclicArrays takes no out= or other keywords")
    return np.floor_divide(x1, x2), np.remainder(x1, x2)
