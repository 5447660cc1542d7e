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
from blasmp_array.bench.compare import _time
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
    ap.add_argument(
        "--reference",
        action="store_true",
        help="also time the one-process library's call (cupy/numpy.linalg) on rank 0 on the "
        "gathered matrix, and print the eigenvalues' error against it in units of n eps ||A||_1",
    )
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
        out = fn(a, method=args.method)
        a.backend.synchronize()
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
    if args.reference:
        w = (out[0] if isinstance(out, tuple) else out).to_numpy()
        full = a.to_numpy(root=0)
        v = out[1].to_numpy(root=0) if isinstance(out, tuple) else None
        if grid.rank == 0:
            _reference(full, w, v, args.op, args.repeat)


def _reference(full, w, v, op, repeat):
    """The one-process library's call on ``full``, timed (median of ``repeat`` after a
    warm-up), and the error of ``w`` against its eigenvalues."""
    import numpy as np

    try:
        import cupy as xp

        sync, name = xp.cuda.Device().synchronize, "cupy"
    except ImportError:
        xp, sync, name = np, (lambda: None), "numpy"
    d = xp.asarray(full)
    ref = xp.linalg.eigvalsh if op == "eigvalsh" else xp.linalg.eigh
    r = ref(d)  # the warm-up, whose eigenvalues are checked
    sync()
    times = _time(lambda: ref(d), 0, repeat, sync)
    wr = r if op == "eigvalsh" else r[0]
    wr = np.asarray(xp.asnumpy(wr) if name == "cupy" else wr)
    n = full.shape[0]
    anorm = float(np.abs(full).sum(axis=0).max())
    err = float(np.abs(w - wr).max()) / (n * np.finfo(full.dtype).eps * anorm)
    print(
        f"  {name}.linalg.{op}: median {statistics.median(times):.3f} s "
        f"(min {min(times):.3f}, max {max(times):.3f}); |w - w_{name}| = {err:.3g} n eps ||A||_1"
    )
    if v is not None:  # LAPACK's tester ratios (xDRVST) of our eigenvectors, on the device
        eps = np.finfo(full.dtype).eps
        vd, wd = xp.asarray(v), xp.asarray(w)
        res = float(xp.abs(d @ vd - vd * wd[None, :]).sum(axis=0).max()) / (anorm * n * eps)
        orth = float(xp.abs(vd.T @ vd - xp.eye(n)).sum(axis=0).max()) / (n * eps)
        print(
            f"  eigenvectors: ||AV - VW||_1 / (||A||_1 n eps) = {res:.3g}, "
            f"||I - V^T V||_1 / (n eps) = {orth:.3g} (testers' threshold 60)"
        )


if __name__ == "__main__":
    main()
