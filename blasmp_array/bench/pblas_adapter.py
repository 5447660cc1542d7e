"""The ScaLAPACK baseline of ``--compare``: PBLAS's ``p?gemm`` and ``p?trsm``, and ScaLAPACK's
``p?potrf`` (the ``cholesky`` row, the triangle of ``--uplo``), ``p?getrf`` (the ``lu`` row),
``p?geqrf`` followed by ``p?orgqr``/``p?ungqr`` (``qr`` and ``qr_tall``: ``Q`` and ``R``, as
``np.linalg.qr`` returns them; ``R`` is copied out of the factored ``A`` between the two calls),
``p?gels`` (``lstsq``, QR-based), ``p?syevd``/``p?heevd`` (``eigh``: divide and conquer, values
and vectors), ``p?syev``/``p?heev`` with ``JOBZ = 'N'`` (``eigvalsh``: ``p?syevd`` computes vectors
only) and ``p?gesvd`` (``svd``: ``U``, ``S`` and ``V^H``), through ``scalapack4py``.

blasmp_array's local storage already is ScaLAPACK's: the same block-cyclic descriptor (``M, N,
MB, NB, RSRC, CSRC``; :meth:`~blasmp_array.layout.BlockCyclicLayout.descriptor`) on a BLACS
grid of the same shape and the same row-major placement of ranks as the
:class:`~blasmp_array.ProcessGrid`. So PBLAS gets blasmp_array's own operands: each rank's local
matrix, copied to Fortran order (the one difference: blasmp_array stores local matrices
C-ordered) before the timing, with descriptors built by ScaLAPACK's ``DESCINIT`` from the layout
(and its ``NUMROC`` checked against the local shapes). The result is gathered through a
blasmp_array array on the same layout.

The factorizations overwrite ``A``: each call starts from a copy of the local matrix restored
before it, outside the timing (blasmp_array's ``cholesky`` and ``lu_factor`` rows time their
defaults instead, ``overwrite_a=False, check_finite=True``: a copy of ``A`` and a finite check
inside the timed call). ``p?getrf``'s ``IPIV`` (``LOCr(M) + MB`` Fortran ``INTEGER``, 1-based
global rows, the same in every process column) is gathered from process column 0 into SciPy's
0-based ``piv``. The factorizations and the spectral drivers need square blocks (``MB = NB``);
a non-zero ``INFO`` (global: the same on every rank) raises ``LinAlgError`` on every rank, which
the row reports as failed. The spectral drivers also overwrite ``A``; their workspaces are sized
by ScaLAPACK's own query (``LWORK = -1``) before the timing, and their eigenvalues or singular
values come back on every rank (ScaLAPACK replicates them), their vectors in the layout of
``A``.

The ScaLAPACK library
---------------------
``$SCALAPACK_LIB_PATH`` (scalapack4py's variable) when set, else the distribution's library
built for the MPI that mpi4py runs (``libscalapack-mpich.so*`` for MPICH and its ABI family,
``libscalapack-openmpi.so*`` for Open MPI) in the usual library folders.

A distribution's ScaLAPACK is linked against the distribution's MPI (Debian's
``libscalapack-mpich.so.2.2`` needs ``libmpich.so.12``, Debian's MPICH), while this project's
environment may run another build of it (the PyPI ``mpich`` wheel: ``libmpi.so.12``). Loaded as
is, BLACS would bind ``MPI_*`` to the distribution's library and initialise it as a second MPI
in the process. Before loading ScaLAPACK the adapter therefore re-opens the MPI library that
mpi4py loaded with ``RTLD_GLOBAL``, so that ScaLAPACK's ``MPI_*`` resolve to it: both are the
MPICH ABI (``libmpi.so.12`` and Debian's ``libmpich.so.12`` are the same ABI under two names,
MPICH's ABI compatibility initiative). After creating the BLACS grid it checks that no other MPI
library in the process was initialised, and refuses to measure if one was. The MPI-5 standard
ABI (``libmpi_abi.so``) and an Open MPI / MPICH mix are refused up front: they cannot work.
"""

from __future__ import annotations

import ctypes
import dataclasses
import glob
import importlib.util
import os
import re
from functools import cache
from typing import Any

import numpy as np

from .mpi_run import MpiRun, gather_pivots, gather_result, shared_library_of

__all__ = ["unusable", "prepare", "library_candidates", "mpi_family", "loaded_mpi_libraries"]

_LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
)
_MPI_LIB = re.compile(r"^lib(mpi|mpich)(_abi)?\.so(\.\d+)*$")
_PREFIX = {"float32": "ps", "float64": "pd", "complex64": "pc", "complex128": "pz"}
#: the ScaLAPACK routine of each operator this adapter measures
_ROUTINE = {
    "gemm": "gemm",
    "trsm": "trsm",
    "cholesky": "potrf",
    "lu": "getrf",
    "qr": "geqrf",
    "qr_tall": "geqrf",
    "lstsq": "gels",
    "eigh": "syevd",
    "eigvalsh": "syev",
    "svd": "gesvd",
}
#: the Hermitian names of the symmetric (orthogonal) routines, for the complex dtypes
_HERMITIAN = {"syevd": "heevd", "syev": "heev", "orgqr": "ungqr"}


def routine_name(op: str, dtype: str) -> str:
    """The ScaLAPACK routine measured for ``op`` in ``dtype``, e.g. ``'pzheevd'``."""
    name = _ROUTINE[op]
    if dtype.startswith("complex"):
        name = _HERMITIAN.get(name, name)
    return _PREFIX[dtype] + name


def mpi_family(library_version: str) -> str | None:
    """``'mpich'``, ``'openmpi'`` or ``None`` from ``MPI.Get_library_version()``."""
    text = library_version.lower()
    if "open mpi" in text or "openmpi" in text:
        return "openmpi"
    if any(name in text for name in ("mpich", "mvapich", "intel(r) mpi", "cray mpich")):
        return "mpich"
    return None


def library_candidates(family: str, env: dict[str, str] | None = None) -> list[str]:
    """ScaLAPACK libraries to try for an MPI of ``family``, best first."""
    env = dict(os.environ) if env is None else env
    if env.get("SCALAPACK_LIB_PATH"):
        return [env["SCALAPACK_LIB_PATH"]]
    found = []
    for d in _LIB_DIRS:
        found += sorted(glob.glob(os.path.join(d, f"libscalapack-{family}.so*")), key=len)
    return found


def loaded_mpi_libraries() -> list[str]:
    """Paths of the MPI libraries mapped in this process (``/proc/self/maps``), in map order."""
    paths: list[str] = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if _MPI_LIB.match(os.path.basename(path)) and path not in paths:
                    paths.append(path)
    except OSError:
        pass
    return paths


class _Loaded:
    """ScaLAPACK loaded into this process, with what it was loaded against."""

    def __init__(self, sl: Any, lib: Any, path: str, mpi_path: str) -> None:
        self.sl, self.lib, self.path, self.mpi_path = sl, lib, path, mpi_path


@cache
def _load() -> _Loaded | str:
    """Load ScaLAPACK once per process; the reason as a string when it cannot be."""
    if importlib.util.find_spec("scalapack4py") is None:
        return "scalapack4py not installed"
    from mpi4py import MPI

    family = mpi_family(MPI.Get_library_version())
    if family is None:
        return f"unknown MPI ({MPI.Get_library_version().splitlines()[0]}); no ScaLAPACK to match"
    mpis = loaded_mpi_libraries()
    if len(mpis) != 1:
        return f"cannot tell which MPI library mpi4py loaded (found {mpis or 'none'})"
    mpi_path = mpis[0]
    if "_abi" in os.path.basename(mpi_path):
        return (
            f"mpi4py runs the MPI-5 standard ABI ({mpi_path}); no ScaLAPACK build for it "
            "(distribution ScaLAPACKs use the MPICH or Open MPI ABI)"
        )
    candidates = library_candidates(family)
    if not candidates:
        return (
            f"no ScaLAPACK library for {family} found (install e.g. Debian's "
            f"libscalapack-{family}2.2, or set SCALAPACK_LIB_PATH)"
        )
    # ScaLAPACK's MPI_* must bind to mpi4py's MPI library, not to the one it was linked with
    ctypes.CDLL(mpi_path, mode=ctypes.RTLD_GLOBAL)
    try:
        lib = ctypes.CDLL(candidates[0], mode=ctypes.RTLD_GLOBAL)
        from scalapack4py import ScaLAPACK4py

        sl = ScaLAPACK4py(lib)
    except Exception as exc:  # noqa: BLE001 - reported as the reason
        return f"loading {candidates[0]} failed: {type(exc).__name__}: {exc}"
    return _Loaded(sl, lib, candidates[0], mpi_path)


