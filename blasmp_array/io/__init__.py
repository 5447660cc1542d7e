"""I/O and Dask interop of BlockCyclicArrays: Dask arrays, zarr stores, ``.npy`` files, HDF5.

Only this package imports Dask, zarr and h5py, lazily inside the functions: they come with the
``dask`` extra (``pip install -e ".[dask]"``); ``.npy`` I/O needs NumPy only.

* :func:`from_dask` -- each rank computes only its own tiles of a Dask array.
* :func:`to_dask` -- the matrix as a Dask array on every rank (in memory, or over a temporary
  zarr store).
* :func:`to_zarr` / :func:`from_zarr` -- parallel zarr write (one chunk per block, many chunks
  at once) and read of any chunking into any grid and block size.
* :func:`to_npy` / :func:`from_npy` -- parallel ``.npy`` through memory maps.
* :func:`to_hdf5` / :func:`from_hdf5` -- parallel HDF5 (hyperslabs per rank; MPI-IO where h5py
  is built with MPI).

Importing this package registers :func:`to_dask`, :func:`to_zarr` and :func:`to_npy` as the
implementations of the array methods of the same names (see :mod:`blasmp_array._dispatch`; the
array never imports io).

The writers publish a store only when every rank has written its part (see
:mod:`blasmp_array.io._common`); a failure on any rank raises :class:`DistributedIOError` on
all. Bad input (a missing path, a store of the wrong shape or dtype, no permission) raises the
same error on every rank before any data moves. The routes, the concurrency, the codec and
the memory bound are described in ``docs/io.md``.
"""

from .._dispatch import implements_method
from ._common import DistributedIOError
from ._dask import from_dask, to_dask
from ._hdf5 import from_hdf5, to_hdf5
from ._npy import from_npy, to_npy
from ._zarr import from_zarr, to_zarr

__all__ = [
    "DistributedIOError",
    "from_dask",
    "to_dask",
    "from_zarr",
    "to_zarr",
    "from_npy",
    "to_npy",
    "from_hdf5",
    "to_hdf5",
]

# the implementations of BlockCyclicArray.to_dask, .to_zarr and .to_npy
implements_method("to_dask")(to_dask)
implements_method("to_zarr")(to_zarr)
implements_method("to_npy")(to_npy)
