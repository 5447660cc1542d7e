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

Every process holds whole rows on a grid of one process column (``P x 1``, and one process),
and a pass there needs no distributed operator: each process forms the Gram matrix of its rows
(one local HERK), the ``n x n`` partial sums travel to every process and are added in rank
order (one exchange, :func:`ops.engine._messages.exchange`: the same bits everywhere), and every
process factors the sum and solves its rows (local potrf and TRSM): the textbook CholeskyQR2,
one reduction per pass. ``R`` is replicated, then stored block-cyclically. A matrix on a grid
of several process columns is moved to the ``P Q x 1`` grid of the same processes
(:meth:`ProcessGrid.one_column`), factored there, and ``Q`` and ``R`` are moved back: two
redistributions of ``m x n`` against the distributed SYRK, Cholesky and TRSM, whose panels of
a matrix of few block columns keep most process columns idle (the default 1 x 2 grid of two
CPU processes, 200000 x 64: docs/qr.md). With ``_WHOLE_ROWS`` off (the tests) those operators
run the passes on the grid as it is.

Flops: ``4 m n^2 + 2 n^3 / 3`` (two passes), ``6 m n^2 + n^3`` with the fallback (both plus the
``n^3 / 3`` of each ``R`` product); ``mode='r'`` skips the last TRSM.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...array import BlockCyclicArray
from ...backends._host_copy import assign, take_rows
from ...backends.base import Backend
from ...layout import BlockCyclicLayout
from ..blas3.syrk import syrk
from ..blas3.trmm import trmm
from ..blas3.trsm import trsm
from ..engine._exchange import positions_index
from ..engine._messages import exchange, sum_stack
from ..engine._triangle import local_diagonal
from ..engine._warmup import begin_pipeline, warmup_kernels
from ..engine.redistribute import redistribute
from .cholesky import cholesky

__all__ = ["cholesky_qr", "DELTA_MAX", "departure_squared", "identity_into"]

#: a grid of one process column runs the passes on whole local rows (tests turn it off to run
#: the distributed operators there too)
_WHOLE_ROWS = True

#: rows per GEMM of the local Gram matrix on whole rows (:func:`_local_gram`): ``X^H X`` as the
#: sum of the chunks' ``X_i^H X_i``, one batched GEMM (real dtypes; 0: one SYRK/HERK of all
#: rows; None: :data:`GEMM_GRAM_ROWS` where the backend asks for GEMMs,
#: ``Backend.cholqr_gemms``, and ``n <= GEMM_GRAM_MAX_N``, else 0). A cuBLAS SYRK of a
#: 1048576 x 256 matrix has a 256 x 256 output to spread over the GPU; the batch gives it
#: ``m / GRAM_ROWS`` times more.
GRAM_ROWS: int | None = None

#: the chunk of the batched Gram GEMM where the backend asks for GEMMs (one H100,
#: 1048576 x 256: 5.1 ms against the SYRK's 6.8; 4096- and 65536-row chunks 5.1 and 5.6;
#: docs/qr.md)
GEMM_GRAM_ROWS = 16384

#: the widest matrix whose Gram matrix is the batched GEMM by default: from 512 columns the
#: SYRK has work enough and the GEMM's doubled flops lose (one H100, whole calls with the
#: inverse: 262144 x 512 12.8 ms with the SYRK, 14.7 with the GEMMs; 131072 x 1024 21.4
#: and 25.0; 32768 x 4096 75.1 and 95.5; docs/qr.md)
GEMM_GRAM_MAX_N = 256

#: the local ``X R^{-1}`` on whole rows (:func:`_solve_upper_right`) as ``X`` times the
#: explicit ``R^{-1}`` (a TRSM of the identity, ``n^3 / 3`` flops, then one GEMM of ``2 m n^2``
#: into a new array): True, False (a TRSM, or the split below), None (the backend's
#: ``cholqr_gemms``). Twice the flops of the TRSM at the GEMM's rate; ``R^{-1}`` from a left
#: TRSM of the identity has the residual ``|R R^{-1} - I| <= c u |R| |R^{-1}|``, so
#: ``X R^{-1} = Q (R R^{-1})`` departs from ``Q`` as the TRSM's solution does (about
#: ``kappa(R) u``), inside the ``kappa(X)^2 u`` the Gram matrix already costs the pass.
INVERSE: bool | None = None

