"""Principal component analysis, twice: the eigendecomposition of the covariance matrix and the
SVD of the centred data.

For a distributed data matrix ``X`` (``n`` samples x ``p`` features) with a planted structure of
``k`` components, centre the columns (``X - X.mean(axis=0)``, a broadcast distributed vector)
and find the principal axes and their variances two ways, all distributed:

* ``np.linalg.eigh`` of the covariance matrix ``C = Xc^T Xc / (n - 1)`` (SYRK, then the
  Hermitian eigensolver): the eigenvalues are the variances, the eigenvectors the axes;
* ``np.linalg.svd`` of ``Xc`` itself (QR first for a tall matrix): the variances are
  ``s^2 / (n - 1)``, the axes the rows of ``Vh`` -- the more accurate route, as it never squares
  the condition number.

::

    python examples/pca.py
    mpiexec -n 4 python examples/pca.py --n 100000 --features 1000 --components 10 --block 256

Checked, with bounds in units of the machine epsilon: the eigensolver's residual and
orthogonality (LAPACK's tester ratios), the agreement of the two routes' variances and of their
``k``-dimensional principal subspaces (bounded by the gap after the ``k``-th variance), and the
variances against NumPy's on the gathered data. Exits with status 1 if a check fails.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import blasmp_array as bm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="samples, rows of X (default 2000)")
    parser.add_argument("--features", type=int, default=120, help="columns of X (default 120)")
    parser.add_argument("--components", type=int, default=5, help="planted components (5)")
    parser.add_argument("--block", type=int, default=32, help="block size (default 32)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    n, p, k, nb = args.n, args.features, args.components, (args.block, args.block)
    if not 0 < k < p <= n:
        parser.error("needs 0 < components < features <= n")
    eps = np.finfo(np.float64).eps

    grid = bm.ProcessGrid()
    rank = grid.rank

    # The data: k components of variances 100, 50, 25, ... along random orthonormal axes W
    # (known on every rank), plus unit noise, shifted by a mean per feature. The random
    # matrices are the same whatever the grid and block.
    rng = np.random.default_rng(args.seed)
    w_axes = np.linalg.qr(rng.standard_normal((p, k)))[0]
    scales = np.sqrt(100.0 / 2.0 ** np.arange(k))
    scores = bm.random.standard_normal((n, k), block=nb, grid=grid, seed=args.seed)
    noise = bm.random.standard_normal((n, p), block=nb, grid=grid, seed=args.seed + 1)
    shift = bm.from_numpy(rng.uniform(-5.0, 5.0, size=p), block=args.block, grid=grid)
    X = (
        (scores * bm.from_numpy(scales, block=args.block, grid=grid))
        @ bm.from_numpy(w_axes.T, block=nb, grid=grid)
        + noise
        + shift
    )

    t0 = time.perf_counter()
    Xc = X - X.mean(axis=0)  # centred columns
    C = (Xc.T @ Xc) / (n - 1)  # SYRK: the full symmetric covariance
    variances, axes = np.linalg.eigh(C)  # ascending
    t_eigh = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, s, vh = np.linalg.svd(Xc, full_matrices=False)  # descending
    t_svd = time.perf_counter() - t0

    checks: list[tuple[str, float, float]] = []
    norm_c = float(np.linalg.norm(C, 1))
    w_all = variances.to_numpy()
    # 1. LAPACK's eigensolver tester: residual and orthogonality below 60 (xDRVST).
    res = float(np.linalg.norm(C @ axes - axes * variances, 1))
    checks.append(("eigh: ||C V - V W|| / (||C|| p)", res / (norm_c * p * eps), 60.0))
    orth = float(np.linalg.norm(axes.T @ axes - bm.eye(p, block=nb, grid=grid), 1))
    checks.append(("eigh: ||V^T V - I|| / p", orth / (p * eps), 60.0))
    # 2. The two routes' variances: the SVD's are exact to about n eps ||Xc||^2 / (n - 1), the
    #    covariance's eigenvalues to about (n + p) eps ||C||.
    from_svd = (s.to_numpy() ** 2 / (n - 1))[::-1]
    gap = float(np.abs(w_all - from_svd).max()) / (norm_c * eps)
    checks.append(("variances: eigh against svd", gap, 4.0 * (n + p)))
    # 3. The principal subspaces (top k axes) agree: sin of the largest angle between them is
    #    bounded by the perturbation over the gap after the k-th variance (Davis-Kahan).
    # the top k axes alone, as SciPy's subset (a matrix of its own, where the window
    # axes[:, p - k:] keeps the parent's distribution and would be redistributed below)
    top_eigh = bm.linalg.eigh(C, subset_by_index=[p - k, p - 1])[1]
    top_svd = vh[:k, :].T.copy()
    # sin of the largest angle = ||(I - P_svd) V_eigh||_2, the part of one basis outside the
    # other's span (not sqrt(1 - cos^2), which cancels near 1)
    outside = top_eigh - top_svd @ (top_svd.T @ top_eigh)
    sin_angle = float(np.linalg.norm(outside, 2))
    k_gap = float(w_all[p - k] - w_all[p - k - 1])
    checks.append(
        ("subspaces: sin of the largest angle", sin_angle / eps, 4.0 * (n + p) * norm_c / k_gap)
    )

    # 4. NumPy on the gathered data (rank 0 only): its variances.
    x_all, top_svd_all = X.to_numpy(root=0), top_svd.to_numpy(root=0)
    if rank == 0:
        assert x_all is not None and top_svd_all is not None
        xc = x_all - x_all.mean(axis=0)
        w_np = np.linalg.eigvalsh(xc.T @ xc / (n - 1))
        diff = float(np.abs(w_all - w_np).max()) / (norm_c * eps)
        checks.append(("variances: against NumPy", diff, 4.0 * (n + p)))
        planted = np.linalg.svd(w_axes.T @ top_svd_all, compute_uv=False)
    top = s.to_numpy()[:k] ** 2 / (n - 1)

    ok = True
    if rank == 0:
        print(
            f"PCA: X {n} x {p}, {k} planted components, block {args.block}, {grid.size} "
            f"rank(s) on a {grid.nprow}x{grid.npcol} grid, backend {grid.backend.name}; "
            f"covariance + eigh {t_eigh:.3f} s, svd {t_svd:.3f} s"
        )
        for name, value, bound in checks:
            passed = bool(value <= bound)
            ok &= passed
            verdict = "ok" if passed else "FAIL"
            print(f"  {name:38s} {value:10.3g} eps  (bound {bound:.3g} eps)  {verdict}")
        print(
            "  leading variances: "
            + ", ".join(f"{v:.1f}" for v in top)
            + f" (planted {', '.join(f'{v + 1:.1f}' for v in scales**2)} with the unit noise);"
            f" planted axes found to cos {planted.min():.4f} (not a check)"
        )
        print("all checks passed" if ok else "CHECK FAILED")
    ok = bool(grid.comm.bcast(ok, root=0))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
