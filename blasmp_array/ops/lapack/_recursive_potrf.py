"""Cholesky of ONE local matrix by recursive halving on BLAS3 kernels (Gustavson's recursive
``potrf``), for the 1x1 grid of :func:`blasmp_array.ops.lapack.cholesky.factor`.

Why: a library ``potrf`` is tuned for the whole range of sizes; on one H200 cuSOLVER's
``dpotrf`` runs at 23.7 TFLOP/s at n = 16384, under half of the same GPU's DGEMM rate. Halving
the matrix puts most of the ``n^3 / 3`` flops into two large kernels per level, a TRSM and a
SYRK (HERK) of size ``n / 2``; the library ``potrf`` only factors the leaves. Measured there
(docs/cholesky.md, "Why the recursion gains so little"): DSYRK runs at 45 TFLOP/s at
n/2 = 8192 but DTRSM only at 31, so the gain is small: at n = 16384 ``bm.linalg.cholesky``
took 0.064 s with leaves of 4096 against 0.066 s with one cuSOLVER call for the whole matrix
(0.061 against 0.064 once the finite check got faster; ``cupy.linalg.cholesky`` 0.061 s in
the same runs).

Written for ``lower`` (``upper`` is the mirror image, ``A = U^H U``)::

    A = [A11   .  ]     L11 = potrf(A11)                       (recursion)
        [A21  A22 ]     L21 = A21 L11^{-H}                     (TRSM, side 'R')
                        A22 := A22 - L21 L21^H                 (SYRK / HERK, lower triangle)
                        L22 = potrf(A22)                       (recursion)

Only the ``uplo`` triangle is read; it is the only one written, as in LAPACK's ``potrf``,
except for complex ``lower``, whose update is a GEMM that also writes the other triangle of
``A22`` (left unspecified, as the distributed pipeline leaves it). ``halve=False`` splits at
``leaf`` instead: the right-looking blocked algorithm, measured as an alternative.

Every kernel is enqueued on one stream, nothing is read on the host. INFO: each leaf writes its
own into one element of an int32 vector; the first non-zero one, plus the leaf's offset, is
LAPACK's INFO of the whole matrix (the leaves before it succeeded, so its minors are the whole
matrix's). After a failing leaf the remaining kernels compute garbage but never raise, as the
distributed pipeline does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...backends.base import Backend, Stream

__all__ = ["recursive_potrf", "leaf_offsets", "first_failure"]


def leaf_offsets(n: int, leaf: int, align: int = 256, halve: bool = True) -> list[tuple[int, int]]:
    """The ``(offset, size)`` of each leaf that :func:`recursive_potrf` factors, in order.

    ``halve``: a block of ``m > leaf`` rows splits at ``m / 2`` rounded to a multiple of
    ``align`` (when that leaves both halves non-empty), so the large kernels see aligned sizes.
    Otherwise it splits at ``leaf``: the right-looking blocked algorithm with block ``leaf``.
    """
    if leaf < 1:
        raise ValueError(f"leaf must be >= 1, got {leaf}")
    out: list[tuple[int, int]] = []
    _walk(0, n, leaf, _splitter(leaf, align, halve), lambda lo, hi: out.append((lo, hi - lo)))
    return out


def _splitter(leaf: int, align: int, halve: bool) -> Callable[[int], int]:
    def split(m: int) -> int:
        if not halve:
            return leaf
        h = (m // 2 // align) * align
        return h if 0 < h < m else m // 2

    return split


def _walk(
    lo: int,
    hi: int,
    leaf: int,
    split: Callable[[int], int],
    on_leaf: Callable[[int, int], None],
    on_update: Callable[[int, int, int], None] | None = None,
) -> None:
    """Visit the leaves ``[lo, hi)`` in order; ``on_update(lo, mid, hi)`` after the leaves of
    ``[lo, mid)`` (the second half is a loop, so the depth is ``log(n / leaf)`` at most)."""
    while hi - lo > leaf:
        mid = lo + split(hi - lo)
        _walk(lo, mid, leaf, split, on_leaf, on_update)
        if on_update is not None:
            on_update(lo, mid, hi)
        lo = mid
    if hi > lo:
        on_leaf(lo, hi)


def recursive_potrf(
    backend: Backend,
    a: Any,
    lower: bool,
    leaf: int,
    stream: Stream,
    align: int = 256,
    halve: bool = True,
) -> Any:
    """Factor the square local matrix ``a`` in place (``a = L L^H`` or ``U^H U``) on ``stream``.

    Returns a device (backend) int32 vector with one LAPACK INFO per leaf of
    :func:`leaf_offsets` (same ``n``, ``leaf``, ``align``, ``halve``); :func:`first_failure`
    turns it into the INFO of the whole matrix.
    """
    n = a.shape[0]
    info = backend.xp.zeros(max(len(leaf_offsets(n, leaf, align, halve)), 1), dtype=np.int32)
    complex_ = np.dtype(a.dtype).kind == "c"
    trans = "C" if complex_ else "T"
    uplo = "L" if lower else "U"
    index = iter(range(len(info)))

    def factor_leaf(lo: int, hi: int) -> None:
        j = next(index)
        backend.potrf(a[lo:hi, lo:hi], uplo, info[j : j + 1], stream)

    def update(lo: int, mid: int, hi: int) -> None:
        a11 = a[lo:mid, lo:mid]
        if lower:
            a21 = a[mid:hi, lo:mid]
            backend.trsm(1.0, a11, a21, "R", "L", trans, "N", stream)
            if complex_:  # HERK of op 'N' is not in the backend's API: a GEMM, as the pipeline
                backend.gemm(-1.0, a21, a21, 1.0, a[mid:hi, mid:hi], "N", "C", stream)
            else:
                backend.syrk(-1.0, a21, 1.0, a[mid:hi, mid:hi], "L", "N", stream)
        else:
            a12 = a[lo:mid, mid:hi]
            backend.trsm(1.0, a11, a12, "L", "U", trans, "N", stream)
            backend.syrk(-1.0, a12, 1.0, a[mid:hi, mid:hi], "U", trans, stream)

    _walk(0, n, leaf, _splitter(leaf, align, halve), factor_leaf, update)
    return info


def first_failure(info: np.ndarray, n: int, leaf: int, align: int = 256, halve: bool = True) -> int:
    """LAPACK's INFO of the whole matrix from the per-leaf ``info`` (host array): the order of
    the first leading minor that is not positive definite, ``0`` when there is none."""
    for (off, _), code in zip(leaf_offsets(n, leaf, align, halve), info.tolist(), strict=False):
        if code:
            return off + int(code)
    return 0
