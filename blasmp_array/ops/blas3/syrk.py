"""Distributed SYRK/HERK (PBLAS ``pxsyrk``/``pxherk``) and the triangle-restricted rank-k
pipeline that SYR2K shares.

``C := alpha op(A) op(A)^T + beta C`` (``^H`` for HERK) on one triangle of ``C``. The SUMMA
pipeline of ``panels.py`` brings, at step ``k``, the row panel ``op(A)[my C-rows, k]`` and the
column panel ``op(A)[my C-cols, k]`` (the same K-columns of ``op(A)`` distributed the other
way); the local update touches only blocks of the triangle: per local block column one GEMM on
the contiguous run of local rows inside the triangle, and the diagonal block through a small
GEMM whose triangle is added in place (the other triangle of ``C`` is never written).

Communication protocol: GEMM's (see ``gemm.py``): the SUMMA plan of ``panels.py`` on the one
exchange engine of ``_exchange.py`` -- per step, each sender ``put_signal``\\ s its segment of
a panel once into the slot of every receiver (``ready[s, sender]``), receivers wait for the
plan's cumulative counts on the compute stream, update from the slot and ack the senders of
step ``k + num_stages`` (``ack[s, receiver]``), who wait for it before reusing the slot.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..._alloc import new_array
from ...array import BlockCyclicArray
from ...backends.base import Backend
from ...layout import BlockCyclicLayout
from ..engine import _checks as ck
from ..engine._triangle import (
    add_triangle,
    index_triangle,
    mirror_triangle,
    scale_triangle,
    triangle_mask,
)
from ..engine._warmup import begin_pipeline, sample_matrix, warmup_kernels
from ..engine.mirror import mirror_blocks
from ..engine.panels import (
    Panel,
    PanelSpec,
    Source,
    WindowTarget,
    compose_op,
    default_step_width,
    make_steps,
    run_pipeline,
)
from . import _syrk_ksplit
from .gemm import check_method, check_stages, output_target

__all__ = ["syrk", "rank_k", "triangle_update"]


def _local_indices(C: BlockCyclicArray) -> tuple[np.ndarray, np.ndarray]:
    """The global (window, for a window view) row and column indices of C's local elements."""
    g, w = C.grid, C._window
    if w is not None:
        target = WindowTarget.of(w)
        return target.local_rows(g.myrow), target.local_cols(g.mycol)
    return C.layout.local_rows(g.myrow), C.layout.local_cols(g.mycol)


def _triangle_of(C: BlockCyclicArray, uplo: str) -> Any:
    """Device mask of C's local elements inside its ``uplo`` triangle (a window's own)."""
    if not C.is_window:
        return triangle_mask(C.layout, C.grid, uplo)
    rows, cols = (C.grid.backend.asarray(x) for x in _local_indices(C))
    return index_triangle(rows, cols, uplo)


def _local_diagonal(C: BlockCyclicArray) -> tuple[Any, Any]:
    g = C.grid
    rows, cols = _local_indices(C)
    common, ri, ci = np.intersect1d(rows, cols, assume_unique=True, return_indices=True)
    return g.backend.asarray(ri), g.backend.asarray(ci)


def _zero_diag_imag(c: Any, ri: Any, ci: Any) -> None:
    c[ri, ci] = c[ri, ci].real


def _masked_add(xp: Any, c_blk: Any, t: Any, rows: Any, cols: Any, uplo: str) -> None:
    # only the part of the rectangle inside the window's triangle is added
    c_blk += xp.where(index_triangle(rows, cols, uplo), t, xp.zeros((), t.dtype))


@warmup_kernels
def _warm_diagonal(backend: Backend, xp: Any, dtype: np.dtype) -> None:
    """:func:`add_triangle` into a strided and a contiguous block, both triangles; the zeroed
    imaginary part of HERK's diagonal; :func:`_masked_add` of a window's diagonal rectangle."""
    n = 6
    local = sample_matrix(xp, dtype, n)
    for uplo in ("L", "U"):
        add_triangle(xp, local[1:5, 1:5], local[:4, :4].copy(), uplo)
        add_triangle(xp, local.copy(), local.copy(), uplo)
    idx = xp.asarray(np.arange(3))
    if dtype.kind == "c":
        _zero_diag_imag(local.copy(), idx, idx)
    for uplo in ("L", "U"):  # a window view C's diagonal rectangles
        _masked_add(xp, local[1:4, 1:4], local[:3, :3].copy(), idx, idx[::-1].copy(), uplo)


