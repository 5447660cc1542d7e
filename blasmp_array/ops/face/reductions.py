"""Reductions and other NumPy functions on BlockCyclicArrays (through ``__array_function__``).

Reductions (``np.sum``, ``np.max``, ``np.linalg.norm``, ``np.allclose``, ...) reduce each local
matrix, gather the small partial results on every process (``backend.allgather``) and combine
them there in rank order, so every rank gets the *same* value, bit for bit. A full reduction
(``axis=None``, or any reduction of a vector) returns a NumPy scalar on every rank; a
reduction along an axis of a matrix (``axis=0``/``1``) returns a distributed vector
(:mod:`._vectors`: each rank keeps the elements it stores of the combined partial results), an
``1 x n`` / ``m x 1`` matrix with ``keepdims=True``. The rounding of a sum differs from
NumPy's (another summation order) within the usual error bound.

Structural functions (``np.transpose``, ``np.triu``, ``np.tril``, ``np.copy``, ``*_like``)
return BlockCyclicArrays in the argument's layout.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import creation
from ..._dispatch import implements
from ...array import BlockCyclicArray
from ..engine._vectors import from_host
from ..engine.elementwise import Replicated, elementwise, local_view, operands
from ..engine.panels import WindowTarget

__all__: list[str] = []

_NOVALUE: Any = np._NoValue  # type: ignore[attr-defined]


def _require(a: Any, what: str) -> BlockCyclicArray:
    if not isinstance(a, BlockCyclicArray):
        raise TypeError(
            f"{what} expects a BlockCyclicArray, got {type(a).__name__}; distribute NumPy data "
            "with bm.from_numpy"
        )
    return a


def _no_extras(what: str, out: Any = None, **kwargs: Any) -> None:
    if out is not None:
        raise TypeError(f"{what}: out= is not supported for BlockCyclicArrays (results are NumPy)")
    bad = sorted(k for k, v in kwargs.items() if v is not _NOVALUE)
    if bad:
        raise TypeError(f"{what} on BlockCyclicArrays does not support the keywords {bad}")


def _norm_axis(axis: Any, what: str, ndim: int = 2) -> int | None:
    if ndim == 1:  # a vector's only axis: a full reduction
        if axis is None or axis in (0, -1, (0,), (-1,)):
            return None
        raise np.exceptions.AxisError(f"{what}: axis {axis!r} is out of bounds for a vector")
    if axis is None:
        return None
    if isinstance(axis, tuple):
        if sorted(a % 2 if isinstance(a, int) and -2 <= a < 2 else -1 for a in axis) == [0, 1]:
            return None
        if len(axis) == 1:
            axis = axis[0]
    if isinstance(axis, int | np.integer) and not isinstance(axis, bool) and -2 <= axis < 2:
        return int(axis) % 2
    raise np.exceptions.AxisError(f"{what}: axis {axis!r} is out of bounds for a 2-D matrix")


def _unview(a: BlockCyclicArray, axis: int | None) -> tuple[BlockCyclicArray, int | None]:
    """The stored matrix (conjugated locally if needed) and the axis over it; a window view
    stays one (reduced in its parent, :func:`_local_part`) unless it is conjugated. A vector
    is reduced as its column face."""
    a = a._column
    if a._transposed and axis is not None:
        axis = 1 - axis
    if a.is_window and not a._conjugated:
        return a._with_flags(False, False), axis
    return local_view(a), axis


def _local_part(s: BlockCyclicArray) -> tuple[Any, Callable[[int], Any], Callable[[int], Any]]:
    """This rank's elements of the stored ``s`` (or of the window view ``s``, a slice of its
    parent's local matrix), and the global row / column indices a process row / column holds,
    in local order (of the window, for a window view)."""
    w = s._window
    if w is None:
        return s._data, s.layout.local_rows, s.layout.local_cols
    target = WindowTarget.of(w)
    return w.parent._data[w.local_slices()], target.local_rows, target.local_cols


def _reduce(
    a: BlockCyclicArray,
    axis: int | None,
    local_fn: Callable[..., Any],
    combine: Callable[[Any, Any], Any],
    identity: Any,
    what: str,
) -> Any:
    """Reduce ``a`` (not a view) over ``axis`` (None, 0 or 1).

    ``local_fn(x, axis)`` reduces a non-empty local matrix; ``combine`` merges two partial
    results; ``identity`` (or None: no identity) fills what no process holds.
    """
    m, n = a.shape
    reduced = {None: m * n, 0: m, 1: n}[axis]
    if reduced == 0 and identity is None and (axis is None or a.shape[1 - axis] > 0):
        raise ValueError(f"{what}: zero-size array to reduction operation which has no identity")
    backend, g = a.backend, a.grid
    local, rows_of, cols_of = _local_part(a)
    part = None
    if local.size:
        part = backend.asnumpy(local_fn(local, axis))
    parts = backend.allgather(part)  # every rank combines the same list in rank order
    valid = [p for p in parts if p is not None]
    # the result dtype: the first part's (the same list on every rank), else a probe's
    res_dt = np.asarray(valid[0] if valid else local_fn(np.zeros((1, 1), a.dtype), axis)).dtype
    if axis is None:
        if not valid:
            return res_dt.type(identity)
        return res_dt.type(functools.reduce(combine, valid))
    if g.size == 1:  # the one part is the whole result, in order (no index maps)
        if not valid:
            return np.full(a.shape[1 - axis], identity, dtype=res_dt)
        return np.asarray(valid[0], dtype=res_dt)
    out = np.empty(a.shape[1 - axis], dtype=res_dt)
    if axis == 0:  # column results, combined down each process column
        groups = [
            (cols_of(c), [parts[g.rank_of(r, c)] for r in range(g.nprow)]) for c in range(g.npcol)
        ]
    else:
        groups = [
            (rows_of(r), [parts[g.rank_of(r, c)] for c in range(g.npcol)]) for r in range(g.nprow)
        ]
    for idx, group in groups:
        valid = [p for p in group if p is not None]
        if valid:
            out[idx] = functools.reduce(combine, valid)
        elif idx.size:
            out[idx] = identity
    return out


def _keepdims(result: Any, axis: int | None, keepdims: bool, ndim: int = 2) -> Any:
    """A host result with ``keepdims``: a full reduction as a NumPy array of ones-shape; an
    axis reduction's host vector as a ``1 x n`` / ``m x 1`` NumPy array."""
    if not keepdims:
        return result
    if axis is None:
        return np.asarray(result).reshape((1,) * ndim)
    return result.reshape((1, -1) if axis == 0 else (-1, 1))


