"""Distributed Cholesky factorisation (ScaLAPACK ``pxpotrf``/``pxpotrs``) and the SciPy/NumPy
entry points built on it: :func:`cholesky`, :func:`cho_factor`, :func:`cho_solve` and
``np.linalg.cholesky`` (``solve`` with ``assume_a='pos'``, in ``ops/lapack/solves.py``, runs
:func:`factor_working` and :func:`cho_solve`).

``A`` is ``n x n`` Hermitian positive definite; only its ``lower`` (or upper) triangle is read.
The factor overwrites that triangle of a working copy: ``A = L L^H`` (lower) or ``A = U^H U``
(upper). Cost: ``n^3 / 3`` flops (times 4 real flops per complex multiply-add).

Layering: the public drivers (checks, views, blocking) -> :func:`factor` (finite check, working
copy, one reduction of the INFO) -> :class:`_CholeskyPipeline` (one step per block) -> local
kernels on tiles (``backend.potrf`` on the diagonal tile, ``backend.trsm`` on the panel,
``backend.gemm`` on the trailing triangle) -> two plans over the one-sided exchange engine
(:mod:`ops.engine._exchange`), alive at once: the diagonal tile and the panels
(:class:`ops.engine.panels.PanelExchange`, driven by hand).

Algorithm (right-looking, blocked, look-ahead 1)
------------------------------------------------
Blocks are square ``nb x nb`` (``K = ceil(n / nb)`` block steps, the last one ragged). Written
for ``lower``; ``upper`` is the mirror image (rows <-> columns, ``L[i, k] <-> U[k, i]^H``).
Step ``k``:

1. ``potrf``: the owner of ``A[k, k]`` factors it (``L_kk``) on its compute stream; LAPACK's
   INFO goes to ``info[k]``, a local device word (nothing is read on the host).
2. ``# L_kk -> grid column of block column k``: the tile goes to the processes of its grid
   column that hold blocks ``A[i, k]``, ``i > k`` (upper: along the grid row).
3. ``trsm``: each of them solves its whole local slab ``L[i > k, k] = A[i > k, k] L_kk^{-H}``
   with ONE local TRSM (upper: ``U[k, j > k] = U_kk^{-H} A[k, j > k]``).
4. ``# L[:, k] -> grid rows (row panel) and, as L[:, k]^H, grid columns (column panel)``: the
   panel exchange of :mod:`ops.engine.panels` with the source ``tril(A)[:, k]`` (``Source(structure=
   'tri')``: the unreferenced triangle is never read, blocks above the diagonal are trimmed).
   Process ``(r, c)`` receives ``L[rows of r, k]`` and ``L[cols of c, k]``.
5. Update of the trailing *triangle*: ``A[i, j] -= L[i, k] L[j, k]^H`` for ``i >= j > k``
   (upper: ``i <= j``): per chunk of local block columns (the backend's step width), one GEMM
   on the rows below the chunk's blocks, and for the local block rows that cross the chunk's
   diagonal a GEMM on their part below it plus a SYRK on the diagonal block (real dtypes; a
   GEMM for complex ones, computing entries of the other triangle, which stays unspecified).

Look-ahead (``num_stages >= 2``): at step ``k`` the owner of the next diagonal tile first
applies step ``k``'s update to that tile alone, factors it and lets the comm stream send it;
then the processes of block column ``k + 1`` update the rest of it, solve it and let the comm
stream send the panel; only then comes the rest of step ``k``'s update, so the tile and the
panel of ``k + 1`` travel while the big update runs. With ``num_stages == 1`` the next panel is
factored after the whole update (no overlap).

Streams and events per process (``E_k``: event recorded after the trsm of step ``k``)::

    compute: ... E_k | recv panel(k) | [update tile k+1, potrf(k+1) P_k+1] | [update the
             rest of column k+1, wait tile(k+1), trsm(k+1)] E_k+1 | rest of update(k) |
             ack tile(k), release(k) | recv panel(k+1) ...
    comm:    ... [wait P_k+1] put tile(k+1) | [wait E_k+1] pack + put panel(k+1) | ...

(brackets: only on the processes concerned; ``P_k``: event after the potrf of step ``k``).

Signal protocol
---------------
Both exchanges follow the engine's one signal discipline (``ops/engine/_exchange.py``: monotonic
per-peer ``ready``/``ack`` counters whose expected values come from the plan, never reset,
one pooled workspace per channel).

*Diagonal tile* (plan ``"cholesky tile"`` on channel ``"cholesky.tile"``, ``S = num_stages``
slots of ``nb x nb``, one in-slot message per step: the receivers' trsm reads the tile in the
slot):

* ``ready[s, owner]`` (on a receiver): the owner of ``A[k, k]`` ``put_signal``\\ s the
  factored tile into slot ``s = k mod S`` of every receiver (comm stream, after the event
  ``P_k`` of its potrf: ``send(k, after=P_k)``), adding 1; the receiver waits (compute stream,
  before its trsm) for the cumulative number of tiles that owner put into slot ``s``.
* ``ack[s, r]`` (on a sender): receiver ``r`` adds 1 (``release(k)``, compute stream, after
  step ``k``'s update is enqueued, so after its trsm read slot ``s``) on the owner of
  ``A[k + S, k + S]`` if that one sends it step ``k + S``'s tile; the owner waits (comm stream)
  before putting step ``k + S`` into ``r``. The first ``S`` steps need no ack.

*Panels*: :class:`ops.engine.panels.PanelExchange` (the SUMMA plan on the engine) on channel
``"cholesky.panel"``; ``send(k, after=E_k)`` packs step ``k``'s blocks only after the trsm
that produced them; every process calls ``send(k)``, ``recv(k)`` and ``release(k)`` for every
``k``. Both exchanges end with one ``finish`` (one synchronisation and one host ``allgather``
of the outcome; a timeout raises on every rank).

Deadlock freedom: order the messages ``tile(0) < panel(0) < tile(1) < panel(1) < ...``; every
comm stream issues them in this order. ``tile(k)`` waits for ``potrf(k)`` (needs
``panel(< k)``) and acks of step ``k - S``; ``panel(k)`` waits for ``E_k`` (needs ``tile(k)``)
and acks of step ``k - S``. A release of step ``k - S`` needs ``panel(k - S)`` and, with
look-ahead, ``tile(k - S + 1)``, both earlier than ``tile(k)`` when ``S >= 2``.

Not positive definite
---------------------
The steps never depend on the data, so a failing tile does not change the protocol: every
process runs all ``K`` steps (the remaining values are garbage, no kernel raises), then the
operator makes ONE host reduction of the first failing step's order ``k nb + info[k]`` over
all processes and raises :class:`numpy.linalg.LinAlgError` naming it on every rank. The input
is untouched unless ``overwrite_a``. No step waits for data that is never sent, so nothing
hangs; the cost of a failure is the rest of the factorisation.
"""

