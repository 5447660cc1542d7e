"""Replicated operands: a NumPy (or, on the GPU, CuPy) array beside a BlockCyclicArray.

In matmul, the solves, elementwise operations and comparisons, an ndarray operand is taken to be
the same array on every rank, as :func:`blasmp_array.from_numpy` takes it (``root=None``): each
rank copies out the elements its layout needs, with no communication. Ranks that do not hold the
same array would silently compute garbage, so one cheap collective checks it first:
:func:`check_replicated` all-gathers each operand's shape, dtype and a checksum of its bytes and
raises the same ``ValueError`` on every rank when they differ. Implicit gathers stay refused
(``np.asarray(A)`` still says to call ``A.to_numpy()``).

The checksum is CRC-32 of the bytes for a host array (zlib, one pass, no copy of a contiguous
array) and, for a device array, two 64-bit sums of its 32-bit words (plain and position-weighted)
computed on the device, so no device array is copied to the host to be checked.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._alloc import new_array
from ...grid import ProcessGrid
from ...layout import BlockCyclicLayout

__all__ = [
    "Replicated",
    "is_replicated",
    "replicated",
    "check_replicated",
    "local_part",
    "distribute",
]


@dataclass(frozen=True)
class Replicated:
    """An ndarray operand given on every rank (NumPy, or CuPy on the GPU backend)."""

    array: Any

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.array.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.array.dtype)

    @property
    def on_device(self) -> bool:
        return not isinstance(self.array, np.ndarray)


def is_replicated(x: Any) -> bool:
    """Whether ``x`` is an ndarray that an operation takes as replicated (NumPy with at least
    one dimension, or a CuPy array): a 0-d array is a scalar."""
    if isinstance(x, np.ndarray):
        return x.ndim > 0
    return hasattr(x, "__cuda_array_interface__") and getattr(x, "ndim", 0) > 0


def replicated(x: Any) -> Replicated:
    """``x`` (see :func:`is_replicated`) as a :class:`Replicated` operand."""
    return Replicated(x)


def _checksum(a: Any) -> tuple[int, int]:
    if isinstance(a, np.ndarray):
        c = np.ascontiguousarray(a)
        return zlib.crc32(c.view(np.uint8).reshape(-1).data), c.size
    xp = _module_of(a)
    flat = xp.ascontiguousarray(a).reshape(-1)
    words = flat.view(xp.uint32 if flat.dtype.itemsize % 4 == 0 else xp.uint8).astype(xp.uint64)
    weights = xp.arange(1, words.size + 1, dtype=xp.uint64)
    both = xp.stack([words.sum(), (words * weights).sum()])
    s1, s2 = (int(v) for v in both.get())
    return s1, s2


def _module_of(a: Any) -> Any:
    """The array module of a device array (its class's top-level package), found without
    importing a CUDA library here."""
    import sys

    return sys.modules[type(a).__module__.split(".")[0]]


def check_replicated(operands: list[Replicated], grid: ProcessGrid, what: str) -> None:
    """``ValueError`` on every rank unless every rank holds the same ``operands`` (shape,
    dtype and checksum compared in one allgather). Collective (nothing on a 1-process grid)."""
    if not operands or grid.size == 1:
        return
    mine = [(r.shape, r.dtype.str, _checksum(r.array)) for r in operands]
    every = grid.backend.allgather(mine)
    for i, r in enumerate(operands):
        sigs = [e[i] for e in every]
        if any(s != sigs[0] for s in sigs):
            differ = sorted({p for p, s in enumerate(sigs) if s != sigs[0]})
            kinds = [
                name
                for k, name in enumerate(("shapes", "dtypes", "values"))
                if any(s[k] != sigs[0][k] for s in sigs)
            ]
            raise ValueError(
                f"{what}: a {type(r.array).__module__.split('.')[0]} array operand is taken to be "
                f"the same on every rank (as bm.from_numpy(a) takes it), but ranks {differ} hold "
                f"other {' and '.join(kinds)} than rank 0 ({sigs[0][0]} {sigs[0][1]}). Pass the "
                "same array everywhere, or distribute it from one rank with "
                "bm.from_numpy(a, root=r, block=..., grid=...)"
            )


def local_part(a: Any, rows: np.ndarray, cols: np.ndarray, ndim: int) -> Any:
    """This rank's piece of the replicated ``a`` in an ``ndim``-D result (NumPy's broadcasting)
    whose 2-D face holds global ``rows`` x ``cols`` here (a vector result: its column face):
    an array that broadcasts against the local matrix (a dimension of length 1 of ``a`` stays
    of length 1). A 1-D ``a`` is a column of a vector result and a row of a matrix result."""
    if a.ndim == 1:
        a = a.reshape(-1, 1) if ndim == 1 else a.reshape(1, -1)
    ri = np.zeros(1, np.intp) if a.shape[0] == 1 else rows
    ci = np.zeros(1, np.intp) if a.shape[1] == 1 else cols
    if isinstance(a, np.ndarray):
        return a[np.ix_(ri, ci)]
    xp = _module_of(a)
    return a[xp.asarray(ri)[:, None], xp.asarray(ci)[None, :]]


def distribute(a: Any, layout: BlockCyclicLayout, grid: ProcessGrid, dtype: Any = None) -> Any:
    """The replicated 2-D ``a`` as a new array of ``layout`` on ``grid`` (each rank copies out
    its elements; no communication: check with :func:`check_replicated` first)."""
    out = new_array(layout, grid, np.dtype(a.dtype) if dtype is None else dtype)
    if out._data.size:
        if grid.size == 1:  # the local matrix is all of a: no index arrays, one copy
            piece = a
        else:
            rows, cols = layout.local_rows(grid.myrow), layout.local_cols(grid.mycol)
            piece = local_part(a, rows, cols, 2)
        out._data[...] = grid.backend.asarray(piece).astype(out.dtype, copy=False)
    return out
