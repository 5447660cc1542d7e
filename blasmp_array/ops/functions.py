"""More NumPy functions on BlockCyclicArrays (through ``__array_function__``).

``np.diag``/``np.diagonal``, ``np.where``, ``np.concatenate``/``hstack``/``vstack``/``block``,
``np.vdot``, ``np.outer``, ``np.einsum`` (matrix-product subscripts), ``np.clip`` and
``np.nan_to_num``. The rules of :mod:`.reductions` hold: a scalar result is a NumPy scalar on
every rank, a vector result (a diagonal) a 1-D NumPy array on every rank, a matrix result a
BlockCyclicArray. Operands in different layouts are aligned to the first array operand's with a
:class:`~blasmp_array.RedistributionWarning`.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import creation
from .._dispatch import implements
from ..array import BlockCyclicArray, check_dtype
from ..layout import BlockCyclicLayout
from .elementwise import _check_same_shape, _operand, _weak_dtype, aligned, local_view
from .indexing import copy_window
from .reductions import _no_extras, _require

__all__: list[str] = []

_NOVALUE: Any = np._NoValue  # type: ignore[attr-defined]


def _int(k: Any, name: str, what: str) -> int:
    if not isinstance(k, int | np.integer) or isinstance(k, bool):
        raise TypeError(f"{what}: {name} must be an integer, got {k!r}")
    return int(k)


# -- diagonals ---------------------------------------------------------------------------------
def _local_diagonal(s: BlockCyclicArray, k: int) -> tuple[np.ndarray, Any, Any]:
    """Positions along diagonal ``k`` of the stored ``s`` held by this rank: ``(t, il, jl)``
    with element ``t`` of the diagonal at local ``(il[t], jl[t])``."""
    g, lay = s.grid, s.layout
    n, nb, pc, csrc = lay.shape[1], lay.block[1], g.npcol, lay.src[1]
    rows = lay.local_rows(g.myrow)
    gc = rows + k
    mask = (gc >= 0) & (gc < n)
    mask[mask] = (csrc + gc[mask] // nb) % pc == g.mycol
    il = np.nonzero(mask)[0]
    jl = (gc[il] // (nb * pc)) * nb + gc[il] % nb
    t = rows[il] - max(0, -k)  # index along the diagonal
    return t, il, jl


def _diagonal(a: BlockCyclicArray, k: int) -> np.ndarray:
    """Diagonal ``k`` of ``a`` as a 1-D NumPy array on every rank (one allgather)."""
    if a._transposed:  # diag(A.T, k) == diag(A, -k)
        k = -k
    s = local_view(a)
    m, n = s.shape
    length = max(0, min(m, n - k) if k >= 0 else min(m + k, n))
    backend, xp = s.backend, s.backend.xp
    t, il, jl = _local_diagonal(s, k)
    part = None
    if t.size:
        part = (t, backend.asnumpy(s._data[xp.asarray(il), xp.asarray(jl)]))
    out = np.zeros(length, dtype=s.dtype)
    for p in backend.allgather(part):
        if p is not None:
            out[p[0]] = p[1]
    return out


@implements(np.diagonal)
def _np_diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> np.ndarray:
    """``np.diagonal``: diagonal ``offset`` as a 1-D NumPy array on every rank."""
    a = _require(a, "np.diagonal")
    if (axis1 % 2, axis2 % 2) not in ((0, 1), (1, 0)):
        raise ValueError("np.diagonal of a BlockCyclicArray needs axis1, axis2 = 0, 1 (or 1, 0)")
    k = _int(offset, "offset", "np.diagonal")
    return _diagonal(a.T if (axis1 % 2, axis2 % 2) == (1, 0) else a, k)


@implements(np.diag)
def _np_diag(v: Any, k: int = 0) -> Any:
    """``np.diag``: from an ``n x 1`` or ``1 x n`` BlockCyclicArray (a vector: 2-D stays 2-D)
    the ``(n + |k|) x (n + |k|)`` matrix with it on diagonal ``k``; from any other matrix its
    diagonal ``k`` as a 1-D NumPy array on every rank (as ``np.diagonal``)."""
    v = _require(v, "np.diag")
    k = _int(k, "k", "np.diag")
    if min(v.shape) != 1:
        return _diagonal(v, k)
    values = v.to_numpy().reshape(-1)  # O(n): the vector on every rank
    n = values.size + abs(k)
    b = v.block[0] if v.shape[1] == 1 else v.block[1]
    out = creation.zeros((n, n), dtype=v.dtype, block=(b, b), grid=v.grid)
    t, il, jl = _local_diagonal(out, k)
    keep = t < values.size
    if keep.any():
        xp = out.backend.xp
        out._data[xp.asarray(il[keep]), xp.asarray(jl[keep])] = xp.asarray(values[t[keep]])
    return out


# -- elementwise selections --------------------------------------------------------------------
@implements(np.where)
def _where(condition: Any, x: Any = _NOVALUE, y: Any = _NOVALUE) -> BlockCyclicArray:
    """``np.where(cond, x, y)``: elementwise, in ``cond``'s layout (others aligned to it)."""
    if x is _NOVALUE or y is _NOVALUE:
        raise TypeError(
            "np.where(cond) (the indices of nonzero elements) is not supported for "
            "BlockCyclicArrays; use np.where(cond, x, y), or gather with cond.to_numpy()"
        )
    ops = [_operand(o, "np.where") for o in (condition, x, y)]
    if any(o is NotImplemented for o in ops):
        raise TypeError("np.where: operands must be BlockCyclicArrays or scalars")
    arrays = [o for o in ops if isinstance(o, BlockCyclicArray)]
    if not arrays:
        raise TypeError("np.where: no BlockCyclicArray operand")
    _check_same_shape(arrays, "np.where")
    res_dt = np.result_type(
        *[_weak_dtype(o) if isinstance(o, BlockCyclicArray) else o for o in ops[1:]]
    )
    check_dtype(res_dt)
    like = arrays[0].resolve()
    data = [
        aligned(o.resolve(), like, "np.where")._data if isinstance(o, BlockCyclicArray) else o
        for o in ops
    ]
    out = creation.new_like(like, res_dt)
    xp = like.backend.xp
    out._data[...] = xp.where(xp.asarray(data[0]).astype(bool, copy=False), data[1], data[2])
    return out


