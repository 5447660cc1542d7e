"""Where the time of the distributed Hermitian eigensolver goes: the per-stage profile of
``eigh``/``eigvalsh`` (``blasmp_array.ops.lapack.eigh.LAST_PROFILE``: stage 1 -- the distributed
band reduction --, band gather, band solve, back-transform; or gather and local solve for the
gathered route), medians over repeated calls, rank 0's numbers.

Usage: mpiexec -n 2 python tools/profile_eigh.py [--n 1536] [--block 128] [--grid 1x2]
                                                [--method two-stage] [--op eigh] [--repeat 3]

A diagnosis tool, not a benchmark (the bench rows ``eigh`` and ``eigvalsh`` are). Backend from
$BLASMP_BACKEND.
"""

from __future__ import annotations

import argparse
import statistics
import time

import blasmp_array as bm
from blasmp_array.ops.lapack import eigh as eigh_mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1536)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--grid", default=None, help="PRxPC (default: the most square grid)")
    ap.add_argument("--method", default="two-stage", choices=["auto", "two-stage", "gathered"])
    ap.add_argument("--op", default="eigh", choices=["eigh", "eigvalsh"])
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    grid = (
        bm.ProcessGrid(*(int(x) for x in args.grid.split("x"))) if args.grid else bm.ProcessGrid()
    )
    g = bm.random.standard_normal((args.n, args.n), seed=0, block=args.block, grid=grid)
    a = (g + g.T).astype(args.dtype)
    fn = bm.linalg.eigh if args.op == "eigh" else bm.linalg.eigvalsh
    fn(a, method=args.method)  # warm-up
    walls, stages = [], {}
    for _ in range(args.repeat):
        grid.comm.Barrier()
        t0 = time.perf_counter()
        fn(a, method=args.method)
        grid.comm.Barrier()
        walls.append(time.perf_counter() - t0)
        for k, v in eigh_mod.LAST_PROFILE.items():
            stages.setdefault(k, []).append(v)
    if grid.rank == 0:
        print(
            f"{args.op} n={args.n} block={args.block} grid={grid.nprow}x{grid.npcol} "
            f"{args.dtype} method={args.method}: median {statistics.median(walls):.3f} s "
            f"(min {min(walls):.3f}, max {max(walls):.3f}, {args.repeat} calls)"
        )
        for k, v in stages.items():
            print(f"  {k:15s} {statistics.median(v):8.3f} s")


if __name__ == "__main__":
    main()
