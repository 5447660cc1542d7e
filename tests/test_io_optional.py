"""The optional I/O dependencies (Dask, zarr, h5py): lazy imports and the messages users see
when one is missing (no MPI job needed: every missing-dependency error is raised before any
communication)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from blasmp_array import io as bio

EXTRA = 'pip install -e ".[dask]"'


@pytest.fixture
def hide(monkeypatch):
    """Make ``import name`` fail for the given top-level modules and their submodules."""

    def _hide(*names: str) -> None:
        for mod in list(sys.modules):
            if mod.split(".")[0] in names:
                monkeypatch.delitem(sys.modules, mod)
        for name in names:
            # a None entry makes `import name` raise ImportError
            monkeypatch.setitem(sys.modules, name, None)
            monkeypatch.setitem(sys.modules, f"{name}.array", None)

    return _hide


@pytest.mark.parametrize(
    "call, feature",
    [
        (lambda: bio.from_dask(object(), block=2), "from_dask"),
        (lambda: bio.to_dask(object()), "to_dask"),
    ],
    ids=["from_dask", "to_dask"],
)
def test_missing_dask_names_the_extra(hide, call, feature):
    hide("dask")
    with pytest.raises(ImportError) as info:
        call()
    message = str(info.value)
    assert feature in message and "dask[array]" in message and EXTRA in message


def test_zarr_npy_and_hdf5_need_no_dask(hide, tmp_path):
    """The file formats go through zarr, NumPy and h5py alone (one process)."""
    import numpy as np

    import blasmp_array as bm

    hide("dask")
    a = np.arange(30.0).reshape(5, 6)
    A = bm.from_numpy(a, block=2)
    A.to_zarr(tmp_path / "a.zarr")
    A.to_npy(tmp_path / "a.npy")
    bio.to_hdf5(A, tmp_path / "a.h5", "m")
    for B in (
        bm.from_zarr(tmp_path / "a.zarr", block=3),
        bm.from_npy(tmp_path / "a.npy", block=3),
        bm.from_hdf5(tmp_path / "a.h5", "m", block=3),
    ):
        assert np.array_equal(B.to_numpy(), a)
    assert "dask" not in {m.split(".")[0] for m in sys.modules if sys.modules[m] is not None}


@pytest.mark.parametrize(
    "call, feature",
    [
        (lambda: bio.to_zarr(object(), "a.zarr"), "to_zarr"),
        (lambda: bio.from_zarr("a.zarr"), "from_zarr"),
    ],
    ids=["to_zarr", "from_zarr"],
)
def test_missing_zarr_names_the_extra(hide, call, feature):
    hide("zarr")
    with pytest.raises(ImportError, match=r"'zarr'") as info:
        call()
    assert feature in str(info.value) and EXTRA in str(info.value)


@pytest.mark.parametrize(
    "call, feature",
    [
        (lambda: bio.from_hdf5("a.h5", "m"), "from_hdf5"),
        (lambda: bio.to_hdf5(object(), "a.h5", "m"), "to_hdf5"),
    ],
    ids=["from_hdf5", "to_hdf5"],
)
def test_missing_h5py_names_the_extra(hide, call, feature):
    hide("h5py")
    with pytest.raises(ImportError, match=rf"{feature} needs the optional package 'h5py'") as info:
        call()
    assert EXTRA in str(info.value)


def test_missing_dependency_keeps_the_cause(hide):
    hide("dask")
    with pytest.raises(ImportError) as info:
        bio.from_dask(object())
    assert isinstance(info.value.__cause__, ImportError)


def test_import_does_not_load_optional_dependencies():
    """``import blasmp_array`` (and its io package and lazy names) load no Dask/zarr/h5py."""
    code = (
        "import sys, blasmp_array as bm, blasmp_array.io\n"
        "bm.from_dask, bm.from_zarr, bm.from_npy, bm.from_hdf5\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('dask', 'zarr', 'h5py')]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_lazy_names_resolve_to_io():
    import blasmp_array as bm

    for name in ("from_dask", "from_zarr", "from_npy", "from_hdf5"):
        assert getattr(bm, name) is getattr(bio, name)


def test_progress_bar_only_on_rank0_terminal(monkeypatch, hide):
    """tqdm when installed, on rank 0 with a terminal; a silent no-op otherwise."""
    import types

    from blasmp_array.io._common import progress_bar

    made = []

    class FakeTqdm:
        def __init__(self, total, desc, unit):
            made.append(self)
            self.n, self.closed = 0, False

        def update(self, n=1):
            self.n += n

        def close(self):
            self.closed = True

    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeTqdm))
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    bar = progress_bar(True, 0, 3, "to_zarr")
    bar.update(2)
    bar.close()
    assert len(made) == 1 and made[0].n == 2 and made[0].closed
    for enabled, rank in ((False, 0), (True, 1)):
        progress_bar(enabled, rank, 3, "to_zarr").update(1)
    assert len(made) == 1
    hide("tqdm", "rich")
    bar = progress_bar(True, 0, 3, "to_zarr")  # neither installed: silent
    bar.update(1)
    bar.close()
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeTqdm))
    progress_bar(True, 0, 3, "to_zarr").update(1)
    assert len(made) == 1


def test_cupy_pieces_move_to_host_for_the_cpu_backend():
    """A computed CuPy piece is brought to the host with ``.get()`` for the CPU backend and
    handed to ``backend.asarray`` unchanged for the GPU backend (stand-in class, no GPU)."""
    import types

    import numpy as np

    from blasmp_array.io._dask import _to_backend

    FakeCupy = type("ndarray", (), {"__module__": "cupy._core.core"})
    FakeCupy.get = lambda self: np.arange(3.0)
    piece = FakeCupy()
    cpu = types.SimpleNamespace(name="cpu", asarray=np.asarray)
    gpu = types.SimpleNamespace(name="gpu", asarray=lambda a: ("on device", a))
    assert np.array_equal(_to_backend(piece, cpu), np.arange(3.0))
    assert _to_backend(piece, gpu) == ("on device", piece)
    host = np.ones(2)
    assert _to_backend(host, cpu) is host
