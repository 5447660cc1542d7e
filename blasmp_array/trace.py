"""Pipeline tracing: a Chrome-trace / Perfetto timeline of every rank's streams.

Use it around a region::

    with bm.trace("run.json"):
        C = A @ B

or for a whole script with ``BLASMP_TRACE=run.json python script.py`` (the trace is written at
exit). Open the file in https://ui.perfetto.dev or ``chrome://tracing``: one process per rank,
one thread per stream (``compute``, ``comm``) plus ``host`` for host waits.

What is recorded
----------------
While tracing is on, the stream-ordered methods of every backend instance (``put``,
``put_signal``, ``signal_op``, ``signal_wait``, ``quiet``, ``gemm``, ``syrk``, ``syr2k``,
``trmm``, ``trsm``, ``potrf``, ``getrf``, ``geqrf``, ``geqrt``, ``orgqr``, ``ormqr``,
``launch``) are wrapped so that each call is bracketed by two
:meth:`~blasmp_array.backends.base.Backend.stamp` calls: timestamps taken when the *stream*
reaches the call and when it has finished it (not when the host enqueued it). The host-blocking
``synchronize`` and ``barrier`` are timed on the host. Each event carries its arguments: peer and
bytes of puts, signal name/index/value of signal posts and waits, shapes of kernels.

Tracing off costs nothing: no method is wrapped. Memory is bounded by a ring buffer per rank
(``maxlen`` events, default ``$BLASMP_TRACE_MAXLEN`` or 200000); the oldest events are dropped
first and the number dropped is written into the trace.

Leaving the ``with`` block is collective over ``comm`` (default ``MPI.COMM_WORLD``): both streams
are drained, the events are gathered to rank 0, aligned to a common origin taken after a barrier,
and written as one JSON file.

Deadlocks
---------
When ``synchronize`` (or ``barrier``) raises :class:`~blasmp_array.SignalTimeoutError`, the
waiting rank writes what it has recorded so far to ``<path>.rank<r>.partial.json`` without any
collective (the other ranks may be stuck) and the path is appended to the exception message. The
wait that never finished appears in it with ``"incomplete": true`` and its signal and peer.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .backends.base import Backend, SignalTimeoutError

__all__ = ["trace", "Tracer", "STREAM_METHODS", "HOST_METHODS"]

#: the local kernels among the stream methods: their events carry their operands' shapes
_KERNELS = tuple("gemm syrk syr2k trmm trsm potrf getrf geqrf geqrt orgqr ormqr".split())
#: backend methods that are enqueued on a stream (their last positional argument, or the
#: ``stream`` keyword, is the stream)
STREAM_METHODS = ("put", "put_signal", "signal_op", "signal_wait", "quiet", *_KERNELS, "launch")
#: backend methods that block the host
HOST_METHODS = ("synchronize", "barrier")

_DEFAULT_MAXLEN = 200_000
_CATEGORY = {
    "put": "comm",
    "put_signal": "comm",
    "signal_op": "signal",
    "signal_wait": "signal",
    "quiet": "comm",
    "launch": "launch",
    "synchronize": "host",
    "barrier": "host",
}

# depth of traced calls on the current thread: calls a backend makes to its own (wrapped)
# methods, and the tracer's own stamp/launch calls, are not recorded twice
_local = threading.local()
_active: Tracer | None = None


class _Record:
    """One traced call; ``t0``/``t1`` are filled in when the stream runs it."""

    __slots__ = ("name", "cat", "track", "args", "t0", "t1")

    def __init__(self, name: str, cat: str, track: str, args: dict[str, Any]) -> None:
        self.name = name
        self.cat = cat
        self.track = track
        self.args = args
        self.t0: float | None = None
        self.t1: float | None = None

    def set_t0(self, t: float) -> None:
        self.t0 = t

    def set_t1(self, t: float) -> None:
        self.t1 = t


def _shape(a: Any) -> list[int] | None:
    shape = getattr(a, "shape", None)
    return [int(s) for s in shape] if shape is not None else None


def _nbytes(a: Any) -> int | None:
    n = getattr(a, "nbytes", None)
    return int(n) if n is not None else None


def _describe(name: str, a: dict[str, Any]) -> dict[str, Any]:
    """The arguments worth showing for a call of backend method ``name``."""
    out: dict[str, Any] = {}
    if name in ("put", "put_signal"):
        out["peer"] = int(a["pe"])
        out["bytes"] = _nbytes(a["src"])
        out["dst"] = getattr(a["dst"], "name", "")
        out["dst_offset"] = int(a["dst_offset"])
    if name in ("put_signal", "signal_op", "signal_wait"):
        out["signal"] = getattr(a["sig"], "name", "")
        out["index"] = int(a["index"])
        out["value"] = int(a["value"])
    if name in ("put_signal", "signal_op"):
        out["op"] = a["op"]
    if name == "signal_op":
        out["peer"] = int(a["pe"])
    if name == "signal_wait":
        peer = a.get("peer")
        out["peer"] = int(peer) if peer is not None else None
        out["what"] = a.get("what", "")
    if name == "launch":
        fn = a["fn"]
        out["fn"] = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    if name in _KERNELS:
        for key in ("a", "b", "c"):
            if key in a:
                out[key] = _shape(a[key])
        for key in ("trans_a", "trans_b", "trans", "uplo", "side", "diag"):
            if key in a:
                out[key] = a[key]
        dt = getattr(a.get("a"), "dtype", None)
        if dt is not None:
            out["dtype"] = str(dt)
    return out


def _bind(
    backend: Backend, name: str, original: Callable[..., Any], args: tuple, kwargs: dict
) -> dict[str, Any] | None:
    """The call's arguments by name (``None`` if they do not fit the method's signature)."""
    import inspect

    key = (type(backend), name)
    sig = _signatures.get(key)
    if sig is None:
        try:
            sig = inspect.signature(original)
        except (TypeError, ValueError):
            sig = inspect.signature(getattr(Backend, name)).replace(
                parameters=list(inspect.signature(getattr(Backend, name)).parameters.values())[1:]
            )
        _signatures[key] = sig
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return None
    return dict(bound.arguments)


_signatures: dict[tuple[type, str], Any] = {}


class Tracer:
    """Records the pipeline steps of every backend while active; see :func:`trace`.

    Parameters
    ----------
    path : str or os.PathLike or None
        Where rank 0 writes the merged trace. ``None``: keep it in :attr:`result` only.
    comm : mpi4py.MPI.Comm, optional
        Communicator over which the trace is gathered (default ``MPI.COMM_WORLD``); every rank
        of it must enter and leave the tracer.
    maxlen : int, optional
        Ring-buffer size per rank (events).

    Attributes
    ----------
    result : dict or None
        The Chrome-trace dictionary written by rank 0 (``None`` on other ranks and before the
        end).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        comm: Any = None,
        maxlen: int | None = None,
        barrier_at_start: bool = True,
    ) -> None:
        from mpi4py import MPI

        self.path = Path(path) if path is not None else None
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self.rank = self.comm.Get_rank()
        if maxlen is None:
            maxlen = int(os.environ.get("BLASMP_TRACE_MAXLEN", "") or _DEFAULT_MAXLEN)
        if maxlen <= 0:
            raise ValueError(f"maxlen must be positive, got {maxlen}")
        self.events: deque[_Record] = deque(maxlen=maxlen)
        self.issued = 0
        self.result: dict[str, Any] | None = None
        self._barrier_at_start = barrier_at_start
        self._wrapped: dict[int, tuple[Backend, dict[str, Any]]] = {}
        self._patched: list[tuple[Any, str, Any]] = []
        self._origin = 0.0
        self._active = False

    # -- life cycle -----------------------------------------------------------------------
    def start(self) -> Tracer:
        global _active
        if _active is not None:
            raise RuntimeError("a trace is already active; traces do not nest")
        from . import backends, grid

        for backend in list(backends._instances.values()):
            backend.synchronize()  # earlier work is not attributed to the trace
        if self._barrier_at_start:
            self.comm.Barrier()
        self._origin = time.perf_counter()
        for backend in list(backends._instances.values()):
            self._wrap(backend)
        # backends created while tracing (a new grid's communicator) are traced too
        original = backends.get_backend

        def get_backend(kind: str | None, comm: Any) -> Backend:
            backend = original(kind, comm)
            if self._active:
                self._wrap(backend)
            return backend

        for module in (backends, grid):
            self._patched.append((module, "get_backend", module.get_backend))
            module.get_backend = get_backend  # type: ignore[attr-defined]
        self._active = True
        _active = self
        return self

    def stop(self) -> dict[str, Any] | None:
        """Drain, unwrap, gather and write the trace (collective over ``comm``)."""
        try:
            for backend, _ in list(self._wrapped.values()):
                backend.synchronize()
                backend.flush_stamps()
        finally:
            self._unwrap()
        self.comm.Barrier()
        offset = _clock_offset(self.comm)
        mine = {
            "rank": self.rank,
            "origin": self._origin,
            "offset": offset,
            "dropped": self.issued - len(self.events),
            "events": self._local_events(final=True),
        }
        gathered = self.comm.gather(mine, root=0)
        if self.rank == 0:
            assert gathered is not None
            self.result = _merge(gathered)
            if self.path is not None:
                _write_json(self.path, self.result)
        return self.result

    def abandon(self) -> None:
        """Unwrap without any collective (after an error on this rank)."""
        self._unwrap()

    def __enter__(self) -> Tracer:
        return self.start()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc is None:
            self.stop()
            return
        # an error on this rank: other ranks may be stuck, so no collective; keep a partial
        if not getattr(exc, "_blasmp_trace_written", False) and self.path is not None:
            try:
                self.write_partial(exc)
            except Exception:  # noqa: BLE001 - never hide the original error
                pass
        self.abandon()

    # -- wrapping -------------------------------------------------------------------------
    def _wrap(self, backend: Backend) -> None:
        if id(backend) in self._wrapped:
            return
        saved: dict[str, Any] = {}
        tracks = {"compute": "compute", "comm": "comm"}
        multi = len(self._wrapped) > 0
        for name in STREAM_METHODS + HOST_METHODS:
            saved[name] = backend.__dict__.get(name, _MISSING)
            original = getattr(backend, name)
            if name in STREAM_METHODS:
                wrapper = self._stream_wrapper(backend, name, original, multi, tracks)
            else:
                wrapper = self._host_wrapper(backend, name, original, multi)
            setattr(backend, name, wrapper)
        self._wrapped[id(backend)] = (backend, saved)

    def _unwrap(self) -> None:
        global _active
        for module, attr, value in reversed(self._patched):
            setattr(module, attr, value)
        self._patched.clear()
        for backend, saved in self._wrapped.values():
            for name, value in saved.items():
                if value is _MISSING:
                    backend.__dict__.pop(name, None)
                else:
                    setattr(backend, name, value)
        self._wrapped.clear()
        self._active = False
        if _active is self:
            _active = None

    def _track(self, backend: Backend, stream: Any, multi: bool) -> str:
        track = str(getattr(stream, "name", None) or repr(stream))
        return f"{backend.name}:{track}" if multi else track

    def _stream_wrapper(
        self,
        backend: Backend,
        name: str,
        original: Callable[..., Any],
        multi: bool,
        tracks: dict[str, str],
    ) -> Callable[..., Any]:
        cat = _CATEGORY.get(name, "compute")
        stamp = backend.stamp

        def traced(*args: Any, **kwargs: Any) -> Any:
            if getattr(_local, "depth", 0):
                return original(*args, **kwargs)
            _local.depth = 1
            try:
                bound = _bind(backend, name, original, args, kwargs)
                if bound is None or "stream" not in bound:
                    return original(*args, **kwargs)  # not a call we understand: untraced
                stream = bound["stream"]
                try:
                    described = _describe(name, bound)
                except Exception:  # noqa: BLE001 - a backend with other argument names
                    described = {}
                rec = _Record(name, cat, self._track(backend, stream, multi), described)
                if name == "launch":
                    rec.name = f"launch {rec.args.get('fn', '')}"
                self.events.append(rec)
                self.issued += 1
                stamp(stream, rec.set_t0)
                try:
                    return original(*args, **kwargs)
                finally:
                    stamp(stream, rec.set_t1)
            except SignalTimeoutError as exc:
                self._on_timeout(exc)
                raise
            finally:
                _local.depth = 0

        traced.__wrapped__ = original  # type: ignore[attr-defined]
        return traced

    def _host_wrapper(
        self, backend: Backend, name: str, original: Callable[..., Any], multi: bool
    ) -> Callable[..., Any]:
        track = f"{backend.name}:host" if multi else "host"

        def traced(*args: Any, **kwargs: Any) -> Any:
            if getattr(_local, "depth", 0):
                return original(*args, **kwargs)
            _local.depth = 1
            rec = _Record(name, "host", track, {})
            self.events.append(rec)
            self.issued += 1
            rec.t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            except SignalTimeoutError as exc:
                rec.t1 = time.perf_counter()
                rec.args["error"] = "SignalTimeoutError"
                self._on_timeout(exc)
                raise
            finally:
                if rec.t1 is None:
                    rec.t1 = time.perf_counter()
                _local.depth = 0

        traced.__wrapped__ = original  # type: ignore[attr-defined]
        return traced

    # -- output ---------------------------------------------------------------------------
    def _local_events(self, final: bool) -> list[tuple[Any, ...]]:
        """``(name, cat, track, t0, t1, args)`` of the recorded calls, in seconds.

        A call whose begin stamp ran but not its end (a wait that never finished) gets the
        current time as end and ``incomplete: True``; calls the stream never reached are left
        out.
        """
        now = time.perf_counter()
        out = []
        for rec in list(self.events):
            if rec.t0 is None:
                continue
            if rec.t1 is None:
                out.append(
                    (rec.name, rec.cat, rec.track, rec.t0, now, dict(rec.args, incomplete=True))
                )
            else:
                out.append((rec.name, rec.cat, rec.track, rec.t0, rec.t1, rec.args))
        return out

    def partial_path(self) -> Path | None:
        """``<path>.rank<r>.partial.json`` (``None`` when no path was given)."""
        if self.path is None:
            return None
        return self.path.with_name(f"{self.path.name}.rank{self.rank}.partial.json")

    def write_partial(self, exc: BaseException | None = None) -> Path | None:
        """Write this rank's events so far (no collective); return the file's path."""
        path = self.partial_path()
        if path is None:
            return None
        pending = sum(1 for rec in self.events if rec.t0 is None)
        data = _merge(
            [
                {
                    "rank": self.rank,
                    "origin": self._origin,
                    "offset": 0.0,
                    "dropped": self.issued - len(self.events),
                    "events": self._local_events(final=False),
                }
            ],
            align=False,
        )
        data["otherData"].update(
            partial=True,
            rank=self.rank,
            error=f"{type(exc).__name__}: {exc}" if exc is not None else None,
            not_started=pending,
        )
        _write_json(path, data)
        return path

    def _on_timeout(self, exc: SignalTimeoutError) -> None:
        if getattr(exc, "_blasmp_trace_written", False):
            return
        exc._blasmp_trace_written = True  # type: ignore[attr-defined]
        for backend, _ in list(self._wrapped.values()):
            # device stamps reached so far (never wait: a stream may be stuck)
            try:
                backend.poll_stamps()
            except Exception:  # noqa: BLE001 - never hide the original error
                pass
        try:
            path = self.write_partial(exc)
        except Exception as err:  # noqa: BLE001 - never hide the original error
            note = f"[rank {self.rank}] could not write the partial trace: {err}"
        else:
            if path is None:
                return
            note = f"[rank {self.rank}] partial trace of this rank written to {path}"
        if exc.args and isinstance(exc.args[0], str):
            exc.args = (f"{exc.args[0]}\n{note}", *exc.args[1:])
        else:
            exc.add_note(note)


