"""The cuSOLVERMp baseline of ``--compare`` (``cusolverMpPotrf``/``cusolverMpGetrf``/
``cusolverMpSyevd`` via nvmath-python): NVIDIA's distributed dense solver for GPUs, beside
blasmp_array's ``cholesky``, ``lu`` and ``eigh`` rows.

As :mod:`.cublasmp_adapter` does for GEMM and TRSM, this one hands cuSOLVERMp blasmp_array's own
operand: each rank's local matrix of the GPU backend, copied to a Fortran-ordered CuPy array
before the timing, described by a matrix descriptor made from the layout (``M, N, MB, NB``, the
local leading dimension) on a cuSOLVERMp grid of the :class:`~blasmp_array.ProcessGrid`'s shape
with its row-major placement of ranks, over one NCCL communicator (set up as for cuBLASMp, and
with the same rule: one GPU per rank). cuSOLVERMp needs the first block on process ``(0, 0)``
(``RSRC = CSRC = 0``) and square blocks; other layouts are refused with the reason.

All three overwrite ``A``, so each call starts from a copy restored outside the timing (as the
ScaLAPACK baseline does), and ends with a synchronisation of cuSOLVERMp's stream and a read of
``INFO`` (non-zero: :class:`numpy.linalg.LinAlgError`, reported as a failed row).
``cusolverMpSyevd`` (``compz = 'V'``, the lower triangle) returns the eigenvalues (replicated,
on the device) and the eigenvectors in ``A``'s layout; the row is judged by LAPACK's tester
ratios, as blasmp_array's ``eigh``.
``cusolverMpGetrf``'s pivots (``int64``, 1-based global rows) are distributed like the first row
of ``A`` (by columns, the same in every process row): process row 0 gives them to rank 0, as
SciPy's 0-based ``piv``.

Libraries: cuSOLVERMp 0.9.0 (the wheel ``nvidia-cusolvermp-cu13`` that depends on the
cuBLASMp 0.9 nvmath-python 1.0 accepts), cuBLASMp and NCCL >= 2.29 as for cuBLASMp
(``tools/fetch-cublasmp-wheels.sh`` brings all three).
"""

from __future__ import annotations

import ctypes
from functools import cache
from typing import Any

import numpy as np

from . import cublasmp_adapter as mp
from .mpi_run import MpiRun, gather_pivots, gather_result

__all__ = ["unusable", "prepare"]

_ROUTINE = {"cholesky": "Potrf", "lu": "Getrf", "eigh": "Syevd"}


@cache
def _load() -> tuple[Any, Any] | str:
    """``(NCCL loaded by the cuBLASMp adapter, nvmath's cusolverMp bindings)`` once per process,
    or the reason they cannot be loaded."""
    loaded = mp._load()
    if isinstance(loaded, str):
        return loaded.replace("cuBLASMp", "cuBLASMp (which cuSOLVERMp needs)")
    try:
        from nvmath.bindings import cusolverMp

        cusolverMp.numroc(1, 1, 0, 0, 1)  # loads libcusolverMp
    except Exception as exc:  # noqa: BLE001 - reported as the reason
        return (
            f"cuSOLVERMp not loadable ({type(exc).__name__}: {exc}); install "
            "nvidia-cusolvermp-cu13 (tools/fetch-cublasmp-wheels.sh)"
        )
    return loaded, cusolverMp


def unusable(case: Any, comm: Any = None) -> str | None:
    """Why cuSOLVERMp cannot run here (``None`` when it can). With ``comm``, collective: also
    refuses ranks that share a GPU."""
    return mp.gpu_library_reason(case, comm, "cuSOLVERMp", _load)


def _layout_refusal(layout: Any) -> str | None:
    if layout.block[0] != layout.block[1]:
        return f"cuSOLVERMp needs square blocks, not {layout.block}"
    if tuple(layout.src) != (0, 0):
        return f"cuSOLVERMp needs the first block on process (0, 0), not {tuple(layout.src)}"
    return None


def prepare(p: Any, gathered: Any, comm: Any) -> MpiRun:
    """cuSOLVERMp's Cholesky, LU or symmetric eigensolver on blasmp_array's ``A`` of ``p``
    (collective)."""
    import cupy as cp
    from nvmath.bindings import cublas

    loaded = _load()
    assert not isinstance(loaded, str)
    nccl_loaded, csm = loaded
    nccl = nccl_loaded.nccl
    case, grid = p.case, p.grid
    if grid.backend.name != "gpu":
        raise RuntimeError("operands on the host; cuSOLVERMp works on GPU memory")
    if grid.comm is not comm:
        raise RuntimeError("the baseline runs on the grid's communicator only")
    a_in = p.inputs["A"]
    layout = a_in.layout
    refusal = _layout_refusal(layout)
    if refusal is not None:
        raise ValueError(refusal)
    grid.backend.synchronize()  # the operand is complete before it is copied
    nccl_comm = mp._nccl_comm(nccl, comm)
    stream = cp.cuda.Stream(non_blocking=True)
    handle = csm.create(cp.cuda.Device().id, stream.ptr)
    lib_grid = csm.create_device_grid(
        handle, nccl_comm.value, grid.nprow, grid.npcol, csm.GridMapping.ROW_MAJOR
    )
    descriptors: list[int] = []

    def close() -> None:
        stream.synchronize()
        for d in descriptors:
            csm.destroy_matrix_desc(d)
        csm.destroy_grid(lib_grid)
        csm.destroy(handle)
        nccl.ncclCommDestroy(nccl_comm)

    try:
        made = _factorization(p, csm, cublas, handle, lib_grid, stream, descriptors)
        call, restore, pivots = made
    except BaseException:
        close()
        raise
    stream.synchronize()

    def gather(result: Any) -> Any:
        if case.op == "eigh":  # (w, Q): the replicated values, the vectors in A's layout
            w, q = result
            v = gather_result(cp.ascontiguousarray(q), layout, grid)
            return None if v is None else (cp.asnumpy(w), v)
        piv = None if pivots is None else (lambda: _gather_pivots(pivots, layout, grid))
        return gather_result(cp.ascontiguousarray(result), layout, grid, piv)

    (mb, nb) = layout.block
    note = (
        f"cusolverMp{_ROUTINE[case.op]} via nvmath-python on blasmp_array's descriptors (block "
        f"{mb}x{nb}, grid {grid.nprow}x{grid.npcol}, Fortran-ordered copies of the local "
        f"matrices); NCCL {mp.nccl_version_text(nccl_loaded.nccl_version)} "
        f"({nccl_loaded.nccl_path})"
    )
    return MpiRun(call=call, gather=gather, note=note, restore=restore, close=close)


