"""Indexing of BlockCyclicArrays: submatrix views, element reads and assignment into windows.

Submatrix views (PBLAS's ``IA, JA``)
------------------------------------
Process row ``p`` stores the global rows it owns in increasing order, so the rows of ANY window
``[i0, i1)`` that ``p`` owns are one contiguous run of its local rows:
``[numroc(i0, mb, p, Pr, src), numroc(i1, mb, p, Pr, src))`` (likewise for columns). A window is
therefore always a slice of every local matrix; the question is only whether that slice is again
a block-cyclic matrix of the window's shape. It is, with the parent's block and grid and source
process ``((src_r + i0 // mb) % Pr, (src_c + j0 // nb) % Pc)``, when in each dimension

* the offset is on a block boundary (``i0 % mb == 0``), or
* the window lies inside one block (``i0 // mb == (i1 - 1) // mb``: e.g. one row or column, or
  one element), or
* the grid has one process in that dimension (``Pr == 1``: every row is on the one process
  row, in order, whatever the blocking; so on a ``1 x 1`` grid every window is a view).

Then ``A[i0:i1, j0:j1]`` is a *view*: a BlockCyclicArray whose local matrix is a slice of
``A``'s (no copy, no communication) and whose layout carries the shifted source process. Every
operator accepts it as any operand, and writing into it (``gemm(..., C=A[v])``, ufuncs with
``out=``, ``A[v][...] = x``) writes into ``A``.

Otherwise (an offset inside a block and a window spanning several blocks) the window is not
block-cyclic: its first block is partial (ScaLAPACK's ``IMB < MB``). It is then a *window view*
(:attr:`BlockCyclicArray.is_window`): ``(A, rows, cols)``, still no copy and no communication.

* Elements, windows of it, assignment and ``fill`` go to ``A`` (composed offsets): they see and
  change ``A`` as NumPy's views do.
* The BLAS3 operators (GEMM, SYMM, SYRK, SYR2K, TRMM, TRSM) fold the offsets into their panel
  plans, PBLAS's ``IA, JA``: the panels are gathered straight from ``A``'s local matrix
  (:class:`~.panels.Source`'s window, :class:`~.panels.Gather`), no copy of the operand; GEMM,
  SYMM, SYRK and SYR2K update a window view ``C`` in place (:class:`~.panels.WindowTarget`).
  The reductions reduce ``A``'s local slices.
* Every other consumer calls :attr:`BlockCyclicArray.storage` / ``resolve()``, which copies the
  window into a new array with source ``(0, 0)`` by one exchange
  (:func:`~.redistribute.copy_window`) with a :class:`~blasmp_array.ViewCopyWarning` -- at
  that moment, so the copy sees ``A``'s current values. Ufuncs with ``out=`` a window view
  compute a new array and assign it into ``A``'s window (``V[...] = result``).

A window view has no local matrix of its own (its ``_data`` raises): a consumer that forgets to
resolve it fails loudly rather than reading the wrong elements. Assignment
``A[i0:i1, j0:j1] = value`` always writes into ``A``, whatever the offset: scalars and NumPy
arrays are written locally, a BlockCyclicArray of another layout is exchanged straight into the
window.

An integer drops its axis, as in NumPy: ``A[i]``, ``A[i, :]`` and ``A[:, j]`` are vectors
(``ndim == 1``) whose column faces are the row window ``A[i:i+1, :]`` (transposed) or the column
window ``A[:, j:j+1]``: views, no copy; ``A[i:i+1, :]`` stays 2-D. ``A[i, j]`` and ``x[k]`` are
the element itself, a NumPy scalar on every rank (one broadcast from its owner). A vector
``x[i:j]`` is a view of its column face's window; ``x[:, None]`` and ``x[None, :]`` are its
``n x 1`` and ``1 x n`` faces. Negative indices, ``...`` and slices with step 1 follow NumPy;
other steps raise :class:`IndexError`. Index arrays and boolean masks along one axis
(``A[[1, 5]]``, ``A[:, idx]``, ``A[mask]``, ``x[x > 0]``) are selections, new arrays
(:mod:`.selection`). All checks use the global shape only, so every rank raises the same error
before any communication.

The window exchange
-------------------
Copies between windows (a copied view, assignment of a BlockCyclicArray of another layout,
concatenation) are :func:`~.redistribute.copy_window`: redistribution's plan with a window.
"""

