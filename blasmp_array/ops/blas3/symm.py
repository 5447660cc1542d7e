"""Distributed SYMM (PBLAS ``pxsymm``): ``C := alpha A B + beta C`` (side 'left') or
``alpha B A + beta C`` (side 'right') with ``A`` symmetric, only one triangle of ``A`` read.

A GEMM pipeline (``gemm.summa_product``) whose ``A`` panel pieces come from the referenced
triangle: blocks of the other triangle are their mirror blocks transposed (packed by their
owner, so the transposed panel is still sent once per receiver), diagonal blocks are
symmetrised from their referenced triangle.

Communication protocol: GEMM's (the SUMMA plan of ``panels.py`` on the exchange engine of
``_exchange.py``; see ``gemm.py``): the signals and slots are the same, only the panel pieces
differ.
"""

from __future__ import annotations

from typing import Any

from ..._alloc import new_array
from ...array import BlockCyclicArray
from ...backends.base import Backend
from ...layout import BlockCyclicLayout
from ..engine import _checks as ck
from ..engine._triangle import symmetric_from_triangle
from ..engine._warmup import begin_pipeline, sample_matrix, warmup_kernels
from ..engine.panels import Source, compose_op
from .gemm import check_method, check_stages, output_target, scale_local, summa_product

__all__ = ["symm", "sym_source"]


def sym_source(
    XA: BlockCyclicArray,
    view: str,
    uplo: str,
    offset: tuple[int, int] = (0, 0),
    extent: tuple[int, int] | None = None,
) -> Source:
    """The symmetric matrix ``view(X)`` (``view`` of the window ``offset, extent`` of ``X``)
    whose ``uplo`` triangle (of the view) is referenced."""
    transposed = view in ("T", "C")
    conj = view in ("C", "R")
    stored_uplo = ck.flip_uplo(uplo) if transposed else uplo
    # a symmetric matrix equals its transpose: only the conjugation of the view remains
    return Source(XA.layout, "R" if conj else "N", "sym", stored_uplo, False, offset, extent)