class _LocalTriangle:
    """For each local block column of ``C``: its columns, the local rows strictly inside the
    triangle (one contiguous run) and the local rows of the diagonal block (or None)."""

    def __init__(self, C: BlockCyclicArray, uplo: str) -> None:
        g, lay = C.grid, C.layout
        b = lay.block[0]
        self.uplo = uplo
        if C.is_window:
            self._window_columns(C, uplo)
            return
        ib = list(lay.local_block_rows(g.myrow))
        roff = [t * b for t in range(len(ib))] + [C._data.shape[0]]
        self.cols = []
        for t, J in enumerate(lay.local_block_cols(g.mycol)):
            c0 = t * lay.block[1]
            c1 = min(c0 + lay.block[1], C._data.shape[1])
            pos = bisect.bisect_left(ib, J)
            diag = (roff[pos], roff[pos + 1]) if pos < len(ib) and ib[pos] == J else None
            if uplo == "L":
                first = pos + (1 if diag else 0)
                strict = (roff[first], roff[-1])
            else:
                strict = (0, roff[pos])
            self.cols.append((c0, c1, strict, diag))

    def _window_columns(self, C: BlockCyclicArray, uplo: str) -> None:
        """The same for a window view ``C``: its local columns grouped by the parent's block
        columns; the rows strictly inside the window's triangle for every column of a group,
        and the rows that cross its diagonal there (a rectangle, masked when added)."""
        w = C._window
        assert w is not None
        g, target = C.grid, WindowTarget.of(w)
        wr, wc = target.local_rows(g.myrow), target.local_cols(g.mycol)
        nb = w.parent.layout.block[1]
        self.cols = []
        if not len(wc):
            return  # no columns of the window here
        parent_block = (wc + w.cols[0]) // nb
        starts = np.flatnonzero(np.r_[True, parent_block[1:] != parent_block[:-1]])
        for c0, c1 in zip(starts, [*starts[1:], len(wc)], strict=True):
            a, z = int(wc[c0]), int(wc[c1 - 1])  # window columns a..z of the group
            d0, d1 = bisect.bisect_left(wr, a), bisect.bisect_right(wr, z)
            strict = (d1, len(wr)) if uplo == "L" else (0, d0)
            self.cols.append((int(c0), int(c1), strict, (d0, d1) if d1 > d0 else None))

    def chunks(self, width: int) -> list[tuple[int, int, tuple[int, int], list[Any]]]:
        """Consecutive block columns grouped to about ``width`` columns: ``(c0, c1, shared,
        columns)`` where ``shared`` is the run of local rows strictly inside the triangle for
        EVERY column of the chunk (one wide GEMM) and ``columns`` lists each column's
        ``(c0, c1, band, diag)`` with ``band`` the rest of its strict rows.

        The strict runs are nested (lower: they start lower for later columns; upper: they end
        lower), so their intersection is the run of the last (lower) or first (upper) column.
        """
        out: list[tuple[int, int, tuple[int, int], list[Any]]] = []
        group: list[Any] = []
        for col in self.cols + [None]:
            if group and (col is None or col[1] - group[0][0] > width):
                lower = self.uplo == "L"
                shared = group[-1][2] if lower else group[0][2]
                columns = []
                for c0, c1, (r0, r1), diag in group:
                    band = (r0, shared[0]) if lower else (shared[1], r1)
                    columns.append((c0, c1, band, diag))
                out.append((group[0][0], group[-1][1], shared, columns))
                group = []
            if col is not None:
                group.append(col)
        return out


#: backends on which ``full=True`` computes the balanced band on a grid. The CPU's triangle
#: update already makes one GEMM per block column (its chunks are 256 columns wide), so the band
#: costs it no wider calls; the GPU's chunks merge 2048 columns into one GEMM, which the band's
#: per-column runs would split (not measured there: it keeps the triangle and its fill).
BALANCED_BAND = {"cpu"}


def band_half(j: int, k: int) -> int:
    """How many blocks after the diagonal one (cyclically, mod ``k``) block column ``j`` of a
    ``k x k`` block matrix computes in the *balanced band*: every pair of blocks ``(i, j)``,
    ``(j, i)`` with ``i != j`` lies in exactly one column's band, and every column holds
    ``k // 2`` or ``k // 2 + 1`` blocks, whatever process owns it."""
    if k % 2:
        return (k - 1) // 2
    return k // 2 if j < k // 2 else k // 2 - 1