@implements(np.clip)
def _clip(
    a: Any,
    a_min: Any = _NOVALUE,
    a_max: Any = _NOVALUE,
    out: Any = None,
    *,
    min: Any = _NOVALUE,  # noqa: A002 (NumPy's keyword names)
    max: Any = _NOVALUE,  # noqa: A002
    **kwargs: Any,
) -> BlockCyclicArray:
    """``np.clip``: ``np.minimum(np.maximum(a, lo), hi)`` with scalar or array bounds."""
    if kwargs:
        raise TypeError(f"np.clip on BlockCyclicArrays does not support {sorted(kwargs)}")
    lo = min if a_min is _NOVALUE else a_min
    hi = max if a_max is _NOVALUE else a_max
    lo, hi = (None if v is _NOVALUE else v for v in (lo, hi))
    if lo is None and hi is None:
        raise ValueError("np.clip: at least one of a_min and a_max must be given")
    result = a
    if lo is not None:
        result = np.maximum(result, lo)
    if hi is not None:
        result = np.minimum(result, hi, out=out) if out is not None else np.minimum(result, hi)
    elif out is not None:
        from .elementwise import assign

        assign(out, result)
        result = out
    if result is a:
        result = a.copy()
    return result  # type: ignore[no-any-return]


@implements(np.nan_to_num)
def _nan_to_num(
    x: Any, copy: bool = True, nan: Any = 0.0, posinf: Any = None, neginf: Any = None
) -> BlockCyclicArray:
    """``np.nan_to_num``: local; ``copy=False`` works in place on the stored matrix."""
    a = _require(x, "np.nan_to_num")
    xp = a.backend.xp
    if not copy:
        if a._conjugated:
            raise ValueError("np.nan_to_num(copy=False) of a lazy conjugated view; resolve() it")
        xp.nan_to_num(a._data, copy=False, nan=nan, posinf=posinf, neginf=neginf)
        return a
    s = local_view(a)
    out = creation.new_like(s)
    out._data[...] = xp.nan_to_num(s._data, nan=nan, posinf=posinf, neginf=neginf)
    return out.T if a._transposed else out


