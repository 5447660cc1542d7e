"""Functions of the singular values and vectors, on top of :mod:`ops.lapack.svd`: NumPy's
``np.linalg.norm`` orders 2, -2 and 'nuc' of a matrix, ``cond``, ``matrix_rank``, ``pinv`` and
``lstsq``, and SciPy's ``lstsq`` with the SVD drivers ('gelsd', 'gelss').

Every one of them computes the SVD (the singular values alone where that suffices) and then
works on the singular values gathered on every rank (``k`` numbers: the same verdicts, ranks
and thresholds everywhere) and on the distributed factors by GEMM:

* ``pinv(A) = V diag(s^+) U^H`` (``s^+_i = 1 / s_i`` for ``s_i > rcond s_max``, else 0): the rows
  of ``Vh`` scaled locally, one GEMM;
* the minimum-norm least-squares solution ``x = V diag(s^+) U^H b`` (LAPACK's ``xgelsd``
  threshold): two GEMMs;
* the matrix norms and condition numbers from ``s`` alone.

Communication: the SVD's, the gather of ``s`` (``k`` values to every rank) and the GEMMs'.
"""

from __future__ import annotations

from numbers import Real
from typing import Any

import numpy as np

from ..._dispatch import implements, wrap_implementation
from ...array import BlockCyclicArray, as_vector
from ...creation import zeros
from ..blas3.gemm import gemm
from ..engine import _checks as ck
from ..engine._replicated import is_replicated
from ..lapack import qr as _qr
from ..lapack.solves import _operands as replicated_operands
from ..lapack.svd import _check_a, _svd
from . import reductions  # noqa: F401  (registers np.linalg.norm, wrapped below)

__all__ = ["lstsq", "singular_values"]

_NO_VALUE = object()


def singular_values(a: BlockCyclicArray, op: str) -> np.ndarray:
    """The singular values of the matrix ``a``, descending, as a host array on every rank
    (NaN/inf in ``a``: ``ValueError`` on every rank). Collective."""
    a = _check_a(a, op)
    ck.check_finite(a, None, op)
    s = _svd(a, False, False, "gesdd", "auto")
    out = s.to_numpy()  # on every rank
    assert out is not None
    return out


# -- np.linalg.norm: orders 2, -2, 'nuc' of a matrix -----------------------------------------
def _norm_wrapper(impl: Any) -> Any:
    def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
        """``np.linalg.norm``: the registered norms (see :mod:`ops.face.reductions`), and of a
        matrix (``axis`` None or ``(0, 1)``) the orders 2 (the largest singular value), -2
        (the smallest) and 'nuc' (their sum) from its singular values."""
        spectral = (
            isinstance(x, BlockCyclicArray)
            and x.ndim == 2
            and min(x.shape) > 1
            and axis in (None, (0, 1), (-2, -1), (1, 0), (-1, -2))
            and isinstance(ord, str | int | float | np.integer | np.floating)
            and (ord == "nuc" if isinstance(ord, str) else ord in (2, -2))
        )
        if not spectral:
            return impl(x, ord=ord, axis=axis, keepdims=keepdims)
        s = singular_values(x, "np.linalg.norm")
        real = np.linalg.norm(np.zeros(1, x.dtype)).dtype
        value = s[0] if ord == 2 else s[-1] if ord == -2 else np.sum(s, dtype=np.float64)
        result = real.type(value)
        return np.asarray(result).reshape(1, 1) if keepdims else result

    norm.__doc__ = (impl.__doc__ or "") + (
        "\n\n    Of a matrix, ord 2, -2 and 'nuc' come from its singular values "
        "(ops/face/spectral.py)."
    )
    return norm


wrap_implementation(np.linalg.norm, _norm_wrapper)


