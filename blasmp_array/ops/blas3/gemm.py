"""Distributed GEMM (PBLAS ``pxgemm``): ``C := alpha op(A) op(B) + beta C``.

Driver: argument checks and layout reconciliation (``_checks``) -> :func:`summa_product`
(the panel pipeline of ``panels.py`` with one row operand and one column operand) -> the local
``backend.gemm`` of each step. SYMM and TRMM reuse :func:`summa_product` with structured
sources.

Communication protocol: the SUMMA plan of ``panels.py`` (``run_pipeline``) on the one exchange
engine of ``_exchange.py``. At step ``k`` the owners of ``op(A)[:, k]`` pack their blocks once
and ``put_signal`` them into slot ``k % num_stages`` of every process of the process row that
needs them (``ready[s, sender]`` += 1 there), the owners of ``op(B)[k, :]`` likewise down the
process columns; each process waits (compute stream) for the cumulative ready count of every
sender, runs ``C += alpha L_k R_k^T`` straight on the slot (zero copy when the segments are in
local order), then acks the senders of step ``k + num_stages`` (``ack[s, me]`` += 1 on them),
who wait for it (comm stream) before reusing that slot. ``finish`` ends it on every rank.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..._alloc import new_array
from ...array import BlockCyclicArray
from ...backends.base import Backend
from ...layout import BlockCyclicLayout
from ..engine import _checks as ck
from ..engine._warmup import begin_pipeline, sample_matrix, warmup_kernels
from ..engine.panels import (
    PanelSpec,
    Source,
    WindowTarget,
    compose_op,
    default_step_width,
    make_steps,
    run_pipeline,
)

__all__ = ["gemm", "summa_product", "scale_local"]

_METHODS = ("auto", "summa", "local")


def check_method(method: Any, grid: Any, op: str) -> str:
    if method not in _METHODS:
        raise ValueError(f"{op}: method must be one of {_METHODS}, got {method!r}")
    if method == "local" and grid.size != 1:
        raise ValueError(f"{op}: method='local' needs a 1x1 grid, got {grid.nprow}x{grid.npcol}")
    if method == "auto":
        return "local" if grid.size == 1 else "summa"
    return method


def check_stages(num_stages: Any, op: str) -> int:
    if isinstance(num_stages, bool) or not isinstance(num_stages, int | np.integer):
        raise TypeError(f"{op}: num_stages must be an integer >= 1, got {num_stages!r}")
    if num_stages < 1:
        raise ValueError(f"{op}: num_stages must be >= 1, got {num_stages}")
    return int(num_stages)


def _scale(c: Any, beta: Any, mask: Any) -> None:
    if mask is None:
        if beta == 0:
            c[...] = 0  # overwrite: never 0 * NaN
        else:
            c *= beta
    elif beta == 0:
        c[mask] = 0
    else:
        c[mask] *= beta


@warmup_kernels
def _warm_scale(backend: Backend, xp: Any, dtype: np.dtype) -> None:
    """:func:`_scale`: ``C := beta C`` with zero and non-zero beta, on a whole contiguous
    matrix, a strided block and under a boolean mask."""
    n = 6
    local = sample_matrix(xp, dtype, n)
    mask = xp.asarray(np.tril(np.ones((n, n), dtype=bool)))
    for beta in (dtype.type(0), dtype.type(2)):
        _scale(local.copy(), beta, None)
        _scale(local[1:5, 1:5], beta, None)
        _scale(local.copy(), beta, mask)


def output_target(C: BlockCyclicArray) -> tuple[BlockCyclicLayout | WindowTarget, Any]:
    """The target of a pipeline writing ``C`` and the local matrix it updates: ``C``'s layout
    and local matrix, or, for a window view, a :class:`~.panels.WindowTarget` and the slice of
    the parent's local matrix that holds this rank's part of the window."""
    w = C._window
    if w is None:
        return C.layout, C._data
    return WindowTarget.of(w), w.parent._data[w.local_slices()]


def scale_local(backend: Backend, c: Any, beta: Any, mask: Any = None) -> None:
    """Enqueue ``c := beta c`` (on ``mask`` only if given) on the compute stream."""
    if beta == 1 or c.size == 0:
        return
    backend.launch(backend.compute, _scale, c, beta, mask)


def summa_product(
    name: str,
    row: Source,
    row_x: BlockCyclicArray,
    col: Source,
    col_x: BlockCyclicArray,
    C: BlockCyclicArray,
    alpha: Any,
    num_stages: int,
    step_width: int | None,
) -> None:
    """``C_local += alpha * M_row @ M_col^T`` over the pipeline (collective).

    ``row`` is the virtual matrix ``op(A)`` (rows blocked like ``C``'s rows), ``col`` is
    ``op(B)^T`` (rows blocked like ``C``'s columns); both share the K dimension and blocking.
    ``row_x`` / ``col_x`` are the stored arrays the sources describe.
    """
    grid, b = C.grid, C.grid.backend
    kdim, kb = row.shape[1], row.block[1]
    width = default_step_width(b) if step_width is None else step_width
    steps = make_steps(kdim, kb, width)
    target, c_loc = output_target(C)
    specs = [PanelSpec(row, target, 0), PanelSpec(col, target, 1)]
    locals_ = [row_x._data, col_x._data]
    one = C.dtype.type(1)

    def update(k: int, panels: list[Any]) -> None:
        left, right = panels
        if left is None or right is None:
            return
        # C[my rows, my cols] += alpha * L_k[my rows, :] @ R_k[my cols, :]^T
        b.gemm(
            alpha,
            left.array,
            right.array,
            one,
            c_loc[left.lo : left.hi, right.lo : right.hi],
            "N",
            "T",
            b.compute,
        )

    run_pipeline(b, name, specs, locals_, steps, C.dtype, num_stages, grid.rank, update)


def gemm(
    A: BlockCyclicArray,
    B: BlockCyclicArray,
    C: BlockCyclicArray | None = None,
    alpha: Any = 1,
    beta: Any = 0,
    trans_a: str = "N",
    trans_b: str = "N",
    num_stages: int = 2,
    *,
    method: str = "auto",
    step_width: int | None = None,
) -> BlockCyclicArray:
    """General matrix product ``C := alpha op(A) op(B) + beta C`` (PBLAS ``pxgemm``).

    Parameters
    ----------
    A, B : BlockCyclicArray
        ``op(A)`` is ``m x k``, ``op(B)`` is ``k x n``. Lazy views (``A.T``, ``A.conj()``,
        ``A.H``) are folded into the transpose flags: no copy is made.
    C : BlockCyclicArray, optional
        ``m x n``, updated in place and returned. If omitted a new array is returned (``beta``
        is then irrelevant).
    alpha, beta : scalar
        Cast to the result dtype. ``beta == 0`` overwrites ``C`` (NaNs in ``C`` do not
        propagate).
    trans_a, trans_b : {'N', 'T', 'C'}
        ``op(X) = X``, ``X^T`` or ``X^H`` (case-insensitive).
    num_stages : int
        Panel buffers in flight (1: single-buffered, 2: double-buffered, ...).
    method : {'auto', 'summa', 'local'}
        'auto' runs one local BLAS call on a 1x1 grid and SUMMA otherwise; 'summa' forces the
        panel pipeline (also on 1x1).
    step_width : int, optional
        K columns per pipeline step (consecutive K-blocks are aggregated); default by backend.

    Returns
    -------
    BlockCyclicArray
        ``C``; its layout is ``C``'s, or (new) rows blocked like ``op(A)``'s rows and columns
        like ``op(B)``'s columns, on ``A``'s grid.

    Notes
    -----
    ``2 m n k`` flops. Dtypes promote as NumPy (``np.result_type``); operands are cast first.
    ``B`` (and ``C``) on another grid, or with blocks that do not conform (the K blocking of
    ``op(A)`` and ``op(B)`` must match; ``C``'s row/column blocks must match ``op(A)``'s rows
    and ``op(B)``'s columns) are redistributed with a warning naming the cost.
    Stream-ordered SUMMA: at step ``k`` the row panel ``op(A)[:, k]`` goes along process rows
    and the column panel ``op(B)[k, :]`` down process columns (one aggregated message per
    sender and receiver), with ``num_stages`` steps in flight.
    """
    name = "gemm"
    ck.check_array(A, "A", name)
    ck.check_array(B, "B", name)
    C = ck.check_output(C, name)
    ta, tb = ck.check_trans(trans_a, "trans_a", name), ck.check_trans(trans_b, "trans_b", name)
    stages = check_stages(num_stages, name)
    XA, va, offa, exta = ck.split_window(A)
    XB, vb, offb, extb = ck.split_window(B)
    opa, opb = compose_op(va, ta), compose_op(vb, tb)
    sa = Source(XA.layout, opa, offset=offa, extent=exta)
    sb = Source(XB.layout, opb, offset=offb, extent=extb)
    m, k = sa.shape
    k2, n = sb.shape
    if k != k2 or (C is not None and C.shape != (m, n)):
        cs = f", C {C.shape}" if C is not None else ""
        raise ValueError(
            f"gemm: shapes do not conform: op(A) is {m}x{k} (A {A.shape}, trans_a={ta!r}), "
            f"op(B) is {k2}x{n} (B {B.shape}, trans_b={tb!r}){cs}; need op(A) m x k, "
            "op(B) k x n, C m x n"
        )
    dtype = ck.result_dtype(name, A, B, out=C)
    alpha = ck.cast_scalar(alpha, dtype, "alpha", name)
    beta = ck.cast_scalar(beta, dtype, "beta", name)
    grid = A.grid
    meth = check_method(method, grid, name)

    # -- layouts: C's blocks (if given) win, then op(A)'s K blocking --------------------------
    rowblk = C.block[0] if C is not None else sa.block[0]
    colblk = C.block[1] if C is not None else sb.block[1]
    kblk = sa.block[1]
    # a window view is read in place (its offset folded into the plan) where its parent is
    # already where SUMMA reads it; else it is copied, then moved like any operand
    XA, offa, exta = ck.window_operand(A, XA, offa, exta, grid, _stored((rowblk, kblk), opa), dtype)
    XB, offb, extb = ck.window_operand(B, XB, offb, extb, grid, _stored((kblk, colblk), opb), dtype)
    XA = ck.move(
        XA,
        grid,
        _stored((rowblk, kblk), opa),
        "A",
        name,
        f"op(A) has blocks {sa.block} but C needs {rowblk} rows per block",
    )
    XB = ck.move(
        XB,
        grid,
        _stored((kblk, colblk), opb),
        "B",
        name,
        f"op(B) has blocks {sb.block} but needs ({kblk}, {colblk}) "
        "(K blocking of op(A), columns of C)",
    )
    Cw = C
    if C is not None and not C.grid.same_as(grid):
        Cw = ck.move(C, grid, C.block, "C", name, "C lives on another grid than A")
    XA, XB = ck.cast_storage(XA, dtype), ck.cast_storage(XB, dtype)
    if Cw is None:
        Cw = new_array(BlockCyclicLayout((m, n), (rowblk, colblk), grid.shape), grid, dtype)
        beta = dtype.type(0)

    b = grid.backend
    begin_pipeline(b, dtype)
    if m and n:
        if meth == "local":
            _local_gemm(b, alpha, XA._data, opa, XB._data, opb, beta, Cw._data)
        else:
            scale_local(b, output_target(Cw)[1], beta)  # a window view: in its parent
            if k:
                summa_product(
                    name,
                    Source(XA.layout, opa, offset=offa, extent=exta),
                    XA,
                    Source(XB.layout, compose_op(opb, "T"), offset=offb, extent=extb),
                    XB,
                    Cw,
                    alpha,
                    stages,
                    step_width,
                )
    b.synchronize()
    if C is not None and Cw is not C:
        back = ck.move(Cw, C.grid, C.block, "C", name, "C lives on another grid than A")
        ck.store(C, back)
        return C
    return Cw


def gemm_one_process(A: BlockCyclicArray, B: BlockCyclicArray) -> BlockCyclicArray | None:
    """``A @ B`` on one process (stored operands or lazy transposes, one BLAS dtype): the
    local product into a fresh result, with :func:`gemm`'s layout and nothing else; None
    where :func:`gemm`'s general path is needed (windows, conjugated views, mixed dtypes,
    shapes that do not conform) or SYRK is (a matrix times its own transpose). At n = 4096
    on a GPU the general path's checks delayed the one GEMM kernel by a visible share of its
    time (docs/blas3.md, "The fixed cost of a call")."""
    if not ck.one_process_pair(A, B) or A._conjugated or B._conjugated or A._vector or B._vector:
        return None
    (ma, ka), (kb, nb) = A._shape2, B._shape2
    if ka != kb:
        return None
    if A._transposed != B._transposed and (
        A._data is B._data or memory_key(A._data)[0] == memory_key(B._data)[0]
    ):
        return None  # A.T @ A, A @ A.T: matmul's SYRK
    opa, opb = ("T" if A._transposed else "N"), ("T" if B._transposed else "N")
    layout = _product_layout(ma, nb, A.block[0], B.block[1])
    g = A.grid
    out = new_array(layout, g, A._dtype)
    be = g.backend
    begin_pipeline(be, A._dtype)
    if ma and nb:
        one, zero = A._dtype.type(1), A._dtype.type(0)
        _local_gemm(be, one, A._data, opa, B._data, opb, zero, out._data)
    be.synchronize()
    return out


@functools.lru_cache(maxsize=64)
def _product_layout(m: int, n: int, mb: int, nb: int) -> BlockCyclicLayout:
    return BlockCyclicLayout((m, n), (mb, nb), (1, 1))


def memory_key(x: Any) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """``(address, shape, strides)`` of the local array ``x`` (NumPy or CuPy): equal keys, one
    matrix in one memory."""
    ptr = getattr(getattr(x, "data", None), "ptr", None)  # CuPy
    if ptr is None:
        ptr = x.__array_interface__["data"][0]  # NumPy
    return int(ptr), tuple(x.shape), tuple(x.strides)


def _stored(block: tuple[int, int], op: str) -> tuple[int, int]:
    """Block of the stored matrix whose ``op`` view has ``block``."""
    return (block[1], block[0]) if op in ("T", "C") else block


def _local_gemm(b: Any, alpha: Any, a: Any, opa: str, x: Any, opb: str, beta: Any, c: Any) -> None:
    """One local BLAS call (1x1 grid): the whole matrices are local."""
    if opa == "R":
        a, opa = b.xp.conj(a), "N"
    if opb == "R":
        x, opb = b.xp.conj(x), "N"
    if a.shape[1 if opa == "N" else 0] == 0:
        scale_local(b, c, beta)
        return
    b.gemm(alpha, a, x, beta, c, opa, opb, b.compute)
