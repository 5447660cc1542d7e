"""Redistribution between block-cyclic layouts (PBLAS ``pxgemr2d``) and the distributed transpose.

Algorithm
---------
One engine, :func:`_exchange`, copies a matrix from any block-cyclic *source description*
``(local matrix, layout, rank_of)`` to any destination description over the same processes.
``rank_of(prow, pcol)`` maps grid coordinates to the rank in the backend's communicator, so a
source may be described on a *virtual* grid: the transpose of ``A`` is the source
``(A.local.T, A.layout.transposed(), (c, r) -> A.grid.rank_of(r, c))`` -- no extra copy.

Process row ``p`` of a layout stores the global rows ``layout.local_rows(p)`` (ascending, in
local order); likewise for columns. The elements that source process ``(p, q)`` sends to
destination process ``(p', q')`` are
``(rows_src(p) & rows_dst(p')) x (cols_src(q) & cols_dst(q'))``.
Sender and receiver compute the same intersections, vectorised from the owner formula
``owner(i) = (i // nb + src) mod P`` over their own index vectors (no loops over elements or
blocks), and pack/unpack them in ascending global (row-major) order, so no indices travel. The
data moves with one ``backend.alltoallv`` per round (it splits messages over 2**31 elements).

Memory bound
------------
The matrix is moved in *rounds*, each a stripe of ``h`` consecutive global rows. A process row
owns at most ``(h // (mb * P)) * mb + min(h mod (mb * P), mb)`` rows of any stripe, so the
bytes one rank sends plus receives in one round are at most
``itemsize * (own_src(h) * max_local_cols_src + own_dst(h) * max_local_cols_dst)``. ``h`` is the
largest stripe height keeping this under ``memory_budget`` (:data:`MEMORY_BUDGET_BYTES`, 256 MiB
by default), or one row when a single row already exceeds it. ``h`` and so the number of rounds
are computed from global quantities only, so every rank takes part in the same rounds. Besides
the source and destination local matrices, a rank never holds more than one round's messages;
no rank ever holds the whole matrix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from numbers import Integral
from typing import Any

import numpy as np

from ..array import BlockCyclicArray
from ..grid import ProcessGrid
from ..layout import BlockCyclicLayout

__all__ = ["redistribute", "transpose", "MEMORY_BUDGET_BYTES"]

#: Default upper bound on the bytes one rank sends plus receives in one round.
MEMORY_BUDGET_BYTES = 256 * 2**20

#: Test hook: when not None, destination local matrices are filled with this value right after
#: allocation, so that elements the exchange fails to write show up (e.g. ``float('nan')``).
_DEBUG_FILL: Any = None

RankOf = Callable[[int, int], int]


# -- public API -------------------------------------------------------------------------------
def redistribute(
    A: BlockCyclicArray,
    grid: ProcessGrid | None = None,
    block: int | Sequence[int] | None = None,
    *,
    memory_budget: int | None = None,
) -> BlockCyclicArray:
    """Copy ``A`` into another block-cyclic layout (PBLAS ``pxgemr2d``). Collective.

    Parameters
    ----------
    A : BlockCyclicArray
        The matrix to copy; lazy views (``A.T``, ``A.conj()``, ``A.H``) are honoured: the result
        holds the viewed matrix, of shape ``A.shape``.
    grid : ProcessGrid, optional
        Destination grid (default ``A.grid``). Any shape, but over the same processes and
        backend as ``A.grid`` (e.g. 2x2 -> 1x4).
    block : int or (int, int), optional
        Destination block ``(mb, nb)``; an int means square blocks. Default ``A.block``.
    memory_budget : int, optional
        Upper bound, in bytes, on what one rank sends plus receives per round (default
        :data:`MEMORY_BUDGET_BYTES`); smaller budgets mean more rounds.

    Returns
    -------
    BlockCyclicArray
        A new array (a copy even when the layout is unchanged) with source process ``(0, 0)``.

    Raises
    ------
    ValueError
        Non-positive block sizes, or a grid over different processes or another backend.
    TypeError
        ``A`` is not a BlockCyclicArray, or ``block``/``grid`` have the wrong type.

    Notes
    -----
    Moves ``m * n`` elements at most once each; no flops (conjugation is applied while packing).
    """
    if not isinstance(A, BlockCyclicArray):
        raise TypeError(f"redistribute expects a BlockCyclicArray, got {type(A).__name__}")
    dst_grid = A.grid if grid is None else grid
    _check_grid(A.grid, dst_grid)
    dst_block = A.block if block is None else _check_block(block)
    budget = _check_budget(memory_budget)

    dst_layout = BlockCyclicLayout(shape=A.shape, block=dst_block, grid_shape=dst_grid.shape)
    backend = A.grid.backend
    if not A.is_view and dst_layout == A.layout and dst_grid.same_as(A.grid):
        # same layout: a local copy
        out = _alloc(dst_grid, dst_layout, A.dtype)
        out[...] = A._data
        return BlockCyclicArray(out, dst_layout, dst_grid)

    src_rank_of: RankOf
    if A._transposed:
        # the view op(S)^T is the source S^T described on the transposed grid
        g = A.grid
        src_local = A._data.T
        src_layout = A.layout.transposed()

        def src_rank_of(p: int, q: int) -> int:
            return g.rank_of(q, p)
    else:
        src_local, src_layout, src_rank_of = A._data, A.layout, A.grid.rank_of

    out = _alloc(dst_grid, dst_layout, A.dtype)
    _exchange(
        src_local,
        src_layout,
        src_rank_of,
        out,
        dst_layout,
        dst_grid.rank_of,
        backend,
        conjugate=A._conjugated,
        memory_budget=budget,
    )
    return BlockCyclicArray(out, dst_layout, dst_grid)


def transpose(
    A: BlockCyclicArray, conjugate: bool = False, *, memory_budget: int | None = None
) -> BlockCyclicArray:
    """Materialised (conjugate) transpose of ``A`` on the same grid. Collective.

    Parameters
    ----------
    A : BlockCyclicArray
        The matrix to transpose (a lazy view is transposed as viewed).
    conjugate : bool
        Return ``A^H`` instead of ``A^T`` (no effect on real dtypes).
    memory_budget : int, optional
        See :func:`redistribute`.

    Returns
    -------
    BlockCyclicArray
        ``A.T`` (or ``A.H``) stored with block ``A.block[::-1]`` on ``A.grid``: element
        ``(i, j)`` of ``A`` lands in block ``(J, I)`` of the result, so the block structure is
        kept and each block moves as a whole to the mirrored process.
    """
    if not isinstance(A, BlockCyclicArray):
        raise TypeError(f"transpose expects a BlockCyclicArray, got {type(A).__name__}")
    view = A.T.conj() if conjugate else A.T
    return redistribute(view, grid=A.grid, block=view.block, memory_budget=memory_budget)


# -- argument checks (identical on every rank, before any collective) -------------------------
def _check_block(block: Any) -> tuple[int, int]:
    pair = (block, block) if isinstance(block, Integral) else block
    try:
        mb, nb = pair
    except (TypeError, ValueError):
        raise TypeError(f"block must be an int or a pair (mb, nb), got {block!r}") from None
    for v in (mb, nb):
        if isinstance(v, bool) or not isinstance(v, Integral):
            raise TypeError(f"block sizes must be integers, got block={block!r}")
        if v <= 0:
            raise ValueError(
                f"block sizes must be positive, got block={block!r}; pass e.g. block=(64, 64)"
            )
    return (int(mb), int(nb))


def _check_grid(src: ProcessGrid, dst: Any) -> None:
    if not isinstance(dst, ProcessGrid):
        raise TypeError(f"grid must be a ProcessGrid, got {type(dst).__name__}")
    if dst.size != src.size:
        raise ValueError(
            f"cannot redistribute from a grid of {src.size} processes to a grid of {dst.size}: "
            "the new grid must cover the same processes (create it over the array's "
            "communicator, A.grid.comm)"
        )
    if dst.backend is not src.backend:
        raise ValueError(
            "the new grid must be over the same communicator and backend as the array's grid "
            f"(got backend {dst.backend.name!r} on another communicator or kind, array on "
            f"{src.backend.name!r}); create it with ProcessGrid(..., comm=A.grid.comm, "
            "backend=A.grid.backend.name)"
        )


def _check_budget(memory_budget: Any) -> int:
    if memory_budget is None:
        return int(MEMORY_BUDGET_BYTES)
    if isinstance(memory_budget, bool) or not isinstance(memory_budget, Integral):
        raise TypeError(f"memory_budget must be an int (bytes), got {memory_budget!r}")
    if memory_budget <= 0:
        raise ValueError(f"memory_budget must be positive, got {memory_budget}")
    return int(memory_budget)


def _alloc(grid: ProcessGrid, layout: BlockCyclicLayout, dtype: Any) -> Any:
    out = grid.backend.empty(layout.local_shape(grid.myrow, grid.mycol), dtype)
    if _DEBUG_FILL is not None:
        out[...] = _DEBUG_FILL
    return out


# -- the engine -------------------------------------------------------------------------------
def _owned_in_window(h: int, b: int, nprocs: int) -> int:
    """Most indices one process owns in any ``h`` consecutive indices (block ``b``)."""
    period = b * nprocs
    return (h // period) * b + min(h % period, b)


def _rows_per_round(
    src: BlockCyclicLayout, dst: BlockCyclicLayout, itemsize: int, budget: int
) -> int:
    """Largest stripe height whose per-rank send + receive volume fits ``budget`` (>= 1)."""
    m = src.shape[0]
    cols_src = src.max_local_shape()[1]
    cols_dst = dst.max_local_shape()[1]

    def volume(h: int) -> int:
        return itemsize * (
            _owned_in_window(h, src.block[0], src.grid_shape[0]) * cols_src
            + _owned_in_window(h, dst.block[0], dst.grid_shape[0]) * cols_dst
        )

    lo, hi = 1, max(1, m)  # volume is nondecreasing in h: bisect for the largest fitting h
    if volume(hi) <= budget:
        return hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if volume(mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _my_coords(layout: BlockCyclicLayout, rank_of: RankOf, rank: int) -> tuple[int, int]:
    pr, pc = layout.grid_shape
    for p in range(pr):
        for q in range(pc):
            if rank_of(p, q) == rank:
                return p, q
    raise ValueError(f"rank {rank} is not on the {pr}x{pc} grid of the layout")


def _group(owners: np.ndarray, nprocs: int, offset: int = 0) -> list[np.ndarray]:
    """Split positions ``offset + k`` by ``owners[k]`` (each group ascending)."""
    order = np.argsort(owners, kind="stable")
    counts = np.bincount(owners, minlength=nprocs)
    return np.split(order + offset, np.cumsum(counts)[:-1])


def _owners(indices: np.ndarray, b: int, nprocs: int, src: int) -> np.ndarray:
    return (indices // b + src) % nprocs


def _exchange(
    src_local: Any,
    src_layout: BlockCyclicLayout,
    src_rank_of: RankOf,
    dst_local: Any,
    dst_layout: BlockCyclicLayout,
    dst_rank_of: RankOf,
    backend: Any,
    *,
    conjugate: bool = False,
    memory_budget: int = MEMORY_BUDGET_BYTES,
) -> None:
    """Copy the matrix described by the source into ``dst_local`` (collective, see module doc).

    ``src_local``/``dst_local`` are this rank's local matrices of ``src_layout``/``dst_layout``
    (any strides); ``*_rank_of(prow, pcol)`` gives the rank in ``backend.comm`` of a grid
    position. Both layouts must have the same global shape and cover all ``backend.size``
    ranks. ``conjugate`` conjugates while packing.
    """
    if src_layout.shape != dst_layout.shape:
        raise ValueError(f"shapes differ: {src_layout.shape} vs {dst_layout.shape}")
    m, n = src_layout.shape
    if m == 0 or n == 0:
        return
    xp = backend.xp
    nranks = backend.size
    spr, spc = src_layout.grid_shape
    dpr, dpc = dst_layout.grid_shape
    (smb, snb), (dmb, dnb) = src_layout.block, dst_layout.block
    sp, sq = _my_coords(src_layout, src_rank_of, backend.rank)
    dp, dq = _my_coords(dst_layout, dst_rank_of, backend.rank)
    dst_ranks = [[dst_rank_of(p, q) for q in range(dpc)] for p in range(dpr)]
    src_ranks = [[src_rank_of(p, q) for q in range(spc)] for p in range(spr)]

    # my source rows/cols (global, ascending) and their destination owners; and the reverse
    rows_s = src_layout.local_rows(sp)
    rows_d = dst_layout.local_rows(dp)
    to_row = _owners(rows_s, dmb, dpr, dst_layout.src[0])
    from_row = _owners(rows_d, smb, spr, src_layout.src[0])
    # column groups do not depend on the round: local column positions per peer column
    send_cols = [
        _index(c, xp)
        for c in _group(_owners(src_layout.local_cols(sq), dnb, dpc, dst_layout.src[1]), dpc)
    ]
    recv_cols = [
        _index(c, xp)
        for c in _group(_owners(dst_layout.local_cols(dq), snb, spc, src_layout.src[1]), spc)
    ]

    dtype = dst_local.dtype
    itemsize = np.dtype(dtype).itemsize
    h = _rows_per_round(src_layout, dst_layout, itemsize, memory_budget)
    nothing = xp.empty(0, dtype=dtype)

    for r0 in range(0, m, h):
        # rows [r0, r1) of the global matrix: a contiguous local slice on every process
        r1 = min(m, r0 + h)
        a, b = np.searchsorted(rows_s, (r0, r1))
        c, d = np.searchsorted(rows_d, (r0, r1))
        send_rows = _group(to_row[a:b], dpr, int(a))
        recv_rows = _group(from_row[c:d], spr, int(c))

        # S[my rows & rows of (p', q'), my cols & cols of (p', q')] -> rank of (p', q')
        send: list[Any] = [nothing] * nranks
        for p in range(dpr):
            if send_rows[p].size == 0:
                continue
            rix = _index(send_rows[p], xp)
            for q in range(dpc):
                if _length(send_cols[q]) == 0:
                    continue
                piece = _take(src_local, rix, send_cols[q], xp)
                piece = xp.conj(piece) if conjugate else piece
                send[dst_ranks[p][q]] = xp.ascontiguousarray(piece).reshape(-1)

        recv: list[Any] = [nothing] * nranks
        recv_shape: list[tuple[int, int] | None] = [None] * nranks
        recv_ix: list[Any] = [None] * nranks
        for p in range(spr):
            if recv_rows[p].size == 0:
                continue
            rix = _index(recv_rows[p], xp)
            for q in range(spc):
                ncols = _length(recv_cols[q])
                if ncols == 0:
                    continue
                src_rank = src_ranks[p][q]
                recv[src_rank] = xp.empty(recv_rows[p].size * ncols, dtype=dtype)
                recv_shape[src_rank] = (recv_rows[p].size, ncols)
                recv_ix[src_rank] = (rix, recv_cols[q])

        backend.alltoallv(send, recv)
        del send

        # rank of (p, q) -> D[my rows & rows of (p, q), my cols & cols of (p, q)]
        for k in range(nranks):
            shape = recv_shape[k]
            if shape is not None:
                rix, cix = recv_ix[k]
                _put(dst_local, rix, cix, recv[k].reshape(shape), xp)


def _index(positions: np.ndarray, xp: Any) -> Any:
    """A slice when ``positions`` (ascending) is a contiguous run, else an ``xp`` index array."""
    if positions.size == 0:
        return slice(0, 0)
    first, last = int(positions[0]), int(positions[-1])
    if last - first + 1 == positions.size:
        return slice(first, last + 1)
    return positions if xp is np else xp.asarray(positions)


def _length(ix: Any) -> int:
    return ix.stop - ix.start if isinstance(ix, slice) else int(ix.size)


def _take(a: Any, rows: Any, cols: Any, xp: Any) -> Any:
    if isinstance(rows, slice) or isinstance(cols, slice):
        return a[rows, cols]  # at most one index array: orthogonal indexing
    return a[xp.ix_(rows, cols)]


def _put(a: Any, rows: Any, cols: Any, values: Any, xp: Any) -> None:
    if isinstance(rows, slice) or isinstance(cols, slice):
        a[rows, cols] = values
    else:
        a[xp.ix_(rows, cols)] = values