# -- cond, matrix_rank ------------------------------------------------------------------------
@implements(np.linalg.cond)
def _np_cond(x: Any, p: Any = None) -> Any:
    """``np.linalg.cond``: ``p`` None, 2 or -2 from the singular values; 1, -1, inf, -inf and
    'fro' as ``norm(x, p) * norm(inv(x), p)`` (distributed ``inv``). A singular matrix gives
    inf, as NumPy's."""
    a = _check_a(x, "np.linalg.cond")
    if min(a.shape) == 0:
        raise np.linalg.LinAlgError("cond is not defined on empty arrays")
    real = np.linalg.norm(np.zeros(1, a.dtype)).dtype
    if p is None or (not isinstance(p, str) and p in (2, -2)):
        s = singular_values(a, "np.linalg.cond")
        with np.errstate(all="ignore"):
            r = s[-1] / s[0] if p == -2 else s[0] / s[-1]
    elif p in (1, -1, np.inf, -np.inf, "fro"):
        if a.shape[0] != a.shape[1]:
            raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")
        try:
            inv = np.linalg.inv(a)
        except np.linalg.LinAlgError:
            return real.type(np.inf)
        r = np.linalg.norm(a, p) * np.linalg.norm(inv, p)
    else:
        raise ValueError(f"Invalid norm order {p!r} for matrices")
    r = real.type(r)
    if np.isnan(r):
        r = real.type(np.inf)  # a singular matrix (no NaN in x: check_finite refused them)
    return r


@implements(np.linalg.matrix_rank)
def _np_matrix_rank(A: Any, tol: Any = None, hermitian: bool = False, *, rtol: Any = None) -> Any:
    """``np.linalg.matrix_rank``: the number of singular values above ``tol`` (default
    ``S.max() * rtol``, ``rtol`` default ``max(m, n) * eps``, NumPy's). ``hermitian`` is
    accepted and computes the general SVD."""
    if rtol is not None and tol is not None:
        raise ValueError("`tol` and `rtol` can't be both set.")
    a = ck.check_array(A, "A", "np.linalg.matrix_rank")
    ck.check_flag(hermitian, "hermitian")
    if a.ndim < 2:
        return int(bool(np.any(a != 0)))
    s = singular_values(a, "np.linalg.matrix_rank")
    if tol is None:
        if rtol is None:
            rtol = max(a.shape) * np.finfo(s.dtype).eps
        tol = (s.max() if s.size else 0.0) * np.asarray(rtol)
    return np.count_nonzero(s > np.asarray(tol))


# -- pinv -------------------------------------------------------------------------------------
def _inverse_values(s: np.ndarray, cutoff: float) -> tuple[np.ndarray, int]:
    """``1 / s_i`` where ``s_i > cutoff``, 0 elsewhere, and their count (the rank)."""
    large = s > cutoff
    inv = np.zeros_like(s)
    inv[large] = 1.0 / s[large]
    return inv, int(np.count_nonzero(large))


def _scale_rows(x: BlockCyclicArray, d: np.ndarray) -> BlockCyclicArray:
    """``diag(d) x`` for the host vector ``d`` (the same on every rank): each rank scales the
    rows it stores, no communication."""
    out = x.copy()
    lay, g = out.layout, out.grid
    rows = lay.local_rows(g.myrow)
    if out._data.size:
        xp = out.backend.xp
        out._data *= xp.asarray(d[rows].astype(out.dtype))[:, None]
    return out


@implements(np.linalg.pinv)
def _np_pinv(a: Any, rcond: Any = None, hermitian: bool = False, *, rtol: Any = _NO_VALUE) -> Any:
    """``np.linalg.pinv``: ``V diag(s^+) U^H`` from the economic SVD, singular values at or
    below ``rcond * s_max`` dropped. ``rcond``/``rtol`` as NumPy's (``rcond`` default
    ``1e-15``; ``rtol=None``: ``max(m, n) * eps``). ``hermitian`` is accepted and computes the
    general SVD."""
    op = "np.linalg.pinv"
    x = _check_a(a, op)
    ck.check_flag(hermitian, "hermitian")
    m, n = x.shape
    if rcond is None:
        if rtol is _NO_VALUE:
            rcond = 1e-15
        elif rtol is None:
            rcond = max(m, n) * np.finfo(x.dtype).eps
        else:
            rcond = rtol
    elif rtol is not _NO_VALUE:
        raise ValueError("`rtol` and `rcond` can't be both set.")
    if min(m, n) == 0:
        b = x.block[0]
        return zeros((n, m), x.dtype, block=(b, b), grid=x.grid)
    ck.check_finite(x, None, op)
    u, s_vec, vh = _svd(x, False, True, "gesdd", "auto")
    s = s_vec.to_numpy()
    assert s is not None
    sinv, _ = _inverse_values(s, float(np.asarray(rcond)) * float(s.max()))
    return gemm(_scale_rows(vh, sinv), u, trans_a="C", trans_b="C")


