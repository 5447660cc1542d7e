"""Dask interop: build a BlockCyclicArray from a Dask array, and view one as a Dask array."""

from __future__ import annotations

import atexit
import functools
import math
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from .._alloc import new_array
from ..array import BlockCyclicArray
from ..grid import ProcessGrid
from ..layout import BlockCyclicLayout
from . import _vectors as vectors
from ._common import (
    BATCH_BYTES,
    agree,
    check_dtype_arg,
    normalize_block,
    resolve_grid,
    stored,
)
from ._deps import require
from ._plan import chunk_bounds, chunk_parts
from ._staging import host_resident
from ._zarr import to_zarr

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
    computes them with ``dask.compute(..., scheduler=scheduler)``: chunks holding none of its
    elements are never computed on that rank, and any chunking works, aligned with the blocks
    or not. On the CPU backend the task that computes a piece also writes it into the local
    matrix (one ``dask.compute``; the host holds only the pieces in flight). On the GPU backend
    the pieces are computed in batches that close once they reach ``batch_bytes`` (one
    ``dask.compute`` per batch), and copied to the device on the calling thread.

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
        Upper bound of one batch on the host, GPU backend (default :data:`BATCH_BYTES`,
        256 MiB).
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
    if x.ndim not in (1, 2):
        raise ValueError(
            f"from_dask needs a 1-D or 2-D Dask array, got {x.ndim} dimensions {x.shape}"
        )
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
    if x.ndim == 1:  # a vector: computed whole by rank 0 and scattered (io/_vectors.py)
        return vectors.read(g, block, dt, "from_dask", lambda: _to_host(x.compute()))

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
        if host_resident(bk):
            # x chunk (i, j)[my rows, my cols] -> local rectangle (lr, lc), written by the task
            # that computed it: one compute, only the pieces in flight held on the host
            put = dask.delayed(functools.partial(_put, out._data, bk), pure=False)
            tasks = [
                put(chunks[i, j], rsel, csel, lr, lc)
                for i, rsel, lr in row_parts
                for j, csel, lc in col_parts
            ]
            dask.compute(*tasks, scheduler=scheduler)
            return
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
    bounds = chunk_bounds(chunks)
    return [
        (p.chunk, _shift(p.select, -int(bounds[p.chunk])), p.local)
        for p in chunk_parts(idx, bounds)
    ]


def _shift(sel: slice | np.ndarray, by: int) -> slice | np.ndarray:
    if isinstance(sel, slice):
        return slice(sel.start + by, sel.stop + by)
    return sel + by


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


def _put(local: Any, backend: Any, chunk: Any, rsel: Any, csel: Any, lr: slice, lc: slice) -> None:
    """``local[lr, lc] = chunk[rsel, csel]`` (one Dask task on a host-resident backend)."""
    local[lr, lc] = _to_backend(_select(chunk, rsel, csel), backend)


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

#: Fraction of a node's available memory that the ``'memory'`` route of :func:`to_dask` may fill
#: with the copies of the matrix its ranks hold (one per rank).
MEMORY_FRACTION = 0.25


def _remove_at_exit() -> None:
    """At interpreter exit: wait until every rank is done with the stores, then rank 0 removes
    them (every rank registered this hook in the same collective to_dask call)."""
    from mpi4py import MPI

    for comm, path in _to_remove_at_exit:
        if not MPI.Is_finalized():
            comm.Barrier()
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)


