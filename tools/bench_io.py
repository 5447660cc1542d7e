"""Throughput of blasmp_array's parallel I/O against single-process Dask.

Distributed (run under mpiexec; every rank takes part, times are the slowest rank's)::

    mpiexec -n 2 python tools/bench_io.py --n 4096 --block 512 --chunks 1024

Single-process Dask baseline (no MPI job; Dask's threaded scheduler)::

    python tools/bench_io.py --baseline --n 4096 --chunks 1024

Each line reports seconds (best of ``--repeat``) and MB/s of the ``n x n`` float64 matrix
(``8 n^2`` bytes):

* ``from_dask(zarr)``: ``bm.from_dask(da.from_zarr(store))`` -- read a zarr store of
  ``--chunks`` chunks into ``--block`` blocks (what ``bm.from_zarr`` does).
* ``from_zarr(chunks)``: ``bm.from_zarr(store, method='chunks')``: every chunk read once, by its
  owner under chunk-shaped blocks, then redistributed to ``--block`` in memory.
* ``from_dask(memory)``: ``bm.from_dask(da.from_array(a))`` of an in-memory matrix (the cost of
  selecting and placing the tiles, no storage).
* ``to_zarr`` / ``to_npy`` / ``from_npy``: the parallel writers/reader.
* baseline ``dask to_zarr`` / ``dask from_zarr``: ``da.from_array(a, chunks).to_zarr(path)`` and
  ``da.from_zarr(path).compute()`` in one process.

The store directory (``--dir``, default a fresh directory under ``$TMPDIR``) must be shared by
all ranks.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=4096, help="matrix order (n x n float64)")
    p.add_argument("--block", type=int, default=512, help="block size of the distributed array")
    p.add_argument("--chunks", type=int, default=1024, help="chunk size of the Dask/zarr source")
    p.add_argument("--repeat", type=int, default=3, help="repetitions (best is reported)")
    p.add_argument("--dir", default=None, help="directory shared by the ranks for the stores")
    p.add_argument("--baseline", action="store_true", help="single-process Dask baseline only")
    return p.parse_args()


def report(name: str, seconds: float, nbytes: int) -> None:
    print(f"{name:<22s} {seconds:8.3f} s  {nbytes / seconds / 1e6:10.1f} MB/s", flush=True)


def baseline(args: argparse.Namespace, a: np.ndarray, workdir: str) -> None:
    import dask.array as da

    path = os.path.join(workdir, "baseline.zarr")
    x = da.from_array(a, chunks=args.chunks)

    def write() -> None:
        x.to_zarr(path, overwrite=True)

    def read() -> None:
        da.from_zarr(path).compute()

    for name, fn in (("dask to_zarr", write), ("dask from_zarr", read)):
        best = min(timed(fn) for _ in range(args.repeat))
        report(name, best, a.nbytes)


def timed(fn: Callable[[], Any], sync: Callable[[], Any] | None = None) -> float:
    if sync:
        sync()
    t = time.perf_counter()
    fn()
    if sync:
        sync()
    return time.perf_counter() - t


def distributed(args: argparse.Namespace, a: np.ndarray, workdir: str) -> None:
    import dask.array as da
    from mpi4py import MPI

    import blasmp_array as bm

    comm = MPI.COMM_WORLD
    grid = bm.ProcessGrid()
    rank = comm.Get_rank()
    src = os.path.join(workdir, "source.zarr")
    if rank == 0:
        da.from_array(a, chunks=args.chunks).to_zarr(src, overwrite=True)
    comm.Barrier()

    def slowest(fn: Callable[[], Any]) -> float:
        return comm.allreduce(min(timed(fn, comm.Barrier) for _ in range(args.repeat)), MPI.MAX)

    A = bm.from_numpy(a, block=args.block, grid=grid)
    results = []
    results.append(
        ("from_dask(zarr)", slowest(lambda: bm.from_dask(da.from_zarr(src), args.block, grid)))
    )
    results.append(
        ("from_zarr(chunks)", slowest(lambda: bm.from_zarr(src, args.block, grid, method="chunks")))
    )
    x = da.from_array(a, chunks=args.chunks)
    results.append(("from_dask(memory)", slowest(lambda: bm.from_dask(x, args.block, grid))))
    out = os.path.join(workdir, "out.zarr")
    results.append(("to_zarr", slowest(lambda: A.to_zarr(out, overwrite=True))))
    npy = os.path.join(workdir, "out.npy")
    results.append(("to_npy", slowest(lambda: A.to_npy(npy, overwrite=True))))
    results.append(("from_npy", slowest(lambda: bm.from_npy(npy, args.block, grid))))
    B = bm.from_zarr(out, grid=grid)
    ok = bool(np.array_equal(B.to_numpy(), a))
    if rank == 0:
        print(
            f"# {comm.Get_size()} ranks, grid {grid.shape}, n={args.n}, block={args.block}, "
            f"source chunks={args.chunks}, round trip exact: {ok}"
        )
        for name, seconds in results:
            report(name, seconds, a.nbytes)


def main() -> None:
    args = parse()
    a = np.random.default_rng(0).random((args.n, args.n))
    if args.baseline:
        workdir = args.dir or tempfile.mkdtemp(prefix="bench-io-")
        print(f"# single-process dask, n={args.n}, chunks={args.chunks}")
        try:
            baseline(args, a, workdir)
        finally:
            if args.dir is None:
                shutil.rmtree(workdir, ignore_errors=True)
        return
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    made = args.dir is None
    workdir = comm.bcast(
        (args.dir or tempfile.mkdtemp(prefix="bench-io-")) if comm.Get_rank() == 0 else None
    )
    try:
        distributed(args, a, workdir)
    finally:
        comm.Barrier()
        if made and comm.Get_rank() == 0:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