# -- lstsq ------------------------------------------------------------------------------------
def _svd_solve(
    a: BlockCyclicArray, b: BlockCyclicArray, rcond: float, op: str
) -> tuple[BlockCyclicArray, np.ndarray, int, BlockCyclicArray]:
    """The minimum-norm least-squares solution of ``a x = b`` (2-D ``b`` on ``a``'s grid,
    both of one BLAS dtype) by the SVD, LAPACK ``xgelsd``'s threshold ``s_i > rcond s_max``;
    residues ``||b_j - a x_j||^2`` when ``m > n`` and the rank is ``n``, else empty."""
    m, n = a.shape
    real = np.dtype(a.dtype).type(0).real.dtype
    u, s_vec, vh = _svd(a, False, True, "gesdd", "auto")
    s = s_vec.to_numpy()
    assert s is not None
    smax = float(s.max()) if s.size else 0.0
    sinv, rank = _inverse_values(s, rcond * smax)
    y = _scale_rows(gemm(u, b, trans_a="C"), sinv)  # diag(s^+) U^H b
    x = gemm(vh, y, trans_a="C")
    res = np.empty(0, real)
    if m > n and rank == n:
        resid = gemm(a, x, C=b.copy(), alpha=-1, beta=1)
        res = _qr._column_norms2(resid, 0)
    return x, res, rank, s_vec


def _lstsq_operands(a: Any, b: Any, op: str) -> tuple[BlockCyclicArray, BlockCyclicArray, bool]:
    if isinstance(a, BlockCyclicArray) and is_replicated(b):
        # a NumPy right-hand side, the same on every rank (checked), distributed to fit a
        a, b = replicated_operands(a, b, op)
    a = _check_a(a, op)
    if not isinstance(b, BlockCyclicArray):
        raise TypeError(
            f"{op}: b must be a BlockCyclicArray (a vector or a matrix) on a's grid, or a NumPy "
            f"array given on every rank, got {type(b).__name__}"
        )
    vector = b.ndim == 1
    bb = b._column if vector else b
    if bb.shape[0] != a.shape[0]:
        raise ValueError(
            f"{op}: b has {bb.shape[0]} rows but a is {a.shape[0]}x{a.shape[1]}; they must match"
        )
    _qr._check_same_grid(a, bb, "b", op)
    dtype = ck.result_dtype(op, a, bb)
    return _qr._cast(a, dtype), _qr._cast(bb, dtype), vector


@implements(np.linalg.lstsq)
def _np_lstsq(a: Any, b: Any, rcond: Any = None) -> Any:
    """``np.linalg.lstsq``: ``(x, residuals, rank, s)``, the minimum-norm least-squares
    solution by the SVD (``s_i <= rcond * s_max`` dropped; ``rcond`` default
    ``max(m, n) * eps``). ``x`` a vector for a vector ``b``; ``residuals`` a host array
    (``||b - a x||^2`` per column when ``m > n`` and ``a`` has full rank, else empty); ``s``
    the singular values, a distributed vector."""
    op = "np.linalg.lstsq"
    a, bb, vector = _lstsq_operands(a, b, op)
    m, n = a.shape
    if rcond is None:
        rcond = np.finfo(a.dtype).eps * max(m, n)
    ck.check_finite(a, bb, op)
    if min(m, n) == 0:
        x, res, rank, s = _empty_solve(a, bb)
    else:
        x, res, rank, s = _svd_solve(a, bb, float(rcond), op)
    return (as_vector(x) if vector else x), res, np.int32(rank), s  # NumPy's rank is int32


def _empty_solve(a: BlockCyclicArray, b: BlockCyclicArray) -> Any:
    m, n = a.shape
    real = np.dtype(a.dtype).type(0).real.dtype
    x = zeros((n, b.shape[1]), a.dtype, block=(a.block[1], b.block[1]), grid=a.grid)
    res = _qr._column_norms2(b, 0) if n == 0 and m > 0 else np.empty(0, real)
    s = _svd(a, False, False, "gesdd", "auto")
    return x, res, 0, s