def _finish(result: Any, axis: int | None, keepdims: bool, a: BlockCyclicArray) -> Any:
    """The public result of a reduction of ``a`` whose host result is ``result``: a NumPy
    scalar (array with ``keepdims``) for a full reduction, else a distributed vector of the
    kept axis (its block that of ``a``'s kept axis), as a ``1 x n`` / ``m x 1`` matrix with
    ``keepdims``."""
    if axis is None:
        return _keepdims(result, None, keepdims, a.ndim)
    v = from_host(result, a.block[1 - axis], a.grid)
    if keepdims:
        return v.reshape((1, -1) if axis == 0 else (-1, 1))
    return v


# -- sums and extrema ------------------------------------------------------------------------
@implements(np.sum)
def _sum(
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: bool = False,
    initial: Any = _NOVALUE,
    where: Any = _NOVALUE,
) -> Any:
    """``np.sum``: a scalar on every rank (``axis=None``, or a vector), or a vector."""
    _no_extras("np.sum", out, initial=initial, where=where)
    a = _require(a, "np.sum")
    ax = _norm_axis(axis, "np.sum", a.ndim)
    return _finish(_sum_host(a, ax, dtype), ax, keepdims, a)


def _sum_host(a: BlockCyclicArray, ax: int | None, dtype: Any) -> Any:
    """``np.sum`` as a host scalar or vector, identical on every rank."""
    s, sax = _unview(a, ax)
    xp = s.backend.xp

    def local(x: Any, axis: int | None) -> Any:
        return (np if isinstance(x, np.ndarray) else xp).sum(x, axis=axis, dtype=dtype)

    return _reduce(s, sax, local, np.add, 0, "np.sum")


@implements(np.mean)
def _mean(
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: bool = False,
    where: Any = _NOVALUE,
) -> Any:
    """``np.mean``: ``np.sum(a, axis) / count``, identical on every rank."""
    _no_extras("np.mean", out, where=where)
    a = _require(a, "np.mean")
    ax = _norm_axis(axis, "np.mean", a.ndim)
    return _finish(_mean_host(a, ax, dtype), ax, keepdims, a)


