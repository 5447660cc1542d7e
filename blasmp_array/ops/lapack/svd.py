"""The singular value decomposition: SciPy's :func:`svd` and :func:`svdvals`, NumPy's
``np.linalg.svd`` and ``np.linalg.svdvals``.

``A = U diag(S) V^H`` (``m x n``, ``k = min(m, n)``): ``S`` a distributed vector of ``k`` real
values, descending; ``U`` and ``Vh`` BlockCyclicArrays on ``A``'s grid in square blocks of
``A``'s row block.

Routes, chosen from shapes and ``method`` only (the same on every rank):

* *One process* (a ``1 x 1`` grid): one LAPACK ``xgesdd`` (cuSOLVER ``gesvd`` on the GPU) on the
  local matrix (:meth:`Backend.gesdd`).
* *Wide* (``m < n``): the SVD of ``A^H`` (``A^H = U' S V'^H`` gives ``U = V'``, ``V = U'``).
* *Gather* (``method='gather'``, and 'auto' below): ``A`` gathered on process 0, one ``xgesdd``
  there, ``U`` and ``Vh`` scattered from it.
* *Tall* (``m >= TALL_RATIO n``, or ``m > n`` with 'band'): the distributed Householder QR
  ``A = Q R`` (:mod:`ops.lapack._householder`), the SVD of the square ``R`` (gathered, or by the
  band route), ``U = Q [U_R; 0]`` (``Q [U_R 0; 0 I]`` for ``full_matrices``) by the distributed
  ``pxormqr``.
* *Band* (``method='band'``, square): the two-stage method. (1) :mod:`ops.lapack._bidiag_reduction`:
  the distributed reduction to upper band form ``A = Q_L B Q_R^H`` of bandwidth ``b`` (the
  block), all in the QR's GEMMs. (2) ``B`` gathered on process 0: its singular values alone as
  the eigenvalues of the perfect-shuffled Jordan-Wielandt matrix ``[[0, B], [B^H, 0]]``, a
  Hermitian band matrix of bandwidth ``2b + 1`` whose eigenvalues are ``+-S``
  (:meth:`Backend.eigvalsh_banded`: LAPACK's bulge chasing to tridiagonal form and a
  tridiagonal solver, ``O(n^2 b)``, backward stable; up to ``b = JW_MAX_BAND``, above which
  LAPACK's dense SVD of ``B`` is faster); with the vectors, ``xgesdd`` of the dense ``B`` on
  process 0 (the stage to replace by a band -> bidiagonal bulge chasing and ``xbdsdc``, which
  SciPy does not expose), ``U_B`` and ``V_B`` scattered from it. (3) ``U = Q_L U_B``,
  ``V = Q_R V_B``: the distributed ``pxormqr`` of the kept reflectors.

* *Polar* (``method='polar'``): the SVD through the polar decomposition ``A = U_p H`` (QDWH:
  GEMMs, QRs and Choleskys) and the eigendecomposition of ``H``
  (:mod:`ops.lapack._polar`), on one process or on the matrix gathered to process 0; thin
  factors only. It trades about three times LAPACK's flops for BLAS3 ones: slower than
  ``xgesdd`` on a CPU, meant for the GPU, whose cuSOLVER has no divide-and-conquer SVD.

``method='auto'``: the tall route for ``m >= TALL_RATIO n`` (its ``R`` gathered); the polar
route from ``Backend.polar_svd_n`` up where the backend sets it (the GPU: 512) and the factors
asked for are thin or square; the gather otherwise. With the second stage on one process in
``O(n^3)`` flops, the band reduction only adds work to the gather's (measured in
``docs/svd.md``); it is kept as the distributed first stage for a bulge-chasing second stage.

Communication: the gathers and scatters of ``creation`` (``O(mn)`` elements to and from
process 0: ``gather_to_backend`` / ``scatter_from_backend``, row panels over the one-sided
exchange on a device, host MPI on the CPU; the band route's values alone gather ``B`` to the
host, where its band solver runs), the broadcast of ``S`` (``k`` values) and of the outcome
of the LAPACK call (a ``LinAlgError`` on process 0 is raised on every rank), and the exchanges
of the QR pipelines and window copies of :mod:`ops.lapack._bidiag_reduction`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._alloc import new_array
from ..._dispatch import implements
from ...array import BlockCyclicArray, blas_dtype
from ...creation import eye, gather_to_backend, scatter_from_backend, zeros
from ...layout import BlockCyclicLayout
from ..engine import _checks as ck
from ..engine._vectors import from_host
from . import _bidiag_reduction as bd
from . import _householder as hh
from ._polar import svd_polar
from .qr import _householder, _rows_like

__all__ = ["svd", "svdvals", "METHODS", "TALL_RATIO", "JW_MAX_BAND"]

METHODS = ("auto", "band", "gather", "polar")
_DRIVERS = ("gesdd", "gesvd")

#: ``m >= TALL_RATIO n`` takes the QR route (``method`` 'auto' and 'band'; ``docs/svd.md``)
TALL_RATIO = 2
#: the singular values of the band ``B`` come from the Jordan-Wielandt band matrix up to this
#: bandwidth, from LAPACK's SVD of the dense ``B`` above it (measured, ``docs/svd.md``)
JW_MAX_BAND = 32


def svd(
    a: BlockCyclicArray,
    full_matrices: bool = True,
    compute_uv: bool = True,
    overwrite_a: bool = False,
    check_finite: bool = True,
    lapack_driver: str = "gesdd",
    *,
    method: str = "auto",
) -> Any:
    """Singular value decomposition ``a = U @ diag(s) @ Vh`` (SciPy's ``svd``). Collective.

    Parameters
    ----------
    a : BlockCyclicArray
        ``m x n``, any grid, blocks and shape; views (``A.T``, ``A.H``, windows) are read as
        the matrix they show. Integer and bool input is computed in float64.
    full_matrices : bool
        ``U`` ``m x m`` and ``Vh`` ``n x n`` (True), or ``m x k`` and ``k x n``,
        ``k = min(m, n)``.
    compute_uv : bool
        False: return ``s`` alone.
    overwrite_a : bool
        Accepted for SciPy's signature; ``a`` is never written.
    check_finite : bool
        ``ValueError`` on every rank when ``a`` holds NaN or inf.
    lapack_driver : {'gesdd', 'gesvd'}
        The LAPACK driver of the local SVDs (``xgesdd`` falls back to ``xgesvd`` where it
        does not converge; the GPU runs cuSOLVER's ``gesvd`` for both).
    method : {'auto', 'band', 'gather', 'polar'}
        The route of a square matrix on several processes (module docstring of
        :mod:`blasmp_array.ops.lapack.svd`); 'polar': the SVD through the polar
        decomposition (QDWH, :mod:`blasmp_array.ops.lapack._polar`), on one process or on the
        matrix gathered to process 0, for the thin factors (``full_matrices=False``, or a
        square ``a``) and the singular values alone. 'auto' takes it on a backend that sets
        ``polar_svd_n`` (the GPU, from order 512) for such calls on a matrix that is not tall.

    Returns
    -------
    U : BlockCyclicArray
        Left singular vectors (columns), square blocks of ``a``'s row block.
    s : BlockCyclicArray
        The singular values, descending: a distributed vector of the real dtype.
    Vh : BlockCyclicArray
        Right singular vectors (rows).

    Raises
    ------
    numpy.linalg.LinAlgError
        On every rank, when the SVD does not converge.
    ValueError, TypeError
        On every rank, before any communication, for invalid arguments.

    Notes
    -----
    About ``4 m n^2 + 8 n^3`` flops with the vectors (``m >= n``; the QR, the band reduction
    and the back-transforms in GEMMs), ``2 m n^2 + 8 n^3 / 3`` without. See ``docs/svd.md``.
    """
    op = "svd"
    a = _check_a(a, op)
    full = ck.check_flag(full_matrices, "full_matrices")
    uv = ck.check_flag(compute_uv, "compute_uv")
    ck.check_flag(overwrite_a, "overwrite_a")
    driver = _check_driver(lapack_driver, op)
    meth = _check_method(method, op)
    if ck.check_flag(check_finite, "check_finite"):
        ck.check_finite(a, None, op)
    return _svd(a, full, uv, driver, meth)


def svdvals(
    a: BlockCyclicArray, overwrite_a: bool = False, check_finite: bool = True
) -> BlockCyclicArray:
    """The singular values of ``a``, descending, as a distributed vector (SciPy's
    ``svdvals``; :func:`svd` with ``compute_uv=False``). Collective."""
    return svd(a, compute_uv=False, overwrite_a=overwrite_a, check_finite=check_finite)  # type: ignore[no-any-return]


@implements(np.linalg.svd)
def _np_svd(
    a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False
) -> Any:
    """``np.linalg.svd``: NumPy's ``SVDResult(U, S, Vh)`` (S a distributed vector), or ``S``.
    ``hermitian=True`` is accepted and computes the general SVD (the same ``S``; a valid
    ``U``, ``Vh``)."""
    op = "np.linalg.svd"
    a = _check_a(a, op)
    full = ck.check_flag(full_matrices, "full_matrices")
    uv = ck.check_flag(compute_uv, "compute_uv")
    ck.check_flag(hermitian, "hermitian")
    ck.check_finite(a, None, op)  # NumPy's LAPACK refuses them too
    out = _svd(a, full, uv, "gesdd", "auto")
    if not uv:
        return out
    try:
        from numpy.linalg._linalg import SVDResult

        return SVDResult(*out)
    except ImportError:  # NumPy < 2
        return out


if hasattr(np.linalg, "svdvals"):

    @implements(np.linalg.svdvals)
    def _np_svdvals(x: Any) -> Any:
        """``np.linalg.svdvals``: the singular values, descending, a distributed vector."""
        a = _check_a(x, "np.linalg.svdvals")
        ck.check_finite(a, None, "np.linalg.svdvals")
        return _svd(a, False, False, "gesdd", "auto")


# -- checks ---------------------------------------------------------------------------------
def _check_a(a: Any, op: str) -> BlockCyclicArray:
    a = ck.check_array(a, "a", op)
    if a.ndim != 2:
        raise ValueError(f"{op}: a must be a 2-D matrix, got shape {a.shape}")
    if blas_dtype(a.dtype) != a.dtype:
        a = a.astype(np.float64)  # integers and bools, as np.linalg
    return a


def _check_driver(driver: Any, op: str) -> str:
    if isinstance(driver, str) and driver in _DRIVERS:
        return driver
    raise ValueError(f"{op}: lapack_driver must be 'gesdd' or 'gesvd', got {driver!r}")


def _check_method(method: Any, op: str) -> str:
    if isinstance(method, str) and method in METHODS:
        return method
    raise ValueError(f"{op}: method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")


# -- the routes -------------------------------------------------------------------------------
def _svd(a: BlockCyclicArray, full: bool, uv: bool, driver: str, meth: str) -> Any:
    m, n = a.shape
    if min(m, n) == 0:
        return _empty(a, full, uv)
    if meth == "auto" and _polar_by_default(a, full, uv):
        meth = "polar"
    if meth == "polar" and (full and uv and m != n):
        raise ValueError(
            "svd: method='polar' gives the thin factors; pass full_matrices=False (or use "
            "method='auto' for the full U and Vh of a non-square matrix)"
        )
    if a.grid.size == 1:
        return _local(a, full, uv, driver, meth == "polar")
    if meth == "polar":
        return _gathered(a, full, uv, driver, polar=True)
    if m < n:  # A^H = U' S V'^H: U = V', Vh = U'^H
        out = _svd(a.H, full, uv, driver, meth)
        if not uv:
            return out
        u, s, vh = out
        return vh.H.copy(), s, u.H.copy()
    if m >= TALL_RATIO * n and meth != "gather":
        return _tall(a, full, uv, driver, meth)
    if meth == "band" and m == n:
        return _square(a, uv, driver)
    if meth == "band":
        return _tall(a, full, uv, driver, meth)
    return _gathered(a, full, uv, driver)


def _polar_by_default(a: BlockCyclicArray, full: bool, uv: bool) -> bool:
    """Whether ``method='auto'`` takes the polar route: from the backend's
    :attr:`Backend.polar_svd_n` up, for a matrix that is not tall (the QR route's) whose
    factors the polar route gives (thin, or square)."""
    n0 = a.backend.polar_svd_n
    m, n = a.shape
    k = min(m, n)
    return (
        n0 is not None and k >= n0 and max(m, n) < TALL_RATIO * k and not (full and uv and m != n)
    )


def _real(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.dtype(dtype).type(0).real.dtype)


def _s_vector(s: np.ndarray, a: BlockCyclicArray) -> BlockCyclicArray:
    return from_host(np.ascontiguousarray(s), a.block[0], a.grid, _real(a.dtype))


def _square_layout(a: BlockCyclicArray, shape: tuple[int, int]) -> BlockCyclicLayout:
    b = a.block[0]
    return BlockCyclicLayout(shape, (b, b), a.grid.shape)


def _empty(a: BlockCyclicArray, full: bool, uv: bool) -> Any:
    m, n = a.shape
    s = _s_vector(np.empty(0, _real(a.dtype)), a)
    if not uv:
        return s
    b = a.block[0]
    if full:
        u = eye(m, m, dtype=a.dtype, block=(b, b), grid=a.grid)
        vh = eye(n, n, dtype=a.dtype, block=(b, b), grid=a.grid)
    else:
        u = zeros((m, 0), a.dtype, block=(b, b), grid=a.grid)
        vh = zeros((0, n), a.dtype, block=(b, b), grid=a.grid)
    return u, s, vh


def _local(a: BlockCyclicArray, full: bool, uv: bool, driver: str, polar: bool = False) -> Any:
    """One process: one LAPACK call on the local matrix (or the polar route's local solve)."""
    be = a.backend
    x = a.copy() if a.is_view else a
    be.synchronize()
    if not uv:
        return _s_vector(be.asnumpy(_solve(be, x._data, False, False, driver, polar)), a)
    u, s, vh = _solve(be, x._data, full, True, driver, polar)
    out_u = new_array(_square_layout(a, tuple(u.shape)), a.grid, a.dtype)
    out_vh = new_array(_square_layout(a, tuple(vh.shape)), a.grid, a.dtype)
    out_u._data[...] = u
    out_vh._data[...] = vh
    return out_u, _s_vector(be.asnumpy(s), a), out_vh


def _solve(be: Any, x: Any, full: bool, uv: bool, driver: str, polar: bool) -> Any:
    """The SVD of the local matrix ``x`` (a backend array): the backend's LAPACK, or the polar
    route (thin factors)."""
    return svd_polar(be, x, uv) if polar else be.gesdd(x, full, uv, driver)


def _host_svd(
    a: BlockCyclicArray, host: Any, full: bool, uv: bool, driver: str, polar: bool = False
) -> Any:
    """The SVD of the host matrix ``host`` (on process 0) through the backend's LAPACK (or the
    polar route), as host arrays."""
    be = a.backend
    res = _solve(be, be.asarray(host), full, uv, driver, polar)
    if not uv:
        return be.asnumpy(res)
    return tuple(be.asnumpy(x) for x in res)


def _gathered(a: BlockCyclicArray, full: bool, uv: bool, driver: str, polar: bool = False) -> Any:
    """``a`` gathered on process 0's device (its host on the CPU backend), one LAPACK SVD (or
    the polar route) there, the factors scattered from it (``creation.gather_to_backend``)."""
    m, n = a.shape
    k = min(m, n)
    be = a.backend
    x = gather_to_backend(a, root=0)

    def solve() -> Any:
        res = _solve(be, x, full, uv, driver, polar)
        return be.asnumpy(res) if not uv else (res[0], be.asnumpy(res[1]), res[2])

    res = be.run_on_root(solve)
    if not uv:
        return _s_vector(be.bcast(res, 0), a)
    u, s, vh = res if res is not None else (None, None, None)
    s = be.bcast(s, 0)
    ku, kv = (m, n) if full else (k, k)
    b = int(a.block[0])
    return (
        scatter_from_backend(u, (m, ku), (b, b), a.grid, a.dtype),
        _s_vector(s, a),
        scatter_from_backend(vh, (kv, n), (b, b), a.grid, a.dtype),
    )


def _tall(a: BlockCyclicArray, full: bool, uv: bool, driver: str, meth: str) -> Any:
    """``m > n``: ``A = Q R``, the SVD of ``R``, ``U = Q U_R``."""
    m, n = a.shape
    f, _ = _householder(a, False, "svd", working=False)  # the SVD keeps a's block
    r = hh.r_factor(f, n)
    if not uv:
        return _square(r, False, driver) if meth == "band" else _gathered(r, False, False, driver)
    ur, s, vh = _square(r, True, driver) if meth == "band" else _gathered(r, False, True, driver)
    if full:
        e = eye(m, m, dtype=a.dtype, block=f.w.block, grid=a.grid)
        e[:n, :n] = ur
    else:
        e = _rows_like(f.w, ur, m)
    hh.apply_q(f, e, "N")
    return e, s, vh


def _square(a: BlockCyclicArray, uv: bool, driver: str) -> Any:
    """The two-stage SVD of the square ``a`` on several processes (module docstring)."""
    n = a.shape[0]
    be = a.backend
    red = bd.reduce_to_band(a)
    if not uv:
        band = red.band.to_numpy(root=0)

        def values() -> np.ndarray:
            if red.b > JW_MAX_BAND:
                return np.asarray(_host_svd(a, band, False, False, driver))
            ev = be.eigvalsh_banded(bd.band_host(band, red.b))
            return np.sort(np.abs(ev[n:]))[::-1].astype(_real(a.dtype))

        return _s_vector(be.bcast(be.run_on_root(values), 0), a)
    # the factors of the band: on rank 0's device (its host on the CPU), moved by the exchange
    dense = gather_to_backend(red.band, root=0)

    def factors() -> Any:
        ub, sb, vhb = _solve(be, dense, False, True, driver, False)
        return ub, be.asnumpy(sb), vhb

    res = be.run_on_root(factors)
    ub, s, vhb = res if res is not None else (None, None, None)
    s = be.bcast(s, 0)
    b = int(red.band.block[0])
    u = scatter_from_backend(ub, (n, n), (b, b), a.grid, a.dtype)
    v = scatter_from_backend(None if vhb is None else vhb.conj().T, (n, n), (b, b), a.grid, a.dtype)
    bd.apply_left(red, u)
    bd.apply_right(red, v)
    return u, _s_vector(s, a), v.H.copy()