class _LocalBand:
    """The balanced band of a full symmetric result (``full=True`` of :func:`rank_k`) or of a
    new lower triangle (:func:`_lower_from_band` then moves its blocks): block
    column ``J`` computes its diagonal block (lower triangle) and the blocks ``J + 1, ...,
    J + band_half(J)`` (mod ``K``) -- at most two runs of local rows -- instead of every block
    below the diagonal. The lower triangle of a block-cyclic matrix is unbalanced (grid 1x2,
    K = 12: 39 against 33 block products, the slower process sets the pace); the band gives
    every block column 6 or 7. The rest is filled from their mirrors (:func:`_fill_from_band`).
    Same interface as :class:`_LocalTriangle` for :func:`triangle_update`."""

    def __init__(self, C: BlockCyclicArray) -> None:
        g, lay = C.grid, C.layout
        b = lay.block[0]
        K = lay.nblocks[0]
        ib = list(lay.local_block_rows(g.myrow))
        roff = [t * b for t in range(len(ib))] + [C._data.shape[0]]

        def rows(g0: int, g1: int) -> tuple[int, int]:
            # local rows of the global blocks g0 .. g1 (inclusive; empty when g1 < g0)
            if g1 < g0:
                return (0, 0)
            return (roff[bisect.bisect_left(ib, g0)], roff[bisect.bisect_right(ib, g1)])

        self.uplo = "L"
        self.cols = []  # (c0, c1, below, wrapped, diag)
        for t, J in enumerate(lay.local_block_cols(g.mycol)):
            c0 = t * lay.block[1]
            c1 = min(c0 + lay.block[1], C._data.shape[1])
            last = J + band_half(J, K)
            mine = bisect.bisect_left(ib, J) < len(ib) and ib[bisect.bisect_left(ib, J)] == J
            diag = rows(J, J) if mine else None
            below = rows(J + 1, min(last, K - 1))
            wrapped = rows(0, last - K)
            self.cols.append((c0, c1, below, wrapped, diag))

    def chunks(self, width: int) -> list[tuple[int, int, tuple[int, int], list[Any]]]:
        """One chunk per block column: the run below the diagonal block, then the wrapped run
        and the diagonal block (the format of :meth:`_LocalTriangle.chunks`)."""
        return [
            (c0, c1, below, [(c0, c1, wrapped, diag)]) for c0, c1, below, wrapped, diag in self.cols
        ]


@functools.lru_cache(maxsize=64)
def outside_band(k: int) -> tuple[tuple[int, int], ...]:
    """The blocks ``(I, J)`` of a ``k x k`` block matrix outside the balanced band, diagonal
    excluded: the mirrors of the band's off-diagonal blocks, about half the matrix."""
    out: list[tuple[int, int]] = []
    for j in range(k):
        band = {(j + d) % k for d in range(band_half(j, k) + 1)}
        out.extend((i, j) for i in range(k) if i not in band)
    return tuple(out)


def _fill_from_band(C: BlockCyclicArray, band: _LocalBand, hermitian: bool) -> None:
    """Complete ``C``, computed on the balanced band, to the full symmetric (Hermitian) matrix
    in place: every block outside the band from its mirror in the band (``C[I, J] := C[J,
    I]^T``, ``^H``; one exchange that moves only those blocks, ``engine/mirror.py``), and the
    strict upper triangle of every diagonal block from its own lower one. Collective."""
    diagonals = [(diag, (c0, c1)) for c0, c1, _, _, diag in band.cols if diag is not None]
    _mirror_fill(C, outside_band(C.layout.nblocks[0]), diagonals, hermitian)


def _mirror_fill(
    C: BlockCyclicArray,
    blocks: Sequence[tuple[int, int]],
    diagonals: Sequence[tuple[tuple[int, int], tuple[int, int]]],
    hermitian: bool,
) -> None:
    """``C``'s ``blocks`` from their mirrors (one exchange, ``engine/mirror.py``), then the
    strict upper triangle of each local diagonal block ``((r0, r1), (c0, c1))`` (local
    coordinates) from its lower one. Collective."""
    g, b = C.grid, C.grid.backend
    mirror_blocks(b, C._data, C.layout, g.rank, blocks, hermitian)
    for (r0, r1), (c0, c1) in diagonals:
        b.launch(b.compute, mirror_triangle, b.xp, C._data[r0:r1, c0:c1], "L", hermitian)
    b.synchronize()