_MISSING = object()


def _merge(per_rank: list[dict[str, Any]], align: bool = True) -> dict[str, Any]:
    """One Chrome-trace dictionary from the ranks' event lists.

    Each rank's times are moved onto rank 0's clock (``offset``, zero on rank 0's host) and made
    relative to the earliest rank's start (every rank took its start after a common barrier).
    """
    per_rank = sorted(per_rank, key=lambda d: d["rank"])
    origin = min(d["origin"] - d["offset"] for d in per_rank)
    trace_events: list[dict[str, Any]] = []
    dropped = {}
    for d in per_rank:
        rank = int(d["rank"])
        shift = -d["offset"]
        dropped[rank] = d["dropped"]
        trace_events.append(
            {
                "name": "process_name",
                "ph": "M",
                "pid": rank,
                "tid": 0,
                "args": {"name": f"rank {rank}"},
            }
        )
        trace_events.append(
            {
                "name": "process_sort_index",
                "ph": "M",
                "pid": rank,
                "tid": 0,
                "args": {"sort_index": rank},
            }
        )
        tids: dict[str, int] = {}
        counter = itertools.count(1)
        order = {"host": 0, "compute": 1, "comm": 2}
        tracks = sorted({e[2] for e in d["events"]}, key=lambda t: (order.get(t, 9), t))
        for track in tracks:
            tid = tids[track] = order.get(track, 10 + next(counter))
            trace_events.append(
                {"name": "thread_name", "ph": "M", "pid": rank, "tid": tid, "args": {"name": track}}
            )
            trace_events.append(
                {
                    "name": "thread_sort_index",
                    "ph": "M",
                    "pid": rank,
                    "tid": tid,
                    "args": {"sort_index": tid},
                }
            )
        for name, cat, track, t0, t1, args in d["events"]:
            ts = (t0 + shift - origin) * 1e6
            dur = max(t1 - t0, 0.0) * 1e6
            trace_events.append(
                {
                    "name": name,
                    "cat": cat,
                    "ph": "X",
                    "ts": round(ts, 3),
                    "dur": round(dur, 3),
                    "pid": rank,
                    "tid": tids[track],
                    "args": args,
                }
            )
    return {
        "traceEvents": trace_events,
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": "blasmp_array.trace",
            "ranks": len(per_rank),
            "dropped_events": dropped,
        },
    }


