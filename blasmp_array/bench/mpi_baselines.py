"""Baselines that run over MPI on every rank of the job (``--compare``): Heat, ScaLAPACK PBLAS,
cuBLASMp and cuSOLVERMp.

The single-process baselines of :mod:`.compare` run on rank 0 while the other ranks sleep; these
run on all ranks at once, on the same number of processes as blasmp_array, each process with the
BLAS threads the environment gives it (``OMP_NUM_THREADS``), as blasmp_array's own ranks have.
They are timed exactly as blasmp_array's operators are (:func:`.cli._time_runs`): ``warmup``
untimed calls, then ``repeat`` calls each between a barrier and the slowest rank's end (the
elapsed time is reduced with ``MAX`` over the ranks); the median is reported. Whatever a call
overwrites (PBLAS's ``B`` in TRSM, ``A`` in ScaLAPACK's factorizations) is restored from a copy
before each call, outside the timing.

Adapters (one module each) turn a prepared case into an :class:`MpiRun`:

* :mod:`.heat_adapter`: ``heat.matmul`` and ``heat.linalg.solve_triangular`` on DNDarrays;
* :mod:`.pblas_adapter`: ``p?gemm``, ``p?trsm``, and ScaLAPACK's ``p?potrf`` (Cholesky) and
  ``p?getrf`` (LU) through ``scalapack4py`` on the very block-cyclic descriptors and local
  matrices of blasmp_array's operands (CPU backend);
* :mod:`.cublasmp_adapter`: ``cublasMpGemm`` and ``cublasMpTrsm`` through nvmath-python, the
  same on the GPU backend (one GPU per rank: NCCL's rule);
* :mod:`.cusolvermp_adapter`: ``cusolverMpPotrf`` (Cholesky), ``cusolverMpGetrf`` (LU) and
  ``cusolverMpSyevd`` (``eigh``)
  through nvmath-python on the GPU backend (one GPU per rank).

GEMM and TRSM have adapters for Heat, ScaLAPACK and cuBLASMp, Cholesky and LU for ScaLAPACK and
cuSOLVERMp (:data:`SUPPORTED_OPS`); other operators are reported as not measured. A library
that is missing or not usable on every rank is skipped with the reason; nothing is ever
estimated.

With ``--check`` each baseline's result is gathered on rank 0 and judged like blasmp_array's
(:func:`.operators.check_result`: GEMM componentwise against ``c (k + 2)`` eps ``|A||B|``, TRSM
normwise backward error against ``c (m + 2)``) and compared with blasmp_array's result of the
same run:

* GEMM: ``max |C_lib - C_ours| / (eps |op(A)||B|)`` against ``2 c (k + 2)`` (each is within
  ``c (k + 2)`` of the exact product);
* TRSM: ``||X_lib - X_ours|| / (eps ||T^-1|| (||T|| x + ||B||))``, ``x`` the mean of
  ``||X_lib||`` and ``||X_ours||`` (infinity norms), against the sum of both backward-error
  bounds, ``2 c (m + 2)`` (each residual ``R`` is within its bound, and ``X_lib - X_ours =
  T^-1 (R_lib - R_ours)``, or ``(R_lib - R_ours) T^-1`` for ``side='right'``).

Cholesky and LU are judged by their own backward error only (``||A - L L^H||``, ``||P A - L U||``
as :func:`.operators.check_result` judges blasmp_array's): a bound on the difference of two
factors would need the condition number of ``A``, and two LU factorizations may pivot
differently on ties.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .mpi_run import MpiRun, agreed_reason, baseline_entry, time_collective

__all__ = ["MPI_BASELINES", "SUPPORTED_OPS", "measure_mpi_baselines"]

#: the baselines of this module, by their ``--baselines`` name
MPI_BASELINES = ("heat", "scalapack4py", "cublasmp", "cusolvermp")
#: operators each adapter implements, by baseline name
SUPPORTED_OPS: dict[str, tuple[str, ...]] = {
    "heat": ("gemm", "trsm"),
    "scalapack4py": (
        "gemm",
        "trsm",
        "cholesky",
        "lu",
        "qr",
        "qr_tall",
        "lstsq",
        "eigh",
        "eigvalsh",
        "svd",
    ),
    "cublasmp": ("gemm", "trsm"),
    "cusolvermp": ("cholesky", "lu", "eigh"),
}

_LIBRARY = {
    "heat": "heat",
    "scalapack4py": "scalapack (PBLAS)",
    "cublasmp": "cublasmp",
    "cusolvermp": "cusolvermp",
}


def _adapter(name: str) -> Any:
    if name == "heat":
        from . import heat_adapter

        return heat_adapter
    if name == "cublasmp":
        from . import cublasmp_adapter

        return cublasmp_adapter
    if name == "cusolvermp":
        from . import cusolvermp_adapter

        return cusolvermp_adapter
    from . import pblas_adapter

    return pblas_adapter


def measure_mpi_baselines(
    prepared: Any,
    gathered: dict[str, np.ndarray] | None,
    ours: np.ndarray | None,
    comm: Any,
    warmup: int,
    repeat: int,
    flops: float,
    which: tuple[str, ...],
    check: bool,
) -> list[dict[str, Any]]:
    """Measure the MPI baselines among ``which`` on the case ``prepared`` (collective).

    ``gathered`` (the operands) and ``ours`` (blasmp_array's result, only needed for ``check``)
    are used on rank 0 only. Returns the same list of entries on every rank.
    """
    out = []
    for name in MPI_BASELINES:
        if name in which:
            out.append(_measure(name, prepared, gathered, ours, comm, warmup, repeat, flops, check))
    return out


def _measure(
    name: str,
    p: Any,
    gathered: dict[str, np.ndarray] | None,
    ours: np.ndarray | None,
    comm: Any,
    warmup: int,
    repeat: int,
    flops: float,
    check: bool,
) -> dict[str, Any]:
    label, ops = _LIBRARY[name], SUPPORTED_OPS[name]
    if p.case.op not in ops:
        covers = ", ".join(ops[:-1]) + " and " + ops[-1]
        return baseline_entry(label, note=f"{p.case.op}: the {name} adapter covers {covers} only")
    adapter = _adapter(name)
    why = agreed_reason(comm, adapter.unusable(p.case, comm))
    if why is not None:
        return baseline_entry(label, note=f"{why}; skipped")
    run: MpiRun | None = None
    failure: str | None = None
    try:
        run = adapter.prepare(p, gathered, comm)
    except Exception as exc:  # noqa: BLE001 - reported, never faked
        failure = f"set-up failed: {type(exc).__name__}: {exc}"
    failure = agreed_reason(comm, failure)
    if failure is not None or run is None:
        if run is not None:
            run.close()
        return baseline_entry(label, note=failure or "set-up failed")
    try:
        times, result = time_collective(run, comm, warmup, repeat)
        verdict = None
        if check:
            verdict = _judge(p.case, gathered, ours, run.gather(result), comm)
    except np.linalg.LinAlgError as exc:
        # a factorization's non-zero INFO: global, so every rank raised it at the same call and
        # none is left waiting in a collective
        return baseline_entry(label, note=f"failed: {type(exc).__name__}: {exc}; {run.note}")
    finally:
        run.close()
    med = float(np.median(times))
    return baseline_entry(
        label,
        median_s=med,
        min_s=float(min(times)),
        max_s=float(max(times)),
        gflops=flops / med / 1e9 if flops and med > 0 else None,
        threads=run.threads,
        ranks=comm.Get_size(),
        times_s=times,
        check=verdict,
        note=run.note,
    )


def _judge(
    case: Any,
    gathered: dict[str, np.ndarray] | None,
    ours: np.ndarray | None,
    result: np.ndarray | tuple[np.ndarray, np.ndarray] | None,
    comm: Any,
) -> dict[str, Any]:
    """The check of a baseline's result on rank 0, broadcast (collective)."""
    from .operators import failed_check

    verdict: dict[str, Any] | None = None
    if comm.Get_rank() == 0:
        assert gathered is not None and result is not None
        try:
            verdict = judge(case, gathered, result, ours)
        except Exception as exc:  # noqa: BLE001 - a failed check, on every rank
            verdict = failed_check(exc)
    return comm.bcast(verdict, root=0)


def judge(
    case: Any,
    gathered: dict[str, np.ndarray],
    result: np.ndarray | tuple[np.ndarray, np.ndarray],
    ours: np.ndarray | None,
) -> dict[str, Any]:
    """Judge a baseline's gathered ``result`` (for LU: ``(lu, piv)``) as blasmp_array's own is
    judged, and, for GEMM and TRSM, against blasmp_array's result ``ours`` of the same operands
    (see the module docstring)."""
    from .operators import _op, _ref_dtype, _verdict

    verdict = _verdict(case, gathered, result)
    if ours is None or case.op not in ("gemm", "trsm"):  # factorizations: backward error only
        return verdict
    assert isinstance(result, np.ndarray)  # a tuple is LU's only
    rd = _ref_dtype(case.dtype)
    eps = float(np.finfo(np.dtype(case.dtype)).eps)
    c = 2.0 if case.is_complex else 1.0
    tiny = np.finfo(np.float64).tiny
    a, b = gathered["A"].astype(rd), gathered["B"].astype(rd)
    diff = result.astype(rd) - ours.astype(rd)
    if case.op == "gemm":
        absprod = np.abs(_op(a, case.trans)) @ np.abs(b)
        vs = float((np.abs(diff) / np.maximum(absprod * eps, tiny)).max()) if diff.size else 0.0
        vs_bound = 2 * c * (case.k + 2)
    else:  # trsm: X_lib - X_ours = T^-1 (R_lib - R_ours), or (R_lib - R_ours) T^-1 on the right
        t = _op(np.tril(a) if case.lower else np.triu(a), case.trans)
        norm = lambda z: float(np.linalg.norm(z, np.inf))  # noqa: E731
        t_inv = norm(np.linalg.solve(t, np.eye(t.shape[0], dtype=t.dtype)))
        x_mean = (norm(result.astype(rd)) + norm(ours.astype(rd))) / 2
        scale = eps * t_inv * (norm(t) * x_mean + norm(b))
        vs = norm(diff) / max(scale, tiny)
        vs_bound = 2 * c * (t.shape[0] + 2)
    verdict["vs_blasmp_eps"] = vs
    verdict["vs_blasmp_bound_eps"] = vs_bound
    verdict["passed"] = bool(verdict["passed"] and vs <= vs_bound)
    return verdict
