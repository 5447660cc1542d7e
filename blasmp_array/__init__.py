"""blasmp_array: distributed dense linear algebra (BLAS3) on 2-D block-cyclic arrays.

A :class:`BlockCyclicArray` spreads a matrix over a ``Pr x Pc`` :class:`ProcessGrid` in
ScaLAPACK's block-cyclic layout and behaves like a NumPy array: ``A @ B``, ``A.T @ A``,
ufuncs and :func:`blasmp_array.linalg.solve_triangular` run distributed kernels on the CPU
(NumPy + SciPy BLAS + MPI) or GPU (CuPy + cuBLAS + NVSHMEM) backend.
"""

from __future__ import annotations

from typing import Any

from . import layout, linalg, random
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
from .layout import BlockCyclicLayout
from .trace import trace

__version__ = "0.1.0"

__all__ = [
    "BlockCyclicArray",
    "BlockCyclicLayout",
    "ProcessGrid",
    "RedistributionWarning",
    "SUPPORTED_DTYPES",
    "SignalTimeoutError",
    "empty",
    "empty_like",
    "eye",
    "from_numpy",
    "full",
    "full_like",
    "layout",
    "linalg",
    "ones",
    "ones_like",
    "random",
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

_IO_NAMES = {"from_dask", "from_zarr", "from_npy", "from_hdf5"}


def __getattr__(name: str) -> Any:
    # io imports Dask/zarr lazily; keep `import blasmp_array` light
    if name in _IO_NAMES:
        from . import io

        return getattr(io, name)
    raise AttributeError(f"module 'blasmp_array' has no attribute {name!r}")


def _trace_from_environment() -> None:
    # BLASMP_TRACE=run.json traces the whole script (written at exit)
    from .trace import _start_from_environment

    _start_from_environment()


_trace_from_environment()
