"""One-step exchanges of whole blocks between ranks, listed as ``(sender, receivers, size, pack,
unpack)`` entries, and the sum of partial products in a fixed order: the communication of the QR
operators (``ops/lapack/_householder.py``: the panel gather, the reflectors along the grid rows and
the column sums of ``V^H C``; ``ops/lapack/_cholqr.py``: the sum of the Gram matrices), on the
one-sided exchange engine (:mod:`ops.engine._exchange`).

Every rank lists every entry, in the same order (they come from the layout only), so the plan's
slot and staging sizes, computed here as the maxima over all ranks, are the same everywhere and
an empty list is empty everywhere. ``pack`` (on the sender) is a 2-D, possibly strided, view of
what to send; ``unpack`` (on a receiver) is ``(dst, rows)``: the message lands in ``dst[rows]``
(a row run, an index array, or one matrix of a stack); None on the sender itself when its own
part is already where it belongs.

Signal protocol: the engine's (``ops/engine/_exchange.py``): one step, one slot, ``ready[0, p]`` on
each receiver incremented by sender ``p``'s ``put_signal`` and waited for on the compute stream;
no ack (no slot is reused); ``finish()`` drains both streams and makes one host ``allgather`` of
the outcome, which separates consecutive exchanges.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...backends._host_copy import put_rows
from ...backends.base import Backend
from ._exchange import Message, Plan, run_plan
from ._warmup import warmup_kernels

__all__ = ["Entry", "MessageKernels", "one_step_plan", "exchange", "pack", "unpack", "sum_stack"]

#: ``(sender, receivers, size, pack, unpack)``
Entry = tuple[int, tuple[int, ...], int, Any, Any]


class MessageKernels:
    """The engine's kernels for :data:`Entry` payloads (see the module docstring)."""

    def pack(self, msg: Message, out: Any) -> None:
        pack(out, msg.pack)

    def unpack(self, msg: Message, data: Any) -> None:
        dst, rows = msg.unpack
        unpack(dst, rows, data)

    def local(self, msg: Message) -> None:
        if msg.unpack is not None:
            dst, rows = msg.unpack
            put_rows(dst, rows, msg.pack)


def pack(out: Any, src: Any) -> None:
    """The (strided) 2-D ``src`` into the flat ``out``."""
    out.reshape(src.shape)[...] = src


def unpack(dst: Any, rows: Any, data: Any) -> None:
    """The flat ``data`` into ``dst[rows]`` (``rows`` an int: one matrix of a stack)."""
    if isinstance(rows, int):
        dst[rows] = data.reshape(dst.shape[1:])
    else:
        put_rows(dst, rows, data.reshape((-1, *dst.shape[1:])))


def sum_stack(out: Any, stack: Any) -> None:
    """``out`` := ``stack[0] + stack[1] + ...`` in that order (the same bits on every rank that
    holds the same stack)."""
    out[...] = stack[0]
    for i in range(1, stack.shape[0]):
        out += stack[i]


def one_step_plan(name: str, entries: list[Entry], me: int, p: int) -> Plan:
    """The one-step :class:`~ops.engine._exchange.Plan` of ``entries`` for rank ``me``: offsets
    packed per receiver, slot and staging sizes the maxima over all ranks."""
    fill = [0] * p
    stage = [0] * p
    mine = []
    for sender, receivers, size, src, dst in entries:
        remote = [q for q in receivers if q != sender]
        off = 0
        if remote and size:
            off = max(fill[q] for q in remote)
            for q in remote:
                fill[q] = off + size
            stage[sender] += size
        if size and (sender == me or me in receivers):
            mine.append(
                Message(
                    sender,
                    receivers,
                    off,
                    size,
                    src if sender == me else None,
                    dst if me in receivers else None,
                )
            )
    return Plan(name, me, p, (tuple(mine),), max(fill), max(stage))


def exchange(
    be: Backend, grid: Any, name: str, entries: list[Entry], dtype: Any, after: Any
) -> None:
    """Run the one-step plan of ``entries`` (collective; nothing when the list, the same on
    every rank, is empty); the packing waits for the event ``after`` (or None)."""
    if entries:
        plan = one_step_plan(name, entries, grid.rank, grid.size)
        run_plan(be, plan, dtype, MessageKernels(), 1, after=after)


@warmup_kernels
def _sample(backend: Backend, xp: Any, dtype: np.dtype) -> None:
    """Packs of strided views, unpacks into row runs, index arrays (C- and Fortran-ordered
    targets) and stacks, and the stack's sum."""
    src = xp.zeros((5, 4), dtype)
    flat = xp.zeros(8, dtype)
    pack(flat[:6], src[1:3, 1:])
    pack(flat, src[1:3])
    panel = xp.zeros((5, 4), dtype, order="F")
    idx = xp.asarray(np.array([0, 2]))
    unpack(panel, slice(1, 3), flat)
    unpack(panel, idx, flat)
    unpack(src, slice(0, 2), flat)
    stack = xp.zeros((2, 2, 3), dtype)
    unpack(stack, 1, flat[:6])
    sum_stack(stack[0].copy(), stack)
    stack[0] = src[:2, :3]  # a sender's own part, in place
