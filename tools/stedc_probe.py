"""Probe of the device pieces of the two-stage eigenvector route (docs/eigh.md): cuSOLVER's
tridiagonal divide and conquer ``cusolverDnXstedc`` (present? how fast? accurate?) and the rate of
the strided-batched GEMMs that apply the chase's block reflectors (``2b - 1`` rows by ``b``
columns, batches of blocks ``2b`` rows apart in a column-major ``Z``).

    tools/node-run.sh 1 python3 tools/stedc_probe.py --n 4096 16384
"""

from __future__ import annotations

import argparse
import time

import cupy
import numpy as np
import scipy.linalg
from nvmath.bindings import cublas, cusolver, cusolverDn

R_64F = 1  # cudaDataType CUDA_R_64F


def stedc(n: int, rng: np.random.Generator, repeat: int) -> None:
    d0 = rng.standard_normal(n)
    e0 = rng.standard_normal(n - 1)
    h = cusolverDn.create()
    params = cusolverDn.create_params()
    times = []
    for _ in range(repeat):
        d = cupy.asarray(d0)
        e = cupy.asarray(e0)
        z = cupy.empty((n, n))
        info = cupy.zeros(1, np.int32)
        comp = int(cusolver.EigComp.I)
        dev_b, host_b = cusolverDn.xstedc_buffer_size(
            h, params, comp, n, R_64F, d.data.ptr, e.data.ptr, R_64F, z.data.ptr, n, R_64F
        )
        dw = cupy.empty(max(int(dev_b), 1), np.uint8)
        hw = np.empty(max(int(host_b), 1), np.uint8)
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        cusolverDn.xstedc(
            h, params, comp, n, R_64F, d.data.ptr, e.data.ptr, R_64F, z.data.ptr, n, R_64F,
            dw.data.ptr, int(dev_b), hw.ctypes.data, int(host_b), info.data.ptr,
        )  # fmt: skip
        cupy.cuda.Device().synchronize()
        times.append(time.perf_counter() - t0)
    w = cupy.asnumpy(d)
    ref = scipy.linalg.eigvalsh_tridiagonal(d0, e0)
    eps = np.finfo(np.float64).eps
    tn = np.abs(d0).max() + 2 * np.abs(e0).max()
    werr = np.abs(w - ref).max() / (n * eps * tn)
    # z column-major: the C-ordered array holds Z^T
    orth = float(cupy.abs(z @ z.T - cupy.eye(n)).sum(axis=0).max()) / (n * eps)
    t = np.diag(d0) if n <= 4096 else None
    res = None
    if t is not None:
        t = t + np.diag(e0, -1) + np.diag(e0, 1)
        zh = cupy.asnumpy(z).T
        res = np.abs(t @ zh - zh * w[None, :]).sum(axis=0).max() / (tn * n * eps)
    print(
        f"xstedc n={n}: median {np.median(times):.4f} s of {[round(x, 4) for x in times]}, "
        f"info {int(info[0])}, device {dev_b / 2**20:.1f} MiB host {host_b / 2**20:.1f} MiB, "
        f"eigenvalue err {werr:.3g} (n eps ||T||), orth {orth:.3g}, residual {res}",
        flush=True,
    )


def batched(n: int, b: int, repeat: int) -> None:
    g, rows = b, 2 * b - 1
    count = n // (2 * b)
    ldz = n + 2 * b
    z = cupy.random.standard_normal((n, ldz))  # column-major Z (n x n, ld ldz)
    w = cupy.random.standard_normal((count, g, rows))  # W column-major (rows x g, ld rows)
    wt = cupy.random.standard_normal((count, g, rows))
    y = cupy.empty((count, n, g))  # Y column-major (g x n, ld g)
    h = cublas.create()
    one, zero, mone = (np.array(x, np.float64) for x in (1.0, 0.0, -1.0))
    T, N = int(cublas.Operation.T), int(cublas.Operation.N)

    def step(off: int) -> None:
        zp = z.data.ptr + 8 * off
        cublas.dgemm_strided_batched(
            h, T, N, g, n, rows, one.ctypes.data, w.data.ptr, rows, g * rows,
            zp, ldz, 2 * b, zero.ctypes.data, y.data.ptr, g, g * n, count,
        )  # fmt: skip
        cublas.dgemm_strided_batched(
            h, N, N, rows, n, g, mone.ctypes.data, wt.data.ptr, rows, g * rows,
            y.data.ptr, g, g * n, one.ctypes.data, zp, ldz, 2 * b, count,
        )  # fmt: skip

    step(1)
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for s in range(10):
            step(1 + (s % 2) * b)
        cupy.cuda.Device().synchronize()
        times.append((time.perf_counter() - t0) / 10)
    flops = 4.0 * rows * g * n * count
    t = float(np.median(times))
    print(
        f"batched step n={n} b={b} count={count}: {t * 1e3:.3f} ms, "
        f"{flops / t / 1e12:.1f} TFLOP/s; "
        f"the whole apply (~n^2/(2 b^2) ops) ~{t * (n / b) ** 2 / 2 / count:.3f} s",
        flush=True,
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, nargs="+", default=[4096, 16384])
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    print("cuSOLVER version", cusolver.get_version(), flush=True)
    rng = np.random.default_rng(0)
    for n in args.n:
        try:
            stedc(n, rng, args.repeat)
        except Exception as exc:  # the probe reports what is missing
            print(f"xstedc n={n}: {type(exc).__name__}: {exc}", flush=True)
        for b in (32, 64):
            batched(n, b, args.repeat)
    for n in args.n:
        a = cupy.random.standard_normal((n, n))
        a = a + a.T
        cupy.linalg.eigh(a)
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        cupy.linalg.eigh(a)
        cupy.cuda.Device().synchronize()
        print(f"cupy.linalg.eigh n={n}: {time.perf_counter() - t0:.4f} s", flush=True)


if __name__ == "__main__":
    main()
