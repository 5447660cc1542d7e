"""Backends: the CPU one (NumPy + SciPy BLAS + MPI) and the GPU one (CuPy + cuBLAS + NVSHMEM).

One backend instance exists per communicator and kind; grids over the same communicator share
it. The GPU backend is imported lazily, so ``import blasmp_array`` needs only NumPy and mpi4py.
"""

from __future__ import annotations

from typing import Any

from .base import Backend, SignalTimeoutError

__all__ = ["Backend", "SignalTimeoutError", "get_backend", "gpu_available"]

_instances: dict[tuple[str, int], Backend] = {}


def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    from ._cuda_env import gpu_available as probe  # only the GPU backend's modules import CuPy

    return probe()


def get_backend(kind: str | None, comm: Any) -> Backend:
    """The backend of ``kind`` ('cpu', 'gpu', or None for automatic) over ``comm``.

    Collective over ``comm`` the first time a (kind, communicator) pair is asked for.
    """
    from mpi4py import MPI

    if kind is None:
        # every rank must choose the same backend
        kind = "gpu" if comm.allreduce(gpu_available(), op=MPI.LAND) else "cpu"
    key = (kind, MPI.Comm.py2f(comm))
    backend = _instances.get(key)
    if backend is None:
        if kind == "cpu":
            from .cpu import CPUBackend

            backend = CPUBackend(comm)
        elif kind == "gpu":
            from .gpu import GPUBackend

            backend = GPUBackend(comm)
        else:
            raise ValueError(f"backend must be 'cpu' or 'gpu', got {kind!r}")
        _instances[key] = backend
    return backend
