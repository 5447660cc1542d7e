"""Elementwise ufuncs on BlockCyclicArrays: local work on aligned local matrices.

Operands are BlockCyclicArrays (matrices and vectors), scalars (Python numbers, NumPy scalars,
0-d arrays) and ndarrays given on every rank (:mod:`._replicated`: laid out to match, after a
cross-rank checksum). Shapes broadcast as NumPy's: ``A * x`` scales the columns of ``A`` by the
vector ``x``, ``A + x.reshape(n, 1)`` its rows, ``x[:, None] * y[None, :]`` is an outer product.

* Operands of the result's shape that share its layout and grid combine without communication.
  A matrix in another layout is redistributed to the first full-shape array operand's layout
  (or ``out``'s), with a :class:`RedistributionWarning`, since that is an all-to-all exchange of
  the whole operand; a vector in another layout is moved quietly (``O(n)`` elements).
* An operand broadcast along an axis (a vector beside a matrix, an ``n x 1`` or ``1 x n``
  matrix) is all-gathered -- ``O(n)`` elements to every rank -- and each rank indexes the
  elements its local matrix needs.
* Lazy views: when every array operand is a transposed view of the result's shape, the ufunc
  runs on the stored matrices and the result is again a transposed view (no data moves);
  otherwise views are materialised with :meth:`BlockCyclicArray.resolve`. Conjugated views are
  conjugated locally.

Result dtypes follow NumPy (``ufunc.resolve_dtypes``, Python scalars are "weak"); comparisons
give bool arrays, integers stay integers (int32, int64), true division gives float64.
:func:`elementwise` is the engine the other elementwise functions (``np.where``,
``np.isclose``, ...) share.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np

from ..._alloc import new_array
from ..._dispatch import implements, implements_ufunc
from ..._warnings import RedistributionWarning, user_stacklevel
from ...array import SUPPORTED_DTYPES, BlockCyclicArray, as_vector
from ...creation import DEFAULT_BLOCK
from ...layout import BlockCyclicLayout
from ._replicated import Replicated, check_replicated, is_replicated, local_part, replicated
from .redistribute import to_layout

__all__ = [
    "RedistributionWarning",
    "UNARY",
    "BINARY",
    "aligned",
    "assign",
    "local_view",
    "elementwise",
    "broadcast_shape",
]


UNARY = (
    np.negative,
    np.positive,
    np.absolute,
    np.sqrt,
    np.square,
    np.reciprocal,
    np.exp,
    np.expm1,
    np.log,
    np.log1p,
    np.log2,
    np.log10,
    np.sin,
    np.cos,
    np.tanh,
    np.sign,
    np.rint,
    np.floor,
    np.ceil,
    np.trunc,
    np.isnan,
    np.isfinite,
    np.isinf,
    np.logical_not,
    np.invert,
)

BINARY = (
    np.add,
    np.subtract,
    np.multiply,
    np.true_divide,
    np.power,
    np.maximum,
    np.minimum,
    np.fmax,
    np.fmin,
    np.hypot,
    np.equal,
    np.not_equal,
    np.less,
    np.less_equal,
    np.greater,
    np.greater_equal,
    np.logical_and,
    np.logical_or,
    np.logical_xor,
    np.floor_divide,
    np.remainder,
    np.bitwise_and,
    np.bitwise_or,
    np.bitwise_xor,
    np.arctan2,
)

_RESULT_DTYPES = SUPPORTED_DTYPES


# -- operands ----------------------------------------------------------------------------------
def _operand(x: Any, what: str) -> Any:
    """A BlockCyclicArray, a scalar or a :class:`Replicated` ndarray; NotImplemented for
    foreign duck arrays."""
    if isinstance(x, BlockCyclicArray):
        return x
    if is_replicated(x):
        return replicated(x)
    if isinstance(x, np.ndarray):  # 0-d
        return x[()]
    if isinstance(x, numbers.Number | np.generic) and not isinstance(x, str | bytes):
        return x
    if hasattr(x, "__array_ufunc__") or hasattr(x, "__array_function__"):
        return NotImplemented
    raise TypeError(
        f"{what}: unsupported operand of type {type(x).__name__}; use a BlockCyclicArray or a "
        "scalar (distribute NumPy data with bm.from_numpy)"
    )


def operands(inputs: Any, what: str, out: Any = None) -> list[Any] | None:
    """The normalised operands (:func:`_operand`), the replicated ones checked across ranks
    first of all (one collective; before any check that depends on their shapes or dtypes, so
    ranks that disagree all raise the same error instead of some raising and some waiting);
    None when a foreign duck array should get its turn (``NotImplemented``)."""
    ops = [_operand(x, what) for x in inputs]
    if any(o is NotImplemented for o in ops):
        return None
    hosts = [o for o in ops if isinstance(o, Replicated)]
    if hosts:
        arrays = [o for o in [*ops, *(out or ())] if isinstance(o, BlockCyclicArray)]
        if arrays:
            check_replicated(hosts, arrays[0].grid, what)
        for h in hosts:
            if h.ndim > 2:
                raise ValueError(
                    f"{what}: an operand of shape {h.shape} has more than 2 dimensions; "
                    "BlockCyclicArrays are vectors and matrices"
                )
    return ops


def _weak_dtype(x: Any) -> Any:
    """What ``ufunc.resolve_dtypes`` takes for ``x`` (Python scalars stay weak)."""
    if isinstance(x, BlockCyclicArray | Replicated):
        return x.dtype
    if isinstance(x, np.generic):  # before the Python types: np.float64 subclasses float
        return x.dtype
    if isinstance(x, bool):
        return np.dtype(np.bool_)
    for t in (int, float, complex):
        if isinstance(x, t):
            return t
    return np.result_type(x)


def _check_same_shape(arrays: list[BlockCyclicArray], what: str) -> None:
    shapes = [a.shape for a in arrays]
    if len(set(shapes)) > 1:
        raise ValueError(
            f"{what}: operands have different shapes {' and '.join(map(str, shapes))}; "
            "this operation does not broadcast"
        )


def broadcast_shape(ops: list[Any], what: str) -> tuple[int, ...]:
    """NumPy's broadcast shape of the array operands (BlockCyclicArrays and replicated
    ndarrays; scalars do not count); ``ValueError`` as NumPy's when they do not broadcast."""
    shapes = [o.shape for o in ops if isinstance(o, BlockCyclicArray | Replicated)]
    try:
        return tuple(int(s) for s in np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(
            f"{what}: operands could not be broadcast together with shapes "
            f"{' '.join(map(str, shapes))}"
        ) from None


def local_view(a: BlockCyclicArray) -> BlockCyclicArray:
    """The stored matrix of ``a`` ignoring its transpose flag, conjugated locally if needed."""
    s = a.storage
    if a._conjugated:
        return BlockCyclicArray(a.backend.xp.conj(s._data), s.layout, a.grid)
    return s


def aligned(
    x: BlockCyclicArray, like: BlockCyclicArray, what: str, quiet: bool = False
) -> BlockCyclicArray:
    """``x`` (not a view) in the layout and grid of ``like`` (not a view).

    Redistributes ``x`` (collective, with a :class:`RedistributionWarning` unless ``quiet``:
    a vector's column face moves ``O(n)`` elements) when they differ.
    """
    if x.layout == like.layout and x.grid.same_as(like.grid):
        return x
    if not quiet:
        warnings.warn(
            f"{what}: an operand in block {x.block} on a {x.grid.nprow}x{x.grid.npcol} grid "
            f"(source process {x.layout.src}) is redistributed to block {like.block} on a "
            f"{like.grid.nprow}x{like.grid.npcol} grid (source process {like.layout.src}) "
            "(an all-to-all exchange of the whole operand); build operands with the same block "
            "and grid to avoid it",
            RedistributionWarning,
            stacklevel=user_stacklevel(),
        )
    if like.layout.src == (0, 0):
        return x.redistribute(grid=like.grid, block=like.layout.block)
    return to_layout(x, like)  # a view's layout: another source process


def _check_out(out: Any, nout: int, what: str) -> BlockCyclicArray | None:
    if out is None:
        return None
    if not isinstance(out, tuple):
        out = (out,)
    if len(out) != nout:
        raise ValueError(f"{what}: expected {nout} output(s), got {len(out)}")
    (target,) = out
    if target is None:
        return None
    if not isinstance(target, BlockCyclicArray):
        raise TypeError(f"{what}: out must be a BlockCyclicArray, got {type(target).__name__}")
    if target._transposed or target._conjugated:
        raise ValueError(
            f"{what}: out must not be a lazy view (A.T, A.conj()); pass a stored array"
        )
    return target  # a window view is written through its parent (A[...] = result)


# -- the generic ufunc call ----------------------------------------------------------------------
@implements_ufunc(*UNARY, *BINARY)
def apply_ufunc(
    ufunc: np.ufunc, *inputs: Any, out: Any = None, dtype: Any = None, **kwargs: Any
) -> Any:
    """``ufunc(*inputs)`` elementwise on BlockCyclicArrays, scalars and replicated ndarrays,
    broadcasting as NumPy (see module doc)."""
    if out is None and dtype is None and not kwargs:
        fast = _same_layout_ufunc(ufunc, inputs)
        if fast is not None:
            return fast
    what = f"np.{ufunc.__name__}"
    if kwargs:
        raise TypeError(f"{what} on BlockCyclicArrays does not support {sorted(kwargs)}")
    ops = operands(inputs, what, out if isinstance(out, tuple) else None)
    if ops is None:
        return NotImplemented
    target = _check_out(out, ufunc.nout, what)
    if dtype is not None:
        res_dt = np.dtype(dtype)
    else:
        try:
            res_dt = ufunc.resolve_dtypes((*map(_weak_dtype, ops), None))[-1]
        except TypeError as exc:  # NumPy's own "no loop" error, before any collective
            raise TypeError(f"{what}: {exc}") from None
    if res_dt not in _RESULT_DTYPES:
        raise TypeError(
            f"{what}: the result dtype would be {res_dt}, which BlockCyclicArrays do not hold "
            "(they hold float32, float64, complex64, complex128, int32, int64 and bool); cast an "
            "operand first, e.g. A.astype(np.float64)"
        )
    if ufunc is np.power and res_dt.kind in "iu":
        _check_integer_power(ops, what)

    def kernel(xp: Any, result: Any, *args: Any) -> None:
        xp_ufunc = _xp_ufunc(xp, ufunc, args, res_dt)
        if ufunc in _LOGICAL:
            # a complex value is true when non-zero (NumPy's rule); CuPy's logical ufuncs have
            # no complex loops, so complex operands become that truth value first
            args = tuple(_truth(a) for a in args)
        if dtype is not None:
            xp_ufunc(*args, out=result, dtype=res_dt)
        else:
            xp_ufunc(*args, out=result)

    return elementwise(what, ops, res_dt, kernel, target=target, transposable=True)


#: ``ufunc.resolve_dtypes`` of the argument dtypes (weak Python scalar types included), cached
_RESOLVED: dict[tuple[Any, ...], Any] = {}

_SCALARS = (int, float, complex, np.generic)


def _same_layout_ufunc(ufunc: np.ufunc, inputs: tuple[Any, ...]) -> BlockCyclicArray | None:
    """``ufunc(*inputs)`` when every array operand is stored (no view), all in one layout on
    one grid, beside scalars: one local call per rank, nothing to check across ranks or move,
    so none of :func:`elementwise`'s machinery (a call on small arrays felt its 20 us); None
    where that machinery is needed, or to let it raise its errors. The decision reads only
    global attributes, so every rank takes the same route."""
    first = None
    for x in inputs:
        if type(x) is BlockCyclicArray:
            if x._window is not None or x._transposed or x._conjugated:
                return None
            if first is None:
                first = x
            elif x.grid is not first.grid or x._vector != first._vector or x.layout != first.layout:
                return None
        elif not isinstance(x, _SCALARS) or isinstance(x, np.ndarray):
            return None
    if first is None:
        return None
    dts = tuple(x._dtype if type(x) is BlockCyclicArray else _weak_dtype(x) for x in inputs)
    key = (ufunc, *dts)
    res_dt = _RESOLVED.get(key)
    if res_dt is None:
        try:
            res_dt = _RESOLVED[key] = ufunc.resolve_dtypes((*dts, None))[-1]
        except (TypeError, OverflowError):
            return None
    if res_dt not in _RESULT_DTYPES or (ufunc is np.power and res_dt.kind in "iu"):
        return None  # elementwise raises (the dtype) or checks the exponent on every rank
    args = [x._data if type(x) is BlockCyclicArray else x for x in inputs]
    if ufunc in _LOGICAL:
        args = [_truth(a) for a in args]
    be = first.grid.backend
    if be.xp is np:
        data = ufunc(*args)
    else:  # a device's local matrices live in its symmetric heap
        data = be.empty(first._data.shape, res_dt)
        _xp_ufunc(be.xp, ufunc, args, res_dt)(*args, out=data)
    if data.dtype != res_dt:  # a weak scalar NumPy resolved otherwise than resolve_dtypes
        data = data.astype(res_dt)
    return BlockCyclicArray._of(data, first.layout, first.grid, vector=first._vector)


def _xp_ufunc(xp: Any, ufunc: np.ufunc, args: Any, res_dt: np.dtype) -> Any:
    """The array module's ufunc of ``ufunc``'s name; ``x ** 2`` as ``square(x)`` on a device:
    CUDA's ``pow(x, 2.0)`` may differ from ``x * x`` in the last bit, NumPy's does not."""
    if (
        xp is not np
        and ufunc is np.power
        and isinstance(args[1], int | float | np.integer | np.floating)
        and not isinstance(args[1], bool)
        and args[1] == 2
        and getattr(args[0], "dtype", None) == res_dt
    ):
        return lambda base, _exponent, **kwargs: xp.square(base, **kwargs)
    return getattr(xp, ufunc.__name__)


#: the ufuncs that read their operands as truth values
_LOGICAL = frozenset({np.logical_and, np.logical_or, np.logical_xor, np.logical_not})


def _truth(a: Any) -> Any:
    """``a != 0`` for a complex operand (array or scalar), else ``a`` unchanged."""
    if (
        isinstance(a, complex | np.complexfloating)
        or getattr(a, "dtype", np.dtype(int)).kind == "c"
    ):
        return a != 0
    return a


def _check_integer_power(ops: list[Any], what: str) -> None:
    """NumPy refuses negative integer exponents of integers; check a scalar exponent here,
    identically on every rank, rather than on the ranks that happen to hold elements."""
    e = ops[1]
    if not isinstance(e, BlockCyclicArray | Replicated) and np.ndim(e) == 0 and e < 0:
        raise ValueError(f"{what}: Integers to negative integer powers are not allowed.")


def elementwise(
    what: str,
    ops: list[Any],
    res_dt: np.dtype,
    kernel: Any,
    target: BlockCyclicArray | None = None,
    transposable: bool = False,
) -> BlockCyclicArray:
    """The elementwise engine: ``kernel(xp, result_local, *local_args)`` on every rank, where
    ``ops`` (normalised by :func:`_operand`) broadcast as NumPy's, into a new array (or into
    ``target``). ``ops`` come from :func:`operands` (the replicated ones checked across ranks
    there); checks run first, identically on every rank, then operands move (see module doc).
    ``transposable``: the kernel
    may run on the stored matrices of all-transposed operands (a result of the same
    elementwise kind)."""
    shape = broadcast_shape(ops + ([target] if target is not None else []), what)
    if target is not None:
        if target.shape != shape:
            raise ValueError(
                f"{what}: non-broadcastable output operand with shape {target.shape} doesn't "
                f"match the broadcast shape {shape}"
            )
        if not np.can_cast(res_dt, target.dtype, "same_kind"):
            raise TypeError(
                f"{what}: cannot cast the {res_dt} result to out's dtype {target.dtype}"
            )
    arrays = [o for o in ops if isinstance(o, BlockCyclicArray)]
    if not arrays and target is None:
        raise TypeError(f"{what}: no BlockCyclicArray operand")
    hosts = [o for o in ops if isinstance(o, Replicated)]
    grid = (target if target is not None else arrays[0]).grid
    for a in arrays:
        if a.grid.size != grid.size or a.grid.backend is not grid.backend:
            raise ValueError(f"{what}: the arrays live on grids over different processes")
    if target is not None and target.is_window:
        target[...] = elementwise(what, ops, res_dt, kernel, transposable=transposable)
        return target

    vector = len(shape) == 1
    shape2: tuple[int, int] = (shape[0], 1) if vector else (shape[0], shape[1])
    faces = [_face(o, vector) for o in ops]
    if target is not None:
        tface = target._column if vector else target
        if tface._transposed or tface._conjugated:
            raise ValueError(
                f"{what}: out must not be a lazy view (A.T, A.conj(), a row A[i]); pass a stored "
                "array"
            )
    full = [f for f in faces if isinstance(f, BlockCyclicArray) and f.shape == shape2]
    # every operand an array of the result's shape, all transposed: the stored matrices
    as_transposed = (
        transposable
        and target is None
        and not hosts
        and len(full) == len(arrays)
        and all(f._transposed for f in full)
    )
    if as_transposed:
        stored = {id(f): local_view(f) for f in full}
        like = stored[id(full[0])]
    else:
        stored = {id(f): f.resolve() for f in full}
        if target is not None:
            like = tface
        elif full:
            like = stored[id(full[0])]
        else:
            like = result = _new_like(faces, shape2, grid, res_dt)
    g, lay = like.grid, like.layout
    rows, cols = lay.local_rows(g.myrow), lay.local_cols(g.mycol)
    xp = like.backend.xp
    local_args = []
    for f in faces:
        if isinstance(f, BlockCyclicArray) and id(f) in stored:
            # one row or one column: O(n) elements move, quietly
            thin = vector or min(f.shape) <= 1
            local_args.append(aligned(stored[id(f)], like, what, quiet=thin)._data)
        elif isinstance(f, BlockCyclicArray):  # broadcast along an axis: O(n), all-gathered
            host = f.to_numpy()
            local_args.append(xp.asarray(local_part(host, rows, cols, 2)))
        elif isinstance(f, Replicated):
            local_args.append(like.backend.asarray(local_part(f.array, rows, cols, len(shape))))
        else:
            local_args.append(f)
    if target is not None:
        result = tface
    elif full or as_transposed:
        result = _empty(like, res_dt)
    kernel(xp, result._data, *local_args)
    if as_transposed:
        result = result.T
    return as_vector(result) if vector else result


def _face(o: Any, vector: bool) -> Any:
    """An operand as it broadcasts in a result of ``ndim`` 1 (``vector``) or 2: a vector is a
    column of a vector result and a row (``1 x n``) of a matrix result; a replicated 1-D
    ndarray likewise (:func:`._replicated.local_part`)."""
    if isinstance(o, BlockCyclicArray) and o.ndim == 1:
        return o._column if vector else o._column.T
    return o


def _new_like(faces: list[Any], shape2: tuple[int, int], grid: Any, dtype: Any) -> BlockCyclicArray:
    """An array of ``shape2`` for a result that no array operand has the shape of (an outer
    broadcast ``x[:, None] + y[None, :]``): rows blocked like the first operand spanning the
    rows, columns like the first spanning the columns."""
    block = list(DEFAULT_BLOCK)
    for axis in (0, 1):
        for f in faces:
            if isinstance(f, BlockCyclicArray) and f.shape[axis] == shape2[axis] > 1:
                block[axis] = f.block[axis]
                break
    layout = BlockCyclicLayout(shape2, (block[0], block[1]), grid.shape)
    return new_array(layout, grid, dtype)


@implements_ufunc(np.conjugate)
def _conjugate(ufunc: np.ufunc, x: Any, out: Any = None, **kwargs: Any) -> Any:
    """``np.conj(A)``: the lazy conjugated view ``A.conj()`` (materialised only into ``out``)."""
    op = _operand(x, "np.conjugate")
    if op is NotImplemented:
        return NotImplemented
    if out is None and not kwargs and isinstance(op, BlockCyclicArray):
        return op.conj()
    return apply_ufunc(ufunc, x, out=out, **kwargs)


def _empty(like: BlockCyclicArray, dtype: np.dtype) -> BlockCyclicArray:
    return new_array(like.layout, like.grid, dtype)


def assign(target: BlockCyclicArray, source: Any) -> BlockCyclicArray:
    """Copy ``source`` (a BlockCyclicArray of target's shape, or a scalar) into ``target``.

    Casting follows NumPy's 'same_kind' rule; a source in another layout is redistributed.
    """
    if not isinstance(source, BlockCyclicArray):
        return _fill(target, source)
    what = "assign"
    if target.ndim == 1 or source.ndim == 1:
        if target.shape != source.shape:
            raise ValueError(f"{what}: shapes {source.shape} and {target.shape} differ")
        assign(target._column, source._column)
        return target
    _check_out(target, 1, what)
    _check_same_shape([target, source], what)
    if not np.can_cast(source.dtype, target.dtype, "same_kind"):
        raise TypeError(f"{what}: cannot cast {source.dtype} to {target.dtype}")
    if target.is_window:
        target[...] = source
        return target
    src = aligned(source.resolve(), target, what)
    target._data[...] = src._data
    return target


def _fill(target: BlockCyclicArray, value: Any) -> BlockCyclicArray:
    _check_out(target, 1, "assign")
    v = _operand(value, "assign")
    if isinstance(v, Replicated):  # an ndarray given on every rank: assignment's broadcasting
        target[...] = v.array
        return target
    if np.iscomplexobj(v) and target.dtype.kind != "c":
        raise TypeError(f"cannot assign the complex value {v!r} to a {target.dtype} array")
    if target.is_window:
        target.fill(v)
        return target
    target._data[...] = v
    return target


@implements(np.copyto)
def _copyto(dst: Any, src: Any, casting: str = "same_kind", where: Any = True) -> None:
    """``np.copyto(dst, src)`` for a BlockCyclicArray ``dst`` (casting 'same_kind' only)."""
    if casting != "same_kind" or where is not True:
        raise TypeError("np.copyto on BlockCyclicArrays supports only casting='same_kind'")
    if not isinstance(dst, BlockCyclicArray):
        raise TypeError("np.copyto: dst must be a BlockCyclicArray when src is one")
    assign(dst, src)


def _real_imag(val: Any, part: str) -> BlockCyclicArray:
    if not isinstance(val, BlockCyclicArray):
        raise TypeError(f"np.{part} expects a BlockCyclicArray, got {type(val).__name__}")
    if val.ndim == 1:
        return as_vector(_real_imag(val._column, part))
    if val.dtype.kind != "c":
        if part == "real":
            return val
        return _zeros_view(val)
    s = val.storage
    data = s._data.real if part == "real" else s._data.imag
    if part == "imag" and val._conjugated:
        data = -data
    dt = np.dtype(data.dtype)
    out = _empty(s, dt)
    out._data[...] = data
    return out.T if val._transposed else out


def _zeros_view(val: BlockCyclicArray) -> BlockCyclicArray:
    s = val.storage
    out = _empty(s, s.dtype)
    out._data[...] = 0
    return out.T if val._transposed else out


@implements(np.real)
def _real(val: Any) -> BlockCyclicArray:
    """``np.real(A)``: the real part (``A`` itself for real dtypes, as NumPy)."""
    return _real_imag(val, "real")


@implements(np.imag)
def _imag(val: Any) -> BlockCyclicArray:
    """``np.imag(A)``: the imaginary part (zeros for real dtypes)."""
    return _real_imag(val, "imag")
