"""Index plans of the I/O paths: which global rows and columns a rank stores, cut into the
pieces that one chunk read, one chunk write or one host copy moves.

A rank ``(p, q)`` stores the global rows ``rows(p)`` and columns ``cols(q)`` (ascending); its
local matrix is ``global[rows(p)][:, cols(q)]``. Every plan here works on these two index sets,
so it serves any layout, and any chunking of a store, alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..layout import BlockCyclicLayout

__all__ = [
    "Part",
    "Run",
    "as_index",
    "bands",
    "chunk_bounds",
    "chunk_parts",
    "runs",
]


class Part(NamedTuple):
    """The indices of one chunk along one axis that a rank stores."""

    #: chunk number along the axis
    chunk: int
    #: global indices, as a slice when contiguous, else an ascending index array
    select: slice | np.ndarray
    #: their positions in the rank's local matrix (always contiguous)
    local: slice


class Run(NamedTuple):
    """A maximal range of consecutive global indices that a rank stores along one axis."""

    #: global indices
    span: slice
    #: positions in the rank's local matrix
    local: slice


def as_index(idx: np.ndarray) -> slice | np.ndarray:
    """A slice when the ascending indices ``idx`` are consecutive, else ``idx`` itself."""
    if idx.size and int(idx[-1]) - int(idx[0]) + 1 == idx.size:
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx


def chunk_bounds(chunks: Sequence[int]) -> np.ndarray:
    """Start of every chunk along an axis, and the axis length: ``[0, c0, c0 + c1, ..., n]``."""
    return np.concatenate([[0], np.cumsum(np.asarray(chunks, dtype=np.int64))])


def chunk_parts(idx: np.ndarray, bounds: np.ndarray) -> list[Part]:
    """For every chunk (``bounds`` from :func:`chunk_bounds`) that holds some of the ascending
    global indices ``idx``: those indices and their positions in ``idx``.

    Indices ascending in one contiguous global range are contiguous in local order, so the
    positions are always a slice.
    """
    pos = np.searchsorted(idx, bounds)
    return [
        Part(k, as_index(idx[pos[k] : pos[k + 1]]), slice(int(pos[k]), int(pos[k + 1])))
        for k in range(len(bounds) - 1)
        if pos[k + 1] > pos[k]
    ]


def runs(idx: np.ndarray) -> list[Run]:
    """The ascending global indices ``idx`` as maximal runs of consecutive indices.

    Along an axis of a block-cyclic layout these are the rank's blocks, merged where they
    touch: one run for the whole axis on a grid of one process along it.
    """
    if idx.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    starts = np.concatenate([[0], breaks])
    stops = np.concatenate([breaks, [idx.size]])
    return [
        Run(slice(int(idx[a]), int(idx[b - 1]) + 1), slice(int(a), int(b)))
        for a, b in zip(starts, stops, strict=True)
    ]


def bands(
    layout: BlockCyclicLayout, prow: int, pcol: int, itemsize: int, budget: int
) -> list[slice]:
    """Cut the local matrix of ``(prow, pcol)`` into bands of whole local block rows of at most
    ``budget`` bytes each (at least one block row). Returns the bands' local row slices.

    A band of a C-ordered local matrix is contiguous, so it moves between device and host in
    one copy.
    """
    ml, nl = layout.local_shape(prow, pcol)
    if ml == 0 or nl == 0:
        return []
    mb = layout.block[0]
    per_block_row = max(1, mb * nl * itemsize)
    step = max(1, budget // per_block_row) * mb
    return [slice(r, min(ml, r + step)) for r in range(0, ml, step)]