from __future__ import annotations

import functools
from numbers import Integral
from typing import Any

import numpy as np

from ..._alloc import new_array
from ..._dispatch import implements
from ...array import BlockCyclicArray, check_dtype
from ...backends.base import Backend
from ..engine import _checks as ck
from ..engine import _exchange as engine
from ..engine import _factor_block
from ..engine._triangle import zero_triangle
from ..engine._warmup import begin_pipeline, sample_matrix, warmup_kernels
from ..engine.panels import PanelExchange, PanelSpec, Source, default_step_width, make_steps
from ._recursive_potrf import first_failure, recursive_potrf

__all__ = [
    "cholesky",
    "cho_factor",
    "cho_solve",
    "factor",
    "factor_working",
    "free_workspace",
]


# -- public API -------------------------------------------------------------------------------
def cholesky(
    a: BlockCyclicArray,
    lower: bool = False,
    overwrite_a: bool = False,
    check_finite: bool = True,
    num_stages: int = 2,
) -> BlockCyclicArray:
    """Cholesky factor of a Hermitian positive definite matrix (SciPy's ``cholesky``).
    Collective.

    Returns ``U`` with ``a = U^H U`` (default, as SciPy) or ``L`` with ``a = L L^H``
    (``lower=True``), computed by a distributed blocked right-looking factorisation (ScaLAPACK
    ``pxpotrf``) on ``a``'s grid and layout.

    Parameters
    ----------
    a : BlockCyclicArray
        ``n x n`` Hermitian (symmetric) positive definite matrix. Only the triangle named by
        ``lower`` is read; the other may hold anything (NaN included). Square blocks are
        needed: other blocks are redistributed to ``(mb, mb)`` with a warning. A lazy view
        (``A.T``) is materialised first.
    lower : bool
        Factor (and read) the lower triangle; default: the upper one.
    overwrite_a : bool
        Work in ``a``'s storage (no copy) and return it. On failure ``a`` then holds garbage.
    check_finite : bool
        Check that the referenced triangle holds only finite numbers (one reduction);
        ``ValueError`` on every rank otherwise.
    num_stages : int
        Pipeline depth (slots per exchange); ``>= 2`` enables look-ahead (the next panel is
        factored and sent while the trailing matrix is updated).

    Returns
    -------
    c : BlockCyclicArray
        The triangular factor, same shape, layout and grid as ``a``; the other triangle is zero.

    Raises
    ------
    numpy.linalg.LinAlgError
        On every rank, when the leading minor of some order ``j`` (1-based, LAPACK's INFO) is
        not positive definite; the message names ``j``.
    ValueError, TypeError
        On every rank, before any communication, for invalid arguments.

    Notes
    -----
    ``n^3 / 3`` flops. The algorithm and its signal protocol are described in the module
    docstring of :mod:`blasmp_array.ops.lapack.cholesky`.
    """
    c = factor(a, ck.check_flag(lower, "lower"), overwrite_a, check_finite, num_stages, "cholesky")
    _zero_other_triangle(c, bool(lower))
    return c