def _mean_host(a: BlockCyclicArray, ax: int | None, dtype: Any) -> Any:
    count = a.size if ax is None else a.shape[ax]
    if count == 0:
        raise ValueError("np.mean of an empty BlockCyclicArray (no elements to average)")
    total = _sum_host(a, ax, dtype)
    if dtype is None and np.asarray(total).dtype.kind in "biu":
        total = np.asarray(total, np.float64)[()]  # NumPy averages integers in float64
    return total / count


def _folding(name: str, combine: np.ufunc, identity: Any, doc: str) -> Callable[..., Any]:
    """``np.<name>`` as a local reduction of each rank's tiles folded with ``combine``."""

    def impl(
        a: Any,
        axis: Any = None,
        out: Any = None,
        keepdims: bool = False,
        initial: Any = _NOVALUE,
        where: Any = _NOVALUE,
    ) -> Any:
        _no_extras(f"np.{name}", out, initial=initial, where=where)
        a = _require(a, f"np.{name}")
        ax = _norm_axis(axis, f"np.{name}", a.ndim)
        s, sax = _unview(a, ax)
        xp = s.backend.xp

        def local(x: Any, axis: int | None) -> Any:
            mod = np if isinstance(x, np.ndarray) else xp
            return getattr(mod, name)(x, axis=axis)

        return _finish(_reduce(s, sax, local, combine, identity, f"np.{name}"), ax, keepdims, a)

    impl.__doc__ = doc
    return impl


_EXTREMUM_DOC = "``np.{}`` (NaN propagates; complex order is NumPy's lexicographic)."
_LOGICAL_DOC = "``np.{}``: a NumPy bool (array), identical on every rank."
implements(np.max, np.amax)(_folding("max", np.maximum, None, _EXTREMUM_DOC.format("max")))
implements(np.min, np.amin)(_folding("min", np.minimum, None, _EXTREMUM_DOC.format("min")))
implements(np.any)(_folding("any", np.logical_or, False, _LOGICAL_DOC.format("any")))
implements(np.all)(_folding("all", np.logical_and, True, _LOGICAL_DOC.format("all")))


@implements(np.prod)
def _prod(
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: bool = False,
    initial: Any = _NOVALUE,
    where: Any = _NOVALUE,
) -> Any:
    """``np.prod``: a scalar on every rank (``axis=None``, or a vector), or a vector."""
    _no_extras("np.prod", out, initial=initial, where=where)
    a = _require(a, "np.prod")
    ax = _norm_axis(axis, "np.prod", a.ndim)
    s, sax = _unview(a, ax)
    xp = s.backend.xp

    def local(x: Any, axis: int | None) -> Any:
        return (np if isinstance(x, np.ndarray) else xp).prod(x, axis=axis, dtype=dtype)

    return _finish(_reduce(s, sax, local, np.multiply, 1, "np.prod"), ax, keepdims, a)


def _moment(
    name: str,
    a: Any,
    axis: Any,
    dtype: Any,
    out: Any,
    ddof: Any,
    keepdims: bool,
    kw: dict[str, Any],
) -> Any:
    """``np.var`` (two passes: the mean, then the mean of ``|x - mean|**2``)."""
    _no_extras(f"np.{name}", out, **kw)
    a = _require(a, f"np.{name}")
    ax = _norm_axis(axis, f"np.{name}", a.ndim)
    if not isinstance(ddof, int | np.integer | float | np.floating) or isinstance(ddof, bool):
        raise TypeError(f"np.{name}: ddof must be a number, got {ddof!r}")
    count = a.size if ax is None else a.shape[ax]
    if count == 0:
        raise ValueError(f"np.{name} of an empty BlockCyclicArray (no elements)")
    mean = _mean_host(a, ax, dtype)
    s, sax = _unview(a, ax)
    xp, g = s.backend.xp, s.grid
    if sax is None:
        center: Any = mean
    elif sax == 0:  # one mean per column: this process column's entries, as a row
        center = xp.asarray(np.asarray(mean)[_local_part(s)[2](g.mycol)][None, :])
    else:
        center = xp.asarray(np.asarray(mean)[_local_part(s)[1](g.myrow)][:, None])

    def local(x: Any, axis: int | None) -> Any:
        mod = np if isinstance(x, np.ndarray) else xp
        # the dtype probe of _reduce is a NumPy array even when center lives on the GPU
        c = center if mod is xp or isinstance(center, np.ndarray | np.generic) else 0
        d = mod.abs(x - c) if np.iscomplexobj(x) else x - c
        return mod.sum(d * d, axis=axis)

    ssq = _reduce(s, sax, local, np.add, 0, f"np.{name}")
    real_dt = np.asarray(mean).real.dtype
    with np.errstate(divide="ignore", invalid="ignore"):  # ddof >= count: inf/nan as NumPy
        res = np.asarray(ssq / max(count - ddof, 0)).astype(real_dt)
    res = res[()] if res.ndim == 0 else res
    if name == "std":
        res = np.sqrt(res)
    return _finish(res, ax, keepdims, a)


