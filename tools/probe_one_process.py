"""Which way should a 1x1 grid solve and factor? Times every mode of the 1x1 paths.

Runs on ONE rank (``tools/node-run.sh 1 python3 tools/probe_one_process.py --n 4096 16384``)
and prints, per ``n``, the median time (of ``--repeat`` runs after one warm-up) of

* ``solve_triangular(T, B, lower=True)`` (defaults, ``n`` right-hand sides) with each mode of
  ``ops.trsm._ONE_PROCESS_TRSM`` -- one vendor call, the recursive solve with several base
  orders, the pipeline -- against ``cupyx.scipy.linalg.solve_triangular`` (SciPy on the CPU);
* ``cholesky(A, lower=True)`` with each mode of ``ops.cholesky._ONE_PROCESS_CHOLESKY`` against
  ``cupy.linalg.cholesky`` (``scipy.linalg.cholesky``);
* the backend's TRMM in place and out of place (``out=``), against ``tril(t) @ b``;

with a backward-error check of every result in units of ``n eps`` (so a fast wrong mode shows).
The chosen defaults are the modes this measures fastest; record the output in
docs/performance.md with the machine and the command.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

import blasmp_array as bm
from blasmp_array.ops import cholesky as chol_module
from blasmp_array.ops import trsm as trsm_module


def timed(fn: Any, sync: Any, repeat: int) -> tuple[float, float, float, Any]:
    """(median, min, max) seconds of ``fn()`` after one warm-up call, and its last result."""
    out = fn()
    sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), max(times), out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, nargs="+", default=[4096, 16384])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--trsm-bases", type=int, nargs="+", default=[1024, 2048, 4096])
    p.add_argument("--chol-bases", type=int, nargs="+", default=[512, 1024, 2048])
    p.add_argument("--pipeline", action="store_true", help="also time the 1x1 pipelines")
    args = p.parse_args()

    grid = bm.ProcessGrid(1, 1)
    be = grid.backend
    xp = be.xp
    name = be.name
    gpu = name == "gpu"
    if gpu:
        import cupy
        import cupyx.scipy.linalg as xla

        def sync() -> None:
            cupy.cuda.Device().synchronize()
            be.synchronize()

        ref_solve, ref_chol = xla.solve_triangular, cupy.linalg.cholesky
    else:
        import scipy.linalg as sla

        def sync() -> None:
            be.synchronize()

        ref_solve = sla.solve_triangular

        def ref_chol(a: Any) -> Any:
            return sla.cholesky(a, lower=True)

    rows = []

    def row(what: str, n: int, t: tuple[float, float, float, Any], base: float, err: float) -> None:
        med, lo, hi, _ = t
        rows.append((what, n, med, lo, hi, base / med, err))
        print(
            f"{what:<34} n={n:<6} {med * 1e3:9.2f} ms [{lo * 1e3:.2f}-{hi * 1e3:.2f}]  "
            f"speed vs ref {base / med:5.2f}x  err {err:8.3g} n*eps",
            flush=True,
        )

    def probe(n: int) -> None:
        rng = np.random.default_rng(n)
        eps = np.finfo(np.float64).eps
        # -- TRSM ------------------------------------------------------------------------------
        t_host = np.tril(rng.standard_normal((n, n)) / np.sqrt(n)) + 2 * np.eye(n)
        b_host = rng.standard_normal((n, n))
        t_dev, b_dev = xp.asarray(t_host), xp.asarray(b_host)
        T = bm.from_numpy(t_dev, grid=grid)
        B = bm.from_numpy(b_dev, grid=grid)
        norm_t = float(xp.abs(t_dev).sum(axis=1).max())
        norm_b = float(xp.abs(b_dev).sum(axis=1).max())

        def solve_err(x: Any) -> float:
            r = t_dev @ x - b_dev
            num = float(xp.abs(r).sum(axis=1).max())
            return num / ((norm_t * float(xp.abs(x).sum(axis=1).max()) + norm_b) * n * eps)

        ref = timed(lambda: ref_solve(t_dev, b_dev, lower=True), sync, args.repeat)
        row("ref solve_triangular", n, ref, ref[0], solve_err(ref[3]))
        modes: list[Any] = [None, *args.trsm_bases] + (["pipeline"] if args.pipeline else [])
        saved = trsm_module._ONE_PROCESS_TRSM.get(name)
        for mode in modes:
            trsm_module._ONE_PROCESS_TRSM[name] = mode
            t = timed(lambda: bm.linalg.solve_triangular(T, B, lower=True), sync, args.repeat)
            row(f"solve_triangular mode={mode}", n, t, ref[0], solve_err(t[3]._data))
        trsm_module._ONE_PROCESS_TRSM[name] = saved
        # -- TRMM in place / out of place -------------------------------------------------------
        ref = timed(lambda: xp.tril(t_dev) @ b_dev, sync, args.repeat)
        prod = ref[3]
        row("ref tril(t) @ b", n, ref, ref[0], 0.0)
        work = xp.empty_like(b_dev)

        def trmm_in_place() -> Any:
            work[...] = b_dev
            be.trmm(1.0, t_dev, work, "L", "L", "N", "N", be.compute)
            return work

        def trmm_out() -> Any:
            be.trmm(1.0, t_dev, b_dev, "L", "L", "N", "N", be.compute, out=work)
            return work

        def trmm_err(c: Any) -> float:
            scale = float(xp.abs(prod).max())
            return float(xp.abs(c - prod).max()) / (scale * n * eps)

        for what, fn in (("trmm copy + in place", trmm_in_place), ("trmm out=", trmm_out)):
            t = timed(fn, sync, args.repeat)
            row(what, n, t, ref[0], trmm_err(t[3]))
        t = timed(lambda: bm.linalg.trmm(T, B), sync, args.repeat)
        row("bm.linalg.trmm", n, t, ref[0], trmm_err(t[3]._data))
        # -- Cholesky ---------------------------------------------------------------------------
        a_dev = t_dev @ t_dev.T + n * eps * xp.eye(n)  # SPD with a known factor's conditioning
        A = bm.from_numpy(a_dev, grid=grid)
        norm_a = float(xp.abs(a_dev).sum(axis=1).max())

        def chol_err(c: Any) -> float:
            low = xp.tril(c)
            r = low @ low.T - a_dev
            return float(xp.abs(r).sum(axis=1).max()) / (norm_a * n * eps)

        ref = timed(lambda: ref_chol(a_dev), sync, args.repeat)
        row("ref cholesky", n, ref, ref[0], chol_err(ref[3]))
        modes = [None, *args.chol_bases] + (["pipeline"] if args.pipeline else [])
        saved = chol_module._ONE_PROCESS_CHOLESKY.get(name)
        for mode in modes:
            chol_module._ONE_PROCESS_CHOLESKY[name] = mode
            t = timed(lambda: bm.linalg.cholesky(A, lower=True), sync, args.repeat)
            row(f"cholesky mode={mode}", n, t, ref[0], chol_err(t[3]._data))
        chol_module._ONE_PROCESS_CHOLESKY[name] = saved

    for n in args.n:
        probe(n)
    print(f"backend {name}; medians of {args.repeat} after one warm-up; float64")


if __name__ == "__main__":
    main()
