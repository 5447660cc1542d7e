"""The log marginal likelihood of a Gaussian-process regression model.

For ``n`` observations ``y`` at points ``x_i`` (``d`` coordinates each) and the squared-exponential
kernel ``k(x, x') = s^2 exp(-|x - x'|^2 / (2 l^2))`` with noise variance ``sigma^2``::

    K = [k(x_i, x_j)] + sigma^2 I,   K = L L^T,   alpha = K^{-1} y
    log p(y) = -y^T alpha / 2 - log det K / 2 - n log(2 pi) / 2,   log det K = 2 sum log L_ii

The kernel matrix is built distributed from the coordinates (``|x_i - x_j|^2`` from one SYRK
and two rank-1 products, then an elementwise exponential), factored with ``cholesky`` and
solved with ``cho_solve``::

    python examples/gaussian_process.py
    mpiexec -n 4 python examples/gaussian_process.py --n 20000 --block 256

Checked, with bounds in units of the machine epsilon: the backward error of ``K alpha = y``;
the log-determinant from the Cholesky factor against the one of an independent LU
factorisation (``np.linalg.slogdet``); and, at sizes a single process can hold, the
log-likelihood against SciPy's ``cho_factor``/``cho_solve`` on the gathered kernel matrix.
Exits with status 1 if a check fails.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import scipy.linalg

import blasmp_array as bm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="observations (default 1000)")
    parser.add_argument("--dim", type=int, default=3, help="coordinates per point (default 3)")
    parser.add_argument("--block", type=int, default=64, help="block size (default 64)")
    parser.add_argument("--length", type=float, default=0.5, help="length scale l")
    parser.add_argument("--noise", type=float, default=0.1, help="noise standard deviation")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--reference-max-n", type=int, default=8192, help="largest n checked against SciPy"
    )
    args = parser.parse_args(argv)
    n, d, nb = args.n, args.dim, (args.block, args.block)
    signal2, noise2, length = 1.0, args.noise**2, args.length
    eps = np.finfo(np.float64).eps

    grid = bm.ProcessGrid()
    rank = grid.rank

    # Points uniform in the unit cube and observations of a smooth function plus noise; the
    # (small) inputs are given on every rank.
    rng = np.random.default_rng(args.seed)
    points = rng.uniform(size=(n, d))
    y_host = np.sin(4.0 * points).sum(axis=1, keepdims=True) + args.noise * rng.standard_normal(
        (n, 1)
    )
    P = bm.from_numpy(points, block=nb, grid=grid)
    y = bm.from_numpy(y_host, block=nb, grid=grid)

    t0 = time.perf_counter()
    # |x_i - x_j|^2 = |x_i|^2 + |x_j|^2 - 2 x_i . x_j: the squared norms as an n x 1 column
    # (a GEMM with a column of ones), spread over the rows and the columns by two rank-1 GEMMs
    ones_d = bm.ones((d, 1), block=nb, grid=grid)
    ones_n = bm.ones((n, 1), block=nb, grid=grid)
    sq = (P * P) @ ones_d
    D2 = sq @ ones_n.T + ones_n @ sq.T - 2.0 * (P @ P.T)
    K = signal2 * np.exp(D2 * (-0.5 / length**2)) + noise2 * bm.eye(n, block=nb, grid=grid)

    L = bm.linalg.cholesky(K, lower=True)
    alpha = bm.linalg.cho_solve((L, True), y)
    logdet = 2.0 * float(np.sum(np.log(np.diagonal(L))))
    quad = float(np.vdot(y, alpha))
    loglik = -0.5 * quad - 0.5 * logdet - 0.5 * n * np.log(2.0 * np.pi)
    elapsed = time.perf_counter() - t0

    checks: list[tuple[str, float, float]] = []
    # 1. Backward error of the solve: Cholesky and two triangular solves perturb K by about
    #    (3n + 1) eps in norm.
    norm_k = float(np.linalg.norm(K))
    res = float(np.linalg.norm(K @ alpha - y))
    eta = res / (norm_k * float(np.linalg.norm(alpha)) + float(np.linalg.norm(y)))
    checks.append(("K alpha = y: backward error", eta / eps, 4.0 * (3 * n + 1)))
    # 2. log det K from an independent LU factorisation. A backward error dK of both changes
    #    log det K by at most n ||K^-1|| ||dK|| <= n^2 eps cond(K) (times a small constant);
    #    cond(K) <= ||K||_F / sigma^2 since sigma^2 I bounds K's smallest eigenvalue from below.
    sign, logdet_lu = np.linalg.slogdet(K)
    cond_bound = norm_k / noise2
    bound = 8.0 * n * n * cond_bound
    diff = abs(logdet - logdet_lu) / eps if sign > 0 else np.inf  # K is positive definite
    checks.append(("log det K against LU's", diff, bound))
    # 3. The whole computation in NumPy/SciPy on the gathered kernel matrix (rank 0).
    reference = n <= args.reference_max_n
    k_all = K.to_numpy(root=0) if reference else None
    if rank == 0 and reference:
        assert k_all is not None
        diff2 = (
            (points**2).sum(axis=1)[:, None]
            + (points**2).sum(axis=1)[None, :]
            - 2.0 * points @ points.T
        )
        k_ref = signal2 * np.exp(-0.5 * diff2 / length**2) + noise2 * np.eye(n)
        # the kernel matrix itself: exp of entries computed to a few n eps
        kdiff = np.abs(k_all - k_ref).max() / signal2
        checks.append(("K against NumPy's K (max entry)", kdiff / eps, 8.0 * d * n / length**2))
        c, low = scipy.linalg.cho_factor(k_ref, lower=True)
        a_ref = scipy.linalg.cho_solve((c, low), y_host)
        quad_ref = float(np.vdot(y_host, a_ref))
        ll_ref = -0.5 * quad_ref - np.log(np.diag(c)).sum() - 0.5 * n * np.log(2.0 * np.pi)
        # the two log-likelihoods differ by the effect of the two backward errors and of the
        # difference of the kernel matrices: bounded by cond(K) times those, relative to |y^T a|
        scale = 0.5 * abs(quad_ref) + n
        bound = 8.0 * n * n * cond_bound
        checks.append(("log-likelihood against SciPy", abs(loglik - ll_ref) / scale / eps, bound))

    ok = True
    if rank == 0:
        print(
            f"Gaussian process: n = {n} points in {d} dimensions, l = {length}, "
            f"sigma = {args.noise}, block {args.block}, {grid.size} rank(s) on a "
            f"{grid.nprow}x{grid.npcol} grid, backend {grid.backend.name}"
        )
        print(
            f"  log p(y) = {loglik:.10g}  (-y^T alpha / 2 = {-0.5 * quad:.6g}, "
            f"-log det K / 2 = {-0.5 * logdet:.6g}); kernel, factor and solve took "
            f"{elapsed:.3f} s"
        )
        for name, value, bound in checks:
            passed = bool(value <= bound)
            ok &= passed
            verdict = "ok" if passed else "FAIL"
            print(f"  {name:34s} {value:10.3g} eps  (bound {bound:.3g} eps)  {verdict}")
        if not reference:
            print(f"  (n > {args.reference_max_n}: not compared with SciPy on one process)")
        print("all checks passed" if ok else "CHECK FAILED")
    ok = bool(grid.comm.bcast(ok, root=0))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