def unusable(case: Any, comm: Any = None) -> str | None:
    """Why PBLAS cannot run here (``None`` when it can); ``comm`` is not needed."""
    if case.backend == "gpu" or os.environ.get("BLASMP_BACKEND") == "gpu":
        return "operands on the GPU; PBLAS works on host memory"
    if importlib.util.find_spec("scalapack4py") is None:
        return "not installed (scalapack4py)"
    loaded = _load()
    return loaded if isinstance(loaded, str) else None


def _second_mpi_initialised(own: str) -> str | None:
    """The path of an MPI library other than ``own`` that is initialised, if any."""
    for path in loaded_mpi_libraries():
        if os.path.realpath(path) == os.path.realpath(own):
            continue
        flag = ctypes.c_int(0)
        try:
            ctypes.CDLL(path).MPI_Initialized(ctypes.byref(flag))
        except (OSError, AttributeError):
            continue
        if flag.value:
            return path
    return None


def blas_under(lib: Any, symbol: str = "dgemm_") -> tuple[str, int | None]:
    """Which library ``symbol`` resolves to for ScaLAPACK (the global scope first, as the dynamic
    linker binds it), with OpenBLAS's configuration, kernel and thread count when it is
    OpenBLAS: ``(description, threads or None)``."""
    try:
        addr = ctypes.cast(getattr(ctypes.CDLL(None), symbol), ctypes.c_void_p).value
    except AttributeError:
        addr = ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value
    path = shared_library_of(addr)
    if path is None:
        return "unknown BLAS", None
    text, threads = path, None
    try:
        blas = ctypes.CDLL(path)
        blas.openblas_get_config.restype = ctypes.c_char_p
        blas.openblas_get_corename.restype = ctypes.c_char_p
        blas.openblas_get_num_threads.restype = ctypes.c_int
        threads = int(blas.openblas_get_num_threads())
        text = (
            f"{blas.openblas_get_config().decode()}, kernel {blas.openblas_get_corename().decode()}"
            f", {threads} thread(s) [{path}]"
        )
    except (OSError, AttributeError):
        pass
    return text, threads


def _desc(sl: Any, ctx: int, layout: Any, local: np.ndarray) -> Any:
    """ScaLAPACK's descriptor of ``layout`` (DESCINIT), checked against the local shape."""
    (m, n), (mb, nb), (rsrc, csrc) = layout.shape, layout.block, layout.src
    desc = sl.make_blacs_desc(ctx, m, n, mb, nb, rsrc, csrc, lld=max(1, local.shape[0]))
    if (desc.locrow, desc.loccol) != local.shape:
        raise RuntimeError(
            f"ScaLAPACK's NUMROC gives a local {desc.locrow}x{desc.loccol} matrix where "
            f"blasmp_array holds {local.shape}"
        )
    return desc


def _pblas(sl: Any, ctx: int, p: Any, a: np.ndarray, desc_a: Any, fn: Any) -> tuple[Any, Any, Any]:
    """``(call, restore, result layout)`` of ``p?gemm`` (``C = op(A) B``) or ``p?trsm``
    (``B := op(A)^-1 B`` or ``B op(A)^-1``) on the operands of ``p``."""
    case, grid = p.case, p.grid
    b_in = p.inputs["B"]
    b0 = np.asfortranarray(b_in.local)
    desc_b = _desc(sl, ctx, b_in.layout, b0)
    if case.op == "gemm":
        out_layout = p.result.storage.layout
        c = np.zeros(out_layout.local_shape(grid.myrow, grid.mycol), case.dtype, order="F")
        desc_c = _desc(sl, ctx, out_layout, c)
        m, n, k = case.m, case.n, case.k
        tr = case.trans

        def gemm() -> np.ndarray:
            fn(tr, "N", m, n, k, 1.0, a, 1, 1, desc_a, b0, 1, 1, desc_b, 0.0, c, 1, 1, desc_c)
            return c

        return gemm, lambda: None, out_layout  # beta = 0: C is written, never read
    work = b0.copy(order="F")
    side, uplo = case.side[0].upper(), "L" if case.lower else "U"

    def trsm() -> np.ndarray:
        fn(side, uplo, case.trans, "N", case.m, case.n, 1.0, a, 1, 1, desc_a, work, 1, 1, desc_b)
        return work

    def restore() -> None:  # p?trsm overwrites B with X
        np.copyto(work, b0)

    return trsm, restore, b_in.layout


