"""The registry of blasmp_array._dispatch: the array reaches the layers above it (operators,
construction, I/O) only through what they registered (no MPI job needed)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import blasmp_array  # noqa: F401  (fills the registry)
from blasmp_array import _dispatch

# every name BlockCyclicArray looks up with _dispatch.method, and who registers it
METHODS = {
    "transpose": "blasmp_array.ops.engine.redistribute",
    "redistribute": "blasmp_array.ops.engine.redistribute",
    "getitem": "blasmp_array.ops.engine.indexing",
    "setitem": "blasmp_array.ops.engine.indexing",
    "materialize_window": "blasmp_array.ops.engine.indexing",
    "matmul": "blasmp_array.ops.blas3.matmul",
    "gather": "blasmp_array.creation",
    "to_dask": "blasmp_array.io._dask",
    "to_zarr": "blasmp_array.io._zarr",
    "to_npy": "blasmp_array.io._npy",
}
# the names creation (below ops) looks up: the device route of from_numpy/to_numpy
CREATION_ROUTES = {
    "gather_rows": "blasmp_array.ops.engine.row_panels",
    "scatter_rows": "blasmp_array.ops.engine.row_panels",
}


def test_import_fills_every_method_the_array_uses():
    assert _dispatch.registered_methods() == frozenset(METHODS) | frozenset(CREATION_ROUTES)
    for name, module in {**METHODS, **CREATION_ROUTES}.items():
        impl = _dispatch.method(name)
        assert impl.__module__ == module and impl.__name__ == name


def test_array_looks_up_only_registered_names():
    source = Path(sys.modules["blasmp_array.array"].__file__).read_text()
    used = set(re.findall(r"_dispatch\.method\(\"(\w+)\"\)", source))
    assert used == set(METHODS)


def test_numpy_protocols_are_registered_on_import():
    assert np.matmul in _dispatch.registered_ufuncs()
    assert {np.add, np.sqrt, np.conjugate} <= _dispatch.registered_ufuncs()
    assert {np.sum, np.linalg.norm, np.tril, np.outer} <= _dispatch.registered_functions()


def test_unregistered_method_raises_naming_it():
    with pytest.raises(RuntimeError, match=r"'no_such_method'.*implements_method"):
        _dispatch.method("no_such_method")


def test_a_second_implementation_of_a_method_is_refused(monkeypatch):
    monkeypatch.setattr(_dispatch, "_METHODS", dict(_dispatch._METHODS))

    def redistribute(a, grid=None, block=None):  # another module's claim on the name
        return a

    already = "already implemented by blasmp_array.ops.engine.redistribute"
    with pytest.raises(ValueError, match=already):
        _dispatch.implements_method("redistribute")(redistribute)
    # registering the same function again (a reload) is fine
    same = _dispatch.method("redistribute")
    assert _dispatch.implements_method("redistribute")(same) is same


def test_a_second_implementation_of_a_numpy_function_is_refused(monkeypatch):
    """NumPy's aliases are one object (``np.permute_dims is np.transpose`` in NumPy 2):
    registering an alias must not silently replace the original's implementation."""
    monkeypatch.setattr(_dispatch, "_FUNCTIONS", dict(_dispatch._FUNCTIONS))

    def _transpose(a, axes=None):  # another module's claim on np.transpose
        return a

    with pytest.raises(ValueError, match="'transpose' is already implemented by"):
        _dispatch.implements(np.transpose)(_transpose)
    same = _dispatch._FUNCTIONS[np.transpose]
    assert _dispatch.implements(np.transpose)(same) is same


def test_import_is_light():
    """``import blasmp_array`` fills the registry without loading an optional dependency."""
    code = (
        "import sys, blasmp_array\n"
        "from blasmp_array import _dispatch\n"
        f"assert len(_dispatch.registered_methods()) == {len(METHODS) + len(CREATION_ROUTES)}, "
        "_dispatch.registered_methods()\n"
        "heavy = ('dask', 'zarr', 'h5py', 'cupy', 'cupyx', 'nvshmem', 'nvmath', 'scipy')\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & set(heavy))\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
