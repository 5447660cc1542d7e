"""The gate of the GPU-library baselines' tests (cuBLASMp, cuSOLVERMp), shared by their files:
whether a library runs here, and, where it cannot, that it says why in the expected words."""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["library_runs_here"]


def _shares_a_gpu(comm: Any) -> bool:
    import cupy
    from mpi4py import MPI

    places = comm.allgather((MPI.Get_processor_name(), cupy.cuda.Device().id))
    return len(set(places)) < len(places)


def library_runs_here(comm: Any, backend: str, why: str | None, library: str) -> bool:
    """True when the test should run ``library``; otherwise checks its reason (collective):
    on the CPU backend the host-memory reason, with ranks sharing a GPU NCCL's one-GPU-per-rank
    reason; a library that is not installed skips the test with its reason."""
    if backend != "gpu":
        assert why is not None and "operands on the host" in why
        return False
    if _shares_a_gpu(comm):
        assert why is not None and "needs one GPU per rank" in why, why
        return False
    if why is not None:
        pytest.skip(f"{library} not usable here: {why}")
    return True
