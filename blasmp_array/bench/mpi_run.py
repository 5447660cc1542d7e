"""What every MPI baseline of ``--compare`` shares (:mod:`.mpi_baselines` and its adapters):
the :class:`MpiRun` an adapter makes of a prepared case, the collective timing of it, the
gathers of its results (matrices and LAPACK pivot vectors), the agreement of all ranks on a
reason to skip, the library that holds a symbol, and the record of one baseline's result
(:func:`baseline_entry`, also used by :mod:`.compare`).

It imports nothing of the bench, so the adapters, :mod:`.mpi_baselines` and :mod:`.compare`
all build on it without an import circle.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "MpiRun",
    "time_collective",
    "bcast_matrix",
    "gather_pivots",
    "gather_result",
    "agreed_reason",
    "shared_library_of",
    "baseline_entry",
]


def baseline_entry(library: str, **fields: Any) -> dict[str, Any]:
    """One baseline's record in a result: the library, its times and rates (``None`` where
    not measured), threads, ranks and a note, updated with ``fields``."""
    out = {
        "library": library,
        "median_s": None,
        "min_s": None,
        "max_s": None,
        "gflops": None,
        "gbytes_per_s": None,
        "threads": None,
        "ranks": None,
        "note": "",
    }
    out.update(fields)
    return out


@dataclass
class MpiRun:
    """One baseline made concrete on this rank (every rank holds one)."""

    #: the timed call (collective)
    call: Callable[[], Any]
    #: what ``call`` returned last time, gathered on rank 0 as a NumPy array (for LU: the
    #: factors and SciPy's 0-based ``piv``, as ``lu_factor`` returns them) (collective);
    #: ``None`` on the other ranks
    gather: Callable[[Any], Any]
    #: how the work was set up (splits, descriptors, BLAS), for the report
    note: str
    #: BLAS / intra-op threads of one rank
    threads: int | None = None
    #: run before each call, untimed (restores what the call overwrites)
    restore: Callable[[], None] = lambda: None
    #: releases what the run holds (collective); called once, after the last call
    close: Callable[[], None] = lambda: None


def time_collective(run: MpiRun, comm: Any, warmup: int, repeat: int) -> tuple[list[float], Any]:
    """``warmup`` untimed calls, then ``repeat`` timed ones (collective).

    Each time is the slowest rank's, between a barrier and the end of the call, as blasmp_array's
    operators are timed. Returns the times and the last call's result.
    """
    from mpi4py import MPI

    out = None
    for _ in range(warmup):
        run.restore()
        out = run.call()
    times = []
    for _ in range(repeat):
        run.restore()
        comm.Barrier()
        t0 = time.perf_counter()
        out = run.call()
        dt = time.perf_counter() - t0
        times.append(float(comm.allreduce(dt, op=MPI.MAX)))
    return times, out


def bcast_matrix(comm: Any, x: np.ndarray | None, root: int = 0) -> np.ndarray:
    """The matrix ``x`` of rank ``root`` on every rank (collective; one buffer broadcast)."""
    meta = comm.bcast(None if x is None else (x.shape, x.dtype.str), root=root)
    shape, dtype = meta
    buf = np.ascontiguousarray(x) if comm.Get_rank() == root else np.empty(shape, np.dtype(dtype))
    comm.Bcast(buf, root=root)
    return buf


def gather_pivots(
    mine: tuple[np.ndarray, np.ndarray] | None, length: int, n: int, comm: Any, routine: str
) -> np.ndarray | None:
    """A distributed LAPACK pivot vector as SciPy's 0-based ``piv`` of ``n`` entries on rank 0
    (``None`` elsewhere; collective). ``mine``: this process's ``(global indices, 1-based
    pivots)``, or ``None`` for a process whose copy is not the one gathered (the vector is
    replicated across one grid dimension); ``length``: the distributed vector's length."""
    parts = comm.gather(mine, root=0)
    if comm.Get_rank() != 0:
        return None
    piv = np.full(length, -1, np.int64)
    for part in parts:
        if part is not None:
            piv[part[0]] = part[1]
    piv = piv[:n] - 1
    if (piv < 0).any():
        raise RuntimeError(f"the pivots of {routine} do not cover every row")
    return piv.astype(np.int32)


def gather_result(
    local: Any, layout: Any, grid: Any, pivots: Callable[[], np.ndarray | None] | None = None
) -> Any:
    """A baseline's result, its C-ordered local matrix ``local`` in ``layout`` on ``grid``, as
    a NumPy matrix on rank 0 (``None`` elsewhere; collective); with ``pivots`` (a collective
    gather such as :func:`gather_pivots`) the pair ``(matrix, piv)`` on rank 0."""
    import blasmp_array as bm

    full = bm.BlockCyclicArray(local, layout, grid).to_numpy(root=0)
    if pivots is None:
        return full
    piv = pivots()
    return None if full is None else (full, piv)


def agreed_reason(comm: Any, reason: str | None) -> str | None:
    """The first rank's reason when any rank has one, else ``None`` (collective), so that every
    rank takes the same branch before the next collective."""
    reasons = comm.allgather(reason)
    for rank, r in enumerate(reasons):
        if r is not None:
            return r if len(reasons) == 1 else f"rank {rank}: {r}"
    return None


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def shared_library_of(address: int | None) -> str | None:
    """The path of the shared library that holds ``address`` (``dladdr``), if known."""
    if not address:
        return None
    info = _DlInfo()
    libc = ctypes.CDLL(None)
    libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    if not libc.dladdr(address, ctypes.byref(info)) or not info.dli_fname:
        return None
    return info.dli_fname.decode()