def _factorization(p: Any, a0: np.ndarray, desc_a: Any, fn: Any) -> tuple[Any, Any, Any]:
    """``(call, restore, result layout)`` of ScaLAPACK's ``p?potrf`` (the triangle named by
    ``case.lower``, as blasmp_array's ``cholesky(A, lower=...)``) or ``p?getrf`` (as
    ``lu_factor(A)``) on ``p``'s ``A``; both factor ``A`` in place, so each call starts from a
    copy restored outside the timing. ``p?getrf``'s call returns the factors and ``IPIV``."""
    case, layout = p.case, p.inputs["A"].layout
    if layout.block[0] != layout.block[1]:
        raise ValueError(f"{fn.symbol.__name__} needs square blocks (MB = NB), not {layout.block}")
    work = a0.copy(order="F")
    info = ctypes.c_int(0)
    name = fn.symbol.__name__

    def restore() -> None:  # the factorizations overwrite A with their factors
        np.copyto(work, a0)

    if case.op == "cholesky":
        uplo = "L" if case.lower else "U"

        def potrf() -> np.ndarray:
            fn(uplo, case.n, work, 1, 1, desc_a, ctypes.byref(info))
            _check_info(info, name)
            return work

        return potrf, restore, layout
    # IPIV: LOCr(M_A) + MB_A 1-based global row indices, Fortran INTEGER (int32 here)
    ipiv = np.zeros(work.shape[0] + layout.block[0], np.int32)

    def getrf() -> tuple[np.ndarray, np.ndarray]:
        fn(case.n, case.n, work, 1, 1, desc_a, ipiv, ctypes.byref(info))
        _check_info(info, name)
        return work, ipiv

    return getrf, restore, layout


def _check_info(info: Any, routine: str) -> None:
    """Raise ``LinAlgError`` naming ``routine`` when its ``INFO`` is not 0. INFO is global
    output: every rank sees the same value and raises alike."""
    if info.value != 0:
        raise np.linalg.LinAlgError(f"{routine} returned INFO = {info.value}")


def _padded(size: Any) -> int:
    """A workspace length written by a ScaLAPACK query (a float in ``WORK(1)``), rounded up
    with a margin: ScaLAPACK's estimates are not always enough."""
    return max(1, int(np.ceil(float(np.real(size)) * 1.01)) + 64)


def _workspace(query: Any, dtype: Any) -> int:
    """The workspace length a ScaLAPACK routine's query (``LWORK = -1``) writes to ``WORK(1)``
    (``query(work)`` runs it with a one-element ``work`` of ``dtype``), padded."""
    q = np.zeros(1, dtype)
    query(q)
    return _padded(q[0])


