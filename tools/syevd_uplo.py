"""Time cuSOLVER's ``syevd`` through CuPy on one symmetric matrix with ``UPLO='L'`` and
``UPLO='U'``: whether the triangle that ``eigh_local`` hands the solver changes its speed (as
it does for ``potrf``, docs/cholesky.md).

Usage (GPU node): ``tools/node-run.sh 1 python3 tools/syevd_uplo.py [--n 4096 16384]
[--repeat 3]``. Prints the median of ``--repeat`` timed calls (after one warm-up) per size,
call and triangle, the two triangles alternating.
"""

from __future__ import annotations

import argparse
import statistics
import time

import cupy as cp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sync = cp.cuda.Device().synchronize
    for n in args.n:
        a = cp.random.default_rng(0).standard_normal((n, n))
        a = a + a.T
        for name, fn in (("eigh", cp.linalg.eigh), ("eigvalsh", cp.linalg.eigvalsh)):
            times: dict[str, list[float]] = {"L": [], "U": []}
            for uplo in "LU":
                fn(a, UPLO=uplo)
            for _ in range(args.repeat):
                for uplo in "LU":
                    sync()
                    t0 = time.perf_counter()
                    fn(a, UPLO=uplo)
                    sync()
                    times[uplo].append(time.perf_counter() - t0)
            lo, up = (statistics.median(times[u]) for u in "LU")
            print(f"n={n} {name:8s} L {lo:.4f} s  U {up:.4f} s  L/U {lo / up:.3f}", flush=True)


if __name__ == "__main__":
    main()
