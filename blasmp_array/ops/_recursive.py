"""Recursive (divide-and-conquer) TRSM and Cholesky of ONE process's local matrix.

Used where a 1x1 grid holds everything and the vendor's single call is slower than GEMM: on
the GPU, cuBLAS ``trsm`` and cuSOLVER ``potrf`` run well below cuBLAS ``gemm``'s rate at large
``n`` (one H200, float64, n = 16384: DGEMM 52-59 TFLOP/s, potrf 23.7, trsm ~37). Splitting the
triangle in halves puts half of a TRSM's flops (and two thirds of a Cholesky's) into one large
GEMM / SYRK per level; recursing down to a ``base`` order leaves only small vendor calls on the
critical path. Elmroth, Gustavson, Jonsson & Kagstrom, "Recursive blocked algorithms and
hybrid data structures for dense matrix library software", SIAM Review 46 (2004).

Everything runs in order on the backend's compute stream: no signals, no second stream, no
host synchronisation (the caller synchronises once). The operands are views of the local
matrix (C-ordered, strided): the backend kernels take strided 2-D views.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["split_point", "trsm", "potrf"]


def split_point(n: int, base: int) -> int:
    """Order of the leading half: about ``n / 2``, a multiple of ``base`` (``0 < h < n``)."""
    return max(base, (n // 2) // base * base)


def trsm(
    be: Any,
    alpha: Any,
    a: Any,
    x: Any,
    side: str,
    uplo: str,
    trans: str,
    diag: str,
    base: int,
) -> None:
    """``x := alpha op(a)^{-1} x`` (side 'L') or ``alpha x op(a)^{-1}`` (side 'R') in place,
    the backend's ``trsm`` semantics, by recursive halving of ``a`` down to order ``base``.

    ``op(a)`` is lower triangular when ``(uplo == 'L') == (trans == 'N')``; the solve runs
    forward for a lower ``op(a)`` on the left (backward on the right) and the other way for an
    upper one. Between the two half solves one GEMM subtracts the solved half's contribution;
    ``alpha`` scales the first half solve and enters that GEMM as ``beta``, so ``x`` is read once.
    """
    n = a.shape[0]
    if n <= base:
        be.trsm(alpha, a, x, side, uplo, trans, diag, be.compute)
        return
    h = split_point(n, base)
    lower_op = (uplo == "L") == (trans == "N")
    a11, a22 = a[:h, :h], a[h:, h:]
    # op(a)'s block below the diagonal (lower op) or above it (upper op), as a stored view and
    # the op to apply to it: op(a)[i, j] = op(a[j, i]) when transposed
    below = (a[h:, :h], "N") if trans == "N" else (a[:h, h:], trans)
    above = (a[:h, h:], "N") if trans == "N" else (a[h:, :h], trans)
    one = 1
    if side == "L":
        x1, x2 = x[:h], x[h:]
        if lower_op:  # X1 = T11^-1 aB1; B2 = aB2 - T21 X1; X2 = T22^-1 B2
            first, second, (t, op), upd_in, upd_out = (a11, x1), (a22, x2), below, x1, x2
        else:  # X2 first, then B1 = aB1 - T12 X2, X1
            first, second, (t, op), upd_in, upd_out = (a22, x2), (a11, x1), above, x2, x1
        trsm(be, alpha, first[0], first[1], side, uplo, trans, diag, base)
        be.gemm(-one, t, upd_in, alpha, upd_out, op, "N", be.compute)
    else:
        x1, x2 = x[:, :h], x[:, h:]
        if lower_op:  # X T = B: X2 = B2 T22^-1 first; B1 = aB1 - X2 T21; X1 = B1 T11^-1
            first, second, (t, op), upd_in, upd_out = (a22, x2), (a11, x1), below, x2, x1
        else:  # X1 first, then B2 = aB2 - X1 T12, X2
            first, second, (t, op), upd_in, upd_out = (a11, x1), (a22, x2), above, x1, x2
        trsm(be, alpha, first[0], first[1], side, uplo, trans, diag, base)
        be.gemm(-one, upd_in, t, alpha, upd_out, "N", op, be.compute)
    trsm(be, one, second[0], second[1], side, uplo, trans, diag, base)


def leaves(n: int, base: int) -> list[int]:
    """Offsets of the diagonal blocks :func:`potrf` factors with the vendor call, in order."""
    if n <= base:
        return [0]
    h = split_point(n, base)
    return leaves(h, base) + [h + o for o in leaves(n - h, base)]


def potrf(be: Any, a: Any, uplo: str, info: Any, base: int) -> None:
    """Cholesky of the Hermitian positive definite ``a`` in place, the backend's ``potrf``
    semantics (only the ``uplo`` triangle is read and written), by recursive halving.

    ``info`` is an ``int32`` backend array of ``len(leaves(n, base))`` words: the vendor call on
    the ``i``-th diagonal block writes its INFO into ``info[i]`` (stream-ordered, not read
    here). The first non-zero word ``i`` names the leading minor of order
    ``leaves(n, base)[i] + info[i]`` (see :func:`first_failure`). After a failure the later
    blocks hold garbage, as with LAPACK; nothing raises on the stream.

    Lower: ``L11 = chol(A11)``; ``L21 = A21 L11^{-H}`` (recursive TRSM); ``A22 -= L21 L21^H``
    (SYRK; a GEMM for complex dtypes, whose other triangle is unspecified anyway);
    ``L22 = chol(A22)``. Upper is the mirror image (``U12 = U11^{-H} A12``, ``A22 -= U12^H U12``).
    """
    n = a.shape[0]
    if n <= base:
        be.potrf(a, uplo, info[:1], be.compute)
        return
    h = split_point(n, base)
    first = len(leaves(h, base))
    a11, a22 = a[:h, :h], a[h:, h:]
    potrf(be, a11, uplo, info[:first], base)
    complex_ = np.dtype(a.dtype).kind == "c"
    if uplo == "L":
        a21 = a[h:, :h]
        trsm(be, 1, a11, a21, "R", "L", "C", "N", base)
        if complex_:
            be.gemm(-1, a21, a21, 1, a22, "N", "C", be.compute)
        else:
            be.syrk(-1, a21, 1, a22, "L", "N", be.compute)
    else:
        a12 = a[:h, h:]
        trsm(be, 1, a11, a12, "L", "U", "C", "N", base)
        be.syrk(-1, a12, 1, a22, "U", "C" if complex_ else "T", be.compute)
    potrf(be, a22, uplo, info[first:], base)


def first_failure(info: np.ndarray, n: int, base: int) -> int:
    """The order of the first leading minor that is not positive definite, from the host copy
    of :func:`potrf`'s INFO words; ``n + 1`` when there is none (the pipeline's convention)."""
    for off, word in zip(leaves(n, base), info.tolist(), strict=True):
        if word > 0:
            return off + int(word)
    return n + 1
