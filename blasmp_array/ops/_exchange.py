"""The one-sided exchange engine: a *plan* of steps of messages moved through symmetric slots.

What a plan is
--------------
A :class:`Plan` is this rank's view of a data movement: ``steps[k]`` lists the
:class:`Message` s of step ``k`` that this rank sends or receives. A message goes from one
``sender`` to one or more ``receivers`` (several: the same data, e.g. a SUMMA panel for a whole
process row, packed once and put to each); it occupies ``[offset, offset + size)`` of every
receiver's *receive slot*. ``pack`` and ``unpack`` are opaque payloads (source pieces, index
selections) that the operator's :class:`Kernels` interpret: ``pack(msg, out)`` writes the
message into a contiguous staging range on the sender, ``unpack(msg, data)`` consumes it from
the receive slot on the receiver, ``local(msg)`` delivers a message to its own sender when the
sender is among its receivers, without any slot (a local copy). ``slot_elems`` and
``stage_elems`` (the largest receive slot and send staging area of any rank at any step) are
the same on every rank, because every rank derives them from the same global quantities; they
size the symmetric workspace. Plans are pure data: an operator builds (and caches) them;
:class:`Exchange` runs them.

Workspace
---------
No third pool: the engine uses the pooled symmetric buffer (per dtype) and signal set of
``ops/panels.py`` (``panels._workspace(backend, CHANNEL)``, the SUMMA channel), with its
*signal bases*: every signal word is a monotonic counter, never reset; each process knows
exactly what an exchange added to the words it owns (every increment is waited for) and keeps
it as the base the next exchange's expected values are offset by. The buffer holds
``[S receive slots of slot_elems | S staging slots of stage_elems]`` (``S = num_stages``).
One exchange at a time uses the channel (the engine is called from the host between
operators, never from inside a pipeline). A plan that moves nothing between ranks (one rank,
or only local messages) touches no workspace at all.

Signals: one discipline
-----------------------
``2 * S * P`` words (``P`` ranks), every word owned (waited on) by the process it lives on and
written by exactly one peer, always with ``'add'`` of 1:

* ``ready[s, p]`` (index ``s * P + p``) on receiver ``q``: written by sender ``p`` with the
  ``put_signal`` of each message of a step ``k = s (mod S)`` into ``q``'s slot ``s`` (the
  signal is visible only after the data). ``q`` waits on its compute stream until the word
  reaches the cumulative number of messages ``p`` put into slot ``s`` up to step ``k``, then
  unpacks ``p``'s messages of step ``k``.
* ``ack[s, q]`` (index ``S * P + s * P + q``) on sender ``p``: written by receiver ``q`` once
  per step ``k + S`` at which ``p`` sends to ``q``, after ``q`` has unpacked step ``k``
  (``release(k)``, compute stream): "my slot ``s`` is free". ``p`` waits on its comm stream,
  before the puts of step ``k + S``, until the word reaches the number of steps
  ``S <= k' <= k + S, k' = s (mod S)`` at which it sends to ``q``.

Per-peer words (not one counter per slot) make each wait name the one peer it waits for and
keep a fast receiver's ack of step ``k + S`` from satisfying a wait meant for step ``k``.

Streams: sends (pack, ack waits, puts) on ``comm``; local copies, ready waits, unpacks and acks
on ``compute``. The host enqueues ``send(0 .. S-1)``, then for each ``k``: ``recv(k)``,
``release(k)``, ``send(k + S)``; it never synchronises inside the loop.

When a slot is reused: receive slot ``s`` of ``q`` is written at step ``k + S`` only after
``q``'s ack for step ``k``, which ``q`` sends after it waited for and unpacked all of step
``k`` (hence every earlier step in slot ``s``). The staging slot ``s`` of a sender is
overwritten at step ``k + S`` by its comm stream after that stream issued the puts of step
``k`` and a ``quiet`` (puts complete, so their sources may be overwritten).

Why it cannot deadlock: a wait of step ``k`` depends only on work of steps ``<= k`` (ready
waits on the puts of step ``k``; ack waits of step ``k`` on the unpacks of step ``k - S``), and
each stream runs its steps in increasing ``k``; by induction over ``k`` every wait is released.
Ready counters cannot run ahead (step ``k + S`` data needs the receiver's ack of step ``k``).

End of an exchange and errors
-----------------------------
:meth:`Exchange.finish` synchronises (every put was waited for by its receiver and every ack
by its sender, so nothing is in flight), then all ranks exchange their outcome with one host
``allgather`` (small metadata; it doubles as the barrier that keeps the next exchange's first
puts, which need no ack, from reaching a slot a slower process still reads). If any rank
failed -- e.g. a wait timed out (:class:`~blasmp_array.backends.base.SignalTimeoutError` naming
the operator, step, signal and peer) -- every rank drops the pool (its counters are unknown)
and raises the same error kind with every rank's message, so no rank is left waiting in a
later collective.

Later users
-----------
SUMMA panels (``ops/panels.py``) map onto this as one message per segment with the group's
receivers and ``unpack`` = the panel assembly (the update runs between ``recv`` and
``release``); TRSM's slot channel as steps whose sends wait an event (``send(k, after=...)``).
They still run their own exchanges today; redistribution (``ops/redistribute.py``) is the first
plan over this engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..backends.base import SignalTimeoutError
from . import panels
from ._warmup import begin_pipeline

__all__ = ["CHANNEL", "Exchange", "Kernels", "Message", "Plan", "run_plan"]

#: the pooled workspace channel of ``ops/panels.py`` this engine uses
CHANNEL = "summa"

#: Test hook: ``(plan name, step, sender rank)``; that sender puts its first remote message of
#: that step without the ready signal, so that its receiver's wait must time out.
_DROP_SIGNAL: tuple[str, int, int] | None = None


@dataclass(frozen=True)
class Message:
    """One message: ``size`` elements from ``sender`` to ``receivers``, at element ``offset``
    of each receiver's slot. ``pack``/``unpack`` are the operator's payloads (sender side /
    receiver side); a sender listed among the receivers gets it by ``Kernels.local``."""

    sender: int
    receivers: tuple[int, ...]
    offset: int
    size: int
    pack: Any = None
    unpack: Any = None


@dataclass(frozen=True)
class Plan:
    """This rank's part of a data movement (see the module docstring).

    ``name`` names the operator in diagnostics; ``steps[k]`` are the messages of step ``k``
    this rank sends or receives; ``slot_elems``/``stage_elems`` are equal on every rank.
    """

    name: str
    rank: int
    nranks: int
    steps: tuple[tuple[Message, ...], ...]
    slot_elems: int
    stage_elems: int

    @property
    def remote(self) -> bool:
        """Whether any rank moves anything to another rank (equal on every rank)."""
        return self.slot_elems > 0 or self.stage_elems > 0


class Kernels(Protocol):
    """The operator's local data movement, run on a stream by the engine.

    Every device kernel ``pack``/``unpack``/``local`` may launch must be warmed by a sample
    registered in the operator's module (``@warmup_kernels``, see ``ops/_warmup.py``): the
    engine's :func:`begin_pipeline` runs it before the first signal wait.
    """

    def pack(self, msg: Message, out: Any) -> None:
        """Write ``msg`` into the contiguous 1-D ``out`` (``msg.size`` elements; comm stream)."""

    def unpack(self, msg: Message, data: Any) -> None:
        """Consume ``msg`` from the contiguous 1-D ``data`` (compute stream)."""

    def local(self, msg: Message) -> None:
        """Move ``msg``, sent to this rank by itself, without a slot (compute stream)."""


class Exchange:
    """Runs a :class:`Plan` with ``num_stages`` slots (construction and :meth:`finish` are
    collective). :func:`run_plan` is the usual driver."""

    def __init__(
        self,
        backend: Any,
        plan: Plan,
        dtype: Any,
        kernels: Kernels,
        num_stages: int = 2,
        channel: str = CHANNEL,
    ) -> None:
        if int(num_stages) < 1:
            raise ValueError(f"num_stages must be >= 1, got {num_stages}")
        self.backend = backend
        self.plan = plan
        self.name = plan.name
        self.dtype = np.dtype(dtype)
        self.kernels = kernels
        self.S = S = int(num_stages)
        self.P = P = int(plan.nranks)
        self.me = me = int(plan.rank)
        self.channel = channel
        self.nsteps = K = len(plan.steps)

        # per-step schedule of this rank
        self._locals: list[list[Message]] = [[] for _ in range(K)]
        self._sends: list[list[tuple[Message, int, list[int]]]] = [[] for _ in range(K)]
        self._recvs: list[list[tuple[int, int, list[Message]]]] = [[] for _ in range(K)]
        self._ack_need: list[list[tuple[int, int]]] = [[] for _ in range(K)]
        self._ack_to: list[list[int]] = [[] for _ in range(K)]
        ready_total: dict[tuple[int, int], int] = {}  # (slot, sender) -> messages so far
        ack_total: dict[tuple[int, int], int] = {}  # (slot, receiver) -> acks so far
        senders_of: list[list[int]] = []
        for k, step in enumerate(plan.steps):
            s = k % S
            stage_off = 0
            by_sender: dict[int, list[Message]] = {}
            to: set[int] = set()
            for msg in step:
                remote = [q for q in msg.receivers if q != me]
                if msg.sender == me:
                    if me in msg.receivers:
                        self._locals[k].append(msg)
                    if remote:
                        if stage_off + msg.size > plan.stage_elems:
                            raise ValueError(f"{self.name}: step {k} overflows the staging slot")
                        self._sends[k].append((msg, stage_off, remote))
                        stage_off += msg.size
                        to.update(remote)
                elif me in msg.receivers:
                    if msg.offset + msg.size > plan.slot_elems:
                        raise ValueError(f"{self.name}: step {k} overflows the receive slot")
                    by_sender.setdefault(msg.sender, []).append(msg)
            for p in sorted(by_sender):
                key = (s, p)
                ready_total[key] = ready_total.get(key, 0) + len(by_sender[p])
                self._recvs[k].append((p, ready_total[key], by_sender[p]))
            senders_of.append(sorted(by_sender))
            if k >= S:
                for q in sorted(to):
                    key = (s, q)
                    ack_total[key] = ack_total.get(key, 0) + 1
                    self._ack_need[k].append((q, ack_total[key]))
        for k in range(K - S):
            self._ack_to[k] = senders_of[k + S]
        self._ready_total = ready_total
        self._ack_total = ack_total

        self._buf: Any = None
        self._sig: Any = None
        self._base: np.ndarray = np.zeros(0, dtype=np.int64)
        if plan.remote:
            ws = panels._workspace(backend, channel)
            self._slot0 = 0
            self._stage0 = S * plan.slot_elems
            self._buf = ws.buffer(self.dtype, S * (plan.slot_elems + plan.stage_elems))
            self._sig, self._base = ws.signals(2 * S * P)
        self._finished = False

    # -- signal words ---------------------------------------------------------------------
    def _ready(self, s: int, sender: int) -> int:
        return s * self.P + sender

    def _ack(self, s: int, receiver: int) -> int:
        return (self.S + s) * self.P + receiver

    # -- protocol -------------------------------------------------------------------------
    def send(self, k: int, after: Any = None) -> None:
        """Pack and put this rank's messages of step ``k`` (comm stream); ``after``: an event
        the packing must wait for (data produced during the exchange)."""
        b, comm = self.backend, self.backend.comm_stream
        sends = self._sends[k]
        if after is not None:
            b.wait_event(comm, after)
        if not sends:
            return
        S, s = self.S, k % self.S
        arr = self._buf.array
        stage = self._stage0 + s * self.plan.stage_elems
        if k >= S:
            b.quiet(comm)  # the puts of step k - S read staging slot s: complete them first
        for msg, off, _ in sends:
            # my part of the message -> staging slot s
            b.launch(comm, self.kernels.pack, msg, arr[stage + off : stage + off + msg.size])
        for q, count in self._ack_need[k]:
            idx = self._ack(s, q)
            b.signal_wait(
                self._sig,
                idx,
                int(self._base[idx]) + count,
                comm,
                what=f"{self.name} step {k}: ack[slot {s}, receiver {q}]",
                peer=q,
            )
        slot = self._slot0 + s * self.plan.slot_elems
        drop = _DROP_SIGNAL == (self.name, k, self.me)
        for msg, off, remote in sends:
            src = arr[stage + off : stage + off + msg.size]
            for q in remote:
                # staging slot s -> slot s of q, then ready[s, me] on q
                if drop:
                    b.put(self._buf, slot + msg.offset, src, q, comm)
                    drop = False
                    continue
                idx = self._ready(s, self.me)
                b.put_signal(self._buf, slot + msg.offset, src, q, self._sig, idx, 1, "add", comm)

    def recv(self, k: int) -> None:
        """Local copies, then wait for and unpack each sender's messages of step ``k``
        (compute stream)."""
        b, comp = self.backend, self.backend.compute
        for msg in self._locals[k]:
            b.launch(comp, self.kernels.local, msg)
        if not self._recvs[k]:
            return
        s = k % self.S
        arr = self._buf.array
        slot = self._slot0 + s * self.plan.slot_elems
        for p, count, msgs in self._recvs[k]:
            idx = self._ready(s, p)
            b.signal_wait(
                self._sig,
                idx,
                int(self._base[idx]) + count,
                comp,
                what=f"{self.name} step {k}: ready[slot {s}, sender {p}]",
                peer=p,
            )
            for msg in msgs:
                # slot s -> my part of the result
                start = slot + msg.offset
                b.launch(comp, self.kernels.unpack, msg, arr[start : start + msg.size])

    def release(self, k: int) -> None:
        """Slot ``k % S`` is consumed: ack the senders of step ``k + S`` (compute stream)."""
        b, comp = self.backend, self.backend.compute
        s = k % self.S
        for p in self._ack_to[k]:
            b.signal_op(self._sig, self._ack(s, self.me), 1, p, "add", comp)

    def finish(self) -> None:
        """Drain the streams; agree on the outcome over all ranks (collective); advance the
        signal bases, or drop the pool and raise the same error kind on every rank."""
        b = self.backend
        if self._finished:
            return
        self._finished = True
        error: BaseException | None = None
        try:
            b.synchronize()
        except Exception as exc:  # noqa: BLE001 - re-raised below, on every rank
            error = exc
        mine = None if error is None else (type(error).__name__, str(error))
        outcomes = b.allgather(mine)
        failed = [(r, o) for r, o in enumerate(outcomes) if o is not None]
        if failed:
            if self.plan.remote:
                # the counters are unknown now: never reuse this pool (on every rank)
                panels._WORKSPACES.pop((id(b), self.channel), None)
            text = "; ".join(f"rank {r}: {kind}: {msg}" for r, (kind, msg) in failed)
            kind = (
                SignalTimeoutError
                if any(k == SignalTimeoutError.__name__ for _, (k, _) in failed)
                else RuntimeError
            )
            raise kind(f"{self.name} failed on rank(s) {[r for r, _ in failed]}: {text}") from (
                error
            )
        for (s, p), total in self._ready_total.items():
            self._base[self._ready(s, p)] += total
        for (s, q), total in self._ack_total.items():
            self._base[self._ack(s, q)] += total


def run_plan(backend: Any, plan: Plan, dtype: Any, kernels: Kernels, num_stages: int = 2) -> None:
    """Run ``plan`` to completion (collective): prefetch ``num_stages`` steps, then
    recv / release / send; returns after :meth:`Exchange.finish`."""
    dt = np.dtype(dtype)
    ex = Exchange(backend, plan, dt, kernels, num_stages)
    K = ex.nsteps
    begin_pipeline(backend, dt)
    for k in range(min(ex.S, K)):
        ex.send(k)
    for k in range(K):
        ex.recv(k)
        ex.release(k)
        if k + ex.S < K:
            ex.send(k + ex.S)
    ex.finish()


def messages_of(plan: Plan) -> Sequence[Message]:
    """Every message of ``plan`` (for tests and statistics)."""
    return [m for step in plan.steps for m in step]
