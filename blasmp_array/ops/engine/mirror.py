"""Mirrored blocks of a square block-cyclic matrix, in place: ``X[I, J] := X[J, I]^T`` (``^H``
when conjugating) for a chosen set of off-diagonal blocks ``(I, J)``.

The fill of a symmetric result of which only some blocks were computed: the balanced band of
``A.T @ A`` (``ops/blas3/syrk.py``) computes every off-diagonal pair of blocks once, and the
other block of each pair is its mirror. A distributed transpose of the whole matrix
(``redistribute.transpose``) followed by a copy of the blocks needed moves every element twice
(the transpose, then the copy) where this plan moves each wanted block once, from the process
holding its mirror straight into place: about half the matrix for the band, and no second
matrix.

The plan (pure index math, cached): on the one-sided exchange engine (``_exchange.py``), one
message per (sender, receiver) pair and step, the sender's source blocks one after the other,
each packed transposed (on the host through the BLAS's ``?omatcopy``,
``backends/_host_copy.py``); the receiver copies each block into place. A block whose mirror is
on the same process is copied directly (no slot). Steps are runs of consecutive destination
block columns, as many as keep every rank's received plus sent elements of a step within
``memory_budget / num_stages`` (every rank derives them from the same global block list).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...backends._host_copy import assign
from ...backends.base import Backend
from ...layout import BlockCyclicLayout
from . import _exchange as engine
from ._warmup import sample_matrix, warmup_kernels

__all__ = ["mirror_blocks", "MEMORY_BUDGET_BYTES"]

#: bound on one rank's symmetric workspace for the plan (receive plus staging slots of every
#: stage), the same default as ``redistribute.MEMORY_BUDGET_BYTES``
MEMORY_BUDGET_BYTES = 256 * 2**20


@dataclass(frozen=True)
class _Block:
    """One mirrored block: the source ``nr x nc`` at ``(sr, sc)`` of the sender's local
    matrix, the destination ``nc x nr`` at ``(dr, dc)`` of the receiver's."""

    sr: int
    sc: int
    dr: int
    dc: int
    nr: int
    nc: int

    @property
    def size(self) -> int:
        return self.nr * self.nc


def mirror_blocks(
    backend: Backend,
    local: Any,
    layout: BlockCyclicLayout,
    rank: int,
    blocks: Sequence[tuple[int, int]],
    conjugate: bool,
    num_stages: int = 2,
    memory_budget: int = MEMORY_BUDGET_BYTES,
) -> None:
    """``X[I, J] := X[J, I]^T`` (``^H`` when ``conjugate``) for every ``(I, J)`` of
    ``blocks`` (global block indices, ``I != J``, no block both a source and a destination),
    where ``local`` is this rank's local matrix of ``X`` (square blocks, ``layout``) and ranks
    are numbered row-major over ``layout``'s grid. Collective: every rank passes the same
    ``blocks``."""
    if layout.block[0] != layout.block[1] or layout.shape[0] != layout.shape[1]:
        raise ValueError(f"mirror_blocks: needs a square matrix of square blocks, got {layout}")
    dt = np.dtype(local.dtype)
    stages = max(1, int(num_stages))
    plan = _plan(layout, rank, tuple(blocks), dt.itemsize, int(memory_budget), stages)
    kernels = _Kernels(local, bool(conjugate) and dt.kind == "c")
    engine.run_plan(backend, plan, dt, kernels, stages)


def _owner_rank(layout: BlockCyclicLayout, bi: int, bj: int) -> int:
    r, c = layout.block_owner(bi, bj)
    return r * layout.grid_shape[1] + c


def _moves(
    layout: BlockCyclicLayout, blocks: tuple[tuple[int, int], ...]
) -> list[tuple[int, int, int, _Block]]:
    """``(destination block column, sender, receiver, block)`` of every wanted block."""
    out = []
    for bi, bj in blocks:
        if bi == bj:
            raise ValueError(f"mirror_blocks: block ({bi}, {bj}) is on the diagonal")
        sr, sc = layout.local_offset(bj, bi)  # the source: the mirror block (J, I)
        dr, dc = layout.local_offset(bi, bj)
        nr, nc = layout.block_extent(bj, bi)
        sender, receiver = _owner_rank(layout, bj, bi), _owner_rank(layout, bi, bj)
        out.append((bj, sender, receiver, _Block(sr, sc, dr, dc, nr, nc)))
    out.sort(key=lambda m: m[0])
    return out