def cho_factor(
    a: BlockCyclicArray,
    lower: bool = False,
    overwrite_a: bool = False,
    check_finite: bool = True,
    num_stages: int = 2,
) -> tuple[BlockCyclicArray, bool]:
    """Cholesky factorisation for :func:`cho_solve` (SciPy's ``cho_factor``). Collective.

    Same arguments and algorithm as :func:`cholesky`; returns ``(c, lower)`` where the
    ``lower`` (or upper) triangle of ``c`` holds the factor and the other triangle is
    unspecified (it is not cleaned: no extra pass over the matrix).

    Returns
    -------
    c : BlockCyclicArray
        The factor in one triangle.
    lower : bool
        Which triangle.

    Raises
    ------
    numpy.linalg.LinAlgError
        On every rank if ``a`` is not positive definite (the message names the order of the
        leading minor, LAPACK's INFO).

    Notes
    -----
    ``n^3 / 3`` flops.
    """
    low = ck.check_flag(lower, "lower")
    c = factor(a, low, overwrite_a, check_finite, num_stages, "cho_factor")
    return c, low


def cho_solve(
    c_and_lower: tuple[BlockCyclicArray, bool],
    b: BlockCyclicArray,
    overwrite_b: bool = False,
    check_finite: bool = True,
) -> BlockCyclicArray:
    """Solve ``A x = b`` given the Cholesky factorisation of ``A`` (SciPy's ``cho_solve``).
    Collective.

    Two distributed triangular solves (:func:`blasmp_array.ops.blas3.trsm.trsm`, side 'left'):
    ``L y = b, L^H x = y`` (lower) or ``U^H y = b, U x = y`` (upper).

    Parameters
    ----------
    c_and_lower : (BlockCyclicArray, bool)
        The output of :func:`cho_factor`; only the named triangle of ``c`` is read.
    b : BlockCyclicArray
        ``n x k`` right-hand sides on ``c``'s grid (another row block is redistributed with a
        warning).
    overwrite_b : bool
        Allow the solution to be written into ``b``'s storage.
    check_finite : bool
        Check ``b`` and the referenced triangle of ``c`` for NaN/inf (``ValueError``).

    Returns
    -------
    x : BlockCyclicArray
        ``n x k``, ``b``'s layout.

    Notes
    -----
    ``2 n^2 k`` flops.
    """
    from ..blas3.trsm import trsm

    c, lower = ck.factor_pair(c_and_lower, "cho_solve", "(c, lower)", "cho_factor")
    c = ck.check_array(c, "c", "cho_solve")
    b = ck.check_array(b, "b", "cho_solve")
    low = ck.check_flag(lower, "lower")
    ck.check_flag(overwrite_b, "overwrite_b")
    if c.ndim != 2 or c.shape[0] != c.shape[1]:
        raise ValueError(f"cho_solve: c must be square, got shape {c.shape}")
    if b.shape[0] != c.shape[0]:
        raise ValueError(
            f"cho_solve: b must have {c.shape[0]} rows to match the {c.shape[0]}x{c.shape[1]} "
            f"factor, got shape {b.shape}"
        )
    if ck.check_flag(check_finite, "check_finite"):
        ck.check_finite(c.resolve(), b.resolve(), "cho_solve", "L" if low else "U")
    first, second = ("N", "C") if low else ("C", "N")
    y = trsm(c, b, side="left", lower=low, trans=first, overwrite_b=bool(overwrite_b))
    return trsm(c, y, side="left", lower=low, trans=second, overwrite_b=True)


