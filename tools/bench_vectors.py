"""Time the everyday small calls -- ``A @ x``, ``x @ A``, ``x @ y``, ``np.linalg.solve(A, b)``
with a vector ``b``, element-wise operators, sums and norms -- beside the one-process library
on the same data in the same run (NumPy on the CPU backend, CuPy on the GPU backend), and
print each median and the speed ratio.

Usage (from the repository root)::

    OMP_NUM_THREADS=1 BLASMP_BACKEND=cpu python tools/bench_vectors.py --n 256
    BLASMP_BACKEND=gpu tools/node-run.sh 1 python3 tools/bench_vectors.py --n 16384
    BLASMP_BACKEND=gpu tools/node-run.sh 4 python3 tools/bench_vectors.py --n 16384 \
        --ops "A @ x" --profile "A @ x"
    BLASMP_BACKEND=gpu tools/node-run.sh 4 python3 tools/bench_vectors.py --n 16384 \
        --ops "A @ x" "x @ A" --matvec-route host     # the host route, for comparison

``speed`` is the reference's median over ours (> 1: we are faster). The reference runs on
rank 0 alone (on several ranks it is the one-process time the distributed call is compared
with); the two sides are timed alternately, every call followed by a device synchronisation,
after a warm-up of both. ``--ops`` keeps some of the calls; ``--profile OP`` then runs ``OP``
``--profile-calls`` times under :mod:`cProfile` on every rank (a device synchronisation after
each call) and rank 0 prints its functions by internal time: where the host's time of the call
goes (its collectives, copies and allocations).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

import blasmp_array as bm
from blasmp_array.bench.small_calls import CALLS
from blasmp_array.ops.blas3 import matvec

#: the length of one timed sample (``inner`` calls of a fast operation)
SAMPLE_SECONDS = 2e-3


def _interleaved(
    ours: Callable[[], Any],
    ours_sync: Callable[[], None],
    ref: Callable[[], Any] | None,
    ref_sync: Callable[[], None],
    repeats: int,
    comm: Any,
) -> tuple[float, float]:
    """Medians of ``ours`` (max over ranks) and ``ref`` (rank 0) per call, timed alternately so
    that a machine whose load changes during the run slows both alike. A sample times
    ``inner`` calls then one synchronisation, ``inner`` chosen (as :mod:`timeit` does) so that
    a sample of ours lasts about :data:`SAMPLE_SECONDS`: one call of a few microseconds is
    below the clock's and the synchronisation's noise."""
    for _ in range(3):
        ours()
        if ref is not None:
            ref()
    ours_sync()
    ref_sync()
    t0 = time.perf_counter()
    ours()
    ours_sync()
    one = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    inner = max(1, min(1000, int(SAMPLE_SECONDS / max(one, 1e-9))))
    t_ours, t_ref = [], []
    for _ in range(repeats):
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(inner):
            ours()
        ours_sync()
        t_ours.append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX) / inner)
        if ref is not None:
            t0 = time.perf_counter()
            for _ in range(inner):
                ref()
            ref_sync()
            t_ref.append((time.perf_counter() - t0) / inner)
    return statistics.median(t_ours), statistics.median(t_ref) if t_ref else float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=256)
    p.add_argument("--block", type=int, default=256)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--dtype", default="float64")
    p.add_argument("--ops", nargs="+", default=list(CALLS), choices=list(CALLS))
    p.add_argument("--profile", choices=list(CALLS))
    p.add_argument("--profile-calls", type=int, default=200)
    p.add_argument("--top", type=int, default=25)
    p.add_argument(
        "--matvec-route",
        choices=["auto", "host", "exchange"],
        default="auto",
        help="the route of A @ x and x @ A on several processes (ops/blas3/matvec.ROUTE)",
    )
    args = p.parse_args()
    matvec.ROUTE = args.matvec_route
    comm = MPI.COMM_WORLD
    grid = bm.ProcessGrid()
    n, dt = args.n, np.dtype(args.dtype)
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((n, n)) + n * np.eye(n)).astype(dt)
    x = rng.standard_normal(n).astype(dt)
    A = bm.from_numpy(a, block=args.block, grid=grid)
    X = bm.from_numpy(x, block=args.block, grid=grid)
    backend = grid.backend

    def ours_sync() -> None:
        backend.synchronize()

    ours = {k: functools.partial(CALLS[k], A, X, np) for k in args.ops}
    refs: dict[str, Any] = dict.fromkeys(ours)
    ref_sync: Callable[[], None] = lambda: None  # noqa: E731
    lib = "cupy" if backend.name == "gpu" else "numpy"
    if comm.rank == 0:
        if backend.name == "gpu":
            import cupy

            ca, cx = cupy.asarray(a), cupy.asarray(x)
            xp: Any = cupy
            ref_sync = cupy.cuda.Device().synchronize
        else:
            ca, cx, xp = a, x, np
        refs = {k: functools.partial(CALLS[k], ca, cx, xp) for k in args.ops}
    results = {
        k: _interleaved(f, ours_sync, refs[k], ref_sync, args.repeats, comm)
        for k, f in ours.items()
    }
    if comm.rank == 0:
        print(
            f"n={n} {dt} block={args.block} grid={grid.nprow}x{grid.npcol} "
            f"backend={backend.name} ranks={comm.size} matvec route={args.matvec_route} "
            f"(medians of {args.repeats}, alternating)"
        )
        for k, (got, ref) in results.items():
            print(
                f"  {k:12s} ours {got * 1e3:10.4g} ms   {lib} (1 process) "
                f"{ref * 1e3:10.4g} ms   speed {ref / got:.2f}x"
            )
    if args.profile:
        _profile(functools.partial(CALLS[args.profile], A, X, np), ours_sync, args, comm)


def _profile(call: Callable[[], Any], sync: Callable[[], None], args: Any, comm: Any) -> None:
    """``call`` under cProfile (each call followed by ``sync``); rank 0 prints its profile."""
    for _ in range(5):
        call()
    sync()
    comm.Barrier()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(args.profile_calls):
        call()
        sync()
    prof.disable()
    per_call = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX) / args.profile_calls
    if comm.rank == 0:
        print(
            f"profile of {args.profile!r}, rank 0, {args.profile_calls} calls"
            f" ({per_call * 1e3:.4g} ms per call under the profiler, max over ranks)"
        )
        stats = pstats.Stats(prof)
        stats.sort_stats("tottime").print_stats(args.top)
        stats.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