def lstsq(
    a: BlockCyclicArray,
    b: BlockCyclicArray,
    cond: float | None = None,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    check_finite: bool = True,
    lapack_driver: str | None = None,
    *,
    method: str = "auto",
) -> tuple[BlockCyclicArray, np.ndarray, int, Any]:
    """Least-squares solution of ``a x = b`` (SciPy's ``lstsq``). Collective.

    ``lapack_driver`` None or 'gelsy': QR (full rank; :func:`blasmp_array.ops.lapack.qr.lstsq`,
    whose ``method`` applies). 'gelsd' or 'gelss': the SVD, ``x = V diag(s^+) U^H b`` with
    ``s^+_i = 1 / s_i`` for ``s_i > cond * s_max`` and 0 otherwise: the minimum-norm solution,
    also for a rank-deficient ``a``.

    Parameters
    ----------
    a : BlockCyclicArray
        ``m x n``.
    b : BlockCyclicArray or numpy.ndarray
        ``m x k`` right-hand sides on ``a``'s grid, or a vector of length ``m``; a NumPy array
        given (identical) on every rank is distributed to fit ``a`` (SVD drivers).
    cond : float, optional
        The relative threshold of the rank; default ``eps`` for the SVD drivers (SciPy's),
        ``max(m, n) * eps`` for QR.
    overwrite_a, overwrite_b : bool
        Accepted; neither is written by the SVD drivers.
    check_finite : bool
        ``ValueError`` on every rank when ``a`` or ``b`` holds NaN or inf.
    lapack_driver : {None, 'gelsy', 'gelsd', 'gelss'}
    method : str
        The QR algorithm for None/'gelsy' (see :func:`blasmp_array.ops.lapack.qr.lstsq`).

    Returns
    -------
    x : BlockCyclicArray
        ``n x k`` (a vector for a vector ``b``).
    residues : numpy.ndarray
        ``||b_j - a x_j||_2^2`` per column when ``m > n`` and ``a`` has full rank, else empty.
    rank : int
        The effective rank (``min(m, n)`` for QR, which refuses rank-deficient ``a``).
    s : BlockCyclicArray or None
        The singular values (a distributed vector) for the SVD drivers; None for QR.

    Notes
    -----
    The SVD drivers: the SVD's flops (see :func:`blasmp_array.ops.lapack.svd.svd`) and
    ``2 k (m + n) min(m, n)`` for the two GEMMs.
    """
    if lapack_driver not in (None, "gelsy", "gelsd", "gelss"):
        raise ValueError(
            f"lstsq: lapack_driver must be None, 'gelsy', 'gelsd' or 'gelss', got {lapack_driver!r}"
        )
    if lapack_driver in (None, "gelsy"):
        vector = isinstance(b, BlockCyclicArray) and b.ndim == 1
        out = _qr.lstsq(
            a,
            b._column if vector else b,
            cond,
            overwrite_a,
            overwrite_b,
            check_finite,
            lapack_driver,
            method=method,
        )
        return ((as_vector(out[0]) if vector else out[0]), *out[1:])  # type: ignore[return-value]
    op = "lstsq"
    ck.check_flag(overwrite_a, "overwrite_a")
    ck.check_flag(overwrite_b, "overwrite_b")
    aa, bb, vector = _lstsq_operands(a, b, op)
    m, n = aa.shape
    if cond is None:
        tol = float(np.finfo(aa.dtype).eps)
    elif isinstance(cond, Real) and not isinstance(cond, bool):
        tol = float(cond)
    else:
        raise ValueError(f"lstsq: cond must be None or a number, got {cond!r}")
    if ck.check_flag(check_finite, "check_finite"):
        ck.check_finite(aa, bb, op)
    if min(m, n) == 0:
        x, res, rank, s = _empty_solve(aa, bb)
    else:
        x, res, rank, s = _svd_solve(aa, bb, tol, op)
    return (as_vector(x) if vector else x), res, rank, s
