"""CholeskyQR2, and shifted CholeskyQR3 as its fallback: the QR of a tall-skinny matrix from the
distributed operators (SYRK, Cholesky, TRSM, TRMM), every flop in BLAS3.

One *pass* of CholeskyQR on ``X`` (``m x n``, ``m >= n``)::

    G = X^H X          SYRK/HERK (m n^2 flops): one reduction of the n x n Gram matrix
    G = R^H R          Cholesky of the small G (n^3 / 3)
    Q = X R^{-1}       TRSM from the right (m n^2)

In exact arithmetic ``Q`` is orthonormal; in floating point its departure from orthonormality
grows like ``kappa(X)^2 u`` (``u`` the unit roundoff), so a second pass on ``Q`` is needed
(CholeskyQR2: ``R = R_2 R_1``), and the pair is stable while ``kappa(X)`` stays below about
``u^{-1/2}`` (Yamamoto, Nakatsukasa, Yanagisawa and Fukaya, ETNA 44, 2015): ``1e8`` in float64,
``4e3`` in float32. Beyond it the Cholesky of ``G`` breaks down or returns an ``R_1`` that
leaves ``Q`` far from orthonormal.

*Shifted CholeskyQR3* (Fukaya, Kannan, Nakatsukasa, Yamamoto and Yanagisawa, SIAM J. Sci.
Comput. 42, 2020) factors ``G + s I`` instead, ``s = 11 (m n + n (n + 1)) u ||X||_F^2``: the
shift keeps the Cholesky away from breakdown and bounds ``kappa(Q_1)`` by about ``u^{-1/2}``
for any ``kappa(X)`` up to about ``u^{-1}``; CholeskyQR2 on ``Q_1`` then finishes
(``R = R_3 R_2 R_1``). Three passes instead of two.

The automatic choice (:func:`cholesky_qr`): the first pass runs unshifted; the Gram matrix of
its ``Q_1`` is the second pass's SYRK, computed anyway, and its departure
``delta = ||Q_1^H Q_1 - I||_F`` says how good the first pass was. ``delta <= DELTA_MAX`` (so
``kappa(Q_1) <= sqrt(3)``): the second pass finishes, CholeskyQR2. A Cholesky breakdown or a
larger ``delta``: the shifted CholeskyQR3 restarts from ``X`` with the Gram matrix already
computed (one SYRK saved). A breakdown there too, or a departure above ``DELTA_MAX`` before
its last pass (``X`` is rank deficient, or ``kappa(X)`` is beyond about ``1 / u``; the last
pass must start from a well-conditioned matrix to end orthonormal), returns ``None``: the
caller falls back to Householder QR, which always completes.
``||X||_F^2`` is the trace of ``G``: no extra pass over ``X``.

Flops: ``4 m n^2 + 2 n^3 / 3`` (two passes), ``6 m n^2 + n^3`` with the fallback (both plus the
``n^3 / 3`` of each ``R`` product); ``mode='r'`` skips the last TRSM.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..array import BlockCyclicArray
from ._triangle import local_diagonal
from .cholesky import cholesky
from .syrk import syrk
from .trmm import trmm
from .trsm import trsm

__all__ = ["cholesky_qr", "DELTA_MAX"]

#: the largest departure ``||Q_1^H Q_1 - I||_F`` of the first pass that CholeskyQR2 accepts
#: (``kappa(Q_1)^2 <= (1 + delta) / (1 - delta) = 3``: the second pass then orthogonalises to
#: working precision)
DELTA_MAX = 0.5


def cholesky_qr(
    x: BlockCyclicArray, want_q: bool = True
) -> tuple[BlockCyclicArray | None, BlockCyclicArray, str] | None:
    """``(Q, R, method)`` with ``x = Q R`` (``Q`` ``m x n`` with ``x``'s layout, ``R`` ``n x n``
    upper triangular with square blocks of ``x``'s column block; ``Q`` None unless
    ``want_q``), ``method`` 'cholqr2' or 'shifted cholqr3'; ``None`` when both break down
    (see the module docstring). ``x`` is read, never written (a window view in place).
    Collective."""
    m, n = x.shape
    g = syrk(x, trans="C", lower=False)  # the upper triangle of x^H x, n x n
    norm2 = _trace(g)
    first = _pass(x, g.copy(), 0.0, True)
    if first is not None:
        q1, r1 = first
        g2 = syrk(q1, trans="C", lower=False)
        if _departure(g2) <= DELTA_MAX:
            second = _pass(q1, g2, 0.0, want_q, overwrite=True)
            if second is not None:
                return second[0], _product(second[1], r1), "cholqr2"
    if not np.isfinite(norm2):
        return None
    u = float(np.finfo(x.dtype).eps) / 2
    shift = 11.0 * (m * n + n * (n + 1)) * u * norm2
    done = _pass(x, g, shift, True)
    if done is None:
        return None
    q, r = done
    for last in (False, True):
        gram = syrk(q, trans="C", lower=False)
        if last and _departure(gram) > DELTA_MAX:
            return None  # the last pass would not orthogonalise: rank deficient, or ~1/u
        step = _pass(q, gram, 0.0, want_q or not last, overwrite=True)
        if step is None:
            return None
        q, r = step[0], _product(step[1], r)  # type: ignore[assignment]
    return (q if want_q else None), r, "shifted cholqr3"


def _pass(
    x: BlockCyclicArray,
    g: BlockCyclicArray | None,
    shift: float,
    want_q: bool,
    overwrite: bool = False,
) -> tuple[Any, BlockCyclicArray] | None:
    """One CholeskyQR pass: ``(x R^{-1} or None, R)`` from the upper Gram matrix ``g`` (computed
    here when None; overwritten) plus ``shift`` on its diagonal; None on a Cholesky breakdown
    (identically on every rank: cholesky raises everywhere)."""
    if g is None:
        g = syrk(x, trans="C", lower=False)
    if shift:
        _add_to_diagonal(g, shift)
    try:
        r = cholesky(g, lower=False, overwrite_a=True, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    if not want_q:
        return None, r
    # x R^{-1}; a zero on R's diagonal cannot occur after a successful Cholesky
    q = trsm(r, x, side="right", lower=False, overwrite_b=overwrite)
    return q, r


def _product(r2: BlockCyclicArray, r1: BlockCyclicArray) -> BlockCyclicArray:
    """``R_2 R_1`` of two upper triangular factors (TRMM; the result is upper triangular)."""
    return trmm(r2, r1, side="left", lower=False, overwrite_b=True)


def _add_to_diagonal(g: BlockCyclicArray, value: float) -> None:
    _, ri, ci = local_diagonal(g.layout, g.grid)
    if ri is not None:
        g._data[ri, ci] += value


def _trace(g: BlockCyclicArray) -> float:
    """The real trace of the Hermitian ``g`` (``||x||_F^2`` for ``g = x^H x``), on every rank."""
    _, ri, ci = local_diagonal(g.layout, g.grid)
    be = g.backend
    part = 0.0 if ri is None else float(be.xp.sum(g._data[ri, ci].real, dtype=np.float64))
    return float(be.allreduce(part, op="sum"))


def _departure(g: BlockCyclicArray) -> float:
    """``||G - I||_F`` of the Hermitian ``G`` held in its upper triangle (the strict lower
    triangle zero), on every rank: ``2 ||triu(G - I)||_F^2 - ||diag(G - I)||^2``."""
    be, xp = g.backend, g.backend.xp
    d = g._data
    _, ri, ci = local_diagonal(g.layout, g.grid)
    total = float(xp.sum(xp.abs(d) ** 2, dtype=np.float64)) if d.size else 0.0
    diag = 0.0
    if ri is not None:
        dd = d[ri, ci]
        # the diagonal's share: |g_ii|^2 counted once above, |g_ii - 1|^2 wanted, once
        diag = float(xp.sum(xp.abs(dd - 1) ** 2, dtype=np.float64))
        total -= float(xp.sum(xp.abs(dd) ** 2, dtype=np.float64))
    s = be.allreduce(np.array([total, diag]), op="sum")
    value = 2.0 * float(s[0]) + float(s[1])
    return float(np.sqrt(max(value, 0.0))) if np.isfinite(value) else float("inf")
