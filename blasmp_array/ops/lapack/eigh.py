"""The Hermitian (real symmetric) eigenproblem: SciPy's :func:`eigh` and :func:`eigvalsh`, and
``np.linalg.eigh`` / ``np.linalg.eigvalsh``.

Layering: the public drivers (checks, the working copy, the choice of the route) -> one of two
routes -> the distributed operators and the backend's LAPACK:

* one process (a ``1 x 1`` grid): one LAPACK ``xsyevd``/``xheevd`` (``xsyevr``/``xheevr`` for a
  subset) on the local matrix through :meth:`Backend.eigh_local` (cuSOLVER ``syevd`` through
  CuPy on the GPU, a subset sliced from the full result); eigenvalues of a real matrix of order
  ``n >= DEVICE_BAND_N`` (with eigenvectors by ``method='two-stage'``) on a backend that
  solves the band on the device (the GPU: :meth:`Backend.band_eig_width`) by the two-stage
  method below instead, stage 1 on the local matrix
  (:func:`ops.lapack._band_reduction.reduce_local_array`, keeping its reflectors for the
  eigenvectors) and stages 2-3 on the device: the chase and bisection kernels
  (``backends/_gpu_band_eig.py``), or with eigenvectors the chase keeping its reflectors,
  cuSOLVER's tridiagonal divide and conquer and the chase's back-transformation as batched
  GEMMs (``backends/_gpu_band_eigh.py``), then stage 1's as GEMMs
  (:func:`ops.lapack._band_reduction.back_transform_local`);
* a grid of several processes: the two-stage method (SLATE ``heev``, LAPACK ``xsyevd_2stage``):

  1. *stage 1* (:mod:`ops.lapack._band_reduction`): the distributed reduction to Hermitian band form
     of bandwidth ``nb`` (the working matrix's block), ``A = Q B Q^H``, by panel QRs and
     two-sided block-reflector updates (SYMM, GEMM, HER2K on the grid); the band
     (``n (nb + 1)`` numbers) gathered to every process by one ``allgather``;
  2. *stages 2 and 3* on every process, on the host: LAPACK's banded solver
     ``xsbevd``/``xhbevd`` (band -> tridiagonal by bulge chasing, divide and conquer;
     ``xsbevx``/``xhbevx`` for a subset) on the identical band: every process computes the
     same eigenvalues and the same eigenvectors ``Z`` of ``B`` and keeps its block-cyclic part
     of ``Z`` (no communication);
  3. *back-transform*: ``V = Q Z``, the stage-1 block reflectors applied from the last to the
     first as distributed GEMMs.

  ``eigvalsh`` (``eigvals_only``) keeps no reflectors and computes no ``Z``;
* a grid of several processes, gathered (``method='gathered'``, and ``'auto'`` with
  eigenvectors, and without them up to ``GATHER_N`` or, on the GPU, at every order): the matrix
  gathered on process 0 (``creation.gather_to_backend``: on a device, row panels put device to
  device by the exchange, nothing through the host), the one-process call there, the
  eigenvectors scattered from it the same way. Measured faster than the two-stage route on
  the CPU wherever tried, since the two-stage route's band solve is replicated
  (``docs/eigh.md``).

The working copy is ``a``'s chosen triangle, stored in square blocks with source process
``(0, 0)``: the lower triangle of ``a`` itself ('L'), or of ``a^H`` (a transposing copy) for
'U'; the other triangle is never read. Eigenvalues come back as a distributed vector (blocked
like the working matrix's rows), eigenvectors as a matrix on ``a``'s grid in the working
matrix's square blocks.
"""

from __future__ import annotations

import time
from numbers import Integral, Real
from typing import Any

import numpy as np

from ..._dispatch import implements
from ...array import BlockCyclicArray, blas_dtype
from ...creation import gather_to_backend, scatter_from_backend, zeros
from ...layout import BlockCyclicLayout
from ..engine import _checks as ck
from ..engine._replicated import distribute
from ..engine._vectors import from_host
from ..engine.redistribute import redistribute
from . import _band_reduction as br

__all__ = ["eigh", "eigvalsh", "LAST_PROFILE"]

