"""Hand a Dask array to blasmp_array, compute on it, and hand the result back to Dask.

A lazy Dask array (here: ``m`` samples x ``n`` variables of random data, chunked as Dask likes)
is distributed block-cyclically (``bm.from_dask``: each rank computes only the chunks it
needs), its covariance ``C = (X - mean)^T (X - mean) / (m - 1)`` is computed distributed (the
centring by a rank-1 GEMM, the product as SYRK), the correlation matrix follows elementwise,
and both go back to Dask (``C.to_dask()``) for whatever the Dask program does next::

    python examples/dask_roundtrip.py
    mpiexec -n 4 python examples/dask_roundtrip.py --m 200000 --n 4000 --chunks 20000,1000 \\
        --block 256

Checked on rank 0, on the arrays handed back (computed by Dask): the covariance against NumPy's
on the values of the input, within the rounding bound of its sums (``4 m eps`` relative to
``|X - mean|^T |X - mean| / (m - 1)``), the correlation's unit diagonal and its symmetry; and
on every rank the shape and dtype of the Dask arrays handed back. Exits with status 1 if a
check fails.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from mpi4py import MPI

import blasmp_array as bm


def main(argv: list[str] | None = None) -> int:
    import dask.array as da

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=3000, help="samples (rows, default 3000)")
    parser.add_argument("--n", type=int, default=400, help="variables (columns, default 400)")
    parser.add_argument("--chunks", default="700,150", help="Dask's chunks, rows,cols")
    parser.add_argument("--block", type=int, default=64, help="block size (default 64)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    m, n, nb = args.m, args.n, (args.block, args.block)
    chunks = tuple(int(c) for c in args.chunks.split(","))
    eps = np.finfo(np.float64).eps

    grid = bm.ProcessGrid()
    rank = grid.rank

    # The same lazy Dask array on every rank (a seeded generator): correlated columns with
    # different scales and means.
    rng = da.random.default_rng(args.seed)
    z = rng.standard_normal((m, n), chunks=chunks)
    x = (z + 0.5 * da.roll(z, 1, axis=1)) * da.arange(1, n + 1, chunks=chunks[1]) + 3.0

    t0 = time.perf_counter()
    X = bm.from_dask(x, block=nb, grid=grid)  # each rank computes only the chunks it stores
    ones = bm.ones((m, 1), block=nb, grid=grid)
    mean = (ones.T @ X) * (1.0 / m)  # 1 x n column means (a GEMM)
    Xc = X - ones @ mean  # centred: a rank-1 update
    C = (Xc.T @ Xc) * (1.0 / (m - 1))  # SYRK: the full symmetric n x n covariance
    std = np.sqrt((ones.T @ (Xc * Xc)) * (1.0 / (m - 1)))  # 1 x n standard deviations
    R = C / (std.T @ std)  # the correlation matrix: C_ij / (s_i s_j), s s^T a rank-1 GEMM
    cov, corr = C.to_dask(), R.to_dask()  # lazy Dask arrays, usable on every rank
    elapsed = time.perf_counter() - t0

    checks: list[tuple[str, bool, str]] = []
    handed_back = all(
        isinstance(a, da.Array)
        and a.shape == (n, n)
        and a.dtype == np.float64
        and all(sum(c) == n for c in a.chunks)
        for a in (cov, corr)
    )
    checks.append(("Dask arrays handed back", handed_back, f"chunks {cov.chunksize}"))
    if rank == 0:
        # NumPy on the values of the Dask array, and the bound of a sum of m products
        xh = x.compute()
        xc = xh - xh.mean(axis=0, keepdims=True)
        cov_ref = xc.T @ xc / (m - 1)
        scale = np.abs(xc).T @ np.abs(xc) / (m - 1)
        cov_ours, corr_ours = da.compute(cov, corr)  # the arrays handed back, computed by Dask
        err = float(np.max(np.abs(cov_ours - cov_ref) / scale)) / eps
        checks.append(("covariance against NumPy's", err <= 4 * m, f"{err:.3g} <= {4 * m} eps"))
        diag = float(np.max(np.abs(np.diag(corr_ours) - 1.0))) / eps
        checks.append(("correlation: unit diagonal", diag <= 8 * m, f"{diag:.3g} <= {8 * m} eps"))
        asym = float(np.max(np.abs(corr_ours - corr_ours.T))) / eps
        checks.append(("correlation: symmetric", asym <= 8 * m, f"{asym:.3g} <= {8 * m} eps"))
        strongest = float(np.sort(np.abs(corr_ours - np.eye(n)).ravel())[-1])

    ok = bool(grid.comm.allreduce(handed_back, op=MPI.LAND))
    if rank == 0:
        print(
            f"Dask -> blasmp_array -> Dask: X {m} x {n} in Dask chunks {chunks}, block "
            f"{args.block}, {grid.size} rank(s) on a {grid.nprow}x{grid.npcol} grid, backend "
            f"{grid.backend.name}; from_dask, covariance, correlation and to_dask took "
            f"{elapsed:.3f} s"
        )
        for name, passed, detail in checks:
            ok &= bool(passed)
            print(f"  {name:34s} {'ok' if passed else 'FAIL'}  ({detail})")
        print(f"  strongest correlation between two variables: {strongest:.3f} (not a check)")
        print("all checks passed" if ok else "CHECK FAILED")
    ok = bool(grid.comm.bcast(ok, root=0))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
