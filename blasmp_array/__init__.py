"""blasmp_array: distributed dense linear algebra (BLAS3) on 2-D block-cyclic arrays.

A :class:`BlockCyclicArray` spreads a matrix over a ``Pr x Pc`` :class:`ProcessGrid` in
ScaLAPACK's block-cyclic layout and behaves like a NumPy array: ``A @ B``, ``A.T @ A``,
ufuncs and :func:`blasmp_array.linalg.solve_triangular` run distributed kernels on the CPU
(NumPy + SciPy BLAS + MPI) or GPU (CuPy + cuBLAS + NVSHMEM) backend.
"""

from __future__ import annotations

# The face is the top layer (see docs/overview.md, "Layers"): it imports every layer, and with
# them the modules that fill the registry of blasmp_array._dispatch (ops.face._methods: NumPy
# functions, ufuncs, np.matmul and the operator-backed array methods; creation: gather; io: the
# writers), so the array's methods work as soon as `import blasmp_array` returns. Dask, zarr,
# h5py and CuPy stay unimported: io and backends import them inside the functions that use them.
from . import io, layout, linalg, random
from ._config import show_config
from ._warnings import RedistributionWarning, ViewCopyWarning
from .array import SUPPORTED_DTYPES, BlockCyclicArray
from .backends import SignalTimeoutError
from .creation import (
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from .grid import ProcessGrid, square_grid_shape
from .io import from_dask, from_hdf5, from_npy, from_zarr
from .layout import BlockCyclicLayout
from .ops.face import _methods  # noqa: F401  (fills the registry of _dispatch)
from .ops.face.ranges import arange, linspace
from .trace import trace

__version__ = "0.1.0"

__all__ = [
    "BlockCyclicArray",
    "BlockCyclicLayout",
    "ProcessGrid",
    "RedistributionWarning",
    "SUPPORTED_DTYPES",
    "arange",
    "SignalTimeoutError",
    "empty",
    "empty_like",
    "eye",
    "from_numpy",
    "full",
    "full_like",
    "io",
    "layout",
    "linalg",
    "linspace",
    "ones",
    "ones_like",
    "random",
    "show_config",
    "square_grid_shape",
    "trace",
    "ViewCopyWarning",
    "zeros",
    "zeros_like",
    "from_dask",
    "from_zarr",
    "from_npy",
    "from_hdf5",
]


def _trace_from_environment() -> None:
    # BLASMP_TRACE=run.json traces the whole script (written at exit)
    from .trace import _start_from_environment

    _start_from_environment()


_trace_from_environment()