#: seconds per stage of the last call on this process ("stage 1", "band gather",
#: "band solve", "back-transform"; "local" for the one-process route)
LAST_PROFILE: dict[str, float] = {}

#: a 1x1 grid calls the backend's LAPACK once; tests turn it off to run the two-stage route
#: on one process
_LOCAL_ON_ONE_PROCESS = True

_METHODS = ("auto", "two-stage", "gathered")

#: on a grid of several processes, ``method='auto'`` computes eigenvalues alone on the gathered
#: matrix up to this order, by the two-stage method above it (at every order where
#: ``Backend.eigvalsh_always_gathered``: the GPU); eigenvectors always on the gathered matrix
#: (``GATHER_N_VECTORS`` None: no limit) while the two-stage method solves its band redundantly
#: on every process (docs/eigh.md: the measurements behind both)
GATHER_N = 4096
GATHER_N_VECTORS: int | None = None

#: on one process whose backend solves the band on the device (the GPU's eigenvalues),
#: ``method='auto'`` runs the two-stage method from this order up, one cuSOLVER ``syevd``
#: below it; None: never (``method='two-stage'`` asks for it). The measured crossover with
#: ``syevd`` on one H100 (docs/eigh.md: even at 8192, 2.2x faster at 16384, 2.5x slower at 4096)
DEVICE_BAND_N: int | None = 8192

#: the same for eigenvalues with eigenvectors (the chase's reflectors kept, cuSOLVER's
#: tridiagonal divide and conquer and the chase's back-transformation on the device; only where
#: the backend's cuSOLVER has that divide and conquer); None: only ``method='two-stage'``. The
#: cuSOLVER that has it (12.4) has a ``syevd`` faster than the route: 2.08 s against 2.74 s at
#: n = 16384 on one H100 (docs/eigh.md), so ``'auto'`` keeps ``syevd``
DEVICE_BAND_N_VECTORS: int | None = None

_DRIVERS = ("ev", "evd", "evr", "evx", "gv", "gvd", "gvx")


# -- public API -------------------------------------------------------------------------------
def eigh(
    a: BlockCyclicArray,
    b: Any = None,
    *,
    lower: bool = True,
    eigvals_only: bool = False,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    type: int = 1,
    check_finite: bool = True,
    subset_by_index: Any = None,
    subset_by_value: Any = None,
    driver: str | None = None,
    method: str = "auto",
) -> Any:
    """Eigenvalues and eigenvectors of the Hermitian (real symmetric) ``a`` (SciPy's ``eigh``
    for the standard problem). Collective.

    Parameters
    ----------
    a : BlockCyclicArray
        ``n x n``; only the ``lower`` (or upper) triangle is read. Any grid and blocks (a
        non-square block is redistributed to ``(mb, mb)`` with a warning), window views and
        lazy views (copied). Integer and bool input is computed in float64.
    b : None
        Only None: the generalized problem ``a v = w b v`` is not implemented.
    lower : bool
        Read the lower triangle (else the upper).
    eigvals_only : bool
        Return the eigenvalues only (as :func:`eigvalsh`).
    overwrite_a, overwrite_b : bool
        Accepted; ``a`` is never written (the algorithm works on a copy).
    type : int
        Only 1 (the standard problem; 2 and 3 are generalized problems).
    check_finite : bool
        ``ValueError`` on every rank if the triangle read holds NaN or inf.
    subset_by_index : (int, int), optional
        The eigenpairs ``lo..hi`` (inclusive, ascending order, ``0 <= lo <= hi <= n - 1``).
    subset_by_value : (float, float), optional
        The eigenpairs with eigenvalues in the half-open interval ``(vl, vu]``.
    driver : {None, 'evd'}
        The algorithm is the library's (see :mod:`blasmp_array.ops.lapack.eigh`); SciPy's other
        drivers are refused.
    method : {'auto', 'two-stage', 'gathered'}
        On a grid of several processes: the distributed two-stage method, or the matrix
        gathered to every process and one LAPACK (cuSOLVER) ``evd`` there; 'auto' gathers for
        eigenvectors, and for eigenvalues alone up to ``n <= GATHER_N`` (4096; at every order on
        the GPU) (measured, ``docs/eigh.md``). On one process 'two-stage' runs the two-stage
        method there too, and 'auto' does for eigenvalues of a real matrix from
        ``n >= DEVICE_BAND_N`` where the backend solves the band on the device (the GPU);
        otherwise one LAPACK call.

    Returns
    -------
    w : BlockCyclicArray
        The ``k`` eigenvalues in ascending order, a real 1-D distributed vector.
    v : BlockCyclicArray
        ``n x k``, the normalised eigenvectors in its columns (not for ``eigvals_only``).

    Notes
    -----
    One process: LAPACK's ``4/3 n^3`` flops for the tridiagonal reduction, plus about
    ``2 n^3`` for the eigenvectors. Several processes, by default: the same on the matrix
    gathered to every process (eigenvalues alone of ``n > GATHER_N`` on the CPU: the two-stage
    method).
    The two-stage method: ``4/3 n^3`` flops in the distributed band reduction and ``2 n^2 k``
    in the back-transform; its band solve (``O(n^2 nb)``, plus ``O(n^3)`` for the band's
    eigenvectors) runs redundantly on every process, on the host. See ``docs/eigh.md``.
    """
    vectors = not ck.check_flag(eigvals_only, "eigvals_only")
    return _eigh_entry(
        a, b, lower, vectors, overwrite_a, overwrite_b, type, check_finite,
        subset_by_index, subset_by_value, driver, method, "eigh",
    )  # fmt: skip


