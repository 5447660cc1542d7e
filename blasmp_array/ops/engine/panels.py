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

Window views (a source window ``X[i0:, j0:]`` at offsets inside blocks, or a target ``C`` that
is one, :class:`WindowTarget`): a block of ``M`` then straddles up to four stored blocks, and
the plan is made of :class:`Gather` s instead of pieces: a sender's part of a panel is always
the product of the window rows and columns it owns, so it is one gather (index arrays, or
slices for runs) packed from its local matrix and one scatter on the receiver. Symmetric and
triangular windows mask the gathered block to the window's own triangle; a symmetric one adds
its mirrored strict triangle as a second gather, added on unpack.

Panel slots and the signal protocol
-----------------------------------
The panels travel on the one-sided exchange engine (``ops/engine/_exchange.py``): :func:`summa_plan`
turns the plan into an engine :class:`~._exchange.Plan` of one *in-slot* message per segment
(sender -> every receiver of the group), and :class:`PanelExchange` runs it with an
:class:`~._exchange.Exchange` (on the default channel ``"exchange"``, or its own, e.g.
Cholesky's ``"cholesky.panel"``). The receive slot of a step holds the panels of every operand
one after the other, each the concatenation of its senders' segments (sender rank order). A
sender packs each segment once: into its staging slot when it is not in the group, straight
into its own receive slot when it is (and puts it from there). ``num_stages`` slots rotate
over the steps (``s = k % S``).

Signals are the engine's one discipline (monotonic per-peer counters, never reset, expected
values derived from the plan, bases kept per pooled channel):

1. ``send(k)`` -- sender, comm stream. Packs its segments of step ``k`` (after the optional
   ``after`` event, and, if ``k >= S``, after a ``quiet`` that completes the puts of step
   ``k - S`` which read the same staging slot); for each remote receiver ``q``, if
   ``k >= S``, waits until ``ack[s, q]`` counts the steps ``S <= k' <= k, k' = s (mod S)`` at
   which it sends to ``q`` (``q`` released step ``k - S``: its slot ``s`` is free), then
   ``put_signal``\\ s each segment into slot ``s`` of every remote receiver at the segment's
   offset with ``ready[s, me]`` += 1 there. A segment for its own slot is packed after the
   event of its own ``release(k - S)`` and needs no signal (an event orders its ``recv``).
2. ``recv(k)`` -- receiver, compute stream. Waits, per sender ``p`` of its panels of step
   ``k``, until ``ready[s, p]`` reaches the cumulative number of ``p``'s segments in slot ``s``
   (steps ``k' <= k, k' = s (mod S)``). If the segments already form the panel in local
   (C-)order the panel is a view of the slot (zero copy); else they are unpacked (a
   permutation of rectangles, plus zero fill) into a per-slot compute-side buffer.
3. ``release(k)`` -- receiver, compute stream, after the update of step ``k`` is enqueued.
   ``ack[s, me]`` += 1 on every remote sender that writes into this process's slot
   ``s`` at step ``k + S``. Every process calls ``release(k)`` for every ``k``: an ack means
   "my compute stream is past step ``k``", which covers every earlier use of the slot.

Why it is safe: a sender writes slot ``s`` of ``q`` at step ``k + S`` only after ``q``'s ack for
step ``k``, which ``q`` sends after consuming step ``k`` (and, transitively, every earlier step);
``q``'s ready counters for slot ``s`` cannot run ahead of step ``k`` because the step ``k + S``
data needs that ack first. Signals become visible after their data (put-with-signal). At the
end every put was waited for by its receiver and every ack by its sender, so after
``synchronize()`` no traffic is in flight; the engine's ``finish`` (one host ``allgather`` of
the outcome, a timeout raises on every rank) separates this exchange from the next one on the
pooled workspace.

The driver
----------
:func:`run_pipeline` is the one loop every operator uses::

    begin(); send(0 .. S-1)
    for k: panels = recv(k); update(k, panels); release(k); send(k + S)
    finish()   # synchronize, agree on the outcome (allgather), advance the signal bases

``num_stages=1`` is the conservative single-buffered pipeline (no overlap of communication of
step ``k + 1`` with the update of step ``k``); ``2`` double-buffers. No host synchronisation
happens inside the loop.