def _moment_function(name: str, doc: str) -> Any:
    """The ``np.var``/``np.std`` override: NumPy's signature, then :func:`_moment`."""

    def moment(
        a: Any,
        axis: Any = None,
        dtype: Any = None,
        out: Any = None,
        ddof: Any = 0,
        keepdims: bool = False,
        *,
        where: Any = _NOVALUE,
        mean: Any = _NOVALUE,
        correction: Any = _NOVALUE,
    ) -> Any:
        extras = dict(where=where, mean=mean, correction=correction)
        return _moment(name, a, axis, dtype, out, ddof, keepdims, extras)

    moment.__name__ = moment.__qualname__ = f"_{name}"
    moment.__doc__ = doc
    return moment


_var = implements(np.var)(
    _moment_function(
        "var", "``np.var``: two passes (mean, then squared deviations); identical on every rank."
    )
)
_std = implements(np.std)(
    _moment_function(
        "std", "``np.std``: the square root of :func:`np.var`'s result; identical on every rank."
    )
)


def _arg(name: str, a: Any, axis: Any, out: Any, keepdims: bool) -> Any:
    """``np.argmax``/``np.argmin``: each process's first extremum with its global index, then
    NumPy's own ``argmax`` over the candidates in global order (NaN and complex as NumPy)."""
    _no_extras(f"np.{name}", out)
    orig = _require(a, f"np.{name}")
    ax = _norm_axis(axis, f"np.{name}", orig.ndim)
    a = orig._column
    if a.size == 0 or (ax is not None and a.shape[ax] == 0):
        raise ValueError(f"attempt to get {name} of an empty sequence")
    s, sax = _unview(a, ax)
    backend, xp, g = s.backend, s.backend.xp, s.grid
    x, rows_of, cols_of = _local_part(s)
    rows, cols = rows_of(g.myrow), cols_of(g.mycol)
    fn = getattr(np, name)
    part = None
    if x.size:
        if sax is None:
            # the first extremum in the VIEW's row-major order (the storage's column-major
            # order for A.T), so that ties and NaNs resolve as NumPy's
            if a._transposed:
                k = int(getattr(xp, name)(x.T))
                j, i = divmod(k, x.shape[0])
            else:
                k = int(getattr(xp, name)(x))
                i, j = divmod(k, x.shape[1])
            gi, gj = int(rows[i]), int(cols[j])
            flat = gj * a.shape[1] + gi if a._transposed else gi * a.shape[1] + gj
            part = (flat, backend.asnumpy(x[i : i + 1, j : j + 1])[0, 0])
        else:
            k = getattr(xp, name)(x, axis=sax)
            v = backend.asnumpy(xp.take_along_axis(x, xp.expand_dims(k, sax), axis=sax)).reshape(-1)
            idx = (rows if sax == 0 else cols)[backend.asnumpy(k)]
            part = (idx, v)
    parts = backend.allgather(part)
    if sax is None:
        cands = sorted(p for p in parts if p is not None)
        best = cands[int(fn(np.array([c[1] for c in cands])))][0]
        return _keepdims(np.intp(best), None, keepdims, orig.ndim)
    out_ = np.empty(s.shape[1 - sax], dtype=np.intp)
    if sax == 0:  # per column: candidates of each process row of this process column
        groups = [
            (cols_of(c), [parts[g.rank_of(r, c)] for r in range(g.nprow)]) for c in range(g.npcol)
        ]
    else:
        groups = [
            (rows_of(r), [parts[g.rank_of(r, c)] for c in range(g.npcol)]) for r in range(g.nprow)
        ]
    for gidx, group in groups:
        valid = [p for p in group if p is not None]
        if not valid or gidx.size == 0:
            continue
        idx = np.stack([p[0] for p in valid])
        vals = np.stack([p[1] for p in valid])
        order = np.argsort(idx, axis=0, kind="stable")
        idx = np.take_along_axis(idx, order, axis=0)
        vals = np.take_along_axis(vals, order, axis=0)
        pick = fn(vals, axis=0)
        out_[gidx] = np.take_along_axis(idx, pick[None, :], axis=0)[0]
    return _finish(out_.astype(np.int64), ax, keepdims, orig)


