"""Time the default-argument calls a new user makes, as the user makes them.

Usage: mpiexec -n N python tools/defaults_table.py [--n 2048] [--repeat 5] [--numpy | --cupy]
       [--calls matmul,cholesky,lu_factor,solve,inv,ata] [--interleave]

Each call (``A @ B``, ``np.linalg.cholesky(S)``, ``bm.linalg.lu_factor(A)``,
``np.linalg.solve(A, B)``, ``np.linalg.inv(A)``, ``A.T @ A``) runs with every argument at its
default on the default grid and block; the time is the slowest rank's, median (min, max) of
``--repeat`` after one warm-up. ``--numpy``: rank 0 also times NumPy/SciPy on the gathered
matrices, with as many BLAS threads as all ranks have together, at most the CPUs it may use (the
ratio ``numpy / ours`` > 1: we are faster). ``--cupy`` (the GPU backend): rank 0 also times
CuPy's call (``cupy.matmul``, ``cupy.linalg.cholesky``, cupyx ``lu_factor``,
``cupy.linalg.solve``, ``cupy.linalg.inv``, ``a.T @ a``) on the same matrices on its device, in
the same run, while the other ranks wait. ``--numpy --interleave``: ``--repeat`` rounds of one
call of ours then one of NumPy's, medians of each and the median of the per-round ratios (the
machine's load drifts less within a round than between two loops); the other ranks wait asleep
while NumPy runs, not in a busy-polling MPI barrier that would take a core from NumPy's threads.
The first line says how many BLAS threads each rank runs and why
(``backends/_blas_threads.py``), so that runs with and without ``OMP_NUM_THREADS`` can be
compared: run them one after the other in the same shell command (the machine's load changes
between commands). A measuring tool for ``docs/defaults.md``; the bench's rows (``python -m
blasmp_array.bench``) are the reference.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

import blasmp_array as bm

CALLS = ("matmul", "cholesky", "lu_factor", "solve", "inv", "ata")


def _timed(fn: Callable[[], Any], comm: Any, be: Any, repeat: int) -> tuple[float, float, float]:
    fn()
    be.synchronize()
    ts = []
    for _ in range(repeat):
        be.barrier()
        t0 = time.perf_counter()
        fn()
        be.synchronize()
        ts.append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
    return statistics.median(ts), min(ts), max(ts)


def _local_timed(fn: Callable[[], float], repeat: int) -> float:
    fn()
    return statistics.median(fn() for _ in range(repeat))


def _sleeping_barrier(comm: Any) -> None:
    """A barrier that sleeps while it waits (MPI's polls and takes a core from the BLAS)."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(0.001)


def _interleaved(
    ours: Callable[[], Any], ref: Callable[[], Any] | None, comm: Any, be: Any, repeat: int
) -> tuple[list[float], list[float]]:
    """``repeat`` rounds of one timed call of ``ours`` (slowest rank) and one of ``ref`` (rank
    0, the others asleep); one warm-up round first."""
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(repeat + 1):
        _sleeping_barrier(comm)
        t0 = time.perf_counter()
        ours()
        be.synchronize()
        mine.append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
        _sleeping_barrier(comm)
        if ref is not None:
            theirs.append(ref())
        _sleeping_barrier(comm)
    return mine[1:], theirs[1:]


def _peer_calls(
    xp: Any, lu_factor: Callable[[Any], Any], a: Any, b: Any, s: Any
) -> dict[str, Callable[[], Any]]:
    """The one-process library's call for each of :data:`CALLS` (NumPy/SciPy or CuPy/cupyx)."""
    return {
        "matmul": lambda: a @ b,
        "cholesky": lambda: xp.linalg.cholesky(s),
        "lu_factor": lambda: lu_factor(a),
        "solve": lambda: xp.linalg.solve(a, b),
        "inv": lambda: xp.linalg.inv(a),
        "ata": lambda: a.T @ a,
    }


def _reference(name: str, a: Any, b: Any, s: Any, threads: int) -> Callable[[], float]:
    """One timed NumPy/SciPy call of ``name`` with ``threads`` BLAS threads (set untimed)."""
    import scipy.linalg as sl
    from threadpoolctl import threadpool_limits

    fn = _peer_calls(np, sl.lu_factor, a, b, s)[name]

    def timed() -> float:
        with threadpool_limits(limits=threads, user_api="blas"):
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0

    return timed


def _cupy_reference(name: str, a: Any, b: Any, s: Any) -> Callable[[], float]:
    """One timed CuPy call of ``name`` on device copies of the gathered matrices (the device
    synchronised before and after)."""
    import cupy as cp
    import cupyx.scipy.linalg as cl

    fn = _peer_calls(cp, cl.lu_factor, *(cp.asarray(x) for x in (a, b, s)))[name]

    def timed() -> float:
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        fn()
        cp.cuda.Device().synchronize()
        return time.perf_counter() - t0

    return timed


def _print_interleaved(
    name: str,
    ours: Callable[[], Any],
    ref: Callable[[], float] | None,
    comm: Any,
    be: Any,
    repeat: int,
    ref_threads: int,
) -> None:
    mine, theirs = _interleaved(ours, ref, comm, be, repeat)
    if comm.rank != 0:
        return
    med = statistics.median(mine)
    line = f"  {name:10s} {med:.4f} s [{min(mine):.4f}, {max(mine):.4f}]"
    if theirs:
        t = statistics.median(theirs)
        ratios = [m / r for m, r in zip(mine, theirs, strict=True)]
        line += (
            f"   numpy ({ref_threads} thr) {t:.4f} s [{min(theirs):.4f}, {max(theirs):.4f}]"
            f", ours/numpy {med / t:.2f}x (medians), per round median "
            f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}, {max(ratios):.2f}]"
        )
    print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--numpy", action="store_true")
    ap.add_argument("--cupy", action="store_true")
    ap.add_argument("--calls", default=",".join(CALLS))
    ap.add_argument("--interleave", action="store_true")
    args = ap.parse_args()
    calls = [c for c in args.calls.split(",") if c]
    grid = bm.ProcessGrid()
    comm, be, n = grid.comm, grid.backend, args.n
    cfg = bm.show_config(grid, mode="dicts")
    assert cfg is not None
    threads = sorted(
        {str(r["blas_threads"]) + " " + str(r["blas_threads_source"]) for r in cfg["per_rank"]}
    )
    env = (
        " ".join(
            f"{k}={os.environ[k]}"
            for k in (
                "OMP_NUM_THREADS",
                "OPENBLAS_NUM_THREADS",
                "MKL_NUM_THREADS",
                "BLASMP_BLAS_THREADS",
            )
            if k in os.environ
        )
        or "(no thread variables)"
    )
    A = bm.random.standard_normal((n, n), seed=1, grid=grid)
    B = bm.random.standard_normal((n, n), seed=2, grid=grid)
    S = A @ A.T + n * bm.eye(n, grid=grid)
    fns: dict[str, Callable[[], Any]] = {
        "matmul": lambda: A @ B,
        "cholesky": lambda: np.linalg.cholesky(S),
        "lu_factor": lambda: bm.linalg.lu_factor(A),
        "solve": lambda: np.linalg.solve(A, B),
        "inv": lambda: np.linalg.inv(A),
        "ata": lambda: A.T @ A,
    }
    if args.cupy and (be.name != "gpu" or importlib.util.find_spec("cupy") is None):
        if grid.rank == 0:
            print(f"--cupy: no CuPy peer on the {be.name} backend; ours only", flush=True)
        args.cupy = False
    if args.numpy or args.cupy:
        a, b, s = A.to_numpy(root=0), B.to_numpy(root=0), S.to_numpy(root=0)
        total = sum(r["blas_threads"] or 1 for r in cfg["per_rank"])
        ref_threads = max(1, min(total, len(os.sched_getaffinity(0))))
    if grid.rank == 0:
        print(
            f"ranks {grid.size} grid {grid.nprow}x{grid.npcol} n={n} {env}; "
            f"BLAS threads per rank: {', '.join(threads)}",
            flush=True,
        )
    for name in calls:
        ref = None
        if args.numpy and grid.rank == 0:
            ref = _reference(name, a, b, s, ref_threads)
        elif args.cupy and grid.rank == 0:
            ref = _cupy_reference(name, a, b, s)
        if args.interleave:
            _print_interleaved(name, fns[name], ref, comm, be, args.repeat, ref_threads)
            continue
        med, lo, hi = _timed(fns[name], comm, be, args.repeat)
        line = f"  {name:10s} {med:.4f} s [{lo:.4f}, {hi:.4f}]"
        if ref is not None:
            t = _local_timed(ref, args.repeat)
            peer = "cupy (1 process)" if args.cupy else f"numpy ({ref_threads} thr)"
            line += f"   {peer} {t:.4f} s, {peer.split()[0]}/ours {t / med:.2f}x"
        if grid.rank == 0:
            print(line, flush=True)
        comm.Barrier()


if __name__ == "__main__":
    main()