@implements(np.linalg.cholesky)
def _np_cholesky(a: Any, /, *, upper: bool = False) -> BlockCyclicArray:
    """``np.linalg.cholesky(A, upper=False)``: ``L`` (or ``U = L^H``), the other triangle
    zero; reads the lower (upper) triangle only. Not positive definite: LinAlgError."""
    up = ck.check_flag(upper, "upper")
    return cholesky(a, lower=not up, check_finite=False)


# -- the driver --------------------------------------------------------------------------------
def factor(
    a: BlockCyclicArray,
    lower: bool,
    overwrite_a: Any = False,
    check_finite: Any = True,
    num_stages: Any = 2,
    op: str = "cholesky",
) -> BlockCyclicArray:
    """The factor of ``a`` in its ``lower`` (upper) triangle, the other triangle unspecified.

    Every check is made identically on every rank before any communication; after the
    pipeline one reduction of the INFO raises ``LinAlgError`` everywhere (see module docstring).
    The working copy is made in the block of :mod:`._factor_block`; the factor comes back in
    ``a``'s block (square).
    """
    w, back = factor_working(a, lower, overwrite_a, check_finite, num_stages, op)
    if back is None:
        return w
    c = _factor_block.to_block(w, *back)
    if overwrite_a and not a.is_view and tuple(a.block) == tuple(back):
        ck.store(a, c)  # the caller asked for its storage
        return a
    return c


def factor_working(
    a: BlockCyclicArray,
    lower: bool,
    overwrite_a: Any = False,
    check_finite: Any = True,
    num_stages: Any = 2,
    op: str = "cholesky",
) -> tuple[BlockCyclicArray, tuple[int, int] | None]:
    """:func:`factor` without the way back: ``(w, back)``, the factor in the working block
    and the caller's block to return it in (None: ``w`` is already in it)."""
    a = ck.check_array(a, "a", op)
    overwrite_a = ck.check_flag(overwrite_a, "overwrite_a")
    check_finite = ck.check_flag(check_finite, "check_finite")
    if not isinstance(num_stages, Integral) or isinstance(num_stages, bool) or num_stages < 1:
        raise ValueError(f"{op}: num_stages must be an integer >= 1, got {num_stages!r}")
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
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
        ck.check_finite(w, None, op, "L" if lower else "U")
    caller = w
    one = w.grid.size == 1 and _LOCAL_ON_ONE_PROCESS
    # one process, lower factor, a backend faster at the upper one: the factor is computed in a
    # transposed copy of ``caller`` and written into ``w`` (_local_potrf), so ``w`` needs no copy
    flip = one and lower and w.backend.potrf_fast_uplo == "U"
    nb = _factor_block.block_for(w, "cholesky")
    if nb is not None:  # the working copy in the working block (docs/defaults.md)
        w = _factor_block.to_block(w, nb, nb)
    elif not in_place and w is a:
        w = new_array(w.layout, w.grid, w.dtype) if flip else w.copy()
    n = w.shape[0]
    if n:
        if one:
            info = _local_potrf(w, lower, caller if flip else None)
        else:
            info = _CholeskyPipeline(w, lower, int(num_stages)).run()
        if info <= n:
            raise np.linalg.LinAlgError(
                f"{op}: the leading minor of order {info} is not positive definite "
                f"(LAPACK INFO = {info}): a is not Hermitian positive definite"
            )
    return w, (None if nb is None else caller.block)


#: a 1x1 grid factors its local matrix without the pipeline: measured on one H200 at
#: n = 16384, the blocked pipeline on one process took 0.172 s against cuSOLVER's 0.061 s
#: (its potrf and trsm steps cannot overlap the updates on a single compute stream)
_LOCAL_ON_ONE_PROCESS = True

