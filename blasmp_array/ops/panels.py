"""The panel pipeline shared by every BLAS3 operator: SUMMA-style panel exchange.

Think of ``C (m x n) += op(A) (m x K) @ op(B) (K x n)`` on a ``Pr x Pc`` grid. Process ``(r, c)``
holds the block rows of ``C`` that process row ``r`` owns and the block columns that process
column ``c`` owns. The K dimension is cut into *steps* (one or several consecutive K-blocks).
At step ``k`` process ``(r, c)`` needs two *panels*:

* the **row panel** ``L_k = op(A)[my C-rows, K-range of step k]`` (``local_m x kw``), the same
  for the whole process row ``r`` (a *group*);
* the **column panel** ``R_k``, stored as ``op(B)^T[my C-cols, K-range]`` (``local_n x kw``), the
  same for the whole process column ``c``.

Then ``C_local += alpha * L_k @ R_k^T``. Both panels are the same thing: rows of a *virtual
matrix* ``M`` (``op(A)`` for the row panel, ``op(B)^T`` for the column panel) selected by one
dimension of ``C``'s layout. A :class:`Source` describes ``M`` in terms of a stored array ``X``:
``M = op(X_eff)``, with ``op`` in ``{'N', 'T', 'C', 'R'}`` ('R' is conjugate without transpose)
and ``X_eff`` either ``X`` itself, the symmetric matrix defined by one triangle of ``X`` (SYMM),
or the triangular part of ``X`` (TRMM, optionally with a unit diagonal). A :class:`PanelSpec`
adds the target layout (``C``) and the axis (0: row panel, 1: column panel).

The plan (pure index math)
--------------------------
:func:`plan_panels` turns a spec and the step partition into, for every step and every group,
the list of *pieces*: ``(source rank, rectangle of the source's local matrix, mask, transform,
destination rectangle in the panel)``. Blocks of ``M`` outside ``X_eff``'s triangle are *zero
pieces*, filled by the receiver (leading/trailing zero rows are trimmed away: the panel's
*active rows* ``[lo, hi)``). Pieces of one sender are grouped into one contiguous *segment*
(adjacent pieces merged), so a sender sends its part of a panel -- transposed, conjugated,
masked -- ONCE per receiver, as one message. Every rank computes the same plan
deterministically from layouts only; plans are cached.

Panel slots and the signal protocol
-----------------------------------
:class:`PanelExchange` owns, per operand ``o``:

* ``slots``: a symmetric buffer with ``num_stages`` slots; slot ``s = k % num_stages`` receives
  step ``k``'s panel as the concatenation of the senders' segments (sender rank order);
* ``staging``: a symmetric send buffer with ``num_stages`` slots where a sender packs the
  segments it sends to processes of groups it does not belong to (a sender that is itself a
  receiver of the group packs straight into its own slot and puts from there);
* signals ``ready[o, s]`` (on the receiver; written by its senders, waited on by it) and
  ``ack[o, s, q]`` (on the sender, one word per receiver ``q``; written by ``q``, waited on by
  the sender). Both are monotonic counters incremented with 'add' for the whole life of the
  exchange (never reset); every expected value below is a cumulative count that all ranks
  derive from the plan. Acks need one word per receiver: a receiver that gets nothing from a
  sender at step ``k`` may already ack step ``k + S`` while another is still on step ``k - S``,
  so a shared counter could reach its target too early. Ready counts cannot run ahead (step
  ``k + S`` data needs the receiver's own ack of step ``k``), so one word per slot suffices.

Slots and staging of all operands live in ONE symmetric buffer per dtype, and all signals in
ONE signal set, both pooled per backend and reused by the next operator (allocation is
collective and slow: ~40 ms per MPI window on the CI machine). Since every increment a process
receives is waited for, each process knows its counters exactly at the end of an exchange and
keeps them as *bases* that the next exchange's expected values are offset by (so signals are
never reset). :meth:`PanelExchange.finish` ends with a barrier so that no process starts the
next exchange's first sends (which need no ack) into a slot that a slower process still reads.
The pool grows (collectively, identical sizes everywhere) when a larger plan needs it;
:func:`free_workspace` releases it.

Protocol, for step ``k`` and slot ``s = k % S`` (``S = num_stages``):

1. ``send(k)`` -- sender, comm stream.
   If ``k >= S``, for each remote receiver ``q`` of step ``k`` it first waits (comm stream)
   until ``ack[o, s, q]`` reaches the number of steps ``S <= k' <= k, k' = s (mod S)`` at
   which it sends to ``q``: ``q`` released step ``k - S``, so slot ``s`` is free there (and
   the staging slot ``s``, whose previous puts were delivered, is free here). If the sender
   is also a receiver at step ``k`` it makes its comm stream wait for the event recorded by
   its own ``release(k - S)`` instead of a signal. Then it packs each segment (one pack per
   segment, whatever the number of receivers) and ``put_signal``\\ s it into the slot
   ``s`` of every remote receiver at the segment's offset, with ``ready[o, s]`` += 1 (one
   signal per segment and receiver). Local segments are packed into the own slot with no
   signal; an event recorded after the pack orders them.
2. ``recv(k)`` -- receiver, compute stream.
   Wait until ``ready[o, s]`` reaches the cumulative number of remote segments addressed to this
   process in slot ``s`` (steps ``k' <= k, k' = s (mod S)``), and for the event of its own
   ``send(k)`` if it sent itself a segment. If the segments already form the panel in local
   (C-)order the panel is a view of the slot; else they are unpacked (a permutation of
   rectangles, plus zero fill) into a compute-side buffer.
3. ``release(k)`` -- receiver, compute stream, after the update of step ``k`` is enqueued.
   ``ack[o, (k + S) % S, me]`` += 1 on every remote sender that will write into this process's slot
   at step ``k + S`` (nothing when ``k + S >= K``). Every process calls ``release(k)`` for every
   ``k``, even when it received nothing at step ``k``: an ack means "my compute stream is past
   step ``k``", which covers every earlier use of the slot. Releasing also records the event
   the local pack of step ``k + S`` waits for.

Why it is safe: a sender writes slot ``s`` of ``q`` at step ``k + S`` only after ``q``'s ack for
step ``k``, which ``q`` sends after consuming step ``k`` (and, transitively, every earlier step);
``q``'s ready counter for slot ``s`` cannot run ahead of step ``k`` because the step ``k + S``
data needs that ack first. Signals become visible after their data (put-with-signal). At the
end every put was waited for by its receiver and every ack by its sender, so after
``synchronize()`` no traffic is in flight and the buffers may be reused or freed.

The driver
----------
:func:`run_pipeline` is the one loop every operator uses::

    begin(); send(0 .. S-1)
    for k: panels = recv(k); update(k, panels); release(k); send(k + S)
    finish()   # synchronize, advance signal bases, barrier

``num_stages=1`` is the conservative single-buffered pipeline (no overlap of communication of
step ``k + 1`` with the update of step ``k``); ``2`` double-buffers. No host synchronisation
happens inside the loop.

Reuse (e.g. TRSM): a source whose panel data is produced during the pipeline passes
``send(k, after=event)``; the comm stream waits ``event`` (recorded on the compute stream after
the producing work) before packing. Driving an exchange by hand::

    ex = PanelExchange(backend, "trsm", [PanelSpec(src_row, C.layout, 0),
                                         PanelSpec(src_col, C.layout, 1)],
                       [X_row._data, X_col._data], make_steps(K, kb), dtype, num_stages,
                       grid.rank)
    backend.begin()
    for k in range(min(ex.S, ex.nsteps)): ex.send(k)
    for k in range(ex.nsteps):
        row, col = ex.recv(k)      # Panel(lo, hi, array) or None, valid until release(k)
        ...                        # enqueue work on backend.compute
        ex.release(k)
        if k + ex.S < ex.nsteps: ex.send(k + ex.S, after=backend.record_event(backend.compute))
    ex.finish()
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..layout import BlockCyclicLayout
from . import _exchange
from ._warmup import begin_pipeline, sample_matrix, warmup_kernels

__all__ = [
    "Source",
    "PanelSpec",
    "Piece",
    "GroupStep",
    "Panel",
    "PanelExchange",
    "make_steps",
    "plan_panels",
    "run_pipeline",
    "compose_op",
    "default_step_width",
]

#: step width (K columns per pipeline step) the steps are aggregated to by default
DEFAULT_STEP_WIDTH = {"cpu": 256, "gpu": 2048}

_T_OF = {"N": False, "T": True, "C": True, "R": False}
_C_OF = {"N": False, "T": False, "C": True, "R": True}


def compose_op(inner: str, outer: str) -> str:
    """The op character of ``outer(inner(X))`` (ops in 'N', 'T', 'C', 'R'; 'R' = conj)."""
    t = _T_OF[inner] ^ _T_OF[outer]
    c = _C_OF[inner] ^ _C_OF[outer]
    return {(False, False): "N", (True, False): "T", (True, True): "C", (False, True): "R"}[(t, c)]


def default_step_width(backend: Any) -> int:
    """Target step width for the backend (aggregate narrow K-blocks into wide steps)."""
    return DEFAULT_STEP_WIDTH.get(getattr(backend, "name", "cpu"), 256)


# -- the plan: pure index math ----------------------------------------------------------------
@dataclass(frozen=True)
class Source:
    """A virtual matrix ``M = op(X_eff)`` whose blocks come from the stored matrix ``X``.

    Attributes
    ----------
    layout : BlockCyclicLayout
        Layout of the stored ``X``.
    op : {'N', 'T', 'C', 'R'}
        ``M = X_eff``, ``X_eff^T``, ``X_eff^H`` or ``conj(X_eff)``.
    structure : {'general', 'sym', 'tri'}
        ``X_eff = X``; the symmetric matrix held in the ``uplo`` triangle of ``X`` (the other
        triangle is never read); or the ``uplo`` triangle of ``X`` (zero elsewhere; with
        ``unit`` the diagonal is taken as ones and not read). 'sym'/'tri' need square blocks.
    uplo : {'L', 'U'}
    unit : bool
    """

    layout: BlockCyclicLayout
    op: str = "N"
    structure: str = "general"
    uplo: str = "L"
    unit: bool = False

    @property
    def transposed(self) -> bool:
        return _T_OF[self.op]

    @property
    def shape(self) -> tuple[int, int]:
        m, n = self.layout.shape
        return (n, m) if self.transposed else (m, n)

    @property
    def block(self) -> tuple[int, int]:
        mb, nb = self.layout.block
        return (nb, mb) if self.transposed else (mb, nb)

    def resolve(self, i: int, k: int) -> tuple[int, int, str | None, str] | None:
        """Where block ``M[i, k]`` comes from: ``(a, b, mask, op)`` meaning
        ``op(mask(X[a, b]))``, or None for a zero block."""
        p, q = (k, i) if self.transposed else (i, k)
        inner = "N"
        mask: str | None = None
        if self.structure != "general":
            lower = self.uplo == "L"
            if p == q:
                if self.structure == "sym":
                    mask = "symL" if lower else "symU"
                else:
                    mask = ("L" if lower else "U") + ("unit" if self.unit else "")
            elif (p > q) != lower:  # outside the stored triangle
                if self.structure == "tri":
                    return None
                p, q, inner = q, p, "T"
        return (p, q, mask, compose_op(inner, self.op))


@dataclass(frozen=True)
class PanelSpec:
    """One operand of an exchange: rows of ``source`` selected by ``target``'s ``axis``.

    ``axis=0``: the row panel of process row ``r`` holds ``M[rows of target on r, K-range]``;
    ``axis=1``: the column panel of process column ``c`` holds ``M[cols of target on c, ...]``.
    ``M``'s row blocking must equal ``target.block[axis]``. ``source.layout`` and ``target`` live
    on the same grid (``grid_shape``); rank of grid coordinates ``(p, q)`` is ``p * Pc + q``.
    """

    source: Source
    target: BlockCyclicLayout
    axis: int


@dataclass(frozen=True)
class Piece:
    """A rectangle moved from a sender's local matrix into a receiver's panel.

    ``src`` rectangle ``(r0, c0, nr, nc)`` of the sender's local matrix, ``mask`` (None, 'L',
    'U', 'Lunit', 'Uunit', 'symL', 'symU') applied to it, then ``op``; it lands at ``(dr, dc)``
    of the panel (relative to the active rows) with shape ``(nr, nc)`` and occupies
    ``[offset, offset + nr * nc)`` of the slot (C-ordered).
    """

    sender: int
    sr0: int
    sc0: int
    snr: int
    snc: int
    mask: str | None
    op: str
    dr: int
    dc: int
    nr: int
    nc: int
    offset: int = 0

    @property
    def size(self) -> int:
        return self.nr * self.nc


@dataclass(frozen=True)
class GroupStep:
    """The panel of one group at one step.

    ``lo, hi``: active panel rows (local rows of the target dimension); ``width``: K columns;
    ``segments``: ``(sender, offset, size, pieces)`` in slot order; ``zeros``: rectangles
    ``(dr, dc, nr, nc)`` the receiver fills with zeros; ``receivers``: ranks of the group that
    need the panel; ``in_order``: the slot already is the C-ordered ``(hi - lo) x width`` panel.
    """

    lo: int
    hi: int
    width: int
    segments: tuple[tuple[int, int, int, tuple[Piece, ...]], ...]
    zeros: tuple[tuple[int, int, int, int], ...]
    receivers: tuple[int, ...]
    in_order: bool

    @property
    def size(self) -> int:
        return sum(seg[2] for seg in self.segments)


def make_steps(k: int, kb: int, width: int | None = None) -> tuple[tuple[int, int], ...]:
    """Partition ``ceil(k / kb)`` K-blocks into steps of ``max(1, width // kb)`` blocks.

    Returns ``(first block, end block)`` pairs; ``width=None`` means one block per step.
    """
    nk = -(-k // kb) if k > 0 else 0
    g = 1 if width is None else max(1, int(width) // kb)
    return tuple((b, min(b + g, nk)) for b in range(0, nk, g))


def _merge(a: Piece, b: Piece, vertical: bool) -> Piece | None:
    """``a`` and ``b`` as one piece if they are adjacent in both panel and source, else None."""
    if a.sender != b.sender or a.op != b.op or a.mask is not None or b.mask is not None:
        return None
    trans = _T_OF[a.op]
    if vertical:  # b below a in the panel
        if not (a.dc == b.dc and a.nc == b.nc and b.dr == a.dr + a.nr):
            return None
        src_rows = not trans  # panel rows are source rows ('N'/'R') or source columns
    else:  # b right of a
        if not (a.dr == b.dr and a.nr == b.nr and b.dc == a.dc + a.nc):
            return None
        src_rows = trans
    if src_rows:
        if not (a.sc0 == b.sc0 and a.snc == b.snc and b.sr0 == a.sr0 + a.snr):
            return None
        return Piece(
            a.sender,
            a.sr0,
            a.sc0,
            a.snr + b.snr,
            a.snc,
            None,
            a.op,
            a.dr,
            a.dc,
            a.nr + (b.nr if vertical else 0),
            a.nc + (0 if vertical else b.nc),
        )
    if not (a.sr0 == b.sr0 and a.snr == b.snr and b.sc0 == a.sc0 + a.snc):
        return None
    return Piece(
        a.sender,
        a.sr0,
        a.sc0,
        a.snr,
        a.snc + b.snc,
        None,
        a.op,
        a.dr,
        a.dc,
        a.nr + (b.nr if vertical else 0),
        a.nc + (0 if vertical else b.nc),
    )


def _merge_all(pieces: list[Piece]) -> list[Piece]:
    out: list[Piece] = []
    for vertical, key in ((False, lambda p: (p.dr, p.dc)), (True, lambda p: (p.dc, p.dr))):
        out = []
        for p in sorted(pieces, key=key):
            m = _merge(out[-1], p, vertical) if out else None
            if m is None:
                out.append(p)
            else:
                out[-1] = m
        pieces = out
    return sorted(out, key=lambda p: (p.dr, p.dc))


@functools.lru_cache(maxsize=64)
def plan_panels(
    spec: PanelSpec, steps: tuple[tuple[int, int], ...]
) -> tuple[tuple[GroupStep, ...], ...]:
    """The plan of ``spec``: ``plan[k][g]`` is the :class:`GroupStep` of group ``g`` (process
    row for axis 0, process column for axis 1) at step ``k``. Pure; cached."""
    src, tgt, axis = spec.source, spec.target, spec.axis
    xl = src.layout
    pr, pc = tgt.grid_shape
    if xl.grid_shape != tgt.grid_shape:
        raise ValueError(f"source grid {xl.grid_shape} differs from target grid {tgt.grid_shape}")
    if src.block[0] != tgt.block[axis] or src.shape[0] != tgt.shape[axis]:
        raise ValueError(
            f"panel rows of {src.shape} blocked {src.block} do not match the target dimension "
            f"{tgt.shape[axis]} blocked {tgt.block[axis]}"
        )
    rb, kb = src.block
    nrows, kdim = src.shape
    ngroups = pr if axis == 0 else pc
    other = pc if axis == 0 else pr
    # receivers of group g: the processes of grid row/col g that hold part of the target
    receivers_of = []
    for g in range(ngroups):
        rec = []
        for h in range(other):
            rc = (g, h) if axis == 0 else (h, g)
            if tgt.local_shape(*rc)[0] > 0 and tgt.local_shape(*rc)[1] > 0:
                rec.append(rc[0] * pc + rc[1])
        receivers_of.append(tuple(rec))
    plan = []
    for b0, b1 in steps:
        k0 = b0 * kb
        width = min(b1 * kb, kdim) - k0
        row = []
        for g in range(ngroups):
            blocks = tgt.local_block_rows(g) if axis == 0 else tgt.local_block_cols(g)
            pieces: list[Piece] = []
            zeros: list[tuple[int, int, int, int]] = []
            nonzero_rows: list[tuple[int, int]] = []
            dr = 0
            for i in blocks:
                nr = min(rb, nrows - i * rb)
                any_nonzero = False
                for kk in range(b0, b1):
                    dc = kk * kb - k0
                    nc = min(kb, kdim - kk * kb)
                    where = src.resolve(i, kk)
                    if where is None:
                        zeros.append((dr, dc, nr, nc))
                        continue
                    a, b, mask, op = where
                    owner = xl.block_owner(a, b)
                    sr0, sc0 = xl.local_offset(a, b)
                    snr, snc = xl.block_extent(a, b)
                    assert (snc, snr) == (nr, nc) if _T_OF[op] else (snr, snc) == (nr, nc)
                    pieces.append(
                        Piece(
                            owner[0] * pc + owner[1], sr0, sc0, snr, snc, mask, op, dr, dc, nr, nc
                        )
                    )
                    any_nonzero = True
                if any_nonzero:
                    nonzero_rows.append((dr, dr + nr))
                dr += nr
            recv = receivers_of[g]
            if not nonzero_rows or not recv or width <= 0:
                row.append(GroupStep(0, 0, max(width, 0), (), (), (), False))
                continue
            lo, hi = nonzero_rows[0][0], nonzero_rows[-1][1]
            zeros = [(z[0] - lo, z[1], z[2], z[3]) for z in zeros if lo <= z[0] < hi]
            by_sender: dict[int, list[Piece]] = {}
            for p in pieces:
                by_sender.setdefault(p.sender, []).append(replace(p, dr=p.dr - lo))
            segments = []
            offset = 0
            ordered: list[Piece] = []
            for sender in sorted(by_sender):
                seg_pieces = []
                seg_start = offset
                for p in _merge_all(by_sender[sender]):
                    p = replace(p, offset=offset)
                    offset += p.size
                    seg_pieces.append(p)
                ordered.extend(seg_pieces)
                segments.append((sender, seg_start, offset - seg_start, tuple(seg_pieces)))
            in_order = not zeros
            rows_so_far = 0
            for p in ordered:
                if p.dc != 0 or p.nc != width or p.dr != rows_so_far:
                    in_order = False
                    break
                rows_so_far += p.nr
            in_order = in_order and rows_so_far == hi - lo
            row.append(GroupStep(lo, hi, width, tuple(segments), tuple(zeros), recv, in_order))
        plan.append(tuple(row))
    return tuple(plan)


# -- local data movement (run on a stream) ----------------------------------------------------
def _masked(xp: Any, blk: Any, mask: str | None) -> Any:
    if mask is None:
        return blk
    if mask in ("L", "U"):
        return xp.tril(blk) if mask == "L" else xp.triu(blk)
    if mask in ("Lunit", "Uunit"):
        t = xp.tril(blk, -1) if mask == "Lunit" else xp.triu(blk, 1)
        n = min(t.shape)
        idx = xp.arange(n)
        t[idx, idx] = 1
        return t
    if mask == "symL":
        return xp.tril(blk) + xp.tril(blk, -1).T
    if mask == "symU":
        return xp.triu(blk) + xp.triu(blk, 1).T
    raise ValueError(f"unknown mask {mask!r}")


def _apply_op(xp: Any, blk: Any, op: str) -> Any:
    if op == "N":
        return blk
    if op == "T":
        return blk.T
    if op == "C":
        return xp.conj(blk).T if xp.iscomplexobj(blk) else blk.T
    return xp.conj(blk) if xp.iscomplexobj(blk) else blk


def _pack(xp: Any, local: Any, pieces: Sequence[Piece], dst: Any, base: int) -> None:
    """Write ``pieces`` of ``local`` into the flat ``dst`` at ``base + piece.offset - first``."""
    first = pieces[0].offset
    for p in pieces:
        blk = local[p.sr0 : p.sr0 + p.snr, p.sc0 : p.sc0 + p.snc]
        blk = _apply_op(xp, _masked(xp, blk, p.mask), p.op)
        start = base + p.offset - first
        dst[start : start + p.size].reshape(p.nr, p.nc)[...] = blk


def _unpack(slot: Any, gs: GroupStep, panel: Any) -> None:
    for _, _, _, pieces in gs.segments:
        for p in pieces:
            panel[p.dr : p.dr + p.nr, p.dc : p.dc + p.nc] = slot[
                p.offset : p.offset + p.size
            ].reshape(p.nr, p.nc)
    for dr, dc, nr, nc in gs.zeros:
        panel[dr : dr + nr, dc : dc + nc] = 0


@warmup_kernels
def _warm_pack_unpack(backend: Any, xp: Any, dtype: np.dtype) -> None:
    """:func:`_pack` for every mask and op, on a strided 4x4 block and on full (contiguous)
    rows; :func:`_unpack` of a slot into a strided panel region, with zero fill of another."""
    n = 6
    local = sample_matrix(xp, dtype, n)
    flat = xp.empty(4 * n * n, dtype)
    for mask in (None, "L", "U", "Lunit", "Uunit", "symL", "symU"):
        for op in ("N", "T", "C", "R"):
            rows, cols = (n, 2) if op in ("T", "C") else (2, n)
            for p in (
                Piece(0, 1, 1, 4, 4, mask, op, 0, 0, 4, 4, 0),
                Piece(0, 0, 0, 2, n, None, op, 0, 0, rows, cols, 0),
            ):
                _pack(xp, local, [p], flat, 0)
    panel = xp.empty((n, n), dtype)
    seg_pieces = (Piece(0, 0, 0, 4, 4, None, "N", 1, 1, 4, 4, 0),)
    zeros = ((0, 0, 1, n), (1, 0, 4, 1))
    _unpack(flat, GroupStep(0, n, n, ((0, 0, 16, seg_pieces),), zeros, (), False), panel)


# -- the exchange -----------------------------------------------------------------------------
@dataclass
class Panel:
    """A received panel: rows ``[lo, hi)`` of the target dimension, ``array`` of shape
    ``(hi - lo, width)`` (a view into a slot or the unpack buffer; valid until release)."""

    lo: int
    hi: int
    array: Any


class PanelExchange:
    """Moves the panels of several operands through symmetric slots (see the module docstring).

    Parameters
    ----------
    backend : Backend
    name : str
        Operator name, used in signal-wait diagnostics.
    specs : sequence of PanelSpec
        One per operand; all share the K dimension and its blocking.
    locals_ : sequence of arrays
        This process's local matrix of each operand's stored ``X``.
    steps : tuple of (int, int)
        Step partition of the K-blocks (:func:`make_steps`).
    dtype : dtype
        Element type of the panels (every local matrix is cast while packing).
    num_stages : int
        Number of slots per operand (1: single buffering).
    grid_rank : int
        This process's rank in the grid (``myrow * Pc + mycol``).
    channel : str
        Name of the pooled workspace (buffer + signals) to use. Exchanges alive at the same
        time (e.g. two operands with different triggers, as in TRSM) need different channels;
        an exchange must :meth:`finish` before the next one on its channel starts.

    Panels returned by :meth:`recv` stay valid until :meth:`release` of their step; with
    ``num_stages >= 2`` the panels of step ``k + 1`` may be received before step ``k`` is
    released (look-ahead): unpack buffers are per slot.

    Construction and :meth:`finish` are collective (every process, same order).
    """

    def __init__(
        self,
        backend: Any,
        name: str,
        specs: Sequence[PanelSpec],
        locals_: Sequence[Any],
        steps: tuple[tuple[int, int], ...],
        dtype: Any,
        num_stages: int,
        grid_rank: int,
        channel: str = _exchange.CHANNEL,
    ) -> None:
        if int(num_stages) < 1:
            raise ValueError(f"num_stages must be >= 1, got {num_stages}")
        self.backend = backend
        self.name = name
        self.specs = list(specs)
        self.locals = list(locals_)
        self.steps = steps
        self.nsteps = len(steps)
        self.dtype = np.dtype(dtype)
        self.S = S = int(num_stages)
        self.me = me = int(grid_rank)
        self.plans = [plan_panels(spec, steps) for spec in self.specs]
        nops = len(self.specs)
        pr, pc = self.specs[0].target.grid_shape if nops else (1, 1)
        self.my_group = [(me // pc) if spec.axis == 0 else (me % pc) for spec in self.specs]

        # sizes: slot = max panel; staging = max over ranks and steps of what one rank stages
        self.slot_elems = []
        self.stage_elems = []
        for plan in self.plans:
            slot = 0
            stage: dict[int, int] = {}
            for step in plan:
                per_rank: dict[int, int] = {}
                for gs in step:
                    slot = max(slot, gs.size)
                    for sender, _, size, _ in gs.segments:
                        if sender not in gs.receivers:
                            per_rank[sender] = per_rank.get(sender, 0) + size
                for r, v in per_rank.items():
                    stage[r] = max(stage.get(r, 0), v)
            self.slot_elems.append(slot)
            self.stage_elems.append(max(stage.values(), default=0))
        self.slot_base = list(np.cumsum([0] + [S * e for e in self.slot_elems])[:-1])
        self.stage_base = list(np.cumsum([0] + [S * e for e in self.stage_elems])[:-1])

        # per-rank schedule
        K = self.nsteps
        self._recv: list[list[GroupStep | None]] = [[None] * K for _ in range(nops)]
        self._ready_cum = [[0] * K for _ in range(nops)]
        # acks are counted per (operand, slot, receiver): a fast receiver may ack step k + S
        # before a slow one acks step k, so a shared counter could be satisfied too early
        self._ack_need: list[list[list[tuple[int, int]]]] = [
            [[] for _ in range(K)] for _ in range(nops)
        ]
        self._ack_total: dict[tuple[int, int, int], int] = {}
        self._sends: list[list[list[tuple[GroupStep, tuple, list[int], bool]]]] = [
            [[] for _ in range(K)] for _ in range(nops)
        ]
        self._local_seg = [[False] * K for _ in range(nops)]
        for o, plan in enumerate(self.plans):
            ready = [0] * S
            for k, step in enumerate(plan):
                s = k % S
                gs = step[self.my_group[o]]
                if me in gs.receivers:
                    self._recv[o][k] = gs
                    ready[s] += sum(1 for seg in gs.segments if seg[0] != me)
                    self._local_seg[o][k] = any(seg[0] == me for seg in gs.segments)
                self._ready_cum[o][k] = ready[s]
                for g in step:
                    if not g.receivers:
                        continue
                    for seg in g.segments:
                        if seg[0] == me:
                            remote = [q for q in g.receivers if q != me]
                            self._sends[o][k].append((g, seg, remote, me in g.receivers))
                            if k >= S:
                                for q in remote:
                                    key = (o, s, q)
                                    self._ack_total[key] = self._ack_total.get(key, 0) + 1
                                    self._ack_need[o][k].append((q, self._ack_total[key]))
        self._sent_events: dict[int, Any] = {}
        self._release_events: dict[int, Any] = {}
        self._unpack_bufs: dict[tuple[int, int], Any] = {}  # per (operand, slot)

        # one pooled symmetric buffer: [slots of every operand | staging of every operand]
        self._xp = backend.xp
        nslot = int(sum(S * e for e in self.slot_elems))
        nstage = int(sum(S * e for e in self.stage_elems))
        self.channel = channel
        ws = _exchange.workspace(backend, channel)
        buf = ws.buffer(self.dtype, nslot + nstage)
        self.slots = buf
        self.stage_base = [int(x) + nslot for x in self.stage_base]
        # one pooled signal set: ready[o, s] at o*S + s; ack[o, s, q] at ack0 + (o*S + s)*P + q
        self.P = pr * pc
        self.signals, self._base = ws.signals(nops * S * (1 + self.P))
        self._ack0 = nops * S
        self._finished = False

    # -- helpers --------------------------------------------------------------------------
    def _needs_local_slot(self, k: int) -> bool:
        return any(self._local_seg[o][k] for o in range(len(self.specs)))

    def _ack_index(self, o: int, s: int, receiver: int) -> int:
        return self._ack0 + (o * self.S + s) * self.P + receiver

    def _slot_region(self, o: int, s: int) -> int:
        return int(self.slot_base[o] + s * self.slot_elems[o])

    # -- protocol -------------------------------------------------------------------------
    def send(self, k: int, after: Any = None) -> None:
        """Pack and put this process's segments of step ``k`` (comm stream)."""
        b, comm = self.backend, self.backend.comm_stream
        S, s = self.S, k % self.S
        if after is not None:
            b.wait_event(comm, after)
        if k >= S and self._needs_local_slot(k):
            ev = self._release_events.pop(k - S, None)
            if ev is not None:
                b.wait_event(comm, ev)
        any_local = False
        for o in range(len(self.specs)):
            sends = self._sends[o][k]
            if not sends:
                continue
            for q, count in self._ack_need[o][k]:
                # receiver q released step k - S: its slot s is free
                idx = self._ack_index(o, s, q)
                b.signal_wait(
                    self.signals,
                    idx,
                    int(self._base[idx]) + count,
                    comm,
                    what=f"{self.name} step {k} slot {s} (ack)",
                    peer=q,
                )
            slot0 = self._slot_region(o, s)
            stage_off = int(self.stage_base[o] + s * self.stage_elems[o])
            for _gs, (_, seg_off, size, pieces), remote, local in sends:
                if local:
                    # X[my blocks] -> my own slot; remote receivers get it from there
                    b.launch(
                        comm,
                        _pack,
                        self._xp,
                        self.locals[o],
                        pieces,
                        self.slots.array,
                        slot0 + seg_off,
                    )
                    src = self.slots.array[slot0 + seg_off : slot0 + seg_off + size]
                    any_local = True
                else:
                    # X[my blocks] -> staging -> every receiver of the group
                    b.launch(
                        comm, _pack, self._xp, self.locals[o], pieces, self.slots.array, stage_off
                    )
                    src = self.slots.array[stage_off : stage_off + size]
                    stage_off += size
                for q in remote:
                    b.put_signal(
                        self.slots, slot0 + seg_off, src, q, self.signals, o * S + s, 1, "add", comm
                    )
        if any_local or self._needs_local_slot(k):
            self._sent_events[k] = b.record_event(comm)

    def recv(self, k: int) -> list[Panel | None]:
        """Panels of step ``k`` (compute stream); None where this process has no panel."""
        b, comp = self.backend, self.backend.compute
        S, s = self.S, k % self.S
        ev = self._sent_events.pop(k, None)
        if ev is not None:
            b.wait_event(comp, ev)
        out: list[Panel | None] = []
        for o in range(len(self.specs)):
            gs = self._recv[o][k]
            if gs is None or gs.hi == gs.lo:
                out.append(None)
                continue
            remote = [seg[0] for seg in gs.segments if seg[0] != self.me]
            if remote:
                b.signal_wait(
                    self.signals,
                    o * S + s,
                    int(self._base[o * S + s]) + self._ready_cum[o][k],
                    comp,
                    what=f"{self.name} step {k} slot {s} (ready)",
                    peer=remote[0],
                )
            base = self._slot_region(o, s)
            rows = gs.hi - gs.lo
            if gs.in_order:
                arr = self.slots.array[base : base + rows * gs.width].reshape(rows, gs.width)
            else:
                buf = self._unpack_bufs.get((o, s))
                need = rows * gs.width
                if buf is None or buf.size < need:
                    cap = max(self.slot_elems[o], need)
                    # a private (not symmetric) buffer: backend.empty may be collective
                    buf = self._unpack_bufs[o, s] = self._xp.empty((cap,), self.dtype)
                arr = buf[:need].reshape(rows, gs.width)
                slot = self.slots.array[base : base + self.slot_elems[o]]
                b.launch(comp, _unpack, slot, gs, arr)
            out.append(Panel(gs.lo, gs.hi, arr))
        return out

    def release(self, k: int) -> None:
        """Acknowledge that step ``k``'s panels are consumed (compute stream)."""
        b, comp = self.backend, self.backend.compute
        S = self.S
        nxt = k + S
        if nxt >= self.nsteps:
            return
        s = nxt % S
        for o in range(len(self.specs)):
            gs = self._recv[o][nxt]
            if gs is None:
                continue
            for sender, _, _, _ in gs.segments:
                if sender != self.me:
                    idx = self._ack_index(o, s, self.me)
                    b.signal_op(self.signals, idx, 1, sender, "add", comp)
        if self._needs_local_slot(nxt):
            self._release_events[k] = b.record_event(comp)

    def drop(self) -> None:
        """Forget the pool after a failure on the host (its signal values are unknown)."""
        _exchange.drop_workspace(self.backend, self.channel)

    def finish(self) -> None:
        """Drain the streams and end the exchange (collective). The pooled buffer and signals
        stay allocated for the next operator; the signal bases advance by what this exchange
        added (every increment was waited for, so the counters are known exactly), and a
        barrier keeps the next exchange from writing a slot that a slower process still reads.
        """
        b = self.backend
        try:
            b.synchronize()
        except BaseException:
            # the counters are unknown now: never reuse this pool
            _exchange.drop_workspace(b, self.channel)
            raise
        if self._finished:
            return
        self._finished = True
        S = self.S
        for o in range(len(self.specs)):
            for s in range(S):
                last_r = [k for k in range(s, self.nsteps, S)]
                if last_r:
                    self._base[o * S + s] += self._ready_cum[o][last_r[-1]]
        for (o, s, q), total in self._ack_total.items():
            self._base[self._ack_index(o, s, q)] += total
        b.barrier()


def free_workspace(backend: Any) -> None:
    """Release the pooled exchange buffers of every channel of ``backend`` (collective)."""
    _exchange.free_workspace(backend)


def run_pipeline(
    backend: Any,
    name: str,
    specs: Sequence[PanelSpec],
    locals_: Sequence[Any],
    steps: tuple[tuple[int, int], ...],
    dtype: Any,
    num_stages: int,
    grid_rank: int,
    update: Callable[[int, list[Panel | None]], None],
) -> None:
    """The SUMMA loop: prefetch ``num_stages`` steps, then recv / update / release / send.

    ``update(k, panels)`` enqueues the local work of step ``k`` on ``backend.compute``; it must
    not synchronise. Collective; returns after the streams are drained and the exchange freed.
    """
    ex = PanelExchange(backend, name, specs, locals_, steps, dtype, num_stages, grid_rank)
    K = len(steps)
    begin_pipeline(backend, dtype)
    for k in range(min(ex.S, K)):
        ex.send(k)
    for k in range(K):
        panels = ex.recv(k)
        update(k, panels)
        ex.release(k)
        if k + ex.S < K:
            ex.send(k + ex.S)
    ex.finish()
