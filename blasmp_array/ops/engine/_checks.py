"""Argument checks and layout reconciliation shared by the BLAS3 operators.

Every function here is either pure (the same decision on every rank, from arguments every rank
holds identically) or a collective redistribution that every rank reaches in the same order.
All errors are raised before any communication.
"""

from __future__ import annotations

import warnings
from numbers import Integral
from typing import Any

import numpy as np

from ..._warnings import RedistributionWarning
from ...array import BLAS_DTYPES, BlockCyclicArray, blas_dtype, check_dtype

__all__ = [
    "check_trans",
    "check_side",
    "check_uplo",
    "check_array",
    "check_output",
    "split_view",
    "split_window",
    "op_of",
    "window_operand",
    "result_dtype",
    "cast_scalar",
    "cast_storage",
    "move",
    "store",
    "flip_uplo",
    "check_flag",
    "check_finite",
]

_TRANS = ("N", "T", "C")


def _check_choice(
    value: Any, name: str, op: str, choices: dict[str, str], shown: tuple[str, ...]
) -> str:
    if isinstance(value, str) and value.lower() in choices:
        return choices[value.lower()]
    valid = ", ".join(repr(c) for c in shown)
    raise ValueError(f"{op}: {name} must be one of {valid} (any case), got {value!r}")


def check_trans(value: Any, name: str, op: str) -> str:
    """Normalise a BLAS ``trans`` argument to 'N', 'T' or 'C' (case-insensitive)."""
    return _check_choice(value, name, op, {"n": "N", "t": "T", "c": "C"}, ("N", "T", "C"))


def check_side(value: Any, op: str) -> str:
    """'left'/'right' (or 'L'/'R', any case) -> 'L'/'R'."""
    choices = {"left": "L", "right": "R", "l": "L", "r": "R"}
    return _check_choice(value, "side", op, choices, ("left", "right", "L", "R"))


def check_uplo(lower: Any, op: str) -> str:
    """The ``lower`` flag (bool) -> 'L'/'U'."""
    if not isinstance(lower, bool | np.bool_):
        raise TypeError(f"{op}: lower must be True or False, got {lower!r}")
    return "L" if lower else "U"


def flip_uplo(uplo: str) -> str:
    return "U" if uplo == "L" else "L"


def check_flag(value: Any, name: str) -> bool:
    """A boolean keyword (SciPy accepts 0/1 too) as a ``bool``; ``TypeError`` otherwise."""
    if not isinstance(value, Integral | np.bool_):
        raise TypeError(f"{name} must be a bool (or 0/1), got {value!r}")
    return bool(value)


def factor_pair(value: Any, op: str, names: str, factor: str) -> tuple[Any, Any]:
    """The pair a factorization returned (``cho_factor``'s ``(c, lower)``, ``lu_factor``'s
    ``(lu, piv)``) as the first argument of its solve; ``TypeError`` naming it otherwise."""
    try:
        first, second = value
    except (TypeError, ValueError):
        raise TypeError(
            f"{op}: the first argument must be the {names} pair {factor} returns"
        ) from None
    return first, second


def _b_flag(xp: Any, b: BlockCyclicArray | None) -> Any:
    """A 0-d device boolean: whether this rank's elements of ``b`` (a stored matrix or a view;
    a window view's read in its parent) hold a NaN or an infinity (False for no ``b``)."""
    from ._triangle import nonfinite_flag

    if b is None:
        return xp.zeros((), bool)
    w = b._window
    return nonfinite_flag(xp, b._data if w is None else w.parent._data[w.local_slices()])


def check_finite(
    a: BlockCyclicArray,
    b: BlockCyclicArray | None = None,
    op: str = "",
    uplo: str | None = None,
    k: int = 0,
    *,
    finite: bool = True,
    zero_diagonal: bool = False,
) -> None:
    """``ValueError`` on every rank unless ``a`` (only its ``tril(., k)``/``triu(., k)``
    triangle when ``uplo`` is ``'L'``/``'U'``) and ``b`` hold only finite numbers (SciPy's
    ``check_finite``; ``LinAlgError``, NumPy's, when ``op`` names an ``np.linalg`` call;
    skipped with ``finite=False``); with ``zero_diagonal``, then
    ``LinAlgError`` on every rank if the square ``a`` has an exact zero on its diagonal
    (naming the first: a singular triangular matrix). Every flag is reduced on the device and
    read in one transfer, then combined in one allreduce: one host round trip in all."""
    from ._triangle import nonfinite_flag, triangle_nonfinite_flag, window_flags

    be, xp = a.backend, a.backend.xp
    n = a.shape[0]
    flags = []  # 0-d device values, combined by max on every rank
    if a.is_window:  # read in its parent, no copy (a window view of a stored matrix, no flags)
        w = a._window
        assert w is not None and not (a._transposed or a._conjugated)
        from .panels import WindowTarget

        target, g = WindowTarget.of(w), a.grid
        rows, cols = target.local_rows(g.myrow), target.local_cols(g.mycol)
        bad, first = window_flags(w, rows, cols, uplo if finite else None, k, zero_diagonal, finite)
        if finite:
            flags += [bad, _b_flag(xp, b)]
        if zero_diagonal:
            flags.append(-first)
    elif finite:
        if uplo is None:
            flags.append(nonfinite_flag(xp, a._data))
        else:
            flags.append(triangle_nonfinite_flag(a.layout, a.grid, a._data, uplo, k))
        flags.append(_b_flag(xp, b))
    if zero_diagonal and not a.is_window:
        flags.append(-_first_zero_on_diagonal(a))
    if not flags:
        return
    got = be.allreduce(be.asnumpy(xp.stack(flags, dtype=np.int64)), op="max")
    if finite and got[:2].any():
        which = " and ".join(x for x, f in zip(("a", "b"), got[:2], strict=True) if f)
        prefix = f"{op}: " if op else ""
        # NumPy's linalg raises LinAlgError (a ValueError) where SciPy's check_finite raises
        # ValueError; the np.linalg face follows NumPy
        error = np.linalg.LinAlgError if op and op.startswith("np.linalg.") else ValueError
        raise error(f"{prefix}array must not contain infs or NaNs ({which} does)")
    first = -int(got[-1]) if zero_diagonal else n
    if first < n:
        prefix = f"{op}: " if op else ""
        raise np.linalg.LinAlgError(
            f"{prefix}singular matrix: A[{first}, {first}] == 0 (the first zero on the diagonal "
            "of the triangular matrix)"
        )