def _factorization(
    p: Any, csm: Any, cublas: Any, handle: int, lib_grid: int, stream: Any, descriptors: list[int]
) -> tuple[Any, Any, Any]:
    """``(call, restore, pivots)`` of ``p``'s factorization or eigensolver (``pivots``: the
    device ``ipiv`` of LU, else None; ``call`` returns the factored ``A``, or ``(w, Q)`` for
    ``eigh``) (collective: the workspace is the largest any rank asks for)."""
    import cupy as cp
    from mpi4py import MPI

    case, grid = p.case, p.grid
    comm = grid.comm
    a_in = p.inputs["A"]
    layout = a_in.layout
    (n, _), (mb, nb) = layout.shape, layout.block
    data_type = mp._DATA_TYPE[case.dtype]
    a0 = cp.asfortranarray(a_in.local)
    rows = csm.numroc(n, mb, grid.myrow, 0, grid.nprow)
    cols = csm.numroc(n, nb, grid.mycol, 0, grid.npcol)
    if (rows, cols) != tuple(a0.shape):
        raise RuntimeError(
            f"cuSOLVERMp's numroc gives a local {rows}x{cols} matrix where blasmp_array holds "
            f"{tuple(a0.shape)}"
        )
    work = a0.copy(order="F")
    lld = max(1, work.shape[0])
    desc = csm.create_matrix_desc(lib_grid, data_type, n, n, mb, nb, 0, 0, lld)
    descriptors.append(desc)
    info = cp.zeros(1, np.int32)
    ipiv = cp.zeros(max(1, cols), np.int64) if case.op == "lu" else None
    q = w = None
    compz = ctypes.create_string_buffer(b"V")  # held by call() below: head has its address only
    head: tuple[Any, ...]
    if case.op == "eigh":
        # compz is a C string ('V': eigenvalues and eigenvectors); Q has A's layout
        q = cp.zeros_like(work, order="F")
        w = cp.zeros(n, np.float32 if case.dtype in ("float32", "complex64") else np.float64)
        desc_q = csm.create_matrix_desc(lib_grid, data_type, n, n, mb, nb, 0, 0, lld)
        descriptors.append(desc_q)
        uplo = cublas.FillMode.LOWER
        head = (handle, ctypes.addressof(compz), uplo, n, work.data.ptr, 1, 1, desc,
                w.data.ptr, q.data.ptr, 1, 1, desc_q)  # fmt: skip
        sizes = csm.syevd_buffer_size(*head, data_type)
        routine = csm.syevd
    elif case.op == "cholesky":
        uplo = cublas.FillMode.LOWER if case.lower else cublas.FillMode.UPPER
        head = (handle, uplo, n, work.data.ptr, 1, 1, desc)
        sizes = csm.potrf_buffer_size(*head, data_type)
        routine = csm.potrf
    else:
        assert ipiv is not None
        head = (handle, n, n, work.data.ptr, 1, 1, desc, ipiv.data.ptr)
        sizes = csm.getrf_buffer_size(*head, data_type)
        routine = csm.getrf
    d_size = int(comm.allreduce(int(sizes[0]), op=MPI.MAX))
    d_work = cp.empty(max(1, d_size), np.uint8)
    h_work = np.empty(max(1, int(sizes[1])), np.uint8)
    name = f"cusolverMp{_ROUTINE[case.op]}"

    def call() -> Any:
        assert compz.value == b"V"  # alive while the call may read it
        routine(*head, data_type, d_work.data.ptr, d_size, h_work.ctypes.data, h_work.nbytes,
                info.data.ptr)  # fmt: skip
        stream.synchronize()
        code = int(info.get()[0])
        # INFO is global output: every rank sees the same value and raises alike
        if code != 0:
            raise np.linalg.LinAlgError(f"{name} returned INFO = {code}")
        return work if q is None else (w, q)

    def restore() -> None:  # every routine overwrites A (with its factors, or workspace)
        with stream:
            work[...] = a0
        stream.synchronize()

    return call, restore, ipiv


def _gather_pivots(ipiv: Any, layout: Any, grid: Any) -> np.ndarray | None:
    """``cusolverMpGetrf``'s pivots as SciPy's 0-based ``piv`` on rank 0 (``None`` elsewhere;
    collective): local column ``l`` of a process holds the pivot of its global column, the
    same in every process row; process row 0 gives them."""
    cols = layout.local_cols(grid.mycol)
    mine = (cols, ipiv.get()[: len(cols)]) if grid.myrow == 0 else None
    return gather_pivots(mine, layout.shape[1], min(layout.shape), grid.comm, "cusolverMpGetrf")
