"""``op(A) @ x`` on several processes through the one-sided exchange: the device route of
:mod:`ops.blas3.matvec`, where the host route's two round trips through host memory (device to
host, ``Allgatherv``, host to device, twice) cost more than the product.

Communication protocol: one :class:`~ops.engine._exchange.Exchange` of two steps in two slots on
the default channel; the engine's signals (``ready[s, p]`` on each receiver, incremented by
sender ``p``'s ``put_signal``, waited for on the compute stream); no ack, since no slot is
reused within the exchange.

* **Step 0, the vector.** Every process that stores elements of ``x`` (the processes of the
  vector's process column) packs its local elements, one contiguous piece, and puts it to every
  process whose columns of ``op(A)`` meet them; the pieces lie in the slot in rank order, the
  same offsets on every receiver. A sender among its own receivers packs into its own slot.
  A receiver waits for its senders, then gathers the operand of its product from the slot (a
  view where its elements are one run of it, as on a square grid with equal blocks).
* **The product.** One local ``gemv`` on the compute stream gives the partial result: the rows
  of ``op(A) x`` this process stores, summed over its own columns only. ``release(0)``.
* **Step 1, the partial results.** Each process that made a partial packs it (comm stream,
  after the ``gemv``'s event) and puts it to every process that owns result elements it covers
  (the result is a new vector: process column 0, in blocks of ``A``'s block along the result);
  an owner waits for them and sums each element's contributions in grid order along the summed
  axis, so the sum does not depend on timing. The result vector is allocated (a collective
  allocation of symmetric memory, with its host ``allgather``) after the products and step 1
  are enqueued, so that the host's part of it overlaps the device's products.
* ``finish()``: both streams drained and one host ``allgather`` of the outcome, the barrier that
  keeps the next call's puts away from a slot a slower process still reads.

A rank's part of the plan comes from the layouts alone (cached per layouts and rank), so every
rank derives the same slot and staging sizes and the same message offsets.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...array import BlockCyclicArray
from ...layout import BlockCyclicLayout, local_indices, numroc
from ..engine._exchange import CallKernels, Exchange, Message, Plan, positions_index
from ..engine._vectors import new_vector
from ..engine._warmup import begin_pipeline, sample_matrix, warmup_kernels
from ._gemv import gemv

__all__ = ["matvec_exchange"]


def matvec_exchange(a: BlockCyclicArray, col: BlockCyclicArray, op: str) -> BlockCyclicArray:
    """``op(a) @ x`` as a new vector (``op`` 'N', 'T', 'C' or 'R' over ``a``'s storage; ``col``
    the ``n x 1`` column face of ``x``, not a view, on ``a``'s grid). Collective. ``a`` and
    ``x`` must be non-empty along the summed axis and the result non-empty."""
    g, lay, be = a.grid, a.layout, a.grid.backend
    xp = be.xp
    rows = op in ("N", "R")
    out_axis = 0 if rows else 1
    dt = np.dtype(a.dtype)
    route = _route(lay, rows, col.layout, g.rank)
    part = xp.empty(route.nout, dt) if route.x_take is not None else None
    kernels = _Kernels(col._data.reshape(-1), part)
    ex = Exchange(be, route.plan, dt, kernels, num_stages=2)
    slot = (route.plan.slot_elems,)
    try:
        begin_pipeline(be, dt)
        comp = be.compute
        ex.send(0)
        ex.recv(0)
        made = None
        if part is not None:
            be.launch(comp, _product, xp, a._data, op, ex.view(0, 0, slot), route.take(xp), part)
            made = be.record_event(comp)
        ex.release(0)
        ex.send(1, after=made)
        # the result's collective allocation while the device computes the products
        out = new_vector(lay.shape[out_axis], lay.block[out_axis], g, dt)
        ex.recv(1)
        if out._data.size:
            y = out._data.reshape(-1)
            be.launch(comp, _sum_terms, xp, y, ex.view(1, 0, slot), route.terms(xp))
        ex.release(1)
    except BaseException:
        ex.drop()
        raise
    ex.finish()
    return out


class _Kernels(CallKernels):
    """The engine's kernels: every message is read in its slot (``CallKernels``), and a pack
    payload names which of this call's arrays it sends (the cached plan holds no arrays)."""

    def __init__(self, x: Any, part: Any) -> None:
        self.x, self.part = x, part

    def pack(self, msg: Message, out: Any) -> None:
        out[...] = self.x if msg.pack == "x" else self.part


def _product(xp: Any, a: Any, op: str, slot: Any, take: Any, part: Any) -> None:
    """``part := op(a) @ slot[take]`` (compute stream)."""
    gemv(xp, a, op, slot[take], part)


def _sum_terms(xp: Any, out: Any, slot: Any, terms: tuple[Any, ...]) -> None:
    """``out := slot[terms[0]] + slot[terms[1]] + ...`` in that order (compute stream)."""
    if len(terms) == 1:
        out[...] = slot[terms[0]]
        return
    xp.add(slot[terms[0]], slot[terms[1]], out=out)
    for t in terms[2:]:
        out += slot[t]


@dataclass(frozen=True)
class _Route:
    """This rank's part of one product's data movement (see the module docstring).

    ``x_take``: positions in slot 0 of the operand of my product, in the local order of my
    columns of ``op(A)``, or None where I make no product. ``y_terms``: for each process
    coordinate along the summed axis that makes products, in grid order, the positions in
    slot 1 of its contribution to each of my result elements (empty where I own none).
    ``nout``: the length of my partial result."""

    plan: Plan
    x_take: np.ndarray | None
    y_terms: tuple[np.ndarray, ...]
    nout: int
    _device: dict[Any, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def take(self, xp: Any) -> Any:
        """``x_take`` as ``xp`` indexes it: a slice where it is one run, else an index array
        (uploaded once)."""
        return self._index(xp, "take", (self.x_take,))[0]

    def terms(self, xp: Any) -> tuple[Any, ...]:
        """``y_terms`` as ``xp`` indexes them (as :meth:`take`)."""
        return self._index(xp, "terms", self.y_terms)

    def _index(self, xp: Any, key: str, positions: tuple[Any, ...]) -> tuple[Any, ...]:
        got = self._device.get((key, id(xp)))
        if got is None:
            got = self._device[key, id(xp)] = tuple(positions_index(p, xp) for p in positions)
        return got


@dataclass(frozen=True)
class _Axes:
    """``A``'s distribution along the summed axis (``k``: the columns of ``op(A)``) and along
    the result (``o``): length, block, process count and source process of each, and how a
    rank sits on the grid."""

    rows: bool  # the result runs along A's rows (op 'N' or 'R')
    pc: int  # process columns of the grid
    n: int
    kb: int
    kp: int
    ksrc: int
    m: int
    ob: int
    op: int
    osrc: int

    @classmethod
    def of(cls, lay: BlockCyclicLayout, rows: bool) -> _Axes:
        o, k = (0, 1) if rows else (1, 0)
        return cls(
            rows,
            lay.grid_shape[1],
            lay.shape[k],
            lay.block[k],
            lay.grid_shape[k],
            lay.src[k],
            lay.shape[o],
            lay.block[o],
            lay.grid_shape[o],
            lay.src[o],
        )

    def k_coord(self, rank: int) -> int:
        return divmod(rank, self.pc)[1 if self.rows else 0]

    def o_coord(self, rank: int) -> int:
        return divmod(rank, self.pc)[0 if self.rows else 1]

    def rank_at(self, o_coord: Any, k_coord: Any) -> Any:
        r, c = (o_coord, k_coord) if self.rows else (k_coord, o_coord)
        return r * self.pc + c


@functools.lru_cache(maxsize=64)
def _route(lay: BlockCyclicLayout, rows: bool, xl: BlockCyclicLayout, me: int) -> _Route:
    """The plan of ``op(A) @ x`` for rank ``me`` (``rows``: the result runs along ``A``'s rows,
    ``op`` 'N' or 'R'); ``xl`` is the layout of ``x``'s column face."""
    ax = _Axes.of(lay, rows)
    nranks = lay.grid_shape[0] * ax.pc
    # who makes a product: a process with columns of op(A) and rows of the result
    nk = [numroc(ax.n, ax.kb, t, ax.kp, ax.ksrc) for t in range(ax.kp)]
    nout = [numroc(ax.m, ax.ob, ax.o_coord(s), ax.op, ax.osrc) for s in range(nranks)]
    makes = [bool(nk[ax.k_coord(s)] and nout[s]) for s in range(nranks)]
    x_size, x_to, x_take = _vector_step(ax, xl, makes, me)
    y_size = [nout[s] if makes[s] else 0 for s in range(nranks)]
    y_to, y_terms = _partial_step(
        ax, lay.grid_shape[0], y_size, [t for t in range(ax.kp) if nk[t]], me
    )
    steps = []
    stage = 0
    for tag, size, receivers in (("x", x_size, x_to), ("y", y_size, y_to)):
        off = np.concatenate(([0], np.cumsum(size)))
        step = []
        for s in range(nranks):
            if not receivers[s] or not size[s]:
                continue
            if s not in receivers[s]:
                stage = max(stage, size[s])  # staged: one message per sender and step
            if s == me or me in receivers[s]:
                step.append(Message(s, tuple(receivers[s]), int(off[s]), size[s], tag, None, True))
        steps.append(tuple(step))
    slot = max(sum(x_size), sum(y_size))
    plan = Plan("matvec", me, nranks, tuple(steps), slot, stage)
    return _Route(plan, x_take, y_terms, y_size[me])


def _vector_step(
    ax: _Axes, xl: BlockCyclicLayout, makes: list[bool], me: int
) -> tuple[list[int], list[list[int]], np.ndarray | None]:
    """Step 0: every rank's piece of ``x`` (its size; the pieces lie in the slot in rank
    order), the receivers of each piece, and my operand's positions in the slot (None where I
    make no product)."""
    nranks = len(makes)
    xb, xpr, xsrc, xcol = xl.block[0], xl.grid_shape[0], xl.src[0], xl.src[1]
    size = [int(np.prod(xl.local_shape(*divmod(s, ax.pc)))) for s in range(nranks)]
    off = np.concatenate(([0], np.cumsum(size)))
    receivers: list[list[int]] = [[] for _ in range(nranks)]
    take = None
    for q in range(nranks):
        if not makes[q]:
            continue
        need = local_indices(ax.n, ax.kb, ax.k_coord(q), ax.kp, ax.ksrc)  # my columns of op(A)
        owner = ((xsrc + need // xb) % xpr) * ax.pc + xcol
        for s in np.unique(owner):
            receivers[int(s)].append(q)
        if q == me:
            take = off[owner] + (need // (xb * xpr)) * xb + need % xb
    return size, receivers, take


def _partial_step(
    ax: _Axes, pr: int, size: list[int], summed: list[int], me: int
) -> tuple[list[list[int]], tuple[np.ndarray, ...]]:
    """Step 1: the receivers of each rank's partial result (``size[s]`` elements, in the slot
    in rank order), and, for each process coordinate along the summed axis that makes products
    (``summed``, grid order), the positions in the slot of its contribution to each of my
    result elements (empty where I own none). The result's owners are process column 0, in
    blocks of ``A``'s block along the result."""
    off = np.concatenate(([0], np.cumsum(size)))
    receivers: list[list[int]] = [[] for _ in size]
    mine: tuple[np.ndarray, ...] = ()
    for r in range(pr):
        owned = local_indices(ax.m, ax.ob, r, pr, 0)
        if not owned.size:
            continue
        o = r * ax.pc
        holder = (ax.osrc + owned // ax.ob) % ax.op  # the coordinate of A's rows of element i
        local = (owned // (ax.ob * ax.op)) * ax.ob + owned % ax.ob
        terms = []
        for t in summed:
            s = ax.rank_at(holder, t)
            for u in np.unique(s):
                receivers[int(u)].append(o)
            terms.append(off[s] + local)
        if o == me:
            mine = tuple(terms)
    return receivers, mine


@warmup_kernels
def _warm_matvec_exchange(backend: Any, xp: Any, dtype: Any) -> None:
    """:func:`_product`'s gather (a slice and an index array), :func:`_sum_terms` with both, and
    the pack's copy."""
    a = sample_matrix(xp, dtype)
    slot = xp.ones(2 * a.shape[1], dtype)
    part = xp.empty(a.shape[0], dtype)
    idx = xp.asarray(np.arange(a.shape[1], dtype=np.int64)[::-1].copy())
    for take in (slice(0, a.shape[1]), idx):
        _product(xp, a, "N", slot, take, part)
        for terms in ((take,), (take, take), (take, take, take)):
            _sum_terms(xp, part, slot, terms)
    _Kernels(slot[: a.shape[0]], part).pack(Message(0, (0,), 0, 0, "x"), part)