from __future__ import annotations

import warnings
from numbers import Integral
from typing import Any

import numpy as np

from ..._warnings import ViewCopyWarning, user_stacklevel
from ...array import BlockCyclicArray, Window, as_vector
from ...grid import ProcessGrid
from ...layout import BlockCyclicLayout
from .redistribute import copy_window
from .selection import is_selection, select, select_assign

__all__ = [
    "parse_key",
    "getitem",
    "setitem",
    "window",
    "window_is_view",
    "materialize_window",
]

_SUPPORTED = (
    "supported indices are integers and slices with step 1 (negative values and ... as NumPy), "
    "e.g. A[i0:i1, j0:j1], A[i, :], A[:, j], A[i, j]"
)

Range = tuple[int, int]


# -- keys (pure: identical on every rank) -----------------------------------------------------
def _one(k: Any, n: int, axis: int) -> tuple[Range, bool]:
    """``(start, stop)`` of one index component over a dimension of length ``n``, and whether
    it was an integer."""
    if isinstance(k, Integral) and not isinstance(k, bool | np.bool_):
        i = int(k)
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
        i %= n
        return (i, i + 1), True
    if isinstance(k, slice):
        for name, v in (("start", k.start), ("stop", k.stop), ("step", k.step)):
            if v is not None and not (isinstance(v, Integral) and not isinstance(v, bool)):
                raise IndexError(
                    f"slice {name} must be an integer or None, got {v!r}; {_SUPPORTED}"
                )
        if k.step is not None and int(k.step) != 1:
            raise IndexError(
                f"slices with step {k.step} are not supported (a strided submatrix is not "
                f"block-cyclic); {_SUPPORTED}"
            )
        start, stop, _ = k.indices(n)
        return (start, max(start, stop)), False
    if k is None:
        kind = "np.newaxis (None)"
    elif isinstance(k, bool | np.bool_) or np.dtype(getattr(k, "dtype", object)) == np.bool_:
        kind = f"boolean index ({type(k).__name__})"
    else:
        kind = f"index of type {type(k).__name__}"
    raise IndexError(
        f"BlockCyclicArray does not support {kind} (fancy, boolean and new-axis indexing are "
        f"not distributed); {_SUPPORTED}"
    )


def parse_key(key: Any, shape: tuple[int, int]) -> tuple[Range, Range, bool]:
    """``key`` as row and column ranges, and whether both were integers (an element)."""
    rows, cols, (ri, ci) = parse_key2(key, shape)
    return rows, cols, ri and ci


def parse_key2(key: Any, shape: tuple[int, int]) -> tuple[Range, Range, tuple[bool, bool]]:
    """``key`` as row and column ranges, and which of the two were integers."""
    parts = list(key) if isinstance(key, tuple) else [key]
    nell = sum(1 for p in parts if p is Ellipsis)
    if nell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if nell:
        at = next(i for i, p in enumerate(parts) if p is Ellipsis)
        fill = [slice(None)] * max(0, 2 - (len(parts) - 1))
        parts = parts[:at] + fill + parts[at + 1 :]
    if len(parts) > 2:
        raise IndexError(
            f"too many indices for a 2-D BlockCyclicArray: {len(parts)} were given; {_SUPPORTED}"
        )
    parts += [slice(None)] * (2 - len(parts))
    (rows, ri), (cols, ci) = (_one(parts[a], shape[a], a) for a in (0, 1))
    return rows, cols, (ri, ci)


