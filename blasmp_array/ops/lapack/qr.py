"""QR factorisation and linear least squares: SciPy's :func:`qr`, :func:`qr_multiply` and
:func:`lstsq`, and ``np.linalg.qr``.

Layering: the public drivers (checks, views, the choice of the algorithm) -> one of two
factorisations -> the distributed operators and the backend's LAPACK:

* :mod:`ops.lapack._cholqr` -- CholeskyQR2 with the shifted CholeskyQR3 as its fallback, for
  tall-skinny matrices: every flop in SYRK, Cholesky, TRSM and TRMM (the operators of this
  package), two (three) reductions of an ``n x n`` Gram matrix in all;
* :mod:`ops.lapack._householder` -- blocked Householder QR on the grid (ScaLAPACK ``pxgeqrf``, with
  ``Q`` formed as ``pxorgqr`` or applied as ``pxormqr``), and on one process one LAPACK
  (cuSOLVER) ``geqrf`` and ``orgqr``/``ormqr``;
* :mod:`ops.lapack._qr_gathered` -- where every process computes on one device (several ranks
  on one GPU), :func:`qr` and ``np.linalg.qr`` gather the matrix on process 0 and factor it
  there with the one-process kernels (:func:`qr_multiply` and :func:`lstsq` keep the grid).

The automatic choice (``method='auto'``), the same on every rank (it reads shapes only)
--------------------------------------------------------------------------------------------
CholeskyQR when an economic ``Q`` (or ``R`` alone) of an ``m x n`` matrix with ``m >= n`` is
asked for and the matrix is *tall-skinny*: ``m >= TALL_RATIO n`` (4), or, on a grid of more
than one process, ``n <= FEW_BLOCKS`` (2) column blocks, where the blocked Householder QR has
too few steps to pipeline. Householder QR otherwise (and for ``mode='full'``, whose ``Q`` has
``m`` columns). CholeskyQR2's stability limit is ``kappa(A) <~ u^{-1/2}`` (``1e8`` in float64);
past it the shifted CholeskyQR3 takes over up to ``kappa(A) <~ u^{-1}``, and past that (or for a
rank-deficient matrix) Householder QR, which always completes: whichever runs, the result
meets LAPACK's bounds (see ``docs/qr.md``).

Wide matrices (``m < n``) are factored by Householder QR (``R`` upper trapezoidal, ``Q``
``m x m``); :func:`lstsq` solves them through the QR of ``A^H`` (an LQ factorisation of ``A``),
giving the minimum-norm solution.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np

from ..._dispatch import implements
from ...array import BlockCyclicArray, check_dtype
from ...creation import zeros
from ...layout import BlockCyclicLayout
from ..blas3.gemm import gemm
from ..blas3.trsm import trsm
from ..engine import _checks as ck
from ..engine import _factor_block
from ..engine.devices import one_device
from ..engine.redistribute import redistribute
from . import _householder as hh
from ._cholqr import cholesky_qr
from ._qr_gathered import gathered_qr, root_bytes
from .solves import promote

__all__ = ["qr", "qr_multiply", "lstsq", "TALL_RATIO", "FEW_BLOCKS"]

#: ``m >= TALL_RATIO * n`` makes a matrix tall-skinny (CholeskyQR)
TALL_RATIO = 4
#: on a grid of several processes, ``n`` within this many column blocks is tall-skinny too
FEW_BLOCKS = 2

_METHODS = ("auto", "cholqr", "householder")


# -- public API -------------------------------------------------------------------------------
def qr(
    a: BlockCyclicArray,
    overwrite_a: bool = False,
    lwork: int | None = None,
    mode: str = "full",
    pivoting: bool = False,
    check_finite: bool = True,
    *,
    method: str = "auto",
) -> Any:
    """QR decomposition ``a = Q R`` (SciPy's ``qr``). Collective.

    Parameters
    ----------
    a : BlockCyclicArray
        ``m x n``, any shape, grid and blocks (Householder QR redistributes non-square blocks
        ``(mb, nb)`` to ``(mb, mb)`` with a warning). Lazy views (``A.T``, ``A.H``) are
        materialised; a window view ``A[i:, j:]`` is read in place by CholeskyQR and copied
        (it is the working copy) by Householder QR.
    overwrite_a : bool
        Let Householder QR work in ``a``'s storage (``a`` then holds LAPACK's ``geqrf``
        output). CholeskyQR never writes ``a``.
    lwork : int, optional
        Ignored (SciPy's LAPACK workspace size): the backend asks LAPACK for its optimal one.
    mode : {'full', 'economic', 'r'}
        ``Q`` ``m x m`` and ``R`` ``m x n`` ('full'); ``Q`` ``m x k`` and ``R`` ``k x n``,
        ``k = min(m, n)`` ('economic'); ``R`` alone, ``m x n``, returned as the tuple ``(R,)``
        as SciPy does ('r'). ``'raw'`` is refused.
    pivoting : bool
        Only ``False``: column pivoting (``geqp3``) is not implemented.
    check_finite : bool
        Check that ``a`` holds only finite numbers (``ValueError`` on every rank otherwise).
    method : {'auto', 'cholqr', 'householder'}
        The algorithm (module docstring of :mod:`blasmp_array.ops.lapack.qr`); 'cholqr' needs
        ``m >= n`` and an economic ``Q`` and still falls back to Householder QR when the
        shifted CholeskyQR3 breaks down.

    Returns
    -------
    Q : BlockCyclicArray
        Orthonormal columns (not for ``mode='r'``), ``a``'s rows layout.
    R : BlockCyclicArray
        Upper triangular (trapezoidal). Signs follow the algorithm (LAPACK's for Householder
        QR; a positive diagonal for CholeskyQR), so they may differ from SciPy's.

    Raises
    ------
    ValueError, TypeError, NotImplementedError
        On every rank, before any communication, for invalid arguments.

    Notes
    -----
    ``2 m n^2 - 2 n^3 / 3`` flops for ``R`` (``m >= n``) and as many again for an economic
    ``Q`` (Householder); ``4 m n^2`` in all for CholeskyQR2. See ``docs/qr.md``.
    """
    a = _check_a(a, "qr")
    ck.check_flag(overwrite_a, "overwrite_a")
    _check_lwork(lwork)
    kind = _check_mode(mode, ("full", "economic", "r"), "qr")
    _check_pivoting(pivoting, "qr")
    meth = _check_method(method, "qr")
    if ck.check_flag(check_finite, "check_finite"):
        ck.check_finite(a, None, "qr")
    m, n = a.shape
    if kind == "r":
        _, r = _factor(a, meth, want_q=False, complete=False, overwrite=bool(overwrite_a))
        return (_pad_rows(r, m),)
    q, r = _factor(a, meth, want_q=True, complete=kind == "full", overwrite=bool(overwrite_a))
    if kind == "full":
        r = _pad_rows(r, m)
    return q, r


def qr_multiply(
    a: BlockCyclicArray,
    c: BlockCyclicArray,
    mode: str = "right",
    pivoting: bool = False,
    conjugate: bool = False,
    overwrite_a: bool = False,
    overwrite_c: bool = False,
    *,
    method: str = "auto",
) -> tuple[BlockCyclicArray, BlockCyclicArray]:
    """The QR decomposition of ``a`` and the product of its ``Q`` with ``c`` (SciPy's
    ``qr_multiply``; ScaLAPACK's ``pxormqr``), without forming ``Q`` where Householder QR
    runs. Collective.

    Parameters
    ----------
    a : BlockCyclicArray
        ``m x n``; ``k = min(m, n)``; ``Q`` is the economic ``m x k`` factor.
    c : BlockCyclicArray
        ``k x p`` for ``mode='left'`` (``Q c``), ``p x m`` for ``mode='right'`` (``c Q``), on
        ``a``'s grid (a 2-D matrix: 1-D vectors are not supported yet).
    mode : {'left', 'right'}
    pivoting : bool
        Only ``False``.
    conjugate : bool
        Multiply by ``conj(Q)`` instead.
    overwrite_a, overwrite_c : bool
        As :func:`qr`'s ``overwrite_a``; ``c`` is never written.
    method : {'auto', 'cholqr', 'householder'}
        As :func:`qr`.

    Returns
    -------
    CQ : BlockCyclicArray
        ``Q c`` (``m x p``) or ``c Q`` (``p x k``).
    R : BlockCyclicArray
        ``k x n`` upper trapezoidal.

    Notes
    -----
    Householder QR applies the ``k / nb`` block reflectors in ``4 m k p`` flops (with the
    factorisation's ``2 m n^2 - 2 n^3 / 3``); CholeskyQR forms ``Q`` and multiplies (GEMM).
    """
    a = _check_a(a, "qr_multiply")
    c = _check_matrix(c, "c", "qr_multiply")
    side = _check_mode(mode, ("left", "right"), "qr_multiply")
    if c.ndim == 1:  # SciPy's rule: a column for Q c, a row for c Q; the product is 1-D
        face = c.reshape(-1, 1) if side == "left" else c.reshape(1, -1)
        cq, r = qr_multiply(a, face, mode, pivoting, conjugate, overwrite_a, False, method=method)
        return cq.reshape(-1), r
    _check_pivoting(pivoting, "qr_multiply")
    conj = ck.check_flag(conjugate, "conjugate")
    ck.check_flag(overwrite_a, "overwrite_a")
    ck.check_flag(overwrite_c, "overwrite_c")
    meth = _check_method(method, "qr_multiply")
    m, n = a.shape
    k = min(m, n)
    if (c.shape[0] != k) if side == "left" else (c.shape[1] != m):
        need = f"c.shape[0] == min(m, n) = {k}" if side == "left" else f"c.shape[1] == m = {m}"
        raise ValueError(
            f"qr_multiply: c of shape {c.shape} does not fit a {m}x{n} (mode={side!r} needs {need})"
        )
    _check_same_grid(a, c, "c", "qr_multiply")
    dtype = ck.result_dtype("qr_multiply", a, c)
    a, c = _cast(a, dtype), _cast(c, dtype)
    if min(m, n) == 0:
        shape = (m, c.shape[1]) if side == "left" else (c.shape[0], k)
        return zeros(shape, dtype, block=a.block, grid=a.grid), zeros(
            (k, n), dtype, block=a.block, grid=a.grid
        )
    f, q, r, back = _factorization(a, meth, complete=False, overwrite=bool(overwrite_a))
    if q is not None:  # CholeskyQR: Q is explicit
        qq = q.conj() if conj else q
        return (gemm(qq, c) if side == "left" else gemm(c, qq)), r
    assert f is not None
    if side == "left":  # Q c = H_0 ... H_{k-1} [c; 0]; conj(Q) c = conj(Q conj(c))
        ext = _rows_like(f.w, (c.conj() if conj else c), m)
        hh.apply_q(f, ext, "N")
        return _rows_back(ext.conj().copy() if conj else ext, back), _back(r, back)
    # c Q = (Q^H c^H)^H;  c conj(Q) = (Q^H c^T)^T
    ext = _rows_like(f.w, (c.T if conj else c.H), m)
    hh.apply_q(f, ext, "C")
    top = ext[:k, :] if back is None else _rows_back(ext[:k, :].copy(), back)
    return (top.T.copy() if conj else top.H.copy()), _back(r, back)


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
) -> tuple[BlockCyclicArray, np.ndarray, int, None]:
    """Least-squares solution of ``a x = b`` for a matrix of full rank (SciPy's ``lstsq`` with
    the ``gelsy`` driver's return values). Collective.

    ``m >= n``: ``x`` minimises ``||b - a x||_2``, from the QR of ``a``:
    ``x = R^{-1} (Q^H b)[:n]``. ``m < n``: ``x`` is the minimum-norm solution of the
    underdetermined system, from the QR of ``a^H`` (an LQ factorisation of ``a``):
    ``x = Q R^{-H} b``.

    Parameters
    ----------
    a : BlockCyclicArray
        ``m x n`` of full rank ``min(m, n)``.
    b : BlockCyclicArray
        ``m x k`` right-hand sides on ``a``'s grid (2-D; a 1-D vector is not supported yet:
        pass an ``(m, 1)`` matrix).
    cond : float, optional
        Relative threshold of the rank test: ``a`` is rank deficient when some
        ``|R[j, j]| <= cond * max_i |R[i, i]|``. Default ``max(m, n) * eps`` (NumPy's
        ``rcond``).
    overwrite_a, overwrite_b : bool
        Let Householder QR work in ``a``'s storage; ``b`` is never written.
    check_finite : bool
        Check ``a`` and ``b`` for NaN/inf (``ValueError`` on every rank).
    lapack_driver : {None, 'gelsy'}
        Accepted for SciPy's signature; ``bm.linalg.lstsq`` routes 'gelsd' and 'gelss' to the
        SVD (:func:`blasmp_array.ops.face.spectral.lstsq`) before reaching this QR solver.
    method : {'auto', 'cholqr', 'householder'}
        The QR algorithm, as :func:`qr` (of ``a^H`` when ``m < n``).

    Returns
    -------
    x : BlockCyclicArray
        ``n x k``.
    residues : numpy.ndarray
        For ``m > n``: ``||b_j - a x_j||_2^2`` of each column (real, on every rank, as
        SciPy's default driver returns them); else empty.
    rank : int
        ``min(m, n)``.
    s : None
        No singular values (as SciPy's ``gelsy``).

    Raises
    ------
    numpy.linalg.LinAlgError
        On every rank when ``a`` is rank deficient: the message names the first column ``j``
        with ``|R[j, j]| <= cond * max |R|`` (of ``a``, or of ``a^H`` when ``m < n``: then a
        row of ``a``).
    ValueError, TypeError
        On every rank, before any communication, for invalid arguments.

    Notes
    -----
    The QR's flops plus ``4 m n k`` (applying ``Q^H``) and ``n^2 k`` (the triangular solve).
    """
    op = "lstsq"
    a = _check_a(a, op)
    b = _check_rhs(b, op)
    ck.check_flag(overwrite_a, "overwrite_a")
    ck.check_flag(overwrite_b, "overwrite_b")
    if lapack_driver not in (None, "gelsy"):
        raise ValueError(
            f"lstsq: lapack_driver={lapack_driver!r} needs singular values: call "
            "bm.linalg.lstsq, which routes 'gelsd' and 'gelss' to the SVD (ops/face/spectral.py); "
            "this QR solver takes None or 'gelsy' (full rank)"
        )
    meth = _check_method(method, op)
    m, n = a.shape
    if b.shape[0] != m:
        raise ValueError(f"lstsq: b has {b.shape[0]} rows but a is {m}x{n}; they must match")
    _check_same_grid(a, b, "b", op)
    dtype = ck.result_dtype(op, a, b)
    eps = float(np.finfo(dtype).eps)
    if cond is None:
        tol = max(m, n) * eps
    elif isinstance(cond, Real) and not isinstance(cond, bool) and cond >= 0:
        tol = float(cond)
    else:
        raise ValueError(f"lstsq: cond must be None or a number >= 0, got {cond!r}")
    if ck.check_flag(check_finite, "check_finite"):
        ck.check_finite(a, b, op)
    a, b = _cast(a, dtype), _cast(b, dtype)
    k = b.shape[1]
    real = np.dtype(dtype).type(0).real.dtype
    if m == 0 or n == 0:
        x = zeros((n, k), dtype, block=(a.block[1], b.block[1]), grid=a.grid)
        res = _column_norms2(b.resolve(), 0) if n == 0 else np.empty(0, real)
        return x, res, 0, None
    if m >= n:
        f, q, r, back = _factorization(a, meth, complete=False, overwrite=bool(overwrite_a))
        _check_rank(r, tol, op, "column")
        if q is not None:  # CholeskyQR: Q^H b, then b - Q (Q^H b) for the residues
            y = gemm(q, b, trans_a="C")
            x = trsm(r, y, side="left", lower=False)
            if m == n:
                return x, np.empty(0, real), n, None
            resid = gemm(q, y, C=b.copy(), alpha=-1, beta=1)
            return x, _column_norms2(resid, 0), n, None
        assert f is not None
        c = _rows_like(f.w, b, m)
        hh.apply_q(f, c, "C")
        x = trsm(r, c[:n, :].copy(), side="left", lower=False)
        res = _column_norms2(c, n) if m > n else np.empty(0, real)
        return _rows_back(x, back), res, n, None
    # m < n: the QR of a^H (n x m), x = Q R^{-H} b
    at = a.H.copy()
    f, q, r, back = _factorization(at, meth, complete=False, overwrite=True)
    _check_rank(r, tol, op, "row")
    if back is not None:  # b's rows in the working block of R (a window copied, not warned;
        # a lazy view moved as it is, materialised by the move itself)
        b = _factor_block.to_block(b.copy() if b.is_window else b, r.block[0])
    y = trsm(r, b, side="left", lower=False, trans="C")
    if q is not None:
        return gemm(q, y), np.empty(0, real), m, None
    assert f is not None
    c = _rows_like(f.w, y, n)
    hh.apply_q(f, c, "N")
    return _rows_back(c, back), np.empty(0, real), m, None


@implements(np.linalg.qr)
def _np_qr(a: Any, mode: str = "reduced") -> Any:
    """``np.linalg.qr(A, mode='reduced'|'complete'|'r')``: NumPy's ``QRResult(Q, R)``, or ``R``
    (``k x n``) for ``mode='r'``; ``'raw'`` is refused."""
    a = _check_a(a, "np.linalg.qr")
    kind = _check_mode(mode, ("reduced", "complete", "r"), "np.linalg.qr")
    if kind == "r":
        return _factor(a, "auto", want_q=False, complete=False, overwrite=False)[1]
    q, r = _factor(a, "auto", want_q=True, complete=kind == "complete", overwrite=False)
    if kind == "complete":
        r = _pad_rows(r, a.shape[0])
    try:
        from numpy.linalg._linalg import QRResult

        # NumPy's named pair, holding BlockCyclicArrays
        return QRResult(q, r)  # type: ignore[arg-type]
    except ImportError:  # NumPy < 2
        return q, r


# -- checks ---------------------------------------------------------------------------------
def _check_a(a: Any, op: str) -> BlockCyclicArray:
    """``a`` as a matrix of a BLAS dtype (integers and bools in float64, as NumPy and SciPy)."""
    a = ck.check_array(a, "a", op)
    if a.ndim != 2:
        raise ValueError(f"{op}: a must be a 2-D matrix, got shape {a.shape}")
    a = promote(a)
    check_dtype(a.dtype)
    return a


def _check_matrix(x: Any, name: str, op: str) -> BlockCyclicArray:
    """``x`` (a matrix or a vector) of a BLAS dtype."""
    if not isinstance(x, BlockCyclicArray):
        raise TypeError(
            f"{op}: {name} must be a BlockCyclicArray, got {type(x).__name__}; "
            "distribute it with blasmp_array.from_numpy"
        )
    return promote(x)


def _check_rhs(b: Any, op: str) -> BlockCyclicArray:
    """``b`` as a 2-D matrix. The hook for 1-D right-hand sides: when the array gains vectors,
    a 1-D ``b`` becomes its ``(m, 1)`` matrix here and ``x`` goes back to 1-D in the driver."""
    return _check_matrix(b, "b", op)


def _check_lwork(lwork: Any) -> None:
    if lwork is not None and (
        not isinstance(lwork, Integral) or isinstance(lwork, bool) or lwork < -1
    ):
        raise ValueError(f"qr: lwork must be None or an integer, got {lwork!r}")


def _check_mode(mode: Any, allowed: tuple[str, ...], op: str) -> str:
    if isinstance(mode, str) and mode in allowed:
        return mode
    if mode == "raw":
        raise NotImplementedError(
            f"{op}: mode='raw' (LAPACK's Householder vectors and tau) is not supported; use "
            f"one of {', '.join(repr(x) for x in allowed)}"
        )
    raise ValueError(
        f"{op}: mode must be one of {', '.join(repr(x) for x in allowed)}, got {mode!r}"
    )


def _check_pivoting(pivoting: Any, op: str) -> None:
    if ck.check_flag(pivoting, "pivoting"):
        raise NotImplementedError(
            f"{op}: pivoting=True (QR with column pivoting, LAPACK's geqp3) is not supported; "
            "use pivoting=False (for rank-deficient least squares, an SVD-based lstsq)"
        )


def _check_method(method: Any, op: str) -> str:
    if isinstance(method, str) and method in _METHODS:
        return method
    valid = ", ".join(map(repr, _METHODS))
    raise ValueError(f"{op}: method must be one of {valid}, got {method!r}")


def _check_same_grid(a: BlockCyclicArray, x: BlockCyclicArray, name: str, op: str) -> None:
    if not x.grid.same_as(a.grid):
        raise ValueError(
            f"{op}: {name} lives on another grid than a; redistribute it to a.grid first "
            f"({name}.redistribute(grid=a.grid))"
        )


# -- the factorisations -----------------------------------------------------------------------
def _cholqr_wanted(a: BlockCyclicArray, method: str, complete: bool) -> bool:
    m, n = a.shape
    if method == "householder":
        return False
    if method == "cholqr":
        if m < n or complete:
            raise ValueError(
                f"method='cholqr' needs m >= n and an economic Q, got a {m}x{n} matrix"
                + (" and mode='full'" if complete else "")
            )
        return True
    if m < n or complete or n == 0:
        return False
    tall = m >= TALL_RATIO * n
    few = a.grid.size > 1 and n <= FEW_BLOCKS * a.block[1]
    return tall or few


def _factorization(
    a: BlockCyclicArray, method: str, complete: bool, overwrite: bool, want_q: bool = True
) -> tuple[hh.Factorization | None, BlockCyclicArray | None, BlockCyclicArray, int | None]:
    """``(f, Q, R, back)``: CholeskyQR's explicit ``Q`` (None unless ``want_q``; ``f`` None) or
    Householder QR's factorisation ``f`` (``Q`` None: :func:`hh.apply_q` and :func:`hh.form_q`
    use ``f``). ``R`` is economic (``min(m, n) x n``). ``back``: None, or the caller's square
    block where ``f`` and ``R`` are in the working block of :mod:`ops.engine._factor_block`
    (the results go back to it: :func:`_back`, :func:`_rows_back`)."""
    m, n = a.shape
    if _cholqr_wanted(a, method, complete):
        done = cholesky_qr(a, want_q=want_q)
        if done is not None:  # else the fallback: Householder QR
            return None, done[0], done[1], None
    f, back = _householder(a, overwrite, "qr")
    return f, None, hh.r_factor(f, min(m, n)), back


def _factor(
    a: BlockCyclicArray, method: str, want_q: bool, complete: bool, overwrite: bool
) -> tuple[BlockCyclicArray | None, BlockCyclicArray]:
    """``(Q or None, R)``; ``complete``: ``Q`` is ``m x m`` (``R`` stays ``min(m, n) x n``)."""
    m, n = a.shape
    k = min(m, n)
    if k == 0:
        empty = zeros((m, m if complete else k), a.dtype, block=a.block, grid=a.grid)
        return (empty if want_q else None), zeros((k, n), a.dtype, block=a.block, grid=a.grid)
    householder = not _cholqr_wanted(a, method, complete)
    if householder and one_device(a.backend, a.grid.size, root_bytes(a, want_q, complete)):
        # gathered from the working block where the rule gives one (as the gathered LU, which
        # took 0.153 s against 0.221 s from block 256), the factors moved back after
        nb = _factor_block.block_for(a, "qr")
        w, back = (a, None) if nb is None else (_factor_block.to_block(a, nb, nb), a.block[0])
        q, r = gathered_qr(w, want_q, complete)
        return (None if q is None else _back(q, back)), _back(r, back)
    f, q, r, back = _factorization(a, method, complete, overwrite, want_q)
    if f is not None and want_q:
        q = _back(hh.form_q(f, m if complete else k), back)
    return q, _back(r, back)


def _householder(
    a: BlockCyclicArray, overwrite: bool, op: str, working: bool = True
) -> tuple[hh.Factorization, int | None]:
    """Householder QR of ``a``, stored with square blocks and source process ``(0, 0)`` first
    (a window view copied, a lazy view materialised, other blocks or a shifted source moved),
    and, with ``working``, in the working block of :mod:`ops.engine._factor_block` where it has
    one for the backend and grid (then ``back`` is the square block to return the results in,
    else None); in ``a``'s storage only with ``overwrite`` and a stored ``a`` that needs none
    of that."""
    w = a.copy() if a.is_window else a.resolve()
    mb = w.block[0]
    if w.block[1] != mb:
        w = ck.move(w, w.grid, (mb, mb), "a", op, f"a has non-square blocks {w.block}")
    if w.layout.src != (0, 0):
        w = redistribute(w)
    back = None
    nb = _factor_block.block_for(w, "qr") if working else None
    if nb is not None:
        w, back = _factor_block.to_block(w, nb, nb), mb
    return hh.factor(w, overwrite=w is not a or (overwrite and not a.is_view)), back


def _back(x: BlockCyclicArray, back: int | None) -> BlockCyclicArray:
    """``x`` (square blocks) in the caller's square block ``back`` (None: as it is)."""
    return x if back is None else _factor_block.to_block(x, back, back)


def _rows_back(x: BlockCyclicArray, back: int | None) -> BlockCyclicArray:
    """``x`` with the caller's row block ``back`` (None: as it is), its column block kept."""
    return x if back is None else _factor_block.to_block(x, back)


# -- helpers ----------------------------------------------------------------------------------
def _cast(x: BlockCyclicArray, dtype: np.dtype) -> BlockCyclicArray:
    return x if x.dtype == dtype else x.astype(dtype)


def _pad_rows(r: BlockCyclicArray, rows: int) -> BlockCyclicArray:
    """``r`` (``k x n``) below which zero rows are appended up to ``rows``."""
    if r.shape[0] == rows:
        return r
    out = zeros((rows, r.shape[1]), r.dtype, block=r.block, grid=r.grid)
    out[: r.shape[0], :] = r
    return out


def _rows_like(w: BlockCyclicArray, c: BlockCyclicArray, rows: int) -> BlockCyclicArray:
    """A new ``rows x p`` array with ``w``'s row layout (grid, row block, source row 0), holding
    ``c`` (``<= rows`` rows, any layout or lazy view) in its first rows and zeros below."""
    p = c.shape[1]
    lay = BlockCyclicLayout((rows, p), (w.block[0], c.block[1]), w.grid.shape)
    out = zeros(lay.shape, w.dtype, block=lay.block, grid=w.grid)
    # a window view starting inside a block is copied first (no warning: ``out`` is the
    # operator's own copy of it anyway)
    out[: c.shape[0], :] = c.copy() if c.is_window else c
    return out


def _column_norms2(x: BlockCyclicArray, row0: int) -> np.ndarray:
    """``sum_{i >= row0} |x[i, j]|^2`` of each column of the stored ``x``, on every rank (a real
    NumPy vector; the partial sums of the grid rows are added in rank order, so every rank
    gets the same numbers)."""
    lay, g, be = x.layout, x.grid, x.backend
    xp = be.xp
    rows = lay.local_rows(g.myrow)
    lr = int(np.searchsorted(rows, row0))
    real = np.dtype(x.dtype).type(0).real.dtype
    part = None
    if lr < rows.size and x._data.shape[1]:
        sums = xp.sum(xp.abs(x._data[lr:]).astype(np.float64) ** 2, axis=0)
        part = (lay.local_cols(g.mycol), be.asnumpy(sums))
    out = np.zeros(x.shape[1], np.float64)
    for p in be.allgather(part):
        if p is not None:
            out[p[0]] += p[1]
    return out.astype(real)


def _check_rank(r: BlockCyclicArray, tol: float, op: str, what: str) -> None:
    """``LinAlgError`` on every rank when some ``|R[j, j]| <= tol * max |R[i, i]|`` (the
    diagonal is gathered on every rank: the same verdict everywhere)."""
    diag: BlockCyclicArray = np.diagonal(r)  # type: ignore[assignment]  # distributed vector
    gathered = diag.to_numpy()  # on every rank (no root)
    assert gathered is not None
    d = np.abs(gathered)
    big = float(d.max()) if d.size else 0.0
    bad = np.flatnonzero(~(d > tol * big)) if big > 0 else np.arange(d.size)
    if bad.size:
        j = int(bad[0])
        raise np.linalg.LinAlgError(
            f"{op}: a is rank deficient: {what} {j} of "
            f"{'a' if what == 'column' else 'a (column of a^H)'} depends on the previous ones "
            f"(|R[{j}, {j}]| = {d[j]:.3g} <= cond * max|R[i, i]| = {tol * big:.3g}); lstsq "
            "solves full-rank problems by QR (no column pivoting)"
        )
