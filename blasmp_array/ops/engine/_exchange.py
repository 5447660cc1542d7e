"""The one-sided exchange engine: a *plan* of steps of messages moved through symmetric slots.

Every data movement between ranks in ``ops/`` is a plan over this engine: the SUMMA panels of
GEMM/SYMM/SYRK/SYR2K/TRMM and Cholesky (``ops/engine/panels.py``), TRSM's panels and solved rows,
Cholesky's diagonal tiles, LU's row interchanges and redistribution/transposes. There is no
other slot, signal or workspace protocol.

What a plan is
--------------
A :class:`Plan` is this rank's view of a data movement: ``steps[k]`` lists the
:class:`Message` s of step ``k`` that this rank sends or receives. A message goes from one
``sender`` to one or more ``receivers`` (several: the same data, e.g. a SUMMA panel for a whole
process row, packed once and put to each); it occupies ``[offset, offset + size)`` of every
receiver's *receive slot*. ``pack`` and ``unpack`` are opaque payloads (source pieces, index
selections) that the operator's :class:`Kernels` interpret: ``pack(msg, out)`` writes the
message into a contiguous range on the sender, ``unpack(msg, data)`` consumes it from the
receive slot on the receiver, ``local(msg)`` delivers a message to its own sender when the
sender is among its receivers, without any slot (a local copy).

A message with ``in_slot=True`` is not unpacked: it stays in the receive slot, where the
receiver reads it through :meth:`Exchange.view` (zero copy: a SUMMA panel, a TRSM panel or a
Cholesky tile is used straight from the slot) from :meth:`Exchange.recv` of its step until
:meth:`Exchange.release` of that step. A sender that is among the receivers of an in-slot
message packs it straight into its own slot (no staging) and puts it from there.

``slot_elems`` and ``stage_elems`` (the largest receive slot and send staging area of any rank
at any step) are the same on every rank, because every rank derives them from the same global
quantities; they size the symmetric workspace. Receivers know every size from the plan (no
size is ever sent). Plans are pure data: an operator builds (and may cache) them;
:class:`Exchange` runs them.

Workspace: one pool
-------------------
Symmetric memory is allocated collectively and slowly (~40 ms per MPI window on the CI
machine), so it is pooled per backend and per *channel* (a name: ``"exchange"`` for
redistribution, LU and the SUMMA operators, ``"cholesky.panel"``/``"cholesky.tile"``,
``"trsm.panel"``/``"trsm.x"``): one symmetric buffer per dtype and one signal set, grown on
demand (collectively: every rank asks for the same sizes, derived from the plan) and reused by
the next exchange on that channel. Exchanges alive at the same time (an operator that needs two,
e.g. TRSM's panels and solved rows) use different channels; an exchange must finish before the
next one on its channel starts. The buffer holds
``[S receive slots of slot_elems | S staging slots of stage_elems]`` (``S = num_stages``). A
plan with ``slot_elems == stage_elems == 0`` (one rank, or only local copies) touches no
workspace at all. :func:`free_workspace` releases the pools.

Signals: one discipline
-----------------------
Every signal word is a monotonic counter, never reset: each process knows exactly what an
exchange added to the words it owns (every increment is waited for) and keeps it as the *base*
that the next exchange's expected values are offset by. ``2 * S * P`` words (``P`` ranks),
every word owned (waited on) by the process it lives on and written by exactly one peer, always
with ``'add'`` of 1:

* ``ready[s, p]`` (index ``s * P + p``) on receiver ``q``: written by sender ``p`` with the
  ``put_signal`` of each message of a step ``k = s (mod S)`` into ``q``'s slot ``s`` (the
  signal is visible only after the data). ``q`` waits on its compute stream until the word
  reaches the cumulative number of messages ``p`` put into slot ``s`` up to step ``k``, then
  unpacks (or views) ``p``'s messages of step ``k``.
* ``ack[s, q]`` (index ``S * P + s * P + q``) on sender ``p``: written by receiver ``q`` once
  per step ``k + S`` at which ``p`` sends to ``q``, after ``q`` has consumed step ``k``
  (``release(k)``, compute stream): "my slot ``s`` is free". ``p`` waits on its comm stream,
  before the puts of step ``k + S``, until the word reaches the number of steps
  ``S <= k' <= k + S, k' = s (mod S)`` at which it sends to ``q``.

Per-peer words (not one counter per slot) make each wait name the one peer it waits for and
keep a fast receiver's ack of step ``k + S`` from satisfying a wait meant for step ``k``.

A sender's in-slot message to itself needs no signal (its own streams are ordered by events,
cheaper than a signal round trip): its comm stream waits for the event that its own
``release(k - S)`` recorded on the compute stream before it packs into its slot ``s``, and its
compute stream waits for the event recorded after that pack in ``recv(k)``. This needs the
host to call ``release(k - S)`` before ``send(k)`` and ``send(k)`` before ``recv(k)`` (the
standard order); the engine raises ``RuntimeError`` otherwise.

Streams: sends (pack, ack waits, puts) on ``comm``; local copies, ready waits, unpacks and acks
on ``compute``. ``send(k, after=event)`` makes the comm stream wait ``event`` first (data
produced during the exchange, e.g. TRSM's solved block or Cholesky's factored tile). The usual
driver (:func:`run_plan`, and the SUMMA loop of ``ops/engine/panels.py``) enqueues ``send(0 ..
S-1)``, then for each ``k``: ``recv(k)``, (work on the received data), ``release(k)``, ``send(k +
S)``; operators with a dependency chain (TRSM, Cholesky) call them in another order, each documented
in its module. The host never synchronises inside the loop.

When a slot is reused: receive slot ``s`` of ``q`` is written at step ``k + S`` only after
``q``'s ack for step ``k`` (or, by ``q`` itself, after its own release event of step ``k``),
which ``q`` sends after it waited for and consumed all of step ``k`` (hence every earlier step in
slot ``s``). The staging slot ``s`` of a sender, and the part of its own receive slot it puts
from, are overwritten at step ``k + S`` by its comm stream after that stream issued the puts of
step ``k`` and a ``quiet`` (puts complete, so their sources may be overwritten).

Why it cannot deadlock: a wait of step ``k`` depends only on work of steps ``<= k`` (ready
waits on the puts of step ``k``; ack waits of step ``k`` on the releases of step ``k - S``), and
each stream runs its steps in increasing ``k``; by induction over ``k`` every wait is released,
provided the operator's own order of ``send``/``recv``/``release`` calls (and of its events)
respects the same induction (each operator's docstring argues it). Ready counters cannot run
ahead (step ``k + S`` data needs the receiver's ack of step ``k``).

End of an exchange and errors
-----------------------------
:func:`finish` (or :meth:`Exchange.finish`) of one or several exchanges synchronises (every put
was waited for by its receiver and every ack by its sender, so nothing is in flight), then all
ranks exchange their outcome with one host ``allgather`` (small metadata; it doubles as the
barrier that keeps the next exchange's first puts, which need no ack, from reaching a slot a
slower process still reads). If any rank failed -- e.g. a wait timed out
(:class:`~blasmp_array.backends.base.SignalTimeoutError` naming the operator, step, signal and
peer) -- every rank drops the pools of those exchanges (their counters are unknown) and raises
the same error kind with every rank's message, so no rank is left waiting in a later
collective. An operator that fails on the host before ``finish`` calls :meth:`Exchange.drop`.

Users
-----
* ``ops/engine/redistribute.py``: one step per round, messages unpacked into the destination; with a
  window (``ops/engine/redistribute.copy_window``: non-aligned views, assignment into windows,
  concatenation) the same plan restricted to the window's rows and columns.
* ``ops/lapack/lu.py``: one-step plans of row moves (panel gather, interchanges).
* ``ops/engine/panels.py``: the SUMMA plan, one in-slot message per (sender, group) segment with the
  group's receivers; panels are views of the slot (or unpacked from it when the segments are
  not in the panel's order); :class:`~blasmp_array.ops.engine.panels.PanelExchange` is that plan on
  this engine, used by GEMM/SYMM/SYRK/SYR2K/TRMM
  (:func:`~blasmp_array.ops.engine.panels.run_pipeline`) and by Cholesky.
* ``ops/blas3/trsm.py``: two exchanges alive at once, the panels of ``op(A)`` (prefetched) and the
  solved rows ``X_k`` (sent after their solve, ``send(k, after=...)``), both in-slot.
* ``ops/lapack/cholesky.py``: the diagonal tile (in-slot, sent after its potrf) beside the panel
  exchange.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ...backends.base import Backend, SignalTimeoutError
from ._warmup import begin_pipeline

__all__ = [
    "CHANNEL",
    "CallKernels",
    "Exchange",
    "Kernels",
    "Message",
    "Plan",
    "Workspace",
    "finish",
    "free_workspace",
    "positions_index",
    "run_plan",
    "workspace",
]

#: the default pooled channel (redistribution, LU, the SUMMA operators)
CHANNEL = "exchange"

#: Test hook: ``(plan name, step, sender rank)``; that sender puts its first remote message of
#: that step without the ready signal, so that its receiver's wait must time out.
_DROP_SIGNAL: tuple[str, int, int] | None = None


@dataclass(frozen=True)
class Message:
    """One message: ``size`` elements from ``sender`` to ``receivers``, at element ``offset``
    of each receiver's slot. ``pack``/``unpack`` are the operator's payloads (sender side /
    receiver side); a sender listed among the receivers gets it by ``Kernels.local``, or, with
    ``in_slot``, packed into its own slot. ``in_slot``: no unpack, the receiver reads the slot
    (:meth:`Exchange.view`) until the step is released."""

    sender: int
    receivers: tuple[int, ...]
    offset: int
    size: int
    pack: Any = None
    unpack: Any = None
    in_slot: bool = False


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
        """Whether the plan needs the symmetric workspace (equal on every rank)."""
        return self.slot_elems > 0 or self.stage_elems > 0


class Kernels(Protocol):
    """The operator's local data movement, run on a stream by the engine.

    Every device kernel ``pack``/``unpack``/``local`` may launch must be warmed by a sample
    registered in the operator's module (``@warmup_kernels``, see ``ops/engine/_warmup.py``): the
    engine's :func:`begin_pipeline` runs it before the first signal wait.
    """

    def pack(self, msg: Message, out: Any) -> None:
        """Write ``msg`` into the contiguous 1-D ``out`` (``msg.size`` elements; comm stream)."""

    def unpack(self, msg: Message, data: Any) -> None:
        """Consume ``msg`` from the contiguous 1-D ``data`` (compute stream)."""

    def local(self, msg: Message) -> None:
        """Move ``msg``, sent to this rank by itself, without a slot (compute stream)."""


class CallKernels:
    """:class:`Kernels` whose ``pack`` payloads are callables ``pack(out)`` (in-slot messages
    need no unpack; ``local`` is not used)."""

    def pack(self, msg: Message, out: Any) -> None:
        msg.pack(out)

    def unpack(self, msg: Message, data: Any) -> None:  # pragma: no cover - in-slot only
        raise AssertionError(f"message {msg} is read in its slot")

    def local(self, msg: Message) -> None:  # pragma: no cover - in-slot only
        raise AssertionError(f"message {msg} is read in its slot")


# -- the pooled workspace -----------------------------------------------------------------------
class Workspace:
    """One channel's pool on one backend: one symmetric buffer per dtype and one signal set
    with this process's base value of every word (grown on demand, collectively)."""

    def __init__(self, backend: Backend, channel: str) -> None:
        self.backend = backend
        self.channel = channel
        self.bufs: dict[np.dtype, Any] = {}
        self.sig: Any = None
        self.base: np.ndarray = np.zeros(0, dtype=np.int64)

    def buffer(self, dtype: Any, size: int) -> Any:
        """A symmetric buffer of at least ``size`` elements of ``dtype`` (collective when it
        grows: the old one is freed, the new one at least doubles)."""
        dtype = np.dtype(dtype)
        buf = self.bufs.get(dtype)
        if buf is not None and buf.handle is not None and buf.size >= size:
            return buf
        if buf is not None and buf.handle is not None:
            self.backend.free(buf)
        cap = max(int(size), 2 * (buf.size if buf is not None else 0), 1024)
        buf = self.bufs[dtype] = self.backend.alloc_symmetric(
            cap, dtype, name=f"{self.channel}.{dtype}"
        )
        return buf

    def signals(self, count: int) -> tuple[Any, np.ndarray]:
        """A signal set of at least ``count`` words and the bases of its words (collective
        when it grows; a new set starts at zero)."""
        sig = self.sig
        if sig is not None and sig.handle is not None and sig.count >= count:
            return sig, self.base
        if sig is not None and sig.handle is not None:
            self.backend.free(sig)
        cap = max(int(count), 2 * (sig.count if sig is not None else 0), 32)
        self.sig = self.backend.alloc_signals(cap, name=f"{self.channel}.signals")
        self.base = np.zeros(cap, dtype=np.int64)
        return self.sig, self.base

    def release(self) -> None:
        """Free the buffers and the signal set (collective)."""
        for obj in [*self.bufs.values(), self.sig]:
            if obj is not None and obj.handle is not None:
                self.backend.free(obj)


