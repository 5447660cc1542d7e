"""Vectors made and taken apart: the layout of a new vector, a vector from a replicated host
vector, and the column faces of vector operands.

A vector of length ``n`` is stored as an ``n x 1`` column, its rows in blocks of ``b`` over the
process rows of process column 0 (ScaLAPACK's layout of a vector; see
:mod:`blasmp_array.array`). Results that are vectors of a matrix's rows (``A @ x``,
``A.sum(axis=1)``) take the matrix's row block, results along its columns (``x @ A``,
``A.sum(axis=0)``) its column block.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._alloc import new_array
from ...array import BlockCyclicArray, as_vector
from ...grid import ProcessGrid
from ...layout import BlockCyclicLayout

__all__ = [
    "vector_layout",
    "from_host",
    "new_vector",
    "column",
    "put_local",
    "put_pieces",
    "take_local",
]


def vector_layout(n: int, b: int, grid: ProcessGrid) -> BlockCyclicLayout:
    """The layout of a new vector of length ``n``: an ``n x 1`` column in blocks of ``b``."""
    return BlockCyclicLayout((n, 1), (max(1, b), 1), grid.shape)


def new_vector(n: int, b: int, grid: ProcessGrid, dtype: Any, fill: Any = None) -> BlockCyclicArray:
    """A new vector (collective: symmetric memory on the GPU), uninitialised unless ``fill``."""
    return as_vector(new_array(vector_layout(n, b, grid), grid, dtype, fill=fill))


def from_host(v: Any, b: int, grid: ProcessGrid, dtype: Any = None) -> BlockCyclicArray:
    """The vector of the 1-D host array ``v``, the same on every rank (a reduction's result):
    each rank uploads only the elements it stores, no communication."""
    v = np.asarray(v)
    out = new_vector(v.shape[0], b, grid, v.dtype if dtype is None else dtype)
    data = out._data
    if data.size:
        lay = out.layout
        mine = (
            v if grid.size == 1 else take_local(v, lay.block[0], grid.myrow, grid.nprow, lay.src[0])
        )
        data[:, 0] = grid.backend.asarray(mine.astype(data.dtype, copy=False))
    return out


def column(x: BlockCyclicArray) -> BlockCyclicArray:
    """The 2-D face an operator works on: a vector's ``n x 1`` column face, a matrix itself."""
    return x._column


def _local_views(v: Any, nb: int, iproc: int, nprocs: int, isrc: int = 0) -> tuple[Any, Any]:
    """The elements of the 1-D array ``v`` that process ``iproc`` of ``nprocs`` stores in
    blocks of ``nb`` (first block on ``isrc``), as two views of ``v`` in local order: the
    complete rounds of blocks as a ``K x nb`` matrix and the ragged last round's piece.
    (``v[layout.local_indices(...)]`` without the index array: strided copies run 4x faster
    than NumPy's fancy indexing at ``n = 16384``.)"""
    d = (iproc - isrc) % nprocs
    rnd = nb * nprocs
    k = v.shape[0] // rnd
    head = v[: k * rnd].reshape(k, nprocs, nb)[:, d, :]
    tail = v[k * rnd :][d * nb : (d + 1) * nb]
    return head, tail


def take_local(v: Any, nb: int, iproc: int, nprocs: int, isrc: int = 0) -> Any:
    """A copy of the elements of the 1-D array ``v`` that process ``iproc`` stores, in local
    order: ``v[local_indices(len(v), nb, iproc, nprocs, isrc)]``."""
    head, tail = _local_views(v, nb, iproc, nprocs, isrc)
    return np.concatenate((head.reshape(-1), tail))


def put_local(
    v: Any, part: Any, nb: int, iproc: int, nprocs: int, isrc: int = 0, add: bool = False
) -> None:
    """Store (``add``: add) ``part``, process ``iproc``'s elements in local order, into their
    places of the 1-D array ``v``: ``v[local_indices(...)] = part`` (or ``+=``)."""
    head, tail = _local_views(v, nb, iproc, nprocs, isrc)
    h = head.size
    body = part[:h].reshape(head.shape)
    if add:
        head += body
        tail += part[h:]
    else:
        head[...] = body
        tail[...] = part[h:]


def put_pieces(
    v: Any,
    pieces: Any,
    sizes: Any,
    procs: Any,
    nb: int,
    nprocs: int,
    isrc: int = 0,
    add: bool = False,
) -> None:
    """:func:`put_local` of every piece of a gathered concatenation (``Backend.allgather_array``):
    ``sizes[r]`` elements in turn, those of process ``procs[r]`` (its coordinate along ``v``'s
    axis); empty pieces are skipped."""
    start = 0
    for size, iproc in zip(sizes, procs, strict=True):
        if size:
            put_local(v, pieces[start : start + size], nb, iproc, nprocs, isrc, add)
            start += size
