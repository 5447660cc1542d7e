"""SYRK/HERK on a one-dimensional grid by splitting K: one local BLAS call per process and one
reduction of the triangle.

``C := alpha op(A) op(A)^T + beta C`` where the processes of a ``1 x P`` or ``P x 1`` grid each
hold a slice of ``op(A)``'s columns (the sum index K): ``op(A) op(A)^T = sum_p op(A)_p
op(A)_p^T``. Each process computes its partial triangle ``alpha op(A)_p op(A)_p^T`` of the
whole ``n x n`` matrix with one SYRK/HERK of its local matrix (BLAS's own rate: 72-79 GFLOP/s
per core on the 2-core VM, where the SUMMA band's GEMMs of ``b``-wide blocks ran at about 63),
and the partial triangles are summed where ``C`` stores them. The SUMMA pipeline instead brings
every process the rows of ``op(A)`` that meet its blocks of ``C``: about ``n k`` elements per
process against the ``n^2 / 2`` of the triangle here, so this route is taken when ``2 k >= n``,
and when a whole ``n x n`` partial result fits :data:`MAX_PARTIAL_BYTES`. An operand whose K
lies along the other grid dimension (``A.T @ A`` of a matrix on ``1 x P``: K is ``A``'s rows)
is moved to the transposed grid of the same processes first (``n k`` elements, one
redistribution). Which backends take the route: :data:`BACKENDS` (docs/blas3.md, "SYRK on
the CPU").

Communication protocol: no one-sided traffic and no signals; one host exchange
(``Backend.alltoallv``) after the compute stream is synchronised. Each process packs, for every
peer, the peer's pieces of its partial product -- per local block column of ``C`` on ``1 x P``,
block row on ``P x 1``, the part inside the triangle, the diagonal block with its other triangle
zeroed -- into one buffer, adds its own pieces into its tiles (on ``beta C``), and exchanges the
buffers; it then adds the peers' partial sums into its tiles in rank order (the diagonal blocks
only on their triangle: the other triangle of ``C`` is never written). Every buffer is private
to the call and dropped at return. Process ``p`` along the one-dimensional grid is rank ``p``
of the backend, as everywhere the operators name processes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...array import BlockCyclicArray
from ..engine._triangle import add_triangle
from ..engine.redistribute import redistribute

__all__ = ["BACKENDS", "MAX_PARTIAL_BYTES", "applies", "update"]

#: Backends whose multi-process SYRK/HERK splits K on one-dimensional grids. The GPU keeps the
#: SUMMA pipeline (its 2048-column GEMMs already run near the DGEMM rate; not measured there).
BACKENDS = {"cpu"}

#: Largest ``n x n`` partial result one process may hold (bytes); above it, the SUMMA pipeline.
MAX_PARTIAL_BYTES = 1 << 30


def applies(
    XA: BlockCyclicArray, op: str, C: BlockCyclicArray, n: int, kdim: int, whole: bool
) -> bool:
    """Whether ``C := alpha op(XA) op(XA)^T + beta C`` takes this route: a grid of several
    processes in one row or one column on a backend of :data:`BACKENDS`, ``op`` one the local
    SYRK/HERK kernel runs ('N' or 'T'; 'C' for HERK), ``XA`` read whole (no window), ``C``
    stored plainly, ``2 k >= n`` and the partial result within :data:`MAX_PARTIAL_BYTES`."""
    grid = C.grid
    return (
        grid.backend.name in BACKENDS
        and grid.size > 1
        and grid.size == grid.backend.size
        and 1 in grid.shape
        and whole
        and op in ("N", "T", "C")
        and C._window is None
        and not C.is_view
        and 2 * kdim >= n > 0
        and n * n * np.dtype(C.dtype).itemsize <= MAX_PARTIAL_BYTES
    )


def update(XA: BlockCyclicArray, op: str, alpha: Any, C: BlockCyclicArray, uplo: str) -> None:
    """Add ``alpha op(XA) op(XA)^T`` (HERK for ``op='C'``) to the ``uplo`` triangle of ``C``
    (collective; :func:`applies` holds). ``C``'s triangle must already hold ``beta C``."""
    grid = C.grid
    b = grid.backend
    # K is XA's columns for op 'N' (split over a 1 x P grid), its rows for 'T'/'C' (P x 1)
    kgrid = grid.one_row() if op == "N" else grid.one_column()
    X = XA if XA.grid.same_as(kgrid) else redistribute(XA, grid=kgrid, block=XA.block)
    x = X._data
    n = C.shape[0]
    partial = np.empty((n, n), dtype=C.dtype)  # one triangle written, the other never read
    if 0 in x.shape:
        partial[...] = 0
    else:
        b.syrk(alpha, x, C.dtype.type(0), partial, uplo, op, b.compute)
    b.synchronize()  # the SYRK, and the scaling of C's triangle enqueued before it
    # on a one-dimensional grid (row-major ranks) the process at index p along it is rank p
    pieces = _pieces(C, uplo)
    me, size = b.rank, b.size
    mine = sum(piece.size for piece in pieces[me])
    nothing = np.empty(0, dtype=C.dtype)
    send, recv = [], []
    for q in range(size):
        if q == me:
            send.append(nothing)
            recv.append(nothing)
            continue
        buf = np.empty(sum(piece.size for piece in pieces[q]), dtype=C.dtype)
        for piece, out in _views(pieces[q], buf):
            out[...] = partial[piece.rows, piece.cols]
            piece.zero_other(out, uplo)
        send.append(buf)
        recv.append(np.empty(mine, dtype=C.dtype))
    c = C._data
    for piece in pieces[me]:
        piece.add_into(c[piece.local_rows, piece.local_cols], partial[piece.rows, piece.cols], uplo)
    del partial
    b.alltoallv(send, recv)
    del send
    for q in range(size):  # the peers' partial sums of our pieces, in rank order
        if q != me:
            for piece, got in _views(pieces[me], recv[q]):
                piece.add_into(c[piece.local_rows, piece.local_cols], got, uplo)


