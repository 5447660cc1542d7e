"""Host copies on several threads, and the double-buffered staging pipeline of device transfers.

This module knows no device: the GPU backend (``backends/_pinned.py``) plugs its DMA calls into
:func:`upload` and :func:`download`, and the tests run the same pipelines with a NumPy "device".

Host copies
-----------
:class:`HostCopier` runs the copy of a range of local rows (:class:`~blasmp_array._local_views.
LocalView`) on a few threads, each taking a slice of the rows: NumPy's copy loops release the
GIL, and one thread does not reach the memory bandwidth (one host thread's ``np.copyto`` into
pinned memory measured 9.9 GB/s on the GPU node, the device link 55 GB/s). Writing a fresh
``np.empty`` from several threads also spreads its first-touch page faults over them.

Staging pipeline
----------------
A local matrix moves between the host and the device in chunks of whole local rows (a row range
of a C-ordered device array is contiguous) through a :class:`StagingPool` of two host buffers
of ``CHUNK_BYTES`` allocated once and reused (pinned memory on the GPU: pinning per call costs
more than it saves). While the threads fill (or drain) one buffer, the DMA of the other runs:
chunk ``k`` uses buffer ``k % 2``, and a buffer is reused only after the DMA that last touched
it has completed (its token was waited for). A chunk holds ``CHUNK_BYTES`` (at least one row;
a row wider than that grows the buffers to one row).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .._local_views import LocalView

__all__ = [
    "CHUNK_BYTES",
    "MAX_COPY_THREADS",
    "MIN_SPLIT_BYTES",
    "HostCopier",
    "StagingPool",
    "row_chunks",
    "copy_threads",
    "upload",
    "download",
    "send_staged",
    "recv_staged",
    "rows_of",
]

#: Bytes of one staging chunk (each of the two buffers of a :class:`StagingPool`); tests lower it
#: to force many chunks.
CHUNK_BYTES = 64 * 2**20

#: Most threads one process copies with (memory bandwidth saturates before the cores do).
MAX_COPY_THREADS = 8

#: A copy smaller than this many bytes per thread runs on fewer threads (on the caller's alone
#: below it): a thread hand-off costs tens of microseconds.
MIN_SPLIT_BYTES = 4 * 2**20


def copy_threads(
    ranks_on_node: int, cpu_count: int | None = None, affinity: int | None = None
) -> int:
    """Threads one process copies with: the cores it may run on, shared with the other ranks of
    its node when it is not bound to its own (its affinity covers every core), at most
    :data:`MAX_COPY_THREADS`."""
    total = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    if affinity is None:
        try:
            affinity = len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            affinity = total
    share = affinity if affinity < total else total // max(1, ranks_on_node)
    return max(1, min(MAX_COPY_THREADS, share))


def row_chunks(shape: tuple[int, int], itemsize: int) -> list[tuple[int, int]]:
    """Row ranges ``[lo, hi)`` of ``CHUNK_BYTES`` each (at least one row) covering the rows of a
    ``shape`` matrix; the same on every rank for the same shape (ranks agree on message
    counts); none for an empty matrix."""
    nrows, ncols = shape
    if nrows <= 0 or ncols <= 0:
        return []
    step = max(1, CHUNK_BYTES // max(1, ncols * itemsize))
    return [(lo, min(nrows, lo + step)) for lo in range(0, nrows, step)]


class HostCopier:
    """Copies ranges of local rows between host arrays on up to ``threads`` threads.

    ``threads`` is this process's share of its node's cores. Inside :meth:`on_all_cores` the
    copies use up to ``node_threads`` (when the other ranks of the node wait for this one, e.g.
    the root of a gather). The pool of threads starts on the first copy large enough to split.
    Several threads may copy at once (they share the pool).
    """

    def __init__(self, threads: int, node_threads: int | None = None) -> None:
        self.threads = max(1, int(threads))
        self.node_threads = max(self.threads, int(node_threads or 0))
        self._state = threading.local()  # on_all_cores holds for the thread that asked
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.node_threads, thread_name_prefix="blasmp-copy")
            return self._pool

    @contextlib.contextmanager
    def on_all_cores(self, wide: bool = True) -> Iterator[None]:
        """Within the block, copy on ``node_threads`` threads (if ``wide``)."""
        before = getattr(self._state, "wide", False)
        self._state.wide = before or wide
        try:
            yield
        finally:
            self._state.wide = before

    def split(self, lo: int, hi: int, rowbytes: int) -> list[tuple[int, int]]:
        """``[lo, hi)`` cut into at most ``threads`` (``node_threads`` inside
        :meth:`on_all_cores`) ranges of at least ``MIN_SPLIT_BYTES``."""
        n = hi - lo
        most = self.node_threads if getattr(self._state, "wide", False) else self.threads
        parts = min(most, n, max(1, (n * rowbytes) // max(1, MIN_SPLIT_BYTES)))
        if parts <= 1:
            return [(lo, hi)] if n > 0 else []
        bounds = [lo + (n * i) // parts for i in range(parts + 1)]
        return [(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]

    def run(self, fn: Callable[[int, int], Any], lo: int, hi: int, rowbytes: int) -> None:
        """``fn(a, b)`` over a partition of ``[lo, hi)``, on the threads; returns when all are
        done and re-raises the first error."""
        parts = self.split(lo, hi, rowbytes)
        if len(parts) <= 1:
            for a, b in parts:
                fn(a, b)
            return
        futures = [self._executor().submit(fn, a, b) for a, b in parts[1:]]
        try:
            fn(*parts[0])  # the caller's thread takes the first part
        finally:
            errors = [f.exception() for f in futures]
        for exc in errors:
            if exc is not None:
                raise exc

    def read(self, src: LocalView, lo: int, hi: int, out: np.ndarray) -> None:
        """``out[...] = src``'s local rows ``[lo, hi)`` (``out`` holds just those rows)."""
        rowbytes = src.shape[1] * max(out.itemsize, src.dtype.itemsize)
        self.run(lambda a, b: src.read(a, b, out[a - lo : b - lo]), lo, hi, rowbytes)

    def write(
        self, dst: LocalView, lo: int, hi: int, data: np.ndarray, conjugate: bool = False
    ) -> None:
        """``dst``'s local rows ``[lo, hi)`` ``= data`` (which holds just those rows)."""
        rowbytes = dst.shape[1] * max(data.itemsize, dst.dtype.itemsize)
        self.run(lambda a, b: dst.write(a, b, data[a - lo : b - lo], conjugate), lo, hi, rowbytes)

    def close(self) -> None:
        """Stop the threads (a later copy starts them again)."""
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None