@implements(np.argmax)
def _argmax(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
    """``np.argmax``: flat index (``axis=None``, the same on every rank) or an int64 vector."""
    return _arg("argmax", a, axis, out, keepdims)


@implements(np.argmin)
def _argmin(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
    """``np.argmin``: flat index (``axis=None``, the same on every rank) or an int64 vector."""
    return _arg("argmin", a, axis, out, keepdims)


# -- trace and norms ---------------------------------------------------------------------------
@implements(np.trace)
def _trace(
    a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None, out: Any = None
) -> Any:
    """``np.trace``: sum of diagonal ``offset``, identical on every rank."""
    _no_extras("np.trace", out)
    a = _require(a, "np.trace")
    if a.ndim != 2:
        raise ValueError("np.trace needs a 2-D array (a matrix), got a vector")
    if (axis1 % 2, axis2 % 2) != (0, 1):
        raise ValueError("np.trace on BlockCyclicArrays supports only axis1=0, axis2=1")
    if a._transposed:  # trace(A.T, k) == trace(A, -k)
        offset = -offset
    s = local_view(a)
    backend, g, layout = s.backend, s.grid, s.layout
    n, nb, pc, csrc = s.layout.shape[1], layout.block[1], g.npcol, layout.src[1]
    rows = layout.local_rows(g.myrow)
    gc = rows + int(offset)
    # local row i holds a diagonal element when column rows[i] + offset is in range and ours
    mask = (gc >= 0) & (gc < n)
    mask[mask] = (csrc + gc[mask] // nb) % pc == g.mycol
    il = np.nonzero(mask)[0]
    jl = (gc[il] // (nb * pc)) * nb + gc[il] % nb
    res_dt = np.trace(np.zeros((1, 1), s.dtype), dtype=dtype).dtype
    part = None
    if il.size:
        xp = backend.xp
        diag = s._data[xp.asarray(il), xp.asarray(jl)]
        part = backend.asnumpy(xp.sum(diag, dtype=dtype))
    valid = [p for p in backend.allgather(part) if p is not None]
    return res_dt.type(functools.reduce(np.add, valid)) if valid else res_dt.type(0)


@implements(np.linalg.norm)
def _norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """``np.linalg.norm``: of a matrix, ord None/'fro', 1, -1, inf, -inf; of a vector (or of
    each row or column of a matrix, ``axis=1``/``0``: a distributed vector), every vector ord
    (None/2, 1, inf, -inf, 0, any other number ``p``: ``sum(|x|**p)**(1/p)``).

    The Frobenius norm and the vector 2-norm are accumulated in float64 with LAPACK-style
    scaling (per-process ``(scale, sum of squares)`` pairs), so they neither overflow nor
    underflow needlessly. The matrix orders 2, -2 and 'nuc' come from the singular values:
    :mod:`ops.face.spectral` (above the SVD, which sits above this module) wraps this registration
    and answers them for matrices with more than one row and column (an ``n x 1`` or ``1 x n``
    matrix has one singular value: its 2-norm, the Frobenius norm, is returned here). Integer
    and bool input gives float64, as NumPy's.
    """
    a = _require(x, "np.linalg.norm")
    real_dt = np.linalg.norm(np.zeros(1, a.dtype)).dtype
    if a.ndim == 1 or (axis is not None and _norm_axis(axis, "np.linalg.norm") is not None):
        ax = None if a.ndim == 1 else _norm_axis(axis, "np.linalg.norm")
        if a.ndim == 1:
            _norm_axis(axis, "np.linalg.norm", 1)
        s, sax = _unview(a.conj() if a._conjugated else a, ax)  # norms ignore conjugation
        result = _vector_norms(s, sax, ord)
        if ax is None:
            return _keepdims(real_dt.type(result), None, keepdims, 1)
        return _finish(np.asarray(result).astype(real_dt), ax, keepdims, a)
    s = _unview(a.conj() if a._conjugated else a, None)[0]
    transposed = a._transposed
    if ord is None or ord == "fro":
        result = _frobenius(s)
    elif ord in (1, -1, np.inf, -np.inf):
        # 1-norms are column sums of A (row sums of the stored matrix of A.T)
        sum_axis = 0 if (ord in (1, -1)) != transposed else 1
        sums = _abs_sums(s, sum_axis)
        if sums.size == 0:
            raise ValueError("zero-size array to reduction operation which has no identity")
        result = np.max(sums) if ord in (1, np.inf) else np.min(sums)
    elif ord in (2, -2, "nuc") and min(a.shape) == 1:
        result = _frobenius(s)  # a vector has one singular value: its 2-norm
    elif ord in (2, -2, "nuc"):
        raise NotImplementedError(
            f"np.linalg.norm(A, ord={ord!r}) of a {a.shape[0]}x{a.shape[1]} matrix needs "
            "singular values: import blasmp_array (its ops.face.spectral answers it through the "
            "SVD)"
        )
    else:
        raise ValueError(f"Invalid norm order {ord!r} for matrices")
    result = real_dt.type(result)
    return np.asarray(result).reshape(1, 1) if keepdims else result


def _vector_norms(s: BlockCyclicArray, axis: int | None, ord: Any) -> Any:
    """Vector norms of the stored ``s``: of all its elements (``axis=None``, a vector's
    column face) or of each column (``axis=0``) / row (``axis=1``): a host scalar or vector."""
    if isinstance(ord, str) or (ord is not None and not np.isscalar(ord)):
        raise ValueError(f"Invalid norm order {ord!r} for vectors")
    xp = s.backend.xp
    if axis is None and (ord is None or ord == 2):
        return _frobenius(s)

    def mod(x: Any) -> Any:
        return np if isinstance(x, np.ndarray) else xp

    def mag(x: Any) -> Any:
        return mod(x).abs(x).astype(np.float64, copy=False)

    if ord in (np.inf, -np.inf):
        fn = "max" if ord == np.inf else "min"
        return _reduce(
            s,
            axis,
            lambda x, ax: getattr(mod(x), fn)(mag(x), axis=ax),
            np.maximum if ord == np.inf else np.minimum,
            None,
            "np.linalg.norm",
        )
    if ord == 0:
        return _reduce(
            s,
            axis,
            lambda x, ax: mod(x).sum(x != 0, axis=ax).astype(np.float64),
            np.add,
            0,
            "np.linalg.norm",
        )
    p = 2.0 if ord is None else float(np.asarray(ord))
    if p == 1:
        return _reduce(
            s, axis, lambda x, ax: mod(x).sum(mag(x), axis=ax), np.add, 0, "np.linalg.norm"
        )
    with np.errstate(divide="ignore"):  # negative p: zeros give 1/inf = 0, as NumPy
        total = _reduce(
            s, axis, lambda x, ax: mod(x).sum(mag(x) ** p, axis=ax), np.add, 0, "np.linalg.norm"
        )
        return np.asarray(total) ** (1.0 / p)


#: an unscaled sum of squares at or above this is exact enough: the squares that underflowed
#: (below ``tiny`` each) change it by less than ``eps^2`` per element
_SSQ_SAFE = float(np.finfo(np.float64).tiny / np.finfo(np.float64).eps ** 2)


def _frobenius(s: BlockCyclicArray) -> float:
    backend, xp = s.backend, s.backend.xp
    part = None
    local = _local_part(s)[0]
    if local.size and local.dtype in (np.float64, np.complex128):
        # BLAS's dot of the elements: no temporaries (each a page-faulting allocation for a
        # large local matrix); LAPACK's scaling below only where the squares overflow or
        # underflow
        flat = local.ravel()
        ssq = float(xp.vdot(flat, flat).real)
        if _SSQ_SAFE <= ssq < np.inf:
            part = (1.0, ssq)
    if local.size and part is None:
        mag = xp.abs(local).astype(np.float64, copy=False)
        scale = float(xp.max(mag))
        ssq = 0.0
        if scale > 0 and np.isfinite(scale):
            mag /= scale
            ssq = float(xp.sum(mag * mag))
        part = (scale, ssq)
    valid = [p for p in backend.allgather(part) if p is not None]
    if not valid:
        return 0.0
    scales = [float(p[0]) for p in valid]
    if any(math.isnan(sc) for sc in scales):
        return math.nan
    big = max(scales)
    if math.isinf(big) or big == 0:
        return big
    total = sum(ssq * (sc / big) ** 2 for sc, ssq in valid if sc > 0)
    return float(big * math.sqrt(total))


def _abs_sums(s: BlockCyclicArray, axis: int) -> np.ndarray:
    xp = s.backend.xp

    def local(x: Any, axis: int | None) -> Any:
        mod = np if isinstance(x, np.ndarray) else xp
        return mod.sum(mod.abs(x), axis=axis)

    return _reduce(s, axis, local, np.add, 0, "np.linalg.norm")


# -- comparisons ---------------------------------------------------------------------------------
def _operands(a: Any, b: Any, what: str) -> list[Any]:
    ops = operands((a, b), what)
    if ops is None:
        raise TypeError(f"{what}: unsupported operand types {type(a).__name__}, {type(b).__name__}")
    return ops


def _all_ranks(a: BlockCyclicArray, local_ok: bool) -> bool:
    return bool(all(a.backend.allgather(bool(local_ok))))


@implements(np.isclose)
def _isclose(
    a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> BlockCyclicArray:
    """``np.isclose``: a bool BlockCyclicArray of the broadcast shape (see
    :func:`.elementwise.elementwise`)."""
    ops = _operands(a, b, "np.isclose")

    def kernel(xp: Any, out: Any, x: Any, y: Any) -> None:
        out[...] = xp.isclose(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan)

    return elementwise("np.isclose", ops, np.dtype(np.bool_), kernel)


@implements(np.allclose)
def _allclose(
    a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> bool:
    """``np.allclose``: the same bool on every rank."""
    close = _isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    return _all_ranks(close, bool(close._column.resolve()._data.all()))


@implements(np.array_equal)
def _array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> bool:
    """``np.array_equal``: False for different shapes, else elementwise equality everywhere."""
    ops = _operands(a1, a2, "np.array_equal")
    shapes = [
        np.shape(o) if not isinstance(o, BlockCyclicArray | Replicated) else o.shape for o in ops
    ]
    if shapes[0] != shapes[1]:
        return False

    def kernel(xp: Any, out: Any, x: Any, y: Any) -> None:
        eq = x == y
        if equal_nan:
            eq |= xp.isnan(x) & xp.isnan(y)
        out[...] = eq

    if equal_nan and any(np.dtype(_dtype_of(o)).kind not in "fc" for o in ops):
        equal_nan = False  # NumPy: no NaN in integers
    eq = elementwise("np.array_equal", ops, np.dtype(np.bool_), kernel)
    return _all_ranks(eq, bool(eq._column.resolve()._data.all()))


def _dtype_of(o: Any) -> Any:
    return o.dtype if isinstance(o, BlockCyclicArray | Replicated) else np.result_type(o)


# -- structure -----------------------------------------------------------------------------------
@implements(np.transpose)
def _transpose(a: Any, axes: Any = None) -> BlockCyclicArray:
    """``np.transpose``: the lazy view ``A.T`` (``axes`` None or (1, 0); (0, 1) is ``A``)."""
    a = _require(a, "np.transpose")
    if a.ndim == 1:
        if axes is None or tuple(axes) in ((0,), (-1,)):
            return a
        raise ValueError(f"np.transpose: axes {axes!r} don't match a vector")
    if axes is None or tuple(axes) in ((1, 0), (-1, -2), (1, -2), (-1, 0)):
        return a.T
    if tuple(axes) in ((0, 1), (-2, -1), (0, -1), (-2, 1)):
        return a
    raise ValueError(f"np.transpose: axes {axes!r} do not permute the two axes of a matrix")


@implements(np.reshape)
def _reshape(a: Any, shape: Any = None, order: str = "C", **kwargs: Any) -> BlockCyclicArray:
    """``np.reshape``: :meth:`BlockCyclicArray.reshape` (relabellings only)."""
    if shape is None:  # NumPy 2.1 renamed newshape to shape
        shape = kwargs.pop("newshape", None)
    if kwargs or shape is None:
        raise TypeError(f"np.reshape: unsupported arguments {sorted(kwargs) or ['shape']}")
    if order not in ("C", "F", "A"):
        raise ValueError(f"np.reshape: order must be 'C', 'F' or 'A', not {order!r}")
    return _require(a, "np.reshape").reshape(shape)


@implements(np.ravel)
def _ravel(a: Any, order: str = "C") -> BlockCyclicArray:
    """``np.ravel``: :meth:`BlockCyclicArray.ravel` (a vector, or an ``n x 1`` / ``1 x n``
    matrix's vector)."""
    return _require(a, "np.ravel").ravel(order)


def _triangle(m: Any, k: Any, upper: bool) -> BlockCyclicArray:
    what = "np.triu" if upper else "np.tril"
    a = _require(m, what)
    if not isinstance(k, int | np.integer) or isinstance(k, bool):
        raise TypeError(f"{what}: k must be an integer, got {k!r}")
    if a.ndim != 2:
        raise ValueError(
            f"{what} of a vector would broadcast it to a square matrix; use "
            f"{what}(np.outer(np.ones(n), x)) style expressions or gather"
        )
    a = a.resolve()
    g, xp = a.grid, a.backend.xp
    rows = a.layout.local_rows(g.myrow)
    cols = a.layout.local_cols(g.mycol)
    # keep (i, j) with j - i >= k (triu) or j - i <= k (tril), in global indices
    diff = cols[None, :] - rows[:, None]
    keep = xp.asarray(diff >= k if upper else diff <= k)
    out = creation.new_like(a)
    out._data[...] = xp.where(keep, a._data, xp.zeros((), dtype=a.dtype))
    return out


@implements(np.triu)
def _triu(m: Any, k: int = 0) -> BlockCyclicArray:
    """``np.triu``: zeros below diagonal ``k`` (computed locally from global indices)."""
    return _triangle(m, k, upper=True)


@implements(np.tril)
def _tril(m: Any, k: int = 0) -> BlockCyclicArray:
    """``np.tril``: zeros above diagonal ``k`` (computed locally from global indices)."""
    return _triangle(m, k, upper=False)


@implements(np.copy)
def _copy(a: Any, order: str = "K", subok: bool = False) -> BlockCyclicArray:
    """``np.copy``: a deep copy (views materialised)."""
    return _require(a, "np.copy").copy()


def _like(name: str, fill: Any) -> Callable[..., Any]:
    def impl(
        a: Any,
        dtype: Any = None,
        order: str = "K",
        subok: bool = True,
        shape: Any = None,
        *,
        device: Any = None,
    ) -> BlockCyclicArray:
        return getattr(creation, name)(_require(a, f"np.{name}"), dtype=dtype, shape=shape)

    impl.__doc__ = f"``np.{name}``: a BlockCyclicArray with ``a``'s shape, block and grid."
    return impl


implements(np.empty_like)(_like("empty_like", None))
implements(np.zeros_like)(_like("zeros_like", 0))
implements(np.ones_like)(_like("ones_like", 1))


@implements(np.full_like)
def _full_like(
    a: Any,
    fill_value: Any,
    dtype: Any = None,
    order: str = "K",
    subok: bool = True,
    shape: Any = None,
    *,
    device: Any = None,
) -> BlockCyclicArray:
    """``np.full_like``: a BlockCyclicArray with ``a``'s shape, block and grid."""
    return creation.full_like(_require(a, "np.full_like"), fill_value, dtype=dtype, shape=shape)


@implements(np.shape)
def _shape(a: Any) -> tuple[int, ...]:
    """``np.shape``: the global shape."""
    return _require(a, "np.shape").shape


@implements(np.ndim)
def _ndim(a: Any) -> int:
    """``np.ndim``: 2 for a matrix, 1 for a vector."""
    return _require(a, "np.ndim").ndim


@implements(np.size)
def _size(a: Any, axis: Any = None) -> int:
    """``np.size``: number of elements (or the length of ``axis``)."""
    a = _require(a, "np.size")
    return a.size if axis is None else a.shape[axis]
