"""Direct CBLAS calls through ``ctypes`` (which releases the GIL during the call).

The OpenBLAS that NumPy wheels bundle exports CBLAS (``scipy_cblas_dgemm64_`` with 64-bit
integers in ``numpy.libs``; ``scipy_cblas_dgemm`` with 32-bit integers in ``scipy.libs``); a
system CBLAS (``libcblas``/``libopenblas``) is tried next. :func:`load` returns ``None`` when no
library is found or ``$BLASMP_CPU_BLAS=numpy`` asks for the NumPy fallback.

All calls are row-major (``CblasRowMajor``): a C-ordered 2-D NumPy view with unit column stride
is passed without a copy, its leading dimension being its row stride.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
from typing import Any

import numpy as np

__all__ = ["CBlas", "load"]

ROW_MAJOR = 101
TRANS = {"N": 111, "T": 112, "C": 113}
UPLO = {"U": 121, "L": 122}
DIAG = {"N": 131, "U": 132}
SIDE = {"L": 141, "R": 142}

_PREFIX = {
    np.dtype(np.float32): "s",
    np.dtype(np.float64): "d",
    np.dtype(np.complex64): "c",
    np.dtype(np.complex128): "z",
}
_REAL = {
    np.dtype(np.float32): ctypes.c_float,
    np.dtype(np.float64): ctypes.c_double,
    np.dtype(np.complex64): ctypes.c_float,
    np.dtype(np.complex128): ctypes.c_double,
}


class CBlas:
    """Typed access to one CBLAS library (``pattern`` formats the routine name)."""

    def __init__(self, lib: ctypes.CDLL, pattern: str, int_type: Any, path: str) -> None:
        self.lib = lib
        self.pattern = pattern
        self.int = int_type
        self.path = path
        self._cache: dict[str, Any] = {}

    def fn(self, name: str) -> Any:
        f = self._cache.get(name)
        if f is None:
            f = getattr(self.lib, self.pattern.format(name))
            f.restype = None
            self._cache[name] = f
        return f

    def scalar(self, value: Any, dtype: np.dtype) -> Any:
        """A scalar argument: by value for real types, by pointer for complex ones."""
        if dtype.kind == "c":
            return np.array([value], dtype=dtype).ctypes.data_as(ctypes.c_void_p)
        return _REAL[dtype](value)

    def real(self, value: Any, dtype: np.dtype) -> Any:
        """A real scalar argument (HERK's alpha/beta, HER2K's beta)."""
        return _REAL[dtype](float(np.real(value)))

    def routine(self, dtype: np.dtype, name: str) -> Any:
        return self.fn(_PREFIX[dtype] + name)

    def ptr(self, x: np.ndarray) -> Any:
        return ctypes.c_void_p(x.ctypes.data)


def _candidates() -> list[tuple[str, str, Any]]:
    out: list[tuple[str, str, Any]] = []
    here = os.path.dirname(os.path.dirname(np.__file__))
    for path in sorted(glob.glob(os.path.join(here, "numpy.libs", "*openblas64*.so*"))):
        out.append((path, "scipy_cblas_{}64_", ctypes.c_int64))
    for path in sorted(glob.glob(os.path.join(here, "scipy.libs", "*openblas*.so*"))):
        if "64" not in os.path.basename(path):
            out.append((path, "scipy_cblas_{}", ctypes.c_int))
    for name in ("cblas", "openblas", "blis", "mkl_rt"):
        found = ctypes.util.find_library(name)
        if found:
            out.append((found, "cblas_{}", ctypes.c_int))
    return out


_loaded: list[CBlas | None] = []


def load() -> CBlas | None:
    """The CBLAS library to use, or None (NumPy fallback). Cached."""
    if _loaded:
        return _loaded[0]
    lib: CBlas | None = None
    if os.environ.get("BLASMP_CPU_BLAS", "").lower() != "numpy":
        for path, pattern, int_type in _candidates():
            try:
                handle = ctypes.CDLL(path)
                for r in ("sgemm", "zgemm", "dtrsm", "ctrmm", "zherk", "cher2k", "ssyr2k"):
                    getattr(handle, pattern.format(r))
            except (OSError, AttributeError):
                continue
            lib = CBlas(handle, pattern, int_type, path)
            break
    _loaded.append(lib)
    return lib
