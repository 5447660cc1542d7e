"""Cumulative sums and products along an axis: ``np.cumsum`` and ``np.cumprod``.

A scan along the rows (axis 0) of a block-cyclic matrix, in three local steps and one
collective:

1. each process scans each of its blocks of rows on its own (``xp.cumsum``/``cumprod`` of the
   block, down the columns it holds): the block's last row is the block's total;
2. the totals of every block (one row per block, the process's columns) are all-gathered
   (``O(m / mb * n)`` elements in all, small beside the matrix) and every process combines,
   for each of its blocks, the totals of the blocks before it in its process column: the
   block's offset, the same on every process of the column;
3. each block's scan is shifted by its offset (added for a sum, multiplied for a product).

Axis 1 is the same along the columns; a vector's scan is its column face's along axis 0. The
summation order differs from NumPy's sequential one only by grouping (within the usual error
bound); integer scans are exact.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._alloc import new_array
from ..._dispatch import implements
from ...array import BlockCyclicArray, as_vector, check_array_dtype
from .reductions import _no_extras, _norm_axis, _require

__all__: list[str] = []


def _scan(name: str, a: Any, axis: Any, dtype: Any, out: Any) -> BlockCyclicArray:
    what = f"np.{name}"
    _no_extras(what, out)
    x = _require(a, what)
    if x.ndim == 1:
        if axis not in (None, 0, -1):
            raise np.exceptions.AxisError(f"{what}: axis {axis} is out of bounds for a vector")
        return as_vector(_scan_matrix(name, x._column, 0, dtype))
    if axis is None:
        raise ValueError(
            f"{what}(A) with axis=None flattens the matrix, which is not supported; pass "
            "axis=0 (down the columns) or axis=1 (along the rows)"
        )
    ax = _norm_axis(axis, what)
    assert ax is not None
    return _scan_matrix(name, x, ax, dtype)


def _scan_matrix(name: str, x: BlockCyclicArray, axis: int, dtype: Any) -> BlockCyclicArray:
    """The scan of the 2-D ``x`` (any view) along ``axis``: a new array."""
    if x._transposed:
        return _scan_matrix(name, x.T, 1 - axis, dtype).T
    s = x.resolve()
    res_dt = getattr(np, name)(np.zeros((1, 1), s.dtype), dtype=dtype).dtype
    check_array_dtype(res_dt)
    g, lay, be = s.grid, s.layout, s.backend
    xp = be.xp
    out = new_array(lay, g, res_dt)
    data = s._data
    me = (g.myrow, g.mycol)
    blocks = list(lay.local_block_rows(g.myrow) if axis == 0 else lay.local_block_cols(g.mycol))
    b = lay.block[axis]
    scan = getattr(xp, name)

    def seg(i: int) -> slice:
        return slice(i * b, (i + 1) * b)  # local block i (the last one may be ragged)

    totals = []
    for i in range(len(blocks)):
        part = data[seg(i)] if axis == 0 else data[:, seg(i)]
        done = scan(part, axis=axis, dtype=res_dt)
        if axis == 0:
            out._data[seg(i)] = done
            totals.append(done[-1:] if done.shape[0] else done)
        else:
            out._data[:, seg(i)] = done
            totals.append(done[:, -1:] if done.shape[1] else done)
    mine = (blocks, [be.asnumpy(t) for t in totals])
    every = be.allgather(mine)
    # the blocks of my process column (row): every process row (column) of it
    ranks = (
        [g.rank_of(r, me[1]) for r in range(g.nprow)]
        if axis == 0
        else [g.rank_of(me[0], c) for c in range(g.npcol)]
    )
    total_of: dict[int, np.ndarray] = {}
    for r in ranks:
        for bi, t in zip(*every[r], strict=True):
            total_of[bi] = t
    combine = np.add if name == "cumsum" else np.multiply
    running: Any = None
    offsets: dict[int, Any] = {}
    for bi in sorted(total_of):
        offsets[bi] = running
        t = total_of[bi]
        running = t if running is None else combine(running, t)
    for i, bi in enumerate(blocks):
        off = offsets[bi]
        if off is None:
            continue
        target = out._data[seg(i)] if axis == 0 else out._data[:, seg(i)]
        if name == "cumsum":
            target += xp.asarray(off)
        else:
            target *= xp.asarray(off)
    be.synchronize()
    return out


@implements(np.cumsum)
def _cumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> BlockCyclicArray:
    """``np.cumsum`` along ``axis`` (0 or 1 for a matrix; a vector's only axis): a new array
    of ``a``'s layout; NumPy's result dtype (integers and bool sum in int64)."""
    return _scan("cumsum", a, axis, dtype, out)


@implements(np.cumprod)
def _cumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> BlockCyclicArray:
    """``np.cumprod`` along ``axis`` (see :func:`_cumsum`)."""
    return _scan("cumprod", a, axis, dtype, out)
