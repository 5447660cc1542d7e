"""Vectors (1-D arrays) in and out of files and Dask, through rank 0.

A vector of ``n`` elements is ``n`` numbers where a matrix of the same order is ``n^2``: it fits
on one host long before a matrix does, and a parallel write of it would move a few blocks per
rank. So its I/O goes through one process: a writer gathers the vector on rank 0
(``to_numpy(root=0)``) and rank 0 writes the whole file under the writers' publication rules
(:func:`._common.write_published`: a temporary name, every rank told of an error, an atomic
rename); a reader reads the whole file on rank 0 and scatters it (``from_numpy(root=0)``), an
error on rank 0 raised on every rank (:func:`._common.agree`). The files are the 1-D arrays
NumPy, zarr, h5py and Dask write: shape ``(n,)``, a zarr chunk per block of the vector.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..array import BlockCyclicArray
from ..creation import from_numpy
from ..grid import ProcessGrid
from ._common import agree, write_published


def write(
    A: BlockCyclicArray,
    final: Path,
    overwrite: bool,
    what: str,
    save: Callable[[Path, np.ndarray], None],
    *,
    replaceable: Callable[[Path], str | None] = lambda path: None,
    finish: Callable[[Path], None] = lambda path: None,
) -> None:
    """Gather the vector ``A`` on rank 0, which ``save(tmp, host)``\\ s it whole; then publish
    as every writer does. Collective."""
    host = A.to_numpy(root=0)

    def create(tmp: Path) -> None:
        assert host is not None  # rank 0 only
        save(tmp, host)

    write_published(
        A.grid.backend,
        final,
        overwrite,
        what,
        create,
        lambda tmp: None,
        replaceable=replaceable,
        finish=finish,
    )


def read(
    grid: ProcessGrid, block: Any, dtype: np.dtype, what: str, load: Callable[[], Any]
) -> BlockCyclicArray:
    """The vector ``load()`` returns on rank 0 (a 1-D array), in blocks of ``block`` (``None``:
    the default) and converted to ``dtype``, on ``grid``. Collective; an error of ``load`` is
    raised on every rank."""
    bk = grid.backend
    host = agree(bk, what, lambda: np.asarray(load()) if bk.rank == 0 else None)
    return from_numpy(host, block=block, grid=grid, root=0, dtype=dtype)
