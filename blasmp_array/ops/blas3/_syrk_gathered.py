"""SYRK/HERK on a one-dimensional grid whose processes hold ``op(A)``'s rows: gather ``op(A)``,
each process computes its own blocks of the triangle, no reduction.

``C := alpha op(A) op(A)^T + beta C`` (``op(A)^H`` for HERK) where ``C``'s block columns are
spread over a ``1 x P`` grid and ``op(A) = A^T`` (``A^H``) has its columns -- the rows of ``op(A)``,
the ``n`` dimension -- spread the same way; or, transposed, ``C``'s block rows over ``P x 1``
and ``op(A) = A``'s rows the same way. ``A.T @ A`` of a matrix on the default ``1 x 2`` grid
is the first case. The K split (``_syrk_ksplit``) would move ``A`` to the other grid (``n k``
elements), compute a whole ``n x n`` partial triangle on every process and exchange and add
its pieces (``n^2 / 2`` elements). Here every process gathers the whole ``op(A)`` (the same
``n k (P - 1) / P`` elements received as the move) and computes the blocks of the triangle it
stores: per block of ``op(A)``'s rows, one GEMM against the process's own rows of the
triangle's side of it, and one SYRK for the diagonal block. Nothing is exchanged after the
products, and no partial result is packed or added. Which route :mod:`ops.blas3.syrk` takes:
:func:`applies`. On the 2-core VM at n = 3072 the GEMMs of 256-row blocks took 0.227 s where
one SYRK of the half K took 0.199 s, and the move, packing, exchange and adds they replace
took 60-75 ms (docs/blas3.md, "SYRK on the CPU").

Communication protocol: no one-sided traffic and no signals; one host ``Allgatherv``
(``Backend.allgather_array``) of every process's local ``op(A)`` after the compute stream is
synchronised (it may hold the scaling of ``C`` by ``beta``). The products are then enqueued on
the compute stream and read the gathered buffer, which the caller's synchronisation outlives
(it is dropped at return, after :func:`update` waits for the stream). Process ``p`` along the
grid is rank ``p``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...array import BlockCyclicArray
from ._syrk_ksplit import _runs

__all__ = ["applies", "update"]


def applies(XA: BlockCyclicArray, op: str, C: BlockCyclicArray) -> bool:
    """Whether the K split of ``C := alpha op(XA) op(XA)^T + beta C`` (``_syrk_ksplit.applies``
    holds) is better served by this route: ``op(XA)``'s rows lie along ``C``'s one-dimensional
    grid exactly as ``C``'s block columns (``1 x P``, ``op`` 'T' or 'C') or block rows
    (``P x 1``, ``op`` 'N') do."""
    grid = C.grid
    if not XA.grid.same_as(grid) or XA._window is not None:
        return False
    la, lc = XA.layout, C.layout
    if grid.shape[0] == 1 and op in ("T", "C"):
        dim = 1
    elif grid.shape[1] == 1 and op == "N":
        dim = 0
    else:
        return False
    return (
        la.shape[dim] == lc.shape[dim]
        and la.block[dim] == lc.block[dim]
        and la.src[dim] == lc.src[dim]
    )


def update(XA: BlockCyclicArray, op: str, alpha: Any, C: BlockCyclicArray, uplo: str) -> None:
    """Add ``alpha op(XA) op(XA)^T`` (HERK for ``op='C'``) to the ``uplo`` triangle of ``C``
    (collective; :func:`applies` holds). ``C``'s triangle must already hold ``beta C``."""
    grid = C.grid
    b = grid.backend
    by_cols = grid.shape[0] == 1
    lay = XA.layout
    me, size = b.rank, b.size
    kdim = XA.shape[0] if by_cols else XA.shape[1]
    local = [lay.local_cols(q) if by_cols else lay.local_rows(q) for q in range(size)]
    counts = [kdim * len(idx) for idx in local]
    b.synchronize()  # XA's data, and the scaling of C's triangle enqueued before
    flat = b.allgather_array(np.ascontiguousarray(XA._data).reshape(-1), counts)
    starts = np.concatenate(([0], np.cumsum(counts)))
    pieces = [
        flat[starts[q] : starts[q + 1]].reshape((kdim, -1) if by_cols else (-1, kdim))
        for q in range(size)
    ]
    mine = pieces[me]
    runs = _runs(local[me])
    c = C._data
    one = c.dtype.type(1)
    # the local extent of op(A)'s rows on the triangle's side of a source block: after it
    # (global index past its end) or before it
    after = by_cols == (uplo == "U")
    for q in range(size):
        for gs, ls, ws in _runs(local[q]):
            if after:
                lo = next((l0 for g0, l0, _ in runs if g0 >= gs + ws), len(local[me]))
                hi = len(local[me])
            else:
                lo = 0
                hi = next((l0 + w for g0, l0, w in reversed(runs) if g0 + w <= gs), 0)
            if by_cols:
                src = pieces[q][:, ls : ls + ws]
                if hi > lo:
                    out = c[gs : gs + ws, lo:hi]
                    b.gemm(alpha, src, mine[:, lo:hi], one, out, op, "N", b.compute)
                if q == me:
                    b.syrk(alpha, src, one, c[gs : gs + ws, ls : ls + ws], uplo, op, b.compute)
            else:
                src = pieces[q][ls : ls + ws]
                if hi > lo:
                    out = c[lo:hi, gs : gs + ws]
                    b.gemm(alpha, mine[lo:hi], src, one, out, "N", "T", b.compute)
                if q == me:
                    b.syrk(alpha, src, one, c[ls : ls + ws, gs : gs + ws], uplo, "N", b.compute)
    b.synchronize()  # the products read the gathered buffer
