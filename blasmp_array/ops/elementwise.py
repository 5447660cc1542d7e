"""Elementwise ufuncs on BlockCyclicArrays: local work on aligned local matrices.

Operands are BlockCyclicArrays of one shape, or scalars (Python numbers, NumPy scalars, 0-d
arrays). Arrays sharing a layout and grid combine without communication. An operand in another
layout is redistributed to the first array operand's layout (or ``out``'s), with a
:class:`RedistributionWarning`, since that is an all-to-all exchange of the whole operand.
Lazy views: when every array operand is a transposed view, the ufunc runs on the stored
matrices and the result is again a transposed view (no data moves); otherwise views are
materialised with :meth:`BlockCyclicArray.resolve`. Conjugated views are conjugated locally.

Result dtypes follow NumPy (``ufunc.resolve_dtypes``, Python scalars are "weak"); comparisons
give bool arrays, which reductions (``np.any``/``np.all``) and ``to_numpy`` accept.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np

from .._alloc import new_array
from .._dispatch import implements, implements_ufunc
from .._warnings import RedistributionWarning
from ..array import SUPPORTED_DTYPES, BlockCyclicArray

__all__ = ["RedistributionWarning", "UNARY", "BINARY", "aligned", "assign", "local_view"]


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
    np.isnan,
    np.isfinite,
    np.isinf,
    np.logical_not,
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
)

_RESULT_DTYPES = (*SUPPORTED_DTYPES, np.dtype(np.bool_))


# -- operands ----------------------------------------------------------------------------------
def _operand(x: Any, what: str) -> Any:
    """A BlockCyclicArray or a scalar; NotImplemented for foreign duck arrays."""
    if isinstance(x, BlockCyclicArray):
        return x
    if isinstance(x, np.ndarray):
        if x.ndim == 0:
            return x[()]
        raise TypeError(
            f"{what}: cannot combine a BlockCyclicArray with a NumPy array of shape {x.shape}; "
            "distribute it first with bm.from_numpy(a, block=A.block, grid=A.grid)"
        )
    if isinstance(x, numbers.Number | np.generic) and not isinstance(x, str | bytes):
        return x
    if hasattr(x, "__array_ufunc__") or hasattr(x, "__array_function__"):
        return NotImplemented
    raise TypeError(
        f"{what}: unsupported operand of type {type(x).__name__}; use a BlockCyclicArray or a "
        "scalar (distribute NumPy data with bm.from_numpy)"
    )


def _weak_dtype(x: Any) -> Any:
    """What ``ufunc.resolve_dtypes`` takes for ``x`` (Python scalars stay weak)."""
    if isinstance(x, BlockCyclicArray):
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
            "BlockCyclicArrays do not broadcast"
        )


def local_view(a: BlockCyclicArray) -> BlockCyclicArray:
    """The stored matrix of ``a`` ignoring its transpose flag, conjugated locally if needed."""
    s = a.storage
    if a._conjugated:
        return BlockCyclicArray(a.backend.xp.conj(s._data), s.layout, a.grid)
    return s


def _user_stacklevel() -> int:
    """The ``stacklevel`` of the first caller outside blasmp_array and NumPy's wrappers."""
    import os
    import sys

    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    npdir = os.path.dirname(os.path.abspath(np.__file__))
    frame: Any = sys._getframe(1)
    level = 1
    while frame is not None:
        fname = os.path.abspath(frame.f_code.co_filename)
        if not (fname.startswith(pkg + os.sep) or fname.startswith(npdir + os.sep)):
            return level
        frame, level = frame.f_back, level + 1
    return 1


def aligned(x: BlockCyclicArray, like: BlockCyclicArray, what: str) -> BlockCyclicArray:
    """``x`` (not a view) in the layout and grid of ``like`` (not a view).

    Redistributes ``x`` (collective, with a :class:`RedistributionWarning`) when they differ.
    """
    if x.layout == like.layout and x.grid.same_as(like.grid):
        return x
    warnings.warn(
        f"{what}: an operand in block {x.block} on a {x.grid.nprow}x{x.grid.npcol} grid "
        f"(source process {x.layout.src}) is redistributed to block {like.block} on a "
        f"{like.grid.nprow}x{like.grid.npcol} grid (source process {like.layout.src}) "
        "(an all-to-all exchange of the whole operand); build operands with the same block "
        "and grid to avoid it",
        RedistributionWarning,
        stacklevel=_user_stacklevel(),
    )
    if like.layout.src == (0, 0):
        return x.redistribute(grid=like.grid, block=like.block)
    from .indexing import to_layout  # a view's layout: another source process

    return to_layout(x, like)


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
    """``ufunc(*inputs)`` elementwise on BlockCyclicArrays and scalars (see module doc)."""
    what = f"np.{ufunc.__name__}"
    if kwargs:
        raise TypeError(f"{what} on BlockCyclicArrays does not support {sorted(kwargs)}")
    ops = [_operand(x, what) for x in inputs]
    if any(o is NotImplemented for o in ops):
        return NotImplemented
    target = _check_out(out, ufunc.nout, what)
    arrays = [o for o in ops if isinstance(o, BlockCyclicArray)]
    _check_same_shape(arrays + ([target] if target is not None else []), what)

    if dtype is not None:
        res_dt = np.dtype(dtype)
    else:
        res_dt = ufunc.resolve_dtypes((*map(_weak_dtype, ops), None))[-1]
    if res_dt not in _RESULT_DTYPES:
        raise TypeError(
            f"{what}: the result dtype would be {res_dt}, which BlockCyclicArrays do not hold; "
            "convert bool operands with A.astype(np.float64) first"
        )
    if target is not None and not np.can_cast(res_dt, target.dtype, "same_kind"):
        raise TypeError(f"{what}: cannot cast the {res_dt} result to out's dtype {target.dtype}")
    if target is not None and target.is_window:
        target[...] = apply_ufunc(ufunc, *inputs, dtype=dtype)
        return target

    # all array operands transposed: work on the stored matrices, return a transposed view
    as_transposed = target is None and all(a._transposed for a in arrays)
    if as_transposed:
        stored = [local_view(a) for a in arrays]
    else:
        stored = [a.resolve() for a in arrays]
    like = target if target is not None else stored[0]
    stored = [aligned(s, like, what) for s in stored]
    it = iter(stored)
    local_args = [next(it)._data if isinstance(o, BlockCyclicArray) else o for o in ops]

    result = target if target is not None else _empty(like, res_dt)
    xp_ufunc = getattr(like.backend.xp, ufunc.__name__)
    if dtype is not None:
        xp_ufunc(*local_args, out=result._data, dtype=res_dt)
    else:
        xp_ufunc(*local_args, out=result._data)
    return result.T if as_transposed else result


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
