"""Load a matrix from a zarr store written by Dask, factor it, and write the factor back.

Rank 0 writes a symmetric positive definite matrix ``A = G G^T / n + I`` into a zarr store
with Dask (chunks of its own, unrelated to the block size). Every rank then reads its part of
the store straight into the block-cyclic layout (``bm.from_zarr``), the matrix is factored
(``np.linalg.cholesky``: ``A = L L^T``), and the factor is written back as a new store
(``L.to_zarr``), which any zarr or Dask reader can open::

    python examples/zarr_cholesky.py
    mpiexec -n 4 python examples/zarr_cholesky.py --n 16384 --chunks 2048 --block 256 \\
        --dir /scratch

The stores go to a temporary directory under ``--dir`` (default: the system's temporary
directory), removed at the end; with several nodes, give a directory that every rank sees.

Checked: the factor read back from its store (through Dask, on rank 0) equals the factor in
memory bit for bit and is lower triangular; the backward error ``|A - L L^T| <= (n + 1) eps
|L| |L^T|`` holds elementwise (Higham, Theorem 10.3), computed distributed on the matrices read
from the stores. Exits with status 1 if a check fails.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import blasmp_array as bm


def write_with_dask(path: str, n: int, chunks: int, seed: int) -> None:
    """The input store, as a Dask user would write it (rank 0 only)."""
    import dask.array as da

    g = da.random.default_rng(seed).standard_normal((n, n), chunks=chunks)
    a = g @ g.T / n + da.eye(n, chunks=chunks)
    a.to_zarr(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="order of the matrix (default 1000)")
    parser.add_argument("--chunks", type=int, default=300, help="Dask's chunks (default 300)")
    parser.add_argument("--block", type=int, default=64, help="block size (default 64)")
    parser.add_argument("--dir", default=None, help="parent directory of the stores")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    n, nb = args.n, (args.block, args.block)
    eps = np.finfo(np.float64).eps

    grid = bm.ProcessGrid()
    rank, comm = grid.rank, grid.comm

    workdir = tempfile.mkdtemp(prefix="blasmp-zarr-", dir=args.dir) if rank == 0 else None
    workdir = comm.bcast(workdir, root=0)
    source, target = str(Path(workdir) / "a.zarr"), str(Path(workdir) / "l.zarr")
    try:
        if rank == 0:
            write_with_dask(source, n, args.chunks, args.seed)
        comm.Barrier()  # the store is complete before anyone reads it

        t0 = time.perf_counter()
        A = bm.from_zarr(source, block=nb, grid=grid)  # any chunking, read in parallel
        t1 = time.perf_counter()
        L = np.linalg.cholesky(A)  # NumPy's call: the lower factor, distributed
        t2 = time.perf_counter()
        L.to_zarr(target)  # one writer per chunk, no locks
        t3 = time.perf_counter()

        checks: list[tuple[str, bool, str]] = []
        # 1. The written store, read by Dask (rank 0), is the factor in memory.
        l_mem = L.to_numpy(root=0)
        if rank == 0:
            import dask.array as da

            l_store = da.from_zarr(target).compute()
            assert l_mem is not None
            same = l_store.shape == (n, n) and np.array_equal(l_store, l_mem)
            checks.append(("the store read by Dask equals L", same, "bit for bit"))
            upper = np.abs(np.triu(l_store, 1)).max() if n > 1 else 0.0
            checks.append(("L is lower triangular", upper == 0.0, f"max |upper| = {upper}"))
        # 2. The backward error, distributed, on the matrices read back from the two stores.
        A2 = bm.from_zarr(source, block=nb, grid=grid)
        L2 = bm.from_zarr(target, block=nb, grid=grid)
        absl = np.abs(L2)
        excess = np.abs(A2 - L2 @ L2.T) - (n + 1) * eps * (absl @ absl.T)
        worst = float(excess.max())
        ratio = float(np.linalg.norm(A2 - L2 @ L2.T)) / (float(np.linalg.norm(A2)) * n * eps)
        checks.append(
            (
                "|A - L L^T| <= (n + 1) eps |L| |L^T|",
                worst <= 0.0,
                f"normwise {ratio:.3g} n eps",
            )
        )

        ok = True
        if rank == 0:
            print(
                f"zarr -> Cholesky -> zarr: n = {n}, Dask chunks {args.chunks}, block "
                f"{args.block}, {grid.size} rank(s) on a {grid.nprow}x{grid.npcol} grid, backend "
                f"{grid.backend.name}"
            )
            print(f"  from_zarr {t1 - t0:.3f} s, cholesky {t2 - t1:.3f} s, to_zarr {t3 - t2:.3f} s")
            for name, passed, detail in checks:
                ok &= bool(passed)
                print(f"  {name:40s} {'ok' if passed else 'FAIL'}  ({detail})")
            print("all checks passed" if ok else "CHECK FAILED")
        ok = bool(comm.bcast(ok, root=0))
    finally:
        comm.Barrier()
        if rank == 0:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