#: without :data:`INVERSE`, ``X R^{-1}`` is split into halves of ``R`` with a GEMM between
#: them down to triangles of this order (0: one TRSM), which turns all but the leaves' flops
#: into GEMMs as ``_lu_local.solve_unit_lower`` does for LU (one H100, 1048576 x 256: 17 ms
#: with leaves of 32 against the TRSM's 25; the GEMM by the inverse 3 ms; docs/qr.md).
TRSM_LEAF = 0

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
    if _WHOLE_ROWS and not (x._transposed or x._conjugated):
        if x.grid.npcol == 1:
            return _whole_rows(x, want_q)
        return _on_one_column(x, want_q)
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


# -- one process column: whole rows on every process ----------------------------------------
def _on_one_column(
    x: BlockCyclicArray, want_q: bool
) -> tuple[BlockCyclicArray | None, BlockCyclicArray, str] | None:
    """:func:`_whole_rows` of ``x`` moved to its grid's one-column grid; ``Q`` and ``R`` moved
    back to ``x``'s grid and blocks (see the module docstring)."""
    grid, (mb, nb) = x.grid, x.block
    stored = x.copy() if x.is_window else x
    done = _whole_rows(redistribute(stored, grid=grid.one_column()), want_q)
    if done is None:
        return None
    q, r, method = done
    back_q = None if q is None else redistribute(q, grid=grid, block=(mb, nb))
    return back_q, redistribute(r, grid=grid, block=(nb, nb)), method


def _whole_rows(
    x: BlockCyclicArray, want_q: bool
) -> tuple[BlockCyclicArray | None, BlockCyclicArray, str] | None:
    """:func:`cholesky_qr` on a grid of one process column (see the module docstring)."""
    from ..._alloc import new_array

    stored = x.copy() if x.is_window else x  # a window's copy is the matrix the passes read
    be, grid = stored.backend, stored.grid
    xp = be.xp
    m, n = stored.shape
    begin_pipeline(be, stored.dtype)
    xl = stored._data
    inverse = q_by_inverse(be)

    def result_rows() -> Any:
        # Q's storage, allocated as every result is (the symmetric heap on the GPU)
        return new_array(stored.layout, grid, stored.dtype)._data

    g = _gram(be, grid, xl, n)
    norm2 = float(be.allreduce(float(xp.sum(xp.diagonal(g).real)), op="max"))
    # the TRSM solves the last pass in place: its Q is the first pass's; the GEMM by the
    # inverse writes each pass into a new array: the last pass's is the result
    first = _local_pass(be, xl, g.copy(), 0.0, True, out=None if inverse else result_rows())
    result = None
    if first is not None:
        q1, r1 = first
        g2 = _gram(be, grid, q1, n)
        if _local_departure(be, g2) <= DELTA_MAX:
            out = result_rows() if inverse and want_q else q1
            second = _local_pass(be, q1, g2, 0.0, want_q, out=out)
            if second is not None:
                result = second[0], _local_product(be, second[1], r1), "cholqr2"
    if result is None and np.isfinite(norm2):
        u = float(np.finfo(stored.dtype).eps) / 2
        shift = 11.0 * (m * n + n * (n + 1)) * u * norm2
        done = _local_pass(be, xl, g, shift, True, out=None if inverse else result_rows())
        if done is not None:
            q, r = done
            for last in (False, True):
                gram = _gram(be, grid, q, n)
                if last and _local_departure(be, gram) > DELTA_MAX:
                    done = None
                    break
                out = result_rows() if inverse and last and want_q else q
                step = _local_pass(be, q, gram, 0.0, want_q or not last, out=out)
                if step is None:
                    done = None
                    break
                q, r = step[0], _local_product(be, step[1], r)
            if done is not None:
                result = q, r, "shifted cholqr3"
    if result is None:
        return None
    q, r, method = result
    lay = BlockCyclicLayout((n, n), (stored.block[1], stored.block[1]), grid.shape)
    out_r = new_array(lay, grid, stored.dtype)
    rows = positions_index(lay.local_rows(grid.myrow), xp)
    be.launch(be.compute, take_rows, out_r._data, r, rows)
    out_q = None
    if want_q:
        out_q = BlockCyclicArray(q, stored.layout, grid)
    be.synchronize()
    return out_q, out_r, method