def vector_key(key: Any, n: int) -> Any:
    """A vector's basic ``key`` as a key of its ``n x 1`` column face: ``(k, 0)`` for an
    element, ``(slice, slice(None))`` for a window; ``None`` on one side (``x[:, None]``,
    ``x[None, :]``) gives ``('column' | 'row', slice)``."""
    parts = list(key) if isinstance(key, tuple) else [key]
    if sum(1 for p in parts if p is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    parts = [p for p in parts if p is not Ellipsis] or [slice(None)]
    if len(parts) == 2 and (parts[0] is None) != (parts[1] is None):
        face = "row" if parts[0] is None else "column"
        k = parts[1] if parts[0] is None else parts[0]
        if not isinstance(k, slice):
            raise IndexError(f"x[{key!r}]: with None, the other index must be a slice")
        return face, k
    if len(parts) != 1:
        raise IndexError(
            f"too many indices for a 1-D BlockCyclicArray: {len(parts)} were given; supported "
            "are x[k], x[i:j], x[:, None], x[None, :], index arrays and boolean masks"
        )
    k = parts[0]
    if isinstance(k, Integral) and not isinstance(k, bool | np.bool_):
        return (k, 0)
    if isinstance(k, slice):
        return (k, slice(None))
    _one(k, n, 0)  # raises the IndexError of an unsupported index
    raise AssertionError("unreachable")


# -- windows of a stored matrix ---------------------------------------------------------------
def _free(r: Range, b: int, nprocs: int) -> bool:
    i0, i1 = r
    return nprocs == 1 or i0 % b == 0 or i1 <= i0 or i0 // b == (i1 - 1) // b


def window_is_view(layout: BlockCyclicLayout, rows: Range, cols: Range) -> bool:
    """True when the window of ``layout`` is itself block-cyclic (a view, see module doc)."""
    (mb, nb), (pr, pc) = layout.block, layout.grid_shape
    return _free(rows, mb, pr) and _free(cols, nb, pc)


def _view_layout(lay: BlockCyclicLayout, rows: Range, cols: Range) -> BlockCyclicLayout:
    (mb, nb), (pr, pc), (sr, sc) = lay.block, lay.grid_shape, lay.src
    return BlockCyclicLayout(
        shape=(rows[1] - rows[0], cols[1] - cols[0]),
        block=lay.block,
        grid_shape=lay.grid_shape,
        src=((sr + rows[0] // mb) % pr, (sc + cols[0] // nb) % pc),
    )


def window(a: BlockCyclicArray, rows: Range, cols: Range) -> BlockCyclicArray:
    """The window ``rows x cols`` of the stored matrix ``a`` (no lazy flags, not a window view):
    a view when :func:`window_is_view`, else a window view. Local: no copy, no communication."""
    if window_is_view(a.layout, rows, cols):
        rs, cs = Window(a, rows, cols).local_slices()
        return BlockCyclicArray(a._data[rs, cs], _view_layout(a.layout, rows, cols), a.grid)
    layout = BlockCyclicLayout((rows[1] - rows[0], cols[1] - cols[0]), a.layout.block, a.grid.shape)
    return BlockCyclicArray(None, layout, a.grid, window=Window(a, rows, cols))


def materialize_window(v: BlockCyclicArray, warn: bool = True) -> BlockCyclicArray:
    """A copy of the window view ``v`` (flags ignored) in ``v.layout``, by one exchange, with a
    :class:`ViewCopyWarning` (unless ``warn=False``: an explicit copy such as a gather).
    Collective: every consumer that cannot fold the offset calls it."""
    w = v._window
    assert w is not None
    if warn:
        _warn_copy(w)
    g = v.grid
    out = BlockCyclicArray(
        g.backend.empty(v.layout.local_shape(g.myrow, g.mycol), v.dtype), v.layout, g
    )
    copy_window(w.parent, (w.rows[0], w.cols[0]), out, (0, 0), out.shape)
    return out


def _warn_copy(w: Window) -> None:
    (i0, i1), (j0, j1) = w.rows, w.cols
    warnings.warn(
        f"the window [{i0}:{i1}, {j0}:{j1}] of a matrix with blocks {w.parent.block} starts "
        f"inside a block, and this operation needs it as a stored matrix: it is copied (an "
        f"exchange moving its {i1 - i0}x{j1 - j0} elements). The BLAS3 operators (A @ B, A.T @ A, "
        "gemm, symm, syrk, syr2k, trmm, trsm) read such windows in place; offsets that are "
        "multiples of the block size are views for every operation.",
        ViewCopyWarning,
        stacklevel=user_stacklevel(),
    )


def _storage_ranges(a: BlockCyclicArray, rows: Range, cols: Range) -> tuple[Range, Range]:
    return (cols, rows) if a._transposed else (rows, cols)


def _base_of(a: BlockCyclicArray) -> tuple[BlockCyclicArray, int, int]:
    """The stored matrix a view's elements live in, and the view's offset in it (flags aside):
    the parent of a window view, else ``a.storage``."""
    w = a._window
    if w is not None:
        return w.parent, w.rows[0], w.cols[0]
    return a.storage, 0, 0


def getitem(a: BlockCyclicArray, key: Any) -> Any:
    """``a[key]``: an element (NumPy scalar on every rank), a BlockCyclicArray window (a view,
    2-D or a vector) or a selection along one axis (:func:`.selection.select`)."""
    if is_selection(key):
        return select(a, key)
    if a.ndim == 1:
        face_key = vector_key(key, a.shape[0])
        col = a._column
        if face_key[0] in ("row", "column"):
            face = getitem(col, (face_key[1], slice(None)))
            return face if face_key[0] == "column" else face.T
        got = getitem(col, face_key)
        return got if isinstance(face_key[0], Integral) else as_vector(got)
    rows, cols, (ri, ci) = parse_key2(key, a.shape)
    if ri != ci:  # one integer: the axis drops, the window is a vector's column face
        return as_vector(_window_of(a, rows, cols, False))
    return _window_of(a, rows, cols, ri and ci)


def _window_of(a: BlockCyclicArray, rows: Range, cols: Range, element: bool) -> Any:
    """Element ``(rows[0], cols[0])`` or the window ``rows x cols`` of the view ``a``."""
    srows, scols = _storage_ranges(a, rows, cols)
    base, oi, oj = _base_of(a)
    srows, scols = _shift(srows, oi), _shift(scols, oj)
    if element:
        v = _element(base, srows[0], scols[0])
        return np.conj(v) if a._conjugated else v
    s = window(base, srows, scols)
    if a._transposed:
        s = s.T
    return s.conj() if a._conjugated else s


def _shift(r: Range, by: int) -> Range:
    return (r[0] + by, r[1] + by)


def _element(a: BlockCyclicArray, i: int, j: int) -> Any:
    """Element ``(i, j)`` of the stored ``a``, broadcast from its owner."""
    lay, g = a.layout, a.grid
    (prow, pcol), (il, jl) = lay.global_to_local(i, j)
    root = g.rank_of(prow, pcol)
    value = None
    if g.rank == root:
        value = a.backend.asnumpy(a._data[il : il + 1, jl : jl + 1])[0, 0]
    value = a.backend.bcast(value, root=root)
    return a.dtype.type(value)


# -- assignment -------------------------------------------------------------------------------
def setitem(a: BlockCyclicArray, key: Any, value: Any) -> None:
    """``a[key] = value`` (see module doc). Every check runs before any write or collective."""
    if a._conjugated:
        raise ValueError(
            "cannot assign into a lazy conjugated view (A.conj(), A.H): it has no storage of its "
            "own; assign conj(value) into the stored matrix instead"
        )
    if is_selection(key):
        select_assign(a, key, value)
        return
    if a.ndim == 1:
        face_key = vector_key(key, a.shape[0])
        if face_key[0] in ("row", "column"):
            face_key = (face_key[1], slice(None))
            if isinstance(value, BlockCyclicArray) and value.ndim == 2 and value.shape[0] == 1:
                value = value.T
        elif isinstance(value, BlockCyclicArray) and value.ndim == 1:
            value = value._column
        elif not isinstance(value, BlockCyclicArray) and np.ndim(value) == 1:
            value = np.asarray(value).reshape(-1, 1)
        setitem(a._column, face_key, value)
        return
    rows, cols, (ri, ci) = parse_key2(key, a.shape)
    if ri != ci:  # one integer: a 1-D target (NumPy's shape), stored as a row or a column
        length = (cols if ri else rows)[1] - (cols if ri else rows)[0]
        if isinstance(value, BlockCyclicArray):
            if value.ndim == 1:
                value = value._column.T if ri else value._column
        elif np.ndim(value) >= 1 and not hasattr(value, "__cuda_array_interface__"):
            v = np.asarray(value)
            while v.ndim > 1 and v.shape[0] == 1:  # NumPy drops leading unit axes on assignment
                v = v[0]
            try:
                v = np.broadcast_to(v, (length,))
            except ValueError:
                raise ValueError(
                    f"A[...] = value: could not broadcast a value of shape {v.shape} into a "
                    f"window of shape ({length},)"
                ) from None
            value = v.reshape((1, length) if ri else (length, 1))
    srows, scols = _storage_ranges(a, rows, cols)
    h, w = srows[1] - srows[0], scols[1] - scols[0]
    s, oi, oj = _base_of(a)
    srows, scols = _shift(srows, oi), _shift(scols, oj)
    what = "A[...] = value"
    if isinstance(value, BlockCyclicArray):
        src = value.T if a._transposed else value
        if src.shape != (h, w):
            raise ValueError(
                f"{what}: cannot assign a BlockCyclicArray of shape {value.shape} to a window of "
                f"shape {(rows[1] - rows[0], cols[1] - cols[0])} (BlockCyclicArrays do not "
                "broadcast)"
            )
        if not np.can_cast(src.dtype, s.dtype, "same_kind"):
            raise TypeError(f"{what}: cannot cast {src.dtype} to {s.dtype} (same_kind)")
        _check_same_processes(src.grid, s.grid, what)
        if h and w:
            src = src.resolve()
            if _base(src._data) is _base(s._data):
                src = src.copy()  # overlapping source and target: read everything first
            if window_is_view(s.layout, srows, scols):
                view = window(s, srows, scols)
                if src.layout == view.layout and src.grid.same_as(view.grid):
                    view._data[...] = src._data
                    return
            copy_window(src, (0, 0), s, (srows[0], scols[0]), (h, w))
        return
    local = _host_value(value, s.dtype, (rows[1] - rows[0], cols[1] - cols[0]), what)
    if a._transposed and local.ndim == 2:
        local = local.T
    rs, cs = Window(s, srows, scols).local_slices()
    if local.ndim == 0:
        s._data[rs, cs] = local[()]
        return
    g = s.grid
    grow = s.layout.local_rows(g.myrow)[rs] - srows[0]
    gcol = s.layout.local_cols(g.mycol)[cs] - scols[0]
    part = local[np.ix_(grow, gcol)] if grow.size and gcol.size else np.empty((0, 0), local.dtype)
    if part.size:
        s._data[rs, cs] = s.backend.asarray(part, dtype=s.dtype)


def _base(x: Any) -> Any:
    while getattr(x, "base", None) is not None:
        x = x.base
    return x


def _check_same_processes(x: ProcessGrid, y: ProcessGrid, what: str) -> None:
    if x.size != y.size or x.backend is not y.backend:
        raise ValueError(
            f"{what}: the value lives on a grid of {x.size} processes ({x.backend.name}) and the "
            f"matrix on one of {y.size} ({y.backend.name}); both must be over the same "
            "processes and backend"
        )


def _host_value(value: Any, dtype: np.dtype, shape: tuple[int, int], what: str) -> Any:
    """A scalar (0-d) or a NumPy array of ``shape`` (broadcast as NumPy) in ``dtype``."""
    if hasattr(value, "__cuda_array_interface__") and not isinstance(value, np.ndarray):
        value = np.asarray(value.get())  # a CuPy array given on every rank
    try:
        arr = np.asarray(value)
    except Exception:
        raise TypeError(
            f"{what}: unsupported value of type {type(value).__name__}; assign a scalar, a NumPy "
            "array given on every rank or a BlockCyclicArray"
        ) from None
    if arr.dtype == object or arr.dtype.kind not in "biufc":
        raise TypeError(f"{what}: cannot assign a value of dtype {arr.dtype} to a {dtype} matrix")
    if arr.dtype.kind == "c" and dtype.kind != "c":
        raise TypeError(f"{what}: cannot assign complex values to a {dtype} matrix")
    if arr.ndim == 0:
        return arr.astype(dtype)
    tshape = shape
    try:
        b = np.broadcast_to(arr, tshape)
    except ValueError:
        raise ValueError(
            f"{what}: could not broadcast a value of shape {arr.shape} into a window of shape "
            f"{tshape}"
        ) from None
    return b.astype(dtype, copy=False)