def eigvalsh(
    a: BlockCyclicArray,
    b: Any = None,
    *,
    lower: bool = True,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    type: int = 1,
    check_finite: bool = True,
    subset_by_index: Any = None,
    subset_by_value: Any = None,
    driver: str | None = None,
    method: str = "auto",
) -> BlockCyclicArray:
    """Eigenvalues of the Hermitian (real symmetric) ``a`` in ascending order, a real 1-D
    distributed vector (SciPy's ``eigvalsh``; the arguments are :func:`eigh`'s).
    Collective."""
    return _eigh_entry(  # type: ignore[no-any-return]
        a, b, lower, False, overwrite_a, overwrite_b, type, check_finite,
        subset_by_index, subset_by_value, driver, method, "eigvalsh",
    )  # fmt: skip


@implements(np.linalg.eigh)
def _np_eigh(a: Any, UPLO: str = "L") -> Any:
    """``np.linalg.eigh(A, UPLO)``: NumPy's ``EighResult(eigenvalues, eigenvectors)``."""
    uplo = _check_uplo_np(UPLO, "np.linalg.eigh")
    op = "np.linalg.eigh"
    w, v = _solve(ck.check_square_matrix(a, op), uplo == "L", True, None, None, True, op)
    try:
        from numpy.linalg._linalg import EighResult

        return EighResult(w, v)  # type: ignore[arg-type]
    except ImportError:  # NumPy < 2
        return w, v


@implements(np.linalg.eigvalsh)
def _np_eigvalsh(a: Any, UPLO: str = "L") -> BlockCyclicArray:
    """``np.linalg.eigvalsh(A, UPLO)``: the eigenvalues, ascending, as a distributed vector."""
    uplo = _check_uplo_np(UPLO, "np.linalg.eigvalsh")
    a = ck.check_square_matrix(a, "np.linalg.eigvalsh")
    return _solve(a, uplo == "L", False, None, None, True, "np.linalg.eigvalsh")[0]  # type: ignore[no-any-return]


# -- checks -----------------------------------------------------------------------------------
def _eigh_entry(
    a: Any,
    b: Any,
    lower: Any,
    vectors: bool,
    overwrite_a: Any,
    overwrite_b: Any,
    type_: Any,
    check_finite: Any,
    subset_by_index: Any,
    subset_by_value: Any,
    driver: Any,
    method: Any,
    op: str,
) -> Any:
    a = ck.check_square_matrix(a, op)
    if b is not None:
        raise NotImplementedError(
            f"{op}: b is given: the generalized eigenproblem a v = w b v is not implemented; "
            "call it with b=None (the standard problem), or reduce it first (with "
            "L = cholesky(b, lower=True): eigh(L^-1 a L^-H), v = L^-H y)"
        )
    if type_ != 1:
        raise NotImplementedError(
            f"{op}: type={type_!r} selects a generalized problem, which is not implemented; "
            "use type=1"
        )
    up = ck.check_uplo(lower, op)
    ck.check_flag(overwrite_a, "overwrite_a")
    ck.check_flag(overwrite_b, "overwrite_b")
    finite = ck.check_flag(check_finite, "check_finite")
    _check_driver(driver, op)
    if method not in _METHODS:
        raise ValueError(
            f"{op}: method must be one of {', '.join(map(repr, _METHODS))}, got {method!r}"
        )
    n = a.shape[0]
    idx, val = _check_subsets(subset_by_index, subset_by_value, n, op)
    w, v = _solve(a, up == "L", vectors, idx, val, finite, op, method)
    return (w, v) if vectors else w


