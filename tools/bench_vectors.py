"""Time the everyday vector calls -- ``A @ x``, ``x @ A``, ``x @ y``, ``np.linalg.solve(A, b)``
with a vector ``b`` -- beside the one-process library on the same data in the same run (NumPy
on the CPU backend, CuPy on the GPU backend), and print each median and the speed ratio.

Usage (from the repository root)::

    OMP_NUM_THREADS=1 BLASMP_BACKEND=cpu python tools/bench_vectors.py --n 256
    BLASMP_BACKEND=gpu tools/node-run.sh 1 python3 tools/bench_vectors.py --n 16384
    BLASMP_BACKEND=gpu tools/node-run.sh 4 python3 tools/bench_vectors.py --n 16384

``speed`` is the reference's median over ours (> 1: we are faster). The reference runs on
rank 0 alone (on several ranks it is the one-process time the distributed call is compared
with); every call is followed by a device synchronisation on both sides, and each side is
warmed up before it is timed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

import blasmp_array as bm


def _median(fn: Callable[[], Any], sync: Callable[[], None], repeats: int, comm: Any) -> float:
    for _ in range(3):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        if comm is not None:
            comm.Barrier()
        t0 = time.perf_counter()
        fn()
        sync()
        dt = time.perf_counter() - t0
        times.append(comm.allreduce(dt, op=MPI.MAX) if comm is not None else dt)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=256)
    p.add_argument("--block", type=int, default=256)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--dtype", default="float64")
    args = p.parse_args()
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

    ours = {
        "A @ x": lambda: A @ X,
        "x @ A": lambda: X @ A,
        "x @ y": lambda: X @ X,
        "solve(A, b)": lambda: np.linalg.solve(A, X),
    }
    got = {k: _median(f, ours_sync, args.repeats, comm) for k, f in ours.items()}

    ref: dict[str, float] = {}
    if comm.rank == 0:
        if backend.name == "gpu":
            import cupy

            ca, cx = cupy.asarray(a), cupy.asarray(x)
            xp: Any = cupy

            def ref_sync() -> None:
                cupy.cuda.Device().synchronize()

        else:
            ca, cx, xp = a, x, np

            def ref_sync() -> None:
                return None

        refs = {
            "A @ x": lambda: ca @ cx,
            "x @ A": lambda: cx @ ca,
            "x @ y": lambda: cx @ cx,
            "solve(A, b)": lambda: xp.linalg.solve(ca, cx),
        }
        ref = {k: _median(f, ref_sync, args.repeats, None) for k, f in refs.items()}
        lib = "cupy" if backend.name == "gpu" else "numpy"
        print(
            f"n={n} {dt} block={args.block} grid={grid.nprow}x{grid.npcol} "
            f"backend={backend.name} ranks={comm.size} (medians of {args.repeats})"
        )
        for k in ours:
            print(
                f"  {k:12s} ours {got[k] * 1e3:9.3f} ms   {lib} (1 process) "
                f"{ref[k] * 1e3:9.3f} ms   speed {ref[k] / got[k]:.2f}x"
            )


if __name__ == "__main__":
    main()