def _first_zero_on_diagonal(a: BlockCyclicArray) -> Any:
    """A 0-d device int: the smallest global ``i`` with ``a[i, i] == 0`` among this process's
    diagonal entries, or ``a.shape[0]``."""
    from ._triangle import local_diagonal

    xp = a.backend.xp
    idx, ri, ci = local_diagonal(a.layout, a.grid)
    if idx is None:
        return xp.asarray(a.shape[0], dtype=np.int64)
    return xp.where(a._data[ri, ci] == 0, idx, a.shape[0]).min()


def check_array(x: Any, name: str, op: str) -> BlockCyclicArray:
    if not isinstance(x, BlockCyclicArray):
        raise TypeError(
            f"{op}: {name} must be a BlockCyclicArray, got {type(x).__name__}; "
            "distribute it with blasmp_array.from_numpy"
        )
    return x


def check_square_matrix(a: Any, op: str) -> BlockCyclicArray:
    """``a`` as the square matrix of an eigenproblem (NumPy's ``LinAlgError`` for another
    dimension or a non-square shape; ``TypeError`` for a dtype the library cannot hold)."""
    a = check_array(a, "a", op)
    if a.ndim != 2:
        raise np.linalg.LinAlgError(
            f"{op}: {a.ndim}-dimensional array given. Array must be at least two-dimensional"
        )
    if a.shape[0] != a.shape[1]:
        raise np.linalg.LinAlgError(
            f"{op}: Last 2 dimensions of the array must be square (a is {a.shape[0]}x{a.shape[1]})"
        )
    check_dtype(blas_dtype(a.dtype))
    return a


def check_output(c: Any, op: str) -> BlockCyclicArray | None:
    if c is None:
        return None
    check_array(c, "C", op)
    if c._transposed or c._conjugated:  # a window view is written in its parent
        raise ValueError(
            f"{op}: C must be a stored array, not a lazy view (A.T / A.conj()); "
            "pass C.copy() and use the result"
        )
    return c


def split_view(x: BlockCyclicArray) -> tuple[BlockCyclicArray, str]:
    """``(storage, op)`` with ``x == op(storage)``, op in 'N', 'T', 'C', 'R' (R: conjugate)."""
    return x.storage, op_of(x)


def split_window(
    x: BlockCyclicArray,
) -> tuple[BlockCyclicArray, str, tuple[int, int], tuple[int, int] | None]:
    """:func:`split_view` that keeps a window view in place: ``(stored, op, offset, extent)``
    with ``x == op(stored[offset : offset + extent])``; ``extent`` None for all of ``stored``
    (then ``stored`` is ``x.storage``)."""
    w = x._window
    if w is None:
        return x.storage, op_of(x), (0, 0), None
    return (
        w.parent,
        op_of(x),
        (w.rows[0], w.cols[0]),
        (w.rows[1] - w.rows[0], w.cols[1] - w.cols[0]),
    )


def window_operand(
    x: BlockCyclicArray,
    stored: BlockCyclicArray,
    offset: tuple[int, int],
    extent: tuple[int, int] | None,
    grid: Any,
    block: tuple[int, int],
    dtype: np.dtype,
) -> tuple[BlockCyclicArray, tuple[int, int], tuple[int, int] | None]:
    """``(stored, offset, extent)`` of the operand ``x`` (as :func:`split_window` gave them) for
    a panel pipeline on ``grid`` that reads ``block``-blocked ``dtype`` data: unchanged where
    ``x`` is no window view or its parent is already so (the pipeline reads the window in place,
    its offset folded into the plan); else the window is copied (``x.storage``) and is then
    moved like any operand. (A window view's parent never lies on a 1x1 grid, so this never
    meets the one local BLAS call of a 1x1 grid.)"""
    if extent is None or (
        stored.grid.same_as(grid) and tuple(stored.block) == tuple(block) and stored.dtype == dtype
    ):
        return stored, offset, extent
    return x.storage, (0, 0), None