class StagingPool:
    """Two host buffers, allocated on first use and kept for later transfers; grown (never
    shrunk) when a transfer needs larger ones.

    ``allocate(nbytes)`` returns a 1-D ``uint8`` NumPy array (pinned memory on the GPU).
    ``on_grow()`` is called before the buffers are replaced, so that the owner can wait for
    transfers still using them.

    Attributes
    ----------
    allocations : int
        Buffers allocated so far (tests check that calls reuse them).
    nbytes : int
        Size of each buffer now.
    """

    def __init__(
        self, allocate: Callable[[int], np.ndarray], on_grow: Callable[[], None] | None = None
    ) -> None:
        self._allocate = allocate
        self._on_grow = on_grow
        self._buffers: list[np.ndarray] = []
        self.allocations = 0
        self.nbytes = 0

    def buffers(self, nbytes: int) -> Sequence[np.ndarray]:
        """The buffers, each at least ``nbytes`` long (allocated or grown now if needed)."""
        if nbytes > self.nbytes or not self._buffers:
            if self._on_grow is not None and self._buffers:
                self._on_grow()
            size = max(nbytes, 1)
            self._buffers = []  # drop the old ones before pinning the new
            self._buffers = [self._allocate(size) for _ in range(2)]
            self.allocations += 2
            self.nbytes = size
        return self._buffers

    def clear(self) -> None:
        """Release the buffers (the next transfer allocates them again)."""
        if self._on_grow is not None and self._buffers:
            self._on_grow()
        self._buffers = []
        self.nbytes = 0


