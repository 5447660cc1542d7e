"""``A @ B`` (``np.matmul``): the product a NumPy user writes, routed to the right kernel.

* ``A.T @ A``, ``A @ A.T``, ``A.H @ A``, ``A @ A.H`` (the operands share storage and their views
  are transposes of each other) run SYRK/HERK (``n^2 k`` flops, half of GEMM's) and return the
  full symmetric (Hermitian) matrix (``ops.blas3.syrk.rank_k`` with ``full=True``);
* ``A @ x`` and ``x @ A`` (``x`` a vector) are matrix-vector products (``ops.blas3.matvec``:
  the matrix read once in place, two small host exchanges); for windows and mixed dtypes GEMM
  of ``A`` (``A^T``) with ``x``'s ``n x 1`` column face, both vectors;
  ``x @ y`` the inner product (local products, one allgather): a scalar on every rank;
* everything else is GEMM with the lazy views folded into its transpose flags.

A vector whose blocks do not conform to the matrix's (the K blocking) is moved quietly to the
matrix's blocks first: ``O(n)`` elements. Integer and bool operands are computed in float64
(the BLAS have no integer GEMM).

On a 1x1 grid the matrix products are one local BLAS call (the operators' ``method='auto'``)
and the fill is a local transposing copy on the device; on larger grids SYRK computes a
balanced band of blocks (the same work on every process) and the rest comes from one
distributed transpose.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...array import BlockCyclicArray, as_vector
from ..engine import _checks as ck
from ..engine.elementwise import aligned
from ..engine.panels import compose_op
from ..engine.redistribute import redistribute
from .gemm import gemm, gemm_one_process, memory_key
from .matvec import matvec, matvec_one_process
from .syrk import rank_k

__all__ = ["matmul", "dot_vectors", "conform_vector"]


def matmul(a: BlockCyclicArray, b: BlockCyclicArray) -> BlockCyclicArray:
    """Matrix product ``a @ b`` of two distributed matrices (what ``@`` and ``np.matmul`` call).

    Products of a matrix with its own transpose -- ``A.T @ A``, ``A @ A.T``, ``A.conj().T @ A``
    (``A.H @ A``), ``A @ A.H`` -- are recognised from the shared storage and computed as
    SYRK/HERK (``n^2 k`` flops, half of GEMM's) on the lower triangle; the upper triangle is
    then filled from it, so the result is the full symmetric (Hermitian) matrix. Everything
    else is GEMM with the lazy views folded into its transpose flags (``A.T @ B`` makes no
    transposed copy). Collective.

    Vectors follow NumPy: ``A @ x`` and ``x @ A`` are vectors, ``x @ y`` a scalar (the same
    on every rank; conjugating nothing, as NumPy's).

    Returns
    -------
    BlockCyclicArray or scalar
        The ``m x n`` product on ``a``'s grid (a vector, or a NumPy scalar, as above).
    """
    if type(a) is BlockCyclicArray and type(b) is BlockCyclicArray:
        # one process: the product and little else (A @ x, x @ A, A @ B)
        if a._vector != b._vector:
            fast = matvec_one_process(a, b, "N") if b._vector else matvec_one_process(b, a, "T")
        else:
            fast = None if a._vector else gemm_one_process(a, b)
        if fast is not None:
            return fast
    if not (isinstance(a, BlockCyclicArray) and isinstance(b, BlockCyclicArray)):
        for x, nm in ((a, "first"), (b, "second")):
            if not isinstance(x, BlockCyclicArray):
                raise TypeError(
                    f"matmul: the {nm} operand is a {type(x).__name__}, not a "
                    "BlockCyclicArray; distribute it with blasmp_array.from_numpy first"
                )
    ka, kb = a.shape[-1], b.shape[0]
    if ka != kb:
        raise ValueError(
            f"matmul: shapes {a.shape} and {b.shape} do not conform "
            f"({ka} (dim {a.ndim - 1}) != {kb} (dim 0))"
        )
    if b._vector:  # A @ x: GEMM with x's n x 1 column face
        if a._vector:
            return dot_vectors(a, b, "matmul")
        fast = matvec(a, b, "N")
        if fast is not None:
            return fast
        return as_vector(gemm(a, conform_vector(b, a.block[1], a.grid)))
    if a._vector:  # x @ B = (B^T x)^T: GEMM of op(B) = B^T with x's column face
        fast = matvec(b, a, "T")
        if fast is not None:
            return fast
        return as_vector(gemm(b, conform_vector(a, b.block[0], b.grid), trans_a="T"))
    if _same_stored_matrix(a, b):
        va, vb = ck.op_of(a), ck.op_of(b)
        for herm, flip in ((False, "T"), (True, "C")):
            if vb == compose_op(va, flip):
                name = "matmul(herk)" if herm else "matmul(syrk)"
                # the full matrix: the lower triangle mirrored, or a balanced band + transpose
                return rank_k(name, a, None, None, "N", "L", 1, 0, herm, 2, "auto", None, True)
    return gemm(a, b)


def conform_vector(x: BlockCyclicArray, b: int, grid: Any) -> BlockCyclicArray:
    """The column face of the vector ``x`` with ``b`` rows per block on ``grid`` (what GEMM
    needs for the K dimension of a matrix blocked so): as it is when it conforms, else a copy
    moved quietly (``O(n)`` elements)."""
    col = x._column
    if col.block[0] == b and col.grid.same_as(grid):
        return col
    return redistribute(col.resolve(), grid=grid, block=(b, 1))


def dot_vectors(x: BlockCyclicArray, y: BlockCyclicArray, what: str, conj: bool = False) -> Any:
    """``sum(x * y)`` (``sum(conj(x) * y)`` with ``conj``) of two vectors of one length: local
    products of aligned column faces, partial sums gathered and combined in rank order, so
    the same NumPy scalar on every rank. Integers stay integers (exact), as NumPy's."""
    if x.shape != y.shape:
        raise ValueError(f"{what}: vectors of lengths {x.shape[0]} and {y.shape[0]} differ")

    dt = x._dtype if x._dtype == y._dtype else np.result_type(x._dtype, y._dtype)
    if x.grid.size == 1 and y.grid is x.grid and dt.kind in "fc" and not (x.is_view or y.is_view):
        # one process, stored vectors of one floating dtype: the local dot (Python's cost
        # of the general path is several times the product's at n = 256)
        xp = x.backend.xp
        u, v = x._data.reshape(-1), y._data.reshape(-1)
        return dt.type(x.backend.asnumpy(xp.dot(xp.conj(u) if conj else u, v)))
    xs = x._column.resolve() if x.is_view else x._column
    ys = aligned(y._column.resolve() if y.is_view else y._column, xs, what, quiet=True)
    backend, xp = xs.backend, xs.backend.xp
    part = None
    if xs._data.size:
        u, v = xs._data.reshape(-1), ys._data.reshape(-1)
        if conj:
            u = xp.conj(u)
        if dt == np.bool_:
            part = bool(xp.any(u & v))
        else:
            part = backend.asnumpy(xp.dot(u.astype(dt, copy=False), v.astype(dt, copy=False)))
    parts = [part] if xs.grid.size == 1 else backend.allgather(part)
    valid = [p for p in parts if p is not None]
    if dt == np.bool_:
        return np.bool_(any(valid))
    return dt.type(functools.reduce(np.add, valid)) if valid else dt.type(0)


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
    same = memory_key(a._data) == memory_key(b._data)
    if a.grid.size == 1:
        return same
    return bool(a.grid.backend.allreduce(int(same), op="min"))
