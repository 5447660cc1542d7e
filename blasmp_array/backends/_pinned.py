"""Pinned host staging of the GPU backend: host <-> device copies at the link's rate.

A copy between pageable host memory and the device runs at a fraction of the link (measured on
one H200, 2 GiB: ``cupy.asarray`` 7.9 GB/s, ``cupy.asnumpy`` 2.6 GB/s) while a copy from or to
page-locked memory reaches 55 GB/s, and pinning memory per call costs more than it saves. So
each process keeps two pinned buffers (``cupyx.empty_pinned``, :data:`._staging.CHUNK_BYTES`
each, allocated on first use, grown on demand, reused by every later transfer) and streams a
matrix through them in row chunks (:func:`._staging.upload` / :func:`._staging.download`): the
host threads of :class:`._staging.HostCopier` copy between the user's (possibly strided) host
matrix and one buffer while the DMA of the other runs on a dedicated stream
(``ndarray.set(buf, stream=...)``, ``ndarray.get(stream=..., out=buf, blocking=False)``).

Ordering: the copy stream first waits for every stream that may still write the source (the
backend's compute and comm streams and the current CuPy stream, events only, no host block); an
upload ends with the current stream waiting for the copy stream, so that what the caller (or an
operator, ordered after the current stream) enqueues next sees the data. Both return after
their last DMA completed (the host has read or written the buffers).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import cupy
import cupyx
import numpy as np

from .._local_views import LocalView
from ._staging import HostCopier, StagingPool, download, recv_staged, send_staged, upload

__all__ = ["PinnedStaging"]


def _event(stream: Any) -> Any:
    ev = cupy.cuda.Event(disable_timing=True)
    ev.record(stream)
    return ev


class PinnedStaging:
    """The pinned buffers, copy stream and host threads of one process (created on first use).

    Attributes
    ----------
    pool : StagingPool
        The two pinned buffers; ``pool.allocations`` counts the buffers pinned so far.
    copier : HostCopier
        The host copy threads.
    """

    def __init__(self, copier: HostCopier) -> None:
        self.copier = copier
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.pool = StagingPool(self._pin, on_grow=self.stream.synchronize)
        # one transfer at a time uses the buffers (callers on other threads, e.g. I/O workers
        # calling backend.asarray, wait for it)
        self.lock = threading.RLock()

    @staticmethod
    def _pin(nbytes: int) -> np.ndarray:
        return cupyx.empty_pinned((nbytes,), dtype=np.uint8)

    def _after(self, streams: Sequence[Any]) -> None:
        """Order the copy stream after the work enqueued so far on ``streams`` and on the
        current stream."""
        for s in [*streams, cupy.cuda.get_current_stream()]:
            self.stream.wait_event(_event(s))

    def upload(self, src: LocalView, dev: cupy.ndarray, after: Sequence[Any] = ()) -> None:
        """``dev[...] = src`` (a C-contiguous 2-D device array shaped like ``src``)."""
        with self.lock:
            self._after(after)

            def dma_in(lo: int, hi: int, rows: np.ndarray) -> Any:
                dev[lo:hi].set(rows, stream=self.stream)
                return _event(self.stream)

            upload(src, dev.shape, dev.dtype, self.pool, self.copier, dma_in, _synchronize)
            cupy.cuda.get_current_stream().wait_event(_event(self.stream))

    def download(
        self,
        dev: cupy.ndarray,
        dst: LocalView,
        conjugate: bool = False,
        after: Sequence[Any] = (),
    ) -> None:
        """``dst[...] = dev`` (conjugated if asked; ``dev`` C-contiguous 2-D, shaped like
        ``dst``)."""
        with self.lock:
            self._after(after)

            def dma_out(lo: int, hi: int, rows: np.ndarray) -> Any:
                dev[lo:hi].get(stream=self.stream, out=rows, blocking=False)
                return _event(self.stream)

            download(
                dst, dev.shape, dev.dtype, self.pool, self.copier, dma_out, _synchronize, conjugate
            )

    def send(
        self,
        dev: cupy.ndarray,
        chunks: Sequence[tuple[int, int]],
        post_sends: Callable[[int, np.ndarray], list[Any]],
        wait_requests: Callable[[list[Any]], None],
        after: Sequence[Any] = (),
    ) -> None:
        """Send the row chunks of ``dev`` (C-contiguous 2-D) from the pinned buffers:
        ``post_sends(k, rows)`` starts the messages of chunk ``k`` (see
        :func:`._staging.send_staged`)."""
        with self.lock:
            self._after(after)

            def dma_out(lo: int, hi: int, rows: np.ndarray) -> Any:
                dev[lo:hi].get(stream=self.stream, out=rows, blocking=False)
                return _event(self.stream)

            send_staged(
                chunks,
                dev.shape[1],
                dev.dtype,
                self.pool,
                dma_out,
                _synchronize,
                post_sends,
                wait_requests,
            )

    def recv(
        self,
        dev: cupy.ndarray,
        chunks: Sequence[tuple[int, int]],
        post_recvs: Callable[[int, np.ndarray], list[Any]],
        wait_requests: Callable[[list[Any]], None],
        after: Sequence[Any] = (),
    ) -> None:
        """Receive the row chunks of ``dev`` (C-contiguous 2-D) through the pinned buffers:
        ``post_recvs(k, rows)`` starts the receives of chunk ``k`` (see
        :func:`._staging.recv_staged`)."""
        with self.lock:
            self._after(after)

            def dma_in(lo: int, hi: int, rows: np.ndarray) -> Any:
                dev[lo:hi].set(rows, stream=self.stream)
                return _event(self.stream)

            recv_staged(
                chunks,
                dev.shape[1],
                dev.dtype,
                self.pool,
                post_recvs,
                wait_requests,
                dma_in,
                _synchronize,
            )
            cupy.cuda.get_current_stream().wait_event(_event(self.stream))


def _synchronize(event: Any) -> None:
    event.synchronize()