#: per backend name, ``(leaf, halve)`` of the local potrf of :mod:`._recursive_potrf` (recursive
#: halving down to leaves of ``leaf``, or right-looking blocks of ``leaf`` when not ``halve``); a
#: backend not listed calls its library potrf once (LAPACK's own potrf is already recursive).
#: GPU, measured on one H200 (tools/potrf_leaf_sweep.py, docs/cholesky.md): at
#: n = 16384 halving to leaves of 4096 took 0.061 s against 0.064 s with one cuSOLVER call; smaller
#: leaves and right-looking blocks of 256-2048 were no faster (cuBLAS's DTRSM runs at 31 TFLOP/s
#: at n/2, DSYRK at 45, DGEMM at 54); n <= 4096 is one cuSOLVER call.
RECURSIVE_POTRF: dict[str, tuple[int, bool]] = {"gpu": (4096, True)}


def _local_potrf(w: BlockCyclicArray, lower: bool, flip: BlockCyclicArray | None = None) -> int:
    """Factor the whole local matrix (1x1 grid) in place; the pipeline's INFO convention:
    the order of the first non-positive leading minor, ``n + 1`` when there is none.

    ``flip`` (a lower factor on a backend whose ``potrf_fast_uplo`` is ``'U'``): the matrix
    to factor, which may be ``w`` itself. Its conjugate transpose ``t`` (a temporary) holds
    the referenced triangle as an upper one; ``t = U^H U`` is factored and ``L = U^H`` written
    into ``w``'s lower triangle, the rest of ``w`` getting ``flip``'s other triangle. Two
    transposing copies instead of one plain one, against the library's slow triangle (one
    H200, n = 16384: 44.2 ms upper, 59.5 ms lower; a copy is about 1 ms there)."""
    be = w.backend
    n = w.shape[0]
    begin_pipeline(be, w.dtype)
    # n <= leaf (and a backend not listed): one library potrf on the whole matrix
    leaf, halve = RECURSIVE_POTRF.get(be.name, (n, True))
    if flip is None:
        info = recursive_potrf(be, w._data, lower, leaf, be.compute, halve=halve)
    else:
        t = be.xp.empty((n, n), w.dtype)  # freed after the synchronisation below
        be.launch(be.compute, _conj_transpose_into, be.xp, t, flip._data)  # t = A^H: A's L in t's U
        info = recursive_potrf(be, t, False, leaf, be.compute, halve=halve)
        be.launch(be.compute, _conj_transpose_into, be.xp, w._data, t)  # w = t^H: U^H = L in w's L
    be.synchronize()
    order = first_failure(be.asnumpy(info), n, leaf, halve=halve)
    return order if order > 0 else n + 1


def _zero_other_triangle(c: BlockCyclicArray, lower: bool) -> None:
    # the strict other triangle: triu(., 1) for a lower factor, tril(., -1) for an upper one
    zero_triangle(c.layout, c.grid, c._data, "U" if lower else "L", 1 if lower else -1)


