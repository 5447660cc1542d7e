"""Where the host time of the distributed LU goes: cProfile of repeated ``lu_factor`` calls on
every rank, rank 0's profile printed (the per-step gaps of docs/lu.md).

Usage: mpiexec -n 4 python tools/profile_lu.py [--n 16384] [--block 2048] [--grid 2x2]
                                              [--repeat 3] [--top 25]

Prints the median wall time of a call (device synchronised) and, for rank 0, the functions with
the most own time and the most cumulative time under cProfile. Backend from $BLASMP_BACKEND.
A diagnosis tool, not a benchmark (the bench command is).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import numpy as np

import blasmp_array as bm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=16384)
    ap.add_argument("--block", type=int, default=2048)
    ap.add_argument("--grid", default="2x2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    pr, pc = (int(x) for x in args.grid.split("x"))
    grid = bm.ProcessGrid(pr, pc)
    be = grid.backend
    A = bm.random.standard_normal((args.n, args.n), seed=1, block=args.block, grid=grid)
    bm.linalg.lu_factor(A, check_finite=False)  # warm-up: workspaces, plans, kernels
    be.synchronize()
    prof = cProfile.Profile()
    times = []
    for _ in range(args.repeat):
        be.barrier()
        t = time.perf_counter()
        prof.enable()
        bm.linalg.lu_factor(A, check_finite=False)
        be.synchronize()
        prof.disable()
        times.append(time.perf_counter() - t)
    if be.rank == 0:
        print(
            f"lu_factor n={args.n} block={args.block} grid={args.grid}: median "
            f"{np.median(times):.4f} s over {args.repeat} calls {np.round(times, 4)}"
        )
        for key in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats(key).print_stats(args.top)
            print(f"--- rank 0, by {key} (totals over {args.repeat} calls)")
            print("\n".join(out.getvalue().splitlines()[6:]))


if __name__ == "__main__":
    main()