def _views(pieces: list[_Piece], buf: np.ndarray) -> list[tuple[_Piece, np.ndarray]]:
    """Each piece with its place in the packed buffer ``buf``."""
    out, pos = [], 0
    for piece in pieces:
        out.append((piece, buf[pos : pos + piece.size].reshape(piece.shape)))
        pos += piece.size
    return out


class _Piece:
    """One block column (``1 x P``) or block row (``P x 1``) of ``C``'s triangle: its global
    rectangle ``rows x cols`` and its place in the owner's local matrix; the diagonal block is
    ``[g, g + w)`` in both dimensions."""

    __slots__ = ("rows", "cols", "local_rows", "local_cols", "shape", "size", "g", "w", "by_cols")

    def __init__(
        self,
        rows: slice,
        cols: slice,
        local_rows: slice,
        local_cols: slice,
        g: int,
        w: int,
        by_cols: bool,
    ) -> None:
        self.rows, self.cols = rows, cols
        self.local_rows, self.local_cols = local_rows, local_cols
        self.shape = (rows.stop - rows.start, cols.stop - cols.start)
        self.size = self.shape[0] * self.shape[1]
        self.g, self.w = g, w
        self.by_cols = by_cols

    def off_diagonal(self) -> list[tuple[slice, slice]]:
        """The global rectangles of the piece outside its diagonal block (one, or none)."""
        g, w = self.g, self.w
        if self.by_cols:
            parts = [
                (slice(self.rows.start, g), self.cols),
                (slice(g + w, self.rows.stop), self.cols),
            ]
        else:
            parts = [
                (self.rows, slice(self.cols.start, g)),
                (self.rows, slice(g + w, self.cols.stop)),
            ]
        return [(r, c) for r, c in parts if r.stop > r.start and c.stop > c.start]

    def _diag_block(self, a: np.ndarray) -> np.ndarray:
        r, c = self.g - self.rows.start, self.g - self.cols.start
        return a[r : r + self.w, c : c + self.w]

    def zero_other(self, a: np.ndarray, uplo: str) -> None:
        """Zero the other triangle of the diagonal block of the packed piece ``a``."""
        d = self._diag_block(a)
        d[...] = np.tril(d) if uplo == "L" else np.triu(d)

    def add_into(self, dst: np.ndarray, got: np.ndarray, uplo: str) -> None:
        """``dst += got`` inside the ``uplo`` triangle (the diagonal block only on it)."""
        r0, c0 = self.rows.start, self.cols.start
        for rows, cols in self.off_diagonal():
            part = (slice(rows.start - r0, rows.stop - r0), slice(cols.start - c0, cols.stop - c0))
            np.add(dst[part], got[part], out=dst[part])
        add_triangle(np, self._diag_block(dst), self._diag_block(got), uplo)


def _runs(indices: np.ndarray) -> list[tuple[int, int, int]]:
    """``(global start, local start, length)`` of the runs of consecutive global indices."""
    if indices.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(indices) != 1) + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [indices.size]))
    return [(int(indices[s]), int(s), int(e - s)) for s, e in zip(starts, ends, strict=True)]


def _pieces(C: BlockCyclicArray, uplo: str) -> list[list[_Piece]]:
    """The pieces every process of ``C``'s one-dimensional grid stores, by process index along
    the grid."""
    n = C.shape[0]
    lay, grid = C.layout, C.grid
    by_cols = grid.shape[0] == 1
    out: list[list[_Piece]] = []
    for p in range(grid.size):
        glob = lay.local_cols(p) if by_cols else lay.local_rows(p)
        pieces = []
        for g0, l0, w in _runs(glob):
            run, local = slice(g0, g0 + w), slice(l0, l0 + w)
            if by_cols:  # a block column, all its rows local on 1 x P: the triangle's rows
                lo, hi = (g0, n) if uplo == "L" else (0, g0 + w)
                pieces.append(_Piece(slice(lo, hi), run, slice(lo, hi), local, g0, w, True))
            else:  # a block row, all its columns local on P x 1: the triangle's columns
                lo, hi = (0, g0 + w) if uplo == "L" else (g0, n)
                pieces.append(_Piece(run, slice(lo, hi), local, slice(lo, hi), g0, w, False))
        out.append(pieces)
    return out
