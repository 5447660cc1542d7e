"""Dask interop: build a BlockCyclicArray from a Dask array, and view one as a Dask array."""

from __future__ import annotations

import atexit
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .._alloc import new_array
from ..array import BlockCyclicArray
from ..grid import ProcessGrid
from ..layout import BlockCyclicLayout
from ._common import (
    BATCH_BYTES,
    agree,
    as_index,
    check_dtype_arg,
    normalize_block,
    resolve_grid,
)
from ._deps import require

__all__ = ["from_dask", "to_dask"]


def from_dask(
    x: Any,
    block: int | tuple[int, int] | None = None,
    grid: ProcessGrid | None = None,
    backend: str | None = None,
    *,
    dtype: Any = None,
    batch_bytes: int | None = None,
    scheduler: Any = "threads",
) -> BlockCyclicArray:
    """Distribute a 2-D Dask array; each rank computes only the elements it stores. Collective.

    Every rank receives the same (lazy) Dask array ``x``. Rank ``(p, q)`` stores the global rows
    ``rows(p)`` and columns ``cols(q)`` of its block-cyclic tiles (ascending); the part of Dask
    chunk ``(i, j)`` it needs is ``chunk[rows(p) in chunk, cols(q) in chunk]``, and it lands in
    one rectangle of the local matrix (indices ascending in a contiguous global range are
    contiguous in local order). Each rank builds one such selection task per chunk it
    intersects (so the graph grows with the chunks touched, not with the number of tiles) and
    computes them with ``dask.compute(*pieces, scheduler=scheduler)``: chunks holding none of
    its elements are never computed on that rank, and any chunking works, aligned with the
    blocks or not. The pieces are computed in batches that close once they reach
    ``batch_bytes`` (one ``dask.compute`` per batch; a single one when the local matrix fits),
    which bounds the host memory of a rank.

    Parameters
    ----------
    x : dask.array.Array
        A 2-D Dask array with known chunk sizes, backed by NumPy or CuPy chunks (CuPy chunks are
        moved to the host for the CPU backend). It must be the same array on every rank.
    block : int or (int, int), optional
        Block shape ``(mb, nb)`` (default :data:`blasmp_array.creation.DEFAULT_BLOCK`).
    grid : ProcessGrid, optional
        Default: the default grid (of ``backend`` when given).
    backend : {'cpu', 'gpu'}, optional
        Backend of the default grid; must agree with ``grid.backend`` when both are given.
    dtype : dtype, optional
        Convert to this dtype; by default ``x.dtype`` (one of float32, float64, complex64,
        complex128).
    batch_bytes : int, optional
        Upper bound of one batch on the host (default :data:`BATCH_BYTES`, 256 MiB).
    scheduler : optional
        Dask scheduler used by each rank (default ``'threads'``).

    Returns
    -------
    BlockCyclicArray
        ``from_dask(x).to_numpy()`` equals ``x.compute()`` bit for bit.

    Raises
    ------
    ImportError
        Dask is not installed (install the ``dask`` extra).
    TypeError
        ``x`` is not a Dask array, or its dtype is not supported and ``dtype`` is not given.
    ValueError
        ``x`` is not 2-D or has unknown chunk sizes; bad ``block``, ``grid`` or ``batch_bytes``.
    """
    dask = require("dask", "from_dask")
    da = require("dask.array", "from_dask")
    if not isinstance(x, da.Array):
        raise TypeError(
            f"from_dask expects a dask.array.Array, got {type(x).__name__}; "
            "use blasmp_array.from_numpy for NumPy arrays"
        )
    if x.ndim != 2:
        raise ValueError(f"from_dask needs a 2-D Dask array, got {x.ndim} dimensions {x.shape}")
    if any(math.isnan(s) for s in x.shape):
        raise ValueError(
            "from_dask needs known chunk sizes, got shape "
            f"{x.shape}; call x.compute_chunk_sizes() first"
        )
    dt = check_dtype_arg(dtype, x.dtype, "from_dask")
    blk = normalize_block(block)
    budget = BATCH_BYTES if batch_bytes is None else batch_bytes
    if not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0:
        raise ValueError(f"batch_bytes must be a positive int, got {batch_bytes!r}")
    g = resolve_grid(grid, backend)
    if x.dtype != dt:
        x = x.astype(dt)

    out = new_array(BlockCyclicLayout((int(x.shape[0]), int(x.shape[1])), blk, g.shape), g, dt)
    layout, bk = out.layout, g.backend
    rows, cols = layout.local_rows(g.myrow), layout.local_cols(g.mycol)

    def fill() -> None:
        row_parts = _parts(rows, x.chunks[0])
        col_parts = _parts(cols, x.chunks[1])
        if not row_parts or not col_parts:
            return
        chunks = x.to_delayed()
        select = dask.delayed(_select, pure=True)
        batch: list[tuple[slice, slice, Any]] = []
        size = 0
        for i, rsel, lr in row_parts:
            for j, csel, lc in col_parts:
                # x chunk (i, j)[my rows, my cols] -> local rectangle (lr, lc)
                batch.append((lr, lc, select(chunks[i, j], rsel, csel)))
                size += (lr.stop - lr.start) * (lc.stop - lc.start) * dt.itemsize
                if size >= budget:
                    _place(dask, batch, out._data, bk, scheduler)
                    batch, size = [], 0
        _place(dask, batch, out._data, bk, scheduler)

    # a failure on one rank (e.g. a chunk that cannot be computed) fails the call everywhere
    agree(bk, "from_dask", fill)
    return out