_WORKSPACES: dict[tuple[int, str], Workspace] = {}


def workspace(backend: Backend, channel: str) -> Workspace:
    """The pool of ``channel`` on ``backend`` (created empty on first use)."""
    ws = _WORKSPACES.get((id(backend), channel))
    if ws is None or ws.backend is not backend:
        ws = _WORKSPACES[id(backend), channel] = Workspace(backend, channel)
    return ws


def drop_workspace(backend: Backend, channel: str) -> None:
    """Forget a channel's pool after a failure (its counters are unknown); not collective."""
    _WORKSPACES.pop((id(backend), channel), None)


def free_workspace(backend: Backend, prefix: str = "") -> None:
    """Release the pools of ``backend`` whose channel starts with ``prefix`` (collective)."""
    for key in sorted(k for k in _WORKSPACES if k[0] == id(backend) and k[1].startswith(prefix)):
        _WORKSPACES.pop(key).release()


# -- the engine ---------------------------------------------------------------------------------
class Exchange:
    """Runs a :class:`Plan` with ``num_stages`` slots (construction and :meth:`finish` are
    collective). :func:`run_plan` is the usual driver."""

    def __init__(
        self,
        backend: Backend,
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
        self._own: list[list[Message]] = [[] for _ in range(K)]  # in-slot messages to myself
        # (message, staging offset or None: packed in my own slot, remote receivers)
        self._sends: list[list[tuple[Message, int | None, list[int]]]] = [[] for _ in range(K)]
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
                    own = me in msg.receivers
                    if own and msg.in_slot:
                        # packed into my own slot (ordered by events, no signal)
                        self._check_slot(k, msg)
                        self._own[k].append(msg)
                        if remote:
                            self._sends[k].append((msg, None, remote))
                    else:
                        if own:
                            self._locals[k].append(msg)
                        if remote:
                            if stage_off + msg.size > plan.stage_elems:
                                raise ValueError(
                                    f"{self.name}: step {k} overflows the staging slot"
                                )
                            self._sends[k].append((msg, stage_off, remote))
                            stage_off += msg.size
                    to.update(remote)
                elif me in msg.receivers:
                    self._check_slot(k, msg)
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
        self._packed: dict[int, Any] = {}  # step -> event after my in-slot packs (comm)
        self._released: dict[int, Any] = {}  # step -> event of my release (compute)
        self._sent = -1  # the last step sent / released by the host
        self._done = -1

        self._buf: Any = None
        self._arr: Any = None
        self._sig: Any = None
        self._base: np.ndarray = np.zeros(0, dtype=np.int64)
        self._slot0 = 0
        self._stage0 = S * plan.slot_elems
        if plan.remote:
            ws = workspace(backend, channel)
            self._buf = ws.buffer(self.dtype, S * (plan.slot_elems + plan.stage_elems))
            self._arr = self._buf.array
            self._sig, self._base = ws.signals(2 * S * P)
        self._finished = False

    def _check_slot(self, k: int, msg: Message) -> None:
        if msg.offset + msg.size > self.plan.slot_elems:
            raise ValueError(f"{self.name}: step {k} overflows the receive slot")

    # -- signal words ---------------------------------------------------------------------
    def _ready(self, s: int, sender: int) -> int:
        return s * self.P + sender

    def _ack(self, s: int, receiver: int) -> int:
        return (self.S + s) * self.P + receiver

    # -- queries --------------------------------------------------------------------------
    def sends(self, k: int) -> bool:
        """Whether this rank packs anything at step ``k``."""
        return bool(self._sends[k] or self._own[k])

    def view(self, k: int, offset: int, shape: tuple[int, ...]) -> Any:
        """The C-ordered ``shape`` at element ``offset`` of my receive slot of step ``k``
        (in-slot messages; valid from :meth:`recv` of step ``k`` until its :meth:`release`)."""
        start = self._slot0 + (k % self.S) * self.plan.slot_elems + int(offset)
        return self._arr[start : start + math.prod(shape)].reshape(shape)

    # -- protocol -------------------------------------------------------------------------
    def send(self, k: int, after: Any = None) -> None:
        """Pack and put this rank's messages of step ``k`` (comm stream); ``after``: an event
        the packing must wait for (data produced during the exchange)."""
        b, comm = self.backend, self.backend.comm_stream
        if after is not None:
            b.wait_event(comm, after)
        sends, own = self._sends[k], self._own[k]
        self._sent = max(self._sent, k)
        if not sends and not own:
            return
        S, s = self.S, k % self.S
        arr = self._arr
        stage = self._stage0 + s * self.plan.stage_elems
        slot = self._slot0 + s * self.plan.slot_elems
        if k >= S:
            b.quiet(comm)  # the puts of step k - S read slot s here: complete them first
        if own:
            if k >= S:
                if self._done < k - S:
                    raise RuntimeError(
                        f"{self.name}: send({k}) packs into my own slot before release({k - S})"
                    )
                ev = self._released.pop(k - S, None)
                if ev is not None:
                    b.wait_event(comm, ev)  # my own slot s is consumed (my release of k - S)
            for msg in own:
                # my part of the message -> my own slot s (remote receivers get it from there)
                start = slot + msg.offset
                b.launch(comm, self.kernels.pack, msg, arr[start : start + msg.size])
            self._packed[k] = b.record_event(comm)
        for msg, off, _ in sends:
            if off is not None:
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
        drop = _DROP_SIGNAL == (self.name, k, self.me)
        for msg, off, remote in sends:
            start = slot + msg.offset if off is None else stage + off
            src = arr[start : start + msg.size]
            for q in remote:
                # staging (or my slot) -> slot s of q, then ready[s, me] on q
                if drop:
                    b.put(self._buf, slot + msg.offset, src, q, comm)
                    drop = False
                    continue
                idx = self._ready(s, self.me)
                b.put_signal(self._buf, slot + msg.offset, src, q, self._sig, idx, 1, "add", comm)

    def recv(self, k: int) -> None:
        """Local copies, then wait for and unpack each sender's messages of step ``k``
        (compute stream); in-slot messages are then readable with :meth:`view`."""
        b, comp = self.backend, self.backend.compute
        for msg in self._locals[k]:
            b.launch(comp, self.kernels.local, msg)
        if self._own[k]:
            if self._sent < k:
                raise RuntimeError(f"{self.name}: recv({k}) before send({k}) of my own slot")
            b.wait_event(comp, self._packed.pop(k))  # my in-slot messages to myself are packed
        if not self._recvs[k]:
            return
        s = k % self.S
        arr = self._arr
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
                if msg.in_slot:
                    continue
                # slot s -> my part of the result
                start = slot + msg.offset
                b.launch(comp, self.kernels.unpack, msg, arr[start : start + msg.size])

    def release(self, k: int) -> None:
        """Slot ``k % S`` is consumed: ack the senders of step ``k + S`` (compute stream)."""
        b, comp = self.backend, self.backend.compute
        s = k % self.S
        for p in self._ack_to[k]:
            b.signal_op(self._sig, self._ack(s, self.me), 1, p, "add", comp)
        self._done = max(self._done, k)
        if k + self.S < self.nsteps and self._own[k + self.S]:
            self._released[k] = b.record_event(comp)

    def drop(self) -> None:
        """Forget this exchange's pool (a failure on the host before :meth:`finish`; not
        collective): its signal values are unknown."""
        self._finished = True
        if self.plan.remote:
            drop_workspace(self.backend, self.channel)

    def finish(self) -> None:
        """Drain the streams; agree on the outcome over all ranks (collective); advance the
        signal bases, or drop the pool and raise the same error kind on every rank."""
        finish([self])

    def _advance(self) -> None:
        for (s, p), total in self._ready_total.items():
            self._base[self._ready(s, p)] += total
        for (s, q), total in self._ack_total.items():
            self._base[self._ack(s, q)] += total


def finish(exchanges: Iterable[Exchange]) -> None:
    """End the exchanges alive together (collective, one synchronisation and one host
    ``allgather`` for all of them): advance their signal bases, or, if any rank failed, drop
    their pools and raise the same error kind on every rank."""
    exs = [ex for ex in exchanges if not ex._finished]
    if not exs:
        return
    b = exs[0].backend
    for ex in exs:
        ex._finished = True
    error: BaseException | None = None
    try:
        b.synchronize()
    except Exception as exc:  # noqa: BLE001 - re-raised below, on every rank
        error = exc
    mine = None if error is None else (type(error).__name__, str(error))
    outcomes = b.allgather(mine)
    failed = [(r, o) for r, o in enumerate(outcomes) if o is not None]
    if failed:
        for ex in exs:
            if ex.plan.remote:
                # the counters are unknown now: never reuse this pool (on every rank)
                drop_workspace(b, ex.channel)
        name = " + ".join(dict.fromkeys(ex.name for ex in exs))
        text = "; ".join(f"rank {r}: {kind}: {msg}" for r, (kind, msg) in failed)
        kind = (
            SignalTimeoutError
            if any(k == SignalTimeoutError.__name__ for _, (k, _) in failed)
            else RuntimeError
        )
        raise kind(f"{name} failed on rank(s) {[r for r, _ in failed]}: {text}") from error
    for ex in exs:
        ex._advance()


def positions_index(positions: np.ndarray, xp: Any) -> Any:
    """Local positions (rows or columns) as the index a payload kernel uses: a slice when they
    are one ascending run (a block copy, or a view, instead of a gather), else an ``xp`` index
    array in their order (``positions`` may come in any order, e.g. LU's interchanged rows)."""
    if positions.size == 0:
        return slice(0, 0)
    if np.all(np.diff(positions) == 1):
        return slice(int(positions[0]), int(positions[-1]) + 1)
    return positions if xp is np else xp.asarray(positions)


def run_plan(
    backend: Backend,
    plan: Plan,
    dtype: Any,
    kernels: Kernels,
    num_stages: int = 2,
    after: Any = None,
) -> None:
    """Run ``plan`` to completion (collective): prefetch ``num_stages`` steps, then
    recv / release / send; returns after :meth:`Exchange.finish`. ``after``: an event the
    packing waits for (data still being produced on the compute stream)."""
    dt = np.dtype(dtype)
    ex = Exchange(backend, plan, dt, kernels, num_stages)
    K = ex.nsteps
    begin_pipeline(backend, dt)
    for k in range(min(ex.S, K)):
        ex.send(k, after=after)
    for k in range(K):
        ex.recv(k)
        ex.release(k)
        if k + ex.S < K:
            ex.send(k + ex.S)
    ex.finish()