@functools.lru_cache(maxsize=64)
def upper_blocks(k: int) -> tuple[tuple[int, int], ...]:
    """The blocks ``(I, J)``, ``I < J``, of a ``k x k`` block matrix: its strict upper
    triangle of blocks."""
    return tuple((i, j) for j in range(k) for i in range(j))


def _fill_from_lower(C: BlockCyclicArray, hermitian: bool) -> None:
    """Complete ``C``, computed on its lower triangle, to the full symmetric (Hermitian) matrix
    in place: every block above the diagonal from its mirror below it (one exchange that moves
    each such block once, ``engine/mirror.py``; a whole transpose moves the matrix and then
    selects half of it), and the strict upper triangle of every diagonal block from its own
    lower one. Collective."""
    g, lay = C.grid, C.layout
    diagonals = []
    for J in lay.local_block_cols(g.mycol):
        if lay.block_owner(J, J) == (g.myrow, g.mycol):
            (r0, c0), (h, w) = lay.local_offset(J, J), lay.block_extent(J, J)
            diagonals.append(((r0, r0 + h), (c0, c0 + w)))
    _mirror_fill(C, upper_blocks(lay.nblocks[0]), diagonals, hermitian)


def _lower_from_band(C: BlockCyclicArray, band: _LocalBand, hermitian: bool) -> None:
    """Turn ``C``, computed on the balanced band into zeros, into its lower triangle with
    zeros above it, in place: every block below the diagonal outside the band from its mirror
    above it (``C[I, J] := C[J, I]^T``, ``^H``; one exchange of about a quarter of the
    matrix, ``engine/mirror.py``), then the band's runs above the diagonal (its wrapped runs,
    exactly those mirrors) zeroed. The band's diagonal blocks hold their lower triangle only
    already. Collective."""
    g, b = C.grid, C.grid.backend
    below = tuple((i, j) for i, j in outside_band(C.layout.nblocks[0]) if i > j)
    mirror_blocks(b, C._data, C.layout, g.rank, below, hermitian)  # (finished: nothing in flight)
    for c0, c1, _, (r0, r1), _ in band.cols:
        if r0 < r1:
            b.launch(b.compute, _zero, C._data[r0:r1, c0:c1])
    b.synchronize()


def _zero(x: Any) -> None:
    x[...] = 0


def _fill_from_triangle(C: BlockCyclicArray, hermitian: bool) -> None:
    """Complete ``C``, computed on its lower triangle, to the full symmetric (Hermitian) matrix
    in place: the strict upper triangle from ``C^T`` (``C^H``), one distributed transpose
    selected on the device. Collective."""
    from ..engine.redistribute import transpose

    g, b = C.grid, C.grid.backend
    mirrored = transpose(C, conjugate=hermitian)
    if mirrored.layout != C.layout:
        mirrored = mirrored.redistribute(grid=g, block=C.block)
    keep = triangle_mask(C.layout, g, "L")
    b.xp.copyto(C._data, mirrored._data, where=~keep)


@warmup_kernels
def _warm_symmetric_fill(backend: Backend, xp: Any, dtype: np.dtype) -> None:
    """The fills of a full result: :func:`_fill_from_band`'s mirrored diagonal block (a
    strided one) and :func:`_fill_from_triangle`'s select (the inverted mask included)."""
    n = 6
    local = sample_matrix(xp, dtype, n)
    for conj in (False, True):
        mirror_triangle(xp, local.copy()[1:5, 1:5], "L", conj)
    _zero(local.copy()[1:3, 2:5])
    rows = xp.asarray(np.arange(n))
    tri = (rows[None, :] - rows[:, None]) <= 0
    xp.copyto(local.copy(), local, where=~tri)


