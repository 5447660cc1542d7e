"""Same-run timing of the NumPy door against the library underneath it.

    mpiexec -n P python tools/door_compare.py [--n 4096] [--repeat 5] [--routes host,device]
    BLASMP_BACKEND=gpu tools/node-run.sh 4 python3 tools/door_compare.py --n 16384

Times (median of ``--repeat``, slowest rank, between barriers) ``bm.from_numpy(h)``,
``bm.from_numpy(h, root=0)``, ``A.to_numpy(root=0)`` and ``A.to_numpy()`` with default
arguments, each route of ``creation.ROUTE`` given, and in the same run the peer on rank 0 alone
(the other ranks sleep): ``cupy.asarray(h)`` / ``cupy.asnumpy(d)`` on the GPU backend, a NumPy
copy into a fresh array on as many threads as ranks on the CPU backend. Prints the times and
ours / peer. The results are checked against ``h`` once per route.
"""

from __future__ import annotations

import argparse
import threading
import time

import numpy as np
from mpi4py import MPI

import blasmp_array as bm
from blasmp_array import creation

comm = MPI.COMM_WORLD


def quiet_barrier() -> None:
    """A barrier that sleeps instead of spinning (the peer runs on rank 0 meanwhile)."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(1e-3)


def timed(fn, repeat: int, only_root: bool = False) -> float:
    times = []
    for _ in range(repeat):
        quiet_barrier()
        t = 0.0
        if not only_root or comm.rank == 0:
            t0 = time.perf_counter()
            result = fn()
            if hasattr(result, "_data"):
                result.backend.synchronize()
            t = time.perf_counter() - t0
            del result
        times.append(comm.allreduce(t, op=MPI.MAX))
    return float(np.median(times))


def numpy_copy(h: np.ndarray, threads: int):
    def run():
        out = np.empty_like(h)
        cut = [(h.shape[0] * i) // threads for i in range(threads + 1)]
        workers = [
            threading.Thread(target=np.copyto, args=(out[a:b], h[a:b]))
            for a, b in zip(cut[:-1], cut[1:], strict=True)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return out

    return run


def route_rows(route: str, h: np.ndarray, grid: bm.ProcessGrid, repeat: int) -> list:
    """The four calls on one route of ``creation.ROUTE`` (checked once first)."""
    creation.ROUTE[grid.backend.name] = route
    A = bm.from_numpy(h, grid=grid)
    for got in (A.to_numpy(), A.to_numpy(root=0)):
        assert got is None or np.array_equal(got, h), f"route {route}: wrong result"
    B = bm.from_numpy(h if comm.rank == 0 else None, grid=grid, root=0)
    assert np.array_equal(B.to_numpy(), h), f"route {route}: wrong scatter"
    del B

    def scatter():
        return bm.from_numpy(h if comm.rank == 0 else None, grid=grid, root=0)

    return [
        (f"from_numpy(h) [{route}]", timed(lambda: bm.from_numpy(h, grid=grid), repeat)),
        (f"from_numpy(h, root=0) [{route}]", timed(scatter, repeat)),
        (f"to_numpy(root=0) [{route}]", timed(lambda: A.to_numpy(root=0), repeat)),
        (f"to_numpy() [{route}]", timed(lambda: A.to_numpy(), repeat)),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--routes", default="host,device")
    args = ap.parse_args()
    grid = creation.default_grid()
    be = grid.backend
    h = np.random.default_rng(0).standard_normal((args.n, args.n))
    gib = h.nbytes / 2**30
    rows = []
    if be.name == "gpu":
        import cupy

        d = cupy.asarray(h)
        rows.append(("peer cupy.asarray(h)", timed(lambda: cupy.asarray(h), args.repeat, True)))
        rows.append(("peer cupy.asnumpy(d)", timed(lambda: cupy.asnumpy(d), args.repeat, True)))
        peer_in, peer_out = rows[0][1], rows[1][1]
    else:
        copy = numpy_copy(h, comm.size)
        rows.append((f"peer NumPy copy, {comm.size} thread(s)", timed(copy, args.repeat, True)))
        peer_in = peer_out = rows[0][1]
    for route in args.routes.split(","):
        rows += route_rows(route, h, grid, args.repeat)
    if comm.rank == 0:
        print(
            f"backend {be.name}, {comm.size} rank(s), grid {grid.shape}, n = {args.n} "
            f"({gib:.2f} GiB float64), median of {args.repeat}, slowest rank"
        )
        for name, t in rows:
            peer = peer_in if name.startswith("from") else peer_out
            ratio = "" if name.startswith("peer") else f"  ours/peer {t / peer:.2f}"
            print(f"  {name:34s} {t * 1e3:9.1f} ms  {gib / t:6.2f} GiB/s{ratio}")


if __name__ == "__main__":
    main()