#: the op character of the flags ``(transposed, conjugated)``
OP_OF_FLAGS = {(False, False): "N", (True, False): "T", (True, True): "C", (False, True): "R"}


def op_of(x: BlockCyclicArray) -> str:
    """The op character of ``x`` over its storage: 'N', 'T', 'C' or 'R' (conjugate)."""
    return OP_OF_FLAGS[x._transposed, x._conjugated]


def result_dtype(op: str, *arrays: BlockCyclicArray | None, out: BlockCyclicArray | None = None):
    """NumPy's promotion of the operands' dtypes, integer and bool promoted to float64 (as
    ``np.linalg``: the BLAS compute in floating point); C's dtype must hold it."""
    dt = blas_dtype(np.result_type(*[a.dtype for a in arrays if a is not None]))
    check_dtype(dt)
    if out is not None and np.result_type(dt, out.dtype) != out.dtype:
        names = ", ".join(str(a.dtype) for a in arrays if a is not None)
        raise TypeError(
            f"{op}: C has dtype {out.dtype} but the product of {names} needs {dt}; "
            f"pass C with dtype {dt}"
        )
    return np.dtype(out.dtype if out is not None else dt)


def cast_scalar(value: Any, dtype: np.dtype, name: str, op: str, real: bool = False) -> Any:
    """``value`` as a scalar of ``dtype`` (a complex value for a real dtype is an error)."""
    try:
        z = complex(value)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: {name} must be a number, got {value!r}") from None
    if z.imag != 0 and (dtype.kind != "c" or real):
        what = "a Hermitian update" if real and dtype.kind == "c" else f"a {dtype} result"
        raise TypeError(f"{op}: {name}={value!r} is complex but {what} needs a real {name}")
    return dtype.type(z.real) if dtype.kind != "c" else dtype.type(z)


def cast_storage(x: BlockCyclicArray, dtype: np.dtype) -> BlockCyclicArray:
    """The stored array ``x`` cast (locally) to ``dtype``; ``x`` itself when it already is."""
    if x.dtype == dtype:
        return x
    return BlockCyclicArray(x._data.astype(dtype), x.layout, x.grid)


def move(
    x: BlockCyclicArray, grid: Any, block: tuple[int, int], name: str, op: str, why: str
) -> BlockCyclicArray:
    """Redistribute the stored array ``x`` to ``block`` on ``grid`` if it is not there already,
    warning about the cost (every rank warns identically)."""
    if x.grid.same_as(grid) and tuple(x.block) == tuple(block):
        return x
    from .redistribute import redistribute

    nbytes = x.shape[0] * x.shape[1] * x.dtype.itemsize
    where = "" if x.grid.same_as(grid) else f" from a {x.grid.nprow}x{x.grid.npcol} grid"
    warnings.warn(
        f"{op}: {why}; redistributing {name} ({x.shape[0]}x{x.shape[1]} {x.dtype}, "
        f"{nbytes / 1e6:.3g} MB all-to-all){where} to block {tuple(block)} on a "
        f"{grid.nprow}x{grid.npcol} grid. Create {name} with block={tuple(block)} on the same "
        "grid to avoid this copy.",
        RedistributionWarning,
        stacklevel=4,
    )
    return redistribute(x, grid=grid, block=tuple(block))


def store(target: BlockCyclicArray, value: BlockCyclicArray) -> None:
    """Copy ``value`` (``target``'s shape, on its grid and block) into ``target``'s storage.

    A local copy when the layouts agree; an exchange when only the source process differs
    (``target`` a submatrix view ``C[i0:i1, j0:j1]``, whose layout starts at another process)
    or ``target`` is a window view (into its parent).
    Collective in that case; every rank decides the same from the layouts.
    """
    from .redistribute import copy_window

    w = target._window
    if w is not None:  # a window view: into its parent's window
        copy_window(value, (0, 0), w.parent, (w.rows[0], w.cols[0]), target.shape)
        return
    if value.layout == target.layout and value.grid.same_as(target.grid):
        target._data[...] = value._data
        return
    copy_window(value, (0, 0), target, (0, 0), target.shape)


_BLAS_DTYPES = frozenset(BLAS_DTYPES)


def one_process_pair(a: BlockCyclicArray, b: BlockCyclicArray) -> bool:
    """Whether ``a`` and ``b`` are on one 1x1 grid, neither a window view, of one BLAS dtype:
    what the one-process products (``A @ x``, ``A @ B``) need before their own tests."""
    g = a.grid
    return (
        g.size == 1
        and (b.grid is g or b.grid.same_as(g))
        and a._window is None
        and b._window is None
        and (a._dtype is b._dtype or a._dtype == b._dtype)
        and a._dtype in _BLAS_DTYPES
    )
