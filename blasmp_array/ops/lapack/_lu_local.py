"""LU of a matrix one process holds whole (a ``1 x 1`` grid), and the local kernels that the
distributed LU (``ops/lapack/lu.py``) shares with it: the U row block's solve split into GEMMs, and
``c -= L U`` on the column-major panel.

:func:`getrf_lookahead`: blocked right-looking LU with a look-ahead of one panel on the
backend's two streams (LAPACK ``xgetrf``'s algorithm, with the panel factorisation moved off
the update's stream as MAGMA's ``xgetrf_gpu`` does). Used where the streams run concurrently
(``backend.concurrent_streams``: one GPU) from ``min(m, n) >=`` :data:`LOOKAHEAD_MIN` on;
elsewhere the library's one ``getrf`` of the whole matrix is as fast (LAPACK blocks and threads
it itself; the CPU backend's two streams of one process run inline).

The steps run on the look-ahead skeleton of :mod:`ops.lapack._lookahead` (shared with the
one-process QR), which owns the streams, the events and the two panel buffers. Step ``k``
(panel ``k`` = columns ``[k0, k1)``, block column ``k + 1`` = ``[k1, k2)``; panel ``k``
already factored on the comm stream into a column-major buffer):

1. the host waits for panel ``k``'s ``getrf`` only (``backend.host_wait``; the compute stream
   keeps running the previous update), reads its pivots and INFO (one copy), composes them into
   a row map (LAPACK's ``xlaswp`` on the row numbers, :func:`_interchanges.row_map`) and
   uploads the rows that move (at most ``2 e``, one copy);
2. compute stream, after that ``getrf`` (an event): the interchanges on block column ``k + 1``,
   ``U[k, k+1]`` (``L_kk^{-1}`` times the block row, :func:`solve_unit_lower`), the update
   ``A[k1:, k1:k2] -= L[k1:, k] U[k, k+1]``, panel ``k + 1`` copied into the other column-major
   buffer, an event;
3. comm stream, after that event: ``getrf`` of panel ``k + 1`` (cuSOLVER), an event;
4. compute stream, beside step 3: the interchanges on the other columns (left of the panel,
   ``xlaswp`` on ``L``, and right of block column ``k + 1``), the factored panel ``k`` written
   into the matrix, ``U`` and the update of the columns right of block column ``k + 1``.

The critical path is then the chain of ``getrf`` (cuSOLVER: about 5 us per column on one H200
at 16384 rows, whatever the panel's width, and about 1.6x that beside the update) with steps
1-2 between two of them (docs/lu.md, "One process on a GPU"). The pivots, INFO and the
uploaded row indices of every step are kept until the final synchronisation (the streams read
them after the host dropped them). No signals and no communication: one process.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._interchanges import row_map
from ...backends._host_copy import assign
from ...backends.base import Backend
from ..engine._warmup import warmup_kernels
from . import _lookahead

__all__ = [
    "factor_local",
    "getrf_lookahead",
    "panel_edges",
    "solve_unit_lower",
    "minus_product",
]

#: Panel width of :func:`getrf_lookahead` (columns per step).
PANEL = 2048

#: Width of its first panel, factored alone before the look-ahead starts (0: ``PANEL``).
FIRST_PANEL = 0

#: The one-process LU uses :func:`getrf_lookahead` from this ``min(m, n)`` on (below it one
#: ``getrf`` of the whole matrix was as fast or faster, see docs/lu.md).
LOOKAHEAD_MIN = 16384

#: The largest triangle :func:`solve_unit_lower` hands to the backend's ``trsm`` in one call.
TRSM_LEAF = 512


def factor_local(be: Backend, a: Any) -> tuple[np.ndarray, int]:
    """LU with partial pivoting of the local ``m x n`` ``a`` in place, as one process factors
    a matrix it holds whole: :func:`getrf_lookahead` where the streams run concurrently (a GPU)
    and ``min(m, n) >=`` :data:`LOOKAHEAD_MIN`, else one ``getrf`` (LAPACK blocks and threads it
    itself). Returns the 0-based interchanges (``int32``, host) and the column of the first
    exactly zero pivot (``-1`` if none). Synchronises."""
    if be.concurrent_streams and min(a.shape) >= LOOKAHEAD_MIN:
        return getrf_lookahead(be, a)
    ipiv = be.xp.zeros(min(a.shape), dtype=np.int32)
    info = be.xp.zeros(1, dtype=np.int32)
    be.begin()
    be.getrf(a, ipiv, info, be.compute)
    be.synchronize()
    inf = int(be.asnumpy(info)[0])
    return be.asnumpy(ipiv).astype(np.int32), (inf - 1 if inf > 0 else -1)


def getrf_lookahead(be: Backend, a: Any, nb: int = 0, first: int = -1) -> tuple[np.ndarray, int]:
    """LU with partial pivoting of the local ``m x n`` ``a`` in place (LAPACK ``xgetrf``:
    ``a = P L U``), in panels of ``nb`` columns (default :data:`PANEL`) after a first one of
    ``first`` (default :data:`FIRST_PANEL`), with look-ahead (see the module docstring).
    Returns the 0-based interchanges (``min(m, n)``, ``int32``, on the host) and LAPACK's INFO
    minus one: the column of the first exactly zero pivot, ``-1`` if none (the factorisation
    is completed past it, as LAPACK's). Synchronises at the end."""
    nb = nb or PANEL
    first = FIRST_PANEL if first < 0 else first
    m, n = a.shape
    mn = min(m, n)
    if mn == 0:
        return np.zeros(mn, dtype=np.int32), -1
    steps = _GetrfSteps(be, a, panel_edges(mn, nb, first))
    _lookahead.run(be, steps.edges, m, a.dtype, steps)
    return steps.piv, steps.zero


class _GetrfSteps(_lookahead.MatrixSteps):
    """The LU's part of :func:`ops.lapack._lookahead.run` (steps 1-4 of the module docstring)."""

    def __init__(self, be: Backend, a: Any, edges: list[int]) -> None:
        super().__init__(be, a, edges)
        self.piv = np.zeros(edges[-1], dtype=np.int32)
        self.zero = -1

    def outputs(self, k: int, panel: Any) -> Any:
        return self.be.xp.zeros(min(panel.shape) + 1, dtype=np.int32)  # pivots, then INFO

    def factor(self, k: int, panel: Any, out: Any, stream: Any) -> None:
        self.be.getrf(panel, out[:-1], out[-1:], stream)

    def take(self, k: int, out: Any, done: Any) -> Any:
        """The host waits for the ``getrf`` only, composes the pivots into a row map (LAPACK's
        ``xlaswp`` on the row numbers) and uploads the rows that move (at most ``2 e``): the
        ``(destination, source)`` rows, or None."""
        be, m = self.be, self.a.shape[0]
        k0 = self.edges[k]
        be.host_wait(done)
        got = be.asnumpy(out).astype(np.int64)  # one copy: the pivots and INFO
        p, inf = got[:-1] + k0, int(got[-1])
        self.piv[k0 : k0 + p.size] = p
        if inf > 0 and self.zero < 0:
            self.zero = k0 + inf - 1
        src = row_map(p, k0, m)
        moved = np.flatnonzero(src[k0:] != np.arange(k0, m)) + k0
        if not moved.size:
            return None
        both = be.xp.asarray(np.stack([moved, src[moved]]))
        return both[0], both[1]

    def accept(self, k: int, panel: Any, rows: Any) -> None:
        _, k1, k2 = self.block_columns(k)
        if rows is not None and k2 > k1:  # block column k + 1's rows first: its panel waits
            self.be.launch(self.be.compute, _move_rows, self.a[:, k1:k2], *rows)

    def update_next(self, k: int, panel: Any, rows: Any) -> None:
        k0, k1, k2 = self.block_columns(k)
        _row_and_update(self.be, self.a, panel, k0, k1, k2)

    def update_rest(self, k: int, panel: Any, rows: Any) -> None:
        """The other columns' interchanges (right of block column ``k + 1``, and ``xlaswp`` on
        ``L`` left of the panel), the factored panel into the matrix, ``U`` and the update
        right of block column ``k + 1``."""
        be, a = self.be, self.a
        k0, k1, k2 = self.block_columns(k)
        if rows is not None:
            if k2 < a.shape[1]:
                be.launch(be.compute, _move_rows, a[:, k2:], *rows)
            if k0 > 0:
                be.launch(be.compute, _move_rows, a[:, :k0], *rows)
        be.launch(be.compute, be.copy_local, a[k0:, k0:k1], panel)
        _row_and_update(be, a, panel, k0, k2, a.shape[1])


def panel_edges(mn: int, nb: int, first: int) -> list[int]:
    """The first columns of the panels, and ``mn``: one of ``first`` columns (none if ``0``),
    then ``nb`` each (the last one ragged)."""
    edges = [0]
    if 0 < first < mn:
        edges.append(first)
    edges += list(range(edges[-1] + nb, mn, nb))
    return [*edges, mn]


def _row_and_update(be: Backend, a: Any, panel: Any, k0: int, c0: int, c1: int) -> None:
    """Compute stream: ``U[k, c0:c1] = L_kk^{-1} A[k0:k0+e, c0:c1]`` and the trailing update
    ``A[k0+e:, c0:c1] -= L[k0+e:, k] U[k, c0:c1]`` (``panel`` the factored column-major panel
    ``k``, ``e`` its width)."""
    e = panel.shape[1]
    if c1 <= c0:
        return
    u = a[k0 : k0 + e, c0:c1]
    solve_unit_lower(be, panel[:e, :e], u, be.compute)
    if panel.shape[0] > e:
        minus_product(be, panel[e:], u, a[k0 + e :, c0:c1], be.compute)


def solve_unit_lower(be: Backend, lo: Any, b: Any, stream: Any) -> None:
    """``b := lo^{-1} b`` for the unit lower triangle of ``lo`` (a square view of the
    column-major panel), split recursively into halves down to :data:`TRSM_LEAF`:
    ``x1 = lo11^{-1} b1``, ``b2 -= lo21 x1``, ``x2 = lo22^{-1} b2``. Nearly all its flops become
    GEMMs: in one traced 4-rank call on one H200 (n = 16384, block 2048), cuBLAS's one-call
    TRSM of the 2048 triangle took more device time than the whole trailing update. ``lo`` is
    passed as its transpose (row-major for cuBLAS, no copy): ``lo = (lo^T)^T``, unit upper."""
    e = lo.shape[0]
    if e <= TRSM_LEAF or b.shape[1] == 0:
        be.trsm(1, lo.T, b, "L", "U", "T", "U", stream)
        return
    h = e // 2
    solve_unit_lower(be, lo[:h, :h], b[:h], stream)
    minus_product(be, lo[h:, :h], b[:h], b[h:], stream)
    solve_unit_lower(be, lo[h:, h:], b[h:], stream)


def minus_product(be: Backend, lo: Any, u: Any, c: Any, stream: Any) -> None:
    """``c -= lo @ u`` (GEMM); a column-major ``lo`` (a view of the panel) is passed as its
    transpose, so that cuBLAS reads it in place instead of a row-major copy of it per call."""
    if lo.ndim == 2 and lo.shape[1] > 1 and lo.strides[0] == lo.itemsize:
        be.gemm(-1, lo.T, u, 1, c, "T", "N", stream)
    else:
        be.gemm(-1, lo, u, 1, c, "N", "N", stream)


def _move_rows(a: Any, dst: Any, src: Any) -> None:
    a[dst] = a[src]  # the right side is gathered into a temporary first (a: a column range)


@warmup_kernels
def _sample(backend: Backend, xp: Any, dtype: np.dtype) -> None:
    """The row moves (index arrays) and the copies between the row-major matrix and the
    column-major panel."""
    a = xp.zeros((4, 3), dtype)
    idx = xp.asarray(np.array([2, 0]))
    _move_rows(a, idx, idx[::-1].copy())
    _move_rows(a[:, 1:], idx, idx[::-1].copy())
    panel = xp.zeros((3, 2), dtype, order="F")
    assign(panel, a[1:, :2])
    assign(a[1:, :2], panel)
