"""Redistribution between block-cyclic layouts (PBLAS ``pxgemr2d``) and the distributed transpose.

Algorithm
---------
One entry point, :func:`_exchange`, copies a matrix from any block-cyclic *source description*
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
blocks), and pack/unpack them in ascending global (row-major) order, so no indices travel.

Windows (PBLAS ``pxgemr2d``'s ``IA, JA, IB, JB``): the same plan copies only
``S[i0:i0+h, j0:j0+w]`` into ``D[k0:k0+h, l0:l0+w]``, for any offsets: every index vector above
is restricted to the window (a window of a process's owned indices is one contiguous run of its
local positions) and owners are taken at ``index + offset``. :func:`copy_window` is that plan
(with stripes of window rows bounded by the same memory budget, plans cached per layouts and
window); indexing uses it for views that cannot be views, assignment into windows and
concatenation, and :func:`to_layout` for a copy in another source process's layout.

Transports
----------
``'onesided'`` (the default on both backends): the redistribution is a :class:`~._exchange.Plan`
over the one-sided exchange engine of ``ops/engine/_exchange.py`` -- one step per round (below); a
step's messages are the rectangles above, packed on the sender into a symmetric staging slot,
``put_signal`` into the receiver's symmetric slot and unpacked there; the self-message is a
local copy. On the GPU everything stays on the device (packs and unpacks are CuPy slice copies,
or gathers/scatters through device index arrays when a message has more than
:data:`MAX_RECTANGLES` contiguous rectangles, e.g. block 1); the only host collective is the
outcome check at the end of the exchange. Plans (with their device index arrays) are computed
once and cached per (source layout and ranks, destination layout and ranks, dtype size, budget,
stages). ``'alltoallv'``: the previous engine, one ``backend.alltoallv`` per round (host-staged
on the GPU); kept as the conservative reference and selectable with ``transport=``.

Why one-sided on the CPU too (measured 2026-12-03 on the 2-core CI machine, shared with other
jobs (load 6-11), 2 ranks, n = 4096, float64, 1x2 grid, block 256; median over 3 runs of the
median of 5 calls; public API timed between barriers by a throwaway script:
``A.redistribute(block=128)``, ``A.redistribute(grid=2x1)``, ``A.T.resolve()``):

=================================  ==========  ===================  ======================
case                               before      one-sided (default)  ``transport=alltoallv``
=================================  ==========  ===================  ======================
block 256 -> 128                   351 ms      73 ms                375 ms
grid 1x2 -> 2x1                    241 ms      58 ms                251 ms
transpose                          129 ms      75 ms                138 ms
=================================  ==========  ===================  ======================

("before" is commit 9372570. A second set of 3 interleaved runs, load 5-7, gave 660 / 112 /
902 ms, 384 / 84 / 569 ms and 250 / 124 / 344 ms: the machine is noisy, the order is not.)
Most of the gain is the packing (slice copies per contiguous rectangle instead of index-array
gathers; the ``'alltoallv'`` transport keeps the old packing), so the numbers do not isolate
RMA against ``alltoallv``; they show that the one-sided path is not slower. With the bench
command (``mpiexec -n 2 python -m blasmp_array.bench redistribute --n 4096 --block 256 --grid
1x2 --to-grid 1x2 --to-block 128 --profile --repeat 5``, slowest rank) the block change took
0.381 s before and 0.126 s now; ``... bench transpose --n 4096 --block 256 --grid 1x2``
0.129 s (1.04 GB/s).

Memory bound
------------
The matrix is moved in *rounds*, each a stripe of ``h`` consecutive global rows. A process row
owns at most ``(h // (mb * P)) * mb + min(h mod (mb * P), mb)`` rows of any stripe, so the
elements one rank sends plus receives in one round are at most
``own_src(h) * max_local_cols_src + own_dst(h) * max_local_cols_dst``. With the one-sided
transport ``h`` is the largest stripe height keeping ``itemsize`` times this under
``memory_budget // num_stages`` (:data:`MEMORY_BUDGET_BYTES`, 256 MiB by default): the
symmetric workspace of a rank, ``num_stages`` receive slots plus ``num_stages`` staging slots
each sized to the largest round, is then at most ``memory_budget`` bytes (the pool it comes
from, shared with the SUMMA panels, keeps its largest size). With ``'alltoallv'`` the bound is
``memory_budget`` per round (one round's messages in flight). ``h`` and so the number of
rounds are computed from global quantities only, so every rank takes part in the same rounds.
Besides the source and destination local matrices and this staging, no rank ever holds more
than one message's temporary; no rank ever holds the whole matrix.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np

from ..._alloc import new_array
from ...array import BlockCyclicArray
from ...backends._host_copy import assign
from ...backends.base import Backend
from ...grid import ProcessGrid
from ...layout import BlockCyclicLayout
from . import _exchange as engine
from ._warmup import warmup_kernels

__all__ = [
    "redistribute",
    "transpose",
    "copy_window",
    "to_layout",
    "MEMORY_BUDGET_BYTES",
    "TRANSPORT",
    "MAX_RECTANGLES",
]

#: Default upper bound on the bytes one rank sends plus receives in one round.
MEMORY_BUDGET_BYTES = 256 * 2**20

RankOf = Callable[[int, int], int]

#: Transport used per backend name when ``transport=None`` (see the module docstring).
TRANSPORT = {"cpu": "onesided", "gpu": "onesided"}
TRANSPORTS = ("onesided", "alltoallv")

#: A message with more contiguous rectangles than this is packed/unpacked with index arrays
#: (one gather/scatter) instead of one slice copy per rectangle.
MAX_RECTANGLES = 64

#: Test hook: when not None, called with every one-sided :class:`~._exchange.Plan` before it runs.
_PLAN_OBSERVER: Callable[[engine.Plan], None] | None = None


# -- public API -------------------------------------------------------------------------------
def redistribute(
    A: BlockCyclicArray,
    grid: ProcessGrid | None = None,
    block: int | Sequence[int] | None = None,
    *,
    memory_budget: int | None = None,
    num_stages: int = 2,
    transport: str | None = None,
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
        Upper bound, in bytes, on one rank's symmetric staging (one-sided transport: all
        slots of all stages) or on what it sends plus receives per round (``'alltoallv'``);
        default :data:`MEMORY_BUDGET_BYTES`. Smaller budgets mean more rounds.
    num_stages : int
        Rounds in flight in the one-sided exchange (1: no overlap of one round's transfer
        with the previous round's unpacking; 2: double buffering).
    transport : {'onesided', 'alltoallv'}, optional
        Default :data:`TRANSPORT` of the backend (see the module docstring).

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
    stages = _check_stages(num_stages)
    how = _check_transport(transport, A.grid.backend)

    dst_layout = BlockCyclicLayout(shape=A.shape, block=dst_block, grid_shape=dst_grid.shape)
    backend = A.grid.backend
    same = not A.is_view and dst_layout == A.layout and dst_grid.same_as(A.grid)
    # one process holds the whole matrix in its own order whatever the block (a transport
    # named explicitly still runs its exchange)
    alone = transport is None and A.grid.size == 1 and dst_grid.size == 1 and A._window is None
    if same or alone:
        src = A._data.T if A._transposed else A._data
        return _copied_alone(dst_layout, dst_grid, src, A._conjugated)

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

    out = new_array(dst_layout, dst_grid, A.dtype)
    _exchange(
        src_local,
        src_layout,
        src_rank_of,
        out._data,
        dst_layout,
        dst_grid.rank_of,
        backend,
        conjugate=A._conjugated,
        memory_budget=budget,
        num_stages=stages,
        transport=how,
    )
    return out


def transpose(
    A: BlockCyclicArray,
    conjugate: bool = False,
    *,
    memory_budget: int | None = None,
    num_stages: int = 2,
    transport: str | None = None,
) -> BlockCyclicArray:
    """Materialised (conjugate) transpose of ``A`` on the same grid. Collective.

    Parameters
    ----------
    A : BlockCyclicArray
        The matrix to transpose (a lazy view is transposed as viewed).
    conjugate : bool
        Return ``A^H`` instead of ``A^T`` (no effect on real dtypes).
    memory_budget, num_stages, transport
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
    if transport is None and A.grid.size == 1 and not A.is_view:
        return _transpose_alone(A, conjugate)
    view = A.T.conj() if conjugate else A.T
    return redistribute(
        view,
        grid=A.grid,
        block=view.block,
        memory_budget=memory_budget,
        num_stages=num_stages,
        transport=transport,
    )


