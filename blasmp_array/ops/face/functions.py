"""More NumPy functions on BlockCyclicArrays (through ``__array_function__``).

``np.diag``/``np.diagonal``, ``np.where``, ``np.concatenate``/``hstack``/``vstack``/``block``/
``stack``/``column_stack``, ``np.einsum`` (matrix-product subscripts), ``np.clip`` and
``np.nan_to_num``. The rules of :mod:`.reductions` hold: a scalar result is a NumPy scalar on
every rank, a vector result (a diagonal) a distributed vector, a matrix result a
BlockCyclicArray. Operands in different layouts are aligned to the first array operand's with a
:class:`~blasmp_array.RedistributionWarning`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import creation
from ..._dispatch import implements
from ...array import BlockCyclicArray, as_vector, check_array_dtype
from ..engine._vectors import from_host
from ..engine.elementwise import Replicated, elementwise, local_view, operands
from ..engine.redistribute import copy_window
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


def _diagonal_vector(a: BlockCyclicArray, k: int) -> BlockCyclicArray:
    """Diagonal ``k`` of the matrix ``a`` as a distributed vector (blocked like ``a``'s rows;
    its elements are all-gathered, ``O(n)``, and each rank keeps the ones it stores)."""
    return from_host(_diagonal(a, k), a.block[0], a.grid)


@implements(np.diagonal)
def _np_diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> BlockCyclicArray:
    """``np.diagonal``: diagonal ``offset`` of a matrix as a distributed vector."""
    a = _require(a, "np.diagonal")
    if a.ndim != 2:
        raise ValueError("diag requires an array of at least two dimensions")
    if (axis1 % 2, axis2 % 2) not in ((0, 1), (1, 0)):
        raise ValueError("np.diagonal of a BlockCyclicArray needs axis1, axis2 = 0, 1 (or 1, 0)")
    k = _int(offset, "offset", "np.diagonal")
    return _diagonal_vector(a.T if (axis1 % 2, axis2 % 2) == (1, 0) else a, k)


@implements(np.diag)
def _np_diag(v: Any, k: int = 0) -> Any:
    """``np.diag``: from a vector the ``(n + |k|) x (n + |k|)`` matrix with it on diagonal
    ``k`` (blocks of the vector's block); from a matrix its diagonal ``k`` as a distributed
    vector (as ``np.diagonal``)."""
    v = _require(v, "np.diag")
    k = _int(k, "k", "np.diag")
    if v.ndim == 2:
        return _diagonal_vector(v, k)
    values = v.to_numpy()  # O(n): the vector on every rank
    n = values.size + abs(k)
    b = v.block[0]
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
    """``np.where(cond, x, y)``: elementwise, broadcasting as NumPy's (see
    :func:`.elementwise.elementwise`), in the first full-shape array operand's layout."""
    if x is _NOVALUE or y is _NOVALUE:
        raise TypeError(
            "np.where(cond) (the indices of nonzero elements) is not supported for "
            "BlockCyclicArrays; use np.where(cond, x, y), select with x[cond], or gather with "
            "cond.to_numpy()"
        )
    ops = operands((condition, x, y), "np.where")
    if ops is None:
        raise TypeError("np.where: operands must be BlockCyclicArrays, ndarrays or scalars")
    res_dt = np.result_type(
        *[o.dtype if isinstance(o, BlockCyclicArray | Replicated) else o for o in ops[1:]]
    )
    check_array_dtype(res_dt)

    def kernel(xp: Any, out: Any, c: Any, a: Any, b: Any) -> None:
        out[...] = xp.where(xp.asarray(c).astype(bool, copy=False), a, b)

    return elementwise("np.where", ops, res_dt, kernel)


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
        from ..engine.elementwise import assign

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
    if a.ndim == 1:
        col = _nan_to_num(a._column, copy=copy, nan=nan, posinf=posinf, neginf=neginf)
        return a if not copy else as_vector(col)
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


