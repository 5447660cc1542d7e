"""Parallel HDF5 I/O through h5py: every rank reads its own elements with one hyperslab
selection per band, and writes them into a dataset that rank 0 created.

A rank's elements are a regular pattern of the dataset -- start ``(p mb, q nb)``, stride
``(Pr mb, Pc nb)``, block ``(mb, nb)`` -- plus the ragged last block row and column: a union
of at most four regular hyperslabs, which HDF5 reads (decoding the chunks of a chunked dataset
that the selection touches, converting the type) in one call straight into the local matrix,
in the dataspace's row-major order, which is the local order.

Writing: rank 0 creates the file with a contiguous dataset whose storage is allocated at once.
With an MPI-parallel h5py (``h5py.get_config().mpi``) every rank then opens it with the
``mpio`` driver and writes its hyperslabs; otherwise every rank maps the dataset's bytes (a
contiguous dataset is a C-ordered array at a fixed offset of the file) and copies its
rectangles into them, as :func:`~blasmp_array.io.to_npy` does.
"""

from __future__ import annotations

import os
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
from ._deps import require
from ._npy import not_a_file, write_map
from ._plan import runs
from ._staging import read_into, write_from

__all__ = ["from_hdf5", "to_hdf5"]

#: ``(start, stride, count, block)`` of a regular pattern along one axis
Term = tuple[int, int, int, int]


def _terms(idx: np.ndarray) -> list[Term]:
    """The ascending global indices ``idx`` as few regular patterns: runs of one length at one
    spacing form one pattern (a block-cyclic axis: its full blocks, then its ragged one)."""
    terms: list[list[int]] = []
    for run in runs(idx):
        start, length = run.span.start, run.span.stop - run.span.start
        if terms:
            t = terms[-1]
            if t[3] == length and (t[2] == 1 or start == t[0] + t[2] * t[1]):
                if t[2] == 1:
                    t[1] = start - t[0]
                t[2] += 1
                continue
        terms.append([start, length, 1, length])
    return [(a, b, c, d) for a, b, c, d in terms]


def _selection(h5py: Any, dset: Any, rows: np.ndarray, cols: np.ndarray) -> Any:
    """The dataset's file space with the hyperslabs ``rows x cols`` selected."""
    space = dset.id.get_space()
    op = h5py.h5s.SELECT_SET
    for rs, rstride, rcount, rblock in _terms(rows):
        for cs, cstride, ccount, cblock in _terms(cols):
            space.select_hyperslab(
                (rs, cs), (rcount, ccount), (rstride, cstride), (rblock, cblock), op=op
            )
            op = h5py.h5s.SELECT_OR
    return space


def _mpio(h5py: Any, backend: Any) -> bool:
    """Whether to open files with the MPI-IO driver: an MPI-parallel h5py and several ranks."""
    return bool(h5py.get_config().mpi) and backend.size > 1


def _open(h5py: Any, name: str, mode: str, backend: Any) -> Any:
    if _mpio(h5py, backend):
        return h5py.File(name, mode, driver="mpio", comm=backend.comm)
    return h5py.File(name, mode)


# -- reading ---------------------------------------------------------------------------------
def _inspect(h5py: Any, name: str, dataset: str) -> tuple[tuple[int, ...], str, str]:
    """Rank 0: shape, dtype (``.str``; ``""`` when neither numeric nor bool) and dtype name of
    the dataset."""
    with h5py.File(name, "r") as f:
        if dataset not in f:
            raise KeyError(f"{name!r} has no dataset {dataset!r}")
        d = f[dataset]
        if not isinstance(d, h5py.Dataset):
            raise ValueError(f"{dataset!r} in {name!r} is a {type(d).__name__}, not a dataset")
        dt = d.dtype
        return tuple(int(s) for s in d.shape), dt.str if dt.kind in "biufc" else "", str(dt)


