"""Selection along one axis: index arrays and boolean masks (``A[[1, 5, 7]]``, ``A[:, idx]``,
``A[mask]``, ``x[x > 0]``, ``np.take``), and assignment through them.

What is selected
----------------
One component of the key is an index array -- a list, a NumPy (or CuPy) array given on every
rank, or a BlockCyclicArray vector of integers or bools -- and the others are integers or
slices, which are applied first as views (``A[idx, j]`` is ``A[:, j][idx]``). A boolean
vector selects where it is True (its length must be the axis's); an integer array selects
those positions in its order, repeats and negative positions included. A boolean matrix of
``A``'s shape, alone, selects elements in row-major order (``A[A > 0]``), a vector. Errors are
NumPy's (``IndexError``: out of bounds, a mask of the wrong length, a float index), raised on
every rank before any data moves. The positions are known on every rank: a replicated array is
checked across ranks (:mod:`._replicated`), a distributed index vector is all-gathered
(``O(k)``).

How it moves
------------
The result of ``A[idx]`` (rows) keeps ``A``'s column distribution (its block, and the source
process column of ``A``) and distributes its ``k`` rows in ``A``'s row block from process row
0; so each row moves only within its process column: from the owner of ``A``'s row ``idx[t]``
to the owner of result row ``t``. Columns likewise. That is one one-step plan over the
exchange engine (``ops/engine/_exchange.py``): one message per pair of process rows (columns) and
process column (row), packed by one row (column) gather from the local matrix and unpacked by
one scatter -- device to device on the GPU. A boolean matrix's elements move the same way, one
message per pair of ranks, after one allgather of the selected elements' global positions
(``O(k)``) fixes their order. Assignment (``A[idx] = value``) writes locally for a scalar or a
replicated array; a distributed value travels by the reverse plan (repeated positions: the last
one wins, as NumPy's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._alloc import new_array
from ..._dispatch import implements
from ...array import BlockCyclicArray, as_vector
from ...backends.base import Backend
from ...layout import BlockCyclicLayout, numroc
from ._exchange import Message, Plan, positions_index, run_plan
from ._replicated import check_replicated, is_replicated, local_part, replicated
from ._vectors import vector_layout
from ._warmup import sample_matrix, warmup_kernels
from .elementwise import aligned

__all__ = ["is_selection", "select", "select_assign"]


def _is_array_index(k: Any) -> bool:
    if isinstance(k, list | BlockCyclicArray):
        return True
    return (isinstance(k, np.ndarray) or hasattr(k, "__cuda_array_interface__")) and np.ndim(k) > 0


def is_selection(key: Any) -> bool:
    """Whether ``key`` selects with an index array or a boolean mask."""
    parts = key if isinstance(key, tuple) else (key,)
    return any(_is_array_index(k) for k in parts)


# -- keys -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Key:
    """A parsed selection: ``basic`` (the key of integers and slices applied first, a view),
    then ``positions`` along ``axis`` of the view; or, ``mask`` set, a boolean matrix."""

    basic: tuple[Any, ...] | None
    axis: int
    positions: np.ndarray | None
    mask: Any = None


def _parse(a: BlockCyclicArray, key: Any) -> _Key:
    parts = list(key) if isinstance(key, tuple) else [key]
    if sum(1 for p in parts if p is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if len(parts) == 1 and a.ndim == 2 and _is_mask_matrix(parts[0], a):
        return _Key(None, 0, None, parts[0])
    at = next((i for i, p in enumerate(parts) if p is Ellipsis), None)
    if at is not None:
        parts = parts[:at] + [slice(None)] * (a.ndim - len(parts) + 1) + parts[at + 1 :]
    parts += [slice(None)] * (a.ndim - len(parts))
    if len(parts) > a.ndim:
        raise IndexError(
            f"too many indices for a {a.ndim}-D BlockCyclicArray: {len(parts)} were given"
        )
    arrays = [i for i, p in enumerate(parts) if _is_array_index(p)]
    if len(arrays) > 1:
        raise IndexError(
            "selecting along two axes at once (two index arrays) is not supported; select "
            "one axis at a time, e.g. A[rows][:, cols]"
        )
    (ax,) = arrays
    if any(p is None for p in parts):
        raise IndexError("np.newaxis (None) cannot be combined with an index array")
    basic = tuple(slice(None) if i == ax else p for i, p in enumerate(parts))
    # integers before the array axis drop their axes: the array applies to the view's axis
    view_axis = ax - sum(1 for i, p in enumerate(parts) if i < ax and not isinstance(p, slice))
    view_len = _view_shape(a, basic)[view_axis]
    return _Key(basic, view_axis, _positions(parts[ax], view_len, ax, a))


def _view_shape(a: BlockCyclicArray, basic: tuple[Any, ...]) -> tuple[int, ...]:
    shape = []
    for p, n in zip(basic, a.shape, strict=True):
        if isinstance(p, slice):
            start, stop, step = p.indices(n)
            shape.append(len(range(start, stop, step)))
    return tuple(shape)


def _is_mask_matrix(k: Any, a: BlockCyclicArray) -> bool:
    dt = getattr(k, "dtype", None)
    return (
        dt is not None
        and np.dtype(dt) == np.bool_
        and np.ndim(k) == 2
        and tuple(k.shape) == a.shape
    )


def _positions(k: Any, n: int, axis: int, a: BlockCyclicArray) -> np.ndarray:
    """The positions (int64, in range) an index array selects along a length-``n`` axis; the
    same on every rank (collective for a replicated or distributed index)."""
    if isinstance(k, BlockCyclicArray):
        if k.ndim != 1:
            raise IndexError(
                f"a distributed index must be a vector, got shape {k.shape} (a boolean mask of "
                "the array's own shape selects elements: A[mask])"
            )
        host: np.ndarray = _gathered(k)  # O(k) to every rank
    elif isinstance(k, list):
        host = np.asarray(k)
        if host.size == 0:
            host = host.astype(np.intp)
    else:
        check_replicated([replicated(k)], a.grid, "indexing")
        host = k if isinstance(k, np.ndarray) else a.backend.asnumpy(k)
    if host.ndim != 1:
        raise IndexError(
            f"only 1-D index arrays are supported (along one axis), got shape {host.shape}"
        )
    if host.dtype == np.bool_:
        if host.size != n:
            raise IndexError(
                f"boolean index did not match indexed array along axis {axis}; size of axis is "
                f"{n} but size of corresponding boolean axis is {host.size}"
            )
        return np.flatnonzero(host).astype(np.int64)
    if host.dtype.kind not in "iu":
        raise IndexError(
            f"arrays used as indices must be of integer (or boolean) type, got {host.dtype}"
        )
    pos = host.astype(np.int64)
    bad = (pos < -n) | (pos >= n)
    if bad.any():
        raise IndexError(
            f"index {int(pos[np.argmax(bad)])} is out of bounds for axis {axis} with size {n}"
        )
    return np.where(pos < 0, pos + n, pos)


def _gathered(x: BlockCyclicArray) -> np.ndarray:
    """The vector ``x`` on every rank (``O(n)``)."""
    host = x.to_numpy()
    assert host is not None
    return host


# -- reading -------------------------------------------------------------------------------------
def select(a: BlockCyclicArray, key: Any) -> BlockCyclicArray:
    """``a[key]`` for a key with an index array or a boolean mask (see module doc): a new
    array. Collective."""
    k = _parse(a, key)
    if k.mask is not None:
        return _select_elements(a, k.mask)
    assert k.basic is not None and k.positions is not None
    view = a[k.basic] if any(not _full(p) for p in k.basic) else a
    if view.ndim == 1:
        col = view._column
        return as_vector(_select_axis(col, 0, k.positions))
    return _select_axis(view, k.axis, k.positions)


def _full(p: Any) -> bool:
    return isinstance(p, slice) and p == slice(None)


def _select_axis(x: BlockCyclicArray, axis: int, pos: np.ndarray) -> BlockCyclicArray:
    """Rows (``axis=0``) or columns ``pos`` of the 2-D ``x`` (any view): a new array."""
    if x._transposed:  # rows of A.T are columns of A
        return _select_axis(x.T, 1 - axis, pos).T
    conj = x._conjugated
    s = x.resolve() if x.is_window else x.storage
    out = _gather(s, axis, pos)
    return out.conj().resolve() if conj else out


def _result_layout(s: BlockCyclicArray, axis: int, k: int) -> BlockCyclicLayout:
    """The layout of ``k`` rows (columns) selected from ``s``: the other dimension's
    distribution kept, the selected one in ``s``'s block from process 0."""
    m, n = s.layout.shape
    shape = (k, n) if axis == 0 else (m, k)
    src = (0, s.layout.src[1]) if axis == 0 else (s.layout.src[0], 0)
    return BlockCyclicLayout(shape, s.layout.block, s.layout.grid_shape, src)


