"""The cuBLASMp baseline of ``--compare`` (``cublasMpGemm``/``cublasMpTrsm`` via nvmath-python).

cuBLASMp is NVIDIA's distributed PBLAS for GPUs, on the same 2-D block-cyclic layout as
ScaLAPACK and blasmp_array. So, as the PBLAS adapter does on the host, this one hands cuBLASMp
blasmp_array's own operands: each rank's local matrix of the GPU backend, copied to a
Fortran-ordered CuPy array before the timing (cuBLASMp, like ScaLAPACK, wants column-major local
matrices), described by matrix descriptors made from the layout (``M, N, MB, NB, RSRC, CSRC``,
the local leading dimension) on a cuBLASMp grid of the :class:`~blasmp_array.ProcessGrid`'s shape
and row-major placement of ranks. The routines are called through nvmath-python's bindings
(``nvmath.bindings.cublasMp``): ``gemm`` and ``trsm``, the PBLAS-like API, with the workspace
sizes cuBLASMp asks for.

Communication and set-up (collective, outside the timing)
---------------------------------------------------------
cuBLASMp >= 0.8 communicates through NCCL. The adapter creates one NCCL communicator over the
grid's ranks (rank 0's ``ncclGetUniqueId`` broadcast with MPI, then ``ncclCommInitRank`` on every
rank) and a cuBLASMp grid on it; the device workspace comes from ``cublasMpMalloc`` (NCCL
symmetric memory, of the largest size any rank asks for, so that the allocation is the same on
every rank). Everything is released in ``close``, after the last call. NCCL refuses two ranks on
one GPU, so the baseline needs one GPU per rank; otherwise it is skipped with that reason.

Libraries
---------
cuBLASMp 0.8 and later call ``ncclPutSignal``/``ncclWaitSignal``, which NCCL has since 2.29. The
adapter loads ``libnccl.so.2`` as the dynamic linker finds it (``LD_LIBRARY_PATH`` first, as
cuBLASMp's own dependency on it resolves), else the one of the ``nvidia-nccl-cu13`` wheel
(``cuda.pathfinder``), and reports its version and path; an older NCCL is a reason to skip.

Timing
------
As for the other MPI baselines (:func:`.mpi_run.time_collective`): barrier, call, slowest
rank; each call ends with a synchronisation of cuBLASMp's stream. TRSM overwrites ``B`` with
``X``; ``B`` is restored before each call, untimed.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from functools import cache
from typing import Any

import numpy as np

from .mpi_run import MpiRun, shared_library_of

__all__ = [
    "MIN_NCCL",
    "unusable",
    "prepare",
    "nccl_version_text",
    "gpu_sharing",
    "gpu_library_reason",
]

#: the oldest NCCL that cuBLASMp >= 0.8 runs with (``ncclPutSignal`` appeared in 2.29)
MIN_NCCL = 22900

#: cudaDataType and cublasComputeType_t of each dtype
_DATA_TYPE = {"float32": 0, "float64": 1, "complex64": 4, "complex128": 5}
_COMPUTE_TYPE = {"float32": 68, "float64": 70, "complex64": 68, "complex128": 70}


def nccl_version_text(code: int) -> str:
    """NCCL's version code as ``major.minor.patch`` (``22902`` -> ``2.29.2``)."""
    major, rest = divmod(code, 10000 if code >= 10000 else 1000)  # 1000 before NCCL 2.9
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def gpu_sharing(places: list[tuple[str, int]]) -> str | None:
    """Why NCCL cannot run with ranks placed at ``places`` (host name, GPU), ``None`` if it can:
    NCCL refuses two ranks on one GPU."""
    seen: dict[tuple[str, int], int] = {}
    for rank, place in enumerate(places):
        if place in seen:
            return (
                f"ranks {seen[place]} and {rank} share GPU {place[1]} of {place[0]}; NCCL (which "
                "cuBLASMp communicates through) needs one GPU per rank"
            )
        seen[place] = rank
    return None


class _UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


class _Loaded:
    """NCCL and cuBLASMp loaded into this process."""

    def __init__(self, nccl: Any, nccl_path: str, nccl_version: int, cublasmp: Any) -> None:
        self.nccl, self.nccl_path, self.nccl_version = nccl, nccl_path, nccl_version
        self.cublasmp = cublasmp
        self.version = int(cublasmp.get_version())