def triangle_update(
    name: str,
    operands: Sequence[tuple[Source, BlockCyclicArray, int]],
    terms: Sequence[tuple[Any, int, int]],
    C: BlockCyclicArray,
    uplo: str,
    num_stages: int,
    step_width: int | None,
    diag_kernel: str | None = None,
    band: _LocalBand | None = None,
) -> None:
    """``C[uplo triangle] += sum_t coef_t * M_{row_t} @ M_{col_t}^T`` over the pipeline.

    ``operands``: ``(source, stored array, axis)``; ``terms``: ``(coef, row operand index,
    col operand index)``. ``C`` has square blocks. Collective.

    ``diag_kernel``: ``'syrk'`` when the update is ``coef * M M^T`` (one term whose column
    panel is the row panel's matrix), ``'syr2k'`` when it is ``coef (M N^T + N M^T)`` (two
    terms, same coefficient): diagonal blocks then take the backend's SYRK/SYR2K, which writes
    only the triangle at half the flops, instead of a full product added through a mask.

    ``band`` (``uplo='L'``, ``C`` not a window): update the blocks of the balanced band
    (:class:`_LocalBand`) instead of the triangle.
    """
    grid, b = C.grid, C.grid.backend
    src0 = operands[0][0]
    kdim, kb = src0.shape[1], src0.block[1]
    width = default_step_width(b) if step_width is None else step_width
    steps = make_steps(kdim, kb, width)
    target, c_loc = output_target(C)  # a window view C: in its parent, with gathered panels
    # SYRK's column panel on a grid of one process row: the rows of the row panel (which holds
    # every row of M) at the chunk's global columns -- not packed nor sent a second time
    # (the same virtual matrix on both sides: SYRK, not HERK, whose column panel is conjugated)
    one_row = (
        band is not None
        and grid.nprow == 1
        and len(operands) == 2
        and [(li, ri) for _, li, ri in terms] == [(0, 1)]
        and operands[1][2] == 1
        and operands[1][0] == operands[0][0]
    )
    sent = operands[:1] if one_row else operands
    specs = [PanelSpec(src, target, axis) for src, _, axis in sent]
    locals_ = [x._data for _, x, _ in sent]
    gcols = C.layout.local_cols(grid.mycol) if one_row else None
    tri: _LocalTriangle | _LocalBand = _LocalTriangle(C, uplo) if band is None else band
    one, zero = C.dtype.type(1), C.dtype.type(0)
    bsz = C.layout.block[0]
    tmp = b.xp.empty((bsz, bsz), C.dtype)  # private scratch for diagonal blocks
    # a window's diagonal crosses its local blocks: the diagonal rectangles are added through
    # the window's triangle (its row and column indices), never with a square-block kernel
    wr = wc = None
    if isinstance(target, WindowTarget):
        diag_kernel = None
        wr = b.asarray(target.local_rows(grid.myrow))
        wc = b.asarray(target.local_cols(grid.mycol))

    chunks = tri.chunks(default_step_width(b))  # wide GEMMs below the staircase

    def product(panels: list[Any], r0: int, r1: int, c0: int, c1: int) -> None:
        # C[rows r0:r1, cols c0:c1] (inside the triangle) += sum of coef * L @ R^T
        for coef, li, ri in terms:
            left, right = panels[li], panels[ri]
            if left is None or right is None:
                continue
            a0, a1 = max(r0, left.lo), min(r1, left.hi)
            b0, b1 = max(c0, right.lo), min(c1, right.hi)
            if a0 < a1 and b0 < b1:
                b.gemm(
                    coef,
                    left.array[a0 - left.lo : a1 - left.lo],
                    right.array[b0 - right.lo : b1 - right.lo],
                    one,
                    c_loc[a0:a1, b0:b1],
                    "N",
                    "T",
                    b.compute,
                )

    def with_columns(panels: list[Any], c0: int) -> list[Any]:
        # the row panel, and the same rows as the column panel of a chunk starting at local
        # column c0 (one block column: its global columns are consecutive)
        row = panels[0]
        if row is None or gcols is None:
            return [row, None]
        off = int(gcols[c0]) - c0
        return [row, Panel(row.lo - off, row.hi - off, row.array)]

    def update(k: int, panels: list[Any]) -> None:
        for cc0, cc1, (s0, s1), columns in chunks:
            if one_row:
                panels = with_columns(panels, cc0)
            product(panels, s0, s1, cc0, cc1)  # the rows every column of the chunk needs
            for c0, c1, (r0, r1), diag in columns:
                product(panels, r0, r1, c0, c1)
                if diag is not None:
                    update_diagonal(panels, c0, c1, diag)

    def update_diagonal(panels: list[Any], c0: int, c1: int, diag: tuple[int, int]) -> None:
        d0, d1 = diag
        if diag_kernel is not None:
            _diag_kernel(b, diag_kernel, terms, panels, c_loc, d0, d1, c0, c1, uplo)
            return
        t = tmp[: d1 - d0, : c1 - c0]
        first = True
        for coef, li, ri in terms:
            left, right = panels[li], panels[ri]
            if left is None or right is None:
                continue
            if not (left.lo <= d0 and d1 <= left.hi and right.lo <= c0 and c1 <= right.hi):
                continue
            # diagonal block: full n_d x n_d product, then only its triangle is added
            b.gemm(
                coef,
                left.array[d0 - left.lo : d1 - left.lo],
                right.array[c0 - right.lo : c1 - right.lo],
                zero if first else one,
                t,
                "N",
                "T",
                b.compute,
            )
            first = False
        if not first and wr is None:
            b.launch(b.compute, add_triangle, b.xp, c_loc[d0:d1, c0:c1], t, uplo)
        elif not first and wr is not None and wc is not None:
            rows, cols = wr[d0:d1], wc[c0:c1]
            b.launch(b.compute, _masked_add, b.xp, c_loc[d0:d1, c0:c1], t, rows, cols, uplo)

    run_pipeline(b, name, specs, locals_, steps, C.dtype, num_stages, grid.rank, update)


