"""LU of a matrix one process holds whole (a ``1 x 1`` grid), and the local kernels that the
distributed LU (``ops/lapack/lu.py``) shares with it: the U row block's solve split into GEMMs, and
``c -= L U`` on the column-major panel.

:func:`getrf_lookahead`: blocked right-looking LU with a look-ahead of one panel on the
backend's two streams (LAPACK ``xgetrf``'s algorithm, with the panel factorisation moved off
the update's stream as MAGMA's ``xgetrf_gpu`` does). Used where the streams run concurrently
(``backend.concurrent_streams``: one GPU) from ``min(m, n) >=`` :data:`LOOKAHEAD_MIN` on;
elsewhere the library's one ``getrf`` of the whole matrix is as fast (LAPACK blocks and threads
it itself; the CPU backend's two streams of one process run inline).

Step ``k`` (panel ``k`` = columns ``[k0, k1)``, block column ``k + 1`` = ``[k1, k2)``; panel
``k`` already factored on the comm stream into a column-major buffer):

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
1-2 between two of them (docs/lu.md, "One process on a GPU").

Buffers: two column-major panel buffers used in turn (panel ``k + 2`` is copied into panel
``k``'s buffer on the compute stream, after everything that reads panel ``k`` there; its
``getrf`` ended before step ``k``'s interchanges). The pivots, INFO and the uploaded row indices
of every step are kept until the final synchronisation (the streams read them after the host
dropped them). No signals and no communication: one process.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._interchanges import row_map
from ...backends.base import Backend
from ..engine._warmup import warmup_kernels

__all__ = [
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
    piv = np.zeros(mn, dtype=np.int32)
    if mn == 0:
        return piv, -1
    xp, comp = be.xp, be.compute
    edges = panel_edges(mn, nb, first)
    steps = len(edges) - 1
    pw = int(max(np.diff(edges)))
    buf = xp.empty((2, m * pw), dtype=a.dtype)

    def panel_buffer(k: int) -> Any:  # column-major (m - k0) x e view of buffer k % 2
        rows, e = m - edges[k], edges[k + 1] - edges[k]
        return buf[k % 2, : rows * e].reshape(e, rows).T

    keep: list[Any] = [buf]  # device arrays the streams read after the host dropped them
    zero = -1
    be.begin()
    panel = panel_buffer(0)
    be.launch(comp, _copy, panel, a[:, : edges[1]])
    factored = _factor_after(be, panel, be.record_event(comp), keep)
    for k in range(steps):
        k0, k1 = edges[k], edges[k + 1]
        k2 = edges[k + 2] if k + 1 < steps else k1  # block column k + 1: [k1, k2), or none
        out, done = factored
        be.host_wait(done)
        got = be.asnumpy(out).astype(np.int64)
        p, inf = got[:-1] + k0, int(got[-1])
        piv[k0:k1] = p
        if inf > 0 and zero < 0:
            zero = k0 + inf - 1
        src = row_map(p, k0, m)
        moved = np.flatnonzero(src[k0:] != np.arange(k0, m)) + k0
        rows = None
        if moved.size:  # (destination rows, source rows): one upload
            both = xp.asarray(np.stack([moved, src[moved]]))
            rows = (both[0], both[1])
            keep.append(both)
        be.begin()  # the uploads (host thread's stream) before the kernels that read them
        be.wait_event(comp, done)
        if rows is not None and k2 > k1:  # block column k + 1's rows first: its panel waits
            be.launch(comp, _move_rows, a[:, k1:k2], *rows)
        if k + 1 < steps:  # look-ahead: block column k + 1, then its getrf beside the rest
            _row_and_update(be, a, panel, k0, k1, k2)
            nxt = panel_buffer(k + 1)
            be.launch(comp, _copy, nxt, a[k1:, k1:k2])
            factored = _factor_after(be, nxt, be.record_event(comp), keep)
        # the rest of step k: the other columns' interchanges, the panel into the matrix, U and
        # the update right of block column k + 1
        if rows is not None:
            if k2 < n:
                be.launch(comp, _move_rows, a[:, k2:], *rows)
            if k0 > 0:
                be.launch(comp, _move_rows, a[:, :k0], *rows)
        be.launch(comp, _copy, a[k0:, k0:k1], panel)
        _row_and_update(be, a, panel, k0, k2, n)
        if k + 1 < steps:
            panel = nxt
    be.synchronize()  # (keep's arrays are released after it)
    return piv, zero


def panel_edges(mn: int, nb: int, first: int) -> list[int]:
    """The first columns of the panels, and ``mn``: one of ``first`` columns (none if ``0``),
    then ``nb`` each (the last one ragged)."""
    edges = [0]
    if 0 < first < mn:
        edges.append(first)
    edges += list(range(edges[-1] + nb, mn, nb))
    return [*edges, mn]


def _factor_after(be: Backend, panel: Any, ready: Any, keep: list[Any]) -> tuple[Any, Any]:
    """Enqueue ``getrf`` of ``panel`` on the comm stream after ``ready``; its pivots followed by
    INFO, and the event after it."""
    e = min(panel.shape)
    out = be.xp.zeros(e + 1, dtype=np.int32)  # the pivots, then INFO: one copy to the host
    keep.append(out)
    be.begin()
    be.wait_event(be.comm_stream, ready)
    be.getrf(panel, out[:e], out[e:], be.comm_stream)
    return out, be.record_event(be.comm_stream)


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


def _copy(dst: Any, src: Any) -> None:
    dst[...] = src


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
    _copy(panel, a[1:, :2])
    _copy(a[1:, :2], panel)
