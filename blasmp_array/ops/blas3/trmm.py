"""Distributed TRMM (PBLAS ``pxtrmm``): ``alpha op(A) B`` (side 'left') or ``alpha B op(A)``
(side 'right') with ``A`` triangular, out of place.

A GEMM pipeline (``gemm.summa_product``) whose ``op(A)`` panel pieces are masked to the
triangle: blocks outside it are never sent (leading/trailing zero rows of a panel are trimmed,
zero blocks inside a wide step are filled by the receiver), diagonal blocks are masked by their
owner (unit diagonal: ones, the stored diagonal is not read).

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
from ..engine._warmup import begin_pipeline, sample_matrix, warmup_kernels
from ..engine.panels import Source, compose_op
from .gemm import check_method, check_stages, scale_local, summa_product

__all__ = ["trmm"]


def trmm(
    A: BlockCyclicArray,
    B: BlockCyclicArray,
    side: str = "left",
    lower: bool = True,
    trans: str = "N",
    unit_diagonal: bool = False,
    alpha: Any = 1,
    num_stages: int = 2,
    *,
    overwrite_b: bool = False,
    method: str = "auto",
    step_width: int | None = None,
) -> BlockCyclicArray:
    """Triangular matrix product (PBLAS ``pxtrmm``): ``alpha op(A) B`` (``side='left'``) or
    ``alpha B op(A)`` (``side='right'``).

    Parameters
    ----------
    A : BlockCyclicArray
        Square; only its ``lower`` (or upper) triangle is read, without the diagonal when
        ``unit_diagonal``. Needs square blocks (else redistributed with a warning).
    B : BlockCyclicArray
        ``m x n``; left untouched unless ``overwrite_b``.
    side : {'left', 'right'}
    lower : bool
    trans : {'N', 'T', 'C'}
    unit_diagonal : bool
    alpha : scalar
    num_stages : int
    overwrite_b : bool
        Write the result into ``B`` (which must be a stored array, not a view) and return it.
    method : {'auto', 'summa'}
        'auto': one local TRMM call on a 1x1 grid, the panel pipeline otherwise; 'summa'
        forces the pipeline.
    step_width : int, optional

    Returns
    -------
    BlockCyclicArray
        A new array laid out like ``B`` (or ``B`` itself with ``overwrite_b``).

    Notes
    -----
    ``m^2 n`` flops. On a 1x1 grid one local TRMM call; on larger grids the GEMM pipeline runs
    on the triangular panels (zero blocks skipped, diagonal blocks full), so it costs close to
    GEMM's ``2 m^2 n`` on small grids, less as the number of blocks grows.
    """
    name = "trmm"
    ck.check_array(A, "A", name)
    ck.check_array(B, "B", name)
    sd = ck.check_side(side, name)
    uplo = ck.check_uplo(lower, name)
    t = ck.check_trans(trans, "trans", name)
    if not isinstance(unit_diagonal, bool):
        raise TypeError(f"trmm: unit_diagonal must be True or False, got {unit_diagonal!r}")
    if not isinstance(overwrite_b, bool):
        raise TypeError(f"trmm: overwrite_b must be True or False, got {overwrite_b!r}")
    if overwrite_b and (B._transposed or B._conjugated):
        raise ValueError("trmm: overwrite_b=True needs B to be a stored array, not a lazy view")
    stages = check_stages(num_stages, name)
    XA, va, offa, exta = ck.split_window(A)
    XB, vb, offb, extb = ck.split_window(B)
    m, n = B.shape
    na = m if sd == "L" else n
    if A.shape != (na, na):
        raise ValueError(
            f"trmm: shapes do not conform: A {A.shape} must be {na}x{na} for B {B.shape} "
            f"with side={side!r}"
        )
    dtype = ck.result_dtype(name, A, B, out=B if overwrite_b else None)
    alpha = ck.cast_scalar(alpha, dtype, "alpha", name)
    grid = A.grid
    check_method(method, grid, name)
    sb = Source(XB.layout, vb, offset=offb, extent=extb)

    # the triangle of the view: of X's lower triangle if not transposed, else of the upper
    stored_uplo = ck.flip_uplo(uplo) if va in ("T", "C") else uplo
    opa = compose_op(va, t)

    # -- layouts: A square blocks a = B's blocking of A's dimension --------------------------
    axis = 0 if sd == "L" else 1
    blk_b = sb.block
    a = blk_b[axis] if A.block[0] != A.block[1] else A.block[0]
    want_b: tuple[int, int] = (a, blk_b[1]) if axis == 0 else (blk_b[0], a)
    # window views are read in place where their parent is already where the panels read it
    stored_b = want_b[::-1] if sb.transposed else want_b
    XA, offa, exta = ck.window_operand(A, XA, offa, exta, grid, (a, a), dtype)
    XB, offb, extb = ck.window_operand(B, XB, offb, extb, grid, stored_b, dtype)
    XA = ck.move(
        XA, grid, (a, a), "A", name, f"A has blocks {A.block} but needs square {a}x{a} blocks"
    )
    XB = ck.move(
        XB,
        grid,
        stored_b,
        "B",
        name,
        f"B has blocks {B.block} but A needs {want_b}",
    )
    XA, XB = ck.cast_storage(XA, dtype), ck.cast_storage(XB, dtype)
    Cw = new_array(BlockCyclicLayout((m, n), want_b, grid.shape), grid, dtype)

    b = grid.backend
    begin_pipeline(b, dtype)
    if m and n and grid.size == 1 and method == "auto":
        # one process holds everything: one TRMM call (m^2 n flops), out of place from B, or in
        # place on a copy of op(B) for a transposed view
        a_loc, op_a = (b.xp.conj(XA._data), "N") if opa == "R" else (XA._data, opa)
        diag = "U" if unit_diagonal else "N"
        if vb == "N":
            b.trmm(alpha, a_loc, XB._data, sd, stored_uplo, op_a, diag, b.compute, out=Cw._data)
        else:
            b.launch(b.compute, _copy_op, b.xp, XB._data, vb, Cw._data)
            b.trmm(alpha, a_loc, Cw._data, sd, stored_uplo, op_a, diag, b.compute)
    elif m and n:
        scale_local(b, Cw._data, dtype.type(0))
        if alpha != 0:
            width = step_width if grid.size > 1 or method == "summa" else max(na, 1)
            if sd == "L":
                # row panel: op(A)[my rows, k] (triangle-masked); column panel: B^T[my cols, k]
                tri = Source(XA.layout, opa, "tri", stored_uplo, unit_diagonal, offa, exta)
                summa_product(
                    name,
                    tri,
                    XA,
                    Source(XB.layout, compose_op(vb, "T"), offset=offb, extent=extb),
                    XB,
                    Cw,
                    alpha,
                    stages,
                    width,
                )
            else:
                # row panel: B[my rows, k]; column panel: op(A)^T[my cols, k]
                op_t = compose_op(opa, "T")
                tri = Source(XA.layout, op_t, "tri", stored_uplo, unit_diagonal, offa, exta)
                rows = Source(XB.layout, vb, offset=offb, extent=extb)
                summa_product(name, rows, XB, tri, XA, Cw, alpha, stages, width)
    b.synchronize()
    if overwrite_b:
        back = (
            Cw
            if (Cw.layout == B.layout and Cw.grid.same_as(B.grid))
            else ck.move(Cw, B.grid, B.block, "B", name, "B's layout differs from the working one")
        )
        ck.store(B, back)
        return B
    return Cw


def _copy_op(xp: Any, x: Any, op: str, out: Any) -> None:
    """``out[...] = op(x)`` for op in 'N', 'T', 'C', 'R' (R: conjugate)."""
    if op in ("T", "C"):
        x = x.T
    if op in ("C", "R"):
        xp.conjugate(x, out=out)
    else:
        out[...] = x


@warmup_kernels
def _warm_copy_op(backend: Backend, xp: Any, dtype: Any) -> None:
    """:func:`_copy_op` for every op (the triangle does not enter it)."""
    n = 6
    local = sample_matrix(xp, dtype, n)
    for view in ("N", "T", "C", "R"):
        _copy_op(xp, local, view, xp.empty((n, n), dtype))