def _steps(
    moves: list[tuple[int, int, int, _Block]], nranks: int, cap: int
) -> list[list[tuple[int, int, _Block]]]:
    """Runs of whole destination block columns whose remote elements sent plus received by
    any rank stay within ``cap`` (a column alone may exceed it)."""
    steps: list[list[tuple[int, int, _Block]]] = []
    step: list[tuple[int, int, _Block]] = []
    load = np.zeros(nranks, dtype=np.int64)
    for col in sorted({m[0] for m in moves}):
        column = [(s, r, blk) for j, s, r, blk in moves if j == col]
        extra = np.zeros(nranks, dtype=np.int64)
        for s, r, blk in column:
            if s != r:
                extra[s] += blk.size
                extra[r] += blk.size
        if step and (load + extra).max() > cap:
            steps.append(step)
            step, load = [], np.zeros(nranks, dtype=np.int64)
        step.extend(column)
        load += extra
    if step:
        steps.append(step)
    return steps


@functools.lru_cache(maxsize=16)
def _plan(
    layout: BlockCyclicLayout,
    me: int,
    blocks: tuple[tuple[int, int], ...],
    itemsize: int,
    budget: int,
    stages: int,
) -> engine.Plan:
    """This rank's plan (pure; equal slot and staging sizes on every rank)."""
    nranks = layout.grid_shape[0] * layout.grid_shape[1]
    cap = max(1, budget // (itemsize * stages))
    steps, slot_elems, stage_elems = [], 0, 0
    for step in _steps(_moves(layout, blocks), nranks, cap):
        by_pair: dict[tuple[int, int], list[_Block]] = {}
        for s, r, blk in step:
            by_pair.setdefault((s, r), []).append(blk)
        fill = np.zeros(nranks, dtype=np.int64)
        stage = np.zeros(nranks, dtype=np.int64)
        msgs = []
        for (s, r), blks in sorted(by_pair.items()):
            size = sum(b.size for b in blks)
            off = 0
            if s != r:
                off = int(fill[r])
                fill[r] += size
                stage[s] += size
            if me in (s, r):
                # X[J, I]^T blocks of sender s -> X[I, J] blocks of receiver r
                msgs.append(engine.Message(s, (r,), off, size, tuple(blks), tuple(blks)))
        slot_elems, stage_elems = (
            max(slot_elems, int(fill.max())),
            max(stage_elems, int(stage.max())),
        )
        steps.append(tuple(msgs))
    return engine.Plan("mirror_blocks", me, nranks, tuple(steps), slot_elems, stage_elems)


class _Kernels:
    """Packs the source blocks transposed, copies them into place (engine.Kernels)."""

    def __init__(self, x: Any, conjugate: bool) -> None:
        self.x, self.conj = x, conjugate

    def _source(self, b: _Block) -> Any:
        return self.x[b.sr : b.sr + b.nr, b.sc : b.sc + b.nc]

    def _destination(self, b: _Block) -> Any:
        return self.x[b.dr : b.dr + b.nc, b.dc : b.dc + b.nr]

    def pack(self, msg: engine.Message, out: Any) -> None:
        o = 0
        for b in msg.pack:
            assign(out[o : o + b.size].reshape(b.nc, b.nr), self._source(b).T, self.conj)
            o += b.size

    def unpack(self, msg: engine.Message, data: Any) -> None:
        o = 0
        for b in msg.unpack:
            self._destination(b)[...] = data[o : o + b.size].reshape(b.nc, b.nr)
            o += b.size

    def local(self, msg: engine.Message) -> None:
        for b in msg.pack:
            assign(self._destination(b), self._source(b).T, self.conj)


@warmup_kernels
def _warm_mirror(backend: Backend, xp: Any, dtype: np.dtype) -> None:
    """:class:`_Kernels`' pack, unpack and local copy once each, with and without
    conjugation, on a 6 x 6 matrix of 3 x 3 blocks (a ragged 3 x 2 one included)."""
    for conj in (False, True):
        a = sample_matrix(xp, dtype, 6)
        k = _Kernels(a, conj)
        blocks = (_Block(3, 0, 0, 3, 3, 3), _Block(0, 4, 4, 0, 3, 2))
        msg = engine.Message(0, (1,), 0, 15, blocks, blocks)
        flat = xp.zeros(15, a.dtype)
        k.pack(msg, flat)
        k.unpack(msg, flat)
        k.local(msg)