def symm(
    A: BlockCyclicArray,
    B: BlockCyclicArray,
    C: BlockCyclicArray | None = None,
    side: str = "left",
    lower: bool = True,
    alpha: Any = 1,
    beta: Any = 0,
    num_stages: int = 2,
    *,
    method: str = "auto",
    step_width: int | None = None,
) -> BlockCyclicArray:
    """Symmetric matrix product (PBLAS ``pxsymm``): ``C := alpha A B + beta C`` (``side='left'``)
    or ``C := alpha B A + beta C`` (``side='right'``), ``A`` symmetric (complex symmetric, not
    Hermitian, for complex dtypes).

    Parameters
    ----------
    A : BlockCyclicArray
        Square; only its ``lower`` (or upper) triangle is read (the other may hold anything,
        NaN included). Needs square blocks (else redistributed with a warning).
    B : BlockCyclicArray
        ``m x n``.
    C : BlockCyclicArray, optional
        ``m x n``, updated in place and returned; else a new array.
    side : {'left', 'right'}
    lower : bool
    alpha, beta : scalar
    num_stages : int
    method : {'auto', 'summa'}
        'auto': on a 1x1 grid, A symmetrised into a full matrix and one local GEMM; the panel
        pipeline otherwise. 'summa' forces the pipeline.
    step_width : int, optional

    Returns
    -------
    BlockCyclicArray

    Notes
    -----
    ``2 m^2 n`` flops (left; ``2 m n^2`` right).
    """
    name = "symm"
    ck.check_array(A, "A", name)
    ck.check_array(B, "B", name)
    C = ck.check_output(C, name)
    sd = ck.check_side(side, name)
    uplo = ck.check_uplo(lower, name)
    stages = check_stages(num_stages, name)
    XA, va, offa, exta = ck.split_window(A)
    XB, vb, offb, extb = ck.split_window(B)
    m, n = B.shape
    na = m if sd == "L" else n
    if A.shape != (na, na) or (C is not None and C.shape != (m, n)):
        cs = f", C {C.shape}" if C is not None else ""
        raise ValueError(
            f"symm: shapes do not conform: A {A.shape} must be {na}x{na} for B {B.shape} "
            f"with side={side!r}{cs} (C must be {m}x{n})"
        )
    dtype = ck.result_dtype(name, A, B, out=C)
    alpha = ck.cast_scalar(alpha, dtype, "alpha", name)
    beta = ck.cast_scalar(beta, dtype, "beta", name)
    grid = A.grid
    check_method(method, grid, name)
    sb = Source(XB.layout, vb, offset=offb, extent=extb)

    # -- layouts: A square blocks a, equal to C's (or B's) blocking of A's dimension ---------
    axis = 0 if sd == "L" else 1
    if C is not None:
        blk_c = C.block
    else:
        blk_c = sb.block
    a = blk_c[axis]
    want_b = blk_c[::-1] if sb.transposed else blk_c
    # window views are read in place where their parent is already where the panels read it
    XA, offa, exta = ck.window_operand(A, XA, offa, exta, grid, (a, a), dtype)
    XB, offb, extb = ck.window_operand(B, XB, offb, extb, grid, want_b, dtype)
    XA = ck.move(
        XA, grid, (a, a), "A", name, f"A has blocks {A.block} but needs square {a}x{a} blocks"
    )
    XB = ck.move(
        XB,
        grid,
        want_b,
        "B",
        name,
        f"B has blocks {B.block} but C and A need {blk_c}",
    )
    XA, XB = ck.cast_storage(XA, dtype), ck.cast_storage(XB, dtype)
    Cw = C
    if C is not None and not C.grid.same_as(grid):
        Cw = ck.move(C, grid, C.block, "C", name, "C lives on another grid than A")
    if Cw is None:
        Cw = new_array(BlockCyclicLayout((m, n), blk_c, grid.shape), grid, dtype)
        beta = dtype.type(0)

    b = grid.backend
    begin_pipeline(b, dtype)
    if m and n and grid.size == 1 and method == "auto":
        # one process holds everything: symmetrise A once on the device, then one GEMM (faster
        # than the vendor's SYMM: 168 vs 200 ms for DGEMM vs DSYMM at n = 16384 on an H200)
        full = b.xp.empty((na, na), dtype)
        b.launch(b.compute, _symmetrised, b.xp, XA._data, va, uplo, full)
        xb, tb = _gemm_operand(b.xp, XB._data, vb)
        if sd == "L":
            b.gemm(alpha, full, xb, beta, Cw._data, "N", tb, b.compute)
        else:
            b.gemm(alpha, xb, full, beta, Cw._data, tb, "N", b.compute)
    elif m and n:
        scale_local(b, output_target(Cw)[1], beta)  # a window view: in its parent
        if alpha != 0:
            sym = sym_source(XA, va, uplo, offa, exta)
            width = step_width if grid.size > 1 or method == "summa" else max(na, 1)
            if sd == "L":
                # row panel: A_sym[my rows, k]; column panel: B^T[my cols, k]
                summa_product(
                    name,
                    sym,
                    XA,
                    Source(XB.layout, compose_op(vb, "T"), offset=offb, extent=extb),
                    XB,
                    Cw,
                    alpha,
                    stages,
                    width,
                )
            else:
                # row panel: B[my rows, k]; column panel: A_sym^T = A_sym[my cols, k]
                rows = Source(XB.layout, vb, offset=offb, extent=extb)
                summa_product(name, rows, XB, sym, XA, Cw, alpha, stages, width)
    b.synchronize()
    if C is not None and Cw is not C:
        back = ck.move(Cw, C.grid, C.block, "C", name, "C lives on another grid than A")
        ck.store(C, back)
        return C
    return Cw


def _symmetrised(xp: Any, x: Any, view: str, uplo: str, out: Any) -> None:
    """``out[...]`` = the symmetric matrix whose ``uplo`` triangle is that of ``view(x)``."""
    stored_uplo = ck.flip_uplo(uplo) if view in ("T", "C") else uplo
    symmetric_from_triangle(xp, x, stored_uplo, False, out)
    if view in ("C", "R"):  # a symmetric matrix equals its transpose: only conj remains
        xp.conjugate(out, out=out)


@warmup_kernels
def _warm_symmetrised(backend: Backend, xp: Any, dtype: Any) -> None:
    """:func:`_symmetrised` for both triangles and every view."""
    n = 6
    local = sample_matrix(xp, dtype, n)
    for uplo in ("L", "U"):
        for view in ("N", "T", "C", "R"):
            _symmetrised(xp, local, view, uplo, xp.empty((n, n), dtype))


def _gemm_operand(xp: Any, x: Any, view: str) -> tuple[Any, str]:
    """``(array, trans)`` with ``op_trans(array) == view(x)`` ('R' needs a conjugated copy)."""
    if view == "R":
        return xp.conj(x), "N"
    return x, view