# -- the pipeline -------------------------------------------------------------------------------
class _CholeskyPipeline:
    """Blocked right-looking Cholesky of the working matrix ``w`` (see the module docstring)."""

    def __init__(self, w: BlockCyclicArray, lower: bool, num_stages: int) -> None:
        self.w = w
        self.lower = lower
        self.S = num_stages
        self.be = w.backend
        self.grid = w.grid
        lay = self.lay = w.layout
        self.n = lay.shape[0]
        self.nb = lay.block[0]
        self.K = lay.nblocks[0]
        self.pr, self.pc = lay.grid_shape
        self.src = lay.src
        self.myrow, self.mycol = self.grid.coords
        self.nrow, self.ncol = lay.local_shape(self.myrow, self.mycol)
        # local columns per trailing-update GEMM (whole blocks)
        self.chunk = max(1, default_step_width(self.be) // self.nb) * self.nb

    # -- index maps (square blocks: rows and columns share nb) --
    def ext(self, k: int) -> int:
        return min(self.nb, self.n - k * self.nb)

    def rowner(self, i: int) -> int:
        return (i + self.src[0]) % self.pr

    def cowner(self, j: int) -> int:
        return (j + self.src[1]) % self.pc

    def before(self, x: int, p: int, axis: int) -> int:
        """Local extent on grid row (axis 0) / column (axis 1) ``p`` of the blocks ``< x``."""
        P = self.pr if axis == 0 else self.pc
        first = (p - self.src[axis]) % P
        count = 0 if x <= first else -(-(x - first) // P)
        total = self.lay.local_shape(p, 0)[0] if axis == 0 else self.lay.local_shape(0, p)[1]
        return min(count * self.nb, total)

    def tile(self, k: int) -> Any:
        r0, c0 = self.lay.local_offset(k, k)
        e = self.ext(k)
        return self.w._data[r0 : r0 + e, c0 : c0 + e]

    def panel_owner_group(self, k: int) -> list[tuple[int, int]]:
        """Processes holding part of block column (lower) / row (upper) ``k`` below (right of)
        the diagonal: the receivers of the tile, plus its owner when it holds such blocks."""
        out = []
        if self.lower:
            c = self.cowner(k)
            for r in range(self.pr):
                if self.before(k + 1, r, 0) < self.lay.local_shape(r, c)[0]:
                    out.append((r, c))
        else:
            r = self.rowner(k)
            for c in range(self.pc):
                if self.before(k + 1, c, 1) < self.lay.local_shape(r, c)[1]:
                    out.append((r, c))
        return out

    def slab(self, k: int) -> Any:
        """My part of the panel of step ``k`` strictly below (right of) the diagonal, or None."""
        e = self.ext(k)
        if self.lower:
            if self.mycol != self.cowner(k):
                return None
            r0 = self.before(k + 1, self.myrow, 0)
            c0 = self.lay.local_offset(k, k)[1]
            return self.w._data[r0:, c0 : c0 + e] if r0 < self.nrow else None
        if self.myrow != self.rowner(k):
            return None
        r0 = self.lay.local_offset(k, k)[0]
        c0 = self.before(k + 1, self.mycol, 1)
        return self.w._data[r0 : r0 + e, c0:] if c0 < self.ncol else None

    # -- the steps --
    def run(self) -> int:
        """Factor; return the first failing order (1-based) or ``n + 1`` (collective)."""
        be, lay, grid = self.be, self.lay, self.grid
        S, K, n = self.S, self.K, self.n
        lookahead = S >= 2
        dtype = self.w.dtype
        uplo = "L" if self.lower else "U"
        # L[:, k] (lower) or U[k, :]^H (upper) as a virtual n x n matrix M: step k's panel is
        # M[:, k] restricted to the referenced triangle (blocks i >= k)
        src = Source(lay, "N" if self.lower else "C", "tri", uplo)
        specs = [PanelSpec(src, lay, 0), PanelSpec(src, lay, 1)]
        me = grid.rank
        tiles_plan = self._tile_plan(dtype)
        self.info = be.xp.zeros(K, dtype=np.int32)
        self._warm(dtype)
        ex = PanelExchange(
            be,
            "cholesky",
            specs,
            [self.w._data, self.w._data],
            make_steps(n, self.nb),
            dtype,
            S,
            me,
            channel="cholesky.panel",
        )
        tiles = engine.Exchange(
            be, tiles_plan, dtype, engine.CallKernels(), S, channel="cholesky.tile"
        )
        try:
            begin_pipeline(be, dtype)
            self._factor_panel(0, ex, tiles)
            for k in range(K):
                row, col = ex.recv(k)
                nxt = k + 1
                if lookahead and nxt < K:
                    self._factor_panel(nxt, ex, tiles, (row, col))
                    self._update_trailing(row, col, nxt)
                else:
                    self._update_trailing(row, col, k)
                tiles.release(k)
                ex.release(k)
                if not lookahead and nxt < K:
                    self._factor_panel(nxt, ex, tiles)
        except BaseException:
            # signal values unknown: never reuse these pools
            tiles.drop()
            ex.drop()
            raise
        engine.finish([ex.exchange, tiles])
        infos = be.asnumpy(self.info)
        first = n + 1
        bad = np.flatnonzero(infos)
        if bad.size:
            k = int(bad[0])
            first = k * self.nb + int(infos[k]) if infos[k] > 0 else k * self.nb + 1
        return int(be.allreduce(first, op="min"))

    def _tile_plan(self, dtype: Any) -> engine.Plan:
        """``# L_kk -> grid column of block column k`` (upper: grid row): step ``k``'s factored
        diagonal tile from its owner to the other processes of the panel's group, read in the
        receiver's slot (one in-slot message per step; slot and staging of ``nb x nb``)."""
        lay, grid, me = self.lay, self.grid, self.grid.rank
        steps: list[tuple[engine.Message, ...]] = []
        remote = False
        for k in range(self.K):
            owner = lay.block_owner(k, k)
            sender = grid.rank_of(*owner)
            receivers = tuple(
                grid.rank_of(*p) for p in self.panel_owner_group(k) if p != tuple(owner)
            )
            remote = remote or bool(receivers)
            e = self.ext(k)
            if receivers and (sender == me or me in receivers):
                pack = functools.partial(_copy_into, tile=self.tile(k)) if sender == me else None
                steps.append((engine.Message(sender, receivers, 0, e * e, pack, in_slot=True),))
            else:
                steps.append(())
        size = self.nb * self.nb if remote else 0
        return engine.Plan("cholesky tile", me, grid.size, tuple(steps), size, size)

    def _warm(self, dtype: Any) -> None:
        """Load the potrf kernels and size their workspace before any signal wait (GPU)."""
        if not self.be.jit_kernels:
            return
        warmed: set = self.be.__dict__.setdefault("_potrf_warmed", set())
        key = (np.dtype(dtype), self.nb)
        if key in warmed:
            return
        xp = self.be.xp
        for m in sorted({1, min(self.nb, self.n), self.nb}):
            for uplo in ("L", "U"):
                # contiguous and strided (a tile of the local matrix): the GPU's 'L' copies it
                for eye in (xp.eye(m, dtype=dtype), xp.eye(m + 1, dtype=dtype)[1:, 1:]):
                    self.be.potrf(eye, uplo, self.info[:1], self.be.compute)
        self.be.synchronize()
        self.info[...] = 0
        warmed.add(key)

    def _factor_panel(
        self,
        k: int,
        ex: PanelExchange,
        tiles: engine.Exchange,
        ahead: tuple[Any, Any] | None = None,
    ) -> None:
        """Steps 1-4 of step ``k``: potrf, tile broadcast, trsm, panel send. With ``ahead`` (the
        previous step's panels: look-ahead) the previous step's update of block column (row)
        ``k`` comes first: of the diagonal tile before the potrf, so that the tile leaves as
        early as possible, of the rest of the panel after it."""
        be = self.be
        comp = be.compute
        uplo = "L" if self.lower else "U"
        owner = self.lay.block_owner(k, k)
        mine = (self.myrow, self.mycol) == tuple(owner)
        if mine:
            if ahead is not None and ahead[0] is not None and ahead[1] is not None:
                r0, c0 = self.lay.local_offset(k, k)
                self._diag(ahead[0], r0, self.ext(k), c0)
            be.potrf(self.tile(k), uplo, self.info[k : k + 1], comp)
            if tiles.sends(k):
                tiles.send(k, after=be.record_event(comp))
        if ahead is not None:
            self._update_next(ahead[0], ahead[1], k)
        slab = self.slab(k)
        if slab is not None:
            if mine:
                tile = self.tile(k)
            else:
                e = self.ext(k)
                tiles.recv(k)
                tile = tiles.view(k, 0, (e, e))
            side = "R" if self.lower else "L"
            be.trsm(1, tile, slab, side, uplo, "C", "N", comp)
        ex.send(k, after=be.record_event(comp))

    def _gemm(self, row: Any, col: Any, r0: int, r1: int, c0: int, c1: int) -> None:
        """``A[r0:r1, c0:c1] -= row[r0:r1] col[c0:c1]^H`` on local rows/columns."""
        if r1 <= r0 or c1 <= c0:
            return
        a = row.array[r0 - row.lo : r1 - row.lo]
        b = col.array[c0 - col.lo : c1 - col.lo]
        self.be.gemm(-1, a, b, 1, self.w._data[r0:r1, c0:c1], "N", "C", self.be.compute)

    def _update_next(self, row: Any, col: Any, k: int) -> None:
        """The part of the previous step's update that the panel of block column (row) ``k``
        needs, without the diagonal tile (updated by its owner before the potrf)."""
        if row is None or col is None:
            return
        e = self.ext(k)
        if self.lower and self.mycol == self.cowner(k):
            c0 = self.lay.local_offset(k, k)[1]
            self._gemm(row, col, self.before(k + 1, self.myrow, 0), self.nrow, c0, c0 + e)
        elif not self.lower and self.myrow == self.rowner(k):
            r0 = self.lay.local_offset(k, k)[0]
            self._gemm(row, col, r0, r0 + e, self.before(k + 1, self.mycol, 1), self.ncol)

    def _update_trailing(self, row: Any, col: Any, t: int) -> None:
        """The update of the trailing triangle of blocks ``(i, j)``, ``i, j > t``.

        Per chunk of local block columns ``J0 .. J1``: one GEMM on the rows entirely inside the
        triangle (blocks ``i > J1``; upper: ``t < i < J0``), then, per local block row ``I`` in
        ``[J0, J1]`` (the staircase), a GEMM on its part strictly inside the triangle and a
        SYRK on its diagonal block (real dtypes; complex ones use a GEMM there, whose other
        triangle is unspecified anyway)."""
        if row is None or col is None:
            return
        nb, pr, pc = self.nb, self.pr, self.pc
        first_r = (self.myrow - self.src[0]) % pr
        first_c = (self.mycol - self.src[1]) % pc
        c_start = self.before(t + 1, self.mycol, 1)
        r_start = self.before(t + 1, self.myrow, 0)
        for c0 in range(c_start, self.ncol, self.chunk):
            c1 = min(c0 + self.chunk, self.ncol)
            j0 = (c0 // nb) * pc + first_c
            j1 = ((c1 - 1) // nb) * pc + first_c
            if self.lower:  # rows of blocks below the chunk's last block column
                self._gemm(row, col, self.before(j1 + 1, self.myrow, 0), self.nrow, c0, c1)
            else:  # rows of blocks above the chunk's first block column
                self._gemm(row, col, r_start, self.before(j0, self.myrow, 0), c0, c1)
            i0 = j0 + (first_r - j0) % pr  # my first block row >= j0
            for i in range(i0, j1 + 1, pr):
                ri, e = (i // pr) * nb, self.ext(i)
                ci = self.before(i, self.mycol, 1)  # local columns of blocks < i
                diag = self.cowner(i) == self.mycol
                if self.lower:
                    self._gemm(row, col, ri, ri + e, c0, min(ci, c1))
                else:
                    self._gemm(row, col, ri, ri + e, max(c0, ci + (e if diag else 0)), c1)
                if diag:
                    self._diag(row, ri, e, ci)

    def _diag(self, row: Any, r0: int, e: int, c0: int) -> None:
        """``A_ii -= L_ik L_ik^H`` on the referenced triangle of my diagonal block at local
        ``(r0, c0)`` (row and column panels hold the same block ``L_ik`` there)."""
        be = self.be
        a = row.array[r0 - row.lo : r0 - row.lo + e]
        c = self.w._data[r0 : r0 + e, c0 : c0 + e]
        if self.w.dtype.kind == "c":  # a a^H is no SYRK of a stored view: one GEMM
            be.gemm(-1, a, a, 1, c, "N", "C", be.compute)
        else:
            be.syrk(-1, a, 1, c, "L" if self.lower else "U", "N", be.compute)


def _conj_transpose_into(xp: Any, out: Any, x: Any) -> None:
    # out := x^H (x^T for real dtypes): one pass writing a C-ordered out
    if np.dtype(x.dtype).kind == "c":
        xp.conjugate(x.T, out=out)
    else:
        xp.copyto(out, x.T)


def _copy_into(out: Any, tile: Any) -> None:
    # the factored tile (strided, in the local matrix) -> the flat slot
    out.reshape(tile.shape)[...] = tile


@warmup_kernels
def _sample(backend: Backend, xp: Any, dtype: np.dtype) -> None:
    """The tile channel's copies (strided tile -> flat slot, and back), the zero fill of the
    other triangle and one process's conjugate transpose; potrf is warmed per block size by
    ``_CholeskyPipeline._warm``."""
    local = sample_matrix(xp, dtype)
    flat = xp.empty(36, dtype)
    _copy_into(flat[:16], local[1:5, 1:5])
    _copy_into(flat[:36], local)
    tile = xp.empty((4, 4), dtype)
    tile[...] = flat[:16].reshape(4, 4)
    xp.copyto(local, dtype.type(0), where=local.real > 3)
    _conj_transpose_into(xp, xp.empty_like(local), local)  # one process's flipped factor


# -- pooled workspace ----------------------------------------------------------------------------
def free_workspace(backend: Backend) -> None:
    """Release the pooled Cholesky buffers of ``backend`` (collective)."""
    engine.free_workspace(backend, "cholesky.")