def _gather(s: BlockCyclicArray, axis: int, pos: np.ndarray) -> BlockCyclicArray:
    """``s[pos]`` (rows) or ``s[:, pos]`` of the stored ``s``. Collective."""
    lay = _result_layout(s, axis, pos.size)
    out = new_array(lay, s.grid, s.dtype)
    moves = _axis_moves(s.layout, lay, s.grid, axis, pos, np.arange(pos.size))
    _run(s.backend, "select", moves, s.dtype, s._data, out._data, axis, s.grid)
    return out


# -- the moves ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Move:
    """Rows (``axis=0``; columns for 1, elements for -1) ``src`` of the sender's local matrix
    to rows ``dst`` of the receiver's, ``width`` elements each."""

    sender: int
    receiver: int
    src: np.ndarray
    dst: np.ndarray
    width: int


def _owner(g: np.ndarray, lay: BlockCyclicLayout, axis: int) -> np.ndarray:
    b, p, s = lay.block[axis], lay.grid_shape[axis], lay.src[axis]
    return (g // b + s) % p


def _local(g: np.ndarray, lay: BlockCyclicLayout, axis: int) -> np.ndarray:
    b, p = lay.block[axis], lay.grid_shape[axis]
    return (g // b // p) * b + g % b


def _axis_moves(
    src: BlockCyclicLayout,
    dst: BlockCyclicLayout,
    grid: Any,
    axis: int,
    from_pos: np.ndarray,
    to_pos: np.ndarray,
) -> list[_Move]:
    """Line ``from_pos[t]`` of ``src`` to line ``to_pos[t]`` of ``dst`` along ``axis`` (rows
    or columns), the other dimension distributed alike in both: within each process column
    (row), one move per pair of process rows (columns)."""
    other = 1 - axis
    s_own, d_own = _owner(from_pos, src, axis), _owner(to_pos, dst, axis)
    s_loc, d_loc = _local(from_pos, src, axis), _local(to_pos, dst, axis)
    moves = []
    nproc = src.grid_shape[axis]
    for c in range(src.grid_shape[other]):
        width = numroc(src.shape[other], src.block[other], c, src.grid_shape[other], src.src[other])
        for ps in range(nproc):
            for pd in range(nproc):
                sel = np.flatnonzero((s_own == ps) & (d_own == pd))
                if sel.size and width:
                    rs, rd = (ps, c) if axis == 0 else (c, ps), (pd, c) if axis == 0 else (c, pd)
                    moves.append(
                        _Move(grid.rank_of(*rs), grid.rank_of(*rd), s_loc[sel], d_loc[sel], width)
                    )
    return moves


def _plan(name: str, moves: list[_Move], me: int, nranks: int, xp: Any) -> Plan:
    """The one-step plan of ``moves`` for rank ``me``: offsets packed per receiver, slot and
    staging sizes the maxima over all ranks (the same on every rank)."""
    fill = [0] * nranks
    stage = [0] * nranks
    msgs = []
    for mv in moves:
        size = int(mv.src.size) * mv.width
        off = 0
        if mv.receiver != mv.sender:
            off = fill[mv.receiver]
            fill[mv.receiver] += size
            stage[mv.sender] += size
        if mv.sender == me or mv.receiver == me:
            msgs.append(
                Message(
                    mv.sender,
                    (mv.receiver,),
                    off,
                    size,
                    positions_index(mv.src, xp) if mv.sender == me else None,
                    positions_index(mv.dst, xp) if mv.receiver == me else None,
                )
            )
    return Plan(name, me, nranks, (tuple(msgs),), max(fill), max(stage))


class _Kernels:
    """Pack lines (rows, columns or elements) of ``src``; unpack them into ``dst``."""

    def __init__(self, src: Any, dst: Any, axis: int) -> None:
        self.src, self.dst, self.axis = src, dst, axis

    def pack(self, msg: Message, out: Any) -> None:
        _take(out, self.src, msg.pack, self.axis)

    def unpack(self, msg: Message, data: Any) -> None:
        _put(self.dst, msg.unpack, data, self.axis)

    def local(self, msg: Message) -> None:
        _copy(self.dst, msg.unpack, self.src, msg.pack, self.axis)


def _take(out: Any, src: Any, idx: Any, axis: int) -> None:
    if axis == 0:
        out.reshape(-1, src.shape[1])[...] = src[idx]
    elif axis == 1:
        out.reshape(src.shape[0], -1)[...] = src[:, idx]
    else:
        out[...] = src.reshape(-1)[idx]


def _put(dst: Any, idx: Any, data: Any, axis: int) -> None:
    if axis == 0:
        dst[idx] = data.reshape(-1, dst.shape[1])
    elif axis == 1:
        dst[:, idx] = data.reshape(dst.shape[0], -1)
    else:
        dst.reshape(-1)[idx] = data


def _copy(dst: Any, didx: Any, src: Any, sidx: Any, axis: int) -> None:
    if axis == 0:
        dst[didx] = src[sidx]
    elif axis == 1:
        dst[:, didx] = src[:, sidx]
    else:
        dst.reshape(-1)[didx] = src.reshape(-1)[sidx]


@warmup_kernels(any_dtype=True)
def _sample(backend: Backend, xp: Any, dtype: np.dtype) -> None:
    """The packs, unpacks and local copies of the selection plans: rows, columns and elements,
    by index arrays and by slices."""
    src = sample_matrix(xp, dtype)
    dst = xp.zeros_like(src)
    for idx in (xp.asarray(np.array([3, 0, 3])), slice(1, 3)):
        n = 3 if not isinstance(idx, slice) else 2
        for axis in (0, 1, -1):
            size = n * (src.shape[0] if axis != -1 else 1)
            out = xp.zeros(size, dtype)
            _take(out, src, idx, axis)
            _put(dst, idx, out, axis)
            _copy(dst, idx, src, idx, axis)


def _run(
    be: Backend, name: str, moves: list[_Move], dtype: Any, src: Any, dst: Any, axis: int, g: Any
) -> None:
    # the element kernels work on flat views of contiguous local matrices
    if axis == -1:
        src = be.xp.ascontiguousarray(src)
    run_plan(be, _plan(name, moves, g.rank, g.size, be.xp), dtype, _Kernels(src, dst, axis), 1)


# -- boolean matrices: elements in row-major order --------------------------------------------
def _mask_local(a: BlockCyclicArray, mask: Any) -> tuple[BlockCyclicArray, Any]:
    """``a`` stored and this rank's part of ``mask`` (aligned with it), a bool array on the
    backend's device."""
    s = a.resolve()
    g = s.grid
    if isinstance(mask, BlockCyclicArray):
        m = aligned(mask.resolve(), s, "A[mask]")
        return s, m._data.astype(bool, copy=False)
    check_replicated([replicated(mask)], g, "A[mask]")
    rows, cols = s.layout.local_rows(g.myrow), s.layout.local_cols(g.mycol)
    return s, s.backend.asarray(local_part(mask, rows, cols, 2)).astype(bool, copy=False)


def _selected(s: BlockCyclicArray, local_mask: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(order, mine)``: the global row-major positions of every selected element, sorted
    (one allgather, ``O(k)``), and those of this rank's, in its local row-major order (only
    the selected elements' local indices leave the device)."""
    g, lay = s.grid, s.layout
    rows, cols = lay.local_rows(g.myrow), lay.local_cols(g.mycol)
    il, jl = (s.backend.asnumpy(i) for i in s.backend.xp.nonzero(local_mask))
    mine = (rows[il] * lay.shape[1] + cols[jl]).astype(np.int64)
    every = g.backend.allgather(mine)
    return np.sort(np.concatenate(every)), mine


def _element_moves(
    lay: BlockCyclicLayout, vlay: BlockCyclicLayout, g: Any, order: np.ndarray
) -> list[_Move]:
    """Element ``order[t]`` (a row-major position in ``lay``) to element ``t`` of the vector
    ``vlay``: one move per pair of ranks, computed alike on every rank from ``order``."""
    n = lay.shape[1]
    i, j = order // max(n, 1), order % max(n, 1)
    pr, pc = _owner(i, lay, 0), _owner(j, lay, 1)
    widths = np.array(
        [
            numroc(n, lay.block[1], c, lay.grid_shape[1], lay.src[1])
            for c in range(lay.grid_shape[1])
        ]
    )
    src_flat = _local(i, lay, 0) * widths[pc] + _local(j, lay, 1)
    t = np.arange(order.size)
    rank = np.array([[g.rank_of(r, c) for c in range(g.npcol)] for r in range(g.nprow)])
    senders = rank[pr, pc].astype(np.int64)
    receivers = rank[_owner(t, vlay, 0), 0].astype(np.int64)
    dst = _local(t, vlay, 0)
    pair = senders * g.size + receivers
    moves = []
    for key in np.unique(pair):
        sel = np.flatnonzero(pair == key)
        moves.append(_Move(int(key // g.size), int(key % g.size), src_flat[sel], dst[sel], 1))
    return moves


def _select_elements(a: BlockCyclicArray, mask: Any) -> BlockCyclicArray:
    s, local_mask = _mask_local(a, mask)
    order, _ = _selected(s, local_mask)
    g = s.grid
    vlay = vector_layout(order.size, s.layout.block[0], g)
    out = new_array(vlay, g, s.dtype)
    moves = _element_moves(s.layout, vlay, g, order)
    _run(s.backend, "select elements", moves, s.dtype, s._data, out._data, -1, g)
    return as_vector(out)


# -- assignment -----------------------------------------------------------------------------------
def select_assign(a: BlockCyclicArray, key: Any, value: Any) -> None:
    """``a[key] = value`` for a key with an index array or a boolean mask. A scalar or a
    replicated array is written locally; a distributed value is moved by the reverse plan."""
    k = _parse(a, key)
    if k.mask is not None:
        _assign_elements(a, k.mask, value)
        return
    assert k.basic is not None and k.positions is not None
    view = a[k.basic] if any(not _full(p) for p in k.basic) else a
    if view.ndim == 1:
        view, axis = view._column, 0
    else:
        axis = k.axis
    _assign_axis(view, axis, k.positions, value)


def _assign_axis(x: BlockCyclicArray, axis: int, pos: np.ndarray, value: Any) -> None:
    """``x[pos] = value`` along ``axis`` of the 2-D ``x`` (a view of the stored target)."""
    if x._transposed:
        if isinstance(value, BlockCyclicArray) and value.ndim == 2:
            value = value.T
        elif not isinstance(value, BlockCyclicArray) and np.ndim(value) == 2:
            value = np.asarray(value).T
        _assign_axis(x.T, 1 - axis, pos, value)
        return
    if x.is_window:
        raise IndexError(
            "assignment through an index array into a window view (a submatrix starting "
            "inside a block) is not supported; assign into the parent with shifted indices"
        )
    shape = list(x.shape)
    shape[axis] = pos.size
    # NumPy's last-wins for repeated positions: keep each position's last occurrence
    _, last = np.unique(pos[::-1], return_index=True)
    keep = np.sort(pos.size - 1 - last)
    if isinstance(value, BlockCyclicArray):
        _assign_distributed(x, axis, pos, keep, value, tuple(shape))
        return
    v = _broadcast_value(value, x.dtype, tuple(shape), x.grid, "A[index] = value")
    g, lay = x.grid, x.layout
    mine = keep[_owner(pos[keep], lay, axis) == (g.myrow, g.mycol)[axis]]
    other = lay.local_cols(g.mycol) if axis == 0 else lay.local_rows(g.myrow)
    if not mine.size or not other.size:
        return
    idx = x.backend.xp.asarray(_local(pos[mine], lay, axis))
    if v.ndim == 0:
        piece: Any = v[()]
    else:  # v is broadcast to the selection's shape (a view): take this rank's elements
        piece = x.backend.asarray(v[np.ix_(mine, other)] if axis == 0 else v[np.ix_(other, mine)])
    if axis == 0:
        x._data[idx] = piece
    else:
        x._data[:, idx] = piece


def _broadcast_value(
    value: Any, dtype: np.dtype, shape: tuple[int, ...], grid: Any, what: str
) -> Any:
    """A scalar (0-d) or a replicated array broadcast to ``shape`` (2-D; NumPy's rules for
    assignment: leading unit axes dropped first), checked across ranks."""
    if is_replicated(value) or isinstance(value, list):
        arr = np.asarray(value) if not hasattr(value, "__cuda_array_interface__") else value.get()
        if is_replicated(value):
            check_replicated([replicated(value)], grid, what)
    else:
        arr = np.asarray(value)
    if arr.dtype == object or arr.dtype.kind not in "biufc":
        raise TypeError(f"{what}: cannot assign a value of dtype {arr.dtype} to a {dtype} array")
    if arr.dtype.kind == "c" and dtype.kind != "c":
        raise TypeError(f"{what}: cannot assign complex values to a {dtype} array")
    if arr.ndim == 0:
        return arr.astype(dtype)
    while arr.ndim > 2 and arr.shape[0] == 1:
        arr = arr[0]
    try:
        out = np.broadcast_to(arr, shape)
    except ValueError:
        raise ValueError(
            f"{what}: shape mismatch: value array of shape {arr.shape} could not be broadcast to "
            f"indexing result of shape {shape}"
        ) from None
    return out.astype(dtype, copy=False)


def _assign_distributed(
    x: BlockCyclicArray,
    axis: int,
    pos: np.ndarray,
    keep: np.ndarray,
    value: BlockCyclicArray,
    shape: tuple[int, ...],
) -> None:
    """``x[pos] = value`` for a distributed ``value`` of the selection's shape: ``value`` in
    the selection's layout, then the reverse of :func:`_gather`'s plan."""
    if value.ndim == 1 and len(shape) == 2 and 1 in shape:
        value = value._column if shape[1] == 1 else value._column.T
    if value.shape != shape:
        raise ValueError(
            f"A[index] = value: a BlockCyclicArray of shape {value.shape} does not fit the "
            f"selection's shape {shape}"
        )
    if not np.can_cast(value.dtype, x.dtype, "same_kind"):
        raise TypeError(f"A[index] = value: cannot cast {value.dtype} to {x.dtype}")
    lay = _result_layout(x, axis, pos.size)
    like = new_array(lay, x.grid, x.dtype)
    v = aligned(value.resolve(), like, "A[index] = value", quiet=min(shape) <= 1)
    if v.dtype != x.dtype:
        v = BlockCyclicArray(v._data.astype(x.dtype), v.layout, v.grid)
    moves = _axis_moves(lay, x.layout, x.grid, axis, keep, pos[keep])
    _run(x.backend, "select assign", moves, x.dtype, v._data, x._data, axis, x.grid)


def _assign_elements(a: BlockCyclicArray, mask: Any, value: Any) -> None:
    """``A[mask] = value`` for a boolean matrix: local writes (a scalar, or the selected
    elements' values in row-major order: their positions take one allgather)."""
    if a.is_view:
        raise IndexError(
            "A[mask] = value into a view (A.T, A.conj(), a window) is not supported; assign "
            "into the stored matrix"
        )
    s, local_mask = _mask_local(a, mask)
    what = "A[mask] = value"
    if isinstance(value, BlockCyclicArray) or np.ndim(value) > 0:
        order, mine = _selected(s, local_mask)
        k = order.size
        if isinstance(value, BlockCyclicArray):
            if value.shape != (k,):
                raise ValueError(
                    f"{what}: cannot assign {value.shape} input values to the {k} output values "
                    "where the mask is true"
                )
            if not np.can_cast(value.dtype, s.dtype, "same_kind"):
                raise TypeError(f"{what}: cannot cast {value.dtype} to {s.dtype}")
            host = _gathered(value)  # O(k) to every rank
        else:
            host = _broadcast_value(value, s.dtype, (1, k), s.grid, what)[0]
        if mine.size:
            vals = s.backend.asarray(np.ascontiguousarray(host[np.searchsorted(order, mine)]))
            s._data[local_mask] = vals.astype(s.dtype)
        return
    v = _broadcast_value(value, s.dtype, (1, 1), s.grid, what)
    if local_mask.size:
        s._data[local_mask] = v[()]


# -- np.take ---------------------------------------------------------------------------------------
@implements(np.take)
def _take_fn(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Any:
    """``np.take``: the positions ``indices`` along ``axis`` (a vector: ``axis`` None or 0; a
    matrix: 0 or 1), a new array; ``mode='raise'`` only. A scalar index gives what ``a[i]``
    gives."""
    if not isinstance(a, BlockCyclicArray):
        raise TypeError(f"np.take expects a BlockCyclicArray, got {type(a).__name__}")
    if out is not None or mode != "raise":
        raise TypeError("np.take on BlockCyclicArrays supports neither out= nor mode != 'raise'")
    if axis is None:
        if a.ndim != 1:
            raise ValueError(
                "np.take(A, indices) with axis=None flattens the matrix, which is not supported; "
                "pass axis=0 or axis=1"
            )
        axis = 0
    if not isinstance(axis, int | np.integer) or not -a.ndim <= axis < a.ndim:
        raise np.exceptions.AxisError(f"np.take: axis {axis} is out of bounds for {a.ndim}-D")
    key = [slice(None)] * a.ndim
    key[int(axis) % a.ndim] = indices
    return a[tuple(key)]
