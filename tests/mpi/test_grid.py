"""ProcessGrid: placement, sub-communicators, validation and release."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import blasmp_array as bm
from blasmp_array.grid import square_grid_shape


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4, 6, 7, 12, 16])
def test_square_grid_shape(nprocs):
    pr, pc = square_grid_shape(nprocs)
    assert pr * pc == nprocs and pr <= pc
    # no more square factorisation exists
    assert all(nprocs % p or p <= pr for p in range(pr + 1, int(nprocs**0.5) + 1))


def test_row_major_placement_and_subcommunicators(grid, comm):
    r, c = grid.coords
    assert comm.Get_rank() == grid.rank_of(r, c) == r * grid.npcol + c
    assert grid.coords_of(comm.Get_rank()) == (r, c)
    # the row communicator holds my grid row in column order, the column one my grid column
    assert grid.row_comm.Get_size() == grid.npcol and grid.row_comm.Get_rank() == c
    assert grid.col_comm.Get_size() == grid.nprow and grid.col_comm.Get_rank() == r
    me = comm.Get_rank()
    assert grid.row_comm.allgather(me) == [grid.rank_of(r, j) for j in range(grid.npcol)]
    assert grid.col_comm.allgather(me) == [grid.rank_of(i, c) for i in range(grid.nprow)]


def test_one_dimension_given(comm):
    size = comm.Get_size()
    with bm.ProcessGrid(nprow=1, backend="cpu") as g:
        assert g.shape == (1, size)
    with bm.ProcessGrid(npcol=1, backend="cpu") as g:
        assert g.shape == (size, 1)


@pytest.mark.parametrize(
    "args, match",
    [
        ((0, 1), "positive integer"),
        ((2.5, 1), "positive integer"),
        ((3, 5), r"needs 15 processes"),
    ],
)
def test_bad_shapes_raise_on_every_rank(comm, args, match):
    if args == (3, 5) and comm.Get_size() == 15:
        pytest.skip("15 ranks form a 3x5 grid")  # same decision on every rank
    with pytest.raises(ValueError, match=match):
        bm.ProcessGrid(*args, backend="cpu")


def test_bad_backend_name(comm):
    with pytest.raises(ValueError, match="'cpu' or 'gpu'"):
        bm.ProcessGrid(backend="tpu")


def test_free_releases_subcommunicators_and_arrays_still_work(comm):
    g = bm.ProcessGrid(backend="cpu")
    a = bm.from_numpy(np.arange(12.0).reshape(3, 4), block=2, grid=g)
    g.free()
    assert g.row_comm == MPI.COMM_NULL and g.col_comm == MPI.COMM_NULL
    g.free()  # idempotent
    assert (a + 1).to_numpy()[2, 3] == 12.0


def test_one_column_grid_of_the_same_processes(grid, comm):
    col = grid.one_column()
    if grid.npcol == 1:
        assert col is grid
        return
    assert col.shape == (grid.size, 1) and col.backend is grid.backend
    # rank r of the communicator is process row r: the same order as the grid's ranks
    assert col.rank == grid.rank == comm.Get_rank() and col.coords == (grid.rank, 0)
    assert col.col_comm.allgather(comm.Get_rank()) == list(range(grid.size))
    assert grid.one_column() is col  # made once, kept with the grid
    with bm.ProcessGrid(grid.size, 1, comm=grid.comm, backend=grid.backend.name) as fresh:
        assert col.same_as(fresh)


def test_free_releases_the_one_column_grid(comm):
    if comm.Get_size() == 1:
        pytest.skip("one process: the grid is its own one-column grid")
    g = bm.ProcessGrid(1, comm.Get_size(), backend="cpu")
    col = g.one_column()
    g.free()
    assert col.row_comm == MPI.COMM_NULL and col.col_comm == MPI.COMM_NULL
    assert g.one_column() is not col  # a new one, made again on demand
    g.free()