def _qr(sl: Any, ctx: int, p: Any, a0: np.ndarray, desc_a: Any, fn: Any) -> tuple[Any, Any, Any]:
    """``(call, restore, result layout)`` of ``p?geqrf`` + ``p?orgqr``/``p?ungqr`` (``qr``,
    ``qr_tall``: the reduced ``Q`` and a copy of the factored ``A`` holding ``R``) or of
    ``p?gels`` (``lstsq``: ``B`` overwritten by the solution in its first ``n`` rows; the
    "layout" is then ``(B's layout, n)``). ``A`` (and ``B``) are overwritten, so each call
    starts from copies restored outside the timing."""
    case, layout = p.case, p.inputs["A"].layout
    if layout.block[0] != layout.block[1]:
        raise ValueError(f"{fn.symbol.__name__} needs square blocks (MB = NB), not {layout.block}")
    m, n = layout.shape
    if case.op != "lstsq" and m < n:
        raise ValueError("the p?orgqr peer forms the reduced Q of m >= n only")
    dt = np.dtype(case.dtype)
    work = a0.copy(order="F")
    info = ctypes.c_int(0)

    if case.op == "lstsq":
        b_in = p.inputs["B"]
        # p?gels needs B of max(m, n) rows (the solution of a wide system has n); block-cyclic
        # rows keep their local places when rows are added below, so B's local rows come first
        k = b_in.layout.shape[1]
        b_layout = dataclasses.replace(b_in.layout, shape=(max(m, n), k))
        rows_b = b_in.layout.local_shape(p.grid.myrow, p.grid.mycol)[0]
        b0 = np.zeros(b_layout.local_shape(p.grid.myrow, p.grid.mycol), dt, order="F")
        b0[:rows_b] = b_in.local
        bw = b0.copy(order="F")
        desc_b = _desc(sl, ctx, b_layout, bw)
        head = ("N", m, n, k, work, 1, 1, desc_a, bw, 1, 1, desc_b)

        def query_gels(q: np.ndarray) -> None:
            fn(*head, q, -1, ctypes.byref(info))
            _check_info(info, fn.symbol.__name__)

        lwork = _workspace(query_gels, dt)
        wk = np.zeros(lwork, dt)

        def gels() -> Any:
            fn(*head, wk, lwork, ctypes.byref(info))
            _check_info(info, fn.symbol.__name__)
            return bw

        def restore_ls() -> None:
            np.copyto(work, a0)
            np.copyto(bw, b0)

        return gels, restore_ls, (b_layout, n)
    orgqr = getattr(sl, _PREFIX[case.dtype] + ("ungqr" if dt.kind == "c" else "orgqr"))
    # TAU: LOCc(JA + min(M, N) - 1) entries; the local column count (plus a block) covers it
    tau = np.zeros(work.shape[1] + layout.block[1], dt)
    r_copy = np.zeros_like(work, order="F")

    def query_geqrf(q: np.ndarray) -> None:
        fn(m, n, work, 1, 1, desc_a, tau, q, -1, ctypes.byref(info))
        _check_info(info, fn.symbol.__name__)

    def query_orgqr(q: np.ndarray) -> None:
        orgqr(m, n, n, work, 1, 1, desc_a, tau, q, -1, ctypes.byref(info))
        _check_info(info, orgqr.symbol.__name__)

    lwork = max(_workspace(query_geqrf, dt), _workspace(query_orgqr, dt))
    wk = np.zeros(lwork, dt)

    def qr() -> Any:
        fn(m, n, work, 1, 1, desc_a, tau, wk, lwork, ctypes.byref(info))
        _check_info(info, fn.symbol.__name__)
        np.copyto(r_copy, work)  # R lives in the upper triangle, which p?orgqr overwrites
        orgqr(m, n, n, work, 1, 1, desc_a, tau, wk, lwork, ctypes.byref(info))
        _check_info(info, orgqr.symbol.__name__)
        return work, r_copy

    def restore() -> None:
        np.copyto(work, a0)

    return qr, restore, layout


def _gather_qr(op: str, result: Any, layout: Any, grid: Any) -> Any:
    """The result of :func:`_qr` on rank 0 as blasmp_array's rows return it (``None``
    elsewhere; collective): ``(Q, R)`` (reduced) or ``(x,)``."""
    if op == "lstsq":
        b_layout, n = layout
        b = gather_result(np.ascontiguousarray(result), b_layout, grid)
        return None if b is None else (b[:n],)
    q_local, r_local = result
    q = gather_result(np.ascontiguousarray(q_local), layout, grid)
    r = gather_result(np.ascontiguousarray(r_local), layout, grid)
    if q is None or r is None:
        return None
    n = layout.shape[1]
    return q, np.triu(r[:n, :n])