# -- stacking ----------------------------------------------------------------------------------
def _assemble(rows: list[list[BlockCyclicArray]], what: str) -> BlockCyclicArray:
    """A new array from a 2-D grid of pieces (every piece row of one height, every piece
    column... of consistent widths per row), in the first piece's block on its grid."""
    first = rows[0][0]
    for r in rows:
        for p in r:
            if p.grid.size != first.grid.size or p.grid.backend is not first.grid.backend:
                raise ValueError(f"{what}: the arrays live on grids over different processes")
    heights = []
    for r in rows:
        hs = {p.shape[0] for p in r}
        if len(hs) > 1:
            raise ValueError(
                f"{what}: the arrays along axis 1 have different numbers of rows {sorted(hs)}"
            )
        heights.append(hs.pop())
    widths = [sum(p.shape[1] for p in r) for r in rows]
    if len(set(widths)) > 1:
        raise ValueError(f"{what}: the rows of arrays have different total widths {widths}")
    dt = np.result_type(*[p.dtype for r in rows for p in r])
    check_dtype(dt)
    g = first.grid
    out = creation.empty((sum(heights), widths[0]), dtype=dt, block=first.block, grid=g)
    i0 = 0
    for r, h in zip(rows, heights, strict=True):
        j0 = 0
        for p in r:
            s = p.resolve()
            copy_window(s, (0, 0), out, (i0, j0), s.shape)
            j0 += s.shape[1]
        i0 += h
    return out


def _arrays(seq: Any, what: str) -> list[BlockCyclicArray]:
    if isinstance(seq, BlockCyclicArray) or not isinstance(seq, list | tuple) or not seq:
        raise TypeError(f"{what} needs a non-empty sequence of BlockCyclicArrays")
    return [_require(x, what) for x in seq]


@implements(np.concatenate)
def _concatenate(
    arrays: Any, axis: Any = 0, out: Any = None, *, dtype: Any = None, casting: Any = "same_kind"
) -> BlockCyclicArray:
    """``np.concatenate`` along axis 0 or 1: a new array in the first array's block and grid
    (each piece copied into place by one exchange)."""
    _no_extras("np.concatenate", out)
    xs = _arrays(arrays, "np.concatenate")
    if axis is None:
        raise ValueError("np.concatenate(axis=None) flattens, which BlockCyclicArrays do not do")
    ax = _int(axis, "axis", "np.concatenate")
    if not -2 <= ax < 2:
        raise np.exceptions.AxisError(f"np.concatenate: axis {axis} is out of bounds for 2-D")
    res = _assemble([[x] for x in xs] if ax % 2 == 0 else [xs], "np.concatenate")
    return res if dtype is None else res.astype(dtype)


@implements(np.vstack)
def _vstack(tup: Any, *, dtype: Any = None, casting: Any = "same_kind") -> BlockCyclicArray:
    """``np.vstack``: concatenation along axis 0."""
    return _concatenate(tup, axis=0, dtype=dtype)


@implements(np.hstack)
def _hstack(tup: Any, *, dtype: Any = None, casting: Any = "same_kind") -> BlockCyclicArray:
    """``np.hstack``: concatenation along axis 1."""
    return _concatenate(tup, axis=1, dtype=dtype)


@implements(np.block)
def _block(arrays: Any) -> BlockCyclicArray:
    """``np.block`` of a list of BlockCyclicArrays (one row) or a list of such lists."""
    if isinstance(arrays, list) and arrays and all(isinstance(r, list) for r in arrays):
        rows = [_arrays(r, "np.block") for r in arrays]
    else:
        rows = [_arrays(arrays, "np.block")]
    return _assemble(rows, "np.block")


# -- products ----------------------------------------------------------------------------------
@implements(np.vdot)
def _vdot(a: Any, b: Any) -> Any:
    """``np.vdot``: ``sum(conj(a) * b)`` over matrices of one shape; a scalar on every rank."""
    x, y = _require(a, "np.vdot"), _require(b, "np.vdot")
    if x.size != y.size or x.shape != y.shape:
        raise ValueError(
            f"np.vdot: shapes {x.shape} and {y.shape} differ (BlockCyclicArrays are not "
            "flattened, so they must have the same shape)"
        )
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
    """``np.dot``: ``np.matmul`` of two matrices (distributed GEMM), ``a * b`` with a scalar."""
    if not isinstance(a, BlockCyclicArray) or not isinstance(b, BlockCyclicArray):
        if np.ndim(a) == 0 or np.ndim(b) == 0:
            return np.multiply(a, b) if out is None else np.multiply(a, b, out=out)
    return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)