@implements(np.round, np.around)
def _round(a: Any, decimals: int = 0, out: Any = None) -> BlockCyclicArray:
    """``np.round``/``np.around``: half to even, ``decimals`` places (negative: tens,
    hundreds, ...), as NumPy's; local. Integers stay integers."""
    _no_extras("np.round", out)
    x = _require(a, "np.round")
    d = _int(decimals, "decimals", "np.round")
    if x.ndim == 1:
        return as_vector(_round(x._column, d))
    s = local_view(x)  # rounding commutes with the transpose: the stored matrix
    out_ = creation.new_like(s)
    out_._data[...] = s.backend.xp.round(s._data, d)
    return out_.T if x._transposed else out_


@implements(np.fill_diagonal)
def _fill_diagonal(a: Any, val: Any, wrap: bool = False) -> None:
    """``np.fill_diagonal``, in place and local: the elements ``(i, i)`` (for a tall matrix
    with ``wrap``, NumPy's wrapped diagonals every ``n + 1`` rows) set to ``val``, a scalar or
    a vector (NumPy, the same on every rank, or distributed) repeated along the diagonal."""
    from ..engine._replicated import check_replicated, is_replicated, replicated

    x = _require(a, "np.fill_diagonal")
    if x.ndim != 2:
        raise ValueError("array must be at least 2-d")
    if x._conjugated or x.is_window:
        raise ValueError(
            "np.fill_diagonal of a lazy conjugated view or of a window view (a submatrix "
            "starting inside a block) is not supported; fill the stored matrix"
        )
    if isinstance(val, BlockCyclicArray):
        host = val.to_numpy()  # O(n) to every rank
        assert host is not None
        values = host.reshape(-1)
    else:
        if is_replicated(val):
            check_replicated([replicated(val)], x.grid, "np.fill_diagonal")
        values = np.asarray(val if isinstance(val, np.ndarray) else val).reshape(-1)
    if values.size == 0:
        return
    if values.dtype.kind == "c" and x.dtype.kind != "c":
        raise TypeError(f"np.fill_diagonal: cannot put complex values into a {x.dtype} matrix")
    m, n = x.shape
    end = m * n if wrap else min(m, n) * n
    flat = np.arange(0, end, n + 1, dtype=np.int64)  # NumPy's a.flat[:end:n + 1]
    rows, cols = flat // n, flat % n
    s = x.storage
    if x._transposed:
        rows, cols = cols, rows
    lay, g = s.layout, s.grid
    own = (lay.local_rows(g.myrow), lay.local_cols(g.mycol))
    mine = np.isin(rows, own[0]) & np.isin(cols, own[1])
    if not mine.any():
        return
    t = np.flatnonzero(mine)
    il = np.searchsorted(own[0], rows[t])
    jl = np.searchsorted(own[1], cols[t])
    xp = s.backend.xp
    v = values[t % values.size].astype(s.dtype)
    s._data[xp.asarray(il), xp.asarray(jl)] = s.backend.asarray(v)


@implements(np.save)
def _save(file: Any, arr: Any, allow_pickle: bool = True) -> None:
    """``np.save(path, A)``: the ``.npy`` file :meth:`BlockCyclicArray.to_npy` writes, in
    parallel, replacing an existing file as NumPy does; ``.npy`` is appended to a path that
    lacks it, as NumPy does. Collective; ``file`` must be a path every rank can reach (an open
    file object is refused)."""
    import os

    x = _require(arr, "np.save")
    if not isinstance(file, str | os.PathLike):
        raise TypeError(
            "np.save of a BlockCyclicArray needs a path (str or os.PathLike) that every rank "
            f"can reach, got {type(file).__name__}; every rank writes its own elements"
        )
    path = os.fspath(file)
    if not path.endswith(".npy"):
        path += ".npy"
    x.to_npy(path, overwrite=True)


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
    check_array_dtype(dt)
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


def _same_ndim(xs: list[BlockCyclicArray], what: str) -> int:
    ndims = {x.ndim for x in xs}
    if len(ndims) > 1:
        raise ValueError(
            f"{what}: all the input arrays must have same number of dimensions (got vectors "
            "and matrices)"
        )
    return ndims.pop()