def _spectral(
    sl: Any, ctx: int, p: Any, a0: np.ndarray, desc_a: Any, fn: Any
) -> tuple[Any, Any, Any]:
    """``(call, restore, result layout)`` of ``p?syevd``/``p?heevd`` (``eigh``: ``w`` and ``Z``),
    ``p?syev``/``p?heev`` with ``JOBZ = 'N'`` (``eigvalsh``: ``w``) or ``p?gesvd`` (``svd``:
    ``U``, ``s`` and ``V^H``) of ``p``'s ``A`` (the lower triangle for the symmetric drivers).

    The call returns the replicated values and the local vectors: ``(w, Z)``, ``w`` or
    ``(U, s, VT)``. ``A`` is overwritten, so each call starts from a copy restored outside the
    timing; the workspaces come from the routine's own query, made here."""
    case, layout = p.case, p.inputs["A"].layout
    if layout.block[0] != layout.block[1]:
        raise ValueError(f"{fn.symbol.__name__} needs square blocks (MB = NB), not {layout.block}")
    m, n = layout.shape
    k = min(m, n)
    real = np.float32 if case.dtype in ("float32", "complex64") else np.float64
    cplx = case.dtype.startswith("complex")
    work = a0.copy(order="F")
    info = ctypes.c_int(0)
    name = fn.symbol.__name__

    def restore() -> None:
        np.copyto(work, a0)

    def like(shape: tuple[int, int]) -> tuple[np.ndarray, Any, Any]:
        """A zero Fortran-ordered local matrix of a ``shape`` global matrix in ``A``'s blocks
        and grid, its descriptor and its layout."""
        sub = dataclasses.replace(layout, shape=shape)
        local = np.zeros(sub.local_shape(p.grid.myrow, p.grid.mycol), case.dtype, order="F")
        return local, _desc(sl, ctx, sub, local), sub

    w = np.zeros(n if case.op != "svd" else k, real)
    if case.op in ("eigh", "eigvalsh"):
        jobz = "V" if case.op == "eigh" else "N"
        # JOBZ = 'N' does not reference Z: A's descriptor and a one-element array stand in
        z, desc_z, _ = (
            like((n, n)) if jobz == "V" else (np.zeros((1, 1), case.dtype, "F"), desc_a, None)
        )
        head: tuple[Any, ...] = (jobz, "L", n, work, 1, 1, desc_a, w, z, 1, 1, desc_z)

        def run(wk: Any, rwk: Any, iwk: Any, lengths: tuple[int, int, int]) -> None:
            """The driver with the workspaces its variant takes (``p?heevd``: all three,
            ``p?syevd``: WORK and IWORK, ``p?heev``: WORK and RWORK, ``p?syev``: WORK); lengths
            of -1 make it the workspace query."""
            lwork, lrwork, liwork = lengths
            spaces: tuple[Any, ...] = (wk, lwork)
            if cplx:
                spaces += (rwk, lrwork)
            if case.op == "eigh":
                spaces += (iwk, liwork)
            fn(*head, *spaces, ctypes.byref(info))
            _check_info(info, name)

        q_work, q_rwork, q_iwork = np.zeros(1, case.dtype), np.zeros(1, real), np.zeros(1, np.int32)
        run(q_work, q_rwork, q_iwork, (-1, -1, -1))
        lengths = (_padded(q_work[0]), _padded(q_rwork[0]), _padded(q_iwork[0]))
        wk = np.zeros(lengths[0], case.dtype)
        rwk = np.zeros(lengths[1], real)
        iwk = np.zeros(lengths[2], np.int32)

        def solve() -> Any:
            run(wk, rwk, iwk, lengths)
            return (w, z) if case.op == "eigh" else w

        return solve, restore, layout
    u, desc_u, u_layout = like((m, k))
    vt, desc_vt, vt_layout = like((k, n))
    rwk = np.zeros(1 + 4 * max(m, n), real)  # p?gesvd's RWORK (complex only): 1 + 4 max(M, N)
    head = ("V", "V", m, n, work, 1, 1, desc_a, w, u, 1, 1, desc_u, vt, 1, 1, desc_vt)

    def run_svd(wk: Any, lwork: int) -> None:
        """``p?gesvd`` (complex: with RWORK); ``lwork = -1`` makes it the workspace query."""
        fn(*head, wk, lwork, *((rwk,) if cplx else ()), ctypes.byref(info))
        _check_info(info, name)

    lwork = _workspace(lambda q: run_svd(q, -1), case.dtype)
    wk = np.zeros(lwork, case.dtype)

    def svd() -> Any:
        run_svd(wk, lwork)
        return u, w, vt

    return svd, restore, (u_layout, vt_layout)


def _gather_spectral(op: str, result: Any, layout: Any, grid: Any) -> Any:
    """The result of :func:`_spectral` on rank 0 as NumPy returns it (``None`` elsewhere;
    collective): ``(w, V)``, ``w`` or ``(U, s, Vh)``; ``layout`` is the vectors' layout (the
    pair of ``U``'s and ``V^H``'s for the SVD)."""
    if op == "eigvalsh":
        return result.copy() if grid.rank == 0 else None
    if op == "eigh":
        w, z = result
        v = gather_result(np.ascontiguousarray(z), layout, grid)
        return None if v is None else (w.copy(), v)
    u, s, vt = result
    u_layout, vt_layout = layout
    full_u = gather_result(np.ascontiguousarray(u), u_layout, grid)
    full_vt = gather_result(np.ascontiguousarray(vt), vt_layout, grid)
    return None if full_u is None else (full_u, s.copy(), full_vt)


