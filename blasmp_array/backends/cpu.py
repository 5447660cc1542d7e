"""The CPU backend: NumPy arrays, BLAS on the host, MPI-3 RMA as the one-sided transport.

Streams are worker threads
--------------------------
Each :class:`CPUStream` is a daemon thread consuming a FIFO queue of closures, so the compute and
communication streams really run concurrently. This works only where the heavy calls release
the GIL. Measured on the 2-core CI machine (OpenBLAS, 1 thread; a second thread counts Python
loop iterations during a 1000^3 call, relative to its rate during ``time.sleep``; ~1 means the
GIL is free, the rest is CPU contention): ``numpy.matmul`` 0.39 and CBLAS through ``ctypes``
0.40 (gemm) / 0.31 (trsm) / 0.52 (syrk) release it; the f2py wrappers of
``scipy.linalg.blas.dgemm`` (0.09-0.14) and ``scipy.linalg.solve_triangular`` (0.03) hold it
(two threads each running two 1500^3 scipy DGEMMs took 0.37 s vs 0.28 s one after the other;
with ``numpy.matmul`` 0.14 s vs 0.27 s). The local kernels (``_cpu_kernels.py``) therefore call
CBLAS through ``ctypes`` (the OpenBLAS bundled with NumPy; :mod:`._cblas`) and fall back to
``numpy.matmul`` + ufuncs, and ``scipy.linalg.solve_triangular`` for TRSM only, where no CBLAS is
found. mpi4py releases the GIL in MPI calls, and ``signal_wait`` polls with an exponential
back-off sleep (5 us to 0.5 ms) so a waiting stream does not steal a core from BLAS.

Symmetric memory and signals
----------------------------
A :class:`~.base.SymmetricBuffer` is the memory of an ``MPI.Win.Allocate`` window held in a
passive-target ``Lock_all`` epoch for its whole life; a put is ``Win.Put`` + ``Win.Flush(pe)``
(the data is at the target when the call returns), a signal update is an ``Accumulate`` of one
uint64 (``MPI.REPLACE`` for 'set', ``MPI.SUM`` for 'add'; also to self, so that it is atomic with
respect to remote updates) + ``Flush``. ``signal_wait`` polls the local word after ``Win.Sync()``.
A put to self is a local copy. Since every put is complete at its target before its stream
moves on, ``quiet`` has nothing to wait for.

Errors
------
The first exception on a stream is kept and the rest of that stream's queue is dropped (events
are still set, so the other stream cannot wait forever; a ``signal_wait`` of the other stream is
cancelled); ``synchronize()`` re-raises the earliest error of both streams and clears the state.
"""

from __future__ import annotations

import atexit
import itertools
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import _abort
from .._philox import fill_local
from . import _blas_threads
from ._host_collectives import HostCollectives
from ._host_messages import HostMessages
from .base import (
    DEFAULT_SIGNAL_TIMEOUT,
    Backend,
    Event,
    SignalSet,
    SignalTimeoutError,
    Stream,
    SymmetricBuffer,
    env_flag,
)

__all__ = ["CPUBackend", "CPUStream", "CPUEvent"]

_ERROR_ORDER = itertools.count()


class StreamError(RuntimeError):
    """A stream skipped its work because another stream of the same backend failed first."""


class CPUEvent(Event):
    """A point in a worker thread's queue (a ``threading.Event`` set when reached)."""

    def __init__(self) -> None:
        self._flag = threading.Event()

    def set(self) -> None:
        self._flag.set()

    def query(self) -> bool:
        return self._flag.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._flag.wait(timeout)


#: Copied bytes that one random element's draw and transform cost about as much time as (the
#: host copier splits work of at least ``MIN_SPLIT_BYTES`` per thread; ``random_fill``)
RANDOM_COST = 16

#: The event of a point every stream has already passed (events are never cleared).
_REACHED = CPUEvent()
_REACHED.set()


class _Marker:
    """A queue item that is always executed, even after an error (events, drains)."""

    __slots__ = ("event",)

    def __init__(self, event: CPUEvent) -> None:
        self.event = event