def _gram(be: Backend, grid: Any, xl: Any, n: int) -> Any:
    """``X^H X`` (upper triangle, zeros below) on every process: each process's HERK of its
    rows, ``# partial Gram matrices -> every process``, their sum in rank order."""
    xp, p, me = be.xp, grid.size, grid.rank
    stack = xp.zeros((p, n, n), xl.dtype)
    if xl.shape[0]:
        _local_gram(be, xl, stack[me])
    everyone = tuple(range(p))
    entries = [
        (s, everyone, n * n, stack[s] if s == me else None, None if s == me else (stack, s))
        for s in range(p)
    ]
    if p > 1:
        exchange(be, grid, "cholqr gram", entries, xl.dtype, be.record_event(be.compute))
    g = xp.empty((n, n), xl.dtype)
    be.launch(be.compute, sum_stack, g, stack)
    be.synchronize()  # the host reads it next (trace, departure, copies)
    return g


def _local_pass(
    be: Backend, xl: Any, g: Any, shift: float, want_q: bool, out: Any = None
) -> tuple[Any, Any] | None:
    """One pass on local rows: ``R`` from ``g`` (+ ``shift`` on its diagonal; overwritten),
    ``xl R^{-1}`` into ``out`` (a new array when None; may be ``xl`` itself); None on a
    breakdown (the INFO reduced over all processes: the same decision everywhere)."""
    xp = be.xp
    if shift:
        be.launch(be.compute, _shift_diagonal, xp, g, shift)
    info = xp.zeros(1, np.int32)
    be.potrf(g, "U", info, be.compute)
    be.synchronize()
    if int(be.allreduce(int(be.asnumpy(info)[0]), op="max")) != 0:
        return None
    if not want_q:
        return None, g
    if q_by_inverse(be):
        # a GEMM cannot write its operand: a new array when asked to overwrite ``xl``
        q = out if out is not None and out is not xl else xp.empty_like(xl)
        if q.shape[0]:
            _multiply_by_inverse(be, g, xl, q)
        return q, g
    q = out if out is not None else xp.empty_like(xl)
    if q is not xl:
        be.launch(be.compute, assign, q, xl)
    if q.shape[0]:
        _solve_upper_right(be, g, q, TRSM_LEAF)
    return q, g


def _local_gram(be: Backend, x: Any, out: Any) -> None:
    """``out`` := the upper triangle of ``x^H x`` (zeros below), on the compute stream: one
    SYRK/HERK, or with :data:`GRAM_ROWS` (real dtypes, more than one chunk) the batched GEMM
    of the chunks' Gram matrices, summed in chunk order."""
    m, rows = x.shape[0], gram_rows(be, x.shape[1])
    if rows <= 0 or m < 2 * rows or x.dtype.kind == "c":
        be.syrk(1, x, 0, out, "U", "C", be.compute)
        return
    be.launch(be.compute, _chunked_gram, be.xp, out, x, rows)


def gram_rows(be: Backend, n: int) -> int:
    """The rows per chunk of the local Gram GEMM of ``n`` columns (0: one SYRK/HERK),
    :data:`GRAM_ROWS`."""
    if GRAM_ROWS is not None:
        return GRAM_ROWS
    return GEMM_GRAM_ROWS if be.cholqr_gemms and n <= GEMM_GRAM_MAX_N else 0


def q_by_inverse(be: Backend) -> bool:
    """Whether the local passes form ``X R^{-1}`` by a GEMM with ``R^{-1}``, :data:`INVERSE`."""
    return be.cholqr_gemms if INVERSE is None else INVERSE


