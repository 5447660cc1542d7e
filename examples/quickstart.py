"""Quick start: distributed GEMM, SYRK and TRSM on block-cyclic arrays, checked against NumPy.

Run on one process (CPU backend, no mpiexec needed) or on several::

    python examples/quickstart.py
    mpiexec -n 4 python examples/quickstart.py

Every rank builds the same random matrices (independent of the grid), the products run as
distributed kernels, and rank 0 compares the gathered results with NumPy/SciPy.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import scipy.linalg

import blasmp_array as bm


def relative_error(x: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(x - ref) / max(np.linalg.norm(ref), np.finfo(ref.dtype).tiny))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=600, help="rows of A (default 600)")
    parser.add_argument("--k", type=int, default=400, help="columns of A, rows of B (default 400)")
    parser.add_argument("--n", type=int, default=300, help="columns of B (default 300)")
    parser.add_argument("--block", type=int, default=64, help="block size mb = nb (default 64)")
    args = parser.parse_args(argv)
    m, k, n, nb = args.m, args.k, args.n, args.block

    grid = bm.ProcessGrid()  # near-square grid over MPI.COMM_WORLD
    rank = grid.rank
    A = bm.random.standard_normal((m, k), block=(nb, nb), grid=grid, seed=0)
    B = bm.random.standard_normal((k, n), block=(nb, nb), grid=grid, seed=1)
    # a well-conditioned lower-triangular k x k matrix, built on every rank
    t = np.tril(np.random.default_rng(2).standard_normal((k, k))) + k * np.eye(k)
    T = bm.from_numpy(t, block=(nb, nb), grid=grid)

    t0 = time.perf_counter()
    C = A @ B  # distributed GEMM
    S = A.T @ A  # recognised as SYRK
    X = bm.linalg.solve_triangular(T, B, lower=True)  # distributed TRSM: T X = B
    elapsed = time.perf_counter() - t0

    # gather on rank 0 only (collective: every rank calls to_numpy)
    a, b = A.to_numpy(root=0), B.to_numpy(root=0)
    c, s, x = C.to_numpy(root=0), S.to_numpy(root=0), X.to_numpy(root=0)
    ok = True
    if rank == 0:
        assert a is not None and b is not None and c is not None and s is not None
        assert x is not None
        eps = np.finfo(np.float64).eps
        errors = {
            "C = A @ B": (relative_error(c, a @ b), k),
            "S = A.T @ A": (relative_error(s, a.T @ a), m),
            "X = solve_triangular(T, B)": (
                relative_error(x, scipy.linalg.solve_triangular(t, b, lower=True)),
                k,
            ),
        }
        print(
            f"blasmp_array {bm.__version__}: {grid.size} rank(s), grid {grid.nprow}x{grid.npcol}, "
            f"backend {grid.backend.name}, block {nb}x{nb}"
        )
        print(f"A: {m}x{k}, B: {k}x{n}, T: {k}x{k} (lower), float64; ops took {elapsed:.3f} s")
        for name, (err, depth) in errors.items():
            # normwise relative error of a sum of `depth` products: a few * depth * eps
            bound = 4 * depth * eps
            passed = err <= bound
            ok &= passed
            print(
                f"  {name:28s} rel. error {err:.2e}  (bound {bound:.1e})  "
                f"{'OK' if passed else 'FAIL'}"
            )
        print("all checks passed" if ok else "CHECK FAILED")
    ok = bool(grid.comm.bcast(ok, root=0))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