Reuse (e.g. Cholesky): a source whose panel data is produced during the pipeline passes
``send(k, after=event)``; the comm stream waits ``event`` (recorded on the compute stream after
the producing work) before packing. Driving an exchange by hand::

    ex = PanelExchange(backend, "cholesky", [PanelSpec(src_row, C.layout, 0),
                                             PanelSpec(src_col, C.layout, 1)],
                       [X_row._data, X_col._data], make_steps(K, kb), dtype, num_stages,
                       grid.rank, channel="cholesky.panel")
    begin_pipeline(backend, dtype)
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
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ...backends._host_copy import assign
from ...backends.base import Backend
from ...layout import BlockCyclicLayout
from . import _exchange
from ._checks import OP_OF_FLAGS
from ._triangle import index_triangle
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
    "Gather",
    "WindowTarget",
    "window_gathers",
    "pack_pieces",
    "put_indexed",
]

#: step width (K columns per pipeline step) the steps are aggregated to by default
DEFAULT_STEP_WIDTH = {"cpu": 256, "gpu": 2048}

_T_OF = {"N": False, "T": True, "C": True, "R": False}
_C_OF = {"N": False, "T": False, "C": True, "R": True}


def compose_op(inner: str, outer: str) -> str:
    """The op character of ``outer(inner(X))`` (ops in 'N', 'T', 'C', 'R'; 'R' = conj)."""
    return OP_OF_FLAGS[_T_OF[inner] ^ _T_OF[outer], _C_OF[inner] ^ _C_OF[outer]]


