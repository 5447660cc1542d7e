"""Measure the table of ``ops/engine/_factor_block.py``: the block in which the factorisations make
their working copy, per backend, grid and size.

Usage: mpiexec -n N python tools/factor_block_sweep.py [--n 2048 4096] [--blocks 128 256 512 1024]
       [--ops cholesky,lu_factor,solve,inv,qr] [--nrhs 1024] [--repeat 5] [--default 256]

On the default grid of the N ranks (``$BLASMP_BACKEND`` picks the backend), for each n:

* ``factor at b``: each call (``np.linalg.cholesky(S)``, ``bm.linalg.lu_factor(A)``,
  ``np.linalg.solve(A, B[:, :nrhs])``, ``np.linalg.inv(A)``, ``np.linalg.qr(A)``) on operands
  created with block ``b``, with the rule switched off: the factorisation itself at each block;
* ``move 256 -> b``: the redistribution of an n x n matrix from the default block to ``b``
  (the working copy's cost; the way back costs about the same);
* ``default call``: the call as a user makes it, on operands of block ``--default``, with the
  rule of ``ops/engine/_factor_block.py`` on, and the block the rule chose.

Times are the slowest rank's, median [min, max] of ``--repeat`` after one warm-up, the calls of
one n interleaved block by block (the machine's load changes during a sweep). The last lines
print, per call, the block with the least ``factor at b + 2 x move`` (the moves are paid only
when ``b`` differs from the caller's block): the row to write into ``_factor_block.TABLE``.
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
from blasmp_array.ops.engine import _factor_block

CALLS = ("cholesky", "lu_factor", "solve", "inv", "qr")
#: the table entry each call reads (solve and inv factor with LU)
FACTOR_OF = {"cholesky": "cholesky", "lu_factor": "lu", "solve": "lu", "inv": "lu", "qr": "qr"}


def _timed(fn: Callable[[], Any], grid: Any, sync: Callable[[], None]) -> float:
    grid.backend.barrier()
    t0 = time.perf_counter()
    fn()
    sync()
    return float(grid.comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))


def _operands(n: int, nrhs: int, block: int, grid: Any) -> dict[str, Any]:
    A = bm.random.standard_normal((n, n), block=(block, block), grid=grid, seed=1)
    S = A @ A.T + n * bm.eye(n, block=(block, block), grid=grid)
    B = bm.random.standard_normal((n, nrhs), block=(block, block), grid=grid, seed=2)
    return {"A": A, "S": S, "B": B}


def _call(name: str, ops: dict[str, Any]) -> Callable[[], Any]:
    A, S, B = ops["A"], ops["S"], ops["B"]
    return {
        "cholesky": lambda: np.linalg.cholesky(S),
        "lu_factor": lambda: bm.linalg.lu_factor(A),
        "solve": lambda: np.linalg.solve(A, B),
        "inv": lambda: np.linalg.inv(A),
        "qr": lambda: np.linalg.qr(A),
    }[name]


def sweep(n: int, args: argparse.Namespace, grid: Any) -> None:
    be = grid.backend
    xp = be.xp

    def sync() -> None:
        be.synchronize()
        if xp is not np:
            xp.cuda.get_current_stream().synchronize()

    calls = [c for c in args.ops.split(",") if c]
    blocks = [b for b in args.blocks if b <= n]
    say = (lambda *a: print(*a, flush=True)) if grid.rank == 0 else (lambda *a: None)
    operands = {b: _operands(n, args.nrhs, b, grid) for b in blocks}
    base = _operands(n, args.nrhs, args.default, grid)
    times: dict[tuple[str, int], list[float]] = {}
    moves: dict[int, list[float]] = {b: [] for b in blocks}
    defaults: dict[str, list[float]] = {c: [] for c in calls}
    _factor_block.enabled = False
    for c in calls:  # warm-up (kernels, plans, workspace pools)
        for b in blocks:
            _call(c, operands[b])()
    for b in blocks:
        base["A"].redistribute(block=(b, b))
    sync()
    for _ in range(args.repeat):
        _factor_block.enabled = False
        for b in blocks:
            moves[b].append(_timed(lambda b=b: base["A"].redistribute(block=(b, b)), grid, sync))
            for c in calls:
                times.setdefault((c, b), []).append(_timed(_call(c, operands[b]), grid, sync))
        _factor_block.enabled = True
        for c in calls:
            defaults[c].append(_timed(_call(c, base), grid, sync))
    _factor_block.enabled = True

    def fmt(ts: list[float]) -> str:
        return f"{statistics.median(ts):.4f} s [{min(ts):.4f}, {max(ts):.4f}]"

    head = f"n={n} grid {grid.nprow}x{grid.npcol} {be.name}"
    for b in blocks:
        say(f"{head} move {args.default} -> {b}: {fmt(moves[b])}")
    for c in calls:
        for b in blocks:
            say(f"{head} {c} factor at {b}: {fmt(times[(c, b)])}")
        chosen = _factor_block.working_block(be.name, grid.shape, n, FACTOR_OF[c], args.default)
        say(f"{head} {c} default call (block {args.default}, rule -> {chosen}): {fmt(defaults[c])}")
    for c in calls:
        med = {b: statistics.median(times[(c, b)]) for b in blocks}
        cost = {
            b: med[b] + (0 if b == args.default else 2 * statistics.median(moves[b]))
            for b in blocks
        }
        best = min(blocks, key=lambda b: med[b])
        best_moved = min(blocks, key=lambda b: cost[b])
        say(
            f"{head} {c}: fastest factor at {best} ({med[best]:.4f} s); with the moves from "
            f"{args.default}: {best_moved} ({cost[best_moved]:.4f} s)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[2048, 4096])
    ap.add_argument("--blocks", type=int, nargs="+", default=[128, 256, 512, 1024])
    ap.add_argument("--ops", default=",".join(CALLS))
    ap.add_argument("--nrhs", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--default", type=int, default=256)
    args = ap.parse_args()
    grid = bm.ProcessGrid()
    if grid.rank == 0:
        threads = grid.backend.blas_threads
        print(
            f"# {grid.size} rank(s), BLAS threads per rank: {threads.threads} ({threads.source})",
            flush=True,
        )
    for n in args.n:
        sweep(n, args, grid)


if __name__ == "__main__":
    main()
