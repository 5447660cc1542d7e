"""LU with partial pivoting of ONE local matrix by recursive halving of its columns on BLAS3
kernels (Toledo's recursive LU), for the 1x1 grid of :func:`blasmp_array.ops.lu.factor`.

Why: on one H200 cuSOLVER's ``dgetrf`` runs at 20.2 TFLOP/s at n = 16384 (145 ms), under 40%
of the same GPU's DGEMM rate. Halving the columns puts the bulk of the ``2 n^3 / 3`` flops
into one TRSM and one GEMM of size about ``n / 2`` per level; the library ``getrf`` only
factors the leaves, tall panels of at most ``leaf`` columns.

For the columns ``[c0, c1)`` of the rows ``[c0, m)``, split at ``mid``::

    [A11 A12]   factor [A11; A21] (recursion: pivots P1, L11, L21, U11)
    [A21 A22]   apply P1 to [A12; A22]
                A12 := L11^{-1} A12                        (TRSM, unit lower: U12)
                A22 := A22 - L21 A12                       (GEMM)
                factor A22 (recursion: pivots P2)
                apply P2 to the rows [mid, m) of [A11; A21]'s columns (L21)

so every leaf's interchanges reach every column once: its own through the library call, the
others through the applications of the levels above it. The pivots are LAPACK's (partial
pivoting picks the same rows whatever the update order, ties and rounding aside), 0-based:
row ``i`` was swapped with row ``piv[i]``, in order.

Host round trips: each leaf's pivots are read on the host (one synchronisation per leaf) and
turned into a row permutation; the permutations of the levels above are compositions of those
(NumPy, vectorised); each application moves only the rows that change, with one gather and one
scatter on the stream. A zero pivot does not stop anything: LAPACK's ``getrf`` completes past
it; the first one (its column, 1-based) is LAPACK's INFO of the whole matrix.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends.base import Backend, Stream

__all__ = ["recursive_getrf", "pivots_to_rows"]


def pivots_to_rows(piv: np.ndarray, r0: int, m: int) -> np.ndarray:
    """The row permutation of LAPACK's interchanges ``piv`` (0-based, absolute, one per row
    ``r0, r0 + 1, ...``, each ``>= `` its row) over the rows ``[r0, m)``: after them, row ``i``
    holds the old row ``src[i - r0]``."""
    src = np.arange(r0, m)
    moved: dict[int, int] = {}  # position -> old row, where it differs from the identity
    for j, p in enumerate(piv.tolist(), start=r0):
        if p != j:
            a, b = moved.get(j, j), moved.get(p, p)
            moved[j], moved[p] = b, a
    if moved:
        pos = np.fromiter(moved.keys(), dtype=np.int64, count=len(moved))
        src[pos - r0] = np.fromiter(moved.values(), dtype=np.int64, count=len(moved))
    return src


def _permute_rows(xp: Any, block: Any, dst: np.ndarray, src: np.ndarray) -> None:
    """``block[dst] = block[src]`` (rows; a gather, then a scatter, on the current stream)."""
    d, s = xp.asarray(dst), xp.asarray(src)
    block[d] = block[s]


def recursive_getrf(
    backend: Backend, a: Any, leaf: int, stream: Stream, align: int = 256
) -> tuple[np.ndarray, int]:
    """Factor the local ``m x n`` matrix ``a`` in place (``a = P L U``, LAPACK's layout) on
    ``stream``; return the host int32 pivots (``min(m, n)``, 0-based) and LAPACK's INFO
    (``j > 0``: ``U[j - 1, j - 1]`` is exactly zero; ``0`` otherwise).

    Columns split in halves rounded to a multiple of ``align`` down to ``leaf`` columns, which
    the backend's ``getrf`` factors. Host-synchronous (the pivots of each leaf are read).
    """
    if leaf < 1:
        raise ValueError(f"leaf must be >= 1, got {leaf}")
    m, n = a.shape
    k = min(m, n)
    xp = backend.xp
    piv = np.arange(k, dtype=np.int32)
    info = [0]

    def permute(src: np.ndarray, r0: int, c0: int, c1: int) -> None:
        """Apply the permutation ``src`` of the rows ``[r0, m)`` to the columns ``[c0, c1)``."""
        if c1 <= c0:
            return
        changed = np.flatnonzero(src != np.arange(r0, r0 + src.size))
        if changed.size:
            backend.launch(stream, _permute_rows, xp, a[r0:, c0:c1], changed, src[changed] - r0)

    def factor(c0: int, c1: int) -> np.ndarray:
        """Factor the columns ``[c0, c1)`` (rows ``[c0, m)``, updated by the columns before);
        return the permutation of the rows ``[c0, m)`` its interchanges make."""
        if c1 - c0 <= leaf:
            ipiv = xp.zeros(c1 - c0, dtype=np.int32)
            inf = xp.zeros(1, dtype=np.int32)
            backend.getrf(a[c0:, c0:c1], ipiv, inf, stream)
            backend.synchronize()
            p = backend.asnumpy(ipiv).astype(np.int64) + c0
            code = int(backend.asnumpy(inf)[0])
            piv[c0:c1] = p
            if code and not info[0]:
                info[0] = c0 + code
            return pivots_to_rows(p, c0, m)
        h = ((c1 - c0) // 2 // align) * align
        mid = c0 + (h if 0 < h < c1 - c0 else (c1 - c0) // 2)
        first = factor(c0, mid)
        permute(first, c0, mid, c1)
        backend.trsm(1, a[c0:mid, c0:mid], a[c0:mid, mid:c1], "L", "L", "N", "U", stream)
        backend.gemm(-1, a[mid:, c0:mid], a[c0:mid, mid:c1], 1, a[mid:, mid:c1], "N", "N", stream)
        second = factor(mid, c1)  # mid < c1 <= min(m, n): rows below mid exist
        permute(second, mid, c0, mid)
        both = first.copy()
        both[mid - c0 :] = first[second - c0]
        return both

    if k:
        rows = factor(0, k)
        if n > k:  # a wide matrix: the columns right of the square part, U12 = L11^{-1} P A12
            permute(rows, 0, k, n)
            backend.trsm(1, a[:k, :k], a[:k, k:], "L", "L", "N", "U", stream)
    backend.synchronize()
    return piv, info[0]