def _check_uplo_np(uplo: Any, op: str) -> str:
    if not isinstance(uplo, str) or uplo.upper() not in ("L", "U"):
        raise ValueError(f"{op}: UPLO argument must be 'L' or 'U', got {uplo!r}")
    return uplo.upper()


def _check_driver(driver: Any, op: str) -> None:
    if driver is None or driver == "evd":
        return
    if driver in _DRIVERS:
        raise NotImplementedError(
            f"{op}: driver={driver!r} is not supported: blasmp_array computes every case with "
            "its own algorithm (the two-stage band reduction on a grid, one LAPACK evd on one "
            "process; subsets included); use driver=None or 'evd'"
        )
    raise ValueError(
        f"{op}: driver must be None or one of {', '.join(map(repr, _DRIVERS))}, got {driver!r}"
    )


def _check_subsets(
    by_index: Any, by_value: Any, n: int, op: str
) -> tuple[tuple[int, int] | None, tuple[float, float] | None]:
    if by_index is not None and by_value is not None:
        raise ValueError(f"{op}: either index or value subset can be requested, not both")
    idx = val = None
    if by_index is not None:
        pair = tuple(by_index) if isinstance(by_index, tuple | list | np.ndarray) else ()
        if len(pair) != 2 or not all(
            isinstance(x, Integral) and not isinstance(x, bool) for x in pair
        ):
            raise ValueError(
                f"{op}: subset_by_index must be two integers (lo, hi), got {by_index!r}"
            )
        lo, hi = int(pair[0]), int(pair[1])
        if not 0 <= lo <= hi <= n - 1:
            raise ValueError(
                f"{op}: requested eigenvalue indices {by_index!r} are not valid: the valid range "
                f"is [0, {n - 1}] with lo <= hi"
            )
        idx = (lo, hi)
    if by_value is not None:
        pair = tuple(by_value) if isinstance(by_value, tuple | list | np.ndarray) else ()
        if len(pair) != 2 or not all(isinstance(x, Real) and not isinstance(x, bool) for x in pair):
            raise ValueError(
                f"{op}: subset_by_value must be two numbers (vl, vu), got {by_value!r}"
            )
        vl, vu = float(pair[0]), float(pair[1])
        if not vl < vu or np.isnan(vl) or np.isnan(vu):
            raise ValueError(f"{op}: subset_by_value {by_value!r} needs vl < vu")
        val = (vl, vu)
    return idx, val


# -- the routes -------------------------------------------------------------------------------
def _working(a: BlockCyclicArray, op: str) -> BlockCyclicArray:
    """``a`` stored, in a BLAS dtype, square blocks and source ``(0, 0)`` (views copied; the
    result may be ``a`` itself, so it is only read)."""
    x = a.copy() if a.is_view else a
    dt = blas_dtype(x.dtype)
    if x.dtype != dt:
        x = x.astype(dt)
    mb = int(x.block[0])
    if int(x.block[1]) != mb:
        x = ck.move(x, x.grid, (mb, mb), "a", op, f"a has non-square blocks {x.block}")
    if x.layout.src != (0, 0):
        x = redistribute(x)
    return x


