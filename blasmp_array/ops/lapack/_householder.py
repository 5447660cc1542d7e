"""Blocked Householder QR on the process grid (ScaLAPACK ``pxgeqrf``, ``pxormqr``,
``pxorgqr``) and its one-process form through the backend's LAPACK.

The factored matrix is LAPACK's: ``R`` on and above the diagonal of the working copy ``w``, the
Householder vectors below it; ``A = Q R`` with ``Q = H_0 H_1 ... H_{K-1}`` in blocks of ``nb``
reflectors, block ``k`` being ``I - V_k T_k V_k^H`` (compact WY: ``V_k`` unit lower
trapezoidal, ``T_k`` upper triangular, kept per step on every process).

Layering: :func:`factor` (the pipeline below), :func:`apply_q` (``Q c`` or ``Q^H c``, the
``ormqr``), :func:`form_q` (the ``orgqr``) and :func:`r_factor` -> one step on local tiles
(``backend.geqrf`` on the gathered panel, ``backend.syrk``/``trsm`` for ``T_k``,
``backend.gemm``/``trmm`` for the block reflector) -> one-step plans over the one-sided
exchange engine (:func:`ops.engine._exchange.run_plan`): the panel gather, ``V_k`` along the grid
rows, and the column sums of ``V_k^H C``.

Factorisation (right-looking, blocked; square blocks ``nb x nb``, ``K = ceil(min(m, n) / nb)``
steps, the last one ragged). Step ``k`` (``k0 = k nb``, ``e`` the width of block column ``k``,
``r = min(e, m - k0)`` reflectors):

1. *Panel gather* ``# A[k0:, block column k] -> every process``: the processes of the grid
   column owning block column ``k`` send their rows of it (blocks ``>= k``) to every process
   (one message per grid row, packed once), into a column-major ``(m - k0) x e`` buffer.
2. *Panel factorisation*, redundantly on every process (as the distributed LU's panel, and for
   the same reason: one exchange instead of a factorisation in the grid column followed by a
   broadcast of ``V`` along the grid rows), its owners writing it back into ``w``; ``V_k`` made
   explicit (unit diagonal, zeros above). On the CPU one ``geqrt`` (LAPACK's recursive
   ``xgeqrt3``, BLAS3) gives the factored panel and ``T_k`` together; ``geqrf``'s inner columns
   run in BLAS2, about 3x slower on a 2048 x 256 panel, and the panel is on the critical path
   of every step (docs/qr.md, "Measured"). cuSOLVER has no ``geqrt``: on the GPU ``geqrf``,
   then ``T_k = (I + D triu(V^H V, 1))^{-1} D`` with ``D = diag(tau)`` (LAPACK's ``xlarft``,
   from one HERK of the panel and one unit triangular solve of ``r x r``; it gives ``H_0 ...
   H_{r-1} = I - V T V^H`` exactly as the column recurrence does, ``tau_i = 0`` included).
   Where ``_qr_local.cholqr_panels`` holds (the GPU), a tall panel is factored instead by
   CholeskyQR2 and Householder reconstruction (:mod:`ops.lapack._cholqr_panel`, which gives
   ``T``); the host waits for it and reduces its verdict over the processes, and where it is 0
   (a panel out of CholeskyQR2's range) every process gathers the panel again and factors it
   by ``geqrf``.
3. *Trailing update* ``A[k0:, j > k] := (I - V T^H V^H) A[k0:, j > k]``: every process forms
   ``W_p = V_p^H A_p`` on its rows (one GEMM), ``# W_p -> the grid column`` (each process of a
   grid column that holds rows ``>= k0`` sends its ``W_p`` to the others: one exchange), every
   one of them sums the ``W_p`` in grid-row order (so the sum is the same everywhere),
   ``W := T^H W`` (TRMM) and ``A_p -= V_p W`` (GEMM).

Look-ahead: step 3 updates block column ``k + 1`` first and records an event; the gather of
panel ``k + 1`` packs after it, while the rest of the update runs (on the CPU the gather's
messages travel under it; its ``geqrf`` follows on the compute stream, as LU's ``getrf``).

Applying ``Q`` (:func:`apply_q`, ``pxormqr``): step ``k`` of ``Q^H c`` (``k = 0, 1, ...``) or
``Q c`` (``k = K - 1, ..., 0``) on ``c``'s rows ``>= k0``: ``# V_k -> the grid rows`` (each
owner of block column ``k`` sends its rows of it along its grid row; the receivers set the
diagonal block's upper triangle to the unit lower ``V``), then step 3 with ``T_k`` (``Q c``)
or ``T_k^H`` (``Q^H c``). :func:`form_q` applies ``Q`` to the first columns of the identity,
restricted at step ``k`` to the columns ``>= k0`` (the others are still those of the
identity: LAPACK's ``xorgqr``).

Signal protocol: every exchange is a one-step plan of :mod:`ops.engine._exchange` on its default
pooled channel: ``ready[0, p]`` on each receiver is incremented by sender ``p``'s
``put_signal`` and waited for (compute stream) to reach the cumulative count derived from the
plan; a one-step plan reuses no slot, so no ack is waited for; ``finish()`` (inside
:func:`~ops.engine._exchange.run_plan`) drains both streams and makes one host ``allgather`` of the
outcome, which separates consecutive exchanges. Message sizes and offsets come from the layout
only, identically on every rank. Nothing depends on the data (no pivots): no step waits for
data that is never sent, so nothing hangs; a rank-deficient matrix simply gives zeros on
``R``'s diagonal, as LAPACK's.

Applying ``Q`` takes one exchange per block step: step ``k``'s column sums travel with the next
step's ``V``.

One process (a ``1 x 1`` grid) needs none of this: :func:`factor` makes one ``geqrf`` of a
column-major copy, :func:`form_q` one ``orgqr`` and :func:`apply_q` one ``ormqr`` (LAPACK blocks
them itself; cuSOLVER on the GPU).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..._alloc import new_array
from ...array import BlockCyclicArray
from ...backends._host_copy import assign, take_rows
from ...backends.base import Backend
from ...layout import BlockCyclicLayout
from ..engine._exchange import positions_index
from ..engine._messages import exchange, sum_stack
from ..engine._triangle import zero_triangle
from ..engine._warmup import begin_pipeline, warmup_kernels
from ..engine.indexing import window
from . import _cholqr_panel, _qr_local
from ._reflectors import apply_block, build_t, t_factor, unit_lower

__all__ = ["Factorization", "factor", "apply_q", "form_q", "r_factor"]


@dataclass
class Factorization:
    """The factored working matrix ``w`` (LAPACK's ``geqrf`` layout) and, per step, ``tau`` and
    ``T`` (device arrays, the same on every process)."""

    w: BlockCyclicArray
    taus: list[Any] = field(default_factory=list)
    ts: list[Any] = field(default_factory=list)
    #: one process: the column-major factored matrix (``geqrf``'s output; ``taus[0]`` its
    #: scalars), and no ``T``
    local: Any = None

    @property
    def nb(self) -> int:
        return int(self.w.block[0])

    @property
    def steps(self) -> int:
        return -(-min(self.w.shape) // self.nb)

    def ext(self, k: int) -> int:
        """Columns of block column ``k`` (the panel's width)."""
        return min(self.nb, self.w.shape[1] - k * self.nb)

    def refl(self, k: int) -> int:
        """Reflectors of step ``k``: the panel's width, or its rows at the last step of a
        wide matrix."""
        return min(self.ext(k), self.w.shape[0] - k * self.nb)


# -- index maps ---------------------------------------------------------------------------------
def _before(lay: BlockCyclicLayout, x: int, p: int, axis: int) -> int:
    """Local extent on grid row (axis 0) / column (axis 1) ``p`` of the blocks ``< x``."""
    P = lay.grid_shape[axis]
    b = lay.block[axis]
    first = (p - lay.src[axis]) % P
    count = 0 if x <= first else -(-(x - first) // P)
    total = lay.local_shape(p, 0)[0] if axis == 0 else lay.local_shape(0, p)[1]
    return min(count * b, total)


def _col_owner(lay: BlockCyclicLayout, k: int) -> int:
    return (k + lay.src[1]) % lay.grid_shape[1]


# -- the exchanges' local kernels -------------------------------------------------------------
@warmup_kernels
def _sample(backend: Backend, xp: Any, dtype: np.dtype) -> None:
    """The panel's helpers: rows into and out of the column-major panel (row runs and index
    arrays), its explicit ``V`` and ``T``, and the copies of the one-process path."""
    src = xp.zeros((5, 4), dtype)
    panel = xp.zeros((5, 4), dtype, order="F")
    idx = xp.asarray(np.array([0, 2]))
    panel[idx] = src[1:3]  # the gather's local copy into the panel
    unit_lower(xp, panel, 3, 3)
    unit_lower(xp, src, 2, 3)
    build_t(xp, xp.eye(3, dtype=dtype), xp.ones(3, dtype), xp.empty((3, 3), dtype), src[:3, :3])
    take_rows(src[:2], panel, idx)  # my rows of V, and the factored panel back into w
    take_rows(src[:2], panel, slice(1, 3))
    take_rows(src[3:], panel, idx)
    take_rows(src[1:], panel, slice(0, 4))
    w = xp.zeros((4, 4), dtype)
    triu_into(xp, w, panel[:4, :4])
    assign(w, panel[:4, :4])
    _eye_into(xp, w)


# -- factorisation ----------------------------------------------------------------------------
class _Pipeline:
    """One factorisation (see the module docstring); ``w`` has square blocks."""

    def __init__(self, w: BlockCyclicArray) -> None:
        self.f = Factorization(w)
        self.w = w
        self.be = w.backend
        self.grid = w.grid
        self.lay = w.layout
        self.m, self.n = self.lay.shape
        self.nb = self.lay.block[0]
        self.pr, self.pc = self.lay.grid_shape
        self.myrow, self.mycol = self.grid.coords
        self.nrow, self.ncol = self.lay.local_shape(self.myrow, self.mycol)
        self.dtype = w.dtype
        # the temporaries the compute stream still reads after the host dropped them, kept
        # until the next synchronisation (the panel gather's): a dropped one goes back to the
        # pool of the host's stream, whose next allocation does not wait for those kernels
        self._keep: list[Any] = []
        self._work: _cholqr_panel.Workspace | None = None  # the CholeskyQR2 panels' scratch

    def run(self) -> Factorization:
        be, f = self.be, self.f
        K = f.steps
        self._warm()
        begin_pipeline(be, self.dtype)
        panel = self._gather(0, None)
        vloc = self._factor(0, panel)
        for k in range(K):
            nxt = k + 1
            cn = _before(self.lay, nxt, self.mycol, 1)  # my first column right of panel k
            split = cn
            if nxt < K and self.mycol == _col_owner(self.lay, nxt):
                split = min(self.ncol, cn + f.ext(nxt))
            ready = self._update(k, vloc, cn, split)
            if nxt < K:
                panel = self._gather(nxt, ready)
                vloc = self._factor(nxt, panel)
        be.synchronize()
        return f

    def _warm(self) -> None:
        """Size the library's ``geqrf`` workspace on the first (largest) panel, and allocate
        the CholeskyQR2 panels' scratch, before any signal wait (GPU: no device allocation
        while a stream waits on a signal)."""
        xp = self.be.xp
        e = self.f.ext(0)
        if self._cholqr(0):
            self._work = _cholqr_panel.Workspace(xp, self.m, e, self.dtype)
        if not self.be.jit_kernels:
            return
        panel = xp.zeros((self.m, e), self.dtype, order="F")
        self.be.geqrf(
            panel, xp.zeros(min(self.m, e), self.dtype), xp.zeros(1, np.int32), self.be.compute
        )
        self.be.synchronize()

    def _gather(self, k: int, after: Any) -> Any:
        """``# A[k0:, block column k] -> every process`` into a column-major panel (collective);
        the packing waits for ``after`` (the update of that block column)."""
        be, lay, grid = self.be, self.lay, self.grid
        k0, e = k * self.nb, self.f.ext(k)
        c = _col_owner(lay, k)
        panel = be.xp.empty((self.m - k0, e), self.dtype, order="F")
        everyone = tuple(range(grid.size))
        msgs = []
        for r in range(self.pr):
            lr0, nr = _before(lay, k, r, 0), lay.local_shape(r, c)[0]
            if lr0 >= nr:
                continue
            sender = grid.rank_of(r, c)
            pack = None
            if sender == grid.rank:
                c0 = lay.local_offset(k, k)[1]
                pack = self.w._data[lr0:, c0 : c0 + e]
            rows = positions_index(lay.local_rows(r)[lr0:] - k0, be.xp)
            msgs.append((sender, everyone, (nr - lr0) * e, pack, (panel, rows)))
        exchange(be, grid, f"qr panel step {k}", msgs, self.dtype, after)
        self._keep.clear()  # the exchange synchronised: every earlier kernel has run
        return panel

    def _factor(self, k: int, panel: Any) -> Any:
        """Step 2 on the compute stream: ``geqrf`` of the panel, written back by its owners,
        ``V`` made explicit, ``T``; returns my rows of ``V`` (None without rows ``>= k0``)."""
        be, lay, xp, f = self.be, self.lay, self.be.xp, self.f
        comp = be.compute
        k0, e, r = k * self.nb, f.ext(k), f.refl(k)
        tau = xp.zeros(r, self.dtype)
        info = xp.zeros(1, np.int32)
        lr0 = _before(lay, k, self.myrow, 0)
        mine = positions_index(lay.local_rows(self.myrow)[lr0:] - k0, xp)
        t = None
        if self._work is not None and self._cholqr(k):
            t = xp.empty((r, r), self.dtype)
            if not self._cholqr_panel(k, panel, tau, t):
                panel, t = self._gather(k, None), None  # factored again, below
        if t is None and be.has_geqrt:
            t = xp.empty((r, r), self.dtype)
            be.geqrt(panel, tau, t, info, comp)
        elif t is None:
            be.geqrf(panel, tau, info, comp)
        if self.mycol == _col_owner(lay, k) and lr0 < self.nrow:  # the factored panel -> w
            c0 = lay.local_offset(k, k)[1]
            be.launch(comp, take_rows, self.w._data[lr0:, c0 : c0 + e], panel, mine)
        v = panel[:, :r]
        be.launch(comp, unit_lower, xp, v, r, r)
        f.taus.append(tau)
        f.ts.append(t if t is not None else t_factor(be, v, tau, self._keep))
        self._keep += [info, mine]
        vloc = None
        if lr0 < self.nrow:
            vloc = xp.empty((self.nrow - lr0, r), self.dtype)
            be.launch(comp, take_rows, vloc, v, mine)
        return vloc

    def _cholqr(self, k: int) -> bool:
        """Whether panel ``k`` is factored by CholeskyQR2 and Householder reconstruction
        (``_qr_local.cholqr_panels``: the GPU; a panel at least ``CHOLQR_PANEL_RATIO`` times
        as tall as wide). The shapes and the setting decide: the same on every process."""
        fits = _qr_local.cholqr_fits(self.m - k * self.nb, self.f.ext(k))
        return fits and _qr_local.cholqr_panels(self.be)

    def _cholqr_panel(self, k: int, panel: Any, tau: Any, t: Any) -> bool:
        """Panel ``k`` by ``_cholqr_panel.factor`` on the compute stream; waits for it and
        returns whether every process's verdict was 1 (one host reduction, so that all of them
        gather the panel again, or none; they factor the same panel with the same kernels)."""
        be = self.be
        assert self._work is not None
        flag = be.xp.zeros(1, np.int32)
        _cholqr_panel.factor(be, self._work, panel, tau, t, flag, be.compute)
        be.host_wait(be.record_event(be.compute))
        return int(be.allreduce(int(be.asnumpy(flag)[0]), op="min")) == 1

    def _update(self, k: int, vloc: Any, c0: int, split: int) -> Any:
        """Step 3 of step ``k`` on my columns ``c0:`` (collective): the reduction of ``V^H A``,
        then block column ``k + 1`` (columns ``c0:split``) first; returns the event after it
        (the next gather waits for it), the rest of the update enqueued behind it."""
        be, f = self.be, self.f
        lr0 = _before(self.lay, k, self.myrow, 0)
        tail = self.w._data[lr0:, c0:] if vloc is not None else None
        right = functools.partial(_before, self.lay, k + 1, axis=1)
        sums = _sums_start(be, self.grid, self.lay, k, f.refl(k), vloc, tail, right)
        after = be.record_event(be.compute)
        exchange(be, self.grid, f"qr column sums step {k}", sums.msgs, self.dtype, after)
        w = _sums_end(be, sums)
        self._keep += [sums, w]
        if w is None or tail is None:
            return be.record_event(be.compute)
        be.trmm(1, f.ts[k], w, "L", "U", "C", "N", be.compute)  # W := T^H W
        if split > c0:
            be.gemm(-1, vloc, w[:, : split - c0], 1, tail[:, : split - c0], "N", "N", be.compute)
        ready = be.record_event(be.compute)
        if self.ncol > split:
            be.gemm(-1, vloc, w[:, split - c0 :], 1, tail[:, split - c0 :], "N", "N", be.compute)
        return ready


def triu_into(xp: Any, out: Any, src: Any) -> None:
    """``out[...] = triu(src)`` (a kernel for ``Backend.launch``)."""
    out[...] = xp.triu(src)


# -- the reduction of V^H C over a grid column ------------------------------------------------
@dataclass
class _Sums:
    """One step's column sums ``W = V^H C`` in flight: the messages of every rank (the same
    list everywhere), my stack of partial products (one per grid row holding rows ``>= k0``,
    mine computed on the compute stream) and my width (None: I take no part)."""

    msgs: list[Any]
    stack: Any = None
    width: int | None = None


def _sums_start(
    be: Backend,
    grid: Any,
    lay: BlockCyclicLayout,
    k: int,
    r: int,
    vloc: Any,
    tail: Any,
    col_start: Any,
) -> _Sums:
    """Enqueue my partial product ``V_p^H C_p`` (``vloc``: my rows ``>= k nb`` of ``V``,
    ``r`` columns; ``tail``: my part of ``C`` on those rows, from column ``col_start(my grid
    column)`` on) and list the messages ``# W_p -> the grid column`` (each holder of rows
    ``>= k nb`` to the others of its grid column)."""
    pr, pc = lay.grid_shape
    myrow, mycol = grid.coords
    holders = [q for q in range(pr) if _before(lay, k, q, 0) < lay.local_shape(q, 0)[0]]
    width = [lay.local_shape(0, c)[1] - col_start(c) for c in range(pc)]
    out = _Sums([])
    if myrow in holders and width[mycol] > 0:
        out.width = width[mycol]
        out.stack = be.xp.empty((len(holders), r, width[mycol]), tail.dtype)
        be.gemm(1, vloc, tail, 0, out.stack[holders.index(myrow)], "C", "N", be.compute)
    for c in range(pc):
        if len(holders) < 2 or width[c] <= 0:
            continue
        group = tuple(grid.rank_of(q, c) for q in holders)
        for i, sender in enumerate(group):
            pack = out.stack[i] if sender == grid.rank else None
            unpack = (out.stack, i) if (grid.rank in group and sender != grid.rank) else None
            out.msgs.append((sender, group, r * width[c], pack, unpack))
    return out


def _sums_end(be: Backend, sums: _Sums) -> Any:
    """``W``, the sum of the stack in grid-row order (the same on every process of the grid
    column), after the exchange; None where I take no part."""
    if sums.width is None:
        return None
    w = be.xp.empty(sums.stack.shape[1:], sums.stack.dtype)
    be.launch(be.compute, sum_stack, w, sums.stack)
    return w


# -- applying Q ---------------------------------------------------------------------------------
def _v_start(f: Factorization, k: int) -> tuple[list[Any], Any]:
    """The messages ``# V_k -> the grid rows`` (each owner of block column ``k`` sends its rows
    ``>= k nb`` of it along its grid row) and my buffer for them (None without such rows)."""
    w, be = f.w, f.w.backend
    lay, grid = w.layout, w.grid
    pr, pc = lay.grid_shape
    r = f.refl(k)
    c = _col_owner(lay, k)
    lr0 = _before(lay, k, grid.myrow, 0)
    nrow = lay.local_shape(grid.myrow, 0)[0]
    out = be.xp.empty((nrow - lr0, r), w.dtype) if lr0 < nrow else None
    msgs = []
    for q in range(pr):
        lq0, nq = _before(lay, k, q, 0), lay.local_shape(q, 0)[0]
        if lq0 >= nq:
            continue
        sender = grid.rank_of(q, c)
        pack = None
        if sender == grid.rank:
            c0 = lay.local_offset(k, k)[1]
            pack = w._data[lq0:, c0 : c0 + r]
        row = tuple(grid.rank_of(q, x) for x in range(pc))
        unpack = (out, slice(None)) if grid.rank in row else None
        msgs.append((sender, row, (nq - lq0) * r, pack, unpack))
    return msgs, out


def _v_end(f: Factorization, k: int, out: Any) -> Any:
    """After the exchange: the diagonal block's rows of ``V_k`` made unit lower (they hold
    ``R`` above the diagonal in the factored matrix)."""
    lay, grid, be = f.w.layout, f.w.grid, f.w.backend
    if out is not None and grid.myrow == (k + lay.src[0]) % lay.grid_shape[0]:
        rows = min(f.nb, lay.shape[0] - k * f.nb)
        be.launch(be.compute, unit_lower, be.xp, out, rows, f.refl(k))
    return out


def _apply_steps(
    f: Factorization, c: BlockCyclicArray, trans: str, order: list[int], col_start: Any
) -> None:
    """``c[k0:, cols] := (I - V_k op(T_k) V_k^H) c[k0:, cols]`` for ``k`` in ``order``
    (``op`` the conjugate transpose for ``trans`` 'C'; cols from ``col_start(k, grid
    column)`` on). One exchange per step: step ``k``'s column sums travel with the next
    step's ``V`` (collective). Synchronises."""
    be, lay, grid = c.backend, c.layout, c.grid
    msgs, vnext = _v_start(f, order[0])
    exchange(be, grid, f"qr reflectors step {order[0]}", msgs, c.dtype, None)
    held: list[Any] = []  # what the compute stream still reads, to the next synchronisation
    for i, k in enumerate(order):
        vloc = _v_end(f, k, vnext)
        start = functools.partial(col_start, k)
        tail = None
        if vloc is not None:
            tail = c._data[_before(lay, k, grid.myrow, 0) :, start(grid.mycol) :]
        sums = _sums_start(be, grid, lay, k, f.refl(k), vloc, tail, start)
        msgs = list(sums.msgs)
        if i + 1 < len(order):
            more, vnext = _v_start(f, order[i + 1])
            msgs += more
        after = be.record_event(be.compute)
        exchange(be, grid, f"qr apply step {k}", msgs, c.dtype, after)
        if msgs:  # the exchange ran, and synchronised
            held.clear()
        w = _sums_end(be, sums)
        held += [vloc, sums, w]
        if w is not None:
            be.trmm(1, f.ts[k], w, "L", "U", trans, "N", be.compute)
            be.gemm(-1, vloc, w, 1, tail, "N", "N", be.compute)
    be.synchronize()


def apply_q(f: Factorization, c: BlockCyclicArray, trans: str) -> None:
    """``c := Q c`` (``trans`` 'N') or ``Q^H c`` ('C') in place (LAPACK's ``xormqr`` from the
    left; ScaLAPACK ``pxormqr``). ``c`` is stored, has the factored matrix's rows (same grid,
    row block and source row) and any columns. Collective."""
    be = c.backend
    begin_pipeline(be, c.dtype)
    if f.local is not None:
        info = be.xp.zeros(1, np.int32)
        be.ormqr("L", trans, f.local, f.taus[0], c._data, info, be.compute)
        be.synchronize()
        return
    K = f.steps
    order = list(range(K)) if trans == "C" else list(range(K - 1, -1, -1))
    if order:
        _apply_steps(f, c, trans, order, lambda k, col: 0)
    be.synchronize()


def form_q(f: Factorization, ncols: int) -> BlockCyclicArray:
    """The first ``ncols`` columns of ``Q`` (``min(m, n) <= ncols <= m``), with the factored
    matrix's row layout and square blocks (LAPACK ``xorgqr``; ScaLAPACK ``pxorgqr``).
    Collective."""
    from ...creation import eye

    w = f.w
    m = w.shape[0]
    be, grid = w.backend, w.grid
    lay = BlockCyclicLayout((m, ncols), w.block, grid.shape)
    if f.local is not None:
        out = new_array(lay, grid, w.dtype)
        begin_pipeline(be, w.dtype)
        if local_q(be, f.local, f.taus[0], out._data):
            f.local = None  # orgqr overwrote it
        return out
    q = eye(m, ncols, dtype=w.dtype, block=w.block, grid=grid)
    begin_pipeline(be, w.dtype)
    lq = q.layout
    # synchronises
    _apply_steps(f, q, "N", list(range(f.steps - 1, -1, -1)), lambda k, col: _before(lq, k, col, 1))
    return q


def local_q(be: Backend, fa: Any, tau: Any, q: Any) -> bool:
    """``q`` (``m x ncols``, C-ordered, ``min(m, n) <= ncols <= m``) := the first columns of
    ``Q`` from the column-major ``geqrf`` output ``fa`` and ``tau`` of one process (LAPACK
    ``xorgqr``, or :func:`_blocked_q`). Returns whether ``fa`` was overwritten. Local;
    synchronises."""
    xp, comp = be.xp, be.compute
    m, ncols = q.shape
    width = _local_q_block(be, min(fa.shape))
    if width:
        _blocked_q(be, fa, tau, q, width)  # synchronises
        return False
    info = xp.zeros(1, np.int32)
    if ncols <= fa.shape[1]:
        work = fa[:, :ncols]
    else:
        work = xp.empty((m, ncols), fa.dtype, order="F")
        be.launch(comp, be.copy_local, work[:, : fa.shape[1]], fa)
    be.orgqr(work, tau, info, comp)
    be.launch(comp, be.copy_local, q, work)
    be.synchronize()
    return ncols <= fa.shape[1]


def _local_q_block(be: Backend, k: int) -> int:
    """Reflectors per block of :func:`_blocked_q` for ``k`` reflectors:
    ``$BLASMP_QR_LOCAL_Q_BLOCK`` where set, else ``_qr_local.Q_BLOCK`` where the streams run
    concurrently (a GPU) and ``k >= _qr_local.LOOKAHEAD_MIN``; 0: the library's ``orgqr``."""
    text = os.environ.get("BLASMP_QR_LOCAL_Q_BLOCK", "").strip()
    if text.isdigit():
        return int(text)
    if be.concurrent_streams and k >= _qr_local.LOOKAHEAD_MIN:
        return _qr_local.Q_BLOCK
    return 0


def _blocked_q(be: Backend, fa: Any, tau: Any, q: Any, width: int) -> None:
    """``q`` (``m x ncols``, C-ordered) := the first columns of ``H_0 ... H_{p-1}`` from the
    column-major factored ``fa`` (one process), in blocks of ``width`` reflectors applied to
    the identity from the last block on, each as ``I - V T V^H`` with GEMMs of depth ``width``
    (LAPACK's ``xorgqr`` with a block as wide as one likes; the library's block is fixed).
    The one-process ``orgqr`` of large matrices on a GPU (:func:`_local_q_block`): the
    library's runs at its own fixed block. Synchronises: the host runs ahead of the compute
    stream, and a temporary it dropped (``V``, ``T``, ``W``, ``T``'s ``G`` and ``M``) would go
    back to the pool of the host's stream, whose next allocation (the next block's zeroed
    ``G``, of ``T``'s size) does not wait for the kernels still reading it: they are kept
    until the end."""
    xp, comp = be.xp, be.compute
    m = q.shape[0]
    p = int(tau.shape[0])
    be.launch(comp, _eye_into, xp, q)
    keep: list[Any] = []
    for k0 in range(((p - 1) // width) * width, -1, -width):
        b = min(width, p - k0)
        v = xp.empty((m - k0, b), fa.dtype, order="F")
        be.launch(comp, be.copy_local, v, fa[k0:, k0 : k0 + b])
        be.launch(comp, unit_lower, xp, v, b, b)
        t = t_factor(be, v, tau[k0 : k0 + b], keep)
        keep += [v, t, apply_block(be, v, t, q[k0:, k0:], "N")]
    be.synchronize()


def _eye_into(xp: Any, q: Any) -> None:
    q[...] = xp.eye(q.shape[0], q.shape[1], dtype=q.dtype)


def r_factor(f: Factorization, rows: int) -> BlockCyclicArray:
    """``R``: the upper trapezoid of the first ``rows`` rows of the factored matrix (zeros below
    the diagonal), with its layout. Local."""
    w = f.w
    n = w.shape[1]
    if f.local is not None:
        out = new_array(BlockCyclicLayout((rows, n), w.block, w.grid.shape), w.grid, w.dtype)
        be = w.backend
        begin_pipeline(be, w.dtype)
        be.launch(be.compute, triu_into, be.xp, out._data, f.local[:rows])
        be.synchronize()
        return out
    out = window(w, (0, rows), (0, n)).copy()
    zero_triangle(out.layout, out.grid, out._data, "L", -1)
    return out


def factor(w: BlockCyclicArray, overwrite: bool = False) -> Factorization:
    """Householder QR of the stored ``w`` (square blocks, source process ``(0, 0)``): in
    ``w``'s storage with ``overwrite`` (LAPACK's ``geqrf`` layout), else in a copy; on one
    process one ``geqrf`` of a column-major copy (kept in the result; ``w`` untouched).
    Collective."""
    if min(w.shape) == 0:
        return Factorization(w)
    if w.grid.size == 1 and _LOCAL_ON_ONE_PROCESS:
        return _local_factor(w)
    return _Pipeline(w if overwrite else w.copy()).run()


#: a 1x1 grid calls the backend's LAPACK (LAPACK and cuSOLVER block, and on the CPU thread,
#: their own factorisation); tests turn it off to run the pipeline on one process
_LOCAL_ON_ONE_PROCESS = True


def _local_factor(w: BlockCyclicArray) -> Factorization:
    """:func:`local_geqrf` of ``w``'s local matrix (one process)."""
    begin_pipeline(w.backend, w.dtype)
    fa, tau = local_geqrf(w.backend, w._data)
    return Factorization(w, [tau], [], local=fa)


def local_geqrf(be: Backend, a: Any) -> tuple[Any, Any]:
    """``(fa, tau)``: LAPACK's ``geqrf`` of the C-ordered local matrix ``a`` in a column-major
    copy (``a`` untouched): one ``geqrf``, or, where the streams run concurrently (a GPU) and
    ``min(m, n) >= _qr_local.LOOKAHEAD_MIN``, the blocked QR with the panels beside the
    trailing update (:func:`ops.lapack._qr_local.geqrf_lookahead`), which leaves the same
    layout. Local; synchronises."""
    m, n = a.shape
    if be.concurrent_streams and min(m, n) >= _qr_local.LOOKAHEAD_MIN:
        return _qr_local.geqrf_lookahead(be, a)
    xp, comp = be.xp, be.compute
    fa = xp.empty((m, n), a.dtype, order="F")
    tau = xp.zeros(min(m, n), a.dtype)
    info = xp.zeros(1, np.int32)
    be.launch(comp, be.copy_local, fa, a)
    be.geqrf(fa, tau, info, comp)
    be.synchronize()
    return fa, tau
