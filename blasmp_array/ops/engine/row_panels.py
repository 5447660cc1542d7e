"""Row panels of a distributed matrix gathered onto one rank, or scattered from it, over the
one-sided exchange: the device route of ``A.to_numpy()`` and ``bm.from_numpy(..., root=r)``.

A panel is global rows ``[r0, r1)`` of the matrix, all its columns. It is described as a
block-cyclic layout of one ``(r1 - r0) x n`` block whose source process is the rank that
holds it, so that moving rows ``[r0, r1)`` between that layout and the array's is a windowed
redistribution (PBLAS ``pxgemr2d``, :func:`.redistribute._exchange`): on the GPU it runs device
to device over NVSHMEM (the 4-rank transposing redistribution moved 2 GiB in 3.9 ms on one
H200), so the one rank then copies the panel between its device and the host in one stream of
pinned chunks, instead of every rank's part crossing host MPI. Lazy transposes and conjugates
are applied by the exchange's packing, as :func:`.redistribute.redistribute` does.

``creation.gather`` and ``creation.from_numpy`` reach these through ``_dispatch``
(``gather_rows``, ``scatter_rows``); they choose the route and the panel height (bounded, so
the extra device memory is one panel plus the exchange's workspace).
"""

from __future__ import annotations

from typing import Any

from ..._dispatch import implements_method
from ...array import BlockCyclicArray
from ...layout import BlockCyclicLayout
from .redistribute import RankOf, _exchange

__all__ = ["gather_rows", "scatter_rows"]


def _panel_layout(a: BlockCyclicArray, h: int, rank: int) -> BlockCyclicLayout:
    """Rows ``h x a.shape[1]`` as one block held by ``rank`` on ``a``'s grid."""
    n = a.shape[1]
    return BlockCyclicLayout((h, n), (max(h, 1), max(n, 1)), a.grid.shape, a.grid.coords_of(rank))


def gather_rows(a: BlockCyclicArray, r0: int, r1: int, rank: int, out: Any = None) -> Any:
    """Rows ``[r0, r1)`` of ``a`` (as viewed: transposes and conjugates applied) onto ``rank``.

    Collective; every rank passes the same ``r0``, ``r1`` and ``rank``. ``a`` must not be a
    window view (materialise it first).

    Parameters
    ----------
    a : BlockCyclicArray
    r0, r1 : int
        The global rows, ``0 <= r0 <= r1 <= a.shape[0]``.
    rank : int
        The rank that receives the panel.
    out : backend array, optional
        On ``rank``: a C-ordered ``(r1 - r0, a.shape[1])`` array of ``a.dtype`` to fill (a new
        one if omitted). Ignored elsewhere.

    Returns
    -------
    backend array or None
        The panel on ``rank``, ``None`` elsewhere.
    """
    if a.is_window:
        raise ValueError("gather_rows: materialise a window view first")
    g, backend = a.grid, a.backend
    h, n = r1 - r0, a.shape[1]
    dst = _panel_layout(a, h, rank)
    mine = dst.local_shape(g.myrow, g.mycol)
    if g.rank == rank:
        local = backend.xp.empty(mine, dtype=a.dtype) if out is None else out
    else:
        local = backend.xp.empty(mine, dtype=a.dtype)
    src_rank_of: RankOf
    if a._transposed:
        # the view op(S)^T is the source S^T on the transposed grid (as in redistribute)
        src_local, src_layout = a._data.T, a.layout.transposed()

        def src_rank_of(p: int, q: int) -> int:
            return g.rank_of(q, p)
    else:
        src_local, src_layout, src_rank_of = a._data, a.layout, g.rank_of
    _exchange(
        src_local,
        src_layout,
        src_rank_of,
        local,
        dst,
        g.rank_of,
        backend,
        conjugate=a._conjugated,
        window=((r0, 0), (0, 0), (h, n)),
    )
    return local if g.rank == rank else None


def scatter_rows(a: BlockCyclicArray, r0: int, r1: int, rank: int, panel: Any = None) -> None:
    """Rows ``[r0, r1)`` of ``a`` (a stored array, not a view) from ``rank``'s ``panel``.

    Collective; every rank passes the same ``r0``, ``r1`` and ``rank``. ``panel`` is, on
    ``rank``, a ``(r1 - r0, a.shape[1])`` backend array holding the rows (ignored elsewhere).
    """
    if a.is_view:
        raise ValueError("scatter_rows writes into a stored array, not a view")
    g, backend = a.grid, a.backend
    h, n = r1 - r0, a.shape[1]
    src = _panel_layout(a, h, rank)
    if g.rank == rank:
        if panel is None or tuple(panel.shape) != (h, n):
            raise ValueError(f"scatter_rows: rank {rank} needs the {(h, n)} panel")
        local = panel
    else:
        local = backend.xp.empty(src.local_shape(g.myrow, g.mycol), dtype=a.dtype)
    _exchange(
        local,
        src,
        g.rank_of,
        a._data,
        a.layout,
        g.rank_of,
        backend,
        window=((0, 0), (r0, 0), (h, n)),
    )


implements_method("gather_rows")(gather_rows)
implements_method("scatter_rows")(scatter_rows)
