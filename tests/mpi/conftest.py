"""Fixtures of the distributed tests (run on every rank under mpiexec)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from mpi4py import MPI

import blasmp_array as bm
from blasmp_array import _alloc

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


@pytest.fixture(scope="session")
def comm():
    return MPI.COMM_WORLD


def grid_shapes(size: int) -> list[tuple[int, int]]:
    """1xN, Nx1 and the near-square grid of ``size`` processes (deduplicated)."""
    shapes = [(1, size), (size, 1), bm.square_grid_shape(size)]
    return list(dict.fromkeys(shapes))


_GRIDS: dict[tuple[int, int], bm.ProcessGrid] = {}


def cached_grid(nprow: int, npcol: int) -> bm.ProcessGrid:
    """One ProcessGrid per shape for the whole test run: each grid opens two communicators and
    MPICH runs out of communicators after about 2000 per process."""
    if (nprow, npcol) not in _GRIDS:
        backend = os.environ.get("BLASMP_BACKEND", "cpu")
        _GRIDS[(nprow, npcol)] = bm.ProcessGrid(nprow, npcol, backend=backend)
    return _GRIDS[(nprow, npcol)]


def with_source(a, grid, block, src):
    """The BlockCyclicArray of global ``a`` whose first block lies on process ``src``
    (ScaLAPACK's RSRC/CSRC), built from each rank's own elements without communication."""
    from blasmp_array.array import BlockCyclicArray
    from blasmp_array.layout import BlockCyclicLayout

    lay = BlockCyclicLayout(a.shape, block, grid.shape, src)
    rows, cols = lay.local_rows(grid.myrow), lay.local_cols(grid.mycol)
    local = grid.backend.asarray(np.ascontiguousarray(a[np.ix_(rows, cols)]))
    return BlockCyclicArray(local, lay, grid)


def on_one_device(monkeypatch, module, route: str) -> list:
    """Make every rank name one device (as ranks sharing one GPU do), which turns on the
    gathered routes of the factorisations, and count the calls of ``module.route`` (the
    gathered route as the caller imported it)."""
    from blasmp_array.ops.engine import devices

    monkeypatch.setattr(devices, "ON_ONE_DEVICE", True)
    monkeypatch.setattr(devices, "device_key", lambda be: "one device")
    calls: list = []
    real = getattr(module, route)
    monkeypatch.setattr(module, route, lambda *x, **k: calls.append(1) or real(*x, **k))
    return calls


@pytest.fixture(params=grid_shapes(MPI.COMM_WORLD.Get_size()), ids=lambda s: f"{s[0]}x{s[1]}")
def grid(request):
    return cached_grid(*request.param)


@pytest.fixture(autouse=True)
def poison_fresh_arrays(monkeypatch):
    """Every fresh floating/complex array is NaN-poisoned (the allocator's test hook), so that an
    element an operator, exchange or constructor leaves unwritten shows up in its result."""
    monkeypatch.setattr(_alloc, "_DEBUG_FILL", np.nan)


def pytest_report_header(config):
    return f"MPI ranks: {MPI.COMM_WORLD.Get_size()}"


def pytest_runtest_logreport(report):
    """A test that fails on some ranks only would leave the others blocked in a collective: print
    this rank's failure at once and abort the whole job (with -x the run stops here anyway)."""
    if report.failed and MPI.COMM_WORLD.Get_size() > 1:
        import sys

        rank = MPI.COMM_WORLD.Get_rank()
        sys.stderr.write(f"\n[rank {rank}] FAILED {report.nodeid} ({report.when})\n")
        sys.stderr.write(f"{report.longreprtext}\n")
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