def from_hdf5(
    path: str | os.PathLike[str],
    dataset: str,
    block: int | tuple[int, int] | None = None,
    grid: ProcessGrid | None = None,
    backend: str | None = None,
    *,
    dtype: Any = None,
    progress: bool = False,
) -> BlockCyclicArray:
    """Read a 2-D HDF5 dataset into a block-cyclic layout. Collective.

    Rank 0 checks the file and dataset (every rank raises the same error when they are
    missing or not 2-D); every rank then opens the file read-only and reads only its own
    elements with one hyperslab selection (HDF5 converts the type and decodes the chunks of a
    chunked dataset that the selection touches), straight into its local matrix on the CPU
    backend, through host bands of at most 64 MiB on the GPU backend. With an MPI-parallel
    h5py the file is opened with the ``mpio`` driver on several ranks.

    Parameters
    ----------
    path : str or PathLike
        HDF5 file every rank can read.
    dataset : str
        Name of the 2-D dataset inside the file, e.g. ``"/group/matrix"``.
    block : int or (int, int), optional
        Block shape (default :data:`blasmp_array.creation.DEFAULT_BLOCK`).
    grid : ProcessGrid, optional
        Default: the default grid (of ``backend`` when given).
    backend : {'cpu', 'gpu'}, optional
        Backend of the default grid.
    dtype : dtype, optional
        Convert to this dtype (default: the dataset's, one of the four BLAS dtypes).
    progress : bool, default False
        Progress bar on rank 0 when stdout is a terminal.

    Returns
    -------
    BlockCyclicArray

    Raises
    ------
    FileNotFoundError, PermissionError
        The file is missing or unreadable.
    KeyError
        The file has no such dataset.
    ValueError
        The dataset is not 2-D (or the name is a group).
    TypeError
        The dataset's dtype is none of the four BLAS dtypes and ``dtype`` is not given.
    """
    h5py = require("h5py", "from_hdf5")
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"from_hdf5 reads a path (str or PathLike), got {type(path).__name__}")
    if not isinstance(dataset, str):
        raise TypeError(f"dataset must be the dataset's name (a str), got {type(dataset).__name__}")
    check_flag(progress, "progress")
    blk = normalize_block(block)
    g = resolve_grid(grid, backend)
    bk = g.backend
    name = os.fspath(path)
    what = f"from_hdf5({name!r}, {dataset!r})"
    shape, file_dtype, dtype_name = on_root(bk, what, lambda: _inspect(h5py, name, dataset))
    if len(shape) not in (1, 2):
        raise ValueError(f"{what}: needs a 1-D or 2-D dataset, it has shape {shape}")
    if not file_dtype:
        raise TypeError(f"{what}: the dataset holds {dtype_name} data, not numbers or bools")
    dt = check_dtype_arg(dtype, np.dtype(file_dtype), what)
    if len(shape) == 1:  # a vector: read whole by rank 0 and scattered (io/_vectors.py)

        def load() -> np.ndarray:
            with h5py.File(name, "r") as f:
                return np.asarray(f[dataset][...])

        return vectors.read(g, block, dt, what, load)
    out = new_array(BlockCyclicLayout((int(shape[0]), int(shape[1])), blk, g.shape), g, dt)
    layout = out.layout
    rows, cols = layout.local_rows(g.myrow), layout.local_cols(g.mycol)

    def fill() -> None:
        with _open(h5py, name, "r", bk) as f:
            dset = f[dataset]
            if out._data.size == 0:
                return
            bar = progress_bar(progress, g.rank, out._data.shape[0], "from_hdf5", "row")

            def source(host: np.ndarray, band: slice) -> None:
                # my rows of the band x my columns -> host band, converted by HDF5
                fspace = _selection(h5py, dset, rows[band], cols)
                dset.id.read(h5py.h5s.create_simple(host.shape), fspace, host)
                bar.update(host.shape[0])

            try:
                read_into(bk, out._data, layout, (g.myrow, g.mycol), source, dt)
            finally:
                bar.close()

    agree(bk, what, fill)
    return out