@implements(np.concatenate)
def _concatenate(
    arrays: Any, axis: Any = 0, out: Any = None, *, dtype: Any = None, casting: Any = "same_kind"
) -> BlockCyclicArray:
    """``np.concatenate`` of matrices along axis 0 or 1, or of vectors (a vector): a new array
    in the first array's block and grid (each piece copied into place by one exchange)."""
    _no_extras("np.concatenate", out)
    xs = _arrays(arrays, "np.concatenate")
    if _same_ndim(xs, "np.concatenate") == 1:
        if axis not in (None, 0, -1):
            raise np.exceptions.AxisError(f"np.concatenate: axis {axis} is out of bounds for 1-D")
        res = as_vector(_assemble([[x._column] for x in xs], "np.concatenate"))
        return res if dtype is None else res.astype(dtype)
    if axis is None:
        raise ValueError("np.concatenate(axis=None) flattens, which BlockCyclicArrays do not do")
    ax = _int(axis, "axis", "np.concatenate")
    if not -2 <= ax < 2:
        raise np.exceptions.AxisError(f"np.concatenate: axis {axis} is out of bounds for 2-D")
    res = _assemble([[x] for x in xs] if ax % 2 == 0 else [xs], "np.concatenate")
    return res if dtype is None else res.astype(dtype)


def _rows(x: BlockCyclicArray) -> BlockCyclicArray:
    """A vector as a ``1 x n`` row (``np.vstack``'s view of it), a matrix as it is."""
    return x._column.T if x.ndim == 1 else x


def _columns(x: BlockCyclicArray) -> BlockCyclicArray:
    """A vector as an ``n x 1`` column (``np.column_stack``'s view of it), a matrix as it is."""
    return x._column if x.ndim == 1 else x


@implements(np.vstack)
def _vstack(tup: Any, *, dtype: Any = None, casting: Any = "same_kind") -> BlockCyclicArray:
    """``np.vstack``: concatenation along axis 0 (vectors as ``1 x n`` rows)."""
    xs = [_rows(x) for x in _arrays(tup, "np.vstack")]
    return _concatenate(xs, axis=0, dtype=dtype)


@implements(np.hstack)
def _hstack(tup: Any, *, dtype: Any = None, casting: Any = "same_kind") -> BlockCyclicArray:
    """``np.hstack``: concatenation along axis 1 (of vectors: a longer vector)."""
    xs = _arrays(tup, "np.hstack")
    return _concatenate(xs, axis=0 if _same_ndim(xs, "np.hstack") == 1 else 1, dtype=dtype)


@implements(np.stack)
def _stack(
    arrays: Any, axis: Any = 0, out: Any = None, *, dtype: Any = None, casting: Any = "same_kind"
) -> BlockCyclicArray:
    """``np.stack`` of vectors of one length: ``axis=0`` a ``k x n`` matrix of rows, ``axis=1``
    an ``n x k`` matrix of columns (stacking matrices would make 3-D arrays: refused)."""
    _no_extras("np.stack", out)
    xs = _arrays(arrays, "np.stack")
    if _same_ndim(xs, "np.stack") != 1:
        raise ValueError("np.stack of matrices makes a 3-D array, which BlockCyclicArrays are not")
    if len({x.shape for x in xs}) > 1:
        raise ValueError("np.stack: all input arrays must have the same shape")
    ax = _int(axis, "axis", "np.stack")
    if not -2 <= ax < 2:
        raise np.exceptions.AxisError(f"np.stack: axis {axis} is out of bounds for 2-D")
    res = _assemble(
        [[_rows(x)] for x in xs] if ax % 2 == 0 else [[_columns(x) for x in xs]], "np.stack"
    )
    return res if dtype is None else res.astype(dtype)


@implements(np.column_stack)
def _column_stack(tup: Any) -> BlockCyclicArray:
    """``np.column_stack``: vectors as ``n x 1`` columns and matrices side by side."""
    xs = [_columns(x) for x in _arrays(tup, "np.column_stack")]
    return _assemble([xs], "np.column_stack")


@implements(np.block)
def _block(arrays: Any) -> BlockCyclicArray:
    """``np.block`` of a list of BlockCyclicArrays (one row; vectors: their concatenation) or
    a list of such lists."""
    if isinstance(arrays, list) and arrays and all(isinstance(r, list) for r in arrays):
        rows = [[_rows(x) for x in _arrays(r, "np.block")] for r in arrays]
    else:
        xs = _arrays(arrays, "np.block")
        if _same_ndim(xs, "np.block") == 1:
            return _concatenate(xs)
        rows = [xs]
    return _assemble(rows, "np.block")


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
