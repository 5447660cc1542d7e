"""Reference libraries measured on the same work in the same run (``--compare``).

The single-process baselines run on rank 0 only, on the gathered matrices, while the other ranks
wait without spinning (a sleeping poll on a non-blocking barrier, so the baseline gets every
core). The MPI baselines (Heat, ScaLAPACK PBLAS, cuBLASMp) then run on every rank
(:mod:`.mpi_baselines`). A library that is not installed or not usable is skipped with a note;
nothing is ever estimated.

* ``numpy/scipy``: what a NumPy user writes for the NumPy-face rows (``a @ b``,
  ``a.T @ a``, ``scipy.linalg.solve_triangular`` with default arguments); NumPy's ``matmul``
  for GEMM, SciPy's BLAS wrappers (``?symm``, ``?syrk``,
  ``?syr2k``, ``?trmm``, ``?trsm``) for the others, on Fortran-ordered copies so that the
  wrappers do not copy, ``scipy.linalg.cholesky`` for Cholesky, ``scipy.linalg.lu_factor``
  for LU, ``numpy.linalg.eigh``/``eigvalsh`` (LAPACK ``xsyevd``/``xheevd``) for the eigensolver,
  ``np.linalg.svd`` (LAPACK ``xgesdd``) for the SVD; with ``threads`` BLAS threads
  (threadpoolctl).
* ``dask.array``: the same product with the threaded scheduler and ``threads`` workers, one BLAS
  thread each; SYRK/SYR2K/SYMM/TRMM are computed as full products (Dask has no structured BLAS3),
  TRSM with ``dask.array.linalg.solve_triangular``, Cholesky with ``dask.array.linalg.cholesky``,
  QR, least squares and the SVD with ``dask.array.linalg.qr``/``lstsq``/``svd`` (TSQR, one
  chunk of columns).
* ``cupy``: the same on one GPU (``matmul``; ``cupyx.scipy.linalg.solve_triangular``;
  ``cupy.linalg.cholesky``, i.e. cuSOLVER ``potrf``; ``cupyx.scipy.linalg.lu_factor``, i.e.
  cuSOLVER ``getrf``; ``cupy.linalg.qr``, i.e. cuSOLVER ``geqrf`` + ``orgqr``;
  ``cupy.linalg.lstsq``, SVD-based; ``cupy.linalg.eigh``/``eigvalsh``, i.e. cuSOLVER
  ``syevd``; ``cupy.linalg.svd``, i.e. cuSOLVER ``gesvd``).
* ``heat``, ``scalapack4py``, ``cublasmp`` and ``cusolvermp``: over MPI on the job's ranks, GEMM
  and TRSM (Heat, ScaLAPACK, cuBLASMp), Cholesky (``p?potrf``, ``cusolverMpPotrf``) and LU
  (``p?getrf``, ``cusolverMpGetrf``) (:mod:`.heat_adapter`, :mod:`.pblas_adapter`,
  :mod:`.cublasmp_adapter`, :mod:`.cusolvermp_adapter`; ScaLAPACK with the CPU backend,
  cuBLASMp and cuSOLVERMp with the GPU backend and one GPU per rank).

The data rows (construction, NumPy in and out, zarr, Dask) have their own peers:
:mod:`.door_peers`.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .mpi_baselines import MPI_BASELINES, measure_mpi_baselines
from .mpi_run import baseline_entry as _entry
from .operators import DATA_OPERATORS, VIEW_OFFSET, VIEW_PRODUCTS, Case, byte_count

__all__ = ["run_baselines", "quiet_barrier", "blas_threads", "BASELINES"]

#: the baselines ``--compare`` knows (``--baselines`` selects a subset; ``zarr`` is a peer of the
#: data rows only, :mod:`.door_peers`)
BASELINES = ("numpy", "dask", "zarr", "cupy", "heat", "scalapack4py", "cublasmp", "cusolvermp")


def quiet_barrier(comm: Any, poll: float = 0.005) -> None:
    """A barrier that sleeps while it waits (MPI barriers spin and would steal a core)."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(poll)


