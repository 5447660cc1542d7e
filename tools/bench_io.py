"""Throughput of blasmp_array's Dask/zarr I/O against single-process Dask and NumPy, in one run.

Run under mpiexec (every rank takes part; 1 rank works too), serialised with other benchmarks::

    flock /tmp/bench.lock mpiexec -n 2 python tools/bench_io.py --n 4096 --block 256 \\
        --repeat 3 --dir /tmp/bench-io --json io.json

The source is a lazy, deterministic Dask array ``x`` of ``n x n`` float64 in ``--chunks`` chunks:
chunk ``(i, j)`` is ``np.random.default_rng([seed, i, j]).random(shape)``. Every rank builds the
same graph without holding the matrix, and any tile of it can be recomputed for a check.

Each repeat times, in this order (default arguments of the public API):

* ``from_dask(lazy)``: ``A = bm.from_dask(x, block)``, each rank computing its own tiles.
* ``to_zarr``: ``A.to_zarr(path)`` (zarr chunks = blocks, each rank writing its own).
* ``from_zarr``: ``bm.from_zarr(path)`` (blocks = the store's chunks).
* ``to_dask().compute()``: ``A.to_dask().compute()`` on every rank.
* ``to_numpy``: ``A.to_numpy()`` on every rank.
* baseline ``dask compute(lazy)``: ``a = x.compute()``, one process.
* baseline ``numpy copy``: ``a.copy()``.
* baseline ``dask to_zarr``: ``da.from_array(a, chunks=block).to_zarr(path)`` with the codec
  read from the store ``to_zarr`` wrote (same codec).
* baseline ``dask from_zarr``: ``da.from_zarr(path).compute()``.

Distributed steps run between two barriers on every rank; their time is the slowest rank's.
Baseline steps run on rank 0 alone, with Dask's threaded scheduler on ``--threads`` threads
(default: as many as there are ranks), while the other ranks wait in a sleeping barrier (an MPI
barrier spins and would take a core). Stores are removed before each write and the page cache
is flushed (``os.sync``) after it, both outside the timed region; the reads that follow come
from the page cache.

Memory (Linux): before each distributed step every rank resets its peak resident size
(``/proc/self/clear_refs``) and after it reads the peak (``VmHWM``): the table gives the most
memory a rank held during the step beyond what it held before (the largest over the ranks and
repeats), with the local matrix's size for comparison (a reader's result is part of its peak).

Correctness: after each step ``--samples`` random tiles of the result on every rank (and of the
baseline's arrays on rank 0) are compared bit for bit with the same tiles of ``x`` (recomputed
from the source, no gather). Results: a table on rank 0 (median and min-max over the repeats,
MB/s with MB = 1e6 bytes of ``8 n^2``), the same-run time ratios ours / reference, and with
``--json`` every repeat's time, the versions, the machine and the memory of each rank.
``python tools/bench_io.py --pool a.json b.json ...`` (no MPI) pools the repeats of several
records.

``mpiexec -n P python tools/bench_io.py --memory [--n N --block B]`` measures the host staging of
every file path (zarr, ``.npy``, HDF5, ``from_dask``): the largest traced allocation
(``tracemalloc``, all threads: NumPy arrays, zarr's buffers, Python objects) that each call
holds at once beyond what the rank held before it (and beyond a reader's result), the largest
over the ranks, each call run once before to exclude imports and caches.

``python tools/bench_io.py --codecs [--n N --block B --repeat R]`` (one process, no MPI) measures
the codec choice of ``to_zarr``: for a random normal and a lower-triangular ``n x n`` float64
matrix, the median time and CPU time (all threads of the process) to write (``z[...] = a``) and
read (``z[...]``) it through zarr with chunks ``B x B`` and each candidate codec, and the size
ratio raw / stored.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

DIST = ("from_dask(lazy)", "to_zarr", "from_zarr", "to_dask().compute()", "to_numpy")
BASE = ("dask compute(lazy)", "numpy copy", "dask to_zarr", "dask from_zarr")
#: (ours, reference) pairs of the ratio table
PAIRS = (
    ("from_dask(lazy)", "dask compute(lazy)"),
    ("to_zarr", "dask to_zarr"),
    ("from_zarr", "dask from_zarr"),
    ("to_dask().compute()", "numpy copy"),
    ("to_dask().compute()", "to_numpy"),
)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=4096, help="matrix order (n x n float64)")
    p.add_argument("--block", type=int, default=1024, help="block size of the distributed array")
    p.add_argument("--chunks", type=int, default=None, help="chunks of the source (default block)")
    p.add_argument("--repeat", type=int, default=3, help="timed repetitions")
    p.add_argument("--samples", type=int, default=4, help="tiles checked per rank and result")
    p.add_argument("--seed", type=int, default=0, help="seed of the source matrix")
    p.add_argument("--dir", default=None, help="directory shared by the ranks for the stores")
    p.add_argument("--no-baseline", action="store_true", help="skip the single-process Dask steps")
    p.add_argument(
        "--threads", type=int, default=None, help="Dask threads of the baseline (default: ranks)"
    )
    p.add_argument("--codecs", action="store_true", help="the codec table (one process)")
    p.add_argument("--memory", action="store_true", help="the host staging table")
    p.add_argument("--json", default=None, help="write every repeat's time here (rank 0)")
    return p.parse_args()


def source(n: int, chunks: int, seed: int) -> Any:
    """The lazy ``n x n`` float64 source: chunk (i, j) from a generator seeded ``[seed, i, j]``."""
    import dask.array as da

    def chunk(block_info: Any = None) -> np.ndarray:
        info = block_info[None]
        return np.random.default_rng([seed, *info["chunk-location"]]).random(info["chunk-shape"])

    sizes = tuple([chunks] * (n // chunks) + ([n % chunks] if n % chunks else []))
    return da.map_blocks(chunk, chunks=(sizes, sizes), dtype=np.float64, meta=np.empty((0, 0)))


def sleeping_barrier(comm: Any, poll: float = 0.005) -> None:
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(poll)


def local_tiles_match(A: Any, x: Any, k: int, rng: np.random.Generator) -> bool:
    """``k`` random tiles of this rank's part of ``A`` equal the same tiles of ``x``."""
    lay, g = A.layout, A.grid
    tiles = [
        (bi, bj) for bi in lay.local_block_rows(g.myrow) for bj in lay.local_block_cols(g.mycol)
    ]
    mb, nb = lay.block
    for t in rng.permutation(len(tiles))[:k]:
        bi, bj = tiles[t]
        (h, w), (il, jl) = lay.block_extent(bi, bj), lay.local_offset(bi, bj)
        want = x[bi * mb : bi * mb + h, bj * nb : bj * nb + w].compute()
        if not np.array_equal(A.backend.asnumpy(A.local[il : il + h, jl : jl + w]), want):
            return False
    return True