def _open_nccl() -> Any:
    """``libnccl.so.2`` with the signatures of the functions the adapter calls."""
    try:
        nccl = ctypes.CDLL("libnccl.so.2", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        nccl = ctypes.CDLL(load_nvidia_dynamic_lib("nccl").abs_path, mode=ctypes.RTLD_GLOBAL)
    nccl.ncclGetErrorString.restype = ctypes.c_char_p
    nccl.ncclCommInitRank.argtypes = [
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.c_int,
        _UniqueId,
        ctypes.c_int,
    ]
    nccl.ncclCommDestroy.argtypes = [ctypes.c_void_p]
    return nccl


@cache
def _load() -> _Loaded | str:
    """Load NCCL and cuBLASMp once per process; the reason as a string when they cannot be."""
    for module in ("cupy", "nvmath"):
        if importlib.util.find_spec(module) is None:
            return f"not installed ({module})"
    try:
        nccl = _open_nccl()
    except Exception as exc:  # noqa: BLE001 - reported as the reason
        return f"NCCL not found ({type(exc).__name__}: {exc}); install nvidia-nccl-cu13 >= 2.29"
    code = ctypes.c_int(0)
    nccl.ncclGetVersion(ctypes.byref(code))
    path = shared_library_of(ctypes.cast(nccl.ncclGetVersion, ctypes.c_void_p).value) or "?"
    if code.value < MIN_NCCL:
        return (
            f"NCCL {nccl_version_text(code.value)} ({path}) is older than the "
            f"{nccl_version_text(MIN_NCCL)} cuBLASMp needs; put a newer libnccl.so.2 first on "
            "LD_LIBRARY_PATH"
        )
    try:
        from nvmath.bindings import cublasMp

        cublasMp.get_version()
    except Exception as exc:  # noqa: BLE001 - reported as the reason
        return f"cuBLASMp not loadable ({type(exc).__name__}: {exc}); install nvidia-cublasmp-cu13"
    return _Loaded(nccl, path, code.value, cublasMp)


def gpu_library_reason(case: Any, comm: Any, library: str, load: Any) -> str | None:
    """Why the GPU library ``library`` (loaded by ``load()``, which returns the reason as a
    string when it cannot be) cannot run ``case`` here, ``None`` when it can. With ``comm``,
    collective: also refuses ranks that share a GPU (NCCL's rule)."""
    if case.backend != "gpu" and os.environ.get("BLASMP_BACKEND") != "gpu":
        return f"operands on the host; {library} works on GPU memory (use --backend gpu)"
    loaded = load()
    why = loaded if isinstance(loaded, str) else None
    if comm is not None:
        import cupy
        from mpi4py import MPI

        places = comm.allgather((MPI.Get_processor_name(), cupy.cuda.Device().id))
        # sharing a GPU is named first: no library version can lift it
        why = gpu_sharing(places) or why
    return why


def unusable(case: Any, comm: Any = None) -> str | None:
    """Why cuBLASMp cannot run here (``None`` when it can). With ``comm``, collective: also
    refuses ranks that share a GPU."""
    return gpu_library_reason(case, comm, "cuBLASMp", _load)


def _check(status: int, nccl: Any, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} failed: {nccl.ncclGetErrorString(status).decode()}")


def _nccl_comm(nccl: Any, comm: Any) -> ctypes.c_void_p:
    """An NCCL communicator over the ranks of ``comm`` (collective)."""
    uid = _UniqueId()
    if comm.Get_rank() == 0:
        _check(nccl.ncclGetUniqueId(ctypes.byref(uid)), nccl, "ncclGetUniqueId")
    raw = comm.bcast(ctypes.string_at(ctypes.addressof(uid), ctypes.sizeof(uid)), root=0)
    ctypes.memmove(ctypes.addressof(uid), raw, ctypes.sizeof(uid))
    handle = ctypes.c_void_p()
    status = nccl.ncclCommInitRank(ctypes.byref(handle), comm.Get_size(), uid, comm.Get_rank())
    _check(status, nccl, "ncclCommInitRank")
    return handle


def prepare(p: Any, gathered: Any, comm: Any) -> MpiRun:
    """cuBLASMp's GEMM or TRSM on blasmp_array's operands of ``p`` (collective)."""
    import cupy as cp
    from nvmath.bindings import cublas

    import blasmp_array as bm

    loaded = _load()
    assert not isinstance(loaded, str)
    cbm, nccl = loaded.cublasmp, loaded.nccl
    grid = p.grid
    if grid.backend.name != "gpu":
        raise RuntimeError("operands on the host; cuBLASMp works on GPU memory")
    if grid.comm is not comm:
        raise RuntimeError("the baseline runs on the grid's communicator only")
    grid.backend.synchronize()  # the operands are complete before they are copied
    nccl_comm = _nccl_comm(nccl, comm)
    stream = cp.cuda.Stream(non_blocking=True)
    handle = cbm.create(stream.ptr)
    lib_grid = cbm.grid_create(grid.nprow, grid.npcol, cbm.GridLayout.ROW_MAJOR, nccl_comm.value)
    descriptors: list[int] = []
    workspace: list[int] = []

    def close() -> None:
        stream.synchronize()
        for ptr in workspace:
            cbm.free(lib_grid, ptr)
        for d in descriptors:
            cbm.matrix_descriptor_destroy(d)
        cbm.grid_destroy(lib_grid)
        cbm.destroy(handle)
        nccl.ncclCommDestroy(nccl_comm)

    try:
        run = _runs(p, cbm, cublas, lib_grid, handle, stream, descriptors, workspace, comm)
    except BaseException:
        close()
        raise
    call, out_layout, restore, routine = run
    stream.synchronize()

    def gather(local: Any) -> np.ndarray | None:
        arr = bm.BlockCyclicArray(cp.ascontiguousarray(local), out_layout, grid)
        return arr.to_numpy(root=0)

    (mb, nb) = p.inputs["A"].layout.block
    v = loaded.version
    note = (
        f"cublasMp{routine} (cuBLASMp {v // 1000}.{v % 1000 // 100}.{v % 100}) via "
        f"nvmath-python on blasmp_array's descriptors (block {mb}x{nb}, grid "
        f"{grid.nprow}x{grid.npcol}, Fortran-ordered copies of the local matrices); NCCL "
        f"{nccl_version_text(loaded.nccl_version)} ({loaded.nccl_path})"
    )
    return MpiRun(call=call, gather=gather, note=note, restore=restore, close=close)


def _runs(
    p: Any,
    cbm: Any,
    cublas: Any,
    lib_grid: int,
    handle: int,
    stream: Any,
    descriptors: list[int],
    workspace: list[int],
    comm: Any,
) -> tuple[Any, Any, Any, str]:
    """The call of ``p``'s operator, its result's layout, the restore before each call and the
    routine's name (collective)."""
    import cupy as cp
    from mpi4py import MPI

    case, grid = p.case, p.grid
    dtype = np.dtype(case.dtype)
    data_type, compute_type = _DATA_TYPE[case.dtype], _COMPUTE_TYPE[case.dtype]

    def described(layout: Any, local: Any) -> tuple[Any, int]:
        (m, n), (mb, nb), (rsrc, csrc) = layout.shape, layout.block, layout.src
        rows = cbm.numroc(m, mb, grid.myrow, rsrc, grid.nprow)
        cols = cbm.numroc(n, nb, grid.mycol, csrc, grid.npcol)
        if (rows, cols) != tuple(local.shape):
            raise RuntimeError(
                f"cuBLASMp's numroc gives a local {rows}x{cols} matrix where blasmp_array holds "
                f"{tuple(local.shape)}"
            )
        f = cp.asfortranarray(local)
        lld = max(1, f.shape[0])
        d = cbm.matrix_descriptor_create(m, n, mb, nb, rsrc, csrc, lld, data_type, lib_grid)
        descriptors.append(d)
        return f, d

    def allocate(buffer_size: Any, args: tuple[Any, ...]) -> tuple[int, int, Any]:
        try:
            sizes = buffer_size(*args)
        except cbm.cuBLASMpError as exc:  # e.g. blocks it does not support
            blocks = ", ".join(f"{k} {v.layout.block}" for k, v in p.inputs.items())
            raise RuntimeError(f"cuBLASMp refused the operands (blocks {blocks}): {exc}") from exc
        device = int(comm.allreduce(int(sizes[0]), op=MPI.MAX))
        d_work = cbm.malloc(lib_grid, device) if device else 0
        if d_work:
            workspace.append(d_work)
        host = np.empty(max(1, int(sizes[1])), np.uint8)
        return d_work, device, host

    alpha = np.ones(1, dtype)
    a_in, b_in = p.inputs["A"], p.inputs["B"]
    a, desc_a = described(a_in.layout, a_in.local)
    b0, desc_b = described(b_in.layout, b_in.local)
    trans = {"N": cublas.Operation.N, "T": cublas.Operation.T, "C": cublas.Operation.C}
    if case.op == "gemm":
        beta = np.zeros(1, dtype)
        out_layout = p.result.storage.layout
        c_local = cp.zeros(out_layout.local_shape(grid.myrow, grid.mycol), dtype)
        c, desc_c = described(out_layout, c_local)
        args = (
            (handle, trans[case.trans], cublas.Operation.N, case.m, case.n, case.k)
            + (alpha.ctypes.data, a.data.ptr, 1, 1, desc_a, b0.data.ptr, 1, 1, desc_b)
            + (beta.ctypes.data, c.data.ptr, 1, 1, desc_c, compute_type)
        )
        d_work, d_size, h_work = allocate(cbm.gemm_buffer_size, args)

        def call() -> Any:
            cbm.gemm(*args, d_work, d_size, h_work.ctypes.data, h_work.nbytes)
            stream.synchronize()
            return c

        return call, out_layout, lambda: None, "Gemm"
    work = b0.copy(order="F")
    side = cublas.SideMode.LEFT if case.side == "left" else cublas.SideMode.RIGHT
    uplo = cublas.FillMode.LOWER if case.lower else cublas.FillMode.UPPER
    trsm_args = (
        (handle, side, uplo, trans[case.trans], cublas.DiagType.NON_UNIT, case.m, case.n)
        + (alpha.ctypes.data, a.data.ptr, 1, 1, desc_a, work.data.ptr, 1, 1, desc_b)
        + (compute_type,)
    )
    d_work, d_size, h_work = allocate(cbm.trsm_buffer_size, trsm_args)

    def call_trsm() -> Any:
        cbm.trsm(*trsm_args, d_work, d_size, h_work.ctypes.data, h_work.nbytes)
        stream.synchronize()
        return work

    def restore() -> None:  # cublasMpTrsm overwrites B with X
        with stream:
            work[...] = b0
        stream.synchronize()

    return call_trsm, b_in.layout, restore, "Trsm"
