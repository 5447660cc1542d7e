"""Ridge regression, through the normal equations and Cholesky, and through QR.

Fit ``w`` minimising ``||X w - y||^2 + lam ||w||^2`` for a distributed design matrix ``X``
(``n`` samples x ``p`` features), twice, all distributed:

* the normal equations: form ``G = X^T X + lam I`` (SYRK) and ``r = X^T y`` (GEMM), factor
  ``G = L L^T`` and solve ``L L^T w = r`` (two triangular solves) -- the fastest, with an error
  growing with ``cond(G) = cond(X)^2``;
* QR: the least-squares problem of the stacked matrix ``[X; sqrt(lam) I]`` and ``[y; 0]``
  (``bm.linalg.lstsq``: CholeskyQR2 or Householder QR, then one triangular solve) -- twice the
  flops, an error growing with ``cond(X)`` only.

::

    python examples/ridge_regression.py
    mpiexec -n 4 python examples/ridge_regression.py --n 200000 --features 2000 --block 256

Checked, with bounds in units of the machine epsilon: the backward error of the solve (the
residual of the normal equations), the optimality condition ``X^T (y - X w) = lam w`` for both
solutions, their agreement, and the agreement with NumPy's solution on the gathered data
(bounded by the condition number of ``G``).
Exits with status 1 if a check fails.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import blasmp_array as bm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000, help="samples, rows of X (default 3000)")
    parser.add_argument("--features", type=int, default=200, help="columns of X (default 200)")
    parser.add_argument("--block", type=int, default=64, help="block size (default 64)")
    parser.add_argument("--ridge", type=float, default=1.0, help="lam (default 1.0)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    n, p, nb, lam = args.n, args.features, (args.block, args.block), args.ridge
    eps = np.finfo(np.float64).eps

    grid = bm.ProcessGrid()  # a near-square grid over all ranks
    rank = grid.rank

    # The data: X with standard normal entries, y = X w_true + noise. The random matrices are
    # the same whatever the grid and block; w_true is given on every rank (root=None).
    X = bm.random.standard_normal((n, p), block=nb, grid=grid, seed=args.seed)
    w_true = np.random.default_rng(args.seed).uniform(-1.0, 1.0, size=(p, 1))
    noise = bm.random.standard_normal((n, 1), block=nb, grid=grid, seed=args.seed + 1)
    y = X @ bm.from_numpy(w_true, block=nb, grid=grid) + 0.1 * noise

    t0 = time.perf_counter()
    G = X.T @ X + lam * bm.eye(p, block=nb, grid=grid)  # SYRK: the full symmetric matrix
    r = X.T @ y  # GEMM, p x 1
    c_low = bm.linalg.cho_factor(G, lower=True)
    w = bm.linalg.cho_solve(c_low, r)
    elapsed = time.perf_counter() - t0

    checks: list[tuple[str, float, float]] = []
    # 1. Backward error of the solve: ||G w - r|| / (||G|| ||w|| + ||r||). Cholesky and the two
    #    triangular solves are backward stable with a perturbation of about (3p + 1) eps.
    res = np.linalg.norm(G @ w - r)
    eta = res / (np.linalg.norm(G) * np.linalg.norm(w) + np.linalg.norm(r))
    checks.append(("normal equations: backward error", eta / eps, 4.0 * (3 * p + 1)))
    # 2. The gradient of the ridge objective vanishes: X^T (y - X w) = lam w. Relative to the
    #    size of its terms, forming it costs about n eps.
    grad = X.T @ (y - X @ w) - lam * w
    xn, wn = np.linalg.norm(X), np.linalg.norm(w)
    scale = xn * (np.linalg.norm(y) + xn * wn) + lam * wn
    checks.append(("gradient of the objective", np.linalg.norm(grad) / scale / eps, 4.0 * n))

    # The same fit by QR: min || [X; sqrt(lam) I] w - [y; 0] ||.
    t0 = time.perf_counter()
    stacked = np.vstack([X, np.sqrt(lam) * bm.eye(p, block=nb, grid=grid)])
    rhs = np.vstack([y, bm.zeros((p, 1), block=nb, grid=grid)])
    w_qr = bm.linalg.lstsq(stacked, rhs)[0]
    elapsed_qr = time.perf_counter() - t0
    grad_qr = X.T @ (y - X @ w_qr) - lam * w_qr
    checks.append(("QR: gradient of the objective", np.linalg.norm(grad_qr) / scale / eps, 4.0 * n))

    # 3. NumPy's solution of the same problem on the gathered data (rank 0 only).
    x_all, y_all, w_all = X.to_numpy(root=0), y.to_numpy(root=0), w.to_numpy(root=0)
    w_qr_all = w_qr.to_numpy(root=0)
    if rank == 0:
        assert x_all is not None and y_all is not None and w_all is not None
        assert w_qr_all is not None
        g = x_all.T @ x_all + lam * np.eye(p)
        w_np = np.linalg.solve(g, x_all.T @ y_all)
        diff = np.linalg.norm(w_all - w_np) / np.linalg.norm(w_np)
        # both solutions are backward stable: they differ by at most about cond(G) * p eps each
        checks.append(("against NumPy's solution", diff / eps, 8.0 * np.linalg.cond(g) * p))
        diff_qr = np.linalg.norm(w_qr_all - w_np) / np.linalg.norm(w_np)
        checks.append(("QR: against NumPy's solution", diff_qr / eps, 8.0 * np.linalg.cond(g) * p))
        fit = np.linalg.norm(w_all - w_true) / np.linalg.norm(w_true)

    ok = True
    if rank == 0:
        print(
            f"ridge regression: X {n} x {p}, lam = {lam}, block {args.block}, "
            f"{grid.size} rank(s) on a {grid.nprow}x{grid.npcol} grid, backend "
            f"{grid.backend.name}; normal equations, factor and solve took {elapsed:.3f} s, "
            f"QR {elapsed_qr:.3f} s"
        )
        for name, value, bound in checks:
            passed = bool(value <= bound)
            ok &= passed
            verdict = "ok" if passed else "FAIL"
            print(f"  {name:34s} {value:10.3g} eps  (bound {bound:.3g} eps)  {verdict}")
        print(f"  relative distance to the true weights: {fit:.3g} (noise 0.1, not a check)")
        print("all checks passed" if ok else "CHECK FAILED")
    ok = bool(grid.comm.bcast(ok, root=0))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
