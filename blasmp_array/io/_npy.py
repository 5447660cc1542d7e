"""Parallel ``.npy`` I/O through memory maps (NumPy only: no optional dependency)."""

from __future__ import annotations

import os
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
    local_batches,
    local_path,
    normalize_block,
    progress_bar,
    resolve_grid,
    stored,
    write_published,
)

__all__ = ["to_npy", "from_npy"]


def to_npy(
    A: BlockCyclicArray,
    path: str | os.PathLike[str],
    overwrite: bool = False,
    progress: bool = False,
) -> None:
    """Write the matrix to a ``.npy`` file, in parallel through memory maps. Collective.

    Rank 0 creates the file (header and full size) under a temporary sibling name; every rank
    then maps it and writes its own elements; rank 0 renames it to ``path`` once every rank has
    finished without error (on an error anywhere the temporary file is removed and every rank
    raises :class:`~blasmp_array.io.DistributedIOError`). ``path`` is used as given (no
    ``.npy`` suffix is added).

    The ranks write interleaved elements of the same pages, so the file must be on a filesystem
    whose shared memory maps are coherent between the ranks: a local disk or ``/tmp`` of one node
    (all ranks on that node). Across nodes use :meth:`BlockCyclicArray.to_zarr`.

    Parameters
    ----------
    A : BlockCyclicArray
        The matrix (lazy views are materialised first).
    path : str or PathLike
        Destination file.
    overwrite : bool, default False
        Replace an existing file (atomically, after the new one is complete); without it an
        existing ``path`` raises :class:`FileExistsError` on every rank.
    progress : bool, default False
        Progress bar on rank 0 when stdout is a terminal.
    """
    final = local_path(path, "to_npy")
    A = stored(A, "to_npy")
    layout, g, bk = A.layout, A.grid, A.grid.backend
    dtype = A.dtype

    def create(tmp: Path) -> None:
        if layout.shape[0] * layout.shape[1] == 0:
            with open(tmp, "wb") as f:  # np.memmap cannot map an empty array
                np.save(f, np.empty(layout.shape, dtype))
            return
        mm = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=layout.shape)
        mm.flush()
        del mm

    def write(tmp: Path) -> None:
        batches = local_batches(layout, g.myrow, g.mycol, dtype.itemsize, BATCH_BYTES)
        if not batches:
            return
        rows, cols = layout.local_rows(g.myrow), layout.local_cols(g.mycol)
        mm = np.load(tmp, mmap_mode="r+")
        bar = progress_bar(progress, g.rank, len(batches), "to_npy (rank 0)")
        try:
            for lr, lc in batches:
                _write_batch(mm, rows[lr], cols[lc], bk.asnumpy(A._data[lr, lc]))
                bar.update(1)
            mm.flush()
        finally:
            bar.close()
            del mm

    write_published(bk, final, overwrite, "to_npy", create, write)


def _write_batch(mm: np.ndarray, rows: np.ndarray, cols: np.ndarray, values: Any) -> None:
    """Write ``values`` at global ``rows x cols`` of the map. A test hook for fault injection."""
    r, c = as_index(rows), as_index(cols)
    if isinstance(r, slice) and isinstance(c, slice):
        mm[r, c] = values
    else:
        mm[np.ix_(rows, cols)] = values


def from_npy(
    path: str | os.PathLike[str],
    block: int | tuple[int, int] | None = None,
    grid: ProcessGrid | None = None,
    backend: str | None = None,
    *,
    dtype: Any = None,
) -> BlockCyclicArray:
    """Read a 2-D ``.npy`` file into a block-cyclic layout through a memory map. Collective.

    Every rank maps the file read-only and copies out only its own elements, in batches of
    whole local blocks (at most 256 MiB each on the host). C- and Fortran-ordered files work.

    Parameters
    ----------
    path : str or PathLike
        A ``.npy`` file every rank can read.
    block : int or (int, int), optional
        Block shape (default :data:`blasmp_array.creation.DEFAULT_BLOCK`).
    grid : ProcessGrid, optional
        Default: the default grid (of ``backend`` when given).
    backend : {'cpu', 'gpu'}, optional
        Backend of the default grid.
    dtype : dtype, optional
        Convert to this dtype (default: the file's, one of the four BLAS dtypes).

    Returns
    -------
    BlockCyclicArray
    """
    blk = normalize_block(block)
    g = resolve_grid(grid, backend)
    bk = g.backend

    def open_map() -> tuple[tuple[int, ...], str]:
        mm = np.load(os.fspath(path), mmap_mode="r", allow_pickle=False)
        return mm.shape, mm.dtype.str

    # every rank reads the header; all agree that it is readable before allocating
    shape, file_dtype = agree(bk, f"from_npy({os.fspath(path)!r})", open_map)
    if len(shape) != 2:
        raise ValueError(f"from_npy needs a 2-D array, {os.fspath(path)!r} holds shape {shape}")
    dt = check_dtype_arg(dtype, np.dtype(file_dtype), "from_npy")
    out = new_array(BlockCyclicLayout((int(shape[0]), int(shape[1])), blk, g.shape), g, dt)
    layout = out.layout
    rows, cols = layout.local_rows(g.myrow), layout.local_cols(g.mycol)

    def fill() -> None:
        batches = local_batches(layout, g.myrow, g.mycol, dt.itemsize, BATCH_BYTES)
        if not batches:
            return
        mm = np.load(os.fspath(path), mmap_mode="r", allow_pickle=False)
        for lr, lc in batches:
            r, c = as_index(rows[lr]), as_index(cols[lc])
            # file[my rows][:, my cols] -> local batch
            host = (
                mm[r, c]
                if isinstance(r, slice) and isinstance(c, slice)
                else mm[np.ix_(rows[lr], cols[lc])]
            )
            out._data[lr, lc] = bk.asarray(np.asarray(host, dtype=dt))
        del mm

    agree(bk, f"from_npy({os.fspath(path)!r})", fill)
    return out
