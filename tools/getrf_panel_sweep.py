"""Choose the panel width of the one-process LU with look-ahead (ops.lapack._lu_local): one rank.

Usage: python tools/getrf_panel_sweep.py [--n 4096 16384] [--config 2048:0:512 1024 0 ...]
                                          [--repeat 5] [--getrf 16384x2048 16384x512 ...]

For each n: the median (and min/max) time of ``bm.linalg.lu_factor(A, check_finite=False)`` on a
1x1 grid with each configuration ``PANEL:FIRST:LEAF`` (``ops.lapack._lu_local``'s panel width, first
panel width and TRSM leaf; missing fields take the module's defaults; ``0``: the library's
``getrf`` called once on the whole matrix, the path without look-ahead), and of the library's
own LU in the same run
(``cupyx.scipy.linalg.lu_factor`` / ``scipy.linalg.lu_factor``, both cuSOLVER / LAPACK
``getrf``). The look-ahead is forced on a backend without concurrent streams (the CPU) so that
the tool runs anywhere. Backend from $BLASMP_BACKEND. A tuning tool, not a benchmark (the
bench's ``lu`` row is).
"""

from __future__ import annotations

import argparse

import numpy as np
from _sweep_timing import synchronizer, timed  # (tools/, run as a script)

import blasmp_array as bm
from blasmp_array.ops.lapack import _lu_local


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--config", nargs="+", default=["2048", "1024", "2048:1024", "0"])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--getrf",
        nargs="*",
        default=[],
        metavar="MxW",
        help="also time the backend's getrf alone on column-major M x W panels",
    )
    args = ap.parse_args()
    for shape in args.getrf:
        time_getrf(*(int(x) for x in shape.split("x")), args.repeat)
    for n in args.n:
        sweep(n, args)


def time_getrf(m: int, w: int, repeat: int) -> None:
    """The backend's ``getrf`` of one ``m x w`` column-major panel, alone on the device: what
    the look-ahead's critical path is made of (per column: its latency)."""
    be = bm.ProcessGrid().backend
    xp = be.xp
    a = xp.asarray(np.random.default_rng(1).standard_normal((m, w)), order="F")
    panel = a.copy(order="F")
    out = xp.zeros(w + 1, dtype=np.int32)

    def run() -> None:
        panel[...] = a
        be.getrf(panel, out[:w], out[w:], be.compute)

    sync = synchronizer(be)

    t = timed(run, sync, repeat)
    print(
        f"getrf {m}x{w}: {t[0] * 1e3:.2f} ms [{t[1] * 1e3:.2f}, {t[2] * 1e3:.2f}]"
        f" ({t[0] / w * 1e6:.2f} us per column, copy in included)"
    )


def sweep(n: int, args: argparse.Namespace) -> None:
    A = bm.random.standard_normal((n, n), seed=1)
    be = A.backend
    xp = be.xp
    a = xp.asarray(A._data)
    if xp is np:
        from scipy.linalg import lu_factor
    else:
        from cupyx.scipy.linalg import lu_factor

    sync = synchronizer(be)

    flops = 2 * n**3 / 3
    ref = timed(lambda: lu_factor(a, check_finite=False), sync, args.repeat)
    print(
        f"n={n} {lu_factor.__module__}.lu_factor: {ref[0]:.4f} s [{ref[1]:.4f}, {ref[2]:.4f}]"
        f" {flops / ref[0] / 1e12:.1f} TFLOP/s"
    )
    names = ("PANEL", "FIRST_PANEL", "TRSM_LEAF")
    default = {k: getattr(_lu_local, k) for k in (*names, "LOOKAHEAD_MIN")}
    concurrent = be.concurrent_streams
    be.concurrent_streams = True
    try:
        for config in args.config:
            values = [int(x) for x in config.split(":")]
            for k, v in default.items():
                setattr(_lu_local, k, v)
            for name, value in zip(names, values, strict=False):
                setattr(_lu_local, name, type(default[name])(value))
            _lu_local.LOOKAHEAD_MIN = 0 if values[0] else 1 << 62
            t = timed(lambda: bm.linalg.lu_factor(A, check_finite=False), sync, args.repeat)
            label = (
                " ".join(f"{k}={getattr(_lu_local, k)}" for k in names)
                if values[0]
                else "one getrf"
            )
            print(
                f"n={n} {label}: {t[0]:.4f} s [{t[1]:.4f}, {t[2]:.4f}]"
                f" {flops / t[0] / 1e12:.1f} TFLOP/s, {ref[0] / t[0]:.2f}x the library"
            )
    finally:
        for k, v in default.items():
            setattr(_lu_local, k, v)
        be.concurrent_streams = concurrent


if __name__ == "__main__":
    main()