def global_tiles_match(a: np.ndarray, x: Any, block: int, k: int, rng: Any) -> bool:
    """``k`` random ``block``-sized tiles of the full matrix ``a`` equal those of ``x``."""
    nbk = -(-a.shape[0] // block)
    for bi, bj in rng.integers(0, nbk, size=(k, 2)):
        r, c = slice(bi * block, (bi + 1) * block), slice(bj * block, (bj + 1) * block)
        if not np.array_equal(a[r, c], x[r, c].compute()):
            return False
    return True


def remove(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def versions() -> dict[str, str]:
    import dask
    import mpi4py
    import numcodecs
    import zarr
    from mpi4py import MPI

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "dask": dask.__version__,
        "zarr": zarr.__version__,
        "numcodecs": numcodecs.__version__,
        "mpi4py": mpi4py.__version__,
        "mpi": MPI.Get_library_version().splitlines()[0].strip(),
    }


def machine() -> dict[str, Any]:
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            mem = f.readline().split(":")[1].strip()
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "mem_total": mem, "platform": platform.platform()}


def commit() -> str:
    """HEAD of the checkout holding this script, with the files of ``blasmp_array/`` and
    ``tools/`` that differ from it (call at the start: modules are loaded then)."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(
            ["git", "-C", repo, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", repo, "status", "--porcelain", "--", "blasmp_array", "tools"],
            capture_output=True,
            text=True,
        ).stdout.split("\n")
    except OSError:
        return "?"
    changed = [line[3:] for line in dirty if line.strip()]
    return head + (f" + uncommitted changes to {', '.join(changed)}" if changed else "")


def du(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def pool(paths: list[str]) -> None:
    """Print the repeats of several ``--json`` records pooled: MB/s of the median, quartile and
    extreme times, and each run's median (the table of docs/performance.md)."""
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f))
    nbytes = runs[0]["nbytes"]
    print(f"# {len(runs)} runs, n={runs[0]['n']}, MB/s of {nbytes / 1e6:.1f} MB (MB = 1e6 bytes)")
    print("# operation, repeats, median, quartiles, min-max, median of each run (MB/s)")
    for name in runs[0]["seconds_per_repeat"]:
        per_run = [r["seconds_per_repeat"][name] for r in runs]
        ts = np.concatenate(per_run)
        q1, med, q3 = np.percentile(ts, [25, 50, 75])

        def mbps(t: float) -> float:
            return nbytes / t / 1e6

        each = ", ".join(f"{mbps(float(np.median(r))):.0f}" for r in per_run)
        print(
            f"{name:<20s} {len(ts):3d} {mbps(med):6.0f} {mbps(q3):6.0f}-{mbps(q1):<6.0f} "
            f"{mbps(ts.max()):6.0f}-{mbps(ts.min()):<6.0f} {each}"
        )
    print("# time ours / reference: pooled medians, then each run's medians")
    for ours, theirs in PAIRS:
        if theirs in runs[0]["seconds_per_repeat"] and ours in runs[0]["seconds_per_repeat"]:
            each = ", ".join(f"{_ratio([r], ours, theirs):.2f}" for r in runs)
            print(f"{ours} / {theirs}: {_ratio(runs, ours, theirs):.2f} ({each})")