def _solve(
    a: BlockCyclicArray,
    lower: bool,
    vectors: bool,
    idx: tuple[int, int] | None,
    val: tuple[float, float] | None,
    finite: bool,
    op: str,
    method: str = "auto",
) -> tuple[BlockCyclicArray, BlockCyclicArray | None]:
    x = _working(a, op)
    n = x.shape[0]
    nb = int(x.block[0])
    grid = x.grid
    real = np.dtype(x.dtype).type(0).real.dtype
    if finite:
        ck.check_finite(x, None, op, uplo="L" if lower else "U")
    LAST_PROFILE.clear()
    if n == 0:
        w0 = from_host(np.zeros(0, real), nb, grid)
        return w0, (zeros((0, 0), x.dtype, block=(nb, nb), grid=grid) if vectors else None)
    if grid.size == 1 and _LOCAL_ON_ONE_PROCESS:
        by_default = method == "auto" and _band_on_device(x.backend, x.dtype, n, vectors)
        if method == "two-stage" or by_default:
            return _two_stage(x, x is a, lower, vectors, idx, val)
        return _local(x, x._data, lower, vectors, idx, val, "local")
    limit = GATHER_N_VECTORS if vectors else GATHER_N
    always = not vectors and x.backend.eigvalsh_always_gathered
    gather = always or limit is None or n <= limit
    if method == "gathered" or (method == "auto" and gather):
        return _gathered(x, lower, vectors, idx, val)
    return _two_stage(x, x is a, lower, vectors, idx, val)


def _gathered(
    x: BlockCyclicArray,
    lower: bool,
    vectors: bool,
    idx: tuple[int, int] | None,
    val: tuple[float, float] | None,
) -> tuple[BlockCyclicArray, BlockCyclicArray | None]:
    """The matrix gathered on process 0 (on its device, where it has one), one LAPACK
    (cuSOLVER) call there with the threads of the node's waiting processes
    (:meth:`Backend.run_on_root`), the eigenvectors scattered from it."""
    nb = int(x.block[0])
    grid, be = x.grid, x.backend
    real = np.dtype(x.dtype).type(0).real.dtype
    t0 = time.perf_counter()
    full = gather_to_backend(x, root=0)
    t1 = time.perf_counter()

    def solve() -> tuple[np.ndarray, Any]:
        assert full is not None  # process 0 holds the gathered matrix
        if _band_on_device(be, full.dtype, full.shape[0], vectors):
            return _local_two_stage(be, full, lower, vectors, idx, val)
        wl, vl = be.eigh_local(full, lower, vectors, idx, val)
        return be.asnumpy(wl), vl

    found = be.run_on_root(solve)
    t2 = time.perf_counter()
    w_host = np.asarray(be.bcast(None if found is None else found[0], root=0), real)
    wv = from_host(w_host, nb, grid, real)
    out = None
    if vectors:
        v = None if found is None else found[1]
        n = x.shape[0]
        out = scatter_from_backend(v, (n, w_host.shape[0]), (nb, nb), grid, x.dtype)
    be.synchronize()
    LAST_PROFILE.update(
        {"gather": t1 - t0, "local solve": t2 - t1, "scatter": time.perf_counter() - t2}
    )
    return wv, out


def _local(
    x: BlockCyclicArray,
    local: Any,
    lower: bool,
    vectors: bool,
    idx: tuple[int, int] | None,
    val: tuple[float, float] | None,
    stage: str,
) -> tuple[BlockCyclicArray, BlockCyclicArray | None]:
    """One LAPACK (cuSOLVER) call on ``local``, the whole matrix ``x`` held by this process (the
    same on every process); each keeps its part of the result."""
    n, nb = x.shape[0], int(x.block[0])
    grid, be = x.grid, x.backend
    real = np.dtype(x.dtype).type(0).real.dtype
    t0 = time.perf_counter()
    be.synchronize()
    wl, vl = be.eigh_local(local, lower, vectors, idx, val)
    wv = from_host(be.asnumpy(wl), nb, grid, real)
    out = None
    if vectors:
        out = distribute(vl, BlockCyclicLayout((n, int(vl.shape[1])), (nb, nb), grid.shape), grid)
    be.synchronize()
    LAST_PROFILE[stage] = time.perf_counter() - t0
    return wv, out