def _as_vector(v: BlockCyclicArray, column: bool, what: str) -> BlockCyclicArray:
    """``v`` (``n x 1`` or ``1 x n``) as a column (or row), the K-dimension block relabelled to
    1 element per block (a length-1 dimension is distributed the same whatever its block)."""
    if min(v.shape) != 1 and v.size != 0:
        raise ValueError(
            f"{what}: the operands must be vectors (n x 1 or 1 x n), got {v.shape}; flattening a "
            "distributed matrix is not supported"
        )
    if column:
        return v if v.shape[1] == 1 else v.T
    return v if v.shape[0] == 1 else v.T


@implements(np.outer)
def _outer(a: Any, b: Any, out: Any = None) -> BlockCyclicArray:
    """``np.outer`` of two vectors (``n x 1`` or ``1 x n``): a rank-1 GEMM, ``m x n``."""
    _no_extras("np.outer", out)
    u = _as_vector(_require(a, "np.outer"), True, "np.outer")
    v = _as_vector(_require(b, "np.outer"), False, "np.outer")
    from .gemm import gemm

    # K has length 1: give v's stored K-dimension u's K block (the same distribution) so that
    # GEMM sees conforming blocks and copies nothing
    vs = v.storage
    kax = 1 if v._transposed else 0
    blk = list(vs.layout.block)
    blk[kax] = u.block[1]
    lay = BlockCyclicLayout(vs.layout.shape, tuple(blk), vs.layout.grid_shape, vs.layout.src)  # type: ignore[arg-type]
    v2 = BlockCyclicArray(
        vs._data, lay, vs.grid, transposed=v._transposed, conjugated=v._conjugated
    )
    return gemm(u, v2)


# -- einsum ------------------------------------------------------------------------------------
def _einsum_error(subscripts: str) -> ValueError:
    return ValueError(
        f"np.einsum({subscripts!r}) is not supported for BlockCyclicArrays: supported are matrix "
        "products of two operands ('ij,jk->ik', 'ji,jk->ik', 'ij,kj->ik' and their relabellings: "
        "GEMM/SYRK), the trace 'ii', the transpose 'ij->ji' and sums 'ij->', 'ij->i', 'ij->j'; "
        "write others with @, .T and np.sum, or gather with A.to_numpy()"
    )


@implements(np.einsum)
def _einsum(
    subscripts: Any, *operands: Any, out: Any = None, optimize: Any = False, **kw: Any
) -> Any:
    """``np.einsum`` for the matrix-product subscripts (routed to matmul: GEMM, or SYRK for
    ``A.T @ A``), the trace, the transpose and sums; anything else raises ``ValueError``."""
    _no_extras("np.einsum", out)
    if kw:
        raise TypeError(f"np.einsum on BlockCyclicArrays does not support {sorted(kw)}")
    if not isinstance(subscripts, str):
        raise TypeError("np.einsum on BlockCyclicArrays needs the subscripts as a string")
    spec = subscripts.replace(" ", "")
    lhs, arrow, rhs = spec.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(operands) or any(len(s) != 2 or not s.isalpha() for s in ins):
        raise _einsum_error(subscripts)
    xs = [_require(o, "np.einsum") for o in operands]
    if not arrow:  # implicit output: the letters seen once, in alphabetical order
        letters = "".join(ins)
        rhs = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    if len(xs) == 1:
        (s,), a = ins, xs[0]
        if s[0] == s[1] and rhs == "":
            return np.trace(a)
        if s[0] != s[1]:
            if rhs == s:
                return a
            if rhs == s[::-1]:
                return a.T
            if rhs == "":
                return np.sum(a)
            if len(rhs) == 1 and rhs in s:
                return np.sum(a, axis=1 - s.index(rhs))
        raise _einsum_error(subscripts)
    if len(xs) == 2:
        (sa, sb), (a, b) = ins, xs
        shared = set(sa) & set(sb)
        if sa[0] != sa[1] and sb[0] != sb[1] and len(shared) == 1 and len(rhs) == 2:
            (c,) = shared
            fa, fb = sa.replace(c, ""), sb.replace(c, "")
            if c not in rhs and fa != fb and set(rhs) == {fa, fb}:
                opa = a if sa == fa + c else a.T
                opb = b if sb == c + fb else b.T
                if rhs == fa + fb:
                    return opa @ opb
                return opb.T @ opa.T
    raise _einsum_error(subscripts)