def blas_threads(n: int | None) -> Any:
    """A context limiting BLAS threads to ``n`` (threadpoolctl), or ``None`` if unavailable."""
    if n is None:
        return None
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return threadpool_limits(limits=n, user_api="blas")


def _time(fn: Callable[[], Any], warmup: int, repeat: int, sync: Callable[[], None]) -> list[float]:
    for _ in range(warmup):
        fn()
        sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return times


def _blas(name: str, *arrays: np.ndarray) -> Callable[..., Any]:
    from scipy.linalg import blas

    return blas.get_blas_funcs(name, arrays)


def _numpy_call(case: Case, g: dict[str, np.ndarray]) -> Callable[[], Any]:
    op, left, low = case.op, case.side == "left", int(case.lower)
    trans = {"N": 0, "T": 1, "C": 2}[case.trans]
    a = np.asfortranarray(g["A"])
    b: Any = np.asfortranarray(g["B"]) if "B" in g else None
    if op == "transpose":
        ac = np.ascontiguousarray(g["A"])
        return lambda: np.ascontiguousarray(ac.T)
    if op == "matmul":
        ac, bc = np.ascontiguousarray(g["A"]), np.ascontiguousarray(g["B"])
        return lambda: ac @ bc
    if op == "matmul_ata":
        ac = np.ascontiguousarray(g["A"])
        return lambda: ac.conj().T @ ac  # NumPy runs SYRK/HERK for this pattern
    if op in VIEW_PRODUCTS:
        ac, bc = np.ascontiguousarray(g["A"]), np.ascontiguousarray(g["B"])
        o = VIEW_OFFSET
        return lambda: ac[o:, o:] @ bc[o:, o:]
    if op == "sum_axis0":
        ac = np.ascontiguousarray(g["A"])
        return lambda: ac.sum(axis=0)
    if op == "solve_triangular":
        from scipy.linalg import solve_triangular

        ac, bc = np.ascontiguousarray(g["A"]), np.ascontiguousarray(g["B"])
        return lambda: solve_triangular(ac, bc, lower=case.lower)
    if op == "gemm":
        ac, bc = np.ascontiguousarray(g["A"]), np.ascontiguousarray(g["B"])
        if case.trans == "N":
            return lambda: np.matmul(ac, bc)
        at = ac.T if case.trans == "T" else ac.conj().T
        return lambda: np.matmul(at, bc)
    if op == "symm":
        f = _blas("symm", a, b)
        return lambda: f(1.0, a, b, side=0 if left else 1, lower=low)
    if op == "syrk":
        f = _blas("herk" if case.trans == "C" else "syrk", a)
        return lambda: f(1.0, a, trans=min(trans, 1) if case.trans != "C" else 2, lower=low)
    if op == "syr2k":
        f = _blas("her2k" if case.trans == "C" else "syr2k", a, b)
        return lambda: f(1.0, a, b, trans=min(trans, 1) if case.trans != "C" else 2, lower=low)
    if op == "cholesky":
        from scipy.linalg import cholesky

        return lambda: cholesky(a, lower=bool(low), check_finite=False)
    if op == "lu":
        from scipy.linalg import lu_factor

        return lambda: lu_factor(a, check_finite=False)
    if op in ("qr", "qr_tall"):
        ac = np.ascontiguousarray(g["A"])
        return lambda: np.linalg.qr(ac)
    if op in ("eigh", "eigvalsh"):  # NumPy's LAPACK xsyevd/xheevd
        ac = np.ascontiguousarray(g["A"])
        return (lambda: np.linalg.eigh(ac)) if op == "eigh" else (lambda: np.linalg.eigvalsh(ac))
    if op in ("svd", "svd_polar"):  # LAPACK xgesdd through NumPy (SciPy's default driver too)
        ac = np.ascontiguousarray(g["A"])
        return lambda: np.linalg.svd(ac)
    if op == "lstsq":
        from scipy.linalg import lstsq

        return lambda: lstsq(a, b, lapack_driver="gelsy", check_finite=False)
    if op in ("trmm", "trsm"):
        f = _blas(op, a, b)
        return lambda: f(1.0, a, b, side=0 if left else 1, lower=low, trans_a=trans, diag=0)
    raise ValueError(op)


