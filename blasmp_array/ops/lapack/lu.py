"""Distributed LU factorisation with partial pivoting (ScaLAPACK ``pxgetrf``/``pxgetrs``) and the
SciPy/NumPy entry points built on it: :func:`lu_factor`, :func:`lu_solve`, :func:`solve`
(``assume_a='gen'``, and 'sym'/'her' until a symmetric-indefinite factorisation exists),
``np.linalg.solve``, ``np.linalg.inv``, ``np.linalg.det`` and ``np.linalg.slogdet``.

``A`` is ``n x n`` (``lu_factor`` also takes ``m x n``: ``min(m, n)`` steps' worth of pivots,
``L`` unit lower trapezoidal, ``U`` upper trapezoidal, as LAPACK); the factor overwrites a
working copy: ``A = P L U`` with ``L`` unit lower (below the diagonal) and ``U`` upper (on and
above it), and ``piv`` the 0-based row interchanges exactly as LAPACK's ``xgetrf`` (and
``scipy.linalg.lu_factor``) return them: row ``i`` was swapped with row ``piv[i]``, for
``i = 0, 1, ..., min(m, n) - 1`` in that order. Cost: ``2 n^3 / 3``
flops (times 4 real flops per complex multiply-add).

Layering: the public drivers (checks, views, blocking) -> :func:`factor` (finite check, working
copy, the INFO) -> :class:`_LUPipeline` (one step per block column) -> local kernels
(``backend.getrf`` on the gathered panel, ``backend.trsm`` on the U row block, ``backend.gemm``
on the trailing matrix) -> one-sided row exchanges: plans of :class:`_Move` s run by
:func:`ops.engine._exchange.run_plan` (the project's one-sided engine: slots, ready/ack signals, the
pooled workspace).

Algorithm (right-looking, blocked, look-ahead of one block column)
------------------------------------------------------------------
Blocks are square ``nb x nb`` (``K = ceil(n / nb)`` steps, the last one ragged). Step ``k``
(``k0 = k nb``, ``e`` the width of block column ``k``, ``m = n - k0``):

1. *Panel gather*: ``# A[k0:, block column k] -> the leaders``. The processes of the grid
   column owning block column ``k`` send their rows of it (blocks ``>= k``, ``e`` columns) to
   every process that factors panels (below): one message per process row, packed once.
2. *Panel factorisation*: every device factors the same ``m x e`` panel with the backend's
   ``getrf`` (LAPACK on the CPU, cuSOLVER on the GPU: the pivot search and the row swaps
   inside the panel stay on the device, in the library). This gives LAPACK's pivots exactly
   (the panel *is* LAPACK's panel, gathered) and ``L_kk``, ``U_kk`` and ``L[i > k, k]``: no
   broadcast of ``L`` along the process rows is needed. Processes that share a device
   (``backend.device_key()``: several ranks on one GPU under MPS) factor it once: the lowest
   rank on the device (its *leader*) gathers and factors the panel, and the others receive
   the rows of the factored panel they read (``L_kk`` and the rows of their grid row) in step
   4's exchange. Four concurrent copies of a 16384 x 2048 ``getrf`` on one H200 took 34 ms
   each against 11.5 ms alone; the 4-rank LU at n = 16384, block 2048 went from 278-291 ms to
   206-210 ms with one factorisation per device. Where the streams run concurrently
   (``backend.concurrent_streams``: the GPU) ``getrf`` runs on the *comm* stream (idle between
   the exchanges) so that it overlaps the compute stream's update (look-ahead below); the CPU
   backend's stream threads share the cores with the BLAS, so there it runs on the compute
   stream after the update.
3. *Pivots to the host*: rank 0 (a leader) waits for its ``getrf`` only
   (``backend.host_wait``), then one host broadcast of the ``e`` pivots (and INFO) per block
   step (small metadata; every leader factored the same panel with the same library, the
   broadcast only guarantees that every rank builds the same plans). The interchanges are
   composed into a row map ``src`` on ``[k0, n)``: the new row ``j`` is the old row ``src[j]``.
4. *Row interchanges* (``pxlaswp``, on all local columns, left and right of the panel): one
   exchange whose plan is built from ``src`` on every rank: per grid column, the new rows of
   block row ``k`` go from their owners to *every* process of the grid column (the U row block
   is needed by all of them below), every other moved row ``j`` (an old row of block row ``k``)
   from its owner to the owner of ``j``, and the factored panel's shares from each leader to
   the other ranks of its device. Its packing waits for the compute stream (the rest of step
   ``k - 1``'s update). Receivers unpack into buffers (``top``, ``moved``, the panel), never
   into the matrix, so a process that both sends and receives rows cannot overwrite a row
   before its comm stream packed it; the buffers are written into the matrix after it.
5. *U row block*: every process of a grid column solves ``U[k, j > k] = L_kk^{-1} top`` for its
   local columns (redundant down the grid column instead of a broadcast), by a TRSM split
   recursively into halves with GEMMs between them (``_lu_local.solve_unit_lower``: cuBLAS's
   one-call TRSM of a 2048 triangle took more device time than the whole trailing update); the
   owners of block row ``k`` store ``top`` (U, and the swapped L of earlier steps on the left);
   the owners of block column ``k`` store the factored panel.
6. *Trailing update*: ``A[i > k, j > k] -= L[i, k] U[k, j]``: one local GEMM per process with
   its rows of ``L`` taken from the panel and ``U`` from ``top``.

Look-ahead: steps 5-6 first solve and update block column ``k + 1`` (the next panel) and record
an event; the gather of panel ``k + 1`` packs after it. On the GPU its leader then enqueues
``getrf`` of it on the comm stream, and only then the rest of step ``k``'s U row block and
update is enqueued on the compute stream: the panel of step ``k + 1`` is factored while the rest
of step ``k``'s update runs. On the CPU the rest of the update is enqueued before the gather,
which travels under it, and ``getrf`` follows on the compute stream (2 ranks x 1 thread,
n = 4096: the panel waits went from 27-66 ms to 5-10 ms per rank with this). Either way the
host, idle until rank 0's ``getrf`` ends, prepares what needs no pivots meanwhile (the next
gather's plan, the next update's rows). On one H200, 4 ranks (2x2, MPS), n = 16384,
block 2048, this and the changes beside it (the gather to the leaders only, the shares trimmed
to the rows read, the recursive TRSM, the comm stream at the device's highest priority) took the
factorisation from 0.210 to 0.176 s (docs/lu.md; docs/_measurements/lu). The critical path is
now the chain of ``getrf`` (slowed about 1.5x by the concurrent update) and, between two of
them, about 9-12 ms per step of pivot broadcast, the interchange exchange, block column ``k +
1``'s update and the gather, each exchange ending in a host synchronisation.

Streams and events per process: packs and puts (and, on the GPU, ``getrf``) on ``comm``; the
ready waits, unpacks, trsm and gemm on ``compute`` (see ``ops/engine/_exchange.py``); the buffers of
a step's update are kept until the next step's interchange exchange drained both streams.
``getrf`` on the comm stream is enqueued after the gather's ``finish()`` and before the next
exchange's packs, so stream order alone separates it from both.

Measured and not kept: a panel gathered only to its grid column, factored there (the other
columns' getrf saved) and broadcast along the grid rows, with the rest of the previous update
enqueued after that getrf: on this project's 2-core VM (2 ranks, 1x2, n = 4096, block 256,
five interleaved pairs of bench runs) 0.68-0.75 s against 0.62-0.72 s for the redundant panel:
on one grid row the owner's getrf is on the critical path either way and the extra exchange
(its synchronisation and host allgather) costs more than the other rank's getrf. Block 1024
instead of 2048 on the 4-rank GPU run: 0.240 s against 0.205 s (more steps, each paying the
exchanges' synchronisations).

Signal protocol
---------------
The two exchanges of each step are one-step plans of :mod:`ops.engine._exchange` on its pooled
channel (``"exchange"``): for every message, ``ready[s, p]`` on each receiver is incremented by
sender ``p``'s ``put_signal`` and waited for (compute stream) to reach the cumulative count derived
from the plan; a one-step plan reuses no slot within the exchange, so no ack is waited for; the
exchange's ``finish()`` drains both streams, advances the signal bases and makes one host
``allgather`` of the outcome (which separates it from the next exchange: no process puts into a
slot a slower one still reads). Message sizes and offsets come from the plan, identical on
every rank (it is built from the layout and the broadcast pivots only). No step waits for data
that is never sent, so nothing hangs.

Singular matrices
-----------------
``getrf`` completes the factorisation past a zero pivot (LAPACK semantics: no division by it),
so a singular matrix does not change the protocol: every process runs all steps, then the first
zero pivot's column (from the broadcast INFO of each step) raises
:class:`numpy.linalg.LinAlgError` on every rank (:func:`lu_factor`, :func:`solve`, ``inv``);
``det``/``slogdet`` return 0 / ``(0, -inf)`` as NumPy does. The input is untouched unless
``overwrite_a``.

One process (a ``1 x 1`` grid) skips the pipeline and its exchanges
(:meth:`_LUPipeline._run_one_process`): on a GPU the blocked LU of ``ops/lapack/_lu_local.py`` (the
panel factored on the comm stream beside the update), on the CPU one ``getrf`` of the whole
local matrix, as LAPACK alone would do it. Processes that all share one device (several ranks on
one GPU) skip it too: process 0 factors the gathered matrix with the same one-process LU and
scatters the factor (``ops/lapack/_lu_gathered.py``).

What remains
------------
The exchanges between two ``getrf`` s (the interchanges, the next panel's gather, each ending in
a host synchronisation): on the critical path, 9-12 ms per step on one H200 with 4 ranks. Built
and reverted (commit ba93450, docs/lu.md): the leader applying step ``k`` to block
column ``k + 1`` itself, on a third stream, so that the exchanges travel beside ``getrf``: 0.192 s
against 0.171 s on one GPU shared by four ranks (the leader's extra update competes with theirs).
On one process a recursive LU (cuSOLVER's getrf on column halves, TRSM and GEMM between them)
was measured and dropped: 0.83-1.04x cuSOLVER's one call at n = 16384 on one H200 (commit
3968a04 and its revert); the look-ahead of ``ops/lapack/_lu_local.py`` reaches 1.10-1.15x, bounded
by cuSOLVER's per-column panel cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np

from ..._dispatch import implements
from ..._interchanges import row_map
from ...array import BlockCyclicArray, check_dtype
from ...backends._host_copy import put_rows, take_rows
from ...backends.base import Backend
from ..engine import _checks as ck
from ..engine import _factor_block
from ..engine._exchange import Message, Plan, positions_index, run_plan
from ..engine._warmup import warmup_kernels
from ..engine.devices import device_groups, one_device
from ._lu_gathered import gathered_lu, root_bytes
from ._lu_local import factor_local, minus_product, solve_unit_lower

__all__ = ["lu_factor", "lu_solve", "solve", "factor", "factor_working", "permute_rows"]

_GEN = ("gen", "general", "sym", "symmetric", "her", "hermitian")

# destination buffers of a row move (indices into the kernels' ``bufs``)
_PANEL, _TOP, _MOVED = 0, 1, 2


# -- public API -------------------------------------------------------------------------------
def lu_factor(
    a: BlockCyclicArray, overwrite_a: bool = False, check_finite: bool = True
) -> tuple[BlockCyclicArray, np.ndarray]:
    """LU factorisation with partial pivoting (SciPy's ``lu_factor``). Collective.

    ``a = P L U`` computed by a distributed blocked right-looking factorisation (ScaLAPACK
    ``pxgetrf``) on ``a``'s grid and layout.

    Parameters
    ----------
    a : BlockCyclicArray
        ``m x n`` matrix (rectangular too, as SciPy's). Square blocks are needed: other
        blocks are redistributed to ``(mb, mb)`` with a warning. A lazy view (``A.T``) is
        materialised first.
    overwrite_a : bool
        Work in ``a``'s storage (no copy) and return it. On failure ``a`` then holds garbage.
    check_finite : bool
        Check that ``a`` holds only finite numbers (one reduction); ``ValueError`` on every
        rank otherwise.

    Returns
    -------
    lu : BlockCyclicArray
        ``L`` (unit diagonal not stored) below the diagonal and ``U`` on and above it; ``a``'s
        shape, layout and grid.
    piv : numpy.ndarray
        ``int32`` vector of ``min(m, n)`` 0-based row interchanges, the same on every rank:
        row ``i`` was interchanged with row ``piv[i]`` (LAPACK's, so SciPy's, pivots on the
        gathered matrix, ties aside).

    Raises
    ------
    numpy.linalg.LinAlgError
        On every rank, when a pivot is exactly zero (the message names its column); SciPy
        warns instead.
    ValueError, TypeError
        On every rank, before any communication, for invalid arguments.

    Notes
    -----
    ``2 n^3 / 3`` flops for a square matrix (``m n^2 - n^3 / 3`` for ``m >= n``). The algorithm
    and its protocol are described in the module docstring of :mod:`blasmp_array.ops.lapack.lu`.
    """
    lu, piv, zero = factor(a, overwrite_a, check_finite, "lu_factor")
    if zero >= 0:
        raise np.linalg.LinAlgError(_singular("lu_factor", zero))
    return lu, piv


def lu_solve(
    lu_and_piv: tuple[BlockCyclicArray, np.ndarray],
    b: BlockCyclicArray,
    trans: int = 0,
    overwrite_b: bool = False,
    check_finite: bool = True,
) -> BlockCyclicArray:
    """Solve ``a x = b`` given the LU factorisation of ``a`` (SciPy's ``lu_solve``). Collective.

    ``trans`` 0: the row interchanges applied to ``b`` (one row exchange), then
    ``L y = P^T b`` and ``U x = y`` (two distributed TRSMs,
    :func:`blasmp_array.ops.blas3.trsm.trsm`); 1 / 2: ``U^T`` (``U^H``), then ``L^T`` (``L^H``)
    solves, then the inverse interchanges.

    Parameters
    ----------
    lu_and_piv : (BlockCyclicArray, numpy.ndarray)
        The output of :func:`lu_factor`.
    b : BlockCyclicArray
        ``n x k`` right-hand sides on ``lu``'s grid (another row block is redistributed with a
        warning). For one vector use an ``(n, 1)`` matrix.
    trans : {0, 1, 2}
        Solve ``a x = b`` (0), ``a^T x = b`` (1) or ``a^H x = b`` (2).
    overwrite_b : bool
        Allow the solution to be written into ``b``'s storage.
    check_finite : bool
        Check ``lu`` and ``b`` for NaN/inf (``ValueError`` on every rank).

    Returns
    -------
    x : BlockCyclicArray
        ``n x k``.

    Notes
    -----
    ``2 n^2 k`` flops.
    """
    from ..blas3.trsm import trsm

    lu, piv = ck.factor_pair(lu_and_piv, "lu_solve", "(lu, piv)", "lu_factor")
    lu = ck.check_array(lu, "lu", "lu_solve")
    b = _check_rhs(b, "lu_solve")
    if isinstance(trans, bool) or not isinstance(trans, Integral) or trans not in (0, 1, 2):
        raise ValueError(f"lu_solve: trans must be 0, 1 or 2, got {trans!r}")
    overwrite_b = ck.check_flag(overwrite_b, "overwrite_b")
    if lu.ndim != 2 or lu.shape[0] != lu.shape[1]:
        raise ValueError(f"lu_solve: lu must be square, got shape {lu.shape}")
    n = lu.shape[0]
    piv = np.asarray(piv)
    if piv.shape != (n,) or piv.dtype.kind not in "iu":
        raise ValueError(f"lu_solve: piv must be an integer vector of length {n}")
    if n and (piv.min() < 0 or piv.max() >= n or np.any(piv < np.arange(n))):
        raise ValueError("lu_solve: piv is not a valid LAPACK pivot vector")
    if b.shape[0] != n:
        raise ValueError(
            f"lu_solve: b must have {n} rows to match the {n}x{n} factor, got shape {b.shape}"
        )
    if ck.check_flag(check_finite, "check_finite"):
        ck.check_finite(lu.resolve(), b.resolve(), "lu_solve")
    src = row_map(piv, 0, n)  # (swaps) b: new row j is old row src[j]
    if trans == 0:
        y = permute_rows(b, src, overwrite=overwrite_b)
        y = trsm(lu, y, side="left", lower=True, trans="N", unit_diagonal=True, overwrite_b=True)
        return trsm(lu, y, side="left", lower=False, trans="N", overwrite_b=True)
    t = "T" if trans == 1 else "C"
    y = trsm(lu, b, side="left", lower=False, trans=t, overwrite_b=overwrite_b)
    y = trsm(lu, y, side="left", lower=True, trans=t, unit_diagonal=True, overwrite_b=True)
    inv = np.empty_like(src)
    inv[src] = np.arange(n)
    return permute_rows(y, inv, overwrite=True)


def solve(
    a: BlockCyclicArray,
    b: BlockCyclicArray,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    check_finite: bool = True,
    assume_a: str = "gen",
    transposed: bool = False,
) -> BlockCyclicArray:
    """Solve ``a x = b`` (``a^T x = b`` if ``transposed``) by LU with partial pivoting (SciPy's
    ``solve`` for ``assume_a='gen'``; 'sym' and 'her' use LU too until a symmetric-indefinite
    factorisation exists). Collective.

    Parameters
    ----------
    a : BlockCyclicArray
        ``n x n``.
    b : BlockCyclicArray
        ``n x k`` right-hand sides on ``a``'s grid (a 2-D matrix; for one vector an ``(n, 1)``
        one).
    overwrite_a, overwrite_b, check_finite
        As in :func:`scipy.linalg.solve`.
    assume_a : {'gen', 'sym', 'her'}
        All three run LU with partial pivoting (the symmetry is not exploited yet).
    transposed : bool
        Solve ``a^T x = b``.

    Returns
    -------
    x : BlockCyclicArray
        ``n x k``, ``b``'s layout.

    Raises
    ------
    numpy.linalg.LinAlgError
        On every rank if ``a`` is exactly singular (the message names the zero pivot's column).

    Notes
    -----
    ``2 n^3 / 3 + 2 n^2 k`` flops.
    """
    if not isinstance(assume_a, str) or assume_a.lower() not in _GEN:
        raise ValueError(f"solve: assume_a={assume_a!r} is not one of 'gen', 'sym', 'her'")
    a = ck.check_array(a, "a", "solve")
    b = _check_rhs(b, "solve")
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"solve: a must be square, got shape {a.shape}")
    if b.shape[0] != a.shape[0]:
        raise ValueError(f"solve: b has {b.shape[0]} rows but a is {a.shape[0]}x{a.shape[1]}")
    cf = ck.check_flag(check_finite, "check_finite")
    overwrite_b = ck.check_flag(overwrite_b, "overwrite_b")
    if cf:
        ck.check_finite(b.resolve(), None, "solve")
    if not transposed:
        x = _solve_one_process(a, b, cf)
        if x is not None:
            return x
    lu, piv, zero, back = factor_working(a, overwrite_a, cf, "solve")
    if zero >= 0:
        raise np.linalg.LinAlgError(_singular("solve", zero))
    trans = 1 if transposed else 0
    if back is not None and not _factor_block.plain(b):
        lu, back = _factor_block.to_block(lu, *back), None
    if back is None:
        return lu_solve((lu, piv), b, trans=trans, overwrite_b=overwrite_b, check_finite=False)
    # solved in the factor's working block: b there and x back (docs/defaults.md)
    bw = _factor_block.to_block(b, lu.block[0])
    x = lu_solve(
        (lu, piv), bw, trans=trans, overwrite_b=overwrite_b or bw is not b, check_finite=False
    )
    return x if x.block == b.block else _factor_block.to_block(x, *b.block)


def _solve_one_process(a: BlockCyclicArray, b: BlockCyclicArray, cf: bool) -> Any:
    """``a^{-1} b`` as one call of the backend's local solver (:meth:`Backend.solve_local`) when
    one process holds both whole, stored as they are (no view), in one BLAS dtype; else None.
    A singular ``a`` also gives None, so that the general path names its zero pivot as LU of
    ``a`` does."""
    be = a.backend
    if (
        a.grid.size != 1
        or min(a.shape) == 0
        or b.shape[1] == 0
        or a.is_view
        or b.is_view
        or a.dtype != b.dtype
        or not (b.grid is a.grid or b.grid.same_as(a.grid))
    ):
        return None
    check_dtype(a.dtype)
    if cf:
        ck.check_finite(a, None, "solve")
    found = be.solve_local(a._data, b._data)
    if found is None or found[0] is None:
        return None
    return BlockCyclicArray._of(be.asarray(found[0]), b.layout, b.grid)


@implements(np.linalg.solve)
def _np_solve(a: Any, b: Any) -> BlockCyclicArray:
    """``np.linalg.solve(A, B)`` (a vector ``b`` through ops/lapack/solves.py). Singular:
    LinAlgError. As NumPy's, it does not scan its input for NaN and inf (SciPy's ``solve`` does:
    there ``check_finite=True``); they propagate to the result."""
    return solve(a, b, check_finite=False)


@implements(np.linalg.inv)
def _np_inv(a: Any) -> BlockCyclicArray:
    """``np.linalg.inv(A)``: LU, then ``lu_solve`` with the identity (``a``'s layout)."""
    a = ck.check_array(a, "a", "inv")
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise np.linalg.LinAlgError(f"inv: a must be square, got shape {a.shape}")
    lu, piv, zero, back = factor_working(a, False, False, "inv")
    if zero >= 0:
        raise np.linalg.LinAlgError(_singular("inv", zero))
    x = lu_solve((lu, piv), _identity_like(lu), overwrite_b=True, check_finite=False)
    return x if back is None else _factor_block.to_block(x, *back)


@implements(np.linalg.slogdet)
def _np_slogdet(a: Any) -> Any:
    """``np.linalg.slogdet(A)``: ``(sign, logabsdet)`` on every rank, from U's diagonal and the
    parity of the interchanges (a sum of logarithms: no overflow)."""
    sign, logdet = _slogdet(a, "slogdet")
    try:
        from numpy.linalg._linalg import SlogdetResult

        return SlogdetResult(sign, logdet)
    except ImportError:  # NumPy < 2
        return sign, logdet


@implements(np.linalg.det)
def _np_det(a: Any) -> Any:
    """``np.linalg.det(A)``: the product of U's diagonal with the interchanges' sign (a NumPy
    scalar on every rank; 0 for a singular matrix, as NumPy)."""
    a = ck.check_array(a, "a", "det")
    lu, piv, d = _diag_of_factor(a, "det")
    if d is None:
        return lu.dtype.type(0)
    with np.errstate(over="ignore"):  # NumPy's det overflows to inf quietly too
        parts = lu.backend.allgather(np.prod(d) if d.size else lu.dtype.type(1))
        out = lu.dtype.type(1)
        for p in parts:
            out = out * p
    if np.count_nonzero(piv != np.arange(piv.size)) % 2:
        out = -out
    return lu.dtype.type(out)


def permute_rows(x: BlockCyclicArray, src: np.ndarray, overwrite: bool = False) -> BlockCyclicArray:
    """``y[j] = x[src[j]]`` for every row ``j`` (``src`` a permutation, the same on every rank),
    by one one-sided row exchange (rows that do not move do not travel). Collective."""
    w = x.resolve()
    if not (overwrite and not x.is_view) and w is x:
        w = w.copy()
    n = w.shape[0]
    lay, grid = w.layout, w.grid
    moved = np.flatnonzero(src != np.arange(n))
    if moved.size == 0:
        return w
    me_r, me_c = grid.coords
    mine = moved[_owner_rows(lay, moved) == me_r]
    moves = _moves_to_owners(lay, grid, moved, src[moved], _MOVED)
    be = w.backend
    buf = be.xp.empty((mine.size, w._data.shape[1]), w.dtype)
    kern = _RowKernels([w._data], [None, None, buf])
    _run(be, "lu permute rows", moves, w.dtype, kern, grid.rank, grid.size)
    if mine.size:
        idx = be.asarray(_local_rows(lay, mine))
        be.begin()  # the compute stream after the index upload
        be.launch(be.compute, put_rows, w._data, idx, buf)
        be.synchronize()
    return w


# -- the driver --------------------------------------------------------------------------------
def _singular(op: str, col: int) -> str:
    return (
        f"{op}: a is exactly singular: the pivot of column {col} (0-based) is zero, "
        f"U[{col}, {col}] == 0 (LAPACK INFO = {col + 1})"
    )


def _check_rhs(b: Any, op: str) -> BlockCyclicArray:
    if not isinstance(b, BlockCyclicArray):
        hint = ""
        if getattr(b, "ndim", None) == 1:
            hint = (
                "; a 1-D right-hand side is not supported: pass an (n, 1) matrix, e.g. "
                "bm.from_numpy(b.reshape(-1, 1), block=(a.block[0], 1), grid=a.grid)"
            )
        raise TypeError(
            f"{op}: b must be a 2-D BlockCyclicArray, got {type(b).__name__}"
            f"{hint or '; distribute it with blasmp_array.from_numpy'}"
        )
    return b


def factor(
    a: BlockCyclicArray, overwrite_a: Any = False, check_finite: Any = True, op: str = "lu_factor"
) -> tuple[BlockCyclicArray, np.ndarray, int]:
    """``(lu, piv, zero)``: the factor, the pivots and the 0-based column of the first zero
    pivot (``-1`` if none). Every check is made identically on every rank before any
    communication. The working copy is made in the block of :mod:`._factor_block`; the factor
    comes back in ``a``'s block (square)."""
    w, piv, zero, back = factor_working(a, overwrite_a, check_finite, op)
    if back is None:
        return w, piv, zero
    lu = _factor_block.to_block(w, *back)
    if overwrite_a and not a.is_view and tuple(a.block) == tuple(back):
        ck.store(a, lu)  # the caller asked for its storage
        return a, piv, zero
    return lu, piv, zero


def factor_working(
    a: BlockCyclicArray, overwrite_a: Any = False, check_finite: Any = True, op: str = "lu_factor"
) -> tuple[BlockCyclicArray, np.ndarray, int, tuple[int, int] | None]:
    """:func:`factor` without the way back: ``(w, piv, zero, back)``, the factor in the working
    block and the caller's block to return it in (None: ``w`` is already in it)."""
    a = ck.check_array(a, "a", op)
    overwrite_a = ck.check_flag(overwrite_a, "overwrite_a")
    check_finite = ck.check_flag(check_finite, "check_finite")
    if a.ndim != 2 or (a.shape[0] != a.shape[1] and op != "lu_factor"):
        raise ValueError(f"{op}: a must be square, got shape {a.shape}")
    check_dtype(a.dtype)
    # -- collective from here on (identical decisions on every rank) --
    in_place = overwrite_a and not a.is_view
    # a window view's copy is the working copy (no ViewCopyWarning: it is not an extra one)
    w = a.copy() if a.is_window else a.resolve()
    mb = w.block[0]
    if w.block[1] != mb:
        w = ck.move(w, w.grid, (mb, mb), "a", op, f"a has non-square blocks {w.block}")
        in_place = False
    if check_finite:
        ck.check_finite(w, None, op)
    if min(w.shape) == 0:
        return (w.copy() if not in_place and w is a else w), np.zeros(0, dtype=np.int32), -1, None
    caller = w
    nb = _factor_block.block_for(w, "lu")
    if nb is not None:  # the working copy in the working block (docs/defaults.md)
        w = _factor_block.to_block(w, nb, nb)
    if one_device(w.backend, w.grid.size, root_bytes(w)):
        # ranks sharing one GPU: factored on process 0, gathered from the working block and
        # scattered back into it (0.153 s against 0.221 s from the default block, docs/lu.md)
        lu, piv, zero = gathered_lu(w, in_place and nb is None)
        return lu, piv, zero, (None if nb is None else caller.block)
    if nb is None and not in_place and w is a:
        w = w.copy()
    piv, zero = _LUPipeline(w).run()
    return w, piv, zero, (None if nb is None else caller.block)


def _identity_like(a: BlockCyclicArray) -> BlockCyclicArray:
    from ...creation import zeros_like

    out = zeros_like(a)
    g, xp = out.grid, out.backend.xp
    rows = out.layout.local_rows(g.myrow)
    cols = out.layout.local_cols(g.mycol)
    jl = np.searchsorted(cols, rows)
    hit = jl < cols.size
    hit[hit] = cols[jl[hit]] == rows[hit]
    il = np.nonzero(hit)[0]
    if il.size:
        out._data[xp.asarray(il), xp.asarray(jl[il])] = 1
    return out


def _diag_of_factor(a: BlockCyclicArray, op: str) -> tuple[BlockCyclicArray, np.ndarray, Any]:
    """``(lu, piv, d)``: the factor and this process's entries of U's diagonal on the host
    (``d`` None when ``a`` is singular)."""
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise np.linalg.LinAlgError(f"{op}: a must be square, got shape {a.shape}")
    lu, piv, zero, _ = factor_working(a, False, False, op)  # U's diagonal in any layout
    if zero >= 0:
        return lu, piv, None
    lay, g = lu.layout, lu.grid
    rows = lay.local_rows(g.myrow)
    cols = lay.local_cols(g.mycol)
    jl = np.searchsorted(cols, rows)
    hit = jl < cols.size
    hit[hit] = cols[jl[hit]] == rows[hit]
    il = np.nonzero(hit)[0]
    xp = lu.backend.xp
    d = lu._data[xp.asarray(il), xp.asarray(jl[il])] if il.size else xp.zeros(0, lu.dtype)
    return lu, piv, lu.backend.asnumpy(d)


def _slogdet(a: Any, op: str) -> tuple[Any, Any]:
    a = ck.check_array(a, "a", op)
    lu, piv, d = _diag_of_factor(a, op)
    real = np.dtype(lu.dtype).type(0).real.dtype
    if d is None:
        return lu.dtype.type(0), real.type(-np.inf)
    absd = np.abs(d)
    phase = np.prod(d / absd) if d.size else lu.dtype.type(1)
    parts = lu.backend.allgather((phase, float(np.sum(np.log(absd.astype(np.float64))))))
    sign: Any = lu.dtype.type(1)
    logdet = 0.0
    for ph, lg in parts:
        sign = sign * ph
        logdet += lg
    if np.count_nonzero(piv != np.arange(piv.size)) % 2:
        sign = -sign
    if lu.dtype.kind == "c":
        sign = lu.dtype.type(sign / abs(sign))
    else:
        sign = lu.dtype.type(np.sign(sign))
    return sign, real.type(logdet)


# -- row moves: plans over the one-sided exchange ----------------------------------------------
@dataclass(frozen=True)
class _Move:
    """Rows ``src`` (local row indices on ``sender``, every column of the kernels' source
    ``source``) to rows ``dst`` of buffer ``buf`` on each of ``receivers`` (``width`` columns)."""

    sender: int
    receivers: tuple[int, ...]
    src: np.ndarray
    buf: int
    dst: np.ndarray
    width: int
    source: int = 0  # index into the kernels' ``sources`` (0: the matrix, 1: the panel)


def _owner_rows(lay: Any, g: np.ndarray) -> np.ndarray:
    return (g // lay.block[0] + lay.src[0]) % lay.grid_shape[0]


def _local_rows(lay: Any, g: np.ndarray) -> np.ndarray:
    mb, pr = lay.block[0], lay.grid_shape[0]
    return (g // mb // pr) * mb + g % mb


def _moves_to_owners(
    lay: Any, grid: Any, dst_rows: np.ndarray, src_rows: np.ndarray, buf: int
) -> list[_Move]:
    """Row ``src_rows[t]`` -> the owner of row ``dst_rows[t]`` (same grid column), into row
    ``position of dst_rows[t] among the rows of its owner`` (ascending order) of ``buf``."""
    pr, pc = lay.grid_shape
    d_own, s_own = _owner_rows(lay, dst_rows), _owner_rows(lay, src_rows)
    pos = np.empty(dst_rows.size, dtype=np.int64)
    for r in range(pr):
        sel = np.flatnonzero(d_own == r)
        pos[sel] = np.arange(sel.size)
    moves = []
    for c in range(pc):
        width = lay.local_shape(0, c)[1]
        for ps in range(pr):
            for pd in range(pr):
                sel = np.flatnonzero((s_own == ps) & (d_own == pd))
                if sel.size:
                    moves.append(
                        _Move(
                            grid.rank_of(ps, c),
                            (grid.rank_of(pd, c),),
                            _local_rows(lay, src_rows[sel]),
                            buf,
                            pos[sel],
                            width,
                        )
                    )
    return moves


def _build_plan(name: str, moves: Sequence[_Move], me: int, nranks: int, xp: Any) -> Plan:
    """The one-step :class:`~blasmp_array.ops.engine._exchange.Plan` of ``moves`` for rank ``me``:
    offsets packed per receiver (a message to several receivers gets the same offset in each),
    slot and staging sizes the maxima over all ranks (identical everywhere)."""
    fill = [0] * nranks
    stage = [0] * nranks
    mine = []
    for mv in moves:
        size = int(mv.src.size) * mv.width
        remote = [q for q in mv.receivers if q != mv.sender]
        off = 0
        if remote and size:
            off = max(fill[q] for q in remote)
            for q in remote:
                fill[q] = off + size
            stage[mv.sender] += size
        if size and (mv.sender == me or me in mv.receivers):
            mine.append((mv, off, size))
    rows = _device_positions(
        [mv.src if mv.sender == me else None for mv, _, _ in mine]
        + [mv.dst if me in mv.receivers else None for mv, _, _ in mine],
        xp,
    )
    msgs = tuple(
        Message(
            mv.sender,
            mv.receivers,
            off,
            size,
            None if rows[i] is None else (mv.source, rows[i]),
            None if rows[len(mine) + i] is None else (mv.buf, rows[len(mine) + i]),
        )
        for i, (mv, off, size) in enumerate(mine)
    )
    return Plan(name, me, nranks, (msgs,), max(fill), max(stage))


def _device_positions(positions: Sequence[np.ndarray | None], xp: Any) -> list[Any]:
    """:func:`~blasmp_array.ops.engine._exchange.positions_index` of each array (None stays None),
    with the arrays that are not one run uploaded in ONE host-to-device copy and sliced (about
    twenty copies per interchange plan, ~0.1 ms each on the GPU node, were on the critical path
    of every step)."""
    out: list[Any] = [None if p is None else positions_index(p, np) for p in positions]
    if xp is np:
        return out
    upload = [i for i, idx in enumerate(out) if isinstance(idx, np.ndarray)]
    if upload:
        flat = xp.asarray(np.concatenate([out[i] for i in upload]))
        start = 0
        for i in upload:
            size = int(out[i].size)
            out[i] = flat[start : start + size]
            start += size
    return out


def _run(
    be: Any,
    name: str,
    moves: Sequence[_Move],
    dtype: Any,
    kern: Any,
    me: int,
    p: int,
    after: Any = None,
) -> None:
    """Run the one-step plan of ``moves`` (collective; returns with both streams drained);
    ``after``: an event the packing waits for."""
    run_plan(be, _build_plan(name, moves, me, p, be.xp), dtype, kern, 1, after=after)


class _RowKernels:
    """Pack rows of ``sources[i]`` (all their columns) / unpack them into rows of ``bufs[j]``."""

    def __init__(self, sources: Sequence[Any], bufs: Sequence[Any]) -> None:
        self.sources, self.bufs = list(sources), list(bufs)

    def pack(self, msg: Message, out: Any) -> None:
        source, rows = msg.pack
        data = self.sources[source]
        take_rows(out.reshape(-1, data.shape[1]), data, rows)

    def unpack(self, msg: Message, data: Any) -> None:
        buf, dst = msg.unpack
        b = self.bufs[buf]
        put_rows(b, dst, data.reshape(-1, b.shape[1]))

    def local(self, msg: Message) -> None:
        buf, dst = msg.unpack
        source, rows = msg.pack
        put_rows(self.bufs[buf], dst, self.sources[source][rows])


@warmup_kernels
def _sample(backend: Backend, xp: Any, dtype: np.dtype) -> None:
    """Row packs/unpacks of the interchange plans (index arrays), and the panel/block puts."""
    src = xp.zeros((4, 3), dtype)
    out = xp.zeros(6, dtype)
    idx = xp.asarray(np.array([2, 0]))
    out.reshape(-1, 3)[...] = src[idx]
    dst = xp.zeros((3, 3), dtype)
    dst[idx] = out.reshape(-1, 3)
    dst[idx] = src[:, :3][idx]
    put_rows(src, idx, dst[:2])
    take_rows(dst[:2], src, idx)
    _put_block(src, 1, dst[:2])
    take_rows(dst[:2, :2], src[:, :2], idx)
    put_rows(src, slice(1, 3), dst[:2])  # the same with row runs (slices)
    take_rows(dst[:2, :2], src[:, :2], slice(0, 2))
    panel = xp.zeros((4, 3), dtype, order="F")  # the column-major panel: the gather's unpack
    panel[slice(0, 2)] = out.reshape(-1, 3)  # and the shares' rows, runs or index arrays
    out.reshape(-1, 3)[...] = panel[slice(0, 2)]
    panel[idx] = out.reshape(-1, 3)
    out.reshape(-1, 3)[...] = panel[idx]


# -- the pipeline -------------------------------------------------------------------------------
class _LUPipeline:
    """Blocked right-looking LU of the working matrix ``w`` (see the module docstring)."""

    def __init__(self, w: BlockCyclicArray) -> None:
        self.w = w
        self.be = w.backend
        self.grid = w.grid
        lay = self.lay = w.layout
        self.m, self.n = lay.shape  # rows, columns (lu_factor takes rectangular matrices)
        self.nb = lay.block[0]
        self.K = -(-min(self.m, self.n) // self.nb)  # steps: block columns with pivots
        self.pr, self.pc = lay.grid_shape
        self.myrow, self.mycol = self.grid.coords
        self.nrow, self.ncol = lay.local_shape(self.myrow, self.mycol)
        self.rows = lay.local_rows(self.myrow)  # global rows of my local rows
        self._pending: tuple[Any, ...] = ()  # buffers of enqueued work (see _update_next_panel)
        self.leader = self.grid.rank  # set by run(): the rank factoring this device's panels
        self.leaders: tuple[int, ...] = ()  # set by run(): the leaders of all devices
        self.shared: tuple[tuple[int, tuple[int, ...]], ...] = ()

    def ext(self, k: int) -> int:
        """Columns of block column ``k`` (the panel's width)."""
        return min(self.nb, self.n - k * self.nb)

    def pivots(self, k: int) -> int:
        """Pivots of step ``k``: the panel's width, or fewer rows at the last step of a wide
        matrix (then there is no trailing matrix; a tall one has no columns to its right)."""
        return min(self.ext(k), self.m - k * self.nb)

    def before(self, x: int, p: int, axis: int) -> int:
        """Local extent on grid row (axis 0) / column (axis 1) ``p`` of the blocks ``< x``."""
        P = self.pr if axis == 0 else self.pc
        first = (p - self.lay.src[axis]) % P
        count = 0 if x <= first else -(-(x - first) // P)
        total = self.lay.local_shape(p, 0)[0] if axis == 0 else self.lay.local_shape(0, p)[1]
        return min(count * self.nb, total)

    def run(self) -> tuple[np.ndarray, int]:
        """Factor; return ``(piv, zero)`` (collective)."""
        if self.grid.size == 1:
            return self._run_one_process()
        be, m, nb = self.be, self.m, self.nb
        piv = np.empty(min(m, self.n), dtype=np.int32)
        zero = -1
        self.leader, self.leaders, self.shared = device_groups(be)
        panel = self._gather_panel(self._gather_setup(0), None)
        factored = self._factor(0, panel)
        gather = self._gather_setup(1) if self.K > 1 else None
        rows = self._update_rows(0)
        for k in range(self.K):
            k0 = k * nb
            p, inf = self._pivots(*factored)
            piv[k0 : k0 + p.size] = p + k0
            if inf > 0 and zero < 0:
                zero = k0 + inf - 1
            top, moved, mine = self._swap(k, panel, row_map(p + k0, k0, m))
            self._pending = ()  # the swap exchange drained the streams: last step's buffers
            ready, rest = self._update_next_panel(k, panel, top, moved, mine, rows)
            nxt = panel
            if not be.concurrent_streams:
                rest()  # the gather travels under the rest of the update (getrf waits for it)
            if gather is not None:  # look-ahead: panel k + 1 factored beside the rest of step k
                nxt = self._gather_panel(gather, ready)
                factored = self._factor(k + 1, nxt)
            if be.concurrent_streams:
                rest()
            panel = nxt
            # while panel k + 1 is factored: the host work that needs no pivots, done ahead
            gather = self._gather_setup(k + 2) if k + 2 < self.K else None
            rows = self._update_rows(k + 1) if k + 1 < self.K else rows
        be.synchronize()
        self._pending = ()
        return piv, zero

    def _factor(self, k: int, panel: Any) -> tuple[Any, Any]:
        """Enqueue the factorisation of panel ``k`` (step 2): on the comm stream, idle between
        the exchanges, where the streams run concurrently (``backend.concurrent_streams``, the
        GPU), before the rest of step ``k - 1``'s update, so that both run at once; else on the
        compute stream after that update, whose gather overlaps it (the CPU backend's stream
        threads share the cores with the BLAS: 2 ranks x 1 thread on 2 cores, n = 4096, block 256,
        medians of 3 interleaved with the tree before this change: 0.85-1.03 s with getrf on the
        comm thread, 0.85-0.92 s with it on compute ahead of the update (the gather then not
        overlapped), 0.76-0.78 s this way, against 0.73-0.83 s before). Only each device's
        leader factors. Returns ``(pivots and INFO, event)`` (both None on the other ranks: only
        rank 0, a leader, reads them)."""
        be = self.be
        if be.rank != self.leader:
            return None, None
        e = self.pivots(k)
        out = be.xp.zeros(e + 1, dtype=np.int32)  # the pivots, then INFO: one copy to the host
        stream = be.comm_stream if be.concurrent_streams else be.compute
        be.begin()
        be.getrf(panel, out[:e], out[e:], stream)
        return out, be.record_event(stream)

    def _pivots(self, out: Any, done: Any) -> tuple[np.ndarray, int]:
        """Step 3: the pivots and INFO of a factored panel from rank 0 (a leader) to every
        rank (host, small metadata; every leader factored the same panel with the same library:
        the broadcast only guarantees that every rank builds the same plans). Rank 0 waits
        for its ``getrf`` only, not for the update running on the compute stream."""
        be = self.be
        if be.rank == 0:
            be.host_wait(done)
            got = be.asnumpy(out).astype(np.int64)
            res = (got[:-1], int(got[-1]))
        else:
            res = None
        return be.bcast(res)

    def _run_one_process(self) -> tuple[np.ndarray, int]:
        """One process holds the whole matrix: :func:`ops.lapack._lu_local.factor_local`."""
        return factor_local(self.be, self.w._data)

    def _gather_setup(self, k: int) -> tuple[Plan, Any, _RowKernels]:
        """The plan of ``# A[k0:, block column k] -> the leaders`` (step 1), its panel buffer
        (on every rank; column-major: LAPACK's and cuSOLVER's getrf factor it in place, without
        copies) and kernels: the panel goes to every rank that factors it, the other ranks get
        their rows of the factored panel in the next swap exchange. Needs no pivots: built
        while the previous panel is factored."""
        be, lay, grid = self.be, self.lay, self.grid
        k0, e = k * self.nb, self.ext(k)
        c = (k + lay.src[1]) % self.pc
        moves = []
        for r in range(self.pr):
            lr0, nr = self.before(k, r, 0), lay.local_shape(r, c)[0]
            if lr0 < nr:
                g = lay.local_rows(r)[lr0:]
                moves.append(
                    _Move(grid.rank_of(r, c), self.leaders, np.arange(lr0, nr), _PANEL, g - k0, e)
                )
        plan = _build_plan(f"lu panel step {k}", moves, grid.rank, grid.size, be.xp)
        panel = be.xp.empty((self.m - k0, e), self.w.dtype, order="F")
        c0 = lay.local_offset(k, k)[1]
        data = self.w._data[:, c0 : c0 + e] if self.mycol == c else self.w._data[:, :0]
        return plan, panel, _RowKernels([data], [panel, None, None])

    def _gather_panel(self, setup: tuple[Plan, Any, _RowKernels], after: Any) -> Any:
        """Run the gather of :meth:`_gather_setup` (collective); its packing waits for the event
        ``after`` (the update of the panel's block column). Returns the panel."""
        plan, panel, kern = setup
        run_plan(self.be, plan, self.w.dtype, kern, 1, after=after)
        return panel

    def _panel_shares(self, k: int) -> list[_Move]:
        """The factored panel of step ``k`` from each device's leader to the other ranks on its
        device (a device-to-device copy under MPS): to each, only the rows it reads: ``L_kk``
        (the first ``e`` rows) and the rows of its grid row (its rows of ``L``, and of the
        panel it stores). One message per (device, grid row)."""
        lay, k0, pw = self.lay, k * self.nb, self.ext(k)
        top = np.arange(self.pivots(k))
        moves = []
        for lead, others in self.shared:
            by_row: dict[int, list[int]] = {}
            for q in others:
                by_row.setdefault(self.grid.coords_of(q)[0], []).append(q)
            for r, qs in sorted(by_row.items()):
                mine = lay.local_rows(r)[self.before(k, r, 0) :] - k0
                rows = np.concatenate([top, mine[mine >= top.size]])  # ascending, no repeats
                moves.append(_Move(lead, tuple(qs), rows, _PANEL, rows, pw, source=1))
        return moves

    def _swap(self, k: int, panel: Any, src: np.ndarray) -> tuple[Any, Any, np.ndarray]:
        """Step 4 of step ``k`` (``src``: the composed interchanges of this step), with the
        factored panel's shares (:meth:`_panel_shares`) in the same exchange; its packing waits
        for the compute stream (the rest of step ``k - 1``'s update). Returns ``(top, moved,
        mine)``: the new block row ``k`` (this grid column's local columns), the moved rows this
        process owns and their global indices."""
        be, lay, grid, xp = self.be, self.lay, self.grid, self.be.xp
        m, k0, e = self.m, k * self.nb, self.pivots(k)
        dtype = self.w.dtype
        # the new block row k -> every process of each grid column
        top_src = src[k0 : k0 + e]
        own = _owner_rows(lay, top_src)
        moves = []
        for c in range(self.pc):
            width = lay.local_shape(0, c)[1]
            col = tuple(grid.rank_of(r, c) for r in range(self.pr))
            for ps in range(self.pr):
                sel = np.flatnonzero(own == ps)
                if sel.size:
                    moves.append(
                        _Move(
                            grid.rank_of(ps, c),
                            col,
                            _local_rows(lay, top_src[sel]),
                            _TOP,
                            sel,
                            width,
                        )
                    )
        # other moved rows (old rows of block row k) -> their new owners
        rest = np.arange(k0 + e, m)
        rest = rest[src[k0 + e :] != rest]
        moves += _moves_to_owners(lay, grid, rest, src[rest], _MOVED)
        moves += self._panel_shares(k)
        mine = rest[_owner_rows(lay, rest) == self.myrow]
        top = xp.empty((e, self.ncol), dtype)
        moved = xp.empty((mine.size, self.ncol), dtype)
        kern = _RowKernels([self.w._data, panel], [panel, top, moved])
        after = be.record_event(be.compute)
        _run(be, f"lu swap step {k}", moves, dtype, kern, grid.rank, grid.size, after)
        return top, moved, mine

    def _update_rows(self, k: int) -> tuple[Any, Any]:
        """``(panel_rows, low_rows)`` of step ``k``: the panel's rows this process stores (it
        owns block column ``k``; else None) and its rows of ``L`` below block row ``k`` (None
        without a trailing update here), as device indices (slices when one run). Needs no
        pivots: prepared while the previous panel is factored."""
        xp, lay, k0 = self.be.xp, self.lay, k * self.nb
        lr0 = self.before(k, self.myrow, 0)
        lr1 = self.before(k + 1, self.myrow, 0)
        owns_panel = self.mycol == (k + lay.src[1]) % self.pc and lr0 < self.nrow
        panel_rows = positions_index(self.rows[lr0:] - k0, xp) if owns_panel else None
        update = lr1 < self.nrow and self.before(k + 1, self.mycol, 1) < self.ncol
        low_rows = positions_index(self.rows[lr1:] - k0, xp) if update else None
        return panel_rows, low_rows

    def _update_next_panel(
        self, k: int, panel: Any, top: Any, moved: Any, mine: np.ndarray, rows: tuple[Any, Any]
    ) -> tuple[Any, Any]:
        """Steps 5-6 of step ``k`` for block column ``k + 1`` (the next panel), enqueued on the
        compute stream without waiting: the moved rows into the matrix, ``U`` and the update
        of that block column. Returns the event after it (the next panel's gather waits for it)
        and ``rest()``, which enqueues the rest of the step (``U`` and the update of the other
        columns, the new block row and the factored panel into the matrix), run after the next
        panel's factorisation is enqueued so that the two overlap (look-ahead)."""
        be, lay, xp = self.be, self.lay, self.be.xp
        comp = be.compute
        e = self.pivots(k)
        pw = self.ext(k)  # the panel's columns (= e but at the last step of a wide matrix)
        dtype = self.w.dtype
        # device index arrays and buffers first (host thread, current CuPy stream), then
        # order the compute stream after them (begin) before enqueueing the kernels
        data = self.w._data
        cn = self.before(k + 1, self.mycol, 1)
        lr0 = self.before(k, self.myrow, 0)
        lr1 = self.before(k + 1, self.myrow, 0)
        mine_rows = positions_index(_local_rows(lay, mine), xp) if mine.size else None
        panel_rows, low_rows = rows
        update = low_rows is not None
        gather_low = update and not isinstance(low_rows, slice)
        # my rows of L below block row k: a view of the panel when they are one run of it
        low = xp.empty((self.nrow - lr1, e), dtype) if gather_low else None
        if update and not gather_low:
            low = panel[low_rows]
        # block column k + 1: its owners' first local columns from cn
        split = cn
        if self.mycol == (k + 1 + lay.src[1]) % self.pc and k + 1 < self.K:
            split = min(self.ncol, cn + self.ext(k + 1))
        be.begin()
        if mine_rows is not None:  # moved rows -> the matrix
            be.launch(comp, put_rows, data, mine_rows, moved)
        if split > cn:  # U[k, k + 1] = L_kk^{-1} top (step 5)
            solve_unit_lower(be, panel[:e, :e], top[:, cn:split], comp)
        if update and gather_low:
            be.launch(comp, take_rows, low, panel, low_rows)
        if update and split > cn:  # A[i > k, k + 1] -= L[i, k] U[k, k + 1] (step 6)
            minus_product(be, low, top[:, cn:split], data[lr1:, cn:split], comp)
        ready = be.record_event(comp)

        def rest() -> None:
            if split < self.ncol:  # U[k, j > k + 1]
                solve_unit_lower(be, panel[:e, :e], top[:, split:], comp)
            if self.myrow == (k + lay.src[0]) % self.pr:  # the new block row k
                r0 = lay.local_offset(k, k)[0]
                be.launch(comp, _put_block, data, r0, top)
            if panel_rows is not None:  # the factored panel -> the matrix
                c0 = lay.local_offset(k, k)[1]
                be.launch(comp, take_rows, data[lr0:, c0 : c0 + pw], panel, panel_rows)
            if update and split < self.ncol:
                minus_product(be, low, top[:, split:], data[lr1:, split:], comp)
            # kept alive until the streams are drained (by the next swap or the end of run())
            self._pending = (top, moved, low, mine_rows, panel_rows, low_rows, panel)

        return ready, rest


def _put_block(data: Any, r0: int, top: Any) -> None:
    data[r0 : r0 + top.shape[0]] = top