def to_dask(
    A: BlockCyclicArray,
    *,
    via: str = "auto",
    chunks: Any = "auto",
    tmpdir: str | os.PathLike[str] | None = None,
) -> Any:
    """The global matrix as a Dask array, on every rank. Collective.

    The result is independent of ``A`` (later changes to ``A`` are not seen) and usable on any
    rank after the call. Two routes, chosen by ``via``:

    * ``'memory'``: every rank gathers the matrix (:meth:`~BlockCyclicArray.to_numpy`; on one
      process one copy of the local matrix) and returns a Dask array over that NumPy array; no
      disk. **Each rank holds the whole matrix** as long as the Dask array lives.
    * ``'zarr'``: the ranks write the matrix in parallel into a temporary zarr store (see
      :func:`blasmp_array.io.to_zarr`, uncompressed) and every rank returns
      ``dask.array.from_zarr`` of it: lazy, nothing is held in memory until computed, and a
      rank that computes only a part reads only that part. The store lives in a fresh
      directory created by rank 0 under ``tmpdir`` (default ``$TMPDIR``, else the system's
      temporary directory of rank 0) and is removed at interpreter exit, once every rank has
      reached its exit (a barrier in an ``atexit`` hook). **The directory must be on a
      filesystem that all ranks and every reader of the Dask array share**: ``/tmp`` is fine
      when all ranks run on one node. For a store that outlives the job, use
      ``A.to_zarr(path)`` and ``dask.array.from_zarr(path)``.
    * ``'auto'`` (default): ``'memory'`` on one process; on several, ``'memory'`` when the
      copies of the matrix, one per rank of a node, fit in a quarter of the node's available
      memory (on every node), else ``'zarr'``. The memory route is the faster one where it
      fits (see ``docs/io.md``, "Dask").

    Parameters
    ----------
    A : BlockCyclicArray
        The matrix (lazy views are materialised first).
    via : {'auto', 'memory', 'zarr'}, optional
        The route (see above).
    chunks : 'auto', 'block' or Dask chunks, optional
        Chunks of the Dask array. ``'auto'`` (default): Dask's automatic chunks
        (``dask.config`` ``array.chunk-size``, 128 MiB by default) made of whole blocks, so
        they stay aligned with the blocks and a computed result is assembled from few
        pieces; ``'block'``: one chunk per block ``A.block``; anything else is passed to
        Dask.
    tmpdir : str or PathLike, optional
        Parent directory of the temporary store of the ``'zarr'`` route, seen identically by all
        ranks.

    Returns
    -------
    dask.array.Array
        Shape ``A.shape``, dtype ``A.dtype``.
    """
    dask = require("dask", "to_dask")
    da = require("dask.array", "to_dask")
    if not isinstance(A, BlockCyclicArray):
        raise TypeError(f"to_dask needs a BlockCyclicArray, got {type(A).__name__}")
    if via not in ("auto", "memory", "zarr"):
        raise ValueError(f"via must be 'auto', 'memory' or 'zarr', got {via!r}")
    if tmpdir is not None and not isinstance(tmpdir, str | os.PathLike):
        raise TypeError(f"tmpdir must be a path or None, got {type(tmpdir).__name__}")
    block = A.block
    if isinstance(chunks, str) and chunks == "block":
        chunks = block
    elif isinstance(chunks, str) and chunks == "auto":
        chunks = da.core.normalize_chunks("auto", A.shape, dtype=A.dtype, previous_chunks=block)
    bk = A.grid.backend
    if A.ndim == 1:  # a vector: gathered on every rank (n numbers), whatever the route
        return da.from_array(A.to_numpy(), chunks=chunks)
    if via == "auto":
        via = "memory" if bk.size == 1 or _fits_in_memory(A) else "zarr"
    if via == "memory":
        return _over(dask, da, _snapshot(A), chunks)
    return _via_zarr(da, A, chunks, tmpdir)


def _over(dask: Any, da: Any, a: np.ndarray, chunks: Any) -> Any:
    """A Dask array over the new NumPy array ``a``, which it keeps without copying.

    ``dask.array.from_array`` would copy ``a`` again (Dask >= 2024.12 copies array inputs so
    that later changes to them are not seen; ``a`` is private already) and, without a name,
    hash all of it; one delayed chunk of our own naming, rechunked, does neither.
    """
    name = f"blasmp-to_dask-{uuid.uuid4().hex}"
    whole = da.from_delayed(dask.delayed(a, name=name), a.shape, dtype=a.dtype, meta=a[:0, :0])
    return whole.rechunk(chunks)


def _snapshot(A: BlockCyclicArray) -> np.ndarray:
    """The matrix as a new NumPy array on every rank: on one process one copy of the local
    matrix (:meth:`Backend.to_host`), else :meth:`~BlockCyclicArray.to_numpy`."""
    if A.grid.size > 1:
        gathered = A.to_numpy()
        assert gathered is not None  # root=None: every rank receives
        return gathered
    S = stored(A, "to_dask")
    # the backend's copy to the host: its copy threads (kept between calls) on the CPU, the
    # pinned staging on the GPU
    out: np.ndarray = S.grid.backend.to_host(S._data, all_cores=True)
    return out


def _fits_in_memory(A: BlockCyclicArray) -> bool:
    """Collective: whether every node has room for one copy of ``A`` per rank it runs."""
    bk = A.grid.backend
    need = bk.ranks_on_node * A.shape[0] * A.shape[1] * A.dtype.itemsize
    ok = need <= MEMORY_FRACTION * _available_memory()
    return bool(bk.allreduce(int(ok), op="min"))


def _available_memory() -> int:
    """Bytes of memory available to new allocations on this node (Linux ``MemAvailable``)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def _via_zarr(da: Any, A: BlockCyclicArray, chunks: Any, tmpdir: Any) -> Any:
    """The ``'zarr'`` route of :func:`to_dask`."""
    require("zarr", "to_dask")
    bk = A.grid.backend

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
    to_zarr(stored(A, "to_dask"), store)
    return da.from_zarr(str(store), chunks=chunks)


def _to_host(a: Any) -> np.ndarray:
    """A computed chunk or array on the host (CuPy-backed Dask arrays give device arrays)."""
    return a if isinstance(a, np.ndarray) else np.asarray(a.get() if hasattr(a, "get") else a)