def _dask_call(case: Case, g: dict[str, np.ndarray], chunk: int) -> Callable[[], Any]:
    import dask.array as da

    op, left = case.op, case.side == "left"
    a = da.from_array(g["A"], chunks=chunk)
    b = da.from_array(g["B"], chunks=chunk) if "B" in g else None

    def opx(x: Any) -> Any:
        return x if case.trans == "N" else (x.T if case.trans == "T" else x.conj().T)

    if op == "matmul":
        expr = a @ b
    elif op == "matmul_ata":
        expr = a.conj().T @ a
    elif op in VIEW_PRODUCTS:
        assert b is not None
        expr = a[VIEW_OFFSET:, VIEW_OFFSET:] @ b[VIEW_OFFSET:, VIEW_OFFSET:]
    elif op == "sum_axis0":
        expr = a.sum(axis=0)
    elif op == "solve_triangular":
        expr = da.linalg.solve_triangular(a, b, lower=case.lower)
    elif op == "gemm":
        expr = opx(a) @ b
    elif op == "symm":
        tri = da.tril(a) if case.lower else da.triu(a)
        strict = da.tril(a, -1) if case.lower else da.triu(a, 1)
        sym = tri + strict.T
        expr = sym @ b if left else b @ sym
    elif op == "syrk":
        expr = opx(a) @ opx(a).T
    elif op == "syr2k":
        expr = opx(a) @ opx(b).T + opx(b) @ opx(a).T
    elif op == "trmm":
        t = opx(da.tril(a) if case.lower else da.triu(a))
        expr = t @ b if left else b @ t
    elif op == "trsm":
        if not left or case.trans != "N":
            raise NotImplementedError("dask baseline of TRSM: side='left', trans='N' only")
        expr = da.linalg.solve_triangular(a, b, lower=case.lower)
    elif op == "cholesky":
        expr = da.linalg.cholesky(a, lower=case.lower)
    elif op == "lu":
        raise NotImplementedError("dask.array has no pivoted LU factorisation (lu_factor)")
    elif op in ("eigh", "eigvalsh"):
        raise NotImplementedError("dask.array has no Hermitian eigensolver")
    elif op in ("svd", "svd_polar"):  # TSQR then the small SVD: one chunk across the columns
        expr = da.linalg.svd(a.rechunk((chunk, a.shape[1])))
    elif op in ("qr", "qr_tall", "lstsq"):  # TSQR: one chunk across the columns
        a = a.rechunk((chunk, a.shape[1]))
        if op == "lstsq":
            assert b is not None
            expr = da.linalg.lstsq(a, b.rechunk((chunk, -1)))
        else:
            expr = da.linalg.qr(a)
    else:
        raise ValueError(op)
    if isinstance(expr, tuple):  # (Q, R), (x, residues, rank, s): one graph
        import dask

        return lambda: dask.compute(*expr)
    return lambda: expr.compute()


