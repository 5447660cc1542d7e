"""Parallel ``.npy`` I/O through memory maps: every rank copies its own rectangles of the file.

A rank's elements form rectangles of the global matrix: the runs of consecutive rows it
stores times the runs of consecutive columns (one run per block, merged where blocks touch: a
whole axis on a grid of one process along it). Each rectangle is one strided copy between the
memory map and the local matrix, on a few threads per rank (:func:`copy_rects`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from .._alloc import new_array
from ..array import BlockCyclicArray
from ..grid import ProcessGrid
from ..layout import BlockCyclicLayout
from . import _vectors as vectors
from ._common import (
    agree,
    check_dtype_arg,
    check_flag,
    host_threads,
    local_path,
    normalize_block,
    on_root,
    progress_bar,
    resolve_grid,
    stored,
    write_published,
)
from ._plan import runs
from ._staging import read_into, write_from

__all__ = ["to_npy", "from_npy", "copy_rects", "Rect"]

#: ``(global rows, global cols, host rows, host cols)`` of one rectangle
Rect = tuple[slice, slice, slice, slice]


def rects(rows: np.ndarray, col_runs: list[Any]) -> list[Rect]:
    """The rectangles of the global ``rows`` (a band of local rows) x the rank's column runs,
    with their positions in the band."""
    return [(r.span, c.span, r.local, c.local) for r in runs(rows) for c in col_runs]


def copy_rects(
    parts: list[Rect],
    copy: Callable[[Rect], None],
    threads: int,
    bar: Any,
) -> None:
    """``copy(rect)`` for every rectangle, on ``threads`` threads (NumPy's copies release the
    GIL); the first error is raised after the copies in flight end."""

    def one(rect: Rect) -> None:
        copy(rect)
        bar.update(1)

    if threads <= 1 or len(parts) <= 1:
        for rect in parts:
            one(rect)
        return
    with ThreadPoolExecutor(min(threads, len(parts)), thread_name_prefix="blasmp-io") as pool:
        for _ in pool.map(one, parts):
            pass


# -- writing ---------------------------------------------------------------------------------
def to_npy(
    A: BlockCyclicArray,
    path: str | os.PathLike[str],
    overwrite: bool = False,
    progress: bool = False,
) -> None:
    """Write the matrix to a ``.npy`` file, in parallel through memory maps. Collective.

    Rank 0 creates the file (header and full size) under a temporary sibling name; every rank
    then maps it and copies its own rectangles of the matrix into it, on a few threads; rank 0
    renames it to ``path`` once every rank has finished without error (on an error anywhere the
    temporary file is removed and every rank raises
    :class:`~blasmp_array.io.DistributedIOError`). ``path`` is used as given (no ``.npy``
    suffix is added). On the GPU backend the local matrix goes to the host in bands of whole
    block rows (at most 64 MiB).

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
        existing ``path`` raises :class:`FileExistsError` on every rank. A directory is never
        replaced.
    progress : bool, default False
        Progress bar on rank 0 when stdout is a terminal.

    Raises
    ------
    FileNotFoundError, PermissionError, FileExistsError
        The directory is missing or not writable, or ``path`` exists; on every rank, before any
        data moves.
    DistributedIOError
        Writing failed on some rank; nothing was published.
    """
    final = local_path(path, "to_npy")
    check_flag(progress, "progress")
    A = stored(A, "to_npy")
    if A.ndim == 1:  # a vector: gathered and written whole by rank 0 (io/_vectors.py)
        vectors.write(A, final, overwrite, "to_npy", _save, replaceable=not_a_file)
        return
    layout, bk = A.layout, A.grid.backend
    dtype = A.dtype
    threads = host_threads(bk)

    def create(tmp: Path) -> None:
        if layout.shape[0] * layout.shape[1] == 0:
            with open(tmp, "wb") as f:  # np.memmap cannot map an empty array
                np.save(f, np.empty(layout.shape, dtype))
            return
        mm = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=layout.shape)
        mm.flush()
        del mm

    def write(tmp: Path) -> None:
        if A._data.size == 0:
            return
        write_map(A, np.load(tmp, mmap_mode="r+"), threads, progress, "to_npy", _write_rect)

    write_published(
        bk,
        final,
        overwrite,
        "to_npy",
        create,
        write,
        replaceable=not_a_file,
    )


def not_a_file(path: Path) -> str | None:
    """Why an existing ``path`` must not be replaced by a file written there: a directory."""
    return "is a directory" if path.is_dir() else None


def write_map(
    A: BlockCyclicArray,
    mm: np.memmap,
    threads: int,
    progress: bool,
    what: str,
    put: Callable[[Any, slice, slice, np.ndarray], None] | None = None,
) -> None:
    """Every rank: its elements of ``A`` into ``mm``, a memory map of the whole matrix (a
    ``.npy`` file's, an HDF5 dataset's bytes), by rectangles on ``threads`` threads, each stored
    by ``put(mm, rows, cols, values)`` (default: an assignment); then flushed."""
    layout, g, bk = A.layout, A.grid, A.grid.backend
    rows, cols = layout.local_rows(g.myrow), layout.local_cols(g.mycol)
    col_runs = runs(cols)
    bar = progress_bar(progress, g.rank, len(runs(rows)) * len(col_runs), what, "rect")

    def sink(host: np.ndarray, band: slice) -> None:
        def copy(rect: Rect) -> None:
            gr, gc, hr, hc = rect
            if put is None:
                mm[gr, gc] = host[hr, hc]  # local rectangle -> the file's bytes
            else:
                put(mm, gr, gc, host[hr, hc])

        copy_rects(rects(rows[band], col_runs), copy, threads, bar)

    try:
        write_from(bk, A._data, layout, (g.myrow, g.mycol), sink)
        mm.flush()
    finally:
        bar.close()


def _save(tmp: Path, host: np.ndarray) -> None:
    with open(tmp, "wb") as f:  # np.save(path) would append ".npy" to the temporary name
        np.save(f, host)


def _write_rect(mm: np.ndarray, rows: slice, cols: slice, values: np.ndarray) -> None:
    """``mm[rows, cols] = values``. A test hook: tests replace it to inject faults."""
    mm[rows, cols] = values


# -- reading ---------------------------------------------------------------------------------
def _header(name: str) -> tuple[tuple[int, ...], str, str]:
    """Rank 0: shape, dtype (``.str``, or ``""`` for a dtype that is not numeric) and dtype name
    of a ``.npy`` file, checking that the file holds all of its data."""
    fmt = np.lib.format
    with open(name, "rb") as f:
        try:
            version = fmt.read_magic(f)
        except ValueError as exc:
            raise ValueError(f"{name!r} is not a .npy file ({exc})") from None
        if version == (1, 0):
            shape, _, dt = fmt.read_array_header_1_0(f)
        else:
            shape, _, dt = fmt.read_array_header_2_0(f)
        offset = f.tell()
    size = os.path.getsize(name)
    need = offset + int(np.prod(shape)) * dt.itemsize
    if dt.kind in "biufc" and size < need:
        raise ValueError(
            f"{name!r} is truncated: its header promises {need} bytes, the file holds {size} "
            "(a writer that did not finish?)"
        )
    return tuple(int(s) for s in shape), dt.str if dt.kind in "biufc" else "", str(dt)


def from_npy(
    path: str | os.PathLike[str],
    block: int | tuple[int, int] | None = None,
    grid: ProcessGrid | None = None,
    backend: str | None = None,
    *,
    dtype: Any = None,
    progress: bool = False,
) -> BlockCyclicArray:
    """Read a 2-D ``.npy`` file into a block-cyclic layout through a memory map. Collective.

    Rank 0 reads the header (every rank raises the same error for a missing, truncated or
    non-2-D file); every rank then maps the file read-only and copies out only its own
    rectangles, on a few threads, straight into its local matrix (through host bands of at
    most 64 MiB on the GPU backend, or when converting the dtype). C- and Fortran-ordered files
    work.

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
    progress : bool, default False
        Progress bar on rank 0 when stdout is a terminal.

    Returns
    -------
    BlockCyclicArray

    Raises
    ------
    FileNotFoundError, PermissionError
        The file is missing or unreadable (on every rank).
    ValueError
        Not a ``.npy`` file, truncated, or not 2-D.
    TypeError
        The file's dtype is none of the four BLAS dtypes and ``dtype`` is not given.
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"from_npy reads a path (str or PathLike), got {type(path).__name__}")
    check_flag(progress, "progress")
    blk = normalize_block(block)
    g = resolve_grid(grid, backend)
    bk = g.backend
    threads = host_threads(bk)
    name = os.fspath(path)
    what = f"from_npy({name!r})"
    shape, file_dtype, dtype_name = on_root(bk, what, lambda: _header(name))
    if len(shape) not in (1, 2):
        raise ValueError(f"from_npy needs a 1-D or 2-D array, {name!r} holds shape {shape}")
    if not file_dtype:
        raise TypeError(f"{what}: the file holds {dtype_name} data, not numbers")
    stored_dtype = np.dtype(file_dtype)
    dt = check_dtype_arg(dtype, stored_dtype, what)
    if len(shape) == 1:  # a vector: read whole by rank 0 and scattered (io/_vectors.py)
        return vectors.read(g, block, dt, what, lambda: np.load(name, allow_pickle=False))
    out = new_array(BlockCyclicLayout((int(shape[0]), int(shape[1])), blk, g.shape), g, dt)
    layout = out.layout

    def fill() -> None:
        if out._data.size == 0:
            return
        rows, cols = layout.local_rows(g.myrow), layout.local_cols(g.mycol)
        col_runs = runs(cols)
        bar = progress_bar(progress, g.rank, len(runs(rows)) * len(col_runs), "from_npy", "rect")
        mm = np.load(name, mmap_mode="r", allow_pickle=False)

        def source(host: np.ndarray, band: slice) -> None:
            def copy(rect: Rect) -> None:
                gr, gc, hr, hc = rect
                host[hr, hc] = mm[gr, gc]  # file rectangle -> local

            copy_rects(rects(rows[band], col_runs), copy, threads, bar)

        try:
            read_into(bk, out._data, layout, (g.myrow, g.mycol), source, stored_dtype)
        finally:
            bar.close()

    agree(bk, what, fill)
    return out