def _transpose_alone(A: BlockCyclicArray, conjugate: bool) -> BlockCyclicArray:
    """:func:`transpose` of a stored ``A`` on one process: one transposing copy
    (:meth:`Backend.copy_local`: cuBLAS's on a GPU, ``?omatcopy`` on the host), behind as
    little host work as the public call allows (its arguments were checked; the layout is
    cached per source layout)."""
    return _copied_alone(_transposed_layout(A.layout), A.grid, A._data.T, conjugate)


def _copied_alone(
    layout: BlockCyclicLayout, grid: ProcessGrid, src: Any, conjugate: bool
) -> BlockCyclicArray:
    """A new array of ``layout`` on ``grid`` holding the local ``src`` (conjugated where asked
    and complex): one local (transposing, conjugating) copy, :meth:`Backend.copy_local`."""
    out = new_array(layout, grid, src.dtype)
    grid.backend.copy_local(out._data, src, conjugate)
    return out


@functools.lru_cache(maxsize=64)
def _transposed_layout(layout: BlockCyclicLayout) -> BlockCyclicLayout:
    """The layout :func:`redistribute` gives the transpose: source process ``(0, 0)``."""
    return BlockCyclicLayout(layout.shape[::-1], layout.block[::-1], layout.grid_shape[::-1])


