"""``A @ x`` and ``x @ A`` (PBLAS ``pxgemv``): a matrix times a vector.

A matrix-vector product reads the matrix once and does two flops per element: it is bound by
memory, and on several processes by the latency of its two small exchanges, never by the
flops. GEMM's panel pipeline (one broadcast per block of the K dimension) costs more than the
product itself there, so vectors take their own path, by one of two routes (:data:`ROUTE`).

The host route (the CPU backend's):

1. ``x`` replicated: every process of grid column 0 (where a vector lives) contributes its
   elements, one typed host ``Allgatherv`` of the ``O(n)`` pieces (no pickles), every rank
   assembles the whole ``x`` and uploads the entries its local columns (rows, for ``x @ A``)
   meet;
2. one local product (a BLAS/cuBLAS ``gemv``: :func:`~ops.blas3._gemv.gemv`), made as the
   element-wise operators make theirs: on the host thread (CPU) or the current CuPy stream
   (GPU), which the backend's streams are ordered after (docs/gpu-node.md, "Streams"); a
   handoff to the compute stream and back costs more than the product at small ``n``;
3. the partial results, ``O(m)`` per grid column, in one typed host ``Allgatherv``; every
   rank sums them in grid order (so the sum is the same whatever the timing) and the result's
   owners (grid column 0) upload their elements (:func:`ops.engine._vectors.from_host`).

Two host collectives in all, no signal: nothing to wait for but the collectives themselves, so
nothing can hang and no buffer is reused. On one process the product is the one local call.

The exchange route (a device's): the same three steps with the pieces put one-sided from
device memory to the processes that need them, the product on the compute stream between the
two steps of one exchange (:mod:`ops.blas3._matvec_exchange`, whose docstring has the
protocol): no copy through the host.

``op(A)`` is ``A``, ``A^T`` (``x @ A``, or ``A.T @ x``), ``A^H`` or ``conj(A)``; the
conjugations act on the vectors (``A^H x = conj(A^T conj(x))``): no conjugated copy of the
matrix is made.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ...array import BLAS_DTYPES, BlockCyclicArray
from ...layout import BlockCyclicLayout
from ..engine import _checks as ck
from ..engine._checks import OP_OF_FLAGS
from ..engine._vectors import from_host, put_pieces, take_local
from ..engine.panels import compose_op
from ._gemv import gemv
from ._matvec_exchange import matvec_exchange

__all__ = ["ROUTE", "matvec", "matvec_one_process"]

#: The route of the product on several processes: ``"host"``, ``"exchange"`` or ``"auto"``
#: (the exchange on a device backend, the host on the CPU backend: there the host collectives
#: move the pieces without the streams' handoffs). The same value on every rank (tests set it
#: to run both routes on the CPU).
ROUTE = "auto"


def matvec(a: BlockCyclicArray, x: BlockCyclicArray, trans: str) -> BlockCyclicArray | None:
    """``op(a) @ x`` as a vector (``op`` from ``trans`` 'N' or 'T' composed with ``a``'s lazy
    transpose/conjugation), or None where GEMM's general path is needed: windows, mixed or
    integer dtypes, ``x`` on another grid. Collective; the decision reads only the arguments'
    global attributes, so it is the same on every rank."""
    g = a.grid
    if g.size == 1:
        return matvec_one_process(a, x, trans)
    if (
        a._window is not None
        or a._dtype != x._dtype
        or a._dtype not in BLAS_DTYPES
        or not (x.grid is g or x.grid.same_as(g))
    ):
        return None
    return _distributed(a, x, _OP[a._transposed, a._conjugated, trans])


def matvec_one_process(
    a: BlockCyclicArray, x: BlockCyclicArray, trans: str
) -> BlockCyclicArray | None:
    """:func:`matvec` on one process (``trans``: ``a @ x`` 'N', ``x @ a`` 'T'), or None where
    GEMM's general path is needed (also for a vector ``x`` that is a view): its checks and
    :func:`_local`'s product and nothing else, since at ``n = 256`` every Python call of the
    general route costs a visible share of the ``gemv`` (docs/numpy.md, "Vectors"). ``matmul``
    calls it before its own checks; it returns None where the shapes do not conform."""
    if not ck.one_process_pair(a, x) or x._transposed or x._conjugated:
        return None
    op = _OP[a._transposed, a._conjugated, trans]  # 'N', 'T', 'C' or 'R' over a's storage
    if a.layout.shape[1 if op in ("N", "R") else 0] != x.layout.shape[0]:
        return None  # matmul's shape error
    return _local(a, x, op)


#: ``compose_op(op_of(a), trans)`` by ``(a._transposed, a._conjugated, trans)``
_OP = {
    (t, c, trans): compose_op(OP_OF_FLAGS[t, c], trans)
    for t in (False, True)
    for c in (False, True)
    for trans in ("N", "T")
}


def _local(a: BlockCyclicArray, x: BlockCyclicArray, op: str) -> BlockCyclicArray:
    """One process: one local product, as CuPy's and NumPy's ``a @ x`` (step 2 of the module
    docstring), into a fresh result (NumPy's own, on the host: ``np.dot`` without ``out=``
    reaches ``gemv`` sooner; the backend's symmetric heap on a device)."""
    lay, g = a.layout, a.grid
    axis = 0 if op in ("N", "R") else 1  # the axis of a's storage that op(a)'s rows run along
    m, k = lay.shape[axis], lay.shape[1 - axis]
    be = g.backend
    if not m or not k or be.xp is not np:
        data = be.empty((m, 1), a._dtype)
        if m and not k:
            data[...] = 0
        elif m:
            gemv(be.xp, a._data, op, x._data, data)
    elif op in ("N", "T"):  # gemv's dot inlined: its call costs 0.3 us of the 8 at n = 256
        data = np.dot(a._data if op == "N" else a._data.T, x._data)
    else:
        data = gemv(np, a._data, op, x._data)
    return BlockCyclicArray._of(data, _column_layout(m, lay.block[axis]), g, vector=True)


def _distributed(a: BlockCyclicArray, x: BlockCyclicArray, op: str) -> BlockCyclicArray:
    """Several processes: the three steps of the module docstring."""
    g, lay, be = a.grid, a.layout, a.grid.backend
    xp = be.xp
    myrow, mycol = g.coords
    rows = op in ("N", "R")
    out_axis = 0 if rows else 1  # the axis of a's storage that the result runs along
    m = lay.shape[out_axis]
    col = x._column.resolve() if x.is_view else x._column
    exchange = ROUTE == "exchange" or (ROUTE == "auto" and xp is not np)
    if exchange and m and lay.shape[1 - out_axis]:
        return matvec_exchange(a, col, op)
    # 1. x replicated on the host (an allgather of the pieces: x.to_numpy() takes the door's
    # staged path, about 60 us more at n = 256 on 2 CPU ranks)
    xl = col.layout
    coords = [g.coords_of(rank) for rank in range(g.size)]
    sizes = [math.prod(xl.local_shape(*rc)) for rc in coords]
    pieces = be.allgather_array(be.asnumpy(col._data.reshape(-1)), sizes)
    xh = np.empty(xl.shape[0], a.dtype)
    put_pieces(xh, pieces, sizes, [r for r, _ in coords], xl.block[0], g.nprow, xl.src[0])
    # 2. the local product over my columns (rows) of a
    k_axis = 1 - out_axis
    kb, kp, ksrc = lay.block[k_axis], lay.grid_shape[k_axis], lay.src[k_axis]
    mine = take_local(xh, kb, mycol if rows else myrow, kp, ksrc)
    nout = a._data.shape[out_axis]
    part = np.zeros(nout, a.dtype)
    if nout and mine.size:
        yd = xp.empty(nout, a.dtype)
        gemv(xp, a._data, op, be.asarray(mine), yd)
        part = be.asnumpy(yd)
    # 3. partials summed in grid order (the same sum on every rank); each rank keeps its part
    yh = np.zeros(m, a.dtype)
    ob, op_, osrc = lay.block[out_axis], lay.grid_shape[out_axis], lay.src[out_axis]
    sizes = [lay.local_shape(*rc)[out_axis] for rc in coords]
    parts = be.allgather_array(part, sizes)
    put_pieces(yh, parts, sizes, [rc[out_axis] for rc in coords], ob, op_, osrc, add=True)
    return from_host(yh, ob, g, a.dtype)


@functools.lru_cache(maxsize=256)
def _column_layout(m: int, rb: int) -> BlockCyclicLayout:
    """The layout of a vector of length ``m`` in blocks of ``rb`` on a 1x1 grid."""
    return BlockCyclicLayout((m, 1), (rb, 1), (1, 1))
