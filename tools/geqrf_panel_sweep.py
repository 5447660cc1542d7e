"""Choose the panel width of the one-process QR with look-ahead (ops.lapack._qr_local), and how
its Q is formed: one rank.

Usage: python tools/geqrf_panel_sweep.py [--n 4096 16384] [--panel 512 1024 2048 0]
                                          [--q-block 0 1024] [--panel-factor auto]
                                          [--repeat 5]

For each n: the median (and min/max) time of ``np.linalg.qr(A, mode='r')`` (the factorisation
and ``R``) and of ``np.linalg.qr(A)`` (also the reduced ``Q``) on a 1x1 grid for each panel width
of ``ops.lapack._qr_local`` (``0``: the library's ``geqrf`` called once on the whole matrix, the
path without look-ahead), the reduced one for each ``--q-block`` (``$BLASMP_QR_LOCAL_Q_BLOCK``:
``Q`` formed in blocks of that many reflectors as GEMMs; ``0``: the library's ``orgqr``), and
each ``--panel-factor`` (``$BLASMP_QR_PANEL``: ``cholqr``, CholeskyQR2 and Householder
reconstruction; ``lapack``, the library's ``geqrf``; ``auto``, the backend's default), and
the library's own QR in the same run (``cupy.linalg.qr`` / ``numpy.linalg.qr``, both cuSOLVER /
LAPACK ``geqrf`` and ``orgqr``). The look-ahead is forced on a backend without concurrent
streams (the CPU) so that the tool runs anywhere. Backend from $BLASMP_BACKEND. A tuning tool,
not a benchmark (the bench's ``qr`` row is).
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from _sweep_timing import synchronizer, timed  # (tools/, run as a script)

import blasmp_array as bm
from blasmp_array.ops.lapack import _qr_local


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--panel", type=int, nargs="+", default=[512, 1024, 2048, 0])
    ap.add_argument("--q-block", type=int, nargs="+", default=[0, 1024])
    ap.add_argument(
        "--panel-factor", nargs="+", default=["auto"], choices=["auto", "cholqr", "lapack"]
    )
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    for n in args.n:
        sweep(n, args)


def line(label: str, t: tuple[float, ...], flops: float, ref: float) -> str:
    return (
        f"{label}: {t[0]:.4f} s [{t[1]:.4f}, {t[2]:.4f}] {flops / t[0] / 1e12:.2f} TFLOP/s,"
        f" {ref / t[0]:.2f}x the library"
    )


def sweep(n: int, args: argparse.Namespace) -> None:
    A = bm.random.standard_normal((n, n), seed=1)
    be = A.backend
    xp = be.xp
    a = xp.asarray(A._data)
    sync = synchronizer(be)
    fr = 4 * n**3 / 3  # geqrf
    fq = 8 * n**3 / 3  # geqrf and orgqr
    ref_r = timed(lambda: xp.linalg.qr(a, mode="r"), sync, args.repeat)
    ref_q = timed(lambda: xp.linalg.qr(a), sync, args.repeat)
    lib = f"{xp.__name__}.linalg.qr"
    print(f"n={n} " + line(lib + "(mode='r')", ref_r, fr, ref_r[0]))
    print(f"n={n} {line(lib, ref_q, fq, ref_q[0])}")
    default = (_qr_local.PANEL, _qr_local.LOOKAHEAD_MIN)
    concurrent = be.concurrent_streams
    env = {k: os.environ.get(k) for k in ("BLASMP_QR_LOCAL_Q_BLOCK", "BLASMP_QR_PANEL")}
    be.concurrent_streams = True
    runs = [(p, f) for p in args.panel for f in (args.panel_factor if p else ["auto"])]
    try:
        for panel, factor in runs:
            _qr_local.PANEL = panel or default[0]
            _qr_local.LOOKAHEAD_MIN = 0 if panel else 1 << 62
            os.environ["BLASMP_QR_PANEL"] = "" if factor == "auto" else factor
            label = f"PANEL={panel} {factor}" if panel else "one geqrf"
            t = timed(lambda: np.linalg.qr(A, mode="r"), sync, args.repeat)
            print(f"n={n} {label} mode='r': {line('', t, fr, ref_r[0])[2:]}")
            for qb in args.q_block:
                os.environ["BLASMP_QR_LOCAL_Q_BLOCK"] = str(qb)
                t = timed(lambda: np.linalg.qr(A), sync, args.repeat)
                how = f"Q in blocks of {qb}" if qb else "orgqr"
                print(f"n={n} {label} reduced, {how}: {line('', t, fq, ref_q[0])[2:]}")
    finally:
        _qr_local.PANEL, _qr_local.LOOKAHEAD_MIN = default
        be.concurrent_streams = concurrent
        for key, value in env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


if __name__ == "__main__":
    main()