def _buffers(
    pool: StagingPool, chunks: Sequence[tuple[int, int]], ncols: int, dt: np.dtype
) -> Sequence[np.ndarray]:
    """The pool's two buffers, each at least ``CHUNK_BYTES`` and one chunk of ``chunks``: sized
    once for every later transfer (a wider row than ``CHUNK_BYTES`` grows them)."""
    need = max(hi - lo for lo, hi in chunks) * ncols * dt.itemsize
    return pool.buffers(max(CHUNK_BYTES, need))


def rows_of(buf: np.ndarray, rows: int, ncols: int, dtype: np.dtype) -> np.ndarray:
    """The first ``rows x ncols`` elements of the byte buffer ``buf`` as a C-ordered matrix."""
    return buf[: rows * ncols * dtype.itemsize].view(dtype).reshape(rows, ncols)


def upload(
    src: LocalView,
    shape: tuple[int, int],
    dtype: Any,
    pool: StagingPool,
    copier: HostCopier,
    dma_in: Callable[[int, int, np.ndarray], Any],
    wait: Callable[[Any], None],
) -> None:
    """Stream ``src`` (a local matrix of ``shape`` on the host) to the device in row chunks.

    For chunk ``k`` (local rows ``[lo, hi)``): wait for the DMA that last read buffer ``k % 2``,
    fill it on the threads (cast to ``dtype``), then ``token = dma_in(lo, hi, rows)`` enqueues its
    copy to the device rows ``[lo, hi)``. Returns when every DMA has completed.
    """
    dt = np.dtype(dtype)
    rows, ncols = shape
    chunks = row_chunks((rows, ncols), dt.itemsize)
    if not chunks:
        return
    bufs = _buffers(pool, chunks, ncols, dt)
    tokens: list[Any] = [None, None]
    try:
        for k, (lo, hi) in enumerate(chunks):
            if tokens[k % 2] is not None:
                token, tokens[k % 2] = tokens[k % 2], None
                wait(token)  # the DMA of chunk k - 2 has read this buffer
            stage = rows_of(bufs[k % 2], hi - lo, ncols, dt)
            copier.read(src, lo, hi, stage)
            tokens[k % 2] = dma_in(lo, hi, stage)
    except BaseException:
        _wait_quietly(wait, [t for t in tokens if t is not None])
        raise
    for t in tokens:
        if t is not None:
            wait(t)


def download(
    dst: LocalView,
    shape: tuple[int, int],
    dtype: Any,
    pool: StagingPool,
    copier: HostCopier,
    dma_out: Callable[[int, int, np.ndarray], Any],
    wait: Callable[[Any], None],
    conjugate: bool = False,
) -> None:
    """Stream a device local matrix of ``shape`` and ``dtype`` to ``dst`` on the host.

    ``token = dma_out(lo, hi, rows)`` enqueues the copy of device rows ``[lo, hi)`` into the
    staging buffer ``rows``. Two chunks are in flight: while the threads drain buffer ``k % 2``
    into ``dst`` (conjugating if asked), the DMA of chunk ``k + 1`` fills the other one.
    """
    dt = np.dtype(dtype)
    rows, ncols = shape
    chunks = row_chunks((rows, ncols), dt.itemsize)
    if not chunks:
        return
    bufs = _buffers(pool, chunks, ncols, dt)

    def issue(k: int) -> tuple[Any, np.ndarray]:
        lo, hi = chunks[k]
        stage = rows_of(bufs[k % 2], hi - lo, ncols, dt)
        return dma_out(lo, hi, stage), stage

    pending: list[tuple[Any, np.ndarray]] = []
    try:
        for k in range(min(2, len(chunks))):
            pending.append(issue(k))
        for k, (lo, hi) in enumerate(chunks):
            token, stage = pending.pop(0)
            wait(token)
            copier.write(dst, lo, hi, stage, conjugate)
            if k + 2 < len(chunks):
                pending.append(issue(k + 2))  # this buffer is drained: refill it
    except BaseException:
        _wait_quietly(wait, [t for t, _ in pending])
        raise


