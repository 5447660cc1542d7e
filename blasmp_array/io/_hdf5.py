"""HDF5 input through Dask (h5py is optional)."""

from __future__ import annotations

import os
from typing import Any

from ..array import BlockCyclicArray
from ..grid import ProcessGrid
from ._common import agree, resolve_grid
from ._dask import from_dask
from ._deps import require

__all__ = ["from_hdf5"]


def from_hdf5(
    path: str | os.PathLike[str],
    dataset: str,
    block: int | tuple[int, int] | None = None,
    grid: ProcessGrid | None = None,
    backend: str | None = None,
    *,
    dtype: Any = None,
) -> BlockCyclicArray:
    """Read a 2-D HDF5 dataset into a block-cyclic layout. Collective.

    Every rank opens the file read-only with h5py and reads, through
    :func:`dask.array.from_array` and :func:`from_dask`, only the dataset chunks (the HDF5
    chunks of a chunked dataset, Dask's automatic chunks otherwise) that hold its own elements.

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

    Returns
    -------
    BlockCyclicArray
    """
    h5py = require("h5py", "from_hdf5")
    da = require("dask.array", "from_hdf5")
    if not isinstance(dataset, str):
        raise TypeError(f"dataset must be the dataset's name (a str), got {type(dataset).__name__}")
    g = resolve_grid(grid, backend)
    name = os.fspath(path)
    with _Open(h5py, name, g.backend) as f:
        d = f[dataset]
        x = da.from_array(d, chunks=d.chunks or "auto", lock=True, asarray=True)
        return from_dask(x, block=block, grid=g, dtype=dtype)


class _Open:
    """Open the file on every rank; all ranks agree that it opened before going on."""

    def __init__(self, h5py: Any, name: str, backend: Any) -> None:
        self.file = agree(backend, f"from_hdf5({name!r})", lambda: h5py.File(name, "r"))

    def __enter__(self) -> Any:
        return self.file

    def __exit__(self, *exc: Any) -> None:
        self.file.close()
