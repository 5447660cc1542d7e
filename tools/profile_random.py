"""Where the time of ``blasmp_array.random`` goes, and its rate against NumPy or CuPy.

    mpiexec -n N python tools/profile_random.py [--n 4096] [--repeat 5] [--stages]
    BLASMP_BACKEND=gpu tools/node-run.sh N python3 tools/profile_random.py --n 16384

For each of ``standard_normal``, ``uniform(-1, 2)`` and ``random``: the public call on N ranks
(default block and grid; the time is the slowest rank's, between two barriers, the device
synchronised on the GPU) and the same draw by the library underneath on rank 0 alone (the other
ranks wait): NumPy's ``default_rng(0)`` on one thread (CPU backend) or ``cupy.random`` (GPU
backend), in the same run, alternating, median of ``--repeat``; then their ratio.

``--stages`` (CPU, rank 0) times, one by one, the NumPy primitives that ``_philox.fill_local``
runs for an ``n x n`` matrix on one process (over seed tiles of 256 x 256 values, as it does),
so the profile says which stage costs what: the Philox draw, the Box-Muller functions (NumPy's
float64 ``sin``/``cos`` are scalar libm calls; ``log1p``/``sqrt`` are vectorised), the copy
into the local matrix. Run it on an idle machine with ``OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from mpi4py import MPI

import blasmp_array as bm
from blasmp_array import _philox

T = _philox.SEED_TILE


def _sync(gpu: bool) -> None:
    if gpu:
        import cupy

        cupy.cuda.Device().synchronize()


def _timed(comm: MPI.Comm, fn: Callable[[], object], gpu: bool) -> float:
    comm.Barrier()
    t0 = time.perf_counter()
    fn()
    _sync(gpu)
    t = time.perf_counter() - t0
    return comm.allreduce(t, op=MPI.MAX)


def _rank0(comm: MPI.Comm, fn: Callable[[], object], gpu: bool) -> float:
    comm.Barrier()
    t = 0.0
    if comm.rank == 0:
        _sync(gpu)
        t0 = time.perf_counter()
        fn()
        _sync(gpu)
        t = time.perf_counter() - t0
    return comm.bcast(t, root=0)


def compare(n: int, repeat: int) -> str:
    """Print the comparison; return the backend's name."""
    comm = MPI.COMM_WORLD
    grid = bm.ProcessGrid()
    gpu = grid.backend.name == "gpu"
    if gpu:
        import cupy

        peer, lib = cupy.random, "cupy.random (rank 0)"
    else:
        peer, lib = np.random.default_rng(0), "NumPy default_rng (1 thread)"
    cases: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        (
            "standard_normal",
            lambda: bm.random.standard_normal((n, n), seed=0, grid=grid),
            lambda: peer.standard_normal((n, n)),
        ),
        (
            "uniform(-1, 2)",
            lambda: bm.random.uniform((n, n), -1.0, 2.0, seed=0, grid=grid),
            lambda: peer.uniform(-1.0, 2.0, (n, n)),
        ),
        (
            "random",
            lambda: bm.random.random((n, n), seed=0, grid=grid),
            lambda: peer.random((n, n)),
        ),
    ]
    for name, ours, theirs in cases:
        ours()  # warm: the kernel's first load, allocations, first touch
        _rank0(comm, theirs, gpu)
        t_ours, t_peer = [], []
        for _ in range(repeat):
            t_ours.append(_timed(comm, ours, gpu))
            t_peer.append(_rank0(comm, theirs, gpu))
        a, b = float(np.median(t_ours)), float(np.median(t_peer))
        if comm.rank == 0:
            print(
                f"{name:16s} n={n} {grid.backend.name} ranks={comm.size} grid={grid.shape}: "
                f"ours {a * 1e3:8.2f} ms, {lib} {b * 1e3:8.2f} ms, ours/peer {a / b:5.2f}",
                flush=True,
            )
    return str(grid.backend.name)


def stages(n: int, repeat: int) -> None:
    """The primitives of fill_local on one process, each timed over all tiles of n x n."""
    tiles = max(1, n * n // (T * T))
    u = np.empty(T * T)
    w = np.empty(T * T)
    r = np.empty(T * T // 2)
    rr = np.empty(T * T // 2)
    theta = np.empty(T * T // 2)
    out = np.empty((T, T))
    bitgen = np.random.Philox(key=np.array(_philox.philox_key(0), np.uint64))
    gen = np.random.Generator(bitgen)
    state = bitgen.state
    pairs = u.reshape(-1, 2)
    wp = w.reshape(-1, 2)
    trig = pairs[:, 0]

    def draw() -> None:
        state["state"]["counter"][:] = (0, 1, 2, 0)
        bitgen.state = state
        gen.random(out=u)

    steps: list[tuple[str, Callable[[], object]]] = [
        ("Philox draw (Generator.random)", draw),
        ("uniform: multiply + add", lambda: np.add(np.multiply(u, 3.0, out=w), -1.0, out=w)),
        ("normal: negative + log1p", lambda: np.log1p(np.negative(pairs[:, 0], out=r), out=r)),
        ("normal: -2 * . , sqrt", lambda: np.sqrt(np.multiply(r, -2.0, out=rr), out=rr)),
        ("normal: theta = 2 pi u_b", lambda: np.multiply(pairs[:, 1], _philox.TWO_PI, out=theta)),
        ("normal: cos", lambda: np.cos(theta, out=trig)),
        ("normal: sin", lambda: np.sin(theta, out=trig)),
        ("normal: r * cos, r * sin", lambda: (np.multiply(rr, trig, out=wp[:, 0]),
                                              np.multiply(rr, trig, out=wp[:, 1]))),
        ("copy into the local matrix", lambda: out.__setitem__(Ellipsis, w.reshape(T, T))),
    ]  # fmt: skip
    draw()
    print(f"stages of one process's fill, n={n} ({tiles} tiles of {T}x{T}), median of {repeat}:")
    for name, fn in steps:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(tiles):
                fn()
            times.append(time.perf_counter() - t0)
        print(f"  {name:32s} {np.median(times) * 1e3:8.1f} ms")
    for name, total in (
        ("NumPy PCG64 random", lambda: np.random.default_rng(0).random((n, n))),
        ("NumPy PCG64 standard_normal", lambda: np.random.default_rng(0).standard_normal((n, n))),
    ):
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            total()
            times.append(time.perf_counter() - t0)
        print(f"  {name:32s} {np.median(times) * 1e3:8.1f} ms (the reference)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--stages", action="store_true", help="per-stage profile on rank 0")
    args = p.parse_args()
    backend = compare(args.n, args.repeat)
    if args.stages and MPI.COMM_WORLD.rank == 0 and backend == "cpu":
        stages(args.n, args.repeat)


if __name__ == "__main__":
    main()