def default_step_width(backend: Backend) -> int:
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
    offset, extent : tuple of int
        ``X`` is the window ``X[i0 : i0 + h, j0 : j0 + w]`` for ``offset = (i0, j0)``,
        ``extent = (h, w)`` (PBLAS's ``IA, JA``; None: all of ``X``), square for 'sym'/'tri'
        (whose triangles are the window's own). The window may start anywhere inside a block:
        :func:`plan_panels` then plans each sender's part of a panel as one :class:`Gather`.
    """

    layout: BlockCyclicLayout
    op: str = "N"
    structure: str = "general"
    uplo: str = "L"
    unit: bool = False
    offset: tuple[int, int] = (0, 0)
    extent: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.extent is not None and self.structure != "general":
            if self.extent[0] != self.extent[1]:
                raise ValueError(f"a {self.structure} window must be square, got {self.extent}")

    @property
    def windowed(self) -> bool:
        return self.extent is not None and (
            self.offset != (0, 0) or self.extent != self.layout.shape
        )

    @property
    def transposed(self) -> bool:
        return _T_OF[self.op]

    @property
    def shape(self) -> tuple[int, int]:
        m, n = self.layout.shape if self.extent is None else self.extent
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
class WindowTarget:
    """The target ``C`` of a pipeline that is a window view: ``parent[rows, cols]`` at offsets
    inside blocks. Duck-types what :func:`plan_panels` reads of a target layout (shape, grid,
    each process's global rows/columns in local order, local shapes); its local matrix is the
    slice :meth:`~blasmp_array.array.Window.local_slices` of the parent's. Every source of
    such a target is planned with gathers."""

    parent: BlockCyclicLayout
    rows: tuple[int, int]
    cols: tuple[int, int]

    @classmethod
    def of(cls, w: Any) -> WindowTarget:
        """The target of a window view's :class:`~blasmp_array.array.Window`."""
        return cls(w.parent.layout, w.rows, w.cols)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows[1] - self.rows[0], self.cols[1] - self.cols[0])

    @property
    def grid_shape(self) -> tuple[int, int]:
        return self.parent.grid_shape

    @property
    def block(self) -> tuple[int, int]:
        return self.parent.block

    def local_rows(self, p: int) -> np.ndarray:
        """The window rows process row ``p`` holds, in local order (window indices)."""
        g = self.parent.local_rows(p)
        return g[(g >= self.rows[0]) & (g < self.rows[1])] - self.rows[0]

    def local_cols(self, q: int) -> np.ndarray:
        """The window columns process column ``q`` holds, in local order (window indices)."""
        g = self.parent.local_cols(q)
        return g[(g >= self.cols[0]) & (g < self.cols[1])] - self.cols[0]

    def local_shape(self, p: int, q: int) -> tuple[int, int]:
        return (len(self.local_rows(p)), len(self.local_cols(q)))


@dataclass(frozen=True)
class PanelSpec:
    """One operand of an exchange: rows of ``source`` selected by ``target``'s ``axis``.

    ``axis=0``: the row panel of process row ``r`` holds ``M[rows of target on r, K-range]``;
    ``axis=1``: the column panel of process column ``c`` holds ``M[cols of target on c, ...]``.
    ``M``'s row blocking must equal ``target.block[axis]``. ``source.layout`` and ``target`` live
    on the same grid (``grid_shape``); rank of grid coordinates ``(p, q)`` is ``p * Pc + q``.
    """

    source: Source
    target: BlockCyclicLayout | WindowTarget
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
    segments: tuple[tuple[int, int, int, tuple[Piece, ...] | tuple[Gather, ...]], ...]
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


@dataclass(frozen=True, eq=False)  # identity: index arrays are not hashed
class Gather:
    """A segment of a windowed source (:attr:`Source.offset`): the sender's elements of the
    panel as one product of index sets, packed by one gather and unpacked by one scatter.

    ``xr, xc``: the sender's local rows and columns (index arrays, or slices where they are a
    contiguous run); ``op`` maps ``local[xr][:, xc]`` to the panel orientation; ``dr, dc``: the
    panel rows (relative to the active rows) and columns it lands on. For a general source
    the sender's part of a panel always is such a product: process row ``p`` owns the rows
    it owns, process column ``q`` the columns, whatever the offset.

    Symmetric and triangular windows (``keep``): the gathered block is masked to a triangle of
    the window, judged by ``wr, wc`` (the window rows and columns of the gathered elements):
    'L'/'U' keep ``wr >= wc`` / ``wr <= wc``, 'Ls'/'Us' the strict triangles; ``unit`` puts
    ones on the diagonal. A symmetric window is two gathers per sender: its stored triangle
    as is, and the strict triangle again through the transposed op (the mirrored half), which
    the receiver *adds* (``add``) after every plain gather of the panel was written.
    """

    sender: int
    xr: Any
    xc: Any
    op: str
    dr: Any
    dc: Any
    offset: int = 0
    keep: str | None = None
    unit: bool = False
    add: bool = False
    wr: Any = None
    wc: Any = None
    device: dict = field(default_factory=dict)  # index arrays on the backend's device, by xp

    @property
    def shape(self) -> tuple[int, int]:
        return (_count(self.dr), _count(self.dc))

    @property
    def size(self) -> int:
        r, c = self.shape
        return r * c

    def on(self, xp: Any) -> tuple[Any, ...]:
        """``(xr, xc, dr, dc, wr, wc)`` with the index arrays on ``xp``'s device (cached)."""
        key = xp.__name__
        if key not in self.device:
            self.device[key] = tuple(
                x if x is None or isinstance(x, slice) else xp.asarray(x)
                for x in (self.xr, self.xc, self.dr, self.dc, self.wr, self.wc)
            )
        return self.device[key]


def _count(x: Any) -> int:
    return x.stop - x.start if isinstance(x, slice) else len(x)


def _as_index(x: np.ndarray) -> Any:
    """``x`` as a slice when it is a contiguous increasing run (cheaper to index), else as is."""
    if len(x) and x[-1] - x[0] == len(x) - 1 and (len(x) == 1 or bool(np.all(np.diff(x) == 1))):
        return slice(int(x[0]), int(x[-1]) + 1)
    return x


def _take2(xp: Any, a: Any, rows: Any, cols: Any) -> Any:
    """``a[rows][:, cols]`` for slices and/or index arrays."""
    if isinstance(rows, slice):
        return a[rows, cols] if isinstance(cols, slice) else xp.take(a[rows], cols, axis=1)
    if isinstance(cols, slice):
        return xp.take(a[:, cols], rows, axis=0)
    return a[rows[:, None], cols[None, :]]


def put_indexed(a: Any, rows: Any, cols: Any, value: Any, add: bool = False) -> None:
    """``a[rows][:, cols] = value`` (``+=`` with ``add``; indices never repeat) for slices
    and/or index arrays."""
    at = (rows, cols) if isinstance(rows, slice) or isinstance(cols, slice) else None
    if at is None:
        at = (rows[:, None], cols[None, :])
    if add:
        a[at] += value
    else:
        a[at] = value


#: the diagonal offset ``k`` of :func:`~._triangle.index_triangle` for each ``Gather.keep``
_KEEP_K = {"L": 0, "U": 0, "Ls": -1, "Us": 1}


def _keep(xp: Any, blk: Any, wr: Any, wc: Any, keep: str, unit: bool) -> Any:
    """``blk`` masked to the ``keep`` triangle of the window (see :class:`Gather`)."""
    blk = xp.where(index_triangle(wr, wc, keep[0], _KEEP_K[keep]), blk, 0)
    return xp.where(wr[:, None] == wc[None, :], 1, blk) if unit else blk


def _owners(g: np.ndarray, b: int, nprocs: int, src: int) -> tuple[np.ndarray, np.ndarray]:
    """Owner and local index of global indices ``g`` (vectorised INDXG2P, INDXG2L)."""
    return (src + g // b) % nprocs, (g // (b * nprocs)) * b + g % b


def window_gathers(
    src: Source, op: str, mrows: np.ndarray, kcols: np.ndarray, pc: int, **mask: Any
) -> list[Gather]:
    """One :class:`Gather` per sender of ``M[mrows, kcols]`` for ``M = op(window of X)``."""
    xl = src.layout
    (mb, nb), (xpr, xpc), (sr, sc) = xl.block, xl.grid_shape, xl.src
    i0, j0 = src.offset
    transposed = _T_OF[op]
    # X's rows and columns of the panel's rows (mrows) and K columns
    wrows, wcols = (kcols, mrows) if transposed else (mrows, kcols)
    (orow, lrow), (ocol, lcol) = _owners(i0 + wrows, mb, xpr, sr), _owners(j0 + wcols, nb, xpc, sc)
    keep = mask.get("keep")
    gathers = []
    for p in np.unique(orow):
        rsel = np.flatnonzero(orow == p)
        for q in np.unique(ocol):
            csel = np.flatnonzero(ocol == q)
            pos_r, pos_c = (csel, rsel) if transposed else (rsel, csel)
            gathers.append(
                Gather(
                    int(p) * pc + int(q),
                    _as_index(lrow[rsel]),
                    _as_index(lcol[csel]),
                    op,
                    _as_index(pos_r),
                    _as_index(pos_c),
                    wr=wrows[rsel] if keep else None,
                    wc=wcols[csel] if keep else None,
                    **mask,
                )
            )
    return gathers


def _window_group_step(
    src: Source, mrows: np.ndarray, k0: int, width: int, receivers: tuple[int, ...], pc: int
) -> GroupStep:
    """The panel of one group at one step for a windowed source: ``M[mrows, k0:k0 + width]`` as
    one :class:`Gather` per sender (two for a symmetric window: its mirrored half)."""
    kcols = np.arange(k0, k0 + width)
    if src.structure == "general":
        gathers = window_gathers(src, src.op, mrows, kcols, pc)
    else:
        gathers = window_gathers(
            src, src.op, mrows, kcols, pc, keep=src.uplo, unit=src.structure == "tri" and src.unit
        )
        if src.structure == "sym":
            mirrored = compose_op("T", src.op)
            gathers += window_gathers(
                src, mirrored, mrows, kcols, pc, keep=src.uplo + "s", add=True
            )
    segments = []
    offset = 0
    for sender in sorted({g.sender for g in gathers}):
        start, pieces = offset, []
        for gth in (g for g in gathers if g.sender == sender):
            pieces.append(replace(gth, offset=offset, device={}))
            offset += gth.size
        segments.append((sender, start, offset - start, tuple(pieces)))
    whole = (slice(0, len(mrows)), slice(0, width))
    in_order = (
        len(gathers) == 1
        and gathers[0].keep is None
        and all(
            isinstance(x, slice) and x == w
            for x, w in zip((gathers[0].dr, gathers[0].dc), whole, strict=True)
        )
    )
    return GroupStep(0, len(mrows), width, tuple(segments), (), receivers, in_order)


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
    gathered = src.windowed or isinstance(tgt, WindowTarget)
    if (not gathered and src.block[0] != tgt.block[axis]) or src.shape[0] != tgt.shape[axis]:
        raise ValueError(
            f"panel rows of {src.shape} blocked {src.block} do not match the target dimension "
            f"{tgt.shape[axis]} blocked {tgt.block[axis]}"
        )
    rb, kb = tgt.block[axis], src.block[1]
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
            if gathered:
                mrows = tgt.local_rows(g) if axis == 0 else tgt.local_cols(g)
                if not len(mrows) or not receivers_of[g] or width <= 0:
                    row.append(GroupStep(0, 0, max(width, 0), (), (), (), False))
                else:
                    row.append(_window_group_step(src, mrows, k0, width, receivers_of[g], pc))
                continue
            assert isinstance(tgt, BlockCyclicLayout)
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


def _assign_op(out: Any, blk: Any, op: str) -> None:
    """``out[...] = op(blk)``; a transposing copy of host arrays goes through the BLAS's
    ``?omatcopy`` (``backends/_host_copy.py``: about 2.5x NumPy's for a 256 x 1536 piece)."""
    assign(out, blk.T if op in ("T", "C") else blk, conjugate=op in ("C", "R"))


def pack_pieces(
    xp: Any, local: Any, pieces: Sequence[Piece] | Sequence[Gather], dst: Any, base: int
) -> None:
    """Write ``pieces`` of ``local`` into the flat ``dst`` at ``base + piece.offset - first``."""
    first = pieces[0].offset
    for p in pieces:
        start = base + p.offset - first
        out = dst[start : start + p.size]
        if isinstance(p, Gather):
            xr, xc, _, _, wr, wc = p.on(xp)
            blk = _take2(xp, local, xr, xc)
            if p.keep is not None:
                blk = _keep(xp, blk, wr, wc, p.keep, p.unit)
            _assign_op(out.reshape(p.shape), blk, p.op)
            continue
        blk = local[p.sr0 : p.sr0 + p.snr, p.sc0 : p.sc0 + p.snc]
        _assign_op(out.reshape(p.nr, p.nc), _masked(xp, blk, p.mask), p.op)


def _unpack(xp: Any, slot: Any, gs: GroupStep, panel: Any) -> None:
    added = []  # mirrored halves of symmetric windows: added once every other piece is in
    for _, _, _, pieces in gs.segments:
        for p in pieces:
            data = slot[p.offset : p.offset + p.size]
            if isinstance(p, Gather):
                if p.add:
                    added.append((p, data))
                    continue
                _, _, dr, dc, _, _ = p.on(xp)
                put_indexed(panel, dr, dc, data.reshape(p.shape))
            else:
                panel[p.dr : p.dr + p.nr, p.dc : p.dc + p.nc] = data.reshape(p.nr, p.nc)
    for p, data in added:
        _, _, dr, dc, _, _ = p.on(xp)
        put_indexed(panel, dr, dc, data.reshape(p.shape), add=True)
    for dr, dc, nr, nc in gs.zeros:
        panel[dr : dr + nr, dc : dc + nc] = 0


@warmup_kernels
def _warm_pack_unpack(backend: Backend, xp: Any, dtype: np.dtype) -> None:
    """:func:`pack_pieces` for every mask and op, on a strided 4x4 block and on full (contiguous)
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
                pack_pieces(xp, local, [p], flat, 0)
    panel = xp.empty((n, n), dtype)
    seg_pieces = (Piece(0, 0, 0, 4, 4, None, "N", 1, 1, 4, 4, 0),)
    zeros = ((0, 0, 1, n), (1, 0, 4, 1))
    _unpack(xp, flat, GroupStep(0, n, n, ((0, 0, 16, seg_pieces),), zeros, (), False), panel)
    # Gather segments (windowed sources): gathers and scatters by slices and index arrays
    idx = np.array([0, 2, 3])
    for xr, xc in ((idx, idx), (slice(1, 4), idx), (idx, slice(1, 4)), (slice(1, 4), slice(0, 3))):
        for op in ("N", "T", "C", "R"):
            g = Gather(
                0, xr, xc, op, xc if op in ("T", "C") else xr, xr if op in ("T", "C") else xc
            )
            pack_pieces(xp, local, [g], flat, 0)
            gs = GroupStep(0, n, n, ((0, 0, g.size, (g,)),), (), (), False)
            _unpack(xp, flat, gs, panel)
    # masked gathers of symmetric/triangular windows, and the added (mirrored) halves
    w = np.array([1, 2, 4])
    for xr, xc in ((idx, idx), (slice(1, 4), slice(0, 3))):
        for keep, unit, add in (("L", True, False), ("U", False, False), ("Ls", False, True)):
            for op in ("N", "T", "C", "R"):
                dr, dc = (xc, xr) if op in ("T", "C") else (xr, xc)
                g = Gather(0, xr, xc, op, dr, dc, 0, keep, unit, add, w, w[::-1].copy())
                pack_pieces(xp, local, [g], flat, 0)
                gs = GroupStep(0, n, n, ((0, 0, g.size, (g,)),), (), (), False)
                _unpack(xp, flat, gs, panel)


# -- the exchange -----------------------------------------------------------------------------
@dataclass
class Panel:
    """A received panel: rows ``[lo, hi)`` of the target dimension, ``array`` of shape
    ``(hi - lo, width)`` (a view into a slot or the unpack buffer; valid until release)."""

    lo: int
    hi: int
    array: Any


@dataclass(frozen=True)
class SummaPlan:
    """The SUMMA plan of one rank as a :class:`~._exchange.Plan` (one in-slot message per
    segment, with the group's receivers), with where each operand's panel lies in the slot
    (``slot_base[o]``) and this rank's :class:`GroupStep` per operand and step (None where it
    receives no panel)."""

    plan: _exchange.Plan
    slot_base: tuple[int, ...]
    slot_elems: tuple[int, ...]
    mine: tuple[tuple[GroupStep | None, ...], ...]


@functools.lru_cache(maxsize=64)
def summa_plan(
    name: str, specs: tuple[PanelSpec, ...], steps: tuple[tuple[int, int], ...], me: int
) -> SummaPlan:
    """This rank's plan of the panels of ``specs`` over ``steps`` (pure; cached).

    Slot of a step: the panels of every operand, operand after operand (``slot_base``), each
    the concatenation of its senders' segments. A sender packs each segment once: into its
    own slot when it belongs to the group (and puts it from there), else into its staging
    area (``stage_elems``: the most any rank stages at one step). Sizes are maxima over all
    ranks and steps, equal on every rank.
    """
    plans = [plan_panels(spec, steps) for spec in specs]
    nranks = specs[0].target.grid_shape[0] * specs[0].target.grid_shape[1] if specs else 1
    slot_elems = tuple(max((gs.size for step in plan for gs in step), default=0) for plan in plans)
    slot_base = tuple(int(x) for x in np.cumsum((0, *slot_elems))[:-1])
    pr, pc = specs[0].target.grid_shape if specs else (1, 1)
    my_group = [(me // pc) if spec.axis == 0 else (me % pc) for spec in specs]
    stage = 0
    msgs_of: list[tuple[_exchange.Message, ...]] = []
    mine: list[list[GroupStep | None]] = [[] for _ in specs]
    for k in range(len(steps)):
        staged: dict[int, int] = {}
        msgs: list[_exchange.Message] = []
        for o, plan in enumerate(plans):
            for gs in plan[k]:
                if not gs.receivers:
                    continue
                for sender, off, size, pieces in gs.segments:
                    if sender not in gs.receivers:
                        staged[sender] = staged.get(sender, 0) + size
                    if sender == me or me in gs.receivers:
                        # X[sender's blocks of the panel] -> every receiver of the group
                        pack = (o, pieces) if sender == me else None
                        msgs.append(
                            _exchange.Message(
                                sender, gs.receivers, slot_base[o] + off, size, pack, in_slot=True
                            )
                        )
            gs = plan[k][my_group[o]]
            mine[o].append(gs if me in gs.receivers and gs.hi > gs.lo else None)
        stage = max(stage, *staged.values(), 0)
        msgs_of.append(tuple(msgs))
    eplan = _exchange.Plan(name, me, nranks, tuple(msgs_of), sum(slot_elems), stage)
    return SummaPlan(eplan, slot_base, slot_elems, tuple(tuple(m) for m in mine))


class _PanelKernels:
    """Packs the pieces of a segment from the sender's local matrices (engine.Kernels)."""

    def __init__(self, xp: Any, locals_: Sequence[Any]) -> None:
        self.xp, self.locals = xp, list(locals_)

    def pack(self, msg: _exchange.Message, out: Any) -> None:
        o, pieces = msg.pack
        pack_pieces(self.xp, self.locals[o], pieces, out, 0)

    def unpack(self, msg: _exchange.Message, data: Any) -> None:  # pragma: no cover
        raise AssertionError("SUMMA panels are read in their slot")

    def local(self, msg: _exchange.Message) -> None:  # pragma: no cover
        raise AssertionError("SUMMA panels are read in their slot")


class PanelExchange:
    """The panels of several operands: the SUMMA plan (:func:`summa_plan`) on the one-sided
    engine (:class:`~._exchange.Exchange`; see the module docstring).

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
        Number of slots (1: single buffering).
    grid_rank : int
        This process's rank in the grid (``myrow * Pc + mycol``).
    channel : str
        Name of the engine's pooled workspace (buffer + signals). Exchanges alive at the same
        time (e.g. Cholesky's panels beside its tile exchange) need different channels.

    Panels returned by :meth:`recv` stay valid until :meth:`release` of their step; with
    ``num_stages >= 2`` the panels of step ``k + 1`` may be received before step ``k`` is
    released (look-ahead): unpack buffers are per slot.

    Construction and :meth:`finish` are collective (every process, same order).
    """

    def __init__(
        self,
        backend: Backend,
        name: str,
        specs: Sequence[PanelSpec],
        locals_: Sequence[Any],
        steps: tuple[tuple[int, int], ...],
        dtype: Any,
        num_stages: int,
        grid_rank: int,
        channel: str = _exchange.CHANNEL,
    ) -> None:
        self.backend = backend
        self.name = name
        self.specs = tuple(specs)
        self.steps = steps
        self.nsteps = len(steps)
        self.dtype = np.dtype(dtype)
        self.me = int(grid_rank)
        self.summa = summa_plan(name, self.specs, steps, self.me)
        self._xp = backend.xp
        self.exchange = _exchange.Exchange(
            backend,
            self.summa.plan,
            self.dtype,
            _PanelKernels(self._xp, locals_),
            num_stages,
            channel,
        )
        self.S = self.exchange.S
        self._unpack_bufs: dict[tuple[int, int], Any] = {}  # per (operand, slot)
        self._outgrown: list[Any] = []  # replaced unpack buffers, kept to the end of the exchange

    def send(self, k: int, after: Any = None) -> None:
        """Pack and put this process's segments of step ``k`` (comm stream); ``after``: an
        event the packing waits for."""
        self.exchange.send(k, after)

    def recv(self, k: int) -> list[Panel | None]:
        """Panels of step ``k`` (compute stream); None where this process has no panel."""
        ex = self.exchange
        ex.recv(k)
        s = k % self.S
        out: list[Panel | None] = []
        for o, mine in enumerate(self.summa.mine):
            gs = mine[k]
            if gs is None:
                out.append(None)
                continue
            base = self.summa.slot_base[o]
            rows = gs.hi - gs.lo
            if gs.in_order:
                # the slot is the panel: no copy
                arr = ex.view(k, base, (rows, gs.width))
            else:
                buf = self._unpack_bufs.get((o, s))
                need = rows * gs.width
                if buf is None or buf.size < need:
                    if buf is not None:  # still read by an earlier step's kernels
                        self._outgrown.append(buf)
                    cap = max(self.summa.slot_elems[o], need)
                    # a private (not symmetric) buffer: backend.empty may be collective
                    buf = self._unpack_bufs[o, s] = self._xp.empty((cap,), self.dtype)
                arr = buf[:need].reshape(rows, gs.width)
                slot = ex.view(k, base, (self.summa.slot_elems[o],))
                # slot (senders' segments) -> the panel in local order, zero fill
                self.backend.launch(self.backend.compute, _unpack, self._xp, slot, gs, arr)
            out.append(Panel(gs.lo, gs.hi, arr))
        return out

    def release(self, k: int) -> None:
        """Acknowledge that step ``k``'s panels are consumed (compute stream)."""
        self.exchange.release(k)

    def drop(self) -> None:
        """Forget the pool after a failure on the host (its signal values are unknown)."""
        self.exchange.drop()

    def finish(self) -> None:
        """Drain the streams and end the exchange (collective; see
        :func:`~._exchange.finish`)."""
        self.exchange.finish()


def free_workspace(backend: Backend) -> None:
    """Release the pooled exchange buffers of every channel of ``backend`` (collective)."""
    _exchange.free_workspace(backend)


def run_pipeline(
    backend: Backend,
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
    try:
        begin_pipeline(backend, dtype)
        for k in range(min(ex.S, K)):
            ex.send(k)
        for k in range(K):
            panels = ex.recv(k)
            update(k, panels)
            ex.release(k)
            if k + ex.S < K:
                ex.send(k + ex.S)
    except BaseException:
        ex.drop()  # a host failure mid-pipeline: the signal values are unknown
        raise
    ex.finish()
