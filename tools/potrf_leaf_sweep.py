"""Choose the leaf of the recursive local potrf (ops.lapack._recursive_potrf): one rank, one device.

Usage: python tools/potrf_leaf_sweep.py [--n 4096 16384] [--leaf 512 1024 2048 4096 0]
       [--block 512 1024 2048] [--repeat 5]

For each n: the median (and min/max) time of ``bm.linalg.cholesky(A, lower=True)`` on a 1x1
grid with recursive halving down to each leaf (0: the library potrf called once), with
right-looking blocks of each ``--block``, of the library's own Cholesky in the
same run (``cupy.linalg.cholesky`` / ``numpy.linalg.cholesky``), and the rates of the kernels
one recursion level calls at size n/2 (TRSM, SYRK, GEMM), in TFLOP/s. Backend from
$BLASMP_BACKEND. A tuning tool, not a benchmark (the bench's ``cholesky`` row is).
"""

from __future__ import annotations

import argparse

from _sweep_timing import synchronizer, timed  # (tools/, run as a script)

import blasmp_array as bm
from blasmp_array.ops.lapack import cholesky as chol


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--leaf", type=int, nargs="+", default=[512, 1024, 2048, 4096, 0])
    ap.add_argument("--block", type=int, nargs="*", default=[512, 1024, 2048])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    for n in args.n:
        sweep(n, args)


def sweep(n: int, args: argparse.Namespace) -> None:
    A = bm.random.standard_normal((n, n), seed=1)
    S = A @ A.T + n * bm.eye(n)
    be = S.backend
    xp = be.xp
    s = xp.asarray(S._data)

    sync = synchronizer(be)

    flops = n**3 / 3
    ref = timed(lambda: xp.linalg.cholesky(s), sync, args.repeat)
    print(
        f"n={n} {xp.__name__}.linalg.cholesky: {ref[0]:.4f} s [{ref[1]:.4f}, {ref[2]:.4f}]"
        f" {flops / ref[0] / 1e12:.1f} TFLOP/s"
    )
    runs = [(f"leaf={leaf or 'none'}", (leaf or 1 << 62, True)) for leaf in args.leaf]
    runs += [(f"block={nb}", (nb, False)) for nb in args.block]
    for label, setting in runs:
        chol.RECURSIVE_POTRF[be.name] = setting
        t = timed(lambda: bm.linalg.cholesky(S, lower=True), sync, args.repeat)
        print(
            f"n={n} {label}: {t[0]:.4f} s [{t[1]:.4f}, {t[2]:.4f}]"
            f" {flops / t[0] / 1e12:.1f} TFLOP/s, {ref[0] / t[0]:.2f}x the library"
        )
    chol.RECURSIVE_POTRF[be.name] = (1 << 62, True)
    parts = {
        "check_finite=False": lambda: bm.linalg.cholesky(S, lower=True, check_finite=False),
        "factor only (cho_factor, no check)": lambda: bm.linalg.cho_factor(
            S, lower=True, check_finite=False
        ),
        "copy": lambda: S.copy(),
    }
    for label, fn in parts.items():
        t = timed(fn, sync, args.repeat)
        print(f"n={n} library potrf once, {label}: {t[0]:.4f} s [{t[1]:.4f}, {t[2]:.4f}]")
    h = n // 2
    x = xp.asarray(A._data)[:h, :h].copy()
    y = xp.asarray(A._data)[h:, :h].copy()
    z = xp.asarray(S._data)[:h, :h].copy()
    c = xp.zeros((h, h), x.dtype)
    tri = xp.linalg.cholesky(z)
    k = min(1024, h)  # the update of a right-looking step of block 1024
    kernels = {
        f"syrk k={k}": (
            lambda: be.syrk(-1.0, y[:, :k], 1.0, c, "L", "N", be.compute),
            h * h * k,
        ),
        "trsm": (lambda: be.trsm(1.0, tri, y.copy(), "R", "L", "T", "N", be.compute), h**3),
        "syrk": (lambda: be.syrk(-1.0, y, 1.0, c, "L", "N", be.compute), h**3),
        "gemm": (lambda: be.gemm(-1.0, x, y, 1.0, c, "N", "T", be.compute), 2 * h**3),
    }
    for name, (fn, fl) in kernels.items():
        t = timed(fn, sync, args.repeat)
        print(f"n/2={h} {name}: {t[0] * 1e3:.2f} ms {fl / t[0] / 1e12:.1f} TFLOP/s")


if __name__ == "__main__":
    main()