def _diag_kernel(
    b: Any,
    kernel: str,
    terms: Sequence[tuple[Any, int, int]],
    panels: list[Any],
    c_loc: Any,
    d0: int,
    d1: int,
    c0: int,
    c1: int,
    uplo: str,
) -> None:
    """The diagonal block ``C[d0:d1, c0:c1]`` (same global rows and columns) by SYRK/SYR2K on
    the row panels' rows of the block (the column panels hold the same values there)."""
    coef, li, ri = terms[0]
    left = panels[li]
    if left is None or not (left.lo <= d0 and d1 <= left.hi):
        return
    one = c_loc.dtype.type(1)
    rows = left.array[d0 - left.lo : d1 - left.lo]
    if kernel == "syrk":
        b.syrk(coef, rows, one, c_loc[d0:d1, c0:c1], uplo, "N", b.compute)
        return
    other = panels[terms[1][1]]  # the second term's row operand: N's row panel
    if other is None or not (other.lo <= d0 and d1 <= other.hi):
        return
    rows_n = other.array[d0 - other.lo : d1 - other.lo]
    b.syr2k(coef, rows, rows_n, one, c_loc[d0:d1, c0:c1], uplo, "N", b.compute)


def rank_k(
    name: str,
    A: BlockCyclicArray,
    B: BlockCyclicArray | None,
    C: BlockCyclicArray | None,
    trans: str,
    uplo: str,
    alpha: Any,
    beta: Any,
    hermitian: bool,
    num_stages: int,
    method: str,
    step_width: int | None,
    full: bool = False,
) -> BlockCyclicArray:
    """SYRK/HERK (``B is None``) or SYR2K/HER2K on the ``uplo`` triangle (checked arguments).

    ``trans`` in 'N', 'T', 'C' names ``op`` in ``op(A) op(A)^T`` (``op(A) op(A)^H`` when
    ``hermitian``; so ``trans='N', hermitian=True`` is ``A A^H``).

    ``full`` (SYRK/HERK into a new ``C``, ``uplo='L'``: what ``A.T @ A`` needs): return the
    full symmetric (Hermitian) matrix. One process mirrors its lower triangle; a grid computes
    the balanced band of :class:`_LocalBand` (every process about the same number of block
    products; on the backends of :data:`BALANCED_BAND`, else the lower triangle) and fills the
    rest: the band's by moving only the blocks outside it (their mirrors), the triangle's from
    one distributed transpose. A new lower triangle (``C`` None, ``uplo='L'``) on a grid of
    those backends takes the band too, its blocks above the diagonal moved below it and zeroed
    (:func:`_lower_from_band`).
    """
    if full and (B is not None or C is not None or uplo != "L"):
        raise ValueError(f"{name}: full=True is for a new C = op(A) op(A)^T, uplo 'L'")
    XA, va, offa, exta = ck.split_window(A)
    o1a = compose_op(va, trans)
    sa = Source(XA.layout, o1a, offset=offa, extent=exta)
    n, kdim = sa.shape
    offb, extb = (0, 0), None
    if B is not None:
        XB, vb, offb, extb = ck.split_window(B)
        o1b = compose_op(vb, trans)
        sb = Source(XB.layout, o1b, offset=offb, extent=extb)
        if sb.shape != sa.shape:
            raise ValueError(
                f"{name}: op(A) is {sa.shape[0]}x{sa.shape[1]} (A {A.shape}) but op(B) is "
                f"{sb.shape[0]}x{sb.shape[1]} (B {B.shape}), trans={trans!r}; they must match"
            )
    if C is not None and C.shape != (n, n):
        raise ValueError(
            f"{name}: C is {C.shape[0]}x{C.shape[1]} but op(A) is {n}x{kdim} (A {A.shape}, "
            f"trans={trans!r}), so C must be {n}x{n}"
        )
    dtype = ck.result_dtype(name, A, B, out=C)
    hermitian = hermitian and dtype.kind == "c"
    alpha = ck.cast_scalar(alpha, dtype, "alpha", name, real=hermitian and B is None)
    beta = ck.cast_scalar(beta, dtype, "beta", name, real=hermitian)
    grid = A.grid
    meth = check_method(method, grid, name)
    stages = check_stages(num_stages, name)

    # -- layouts: C needs square blocks b = rows of op(A) per block ---------------------------
    if C is not None and C.block[0] == C.block[1]:
        bsz = C.block[0]
    else:
        bsz = sa.block[0]
    kblk = sa.block[1]
    stored_blk = (kblk, bsz) if sa.transposed else (bsz, kblk)
    # window views are read in place where their parent is already where the panels read it
    XA, offa, exta = ck.window_operand(A, XA, offa, exta, grid, stored_blk, dtype)
    sa = Source(XA.layout, o1a, offset=offa, extent=exta)
    if B is not None:
        XB, offb, extb = ck.window_operand(B, XB, offb, extb, grid, stored_blk, dtype)
    XA = ck.move(
        XA,
        grid,
        stored_blk,
        "A",
        name,
        f"op(A) has blocks {sa.block} but C needs square {bsz}x{bsz} blocks",
    )
    XA = ck.cast_storage(XA, dtype)
    if B is not None:
        XB = ck.move(
            XB,
            grid,
            (kblk, bsz) if sb.transposed else (bsz, kblk),
            "B",
            name,
            f"op(B) has blocks {sb.block} but must be blocked like op(A) {(bsz, kblk)}",
        )
        XB = ck.cast_storage(XB, dtype)
    Cw = C
    if C is not None and (C.block != (bsz, bsz) or not C.grid.same_as(grid)):
        Cw = ck.move(
            C,
            grid,
            (bsz, bsz),
            "C",
            name,
            f"C has blocks {C.block} but the triangle update needs square blocks",
        )
    fresh = Cw is None
    if Cw is None:
        # zeroed: the other triangle of a new result is zero, and the update adds to it
        # zeroed explicitly: the panels only add into it
        Cw = new_array(BlockCyclicLayout((n, n), (bsz, bsz), grid.shape), grid, dtype, fill=0)
        beta = dtype.type(0)

    b = grid.backend
    # K split over a one-dimensional grid: one local SYRK per process and one reduction
    kernel_op = (not hermitian and o1a in ("N", "T")) or (hermitian and o1a == "C")
    ksplit = (
        method == "auto"
        and B is None
        and kernel_op
        and alpha != 0
        and _syrk_ksplit.applies(XA, o1a, Cw, n, kdim, exta is None)
    )
    # the balanced band on a grid: for the full matrix, and for the lower triangle of a new
    # result (the band's blocks above the diagonal are then moved below it, and zeroed)
    balanced = grid.size > 1 and b.name in BALANCED_BAND and uplo == "L" and not ksplit
    band = _LocalBand(Cw) if balanced and (full or fresh) else None
    begin_pipeline(b, dtype)
    mask = None  # held past the synchronisation below: the compute stream reads it
    if n:
        if not fresh and beta != 1:
            mask = _triangle_of(Cw, uplo)
            scale_triangle(b, output_target(Cw)[1], beta, mask)
        if kdim and alpha != 0:
            o2 = compose_op(o1a, "C" if hermitian else "T")
            col_op = compose_op(o2, "T")
            one = dtype.type(1)
            if ksplit:
                _syrk_ksplit.update(XA, o1a, alpha, Cw, uplo)
            # one local BLAS call on a 1x1 grid, where the backend has the kernel for the op
            elif meth == "local" and kernel_op and B is None:
                b.syrk(alpha, XA._data, one, Cw._data, uplo, o1a, b.compute)
            elif meth == "local" and kernel_op and B is not None and o1b == o1a:
                b.syr2k(alpha, XA._data, XB._data, one, Cw._data, uplo, o1a, b.compute)
            else:
                if B is None:
                    operands = [
                        (sa, XA, 0),
                        (Source(XA.layout, col_op, offset=offa, extent=exta), XA, 1),
                    ]
                    terms = [(alpha, 0, 1)]
                else:
                    alpha2 = np.conj(alpha) if hermitian else alpha
                    operands = [
                        (sa, XA, 0),
                        (Source(XB.layout, o1b, offset=offb, extent=extb), XB, 0),
                        (Source(XA.layout, col_op, offset=offa, extent=exta), XA, 1),
                        (
                            Source(
                                XB.layout,
                                compose_op(compose_op(o1b, "C" if hermitian else "T"), "T"),
                                offset=offb,
                                extent=extb,
                            ),
                            XB,
                            1,
                        ),
                    ]
                    # alpha op(A) op(B)^T + alpha' op(B) op(A)^T
                    terms = [(alpha, 0, 3), (alpha2, 1, 2)]
                width = step_width if meth != "local" else max(kdim, 1)
                # HERK/HER2K keep the masked product on diagonal blocks (the backend's HERK
                # computes A^H A, the panels hold A's rows)
                diag = None if hermitian else ("syrk" if B is None else "syr2k")
                triangle_update(name, operands, terms, Cw, uplo, stages, width, diag, band)
        if hermitian:
            ri, ci = _local_diagonal(Cw)
            b.launch(b.compute, _zero_diag_imag, output_target(Cw)[1], ri, ci)
        if full and grid.size == 1:  # one process: its lower triangle mirrored, on the device
            b.launch(b.compute, mirror_triangle, b.xp, Cw._data, uplo, hermitian)
    b.synchronize()
    if full and grid.size > 1 and n:
        if band is not None:
            _fill_from_band(Cw, band, hermitian)
        elif b.name in BALANCED_BAND:
            _fill_from_lower(Cw, hermitian)
        else:
            _fill_from_triangle(Cw, hermitian)
    elif band is not None and n:
        _lower_from_band(Cw, band, hermitian)
    if C is not None and Cw is not C:
        back = ck.move(Cw, C.grid, C.block, "C", name, "C's layout differs from the working one")
        ck.store(C, back)
        return C
    return Cw