def _clock_offset(comm: Any, rounds: int = 5) -> float:
    """This rank's ``time.perf_counter()`` minus rank 0's (collective).

    Zero for ranks on rank 0's host (one monotonic clock). Elsewhere estimated by ping-pong with
    rank 0, keeping the round trip with the smallest latency (NTP's estimate).
    """
    from mpi4py import MPI

    host = MPI.Get_processor_name()
    hosts = comm.allgather(host)
    size, rank = comm.Get_size(), comm.Get_rank()
    offset = 0.0
    for peer in range(1, size):
        if hosts[peer] == hosts[0]:
            continue
        if rank == 0:
            for _ in range(rounds):
                t_send = time.perf_counter()
                comm.send(t_send, dest=peer, tag=7301)
                t_peer = comm.recv(source=peer, tag=7302)
                t_recv = time.perf_counter()
                comm.send((t_send, t_recv, t_peer), dest=peer, tag=7303)
        elif rank == peer:
            best = None
            for _ in range(rounds):
                comm.recv(source=0, tag=7301)
                comm.send(time.perf_counter(), dest=0, tag=7302)
                t_send, t_recv, t_peer = comm.recv(source=0, tag=7303)
                rtt = t_recv - t_send
                if best is None or rtt < best[0]:
                    best = (rtt, t_peer - (t_send + t_recv) / 2)
            assert best is not None
            offset = best[1]
    return offset


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, default=str)
    os.replace(tmp, path)