def _wait_quietly(wait: Callable[[Any], None], tokens: Sequence[Any]) -> None:
    """After an error: let the DMAs still in flight land before a later transfer refills their
    buffers (their own errors are secondary to the one being raised)."""
    for t in tokens:
        try:
            wait(t)
        except Exception:  # noqa: BLE001, S112 - the first error is the one reported
            continue


def send_staged(
    chunks: Sequence[tuple[int, int]],
    ncols: int,
    dtype: Any,
    pool: StagingPool,
    dma_out: Callable[[int, int, np.ndarray], Any],
    wait: Callable[[Any], None],
    post_sends: Callable[[int, np.ndarray], list[Any]],
    wait_requests: Callable[[list[Any]], None],
) -> None:
    """Send device row chunks through the staging buffers: chunk ``k`` is copied into buffer
    ``k % 2`` (``dma_out``, waited for) and handed to ``post_sends(k, rows)``; the buffer is
    refilled only after those sends completed, so the DMA of chunk ``k + 1`` overlaps the sends
    of chunk ``k``. Returns when every send is complete."""
    dt = np.dtype(dtype)
    if not chunks:
        return
    bufs = _buffers(pool, chunks, ncols, dt)
    sends: list[list[Any]] = [[], []]
    try:
        for k, (lo, hi) in enumerate(chunks):
            if sends[k % 2]:
                reqs, sends[k % 2] = sends[k % 2], []
                wait_requests(reqs)  # chunk k - 2 has left this buffer
            stage = rows_of(bufs[k % 2], hi - lo, ncols, dt)
            wait(dma_out(lo, hi, stage))
            sends[k % 2] = post_sends(k, stage)
    finally:
        wait_requests(sends[0] + sends[1])


def recv_staged(
    chunks: Sequence[tuple[int, int]],
    ncols: int,
    dtype: Any,
    pool: StagingPool,
    post_recvs: Callable[[int, np.ndarray], list[Any]],
    wait_requests: Callable[[list[Any]], None],
    dma_in: Callable[[int, int, np.ndarray], Any],
    wait: Callable[[Any], None],
) -> None:
    """Receive row chunks into the device through the staging buffers: the receives of two
    chunks are posted ahead (``post_recvs(k, rows)``); when chunk ``k`` has arrived in buffer
    ``k % 2`` its DMA to the device rows starts (``dma_in``), and once that DMA has read the
    buffer the receives of chunk ``k + 2`` are posted into it. Returns when every chunk is on
    the device."""
    dt = np.dtype(dtype)
    if not chunks:
        return
    bufs = _buffers(pool, chunks, ncols, dt)

    def post(k: int) -> tuple[list[Any], np.ndarray]:
        lo, hi = chunks[k]
        stage = rows_of(bufs[k % 2], hi - lo, ncols, dt)
        return post_recvs(k, stage), stage

    pending: list[tuple[list[Any], np.ndarray]] = []
    try:
        for k in range(min(2, len(chunks))):
            pending.append(post(k))
        for k, (lo, hi) in enumerate(chunks):
            reqs, stage = pending.pop(0)
            wait_requests(reqs)
            wait(dma_in(lo, hi, stage))  # the buffer is free again once its DMA has read it
            if k + 2 < len(chunks):
                pending.append(post(k + 2))
    finally:
        # after an error, the posted receives still land in the buffers: complete them first
        wait_requests([r for reqs, _ in pending for r in reqs])