# -- windows ----------------------------------------------------------------------------------
def to_layout(x: BlockCyclicArray, like: BlockCyclicArray) -> BlockCyclicArray:
    """A copy of the stored ``x`` in ``like``'s layout and grid (source process included).
    Collective."""
    g = like.grid
    out = BlockCyclicArray(
        g.backend.empty(like.layout.local_shape(g.myrow, g.mycol), x.dtype), like.layout, g
    )
    copy_window(x, (0, 0), out, (0, 0), x.shape)
    return out


def copy_window(
    x: BlockCyclicArray,
    x_off: tuple[int, int],
    y: BlockCyclicArray,
    y_off: tuple[int, int],
    shape: tuple[int, int],
    memory_budget: int | None = None,
    num_stages: int = 2,
    transport: str | None = None,
) -> None:
    """``y[y_off + window] = x[x_off + window]`` for stored arrays ``x`` and ``y`` (no lazy
    flags) on grids over the same processes, ``window`` of ``shape`` (PBLAS ``pxgemr2d`` with
    ``IA, JA, IB, JB``). Collective; casts to ``y``'s dtype. ``memory_budget``, ``num_stages``
    and ``transport`` as in :func:`redistribute`."""
    backend = y.backend
    src = x._data
    if src.dtype != y.dtype:
        # cast before the exchange: a cast inside its packs would be a kernel the warm-up
        # (per moved dtype) has not loaded -- see ops/engine/_warmup.py
        src = src.astype(y.dtype)
    _exchange(
        src,
        x.layout,
        x.grid.rank_of,
        y._data,
        y.layout,
        y.grid.rank_of,
        backend,
        memory_budget=MEMORY_BUDGET_BYTES if memory_budget is None else memory_budget,
        num_stages=num_stages,
        transport=_check_transport(transport, backend),
        window=(x_off, y_off, shape),
    )


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


def _check_stages(num_stages: Any) -> int:
    if isinstance(num_stages, bool) or not isinstance(num_stages, Integral) or num_stages < 1:
        raise ValueError(f"num_stages must be an int >= 1, got {num_stages!r}")
    return int(num_stages)


def _check_transport(transport: Any, backend: Backend) -> str:
    if transport is None:
        return TRANSPORT.get(backend.name, "onesided")
    if transport not in TRANSPORTS:
        raise ValueError(f"transport must be one of {TRANSPORTS}, got {transport!r}")
    return str(transport)