def _gather_pivots(ipiv: np.ndarray, layout: Any, grid: Any) -> np.ndarray | None:
    """``p?getrf``'s distributed ``IPIV`` as SciPy's ``piv`` on rank 0 (``None`` elsewhere;
    collective): 0-based, row ``i`` interchanged with row ``piv[i]``.

    ``IPIV(l)`` of a process holds the pivot of its local row ``l``, the same in every process
    column; process column 0 gives it."""
    rows = layout.local_rows(grid.myrow)
    mine = (rows, ipiv[: len(rows)].copy()) if grid.mycol == 0 else None
    return gather_pivots(mine, layout.shape[0], min(layout.shape), grid.comm, "p?getrf")


def prepare(p: Any, gathered: Any, comm: Any) -> MpiRun:
    """PBLAS's GEMM or TRSM, or ScaLAPACK's Cholesky or LU, on blasmp_array's operands of ``p``
    (collective)."""
    import scalapack4py

    loaded = _load()
    assert not isinstance(loaded, str)
    sl, lib = loaded.sl, loaded.lib
    case, grid = p.case, p.grid
    if grid.backend.name != "cpu":
        raise RuntimeError("operands on the GPU; PBLAS works on host memory")
    if grid.comm is not comm:
        raise RuntimeError("the baseline runs on the grid's communicator only")
    # BLACS_GRIDINIT's system context is the communicator's Fortran handle (as BLACS_GET gives
    # for MPI_COMM_WORLD); 'R': rank r at (r // npcol, r % npcol), as the ProcessGrid
    ctx = sl.make_blacs_context(grid.comm.py2f(), grid.nprow, grid.npcol)
    where = sl.blacs_gridinfo(ctx)
    second = _second_mpi_initialised(loaded.mpi_path)

    def close() -> None:
        sl.close_blacs_context(ctx)

    if where != (grid.nprow, grid.npcol, grid.myrow, grid.mycol) or second:
        close()
        if second:
            raise RuntimeError(f"BLACS initialised a second MPI library ({second})")
        raise RuntimeError(f"BLACS placed rank {grid.rank} at {where}, the grid at {grid.coords}")

    a_in = p.inputs["A"]
    a0 = np.asfortranarray(a_in.local)
    try:
        desc_a = _desc(sl, ctx, a_in.layout, a0)
        fn = getattr(sl, routine_name(case.op, case.dtype))
        if case.op in ("gemm", "trsm"):
            call, restore, out_layout = _pblas(sl, ctx, p, a0, desc_a, fn)
        elif case.op in ("eigh", "eigvalsh", "svd"):
            call, restore, out_layout = _spectral(sl, ctx, p, a0, desc_a, fn)
        elif case.op in ("qr", "qr_tall", "lstsq"):
            call, restore, out_layout = _qr(sl, ctx, p, a0, desc_a, fn)
        else:
            call, restore, out_layout = _factorization(p, a0, desc_a, fn)
    except BaseException:
        close()
        raise
    what = fn.symbol.__name__
    if case.op in ("qr", "qr_tall"):  # Q is formed, as np.linalg.qr returns it
        what += " + " + _PREFIX[case.dtype] + ("ungqr_" if case.is_complex else "orgqr_")

    def gather(result: Any) -> Any:
        if case.op in ("eigh", "eigvalsh", "svd"):
            return _gather_spectral(case.op, result, out_layout, grid)
        if case.op in ("qr", "qr_tall", "lstsq"):
            return _gather_qr(case.op, result, out_layout, grid)
        local, ipiv = result if isinstance(result, tuple) else (result, None)
        piv = None if ipiv is None else (lambda: _gather_pivots(ipiv, out_layout, grid))
        return gather_result(np.ascontiguousarray(local), out_layout, grid, piv)

    (mb, nb), version = a_in.layout.block, getattr(scalapack4py, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version

        version = dist_version("scalapack4py")
    blas, threads = blas_under(lib)
    note = (
        f"{what} of {os.path.basename(loaded.path)} via scalapack4py {version} on blasmp_array's "
        f"descriptors (block {mb}x{nb}, BLACS grid {grid.nprow}x{grid.npcol}); "
        f"BLAS: {blas}; MPI: {os.path.basename(loaded.mpi_path)} (mpi4py's)"
    )
    return MpiRun(
        call=call, gather=gather, note=note, threads=threads, restore=restore, close=close
    )