def syrk(
    A: BlockCyclicArray,
    C: BlockCyclicArray | None = None,
    trans: str = "N",
    lower: bool = True,
    alpha: Any = 1,
    beta: Any = 0,
    num_stages: int = 2,
    *,
    method: str = "auto",
    step_width: int | None = None,
) -> BlockCyclicArray:
    """Symmetric rank-k update ``C := alpha op(A) op(A)^T + beta C`` on one triangle of ``C``
    (PBLAS ``pxsyrk``; with ``trans='C'`` and a complex dtype, HERK:
    ``C := alpha A^H A + beta C``).

    Parameters
    ----------
    A : BlockCyclicArray
        ``op(A)`` is ``n x k``: ``A`` (``trans='N'``), ``A^T`` ('T') or ``A^H`` ('C').
        Lazy views are folded into ``trans``.
    C : BlockCyclicArray, optional
        ``n x n``; only its ``lower`` (or upper) triangle is read and written, the other
        triangle is left untouched. If omitted, a new array is returned whose other triangle
        is zero.
    trans : {'N', 'T', 'C'}
    lower : bool
        Which triangle of ``C`` to compute.
    alpha, beta : scalar
        Cast to the result dtype (real for HERK). ``beta == 0`` overwrites the triangle.
    num_stages : int
        Panel buffers in flight (1: single-buffered).
    method : {'auto', 'summa', 'local'}
        'auto': the local kernel on a 1x1 grid; on a one-dimensional grid of the CPU backend
        with ``2 k >= n``, one local SYRK per process over its share of K and one reduction of
        the triangle (``_syrk_ksplit``); the panel pipeline otherwise.
    step_width : int, optional
        K columns per pipeline step.

    Returns
    -------
    BlockCyclicArray
        ``C`` with square blocks (rows of ``op(A)`` per block, or ``C``'s own).

    Notes
    -----
    ``n^2 k`` flops (the diagonal blocks cost a full block product each). HERK sets the
    imaginary part of the diagonal to zero. Operands whose blocks do not conform are
    redistributed with a warning naming the cost.
    """
    name = "herk" if trans in ("C", "c") else "syrk"
    ck.check_array(A, "A", name)
    C = ck.check_output(C, name)
    t = ck.check_trans(trans, "trans", name)
    uplo = ck.check_uplo(lower, name)
    herm = t == "C"
    if herm and np.dtype(A.dtype).kind != "c" and (C is None or C.dtype.kind != "c"):
        t, herm = "T", False
    return rank_k(name, A, None, C, t, uplo, alpha, beta, herm, num_stages, method, step_width)