def _band_on_device(be: Any, dtype: Any, n: int, vectors: bool) -> bool:
    """Whether one process's eigenvalues (with ``vectors``, and eigenvectors) of order ``n``
    come from the two-stage method with the band solved on the device (from
    :data:`DEVICE_BAND_N` or :data:`DEVICE_BAND_N_VECTORS`, where the backend can)."""
    limit = DEVICE_BAND_N_VECTORS if vectors else DEVICE_BAND_N
    by_size = limit is not None and n >= limit
    return by_size and be.band_eig_width(dtype, vectors) is not None


def _local_two_stage(
    be: Any,
    full: Any,
    lower: bool,
    vectors: bool,
    idx: tuple[int, int] | None,
    val: tuple[float, float] | None,
) -> tuple[np.ndarray, Any]:
    """The eigenvalues (a host array) and, with ``vectors``, eigenvectors (a C-ordered local
    ``n x k`` array) of the real symmetric matrix ``full`` (its ``lower`` triangle; a backend
    array, overwritten) by the one-process two-stage method on this process's device, without
    communication (one process, or the gathered route's root): stage 1 in place (keeping its
    reflectors for the eigenvectors), its band's diagonals, the band solve on the device, then
    stage 1's back-transformation."""
    width = be.band_eig_width(full.dtype, vectors)
    a = be.xp.ascontiguousarray(full if lower else full.T)
    t0 = time.perf_counter()
    steps = br.reduce_local_array(be, a, width, keep=vectors)
    t1 = time.perf_counter()
    band = br.local_band(be, a, width)
    del a
    t2 = time.perf_counter()
    w, z = be.eig_banded_local(band, vectors, idx, val)
    t3 = time.perf_counter()
    LAST_PROFILE.update({"stage 1": t1 - t0, "band gather": t2 - t1, "band solve": t3 - t2})
    LAST_PROFILE.update({f"  {k}": s for k, s in be.band_solve_times().items()})
    if not vectors:
        return np.asarray(be.asnumpy(w)), None
    br.back_transform_local(be, steps, z)
    out = be.xp.empty(z.shape, z.dtype)
    be.launch(be.compute, be.copy_local, out, z)
    be.synchronize()
    LAST_PROFILE["back-transform"] = time.perf_counter() - t3
    return np.asarray(w), out


def _two_stage(
    x: BlockCyclicArray,
    shared: bool,
    lower: bool,
    vectors: bool,
    idx: tuple[int, int] | None,
    val: tuple[float, float] | None,
) -> tuple[BlockCyclicArray, BlockCyclicArray | None]:
    """The two-stage method on the grid (module docstring), or on the one process of a
    ``1 x 1`` grid whose backend solves the band on its device (:func:`_local_two_stage`);
    ``shared``: ``x`` is the caller's array (copied before it is overwritten)."""
    grid, be = x.grid, x.backend
    width = be.band_eig_width(x.dtype, vectors)
    local = grid.size == 1 and width is not None
    if not local and width is not None and int(x.block[0]) > width:  # the device chase's band
        x, shared = redistribute(x, block=width), False
    n, nb = x.shape[0], int(x.block[0])
    real = np.dtype(x.dtype).type(0).real.dtype
    if local:
        full = x._data.copy() if shared and lower else x._data
        evals, z = _local_two_stage(be, full, lower, vectors, idx, val)
    else:
        # the Hermitian matrix in the lower triangle of a working copy
        w = x.H.copy() if not lower else (x.copy() if shared else x)
        red = br.reduce_to_band(w, keep=vectors)
        LAST_PROFILE.update(red.times)
        t0 = time.perf_counter()
        evals, z = be.eig_banded(red.band, vectors, idx, val)
        t1 = time.perf_counter()
        LAST_PROFILE["band solve"] = t1 - t0
        LAST_PROFILE.update({f"  {k}": s for k, s in be.band_solve_times().items()})
    wv = from_host(np.asarray(evals, real), nb, grid, real)
    if not vectors:
        return wv, None
    assert z is not None
    k = int(z.shape[1])
    if k == 0:
        return wv, zeros((n, 0), x.dtype, block=(nb, nb), grid=grid)
    v = distribute(z, BlockCyclicLayout((n, k), (nb, nb), grid.shape), grid, x.dtype)
    if not local:  # (the local route returned the back-transformed vectors)
        br.back_transform(red, v)
        be.synchronize()
        LAST_PROFILE["back-transform"] = time.perf_counter() - t1
    return wv, v
