"""``Backend.run_on_root``: one process computes while the others wait idle; its result stays
there, its exception reaches every rank, and on the CPU backend it borrows the BLAS threads of
its node's waiting ranks."""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import cached_grid
from mpi4py import MPI

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()


@pytest.fixture
def backend():
    return cached_grid(*_square()).backend


def _square():
    import blasmp_array as bm

    return bm.square_grid_shape(SIZE)


def test_result_only_on_root(backend):
    calls = []
    for root in range(min(SIZE, 3)):
        got = backend.run_on_root(lambda: calls.append(1) or ("done", backend.rank), root=root)
        assert got == (("done", root) if RANK == root else None)
    assert len(calls) == sum(RANK == r for r in range(min(SIZE, 3)))


@pytest.mark.parametrize(
    "exc, expected",
    [
        (np.linalg.LinAlgError("no convergence"), np.linalg.LinAlgError),
        (ValueError("bad value"), ValueError),
        (KeyError("odd"), RuntimeError),
    ],
    ids=["LinAlgError", "ValueError", "other"],
)
def test_exception_on_every_rank(backend, exc, expected):
    def fail():
        raise exc

    with pytest.raises(expected) as info:
        backend.run_on_root(fail)
    if RANK != 0:
        assert "rank 0" in str(info.value)
    # the ranks still agree afterwards (nothing left pending)
    assert backend.allgather(RANK) == list(range(SIZE))


@pytest.mark.skipif(os.environ.get("BLASMP_BACKEND", "cpu") != "cpu", reason="CPU backend")
def test_root_borrows_the_node_threads(backend):
    from threadpoolctl import threadpool_info

    def blas_threads():
        return min(p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas")

    before = blas_threads()
    inside = backend.run_on_root(blas_threads)
    cpus = len(os.sched_getaffinity(0))
    if RANK == 0:
        want = min(cpus, before * backend.ranks_on_node) if backend.ranks_on_node > 1 else before
        assert inside == want
    assert blas_threads() == before  # restored