def trace(
    path: str | os.PathLike[str] | None = "trace.json",
    comm: Any = None,
    maxlen: int | None = None,
) -> Tracer:
    """Record a timeline of the pipeline steps of every rank (a context manager).

    Parameters
    ----------
    path : str or os.PathLike or None
        The Chrome-trace/Perfetto JSON file rank 0 writes when the block ends (``None``: only
        :attr:`Tracer.result`).
    comm : mpi4py.MPI.Comm, optional
        Every rank of it enters and leaves the block (default ``MPI.COMM_WORLD``).
    maxlen : int, optional
        Events kept per rank (a ring buffer; default ``$BLASMP_TRACE_MAXLEN`` or 200000).

    Returns
    -------
    Tracer
        Use as ``with bm.trace("run.json"): ...``; entering and leaving are collective.

    Examples
    --------
    >>> with bm.trace("gemm.json"):          # doctest: +SKIP
    ...     C = A @ B
    """
    return Tracer(path, comm=comm, maxlen=maxlen)


def active() -> Tracer | None:
    """The tracer currently recording, if any."""
    return _active


def _start_from_environment() -> None:
    """``BLASMP_TRACE=path``: trace the whole script and write the file at exit."""
    path = os.environ.get("BLASMP_TRACE", "")
    if not path or _active is not None:
        return
    tracer = Tracer(path, barrier_at_start=False)
    tracer.start()

    def finish() -> None:
        if _active is tracer:
            tracer.stop()

    # registered after mpi4py's own exit handler (MPI is imported by then), so it runs first,
    # while MPI is still initialised
    atexit.register(finish)