# -- the engine -------------------------------------------------------------------------------
def _owned_in_window(h: int, b: int, nprocs: int) -> int:
    """Most indices one process owns in any ``h`` consecutive indices (block ``b``)."""
    period = b * nprocs
    return (h // period) * b + min(h % period, b)


def _rows_per_round(
    src: BlockCyclicLayout,
    dst: BlockCyclicLayout,
    shape: tuple[int, int],
    itemsize: int,
    budget: int,
) -> int:
    """Largest stripe height of a ``shape`` window whose per-rank send + receive volume fits
    ``budget`` (>= 1)."""
    m, n = shape
    cols_src = _owned_in_window(n, src.block[1], src.grid_shape[1])
    cols_dst = _owned_in_window(n, dst.block[1], dst.grid_shape[1])

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


def _check_window(window: Window, src: tuple[int, int], dst: tuple[int, int]) -> None:
    (si, sj), (di, dj), (m, n) = window
    if min(si, sj, di, dj, m, n) < 0 or si + m > src[0] or sj + n > src[1]:
        raise ValueError(f"window {window} does not fit the {src} source")
    if di + m > dst[0] or dj + n > dst[1]:
        raise ValueError(f"window {window} does not fit the {dst} destination")


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


def _in_window(owned: np.ndarray, start: int, length: int) -> tuple[np.ndarray, int]:
    """The indices ``[start, start + length)`` among a process's ``owned`` global indices
    (ascending, in local order), relative to ``start``, and the local position of the first."""
    lo, hi = np.searchsorted(owned, (start, start + length))
    return owned[lo:hi] - start, int(lo)


Window = tuple[tuple[int, int], tuple[int, int], tuple[int, int]]


def _whole(shape: tuple[int, int]) -> Window:
    """The window covering a whole matrix: ``(source offset, destination offset, shape)``."""
    return (0, 0), (0, 0), shape


@dataclass(frozen=True)
class _WindowSides:
    """One process's part of a window exchange, as a source and as a destination: which of
    its local rows and columns fall in the window and whose they become (or were).

    ``rows_s``: my source rows in the window (relative to its first row), ``rs0`` the local
    position of the first; ``to_row``: their destination process rows (of ``dst_prows``).
    ``rows_d``, ``rd0``, ``from_row``, ``src_prows``: the same for my destination rows.
    ``send_cols[q]`` / ``recv_cols[p]``: my local source columns going to destination process
    column ``q`` / my local destination columns coming from source process column ``p`` (they
    do not depend on the round).
    """

    rows_s: np.ndarray
    rs0: int
    to_row: np.ndarray
    dst_prows: int
    rows_d: np.ndarray
    rd0: int
    from_row: np.ndarray
    src_prows: int
    send_cols: list[np.ndarray]
    recv_cols: list[np.ndarray]

    @classmethod
    def of(
        cls,
        src: BlockCyclicLayout,
        src_coords: tuple[int, int],
        dst: BlockCyclicLayout,
        dst_coords: tuple[int, int],
        window: Window,
    ) -> _WindowSides:
        (si, sj), (di, dj), (m, n) = window
        (sp, sq), (dp, dq) = src_coords, dst_coords
        (spr, spc), (dpr, dpc) = src.grid_shape, dst.grid_shape
        (smb, snb), (dmb, dnb) = src.block, dst.block
        rows_s, rs0 = _in_window(src.local_rows(sp), si, m)
        rows_d, rd0 = _in_window(dst.local_rows(dp), di, m)
        cols_s, cs0 = _in_window(src.local_cols(sq), sj, n)
        cols_d, cd0 = _in_window(dst.local_cols(dq), dj, n)
        return cls(
            rows_s=rows_s,
            rs0=rs0,
            to_row=_owners(rows_s + di, dmb, dpr, dst.src[0]),
            dst_prows=dpr,
            rows_d=rows_d,
            rd0=rd0,
            from_row=_owners(rows_d + si, smb, spr, src.src[0]),
            src_prows=spr,
            send_cols=_group(_owners(cols_s + dj, dnb, dpc, dst.src[1]), dpc, cs0),
            recv_cols=_group(_owners(cols_d + sj, snb, spc, src.src[1]), spc, cd0),
        )

    def row_groups(self, r0: int, r1: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """For window rows ``[r0, r1)`` (a contiguous local slice on every process): my local
        source rows per destination process row, my local destination rows per source one."""
        a, b = np.searchsorted(self.rows_s, (r0, r1))
        c, d = np.searchsorted(self.rows_d, (r0, r1))
        return (
            _group(self.to_row[a:b], self.dst_prows, self.rs0 + int(a)),
            _group(self.from_row[c:d], self.src_prows, self.rd0 + int(c)),
        )


def _exchange(
    src_local: Any,
    src_layout: BlockCyclicLayout,
    src_rank_of: RankOf,
    dst_local: Any,
    dst_layout: BlockCyclicLayout,
    dst_rank_of: RankOf,
    backend: Backend,
    *,
    conjugate: bool = False,
    memory_budget: int = MEMORY_BUDGET_BYTES,
    num_stages: int = 2,
    transport: str = "onesided",
    window: Window | None = None,
) -> None:
    """Copy the matrix described by the source into ``dst_local`` (collective, see module doc).

    ``src_local``/``dst_local`` are this rank's local matrices of ``src_layout``/``dst_layout``
    (any strides); ``*_rank_of(prow, pcol)`` gives the rank in ``backend.comm`` of a grid
    position. Both layouts must cover all ``backend.size`` ranks. ``conjugate`` conjugates
    while packing; the destination's dtype is the one moved (the source is cast while packing).
    ``window`` ``((i0, j0), (k0, l0), (h, w))`` copies only ``S[i0:i0+h, j0:j0+w]`` into
    ``D[k0:k0+h, l0:l0+w]`` (PBLAS's ``IA, JA`` / ``IB, JB``; any offsets); default the whole
    matrix, of the same shape in both layouts.
    """
    if window is None:
        if src_layout.shape != dst_layout.shape:
            raise ValueError(f"shapes differ: {src_layout.shape} vs {dst_layout.shape}")
        window = _whole(src_layout.shape)
    _check_window(window, src_layout.shape, dst_layout.shape)
    m, n = window[2]
    if m == 0 or n == 0:
        return
    if transport == "alltoallv":
        _exchange_alltoallv(
            src_local,
            src_layout,
            src_rank_of,
            dst_local,
            dst_layout,
            dst_rank_of,
            backend,
            conjugate=conjugate,
            memory_budget=memory_budget,
            window=window,
        )
        return
    dtype = np.dtype(dst_local.dtype)
    plan = _plan(
        backend,
        src_layout,
        _rank_table(src_layout, src_rank_of),
        dst_layout,
        _rank_table(dst_layout, dst_rank_of),
        dtype.itemsize,
        memory_budget,
        num_stages,
        window,
    )
    if _PLAN_OBSERVER is not None:
        _PLAN_OBSERVER(plan)
    conj = bool(conjugate) and dtype.kind == "c"
    kernels = _Kernels(src_local, dst_local, conj, backend.xp)
    engine.run_plan(backend, plan, dtype, kernels, num_stages)


# -- the one-sided plan -----------------------------------------------------------------------
RankTable = tuple[tuple[int, ...], ...]


def _rank_table(layout: BlockCyclicLayout, rank_of: RankOf) -> RankTable:
    pr, pc = layout.grid_shape
    return tuple(tuple(int(rank_of(p, q)) for q in range(pc)) for p in range(pr))


@dataclass(frozen=True)
class _Axis:
    """Ascending local positions along one axis, as ``runs`` ``(start, length)`` of contiguous
    positions, (only where index arrays are used) an ``xp`` index or slice, and (where the runs
    are equally long and equally spaced) their ``stride``."""

    runs: tuple[tuple[int, int], ...]
    n: int
    index: Any = None
    stride: int | None = None


@dataclass(frozen=True)
class _Rect:
    """The rectangle ``rows x cols`` of a local matrix; ``loops``: copy it run by run;
    ``strided``: copy it as one 4-D strided view (both axes regular, see :func:`_stride`)."""

    rows: _Axis
    cols: _Axis
    loops: bool
    strided: bool = False

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows.n, self.cols.n)


@dataclass(frozen=True)
class _LocalCopy:
    """The self-message: ``src`` rectangle -> ``dst`` rectangle. ``pieces`` ``(sr, sc, dr, dc,
    nr, nc)``: aligned contiguous blocks to copy one by one, or None (gather + scatter)."""

    src: _Rect
    dst: _Rect
    pieces: tuple[tuple[int, int, int, int, int, int], ...] | None


def _runs(positions: np.ndarray) -> tuple[tuple[int, int], ...]:
    if positions.size == 0:
        return ()
    breaks = np.flatnonzero(np.diff(positions) != 1) + 1
    starts = positions[np.concatenate(([0], breaks))]
    lengths = np.diff(np.concatenate(([0], breaks, [positions.size])))
    return tuple(zip(starts.tolist(), lengths.tolist(), strict=True))


def _stride(runs: tuple[tuple[int, int], ...]) -> int | None:
    """The common distance of the starts of equally long ``runs`` (a single run: its length),
    or None where the lengths or the distances differ. The runs of a block-cyclic layout's
    positions in another's are regular wherever one block size divides the other (say 256 into
    1024): the message is then one strided view of ``count x length`` rows by as many columns."""
    if not runs:
        return None
    length = runs[0][1]
    if len(runs) == 1:
        return length
    step = runs[1][0] - runs[0][0]
    for (a, la), (b, _) in zip(runs, runs[1:], strict=False):
        if la != length or b - a != step:
            return None
    return step if runs[-1][1] == length else None


def _strided(r: _Rect) -> _Rect | None:
    """``r`` as one strided view, where it has several runs and both axes are regular."""
    rr, cr = r.rows.runs, r.cols.runs
    sr, sc = _stride(rr), _stride(cr)
    if len(rr) * len(cr) < 2 or sr is None or sc is None:
        return None
    return _Rect(_Axis(rr, r.rows.n, stride=sr), _Axis(cr, r.cols.n, stride=sc), False, True)


def _rect(rows: np.ndarray, cols: np.ndarray, xp: Any, indexed: bool | None = None) -> _Rect:
    """The rectangle ``rows x cols``: one strided view where both axes are regular and it has
    several runs (chosen when ``indexed`` is None), else run by run up to
    :data:`MAX_RECTANGLES` rectangles, else through index arrays."""
    rr, cr = _runs(rows), _runs(cols)
    by_runs = _Rect(_Axis(rr, int(rows.size)), _Axis(cr, int(cols.size)), True)
    if indexed is None:
        strided = _strided(by_runs)
        if strided is not None:
            return strided
        indexed = len(rr) * len(cr) > MAX_RECTANGLES
    if not indexed:
        return by_runs
    return _Rect(
        _Axis(rr, int(rows.size), engine.positions_index(rows, xp)),
        _Axis(cr, int(cols.size), engine.positions_index(cols, xp)),
        False,
    )


def _align(a: _Axis, b: _Axis) -> list[tuple[int, int, int]]:
    """Split two run lists of equal total length at each other's breaks:
    ``(start in a, start in b, length)`` pieces."""
    out: list[tuple[int, int, int]] = []
    i = j = 0
    ia = ib = 0  # consumed part of the current run of a / b
    while i < len(a.runs) and j < len(b.runs):
        (sa, la), (sb, lb) = a.runs[i], b.runs[j]
        step = min(la - ia, lb - ib)
        out.append((sa + ia, sb + ib, step))
        ia += step
        ib += step
        if ia == la:
            i, ia = i + 1, 0
        if ib == lb:
            j, ib = j + 1, 0
    return out


def _local_copy(
    src_rows: np.ndarray, src_cols: np.ndarray, dst_rows: np.ndarray, dst_cols: np.ndarray, xp: Any
) -> _LocalCopy:
    src, dst = _rect(src_rows, src_cols, xp, False), _rect(dst_rows, dst_cols, xp, False)
    s, d = _strided(src), _strided(dst)
    if s is not None and d is not None:  # two strided views through one packed temporary
        return _LocalCopy(s, d, None)
    rows, cols = _align(src.rows, dst.rows), _align(src.cols, dst.cols)
    if len(rows) * len(cols) <= MAX_RECTANGLES:
        pieces = tuple((sr, sc, dr, dc, nr, nc) for sr, dr, nr in rows for sc, dc, nc in cols)
        return _LocalCopy(src, dst, pieces)
    return _LocalCopy(
        _rect(src_rows, src_cols, xp, True), _rect(dst_rows, dst_cols, xp, True), None
    )


_PLANS: OrderedDict[tuple[Any, ...], tuple[Any, engine.Plan]] = OrderedDict()
_PLAN_CACHE_SIZE = 32


def _plan(
    backend: Backend,
    src_layout: BlockCyclicLayout,
    src_ranks: RankTable,
    dst_layout: BlockCyclicLayout,
    dst_ranks: RankTable,
    itemsize: int,
    budget: int,
    num_stages: int,
    window: Window,
) -> engine.Plan:
    """This rank's redistribution plan, cached per layouts, ranks, item size, budget, stages
    and window."""
    key = (
        id(backend),
        src_layout,
        src_ranks,
        dst_layout,
        dst_ranks,
        itemsize,
        budget,
        num_stages,
        window,
    )
    hit = _PLANS.get(key)
    if hit is not None and hit[0] is backend:
        _PLANS.move_to_end(key)
        return hit[1]
    plan = _build_plan(
        backend.rank,
        backend.size,
        backend.xp,
        src_layout,
        src_ranks,
        dst_layout,
        dst_ranks,
        window,
        _rows_per_round(src_layout, dst_layout, window[2], itemsize, max(1, budget // num_stages)),
    )
    _PLANS[key] = (backend, plan)
    while len(_PLANS) > _PLAN_CACHE_SIZE:
        _PLANS.popitem(last=False)
    return plan


def _build_plan(
    rank: int,
    nranks: int,
    xp: Any,
    src_layout: BlockCyclicLayout,
    src_ranks: RankTable,
    dst_layout: BlockCyclicLayout,
    dst_ranks: RankTable,
    window: Window,
    h: int,
) -> engine.Plan:
    """One step per stripe of ``h`` window rows; every rank computes the global message sizes
    (``P x P`` per step, from owner counts) so that slot offsets and sizes agree everywhere."""
    (si, sj), (di, dj), (m, n) = window
    spr, spc = src_layout.grid_shape
    dpr, dpc = dst_layout.grid_shape
    (smb, snb), (dmb, dnb) = src_layout.block, dst_layout.block
    s_of = np.asarray(src_ranks, dtype=np.int64).reshape(-1)  # rank of src coords p * spc + q
    d_of = np.asarray(dst_ranks, dtype=np.int64).reshape(-1)
    if sorted(s_of.tolist()) != list(range(nranks)) or sorted(d_of.tolist()) != list(range(nranks)):
        raise ValueError(f"both grids must cover the {nranks} ranks once each")
    s_coords = {int(r): divmod(i, spc) for i, r in enumerate(s_of)}
    d_coords = {int(r): divmod(i, dpc) for i, r in enumerate(d_of)}
    sp, sq = s_coords[rank]
    dp, dq = d_coords[rank]

    # global counts: window rows of each (src process row, dst process row) pair; same for cols
    gi, gj = np.arange(m), np.arange(n)
    row_pair = _owners(gi + si, smb, spr, src_layout.src[0]) * dpr + _owners(
        gi + di, dmb, dpr, dst_layout.src[0]
    )
    col_count = np.bincount(
        _owners(gj + sj, snb, spc, src_layout.src[1]) * dpc
        + _owners(gj + dj, dnb, dpc, dst_layout.src[1]),
        minlength=spc * dpc,
    ).reshape(spc, dpc)

    sides = _WindowSides.of(src_layout, (sp, sq), dst_layout, (dp, dq), window)
    send_cols, recv_cols = sides.send_cols, sides.recv_cols

    steps: list[tuple[engine.Message, ...]] = []
    slot_elems = stage_elems = 0
    for r0 in range(0, m, h):
        r1 = min(m, r0 + h)
        row_count = np.bincount(row_pair[r0:r1], minlength=spr * dpr).reshape(spr, dpr)
        # size[sender rank, receiver rank] of this round's messages
        pair = (row_count[:, None, :, None] * col_count[None, :, None, :]).reshape(
            spr * spc, dpr * dpc
        )
        size = np.zeros((nranks, nranks), dtype=np.int64)
        size[np.ix_(s_of, d_of)] = pair
        own = int(size[rank, rank])
        np.fill_diagonal(size, 0)
        offset = np.cumsum(size, axis=0) - size  # receiver slots: senders in rank order
        slot_elems = max(slot_elems, int(size.sum(axis=0).max()))
        stage_elems = max(stage_elems, int(size.sum(axis=1).max()))

        send_rows, recv_rows = sides.row_groups(r0, r1)
        msgs: list[engine.Message] = []
        if own:
            # S[my rows & rows of (dp, dq), my cols & cols of (dp, dq)] -> my D, locally
            copy = _local_copy(send_rows[dp], send_cols[dq], recv_rows[sp], recv_cols[sq], xp)
            msgs.append(engine.Message(rank, (rank,), 0, own, pack=copy))
        for q in np.flatnonzero(size[rank]).tolist():
            # S[my rows & rows of (p', q'), my cols & cols of (p', q')] -> rank q's slot
            p2, q2 = d_coords[q]
            msgs.append(
                engine.Message(
                    rank,
                    (q,),
                    int(offset[rank, q]),
                    int(size[rank, q]),
                    pack=_rect(send_rows[p2], send_cols[q2], xp),
                )
            )
        for p in np.flatnonzero(size[:, rank]).tolist():
            # rank p's slot part -> D[my rows & rows of (p', q'), my cols & cols of (p', q')]
            p2, q2 = s_coords[p]
            msgs.append(
                engine.Message(
                    p,
                    (rank,),
                    int(offset[p, rank]),
                    int(size[p, rank]),
                    unpack=_rect(recv_rows[p2], recv_cols[q2], xp),
                )
            )
        steps.append(tuple(msgs))
    return engine.Plan("redistribute", rank, nranks, tuple(steps), slot_elems, stage_elems)


# -- local data movement of the one-sided plan (run on a stream) -------------------------------
def _gather(xp: Any, a: Any, r: _Rect, out: Any, conjugate: bool = False) -> None:
    """``out[...] = a[r]``, conjugated when asked (``out`` C-contiguous of ``r.shape``); the
    rectangles of a transposed ``a`` go through the BLAS's ``?omatcopy`` on the host."""
    if r.strided and (xp is not np or a.strides[1] == a.itemsize):
        # (a transposed host matrix takes the loop below: ?omatcopy per rectangle)
        view, packed = _blocks(xp, a, r), out.reshape(_blocks_shape(r))
        if conjugate:
            xp.conjugate(view, out=packed)
        else:
            packed[...] = view
        return
    if not r.loops and not r.strided:
        out[...] = _take(a, r.rows.index, r.cols.index, xp)
        if conjugate:
            xp.conjugate(out, out=out)
        return
    i = 0
    for r0, nr in r.rows.runs:
        j = 0
        for c0, nc in r.cols.runs:
            assign(out[i : i + nr, j : j + nc], a[r0 : r0 + nr, c0 : c0 + nc], conjugate)
            j += nc
        i += nr


def _blocks_shape(r: _Rect) -> tuple[int, int, int, int]:
    return (len(r.rows.runs), r.rows.runs[0][1], len(r.cols.runs), r.cols.runs[0][1])


def _blocks(xp: Any, a: Any, r: _Rect) -> Any:
    """The strided rectangle ``r`` of ``a`` as a 4-D view ``(row runs, run length, column runs,
    run length)``, whose row-major order is the packed message's."""
    (r0, _), (c0, _) = r.rows.runs[0], r.cols.runs[0]
    s0, s1 = a.strides
    strides = (r.rows.stride * s0, s0, r.cols.stride * s1, s1)  # type: ignore[operator]
    return xp.lib.stride_tricks.as_strided(a[r0:, c0:], _blocks_shape(r), strides)


def _scatter(xp: Any, a: Any, r: _Rect, values: Any) -> None:
    """``a[r] = values``."""
    if r.strided:
        _blocks(xp, a, r)[...] = values.reshape(_blocks_shape(r))
        return
    if not r.loops:
        _put(a, r.rows.index, r.cols.index, values, xp)
        return
    i = 0
    for r0, nr in r.rows.runs:
        j = 0
        for c0, nc in r.cols.runs:
            a[r0 : r0 + nr, c0 : c0 + nc] = values[i : i + nr, j : j + nc]
            j += nc
        i += nr


class _Kernels:
    """Packs from ``src`` (conjugating if asked) and unpacks into ``dst`` (engine.Kernels)."""

    def __init__(self, src: Any, dst: Any, conjugate: bool, xp: Any) -> None:
        self.src, self.dst, self.conj, self.xp = src, dst, conjugate, xp

    def pack(self, msg: engine.Message, out: Any) -> None:
        r: _Rect = msg.pack
        _gather(self.xp, self.src, r, out.reshape(r.shape), self.conj)

    def unpack(self, msg: engine.Message, data: Any) -> None:
        r: _Rect = msg.unpack
        _scatter(self.xp, self.dst, r, data.reshape(r.shape))

    def local(self, msg: engine.Message) -> None:
        lc: _LocalCopy = msg.pack
        xp, src, dst = self.xp, self.src, self.dst
        if lc.pieces is None and lc.src.strided:
            tmp = xp.empty(lc.src.shape, src.dtype)
            _gather(xp, src, lc.src, tmp, self.conj)
            _scatter(xp, dst, lc.dst, tmp)
            return
        if lc.pieces is None:
            tmp = _take(src, lc.src.rows.index, lc.src.cols.index, xp)
            _put(dst, lc.dst.rows.index, lc.dst.cols.index, xp.conj(tmp) if self.conj else tmp, xp)
            return
        for sr, sc, dr, dc, nr, nc in lc.pieces:
            assign(dst[dr : dr + nr, dc : dc + nc], src[sr : sr + nr, sc : sc + nc], self.conj)


@warmup_kernels(any_dtype=True)
def _warm_redistribute(backend: Backend, xp: Any, dtype: np.dtype) -> None:
    """Every kernel variant of :class:`_Kernels`' pack/unpack/local once, on 6x6 arrays:
    C-ordered and transposed sources, contiguous and strided rectangles, slices and index
    arrays, with and without conjugation."""
    dt = np.dtype(dtype)
    a = xp.zeros((6, 6), dt)
    flat = xp.zeros(36, dt)
    picks = [np.arange(6), np.arange(1, 4), np.array([0, 2, 5]), np.array([0, 1, 3, 4])]
    conjs = (False, True) if dt.kind == "c" else (False,)
    for src in (a, a.T):
        for conj in conjs:
            k = _Kernels(src, a, conj, xp)
            for rows in picks:
                for cols in picks:
                    for indexed in (False, True, None):  # None: strided where regular
                        r = _rect(rows, cols, xp, indexed)
                        size = rows.size * cols.size
                        msg = engine.Message(0, (0,), 0, size, pack=r, unpack=r)
                        k.pack(msg, flat[:size])
                        k.unpack(msg, flat[:size])
                    k.local(engine.Message(0, (0,), 0, 0, _local_copy(rows, cols, rows, cols, xp)))
                    many = _LocalCopy(
                        _rect(rows, cols, xp, True), _rect(rows, cols, xp, True), None
                    )
                    k.local(engine.Message(0, (0,), 0, 0, many))


# -- the alltoallv engine (conservative reference) ---------------------------------------------
def _exchange_alltoallv(
    src_local: Any,
    src_layout: BlockCyclicLayout,
    src_rank_of: RankOf,
    dst_local: Any,
    dst_layout: BlockCyclicLayout,
    dst_rank_of: RankOf,
    backend: Backend,
    *,
    conjugate: bool = False,
    memory_budget: int = MEMORY_BUDGET_BYTES,
    window: Window | None = None,
) -> None:
    """:func:`_exchange` with one ``backend.alltoallv`` per round (the previous engine)."""
    window = _whole(src_layout.shape) if window is None else window
    m, n = window[2]
    xp = backend.xp
    nranks = backend.size
    spr, spc = src_layout.grid_shape
    dpr, dpc = dst_layout.grid_shape
    sp, sq = _my_coords(src_layout, src_rank_of, backend.rank)
    dp, dq = _my_coords(dst_layout, dst_rank_of, backend.rank)
    dst_ranks = [[dst_rank_of(p, q) for q in range(dpc)] for p in range(dpr)]
    src_ranks = [[src_rank_of(p, q) for q in range(spc)] for p in range(spr)]

    sides = _WindowSides.of(src_layout, (sp, sq), dst_layout, (dp, dq), window)
    # column groups do not depend on the round: local column positions per peer column
    send_cols = [engine.positions_index(c, xp) for c in sides.send_cols]
    recv_cols = [engine.positions_index(c, xp) for c in sides.recv_cols]

    dtype = dst_local.dtype
    itemsize = np.dtype(dtype).itemsize
    h = _rows_per_round(src_layout, dst_layout, (m, n), itemsize, memory_budget)
    nothing = xp.empty(0, dtype=dtype)

    for r0 in range(0, m, h):
        # rows [r0, r1) of the global matrix: a contiguous local slice on every process
        r1 = min(m, r0 + h)
        send_rows, recv_rows = sides.row_groups(r0, r1)

        # S[my rows & rows of (p', q'), my cols & cols of (p', q')] -> rank of (p', q')
        send: list[Any] = [nothing] * nranks
        for p in range(dpr):
            if send_rows[p].size == 0:
                continue
            rix = engine.positions_index(send_rows[p], xp)
            for q in range(dpc):
                if _length(send_cols[q]) == 0:
                    continue
                piece = _take(src_local, rix, send_cols[q], xp).astype(dtype, copy=False)
                piece = xp.conj(piece) if conjugate else piece
                send[dst_ranks[p][q]] = xp.ascontiguousarray(piece).reshape(-1)

        recv: list[Any] = [nothing] * nranks
        recv_shape: list[tuple[int, int] | None] = [None] * nranks
        recv_ix: list[Any] = [None] * nranks
        for p in range(spr):
            if recv_rows[p].size == 0:
                continue
            rix = engine.positions_index(recv_rows[p], xp)
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
