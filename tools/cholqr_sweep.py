"""Profile and tune the tall-skinny QR (CholeskyQR2 on whole rows, ops.lapack._cholqr): one rank.

Usage: python tools/cholqr_sweep.py [--m 1048576] [--n 256] [--config 0:0 16384:32 16384:inv]
                                     [--repeat 5]

First the kernels of one pass alone, each timed on the device (median, min, max): the Gram
matrix by one SYRK and by the batched GEMM of row chunks (``GRAM_ROWS``), the copy of ``X``, the
Cholesky of the ``n x n`` Gram matrix, and the copy followed by the solve ``X R^{-1}`` by one
TRSM, split into halves with GEMMs (``TRSM_LEAF``) and as one GEMM by the explicit ``R^{-1}``
(``INVERSE``): the per-kernel profile of the call. Then ``np.linalg.qr(A)`` (the reduced ``Q``
and ``R``, ``4 m n^2`` flops) for each configuration ``GRAM_ROWS:SOLVE`` (``GRAM_ROWS`` 0: the
SYRK; ``SOLVE`` 0: one TRSM, a number: the split's leaf, ``inv``: the GEMM by ``R^{-1}``),
against the library's own QR
(``cupy.linalg.qr`` / ``numpy.linalg.qr``: ``geqrf`` and ``orgqr``) in the same run. Backend from
$BLASMP_BACKEND. A tuning tool, not a benchmark (the bench's ``qr_tall`` row is).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np
from _sweep_timing import synchronizer, timed  # (tools/, run as a script)

import blasmp_array as bm
from blasmp_array.ops.lapack import _cholqr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=1048576)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--config", nargs="+", default=["0:0", "16384:32", "16384:inv"])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    m, n = args.m, args.n
    A = bm.random.standard_normal((m, n), seed=1, grid=bm.ProcessGrid(1, 1))
    be = A.backend
    xp = be.xp
    a = xp.asarray(A._data)
    sync = synchronizer(be)
    kernels(be, a, args)
    flops = 4 * m * n**2
    ref = timed(lambda: xp.linalg.qr(a), sync, args.repeat)
    print(
        f"{xp.__name__}.linalg.qr {m}x{n}: {ref[0] * 1e3:.2f} ms [{ref[1] * 1e3:.2f}, "
        f"{ref[2] * 1e3:.2f}] {flops / ref[0] / 1e12:.2f} TFLOP/s"
    )
    default = (_cholqr.GRAM_ROWS, _cholqr.TRSM_LEAF, _cholqr.INVERSE)
    try:
        for config in args.config:
            rows, solve = config.split(":")
            inverse = solve == "inv"
            leaf = 0 if inverse else int(solve)
            _cholqr.GRAM_ROWS, _cholqr.TRSM_LEAF, _cholqr.INVERSE = int(rows), leaf, inverse
            t = timed(lambda: np.linalg.qr(A), sync, args.repeat)
            print(
                f"np.linalg.qr GRAM_ROWS={rows} SOLVE={solve}: {t[0] * 1e3:.2f} ms"
                f" [{t[1] * 1e3:.2f}, {t[2] * 1e3:.2f}] {flops / t[0] / 1e12:.2f} TFLOP/s,"
                f" {ref[0] / t[0]:.2f}x the library"
            )
    finally:
        _cholqr.GRAM_ROWS, _cholqr.TRSM_LEAF, _cholqr.INVERSE = default


def kernels(be: Any, a: Any, args: argparse.Namespace) -> None:
    """Each kernel of one pass alone, on the backend's compute stream."""
    xp = be.xp
    m, n = args.m, args.n
    sync = synchronizer(be)
    g = xp.zeros((n, n), a.dtype)
    q = xp.empty_like(a)
    comp = be.compute

    def show(name: str, fn: Callable[[], Any], flops: float, nbytes: float) -> None:
        t = timed(fn, sync, args.repeat)
        print(
            f"{name}: {t[0] * 1e3:.2f} ms [{t[1] * 1e3:.2f}, {t[2] * 1e3:.2f}]"
            f" {flops / t[0] / 1e12:.2f} TFLOP/s, {nbytes / t[0] / 1e9:.0f} GB/s"
        )

    size = m * n * a.itemsize
    show("syrk X^H X", lambda: be.syrk(1, a, 0, g, "U", "C", comp), m * n * n, size)
    for rows in (4096, 16384, 65536):
        if m >= 2 * rows and a.dtype.kind != "c":
            show(
                f"gram, batched GEMM of {rows}-row chunks",
                lambda rows=rows: be.launch(comp, _cholqr._chunked_gram, xp, g, a, rows),
                2 * m * n * n,
                size,
            )
    be.launch(comp, _cholqr._chunked_gram if a.dtype.kind != "c" else _herk, xp, g, a, 16384)
    # an upper triangular R with the Gram matrix's scale: its Cholesky factor (shifted)
    r = xp.linalg.cholesky(g.T.conj() + g + n * xp.eye(n, dtype=a.dtype)).T.conj().copy()
    show("copy X", lambda: be.launch(comp, _copy, q, a), 0, 2 * size)
    info = xp.zeros(1, np.int32)
    show("potrf of the Gram matrix", lambda: be.potrf(g.copy(), "U", info, comp), n**3 / 3, 0)
    for leaf in (0, 128, 64, 32):
        if leaf < n:
            how = "one trsm" if not leaf else f"split to leaves of {leaf}"

            def solve(leaf: int = leaf) -> None:
                be.launch(comp, _copy, q, a)  # a fresh X each time (repeated solves underflow)
                _cholqr._solve_upper_right(be, r, q, leaf)

            show(f"copy X, then X R^-1 ({how})", solve, m * n * n, 4 * size)
    show(
        "X R^-1 by one GEMM with R^-1 (a trsm of I)",
        lambda: _cholqr._multiply_by_inverse(be, r, a, q),
        m * n * n,
        2 * size,
    )


def _copy(out: Any, src: Any) -> None:
    out[...] = src


def _herk(xp: Any, out: Any, x: Any, rows: int) -> None:
    out[...] = x.conj().T @ x


if __name__ == "__main__":
    main()
