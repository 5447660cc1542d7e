"""Where the host time of the NumPy face goes: cProfile of repeated public calls (one rank).

Usage: python tools/profile_face.py [--n 4096] [--repeat 20] [--top 18] [OP ...]
OPs (default: all): matmul, matmul_ata, transpose (A.T.resolve()), solve_triangular,
solve_triangular_nocheck, trmm, syr2k, symm, cholesky (np.linalg.cholesky), cholesky_scipy
(bm.linalg.cholesky(S, lower=True)), cho_factor_nocheck, and gemm_kernel (the backend's GEMM alone
into a preallocated result, against ``matmul(a, b, out=c)``), gemm_fresh (the same into a result
allocated per call).

For each call it prints the median wall time of the call (device synchronised after each), the
median time for the call to return (host) and until it enqueued its first BLAS/LAPACK kernel,
the same for the CuPy/NumPy equivalent in the same run, then the functions with the most own
time under cProfile: what the host does per call. Backend from $BLASMP_BACKEND (gpu if usable).
A diagnosis tool for the per-call costs of docs/blas3.md, not a benchmark (the bench command is).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import numpy as np

import blasmp_array as bm
from blasmp_array.bench.compare import _time


def _calls(n: int):
    A = bm.random.standard_normal((n, n), seed=1)
    B = bm.random.standard_normal((n, n), seed=2)
    T = np.tril(A) + n * bm.eye(n)
    S = T @ T.T
    xp = A.backend.xp
    a, b, t, s = (xp.asarray(x._data) for x in (A, B, T, S))  # one rank: the local matrix is all
    if xp is np:
        from scipy.linalg import solve_triangular
    else:
        from cupyx.scipy.linalg import solve_triangular
    be = A.backend
    c_ours, c_ref = be.empty((n, n), a.dtype), xp.empty((n, n), a.dtype)

    def gemm_kernel() -> None:  # the backend's GEMM alone, into a preallocated result
        be.begin()
        be.gemm(1, a, b, 0, c_ours, "N", "N", be.compute)

    def gemm_fresh():  # the same into a result allocated per call, as A @ B does
        c = be.empty((n, n), a.dtype)
        be.begin()
        be.gemm(1, a, b, 0, c, "N", "N", be.compute)
        be.synchronize()
        return c

    return be, {
        "gemm_kernel": (gemm_kernel, lambda: xp.matmul(a, b, out=c_ref)),
        "gemm_fresh": (gemm_fresh, lambda: a @ b),
        "matmul": (lambda: A @ B, lambda: a @ b),
        "matmul_ata": (lambda: A.T @ A, lambda: a.T @ a),
        "transpose": (lambda: A.T.resolve(), lambda: xp.ascontiguousarray(a.T)),
        "solve_triangular": (
            lambda: bm.linalg.solve_triangular(T, B, lower=True),
            lambda: solve_triangular(t, b, lower=True),
        ),
        "solve_triangular_nocheck": (
            lambda: bm.linalg.solve_triangular(T, B, lower=True, check_finite=False),
            lambda: solve_triangular(t, b, lower=True, check_finite=False),
        ),
        "trmm": (lambda: bm.linalg.trmm(T, B), lambda: xp.tril(t) @ b),
        "syr2k": (lambda: bm.linalg.syr2k(A, B), lambda: a @ b.T + b @ a.T),
        "symm": (lambda: bm.linalg.symm(T, B), lambda: t @ b),
        "cholesky": (lambda: np.linalg.cholesky(S), lambda: xp.linalg.cholesky(s)),
        "cholesky_scipy": (
            lambda: bm.linalg.cholesky(S, lower=True),
            lambda: xp.linalg.cholesky(s),
        ),
        "cho_factor_nocheck": (
            lambda: bm.linalg.cho_factor(S, lower=True, check_finite=False),
            lambda: xp.linalg.cholesky(s),
        ),
    }


def _median(f, sync, repeat: int) -> float:
    return float(np.median(_time(f, 0, repeat, sync)))


def _host_median(f, sync, repeat: int) -> float:
    """Median time for the call to return, before the device is synchronised: the host's share
    (the kernels of a call start no earlier than the host enqueues them)."""
    times = []
    for _ in range(repeat):
        sync()
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
        sync()
    return float(np.median(times))


_KERNELS = ("gemm", "syrk", "syr2k", "trmm", "trsm", "potrf", "getrf")


def _first_kernel_median(backend, f, sync, repeat: int) -> float | None:
    """Median time from the start of a call until it enqueues its first BLAS/LAPACK kernel
    (through the backend's kernel methods), or None if it enqueued none."""
    first: list[float] = []
    saved = {}
    for name in _KERNELS:
        method = getattr(backend, name, None)
        if method is None:
            continue
        saved[name] = method

        def stamped(*args, _method=method, **kwargs):
            if not first:
                first.append(time.perf_counter())
            return _method(*args, **kwargs)

        setattr(backend, name, stamped)
    times = []
    try:
        for _ in range(repeat):
            sync()
            first.clear()
            t0 = time.perf_counter()
            f()
            if first:
                times.append(first[0] - t0)
            sync()
    finally:
        for name in saved:
            delattr(backend, name)  # the class's method again
    return float(np.median(times)) if times else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ops", nargs="*")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--top", type=int, default=18)
    args = ap.parse_args()
    backend, calls = _calls(args.n)
    sync = backend.synchronize
    if backend.xp is not np:
        import cupy

        def sync() -> None:
            backend.synchronize()
            cupy.cuda.Device().synchronize()

    for op in args.ops or list(calls):
        ours, ref = calls[op]
        for _ in range(3):
            ours(), ref()
        sync()
        t_ours, t_ref = _median(ours, sync, args.repeat), _median(ref, sync, args.repeat)
        h_ours, h_ref = _host_median(ours, sync, args.repeat), _host_median(ref, sync, args.repeat)
        k_ours = _first_kernel_median(backend, ours, sync, args.repeat)
        first = f", first kernel at {k_ours * 1e3:.3f}" if k_ours is not None else ""
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.repeat):
            ours()
            sync()
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(args.top)
        print(
            f"=== {op} n={args.n}: ours {t_ours * 1e3:.2f} ms (host {h_ours * 1e3:.3f}{first}), "
            f"reference {t_ref * 1e3:.2f} ms (host {h_ref * 1e3:.3f})"
        )
        print("\n".join(line for line in text.getvalue().splitlines() if line.strip())[:6000])


if __name__ == "__main__":
    main()