def _cupy_call(
    case: Case, g: dict[str, np.ndarray]
) -> tuple[Callable[[], Any], Callable[[], None]]:
    import cupy as cp

    op, left = case.op, case.side == "left"
    a = cp.asarray(g["A"])
    b = cp.asarray(g["B"]) if "B" in g else None

    def opx(x: Any) -> Any:
        return x if case.trans == "N" else (x.T if case.trans == "T" else x.conj().T)

    if op == "transpose":
        fn = lambda: cp.ascontiguousarray(a.T)  # noqa: E731
    elif op == "matmul":
        fn = lambda: a @ b  # noqa: E731
    elif op == "matmul_ata":
        fn = lambda: a.conj().T @ a  # noqa: E731
    elif op in VIEW_PRODUCTS:
        o, bv = VIEW_OFFSET, b
        assert bv is not None
        fn = lambda: a[o:, o:] @ bv[o:, o:]  # noqa: E731
    elif op == "sum_axis0":
        fn = lambda: a.sum(axis=0)  # noqa: E731
    elif op == "solve_triangular":
        from cupyx.scipy.linalg import solve_triangular as cupyx_solve

        fn = lambda: cupyx_solve(a, b, lower=case.lower)  # noqa: E731
    elif op == "gemm":
        fn = lambda: opx(a) @ b  # noqa: E731
    elif op == "symm":
        sym = cp.tril(a) + cp.tril(a, -1).T if case.lower else cp.triu(a) + cp.triu(a, 1).T
        fn = (lambda: sym @ b) if left else (lambda: b @ sym)
    elif op == "syrk":
        fn = lambda: opx(a) @ opx(a).T  # noqa: E731
    elif op == "syr2k":
        fn = lambda: opx(a) @ opx(b).T + opx(b) @ opx(a).T  # noqa: E731
    elif op == "trmm":
        t = opx(cp.tril(a) if case.lower else cp.triu(a))
        fn = (lambda: t @ b) if left else (lambda: b @ t)
    elif op == "trsm":
        from cupyx.scipy.linalg import solve_triangular

        if not left:
            raise NotImplementedError("cupy baseline of TRSM: side='left' only")
        fn = lambda: solve_triangular(a, b, lower=case.lower, trans=case.trans)  # noqa: E731
    elif op == "cholesky":
        if case.lower:
            fn = lambda: cp.linalg.cholesky(a)  # noqa: E731
        else:
            fn = lambda: cp.linalg.cholesky(a).conj().T  # noqa: E731
    elif op == "lu":
        from cupyx.scipy.linalg import lu_factor

        fn = lambda: lu_factor(a, check_finite=False)  # noqa: E731
    elif op in ("qr", "qr_tall"):
        fn = lambda: cp.linalg.qr(a)  # noqa: E731
    elif op == "lstsq":
        fn = lambda: cp.linalg.lstsq(a, b)  # noqa: E731
    elif op == "eigh":
        fn = lambda: cp.linalg.eigh(a)  # noqa: E731
    elif op == "eigvalsh":
        fn = lambda: cp.linalg.eigvalsh(a)  # noqa: E731
    elif op in ("svd", "svd_polar"):
        fn = lambda: cp.linalg.svd(a)  # noqa: E731
    else:
        raise ValueError(op)
    return fn, lambda: cp.cuda.get_current_stream().synchronize()


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _cupy_usable() -> str | None:
    """None when CuPy sees a GPU, else why not."""
    if not _installed("cupy"):
        return "not installed"
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no GPU visible"
    except Exception as exc:  # noqa: BLE001 - any failure means: not usable here
        return f"not usable: {type(exc).__name__}: {exc}"
    return None


def run_baselines(
    case: Case,
    gathered: dict[str, np.ndarray] | None,
    comm: Any,
    threads: int,
    warmup: int,
    repeat: int,
    flops: float,
    which: tuple[str, ...] = BASELINES,
    prepared: Any = None,
    ours: np.ndarray | None = None,
    check: bool = False,
) -> list[dict[str, Any]]:
    """Measure the baselines ``which`` (collective: every rank calls it). Returns the same list
    on every rank.

    The single-process ones run on rank 0 (only rank 0's ``gathered`` is used); then the MPI
    ones run on every rank on the operands of ``prepared`` (the case made concrete on the grid),
    judged with ``check`` against NumPy and against ``ours`` (blasmp_array's gathered result,
    rank 0).
    """
    results: list[dict[str, Any]] | None = None
    if comm.Get_rank() == 0:
        assert gathered is not None
        results = _measure_all(case, gathered, threads, warmup, repeat, flops, which)
    quiet_barrier(comm)
    results = comm.bcast(results, root=0)
    assert results is not None
    mpi = tuple(b for b in which if b in MPI_BASELINES)
    if mpi and case.op not in DATA_OPERATORS:
        if prepared is None:
            results += [_entry(b, note="no prepared case given; not measured") for b in mpi]
        else:
            results += measure_mpi_baselines(
                prepared, gathered, ours, comm, warmup, repeat, flops, mpi, check
            )
    return results