def _parts(idx: np.ndarray, chunks: tuple[int, ...]) -> list[tuple[int, Any, slice]]:
    """For each chunk along one axis holding some of the ascending global indices ``idx``:
    ``(chunk number, selection inside the chunk, slice of positions in idx)``."""
    bounds = np.concatenate([[0], np.cumsum(chunks, dtype=np.int64)])
    pos = np.searchsorted(idx, bounds)
    parts = []
    for k in range(len(chunks)):
        if pos[k + 1] > pos[k]:
            inside = idx[pos[k] : pos[k + 1]] - bounds[k]
            parts.append((k, as_index(inside), slice(int(pos[k]), int(pos[k + 1]))))
    return parts


def _select(chunk: Any, rsel: Any, csel: Any) -> Any:
    """``chunk[rsel, csel]`` (outer indexing; one copy), for NumPy and CuPy chunks."""
    if type(chunk).__module__.split(".")[0] == "cupy":
        import cupy

        # index arrays on the chunk's device; select rows, then columns
        rsel = rsel if isinstance(rsel, slice) else cupy.asarray(rsel)
        csel = csel if isinstance(csel, slice) else cupy.asarray(csel)
        return chunk[rsel][:, csel]
    if isinstance(rsel, slice) or isinstance(csel, slice):
        return chunk[rsel, csel]
    return chunk[np.ix_(rsel, csel)]


def _place(
    dask: Any, batch: list[tuple[slice, slice, Any]], local: Any, bk: Any, scheduler: Any
) -> None:
    """Compute one batch of pieces in one ``dask.compute`` and copy them into ``local``."""
    if not batch:
        return
    values = dask.compute(*(piece for _, _, piece in batch), scheduler=scheduler)
    for (lr, lc, _), value in zip(batch, values, strict=True):
        local[lr, lc] = _to_backend(value, bk)


def _to_backend(a: Any, backend: Any) -> Any:
    """Move a computed piece (NumPy or CuPy) to the backend's memory."""
    if backend.name != "gpu" and type(a).__module__.split(".")[0] == "cupy":
        a = a.get()  # CuPy chunk -> host for the CPU backend
    return backend.asarray(a)


_to_remove_at_exit: list[tuple[Any, Path | None]] = []


def _remove_at_exit() -> None:
    """At interpreter exit: wait until every rank is done with the stores, then rank 0 removes
    them (every rank registered this hook in the same collective to_dask call)."""
    from mpi4py import MPI

    for comm, path in _to_remove_at_exit:
        if not MPI.Is_finalized():
            comm.Barrier()
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)


def to_dask(A: BlockCyclicArray, *, tmpdir: str | os.PathLike[str] | None = None) -> Any:
    """The global matrix as a lazy Dask array chunked by the block size. Collective.

    The ranks write the matrix in parallel into a temporary zarr store (one chunk per block,
    see :func:`blasmp_array.io.to_zarr`) and every rank returns ``dask.array.from_zarr`` of it,
    usable on any rank after the call and independent of ``A`` (later changes to ``A`` are not
    seen).

    The store lives in a fresh directory created by rank 0 under ``tmpdir`` (default
    ``$TMPDIR``, else the system's temporary directory of rank 0) and is removed at interpreter
    exit, once every rank has reached its exit (a barrier in an ``atexit`` hook).
    **The directory must be on a filesystem that all ranks and every reader of the Dask array
    share**: ``/tmp`` is fine when all ranks run on one node; on several nodes pass a directory
    of a shared filesystem. For a store that outlives the job, use
    ``A.to_zarr(path)`` and ``dask.array.from_zarr(path)``.

    Parameters
    ----------
    A : BlockCyclicArray
        The matrix (lazy views are materialised first).
    tmpdir : str or PathLike, optional
        Parent directory of the temporary store, seen identically by all ranks.

    Returns
    -------
    dask.array.Array
        Shape ``A.shape``, dtype ``A.dtype``, chunks ``A.block``.
    """
    da = require("dask.array", "to_dask")
    require("zarr", "to_dask")
    from ._zarr import to_zarr

    if not isinstance(A, BlockCyclicArray):
        raise TypeError(f"to_dask needs a BlockCyclicArray, got {type(A).__name__}")
    bk = A.grid.backend
    if tmpdir is not None and not isinstance(tmpdir, str | os.PathLike):
        raise TypeError(f"tmpdir must be a path or None, got {type(tmpdir).__name__}")

    def make_dir() -> str | None:
        if bk.rank != 0:
            return None
        parent = os.fspath(tmpdir) if tmpdir is not None else tempfile.gettempdir()
        return tempfile.mkdtemp(prefix="blasmp-to_dask-", dir=parent)

    # the directory is made on rank 0 and its path broadcast, so every rank agrees on it
    directory = bk.bcast(agree(bk, "to_dask: creating the temporary directory", make_dir), root=0)
    if not _to_remove_at_exit:
        atexit.register(_remove_at_exit)
    _to_remove_at_exit.append((bk.comm, Path(directory) if bk.rank == 0 else None))
    store = Path(directory) / "array.zarr"
    to_zarr(A, store)
    return da.from_zarr(str(store))
