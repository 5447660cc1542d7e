"""The parts of the device two-stage eigenvector route (docs/eigh.md, "Eigenvectors by the
two-stage method on the device"), timed one by one on one GPU, where the loaded cuSOLVER lacks
the tridiagonal divide and conquer (``cusolverDnXstedc``) that would join them: stage 1 keeping
its reflectors, the band's diagonals, the chase keeping every reflector, the block reflectors,
the chase's back-transformation of ``n`` vectors (an identity standing in for ``stedc``'s
eigenvectors), stage 1's back-transformation and the transposing copy out; beside
``cupy.linalg.eigh`` and ``eigvalsh`` (whose difference bounds ``syevd``'s ``stedc`` and
back-transformation). Medians of ``--repeat`` runs after a warm-up.

    BLASMP_BACKEND=gpu tools/node-run.sh 1 python3 tools/eigvec_parts.py --n 16384
"""

from __future__ import annotations

import argparse
import statistics
import time

import cupy
import numpy as np

import blasmp_array as bm
from blasmp_array.backends import _chase_backtransform as cbt
from blasmp_array.backends import _gpu_band_eig as gbe
from blasmp_array.backends import _gpu_band_eigh as gbh
from blasmp_array.ops.lapack import _band_reduction as br


def parts(be, a0, b):  # type: ignore[no-untyped-def]
    n = a0.shape[0]
    stream = be.compute.cupy
    times = {}

    def mark(name, t0):  # type: ignore[no-untyped-def]
        be.synchronize()
        stream.synchronize()
        t = time.perf_counter()
        times[name] = t - t0
        return t

    a = a0.copy()
    t = mark("copy in", time.perf_counter())
    steps = br.reduce_local_array(be, a, b, keep=True)
    t = mark("stage 1 (keeping V, T)", t)
    band = br.local_band(be, a, b)
    t = mark("band diagonals", t)
    with stream:
        scale = 2.0 ** -np.frexp(float(np.abs(band).max()))[1]
        ab = gbe.device_band(band, b, scale)
        v, tau = gbe.chase(ab, b, keep=True)
        t = mark("chase (keeping every reflector)", t)
        refl = cbt.block_reflectors(cupy, v, tau, n)
        del v, tau
        t = mark("block reflectors", t)
        zc = cupy.zeros((n, n + 2 * b))
        zc[:, :n] = cupy.eye(n)
        t = mark("(identity for stedc's Z)", t)
        gbh.apply_device(refl, zc, be._blas.handle(stream))
        t = mark("chase back-transform", t)
    z = zc[:, :n].T
    br.back_transform_local(be, steps, z)
    t = mark("stage 1 back-transform", t)
    out = be.xp.empty(z.shape, z.dtype)
    be.launch(be.compute, be.copy_local, out, z)
    mark("copy out", t)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=16384)
    ap.add_argument("--band", type=int, default=gbe.MAX_BAND)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    grid = bm.ProcessGrid(1, 1)
    be = grid.backend
    g = cupy.random.standard_normal((args.n, args.n))
    a0 = g + g.T
    parts(be, a0, args.band)  # warm-up
    runs = [parts(be, a0, args.band) for _ in range(args.repeat)]
    total = [sum(v for k, v in r.items() if not k.startswith("(")) for r in runs]
    print(
        f"device eigenvector route's parts, n={args.n}, band {args.band}, float64, "
        f"medians of {args.repeat} (without stedc): {statistics.median(total):.3f} s"
    )
    for k in runs[0]:
        print(f"  {k:34s} {statistics.median(r[k] for r in runs):8.3f} s")
    for name in ("eigh", "eigvalsh"):
        fn = getattr(cupy.linalg, name)
        fn(a0)
        cupy.cuda.Device().synchronize()
        ts = []
        for _ in range(2):
            t0 = time.perf_counter()
            fn(a0)
            cupy.cuda.Device().synchronize()
            ts.append(time.perf_counter() - t0)
        print(f"  cupy.linalg.{name:8s} {statistics.median(ts):8.3f} s")


if __name__ == "__main__":
    main()