class CPUStream(Stream):
    """A daemon worker thread running enqueued closures in FIFO order.

    After an item raises, the stream records the error and drops the work enqueued after it
    (markers, i.e. events, are still set so that other streams do not wait forever) until the
    backend's ``synchronize()`` collects the error.

    ``inline=True`` (a backend of one process): no thread; every closure runs at once on the
    calling thread, with the same error rule. Host order is then the execution order of both
    streams, which every operator's protocol already allows (a rank puts and signals a step
    before it waits for it, and acknowledges a step before it waits for that acknowledgement),
    and it saves the thread handoffs that dominate small calls (about 0.1 ms each).
    """

    def __init__(self, name: str, on_error: Callable[[], None], inline: bool = False) -> None:
        self.name = name
        self.inline = inline
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._on_error = on_error
        self.error: tuple[int, BaseException] | None = None

    def _ensure_started(self) -> None:
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    t = threading.Thread(target=self._run, name=f"blasmp-{self.name}", daemon=True)
                    t.start()
                    self._thread = t

    def enqueue(self, fn: Callable[..., Any], *args: Any) -> None:
        if self.inline:
            self._execute(fn, args)
            return
        self._ensure_started()
        self._queue.put((fn, args))

    def mark(self, event: CPUEvent) -> None:
        if self.inline:
            event.set()
            return
        self._ensure_started()
        self._queue.put(_Marker(event))

    def _execute(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        if self.error is not None:
            return  # dropped: an earlier item failed
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 - re-raised by synchronize()
            self.error = (next(_ERROR_ORDER), exc)
            self._on_error()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if isinstance(item, _Marker):
                item.event.set()
                continue
            fn, args = item
            self._execute(fn, args)

    def drained(self) -> CPUEvent:
        """An event set once everything enqueued so far has run (or been dropped)."""
        if self._thread is None:
            return _REACHED  # nothing queued (inline, or not started): one shared set event
        ev = CPUEvent()
        self.mark(ev)
        return ev

    def __repr__(self) -> str:
        return f"CPUStream({self.name!r})"


_SIGNAL_OPS = {"set": "REPLACE", "add": "SUM"}


class CPUBackend(HostCollectives, HostMessages, Backend):
    """NumPy + BLAS + MPI-3 RMA backend over the communicator ``comm`` (collective).

    Attributes
    ----------
    signal_timeout : float
        Seconds a ``signal_wait`` waits before failing (``$BLASMP_SIGNAL_TIMEOUT``, default 60).
    max_message_elements : int
        Largest element count of one MPI message in :meth:`alltoallv` and :meth:`put`; larger
        transfers are split (tests lower it to exercise the splitting).
    """

    name = "cpu"
    xp = np
    host_resident = True
    has_geqrt = True
    compute: CPUStream
    comm_stream: CPUStream

    def __init__(self, comm: Any) -> None:
        from mpi4py import MPI

        if MPI.Query_thread() != MPI.THREAD_MULTIPLE:
            raise RuntimeError(
                "the CPU backend needs MPI initialised with MPI_THREAD_MULTIPLE (its streams are "
                "threads that call MPI concurrently); set `mpi4py.rc.thread_level = 'multiple'` "
                "before `from mpi4py import MPI` (that is mpi4py's default) or use an MPI library "
                "that provides THREAD_MULTIPLE"
            )
        if not env_flag("BLASMP_NO_ABORT"):
            _abort.install()
        self._MPI = MPI
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        # each rank's share of its node's cores (unless the user chose): _blas_threads.py
        self.blas_threads = _blas_threads.apply(comm)
        # host collectives and point-to-point messages on a private communicator, so their
        # tags can never match a user's messages
        self._pcomm = comm.Dup()
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)  # the ranks sharing this node's cores
        self.ranks_on_node = node.Get_size()
        node.Free()
        self.signal_timeout = float(
            os.environ.get("BLASMP_SIGNAL_TIMEOUT", "") or DEFAULT_SIGNAL_TIMEOUT
        )
        self.max_message_elements = 2**31 - 1
        self._failed = threading.Event()
        # SciPy's LAPACK is imported here, on the host thread, before any stream thread runs:
        # the kernels import it on first use, and two stream threads importing scipy.linalg
        # for the first time at once can fail with importlib's _DeadlockError (seen at 2 ranks
        # in tests/mpi/test_window_views.py). `import blasmp_array` itself stays SciPy-free.
        import scipy.linalg.lapack  # noqa: F401

        threads = env_flag("BLASMP_CPU_STREAM_THREADS")
        inline = self.size == 1 and not threads
        self.compute = CPUStream("compute", self._failed.set, inline)
        self.comm_stream = CPUStream("comm", self._failed.set, inline)
        self._live: dict[int, SymmetricBuffer | SignalSet] = {}
        self._names = itertools.count()
        # release the windows before mpi4py finalizes MPI (atexit runs last-registered first);
        # leaked windows make UCX print warnings at exit
        atexit.register(self._release_at_exit)

    # -- memory ---------------------------------------------------------------------------
    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return np.empty(shape, dtype=dtype)

    def _allocate(self, size: int, dtype: np.dtype) -> tuple[Any, np.ndarray]:
        MPI = self._MPI
        n = max(int(size), 1)
        win = MPI.Win.Allocate(n * dtype.itemsize, dtype.itemsize, comm=self.comm)
        win.Lock_all(MPI.MODE_NOCHECK)
        mem = np.frombuffer(win.tomemory(), dtype=dtype, count=n)
        return win, mem[:size]

    def alloc_symmetric(self, size: int, dtype: Any, name: str = "") -> SymmetricBuffer:
        dtype = np.dtype(dtype)
        size = int(size)
        if size < 0:
            raise ValueError(f"size must be >= 0, got {size}")
        win, arr = self._allocate(size, dtype)
        buf = SymmetricBuffer(arr, win, name or f"sym{next(self._names)}")
        self._live[id(buf)] = buf
        return buf

    def alloc_signals(self, count: int, name: str = "") -> SignalSet:
        count = int(count)
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        win, arr = self._allocate(count, np.dtype(np.uint64))
        arr[:] = 0
        win.Sync()
        self.comm.Barrier()  # nobody signals before everyone has zeroed
        sig = SignalSet(count, arr, win, name or f"sig{next(self._names)}")
        self._live[id(sig)] = sig
        return sig

    def free(self, obj: SymmetricBuffer | SignalSet) -> None:
        win = obj.handle
        if win is None:
            return
        self.synchronize()
        self.comm.Barrier()  # no peer still writes into it
        win.Unlock_all()
        win.Free()
        obj.handle = None
        self._live.pop(id(obj), None)

    def free_all(self) -> None:
        for obj in list(self._live.values()):
            self.free(obj)

    def _release_at_exit(self) -> None:
        MPI = self._MPI
        if not self._live or MPI.Is_finalized():
            return
        try:
            self.synchronize()
        except BaseException:  # noqa: S110 - errors were the program's to handle
            pass
        try:
            self.free_all()
        except BaseException:  # exiting anyway
            pass

    def asnumpy(self, a: Any) -> np.ndarray:
        return np.asarray(a)

    def asarray(self, a: Any, dtype: Any = None) -> np.ndarray:
        return np.asarray(a, dtype=dtype)

    # -- streams and events ---------------------------------------------------------------
    def record_event(self, stream: Stream) -> CPUEvent:
        assert isinstance(stream, CPUStream)
        return stream.drained()

    def wait_event(self, stream: Stream, event: Event) -> None:
        assert isinstance(stream, CPUStream) and isinstance(event, CPUEvent)
        if event.query():
            return
        stream.enqueue(self._wait_event, event)

    def _wait_event(self, event: CPUEvent) -> None:
        self._bounded_wait(event, "wait_event", cancel=True)

    def host_wait(self, event: Event) -> None:
        assert isinstance(event, CPUEvent)
        # not cancelled by another stream's failure: that error stays with its stream, for
        # synchronize() (raising here on one rank would leave the others in a collective)
        self._bounded_wait(event, "host_wait", cancel=False)

    def _bounded_wait(self, event: CPUEvent, what: str, cancel: bool) -> None:
        """Wait for ``event`` (on a stream thread, or the host). Events are always set
        eventually (markers run even on a failed stream), but the wait is bounded so that a bug
        cannot hang the job; ``cancel``: give up as soon as another stream failed."""
        deadline = time.monotonic() + max(self.signal_timeout, 1.0) * 2
        while not event.wait(0.05):
            if cancel and self._failed.is_set():
                raise StreamError(f"{what} cancelled: another stream failed")
            if time.monotonic() > deadline:
                raise SignalTimeoutError(f"rank {self.rank}: {what} did not complete")

    def launch(self, stream: Stream, fn: Callable[..., Any], *args: Any) -> None:
        assert isinstance(stream, CPUStream)
        stream.enqueue(fn, *args)

    def solve_local(self, a, b):  # type: ignore[override]
        self.synchronize()
        return _kernels.solve_transposed_lu(a, b)

    def _root_threads(self) -> Any:
        """:meth:`run_on_root`'s root borrows the BLAS threads of its node's waiting ranks."""
        if self.ranks_on_node <= 1:
            return super()._root_threads()
        return _blas_threads.node_share(self.ranks_on_node)

    def synchronize(self) -> None:
        streams = (self.compute, self.comm_stream)
        if all(s._thread is None and s.error is None for s in streams):
            # nothing was ever queued (inline streams, or not started) and nothing failed: the
            # common case of one process, where this call sits on every small operation's path
            return
        me = threading.current_thread()
        if any(s._thread is me for s in streams):
            raise RuntimeError(
                "synchronize()/barrier()/free() called from work running on a stream would wait "
                "for itself; call them from the host thread"
            )
        for ev in [s.drained() for s in streams]:
            ev.wait()
        errors = [s.error for s in streams if s.error is not None]
        for s in streams:
            s.error = None
        self._failed.clear()
        if errors:
            first = min(errors, key=lambda e: e[0])[1]
            raise first

    def begin(self) -> None:
        """No-op: host work is already complete when an operator starts."""

    # -- one-sided transport --------------------------------------------------------------
    def put(self, dst: SymmetricBuffer, dst_offset: int, src: Any, pe: int, stream: Stream) -> None:
        assert isinstance(stream, CPUStream)
        stream.enqueue(self._put, dst, int(dst_offset), src, int(pe))

    def _put(self, dst: SymmetricBuffer, offset: int, src: Any, pe: int) -> None:
        MPI = self._MPI
        src = np.ascontiguousarray(src, dtype=dst.dtype).reshape(-1)
        n = src.size
        if offset < 0 or offset + n > dst.size:
            raise ValueError(
                f"put of {n} elements at offset {offset} overflows {dst.name!r} "
                f"({dst.size} elements)"
            )
        if n == 0:
            return
        if pe == self.rank:
            dst.array[offset : offset + n] = src
            return
        win = dst.handle
        raw = src.view(np.uint8)
        item = dst.dtype.itemsize
        chunk = max(1, self.max_message_elements // item) * item  # bytes, whole elements
        for start in range(0, raw.size, chunk):
            part = raw[start : start + chunk]
            win.Put([part, MPI.BYTE], pe, target=(offset + start // item, part.size, MPI.BYTE))
        win.Flush(pe)

    def _signal(self, sig: SignalSet, index: int, value: int, pe: int, op: str) -> None:
        MPI = self._MPI
        if not 0 <= index < sig.count:
            raise IndexError(f"signal index {index} out of range for {sig.name!r} ({sig.count})")
        origin = np.array([value], dtype=np.uint64)
        win = sig.handle
        win.Accumulate(
            [origin, MPI.UINT64_T],
            pe,
            target=(index, 1, MPI.UINT64_T),
            op=getattr(MPI, _SIGNAL_OPS[op]),
        )
        win.Flush(pe)

    @staticmethod
    def _check_op(op: str) -> None:
        if op not in _SIGNAL_OPS:
            raise ValueError(f"signal op must be 'set' or 'add', got {op!r}")

    def put_signal(
        self,
        dst: SymmetricBuffer,
        dst_offset: int,
        src: Any,
        pe: int,
        sig: SignalSet,
        index: int,
        value: int,
        op: str,
        stream: Stream,
    ) -> None:
        assert isinstance(stream, CPUStream)
        self._check_op(op)

        def run() -> None:
            self._put(dst, int(dst_offset), src, int(pe))
            self._signal(sig, int(index), int(value), int(pe), op)

        stream.enqueue(run)

    def signal_op(
        self, sig: SignalSet, index: int, value: int, pe: int, op: str, stream: Stream
    ) -> None:
        assert isinstance(stream, CPUStream)
        self._check_op(op)
        stream.enqueue(self._signal, sig, int(index), int(value), int(pe), op)

    def signal_wait(
        self,
        sig: SignalSet,
        index: int,
        value: int,
        stream: Stream,
        what: str = "",
        peer: int | None = None,
    ) -> None:
        assert isinstance(stream, CPUStream)
        stream.enqueue(self._signal_wait, sig, int(index), int(value), what, peer)

    def _signal_wait(
        self, sig: SignalSet, index: int, value: int, what: str, peer: int | None
    ) -> None:
        if not 0 <= index < sig.count:
            raise IndexError(f"signal index {index} out of range for {sig.name!r} ({sig.count})")
        win = sig.handle
        word = sig.array
        if int(word[index]) >= value:
            return
        timeout = self.signal_timeout
        start = time.monotonic()
        pause = 5e-6
        while True:
            win.Sync()
            seen = int(word[index])
            if seen >= value:
                return
            if self._failed.is_set():
                raise StreamError(
                    f"rank {self.rank}: signal_wait ({what or '?'}) on {sig.name}[{index}] "
                    "cancelled because another stream of this process failed"
                )
            if time.monotonic() - start > timeout:
                raise SignalTimeoutError(
                    f"rank {self.rank}: {what or 'signal_wait'}: timed out after {timeout:g} s "
                    f"waiting for signal {sig.name}[{index}] >= {value} (value seen: {seen}); "
                    f"expected from peer "
                    f"{peer if peer is not None else '(unknown)'}. A peer failed, deadlocked "
                    "or never sent it; raise BLASMP_SIGNAL_TIMEOUT if it is only slow."
                )
            time.sleep(pause)
            pause = min(pause * 2, 5e-4)

    def quiet(self, stream: Stream) -> None:
        # puts flush before they complete on their stream: nothing is outstanding
        assert isinstance(stream, CPUStream)

    def barrier(self) -> None:
        self.synchronize()
        self.comm.Barrier()

    # -- host collectives -----------------------------------------------------------------
    def alltoallv(self, send: Sequence[Any], recv: Sequence[Any]) -> None:
        MPI = self._MPI
        p = self.size
        if len(send) != p or len(recv) != p:
            raise ValueError(f"send and recv need one array per process ({p})")
        limit = max(1, int(self.max_message_elements))
        reqs = []
        copies = []
        for src in range(p):
            buf = recv[src]
            if src == self.rank or buf.size == 0:
                continue
            target = buf if buf.flags.c_contiguous else np.empty(buf.shape, buf.dtype)
            if target is not buf:
                copies.append((buf, target))
            flat = target.reshape(-1)
            for j, s in enumerate(range(0, flat.size, limit)):
                reqs.append(self._pcomm.Irecv(flat[s : s + limit], source=src, tag=j))
        keep = []
        for dst in range(p):
            data = send[dst]
            if dst == self.rank:
                if data.size:
                    recv[dst][...] = np.asarray(data).reshape(recv[dst].shape)
                continue
            if data.size == 0:
                continue
            flat = np.ascontiguousarray(data).reshape(-1)
            keep.append(flat)
            for j, s in enumerate(range(0, flat.size, limit)):
                reqs.append(self._pcomm.Isend(flat[s : s + limit], dest=dst, tag=j))
        MPI.Request.Waitall(reqs)
        for buf, tmp in copies:
            buf[...] = tmp

    # -- local BLAS3 ----------------------------------------------------------------------
    def gemm(self, alpha, a, b, beta, c, trans_a, trans_b, stream):  # type: ignore[override]
        assert isinstance(stream, CPUStream)
        stream.enqueue(_kernels.gemm, alpha, a, b, beta, c, trans_a, trans_b)

    def syrk(self, alpha, a, beta, c, uplo, trans, stream):  # type: ignore[override]
        assert isinstance(stream, CPUStream)
        stream.enqueue(_kernels.syrk, alpha, a, beta, c, uplo, trans)

    def syr2k(self, alpha, a, b, beta, c, uplo, trans, stream):  # type: ignore[override]
        assert isinstance(stream, CPUStream)
        stream.enqueue(_kernels.syr2k, alpha, a, b, beta, c, uplo, trans)

    def trmm(self, alpha, a, b, side, uplo, trans, diag, stream, out=None):  # type: ignore[override]
        assert isinstance(stream, CPUStream)
        stream.enqueue(_kernels.trmm, alpha, a, b, side, uplo, trans, diag, out)

    def trsm(self, alpha, a, b, side, uplo, trans, diag, stream):  # type: ignore[override]
        assert isinstance(stream, CPUStream)
        stream.enqueue(_kernels.trsm, alpha, a, b, side, uplo, trans, diag)

    def potrf(self, a, uplo, info, stream):  # type: ignore[override]
        assert isinstance(stream, CPUStream)
        stream.enqueue(_kernels.potrf, a, uplo, info)

    def getrf(self, a, ipiv, info, stream):  # type: ignore[override]
        assert isinstance(stream, CPUStream)
        stream.enqueue(_kernels.getrf, a, ipiv, info)

    def modified_lu(self, a, d, stream):  # type: ignore[override]
        assert isinstance(stream, CPUStream)
        stream.enqueue(_kernels.modified_lu, a, d)

    # -- random construction ------------------------------------------------------------
    def random_fill(
        self,
        out: Any,
        layout: Any,
        coords: tuple[int, int],
        key: tuple[int, int],
        dist: str,
        low: float = 0.0,
        high: float = 1.0,
        local_rows: tuple[int, int] | None = None,
    ) -> None:
        """NumPy's Philox (``blasmp_array._philox.fill_local``) on this process's host threads
        (:attr:`host_copier`: its share of the node's cores), each filling a range of rows: the
        values depend on the global positions only, so the split changes no value."""
        r0, r1 = (0, out.shape[0]) if local_rows is None else local_rows
        rows = layout.local_rows(coords[0])[r0:r1]
        cols = layout.local_cols(coords[1])
        dst = out[r0:r1]

        def fill(a: int, b: int) -> None:
            fill_local(dst[a:b], rows[a:b], cols, key, dist, low, high)

        # a drawn and transformed element costs about RANDOM_COST copied bytes (splitting
        # pays from a few hundred thousand elements, as for a copy of MIN_SPLIT_BYTES)
        self.host_copier.run(fill, 0, rows.size, RANDOM_COST * cols.size * out.itemsize)

    def geqrf(self, a, tau, info, stream):  # type: ignore[override]
        assert isinstance(stream, CPUStream)
        stream.enqueue(_kernels.geqrf, a, tau, info)

    def geqrt(self, a, tau, t, info, stream):  # type: ignore[override]
        assert isinstance(stream, CPUStream)
        stream.enqueue(_kernels.geqrt, a, tau, t, info)

    def orgqr(self, a, tau, info, stream):  # type: ignore[override]
        assert isinstance(stream, CPUStream)
        stream.enqueue(_kernels.orgqr, a, tau, info)

    def ormqr(self, side, trans, a, tau, c, info, stream):  # type: ignore[override]
        assert isinstance(stream, CPUStream)
        stream.enqueue(_kernels.ormqr, side, trans, a, tau, c, info)

    def eigh_local(self, a, lower, vectors, subset_by_index=None, subset_by_value=None):  # type: ignore[override]
        from scipy.linalg import eigh

        subset = subset_by_index is not None or subset_by_value is not None
        out = eigh(
            a,
            lower=lower,
            eigvals_only=not vectors,
            subset_by_index=subset_by_index,
            subset_by_value=subset_by_value,
            driver="evr" if subset else "evd",
            check_finite=False,
        )
        return (out[0], out[1]) if vectors else (out, None)

    def gesdd(self, a, full_matrices, compute_uv, driver="gesdd"):  # type: ignore[override]
        from scipy.linalg import LinAlgError, svd

        def run(drv: str) -> Any:
            return svd(
                a,
                full_matrices=bool(full_matrices),
                compute_uv=bool(compute_uv),
                check_finite=False,
                lapack_driver=drv,
            )

        try:
            return run(driver)
        except LinAlgError:
            if driver != "gesdd":
                raise
            return run("gesvd")  # xgesdd's rare non-convergence: QR iteration instead

    def __repr__(self) -> str:
        return f"CPUBackend(rank={self.rank}, size={self.size})"


from . import _cpu_kernels as _kernels  # noqa: E402