# -- writing ---------------------------------------------------------------------------------
def to_hdf5(
    A: BlockCyclicArray,
    path: str | os.PathLike[str],
    dataset: str,
    overwrite: bool = False,
    progress: bool = False,
) -> None:
    """Write the matrix to a new HDF5 file holding one dataset, in parallel. Collective.

    Rank 0 creates the file under a temporary sibling name, with ``dataset`` (groups in its
    name are created) contiguous and allocated at once; every rank writes its own elements
    into it -- with an MPI-parallel h5py through the ``mpio`` driver (hyperslab writes), else
    through a memory map of the dataset's bytes -- and rank 0 renames the file to ``path`` once
    every rank has finished without error. On the GPU backend the local matrix goes to the
    host in bands of whole block rows (at most 64 MiB).

    Without MPI-parallel HDF5 the ranks write interleaved elements of the same pages, so the
    file must be on a filesystem whose shared memory maps are coherent between the ranks (a
    local disk or ``/tmp`` of one node, as for :func:`~blasmp_array.io.to_npy`).

    Parameters
    ----------
    A : BlockCyclicArray
        The matrix (lazy views are materialised first).
    path : str or PathLike
        Destination file. It holds only ``dataset``: an existing file is replaced as a whole.
    dataset : str
        Name of the dataset, e.g. ``"matrix"`` or ``"group/matrix"``.
    overwrite : bool, default False
        Replace an existing file (after the new one is complete); without it an existing
        ``path`` raises :class:`FileExistsError` on every rank. A directory is never replaced.
    progress : bool, default False
        Progress bar on rank 0 when stdout is a terminal.

    Raises
    ------
    FileNotFoundError, PermissionError, FileExistsError
        The directory is missing or not writable, or ``path`` exists (on every rank, before any
        data moves).
    DistributedIOError
        Writing failed on some rank; nothing was published.
    """
    h5py = require("h5py", "to_hdf5")
    final = local_path(path, "to_hdf5")
    if not isinstance(dataset, str) or not dataset.strip("/"):
        raise ValueError(f"to_hdf5: dataset must be a non-empty name (a str), got {dataset!r}")
    check_flag(progress, "progress")
    A = stored(A, "to_hdf5")
    if A.ndim == 1:  # a vector: gathered and written whole by rank 0 (io/_vectors.py)

        def save(tmp: Path, host: np.ndarray) -> None:
            with h5py.File(tmp, "w") as f:
                f.create_dataset(dataset, data=host)

        vectors.write(A, final, overwrite, "to_hdf5", save, replaceable=not_a_file)
        return
    layout, bk = A.layout, A.grid.backend
    dtype = A.dtype
    threads = host_threads(bk)
    offset: list[int | None] = [None]

    def create(tmp: Path) -> None:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
        with h5py.File(tmp, "w") as f:
            d = f.create_dataset(dataset, shape=layout.shape, dtype=dtype, dcpl=dcpl)
            offset[0] = d.id.get_offset()  # None for an empty dataset

    def write(tmp: Path) -> None:
        at = bk.bcast(offset[0], root=0)  # first, so that every rank reaches it
        if _mpio(h5py, bk):
            _write_mpio(h5py, tmp, dataset, A, progress)
            return
        if A._data.size == 0:
            return
        mm = np.memmap(tmp, dtype=dtype, mode="r+", offset=at, shape=layout.shape)
        write_map(A, mm, threads, progress, "to_hdf5")

    write_published(
        bk,
        final,
        overwrite,
        "to_hdf5",
        create,
        write,
        replaceable=not_a_file,
    )


def _write_mpio(h5py: Any, tmp: Path, dataset: str, A: BlockCyclicArray, progress: bool) -> None:
    """Every rank: write its elements as hyperslabs through the MPI-IO driver (collective open
    and close, independent writes)."""
    layout, g, bk = A.layout, A.grid, A.grid.backend
    rows, cols = layout.local_rows(g.myrow), layout.local_cols(g.mycol)
    bar = progress_bar(progress, g.rank, A._data.shape[0], "to_hdf5", "row")
    with _open(h5py, str(tmp), "r+", bk) as f:
        dset = f[dataset]

        def sink(host: np.ndarray, band: slice) -> None:
            # host band -> my rows of the band x my columns
            fspace = _selection(h5py, dset, rows[band], cols)
            band_data = np.ascontiguousarray(host)
            dset.id.write(h5py.h5s.create_simple(band_data.shape), fspace, band_data)
            bar.update(host.shape[0])

        try:
            write_from(bk, A._data, layout, (g.myrow, g.mycol), sink)
        finally:
            bar.close()