def _ratio(runs: list[dict[str, Any]], ours: str, theirs: str) -> float:
    """Median time of ``ours`` over median time of ``theirs``, repeats of ``runs`` pooled."""

    def med(name: str) -> float:
        return float(np.median([t for r in runs for t in r["seconds_per_repeat"][name]]))

    return med(ours) / med(theirs)


def _rss() -> tuple[int, int]:
    """(current, peak) resident bytes of this process (Linux; zeros elsewhere)."""
    try:
        with open("/proc/self/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return 0, 0


def _reset_peak() -> None:
    """Make the peak resident size the current one (Linux >= 4.0; ignored elsewhere)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def codecs(n: int, block: int, repeat: int) -> None:
    """The codec table of docs/io.md (one process): write/read seconds and raw/stored size."""
    import zarr

    rng = np.random.default_rng(0)
    normal = rng.standard_normal((n, n))
    matrices = {"normal": normal, "lower-triangular": np.tril(normal)}
    candidates = {
        "none": None,
        "zstd level 0 (zarr default)": zarr.codecs.ZstdCodec(level=0),
        "zstd level 1": zarr.codecs.ZstdCodec(level=1),
        "blosc lz4 shuffle": zarr.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"),
        "blosc lz4 noshuffle": zarr.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="noshuffle"),
        "blosc zstd-1 shuffle": zarr.codecs.BloscCodec(cname="zstd", clevel=1, shuffle="shuffle"),
    }
    workdir = tempfile.mkdtemp(prefix="bench-io-codecs-")
    path = os.path.join(workdir, "c.zarr")
    print(f"# n={n}, chunks {block}x{block}, float64, median of {repeat}; zarr {zarr.__version__}")
    print(
        f"# {'codec':<28s} {'matrix':<17s} {'write s':>8s} {'read s':>8s} {'write cpu s':>11s} "
        f"{'read cpu s':>10s} {'raw/stored':>10s}"
    )
    try:
        for name, codec in candidates.items():
            for label, a in matrices.items():
                writes, reads, write_cpu, read_cpu = [], [], [], []
                for _ in range(repeat):
                    remove(path)
                    z = zarr.create_array(
                        path,
                        shape=a.shape,
                        chunks=(block, block),
                        dtype=a.dtype,
                        compressors=codec,
                        fill_value=0,
                    ).with_config({"write_empty_chunks": True})
                    t, c = time.perf_counter(), time.process_time()
                    z[...] = a
                    writes.append(time.perf_counter() - t)
                    write_cpu.append(time.process_time() - c)
                    os.sync()
                    t, c = time.perf_counter(), time.process_time()
                    back = z[...]
                    reads.append(time.perf_counter() - t)
                    read_cpu.append(time.process_time() - c)
                assert np.array_equal(back, a)
                print(
                    f"{name:<30s} {label:<17s} {np.median(writes):8.3f} {np.median(reads):8.3f} "
                    f"{np.median(write_cpu):11.3f} {np.median(read_cpu):10.3f} "
                    f"{a.nbytes / du(path):10.2f}",
                    flush=True,
                )
    finally:
        remove(workdir)


def memory(n: int, block: int) -> None:
    """The staging table of docs/io.md: peak traced bytes per call beyond the local matrix."""
    import tracemalloc

    import dask.array as da
    from mpi4py import MPI

    import blasmp_array as bm

    comm = MPI.COMM_WORLD
    a = np.random.default_rng(0).standard_normal((n, n))
    A = bm.from_numpy(a, block=block)
    local = A.local.nbytes
    workdir = comm.bcast(tempfile.mkdtemp(prefix="bench-io-mem-") if comm.rank == 0 else None)
    path = {k: os.path.join(workdir, f"a.{k}") for k in ("zarr", "npy", "h5")}
    x = da.from_array(a, chunks=4 * block)
    calls: dict[str, Callable[[], Any]] = {
        "A.to_zarr": lambda: A.to_zarr(path["zarr"], overwrite=True),
        "A.to_npy": lambda: A.to_npy(path["npy"], overwrite=True),
        "bm.io.to_hdf5": lambda: bm.io.to_hdf5(A, path["h5"], "m", overwrite=True),
        "bm.from_zarr": lambda: bm.from_zarr(path["zarr"]),
        "bm.from_npy": lambda: bm.from_npy(path["npy"], block),
        "bm.from_hdf5": lambda: bm.from_hdf5(path["h5"], "m", block),
        f"bm.from_dask (chunks {4 * block})": lambda: bm.from_dask(x, block),
    }
    try:
        for call in calls.values():
            call()
        extra = {}
        for name, call in calls.items():
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            result = call()
            peak = tracemalloc.get_traced_memory()[1] - before
            tracemalloc.stop()
            # a reader's result is host memory on the CPU backend only
            held = local if result is not None and A.backend.xp is np else 0
            extra[name] = peak - held
            del result
        extra = {k: comm.allreduce(v, MPI.MAX) for k, v in extra.items()}
    finally:
        comm.Barrier()
        if comm.rank == 0:
            remove(workdir)
    if comm.rank == 0:
        print(
            f"# {comm.size} ranks, n={n}, block={block}, float64, local matrix "
            f"{local / 2**20:.1f} MiB (rank 0); peak traced MiB beyond the local matrix, "
            "largest rank"
        )
        for name, value in extra.items():
            print(f"{name:<32s} {value / 2**20:8.2f}")


def main() -> None:
    if sys.argv[1:2] == ["--pool"]:
        pool(sys.argv[2:])
        return
    args = parse()
    if args.codecs:
        codecs(args.n, args.block, args.repeat)
        return
    if args.memory:
        memory(args.n, args.block)
        return
    import dask
    import dask.array as da
    import zarr
    from mpi4py import MPI

    import blasmp_array as bm

    chunks = args.chunks or args.block
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    threads = args.threads or size
    root = rank == 0
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    code = commit() if root else ""
    load_before = os.getloadavg()
    made = args.dir is None
    if root and args.dir is not None:
        os.makedirs(args.dir, exist_ok=True)
    workdir = comm.bcast((args.dir or tempfile.mkdtemp(prefix="bench-io-")) if root else None)
    out, base = os.path.join(workdir, "dist.zarr"), os.path.join(workdir, "base.zarr")
    grid = bm.ProcessGrid()
    x = source(args.n, chunks, args.seed)
    nbytes = 8 * args.n * args.n
    times: dict[str, list[float]] = {k: [] for k in DIST + (() if args.no_baseline else BASE)}
    extra: dict[str, int] = {k: 0 for k in DIST}
    checks: dict[str, bool] = {}
    rng = np.random.default_rng([args.seed, rank])
    local_bytes = 0

    def dist(name: str, fn: Callable[[], Any]) -> Any:
        gc.collect()
        comm.Barrier()
        _reset_peak()
        before = _rss()[0]
        t = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - t
        extra[name] = max(extra[name], comm.allreduce(_rss()[1] - before, MPI.MAX))
        times[name].append(comm.allreduce(seconds, MPI.MAX))
        return result

    def agree(name: str, ok: bool) -> None:
        checks[name] = checks.get(name, True) and bool(comm.allreduce(ok, MPI.LAND))

    def clear(path: str) -> None:
        if root:
            remove(path)
        comm.Barrier()

    def flush() -> None:
        if root:
            os.sync()
        comm.Barrier()

    def baseline(compressors: Any) -> None:
        """Rank 0 only: the single-process Dask and NumPy path on the same data."""

        def step(name: str, fn: Callable[[], Any]) -> Any:
            t = time.perf_counter()
            result = fn()
            times[name].append(time.perf_counter() - t)
            return result

        with dask.config.set(scheduler="threads", num_workers=threads):
            a = step("dask compute(lazy)", x.compute)
            checks_here = [global_tiles_match(a, x, args.block, args.samples, rng)]
            c = step("numpy copy", a.copy)
            del c
            remove(base)
            step(
                "dask to_zarr",
                lambda a=a: da.from_array(a, chunks=args.block).to_zarr(
                    base, compressors=compressors
                ),
            )
            os.sync()
            del a
            gc.collect()
            b = step("dask from_zarr", lambda: da.from_zarr(base).compute())
            checks_here.append(global_tiles_match(b, x, args.block, args.samples, rng))
        checks["baseline"] = checks.get("baseline", True) and all(checks_here)

    try:
        for _ in range(args.repeat):
            A = dist("from_dask(lazy)", lambda: bm.from_dask(x, block=args.block, grid=grid))
            local_bytes = A.local.nbytes
            agree("from_dask(lazy)", local_tiles_match(A, x, args.samples, rng))
            clear(out)
            dist("to_zarr", lambda A=A: A.to_zarr(out))
            flush()
            R = dist("from_zarr", lambda: bm.from_zarr(out, grid=grid))
            # the store written by to_zarr, read back: checks both
            agree("to_zarr + from_zarr", local_tiles_match(R, x, args.samples, rng))
            del R
            d = dist("to_dask().compute()", lambda A=A: A.to_dask().compute())
            agree("to_dask", global_tiles_match(d, x, args.block, args.samples, rng))
            del d
            g = dist("to_numpy", lambda A=A: A.to_numpy())
            agree("to_numpy", global_tiles_match(g, x, args.block, args.samples, rng))
            del g, A
            gc.collect()
            if not args.no_baseline:
                codec = zarr.open_array(out, mode="r").compressors if root else None
                if root:
                    baseline(codec or None)
                sleeping_barrier(comm)
        stored = du(out) if root else 0
        codec_text = str(zarr.open_array(out, mode="r").compressors) if root else ""
    finally:
        comm.Barrier()
        if root:
            remove(out)
            remove(base)
            if made:
                remove(workdir)

    rss = comm.gather(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, root=0)
    local_max = comm.allreduce(local_bytes, MPI.MAX)
    if not root:
        return
    summary = {}
    for name, ts in times.items():
        med = float(np.median(ts))
        summary[name] = {
            "median_s": med,
            "min_s": min(ts),
            "max_s": max(ts),
            "median_MBps": nbytes / med / 1e6,
            "min_MBps": nbytes / max(ts) / 1e6,
            "max_MBps": nbytes / min(ts) / 1e6,
        }
    print(
        f"# {size} ranks, grid {grid.shape}, n={args.n}, block={args.block}, source chunks="
        f"{chunks}, {args.repeat} repeats, baseline: one process, {threads} Dask thread(s); "
        f"codec of the stores: {codec_text}"
    )
    head = ("operation", "median s", "min-max s", "MB/s", "min-max MB/s", "peak extra MiB")
    print("# {:<20s} {:>9s} {:>15s} {:>7s} {:>14s} {:>14s}".format(*head))
    for name, s in summary.items():
        mem = f"{extra[name] / 2**20:14.1f}" if name in extra else ""
        print(
            f"{name:<22s} {s['median_s']:9.3f} {s['min_s']:7.3f}-{s['max_s']:<7.3f} "
            f"{s['median_MBps']:7.0f} {s['min_MBps']:6.0f}-{s['max_MBps']:<6.0f} {mem}"
        )
    record_ratios = {}
    for ours, theirs in PAIRS:
        if ours in times and theirs in times:
            ratio = float(np.median(times[ours]) / np.median(times[theirs]))
            record_ratios[f"{ours} / {theirs}"] = ratio
            print(f"# time {ours} / {theirs}: {ratio:.2f}")
    print(f"# checks (sampled tiles bit for bit): {checks}")
    print(
        f"# local matrix per rank (largest) {local_max / 2**20:.1f} MiB; peak RSS per rank "
        f"(MiB): {[round(r) for r in rss]}; to_zarr store {stored} bytes"
    )
    if args.json:
        record = {
            "command": " ".join(["mpiexec", "-n", str(size), "python", *sys.argv]),
            "started_utc": started,
            "commit": code,
            "machine": machine(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
            "versions": versions(),
            "ranks": size,
            "grid": list(grid.shape),
            "n": args.n,
            "block": args.block,
            "chunks": chunks,
            "nbytes": nbytes,
            "repeat": args.repeat,
            "baseline_threads": threads,
            "codec": codec_text,
            "checks": checks,
            "peak_rss_MiB_per_rank": rss,
            "local_matrix_bytes_max": local_max,
            "peak_extra_bytes_per_step": extra,
            "ratios_ours_over_reference": record_ratios,
            "to_zarr_store_bytes": stored,
            "seconds_per_repeat": times,
            "summary": summary,
        }
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
