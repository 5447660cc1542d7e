"""Lazy imports of the optional I/O dependencies (Dask, zarr, h5py) with an actionable error."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["require", "INSTALL_HINT"]

INSTALL_HINT = 'pip install -e ".[dask]"  (or: pip install "blasmp_array[dask]")'

#: import name -> the PyPI requirement of the ``dask`` extra that provides it
_PROVIDED_BY = {
    "dask": "dask[array]",
    "dask.array": "dask[array]",
    "zarr": "zarr",
    "h5py": "h5py",
}


def require(module: str, feature: str) -> Any:
    """Import ``module`` or raise an ImportError naming ``feature`` and the ``dask`` extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = _PROVIDED_BY.get(module, module)
        raise ImportError(
            f"{feature} needs the optional package {package!r}, which is not installed; "
            f"install the 'dask' extra of blasmp_array: {INSTALL_HINT}"
        ) from exc
