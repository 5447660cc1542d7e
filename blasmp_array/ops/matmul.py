"""``A @ B`` (``np.matmul``): the product a NumPy user writes, routed to the right kernel.

* ``A.T @ A``, ``A @ A.T``, ``A.H @ A``, ``A @ A.H`` (the operands share storage and their views
  are transposes of each other) run SYRK/HERK (``n^2 k`` flops, half of GEMM's) and return the
  full symmetric (Hermitian) matrix (``ops.syrk.rank_k`` with ``full=True``);
* everything else is GEMM with the lazy views folded into its transpose flags.

On a 1x1 grid both are one local BLAS call (the operators' ``method='auto'``) and the fill is a
local transposing copy on the device; on larger grids SYRK computes a balanced band of blocks
(the same work on every process) and the rest comes from one distributed transpose.
"""

from __future__ import annotations

from typing import Any

from ..array import BlockCyclicArray
from . import _checks as ck
from .gemm import gemm
from .panels import compose_op
from .syrk import rank_k

__all__ = ["matmul"]


def matmul(a: BlockCyclicArray, b: BlockCyclicArray) -> BlockCyclicArray:
    """Matrix product ``a @ b`` of two distributed matrices (what ``@`` and ``np.matmul`` call).

    Products of a matrix with its own transpose -- ``A.T @ A``, ``A @ A.T``, ``A.conj().T @ A``
    (``A.H @ A``), ``A @ A.H`` -- are recognised from the shared storage and computed as
    SYRK/HERK (``n^2 k`` flops, half of GEMM's) on the lower triangle; the upper triangle is
    then filled from it, so the result is the full symmetric (Hermitian) matrix. Everything
    else is GEMM with the lazy views folded into its transpose flags (``A.T @ B`` makes no
    transposed copy). Collective.

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
    if _same_stored_matrix(a, b):
        va, vb = ck.op_of(a), ck.op_of(b)
        for herm, flip in ((False, "T"), (True, "C")):
            if vb == compose_op(va, flip):
                name = "matmul(herk)" if herm else "matmul(syrk)"
                # the full matrix: the lower triangle mirrored, or a balanced band + transpose
                return rank_k(name, a, None, None, "N", "L", 1, 0, herm, 2, "auto", None, True)
    return gemm(a, b)


def _same_stored_matrix(a: BlockCyclicArray, b: BlockCyclicArray) -> bool:
    """Whether ``a`` and ``b`` view the same stored matrix (``A.T @ A``; also two separate
    ``A[v]`` of one window, whose local matrices are distinct objects over the same memory).

    The same answer on every rank: the layouts decide first (global data), then one reduction
    of the per-rank memory comparison (an empty local matrix proves nothing on its own)."""
    if not a.grid.same_as(b.grid):
        return False
    if a.is_window or b.is_window:  # the same window of the same parent
        return a._window is not None and a._window.same_as(b._window)
    if a.shares_storage(b):
        return True
    if a.layout != b.layout or a.dtype != b.dtype:
        return False
    same = _memory(a._data) == _memory(b._data)
    if a.grid.size == 1:
        return same
    return bool(a.grid.backend.allreduce(int(same), op="min"))


def _memory(x: Any) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    ptr = getattr(getattr(x, "data", None), "ptr", None)  # CuPy
    if ptr is None:
        ptr = x.__array_interface__["data"][0]  # NumPy
    return int(ptr), tuple(x.shape), tuple(x.strides)