def _summary(times: list[float], flops: float) -> dict[str, Any]:
    med = float(np.median(times))
    return {
        "median_s": med,
        "min_s": float(min(times)),
        "max_s": float(max(times)),
        "gflops": flops / med / 1e9 if flops else None,
    }


def _measure_all(
    case: Case,
    g: dict[str, np.ndarray],
    threads: int,
    warmup: int,
    repeat: int,
    flops: float,
    which: tuple[str, ...] = BASELINES,
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if case.op in DATA_OPERATORS and case.op != "transpose":
        # A.T.resolve()'s peer is the library's contiguous copy of a.T; the others move data
        # between layouts, which one process does not have
        return [_entry("numpy/scipy", note=f"{case.op}: no single-process equivalent; skipped")]
    if "numpy" in which:
        out.extend(_measure_numpy(case, g, threads, warmup, repeat, flops))
    if "dask" in which and case.op != "transpose":
        out.extend(_measure_dask(case, g, threads, warmup, repeat, flops))
    if "cupy" in which:
        out.extend(_measure_cupy(case, g, warmup, repeat, flops))
    if case.op == "transpose":  # a data operator's peers are compared in GB/s
        nbytes = byte_count(case)
        for e in out:
            if e.get("median_s"):
                e["gbytes_per_s"] = nbytes / e["median_s"] / 1e9
    return out


def _measure_numpy(
    case: Case, g: dict[str, np.ndarray], threads: int, warmup: int, repeat: int, flops: float
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    # NumPy / SciPy with `threads` BLAS threads
    limiter = blas_threads(threads)
    try:
        if limiter is None:
            note = "threadpoolctl not installed: BLAS thread count as the environment set it"
        else:
            note = ""
        fn = _numpy_call(case, g)
        times = _time(fn, warmup, repeat, lambda: None)
        used = _blas_thread_count()
        out.append(_entry("numpy/scipy", threads=used, note=note, **_summary(times, flops)))
    except Exception as exc:  # noqa: BLE001 - reported, never faked
        out.append(_entry("numpy/scipy", note=f"failed: {type(exc).__name__}: {exc}"))
    finally:
        if limiter is not None:
            limiter.restore_original_limits()
    return out


def _measure_dask(
    case: Case, g: dict[str, np.ndarray], threads: int, warmup: int, repeat: int, flops: float
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if not _installed("dask"):
        out.append(_entry("dask.array", note="not installed; skipped"))
    else:
        limiter = blas_threads(1)
        try:
            import dask

            chunk = max(case.block[0], -(-max(case.m, case.n, case.k) // max(threads, 1)))
            fn = _dask_call(case, g, chunk)
            with dask.config.set(scheduler="threads", num_workers=threads):
                times = _time(fn, warmup, repeat, lambda: None)
            out.append(
                _entry(
                    "dask.array",
                    threads=threads,
                    note=f"threaded scheduler, chunks {chunk}, 1 BLAS thread/worker",
                    **_summary(times, flops),
                )
            )
        except Exception as exc:  # noqa: BLE001
            out.append(_entry("dask.array", note=f"failed: {type(exc).__name__}: {exc}"))
        finally:
            if limiter is not None:
                limiter.restore_original_limits()
    return out


def _measure_cupy(
    case: Case, g: dict[str, np.ndarray], warmup: int, repeat: int, flops: float
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    why = _cupy_usable()
    if why is not None:
        out.append(_entry("cupy", note=f"{why}; skipped"))
    else:
        try:
            fn, sync = _cupy_call(case, g)
            times = _time(fn, warmup, repeat, sync)
            out.append(_entry("cupy", note="one GPU", **_summary(times, flops)))
        except Exception as exc:  # noqa: BLE001
            out.append(_entry("cupy", note=f"failed: {type(exc).__name__}: {exc}"))
    return out


def _blas_thread_count() -> int | None:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    counts = [int(i["num_threads"]) for i in threadpool_info() if i.get("user_api") == "blas"]
    return max(counts) if counts else None
