"""Where the SVD through the polar decomposition overtakes LAPACK's route on one process: for
each order ``n``, ``bm.linalg.svd`` (or its singular values alone, ``compute_uv=False``) of a
square random matrix with ``method='polar'`` and with ``method='gather'`` (one LAPACK or
cuSOLVER call on the local matrix), and the one-process library's own ``svd`` (CuPy on the
GPU backend, NumPy on the CPU backend), medians of ``--repeat`` calls after a warm-up, with
each result's residual ``||A - U S Vh||_F / (||A||_F n eps)`` (singular values:
``max |s - s_ref| / (s_max n eps)``).

Usage::

    BLASMP_BACKEND=gpu tools/node-run.sh 1 python3 tools/svd_crossover.py --n 512 1024 2048 4096
    OMP_NUM_THREADS=1 BLASMP_BACKEND=cpu python tools/svd_crossover.py --n 256 512

It chooses ``Backend.polar_svd_n``, the order from which ``method='auto'`` takes the polar
route (docs/svd.md). A diagnosis tool for one process, not a benchmark (the bench rows ``svd``
and ``svd_polar`` are).
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import numpy as np

import blasmp_array as bm
from blasmp_array.bench.compare import _time


def _timed(fn: Any, sync: Any, repeat: int) -> tuple[float, Any]:
    """The median of ``repeat`` timed calls of ``fn``, and the result of its warm-up call."""
    out = fn()
    sync()
    return statistics.median(_time(fn, 0, repeat, sync)), out


def _call(a: Any, method: str, uv: bool) -> Any:
    return lambda: bm.linalg.svd(a, compute_uv=uv, method=method)


def _reference(xp: Any, a: Any, uv: bool) -> Any:
    return lambda: xp.linalg.svd(a, compute_uv=uv)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[256, 512, 1024])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--values", action="store_true", help="singular values alone")
    args = ap.parse_args()
    grid = bm.ProcessGrid(1, 1)
    be = grid.backend
    if be.name == "gpu":
        import cupy as xp
    else:
        xp = np
    eps = float(np.finfo(np.float64).eps)
    for n in args.n:
        a = bm.random.standard_normal((n, n), seed=0, grid=grid)
        h: Any = a.to_numpy()
        ref_a = xp.asarray(h)
        line = [f"n={n:6d}"]
        s_ref: Any = np.linalg.svd(h, compute_uv=False) if args.values else None
        for method in ("polar", "gather"):
            call = _call(a, method, not args.values)
            t, out = _timed(call, be.synchronize, args.repeat)
            if args.values:
                err = np.abs(out.to_numpy() - s_ref).max() / (s_ref[0] * n * eps)
            else:
                u, s, vh = (x.to_numpy() for x in out)
                err = np.linalg.norm(h - (u * s) @ vh) / (np.linalg.norm(h) * n * eps)
            line.append(f"{method} {t:8.4f} s (err {err:.2g})")
        sync = xp.cuda.Device().synchronize if xp is not np else (lambda: None)
        t, _ = _timed(_reference(xp, ref_a, not args.values), sync, args.repeat)
        line.append(f"{xp.__name__}.linalg.svd {t:8.4f} s")
        print("  ".join(line), flush=True)


if __name__ == "__main__":
    main()
