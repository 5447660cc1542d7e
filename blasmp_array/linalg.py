"""Public linear-algebra namespace: the distributed BLAS3 set with PBLAS semantics and
NumPy-style keywords, plus :func:`matmul` (what ``A @ B`` and ``np.matmul`` call).

==============================  =========================================  ==============
function                        operation                                  flops
==============================  =========================================  ==============
:func:`gemm`                    ``C := alpha op(A) op(B) + beta C``        ``2 m n k``
:func:`symm`                    ``C := alpha A B + beta C`` (A symmetric)  ``2 m^2 n``
:func:`syrk`                    ``C := alpha op(A) op(A)^T + beta C``      ``n^2 k``
:func:`syr2k`                   ``C := alpha (A B^T + B A^T) + beta C``    ``2 n^2 k``
:func:`trmm`                    ``alpha op(A) B`` (A triangular)           ``m^2 n``
:func:`trsm`                    solve ``op(A) X = alpha B``                ``m^2 n``
:func:`solve_triangular`        SciPy's signature on top of :func:`trsm`
:func:`cholesky`                ``A = U^H U`` (or ``L L^H``), SciPy's API   ``n^3 / 3``
:func:`cho_factor`              the factor for :func:`cho_solve`            ``n^3 / 3``
:func:`cho_solve`               solve with the factor (two TRSMs)          ``2 n^2 k``
:func:`solve`                   ``assume_a='pos'``: Cholesky + two TRSMs
==============================  =========================================  ==============
"""

from __future__ import annotations

from typing import Any

from .array import BlockCyclicArray
from .ops import _checks as ck
from .ops.gemm import gemm
from .ops.panels import compose_op
from .ops.symm import symm
from .ops.syr2k import syr2k
from .ops.syrk import rank_k, syrk, triangle_mask
from .ops.trmm import trmm

__all__ = [  # noqa: F822
    "gemm",
    "symm",
    "syrk",
    "syr2k",
    "trmm",
    "trsm",
    "solve_triangular",
    "matmul",
    "cholesky",
    "cho_factor",
    "cho_solve",
    "solve",
]


def matmul(a: BlockCyclicArray, b: BlockCyclicArray) -> BlockCyclicArray:
    """Matrix product ``a @ b`` of two distributed matrices (what ``@`` and ``np.matmul`` call).

    Products of a matrix with its own transpose -- ``A.T @ A``, ``A @ A.T``, ``A.conj().T @ A``
    (``A.H @ A``), ``A @ A.H`` -- are recognised from the shared storage and computed as
    SYRK/HERK (``n^2 k`` flops, half of GEMM's) on the lower triangle; the upper triangle is
    then filled from it with a distributed transpose, so the result is the full symmetric
    (Hermitian) matrix. Everything else is GEMM with the lazy views folded into its transpose
    flags (``A.T @ B`` makes no transposed copy). Collective.

    Returns
    -------
    BlockCyclicArray
        The ``m x n`` product on ``a``'s grid.
    """
    for x, nm in ((a, "first"), (b, "second")):
        if not isinstance(x, BlockCyclicArray):
            raise TypeError(
                f"matmul: the {nm} operand is a {type(x).__name__}, not a BlockCyclicArray; "
                "distribute it with blasmp_array.from_numpy first"
            )
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"matmul: shapes {a.shape} and {b.shape} do not conform "
            f"({a.shape[1]} (dim 1) != {b.shape[0]} (dim 0))"
        )
    if a.shares_storage(b) and a.grid.same_as(b.grid):
        _, va = ck.split_view(a)
        _, vb = ck.split_view(b)
        for herm, flip in ((False, "T"), (True, "C")):
            if vb == compose_op(va, flip):
                name = "matmul(herk)" if herm else "matmul(syrk)"
                low = rank_k(name, a, None, None, "N", "L", 1, 0, herm, 2, "auto", None)
                return _fill_upper(low, herm and low.dtype.kind == "c")
    return gemm(a, b)


def _fill_upper(C: BlockCyclicArray, hermitian: bool) -> BlockCyclicArray:
    """``tril(C) + tril(C, -1)^T`` (``^H``) for ``C`` whose strict upper triangle is zero."""
    from .ops.redistribute import transpose

    strict = triangle_mask(C, "L")
    strict &= ~_diagonal_mask(C)
    lower = BlockCyclicArray(C._data * strict, C.layout, C.grid)
    upper = transpose(lower, conjugate=hermitian)
    if upper.layout != C.layout:
        upper = upper.redistribute(grid=C.grid, block=C.block)
    C._data += upper._data
    return C


def _diagonal_mask(C: BlockCyclicArray):
    g = C.grid
    rows = C.layout.local_rows(g.myrow)[:, None]
    cols = C.layout.local_cols(g.mycol)[None, :]
    return g.backend.asarray(rows == cols)


def __getattr__(name: str) -> Any:
    # TRSM lives in ops/trsm.py (imported lazily so this namespace imports without it)
    if name in ("trsm", "solve_triangular"):
        from .ops import trsm as _trsm

        return getattr(_trsm, name)
    # Cholesky lives in ops/cholesky.py (imported lazily likewise)
    if name in ("cholesky", "cho_factor", "cho_solve", "solve"):
        from .ops import cholesky as _cholesky

        return getattr(_cholesky, name)
    raise AttributeError(f"module 'blasmp_array.linalg' has no attribute {name!r}")