def _chunked_gram(xp: Any, out: Any, x: Any, rows: int) -> None:
    """``out`` := ``triu(x^T x)`` for a real ``x``: the chunks of ``rows`` rows as one
    batched GEMM, their sum, and the ragged last rows."""
    m, n = x.shape
    whole = m // rows * rows
    chunks = x[:whole].reshape(m // rows, rows, n)
    g = xp.matmul(chunks.transpose(0, 2, 1), chunks).sum(axis=0)
    if whole < m:
        g += x[whole:].T @ x[whole:]
    out[...] = xp.triu(g)


def _solve_upper_right(be: Backend, r: Any, q: Any, leaf: int) -> None:
    """``q := q r^{-1}`` for the upper triangular ``r`` (compute stream): one TRSM, or with
    ``leaf > 0`` the halves ``q1 := q1 r11^{-1}``, ``q2 -= q1 r12``, ``q2 := q2 r22^{-1}``
    down to triangles of order ``leaf`` (each leaf a TRSM: the substitution stays backward
    stable)."""
    n = r.shape[0]
    if leaf <= 0 or n <= leaf:
        be.trsm(1, r, q, "R", "U", "N", "N", be.compute)
        return
    h = n // 2
    _solve_upper_right(be, r[:h, :h], q[:, :h], leaf)
    be.gemm(-1, q[:, :h], r[:h, h:], 1, q[:, h:], "N", "N", be.compute)
    _solve_upper_right(be, r[h:, h:], q[:, h:], leaf)


def _multiply_by_inverse(be: Backend, r: Any, x: Any, q: Any) -> None:
    """``q := x r^{-1}`` (compute stream) for the upper triangular ``r`` (its strict lower
    triangle ignored): ``r^{-1}`` by a left TRSM of the identity (upper triangular, zeros
    below exactly), then one GEMM; ``q`` must not overlap ``x``. Synchronises: ``r^{-1}`` is
    allocated on the host's current stream and dropped on return, and CuPy's pool hands its
    memory to that stream's next allocation, which does not wait for the compute stream's
    GEMM (the next Gram matrix's zeroed stack, on one GPU, is exactly its size)."""
    xp = be.xp
    n = r.shape[0]
    inv = xp.empty((n, n), r.dtype)
    be.launch(be.compute, identity_into, xp, inv)
    be.trsm(1, r, inv, "L", "U", "N", "N", be.compute)
    be.gemm(1, x, inv, 0, q, "N", "N", be.compute)
    be.synchronize()


def identity_into(xp: Any, out: Any) -> None:
    """``out`` := the identity (square)."""
    out[...] = 0
    i = xp.arange(out.shape[0])
    out[i, i] = 1


def _local_product(be: Backend, r2: Any, r1: Any) -> Any:
    """``R_2 R_1`` into ``r1`` (upper triangular; the strict lower triangles are zero)."""
    be.trmm(1, r2, r1, "L", "U", "N", "N", be.compute)
    return r1


def _local_departure(be: Backend, g: Any) -> float:
    """``||G - I||_F`` of the replicated Hermitian ``G`` (upper triangle), the largest over
    the processes (one decision everywhere)."""
    value = float(departure_squared(be.xp, g))
    value = float(be.allreduce(value if np.isfinite(value) else float("inf"), op="max"))
    return float(np.sqrt(value)) if np.isfinite(value) else float("inf")


def departure_squared(xp: Any, g: Any) -> Any:
    """``||G - I||_F^2`` of the Hermitian ``G`` from its upper triangle, in float64 (a 0-d
    array of ``xp``: the host does not wait for it)."""
    off = xp.sum(xp.abs(xp.triu(g, 1)) ** 2, dtype=np.float64)
    diag = xp.sum(xp.abs(xp.diagonal(g) - 1) ** 2, dtype=np.float64)
    return 2 * off + diag


def _shift_diagonal(xp: Any, g: Any, shift: float) -> None:
    i = xp.arange(g.shape[0])
    g[i, i] += shift


@warmup_kernels
def _sample(backend: Backend, xp: Any, dtype: np.dtype) -> None:
    """The one-process-column path's helpers: the diagonal shift, copies, rows of ``R``."""
    g = xp.eye(4, dtype=dtype)
    _shift_diagonal(xp, g, 0.5)
    identity_into(xp, xp.empty((3, 3), dtype))
    out = xp.empty((2, 4), dtype)
    assign(out, g[:2])
    take_rows(out, g, slice(1, 3))
    take_rows(out, g, xp.asarray(np.array([0, 3])))
    departure_squared(xp, g)
    xp.sum(xp.diagonal(g).real)
    if np.dtype(dtype).kind != "c":
        _chunked_gram(xp, g, xp.zeros((5, 4), dtype), 2)
