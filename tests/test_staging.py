"""Tests of backends/_staging.py without a device: the threaded host copies, the staging pool
and the double-buffered upload/download pipelines, driven by a NumPy "device" whose DMA calls
record what they did (the GPU backend plugs CUDA copies into the same pipelines)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from blasmp_array._local_views import local_view, whole_view
from blasmp_array.backends import _staging
from blasmp_array.backends._staging import (
    HostCopier,
    StagingPool,
    copy_threads,
    download,
    row_chunks,
    upload,
)
from blasmp_array.layout import BlockCyclicLayout


def test_copy_threads():
    # unbound (affinity covers every core): the node's cores shared by its ranks
    assert copy_threads(1, cpu_count=2, affinity=2) == 2
    assert copy_threads(2, cpu_count=2, affinity=2) == 1
    assert copy_threads(6, cpu_count=2, affinity=2) == 1
    assert copy_threads(4, cpu_count=16, affinity=16) == 4
    # bound to its own cores: those
    assert copy_threads(4, cpu_count=16, affinity=3) == 3
    # never more than MAX_COPY_THREADS
    assert copy_threads(1, cpu_count=128, affinity=128) == _staging.MAX_COPY_THREADS


def test_row_chunks(monkeypatch):
    monkeypatch.setattr(_staging, "CHUNK_BYTES", 100)
    assert row_chunks((10, 3), 8) == [(0, 4), (4, 8), (8, 10)]  # 4 rows of 24 bytes
    assert row_chunks((3, 50), 8) == [(0, 1), (1, 2), (2, 3)]  # at least one row
    assert row_chunks((0, 5), 8) == [] and row_chunks((5, 0), 8) == []


def test_split_sizes_the_threads_by_bytes(monkeypatch):
    copier = HostCopier(4)
    monkeypatch.setattr(_staging, "MIN_SPLIT_BYTES", 1000)
    assert copier.split(0, 10, 100) == [(0, 10)]  # 1000 bytes: one part
    assert copier.split(0, 10, 250) == [(0, 5), (5, 10)]  # 2500 bytes: two parts
    assert copier.split(3, 103, 10**6) == [(3, 28), (28, 53), (53, 78), (78, 103)]
    assert copier.split(0, 2, 10**6) == [(0, 1), (1, 2)]  # no more parts than rows
    assert copier.split(5, 5, 100) == []
    wide = HostCopier(2, node_threads=4)
    assert len(wide.split(0, 100, 10**6)) == 2
    # the widening holds for the thread that asked only
    seen = []
    with wide.on_all_cores():
        t = threading.Thread(target=lambda: seen.append(len(wide.split(0, 100, 10**6))))
        t.start()
        t.join()
    assert seen == [2]
    with wide.on_all_cores():
        assert len(wide.split(0, 100, 10**6)) == 4
        with wide.on_all_cores(False):  # nested: stays wide
            assert len(wide.split(0, 100, 10**6)) == 4
    assert len(wide.split(0, 100, 10**6)) == 2


def test_copier_runs_on_several_threads_and_reraises(monkeypatch):
    monkeypatch.setattr(_staging, "MIN_SPLIT_BYTES", 1)
    copier = HostCopier(3)
    seen = set()
    barrier = threading.Barrier(3, timeout=10)

    def work(a, b):
        seen.add(threading.get_ident())
        barrier.wait()  # three parts at once: only possible on three threads

    copier.run(work, 0, 30, 8)
    assert len(seen) == 3

    def fail(a, b):
        if a > 0:
            raise RuntimeError(f"part {a}")

    with pytest.raises(RuntimeError, match="part"):
        copier.run(fail, 0, 30, 8)
    copier.close()


def test_threaded_read_and_write_of_a_local_view(monkeypatch):
    monkeypatch.setattr(_staging, "MIN_SPLIT_BYTES", 64)
    layout = BlockCyclicLayout((57, 41), (4, 3), (3, 2))
    a = np.random.default_rng(0).standard_normal(layout.shape)
    copier = HostCopier(4)
    back = np.full(layout.shape, np.nan)
    for prow in range(3):
        for pcol in range(2):
            ref = a[np.ix_(layout.local_rows(prow), layout.local_cols(pcol))]
            got = np.full(ref.shape, np.nan, dtype=np.float32)
            copier.read(local_view(a, layout, prow, pcol), 0, ref.shape[0], got)
            np.testing.assert_array_equal(got, ref.astype(np.float32))
            copier.write(local_view(back, layout, prow, pcol), 0, ref.shape[0], ref)
    np.testing.assert_array_equal(back, a)
    copier.close()


class FakeDevice:
    """A NumPy 'device' array with DMA calls that record the chunks and the buffers used, and
    check that no buffer is refilled before the DMA that last used it was waited for."""

    def __init__(self, shape, dtype):
        self.data = np.full(shape, np.nan, dtype=dtype)
        self.log = []  # (direction, lo, hi, buffer address)
        self.busy = set()  # buffer addresses with a DMA not yet waited for

    def _start(self, direction, lo, hi, rows):
        addr = rows.__array_interface__["data"][0]
        assert addr not in self.busy, "a staging buffer was reused while its DMA was in flight"
        self.busy.add(addr)
        self.log.append((direction, lo, hi, addr))
        return addr

    def dma_in(self, lo, hi, rows):
        self.data[lo:hi] = rows
        return self._start("in", lo, hi, rows)

    def dma_out(self, lo, hi, rows):
        rows[...] = self.data[lo:hi]
        return self._start("out", lo, hi, rows)

    def wait(self, token):
        self.busy.discard(token)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.bool_])
def test_upload_and_download_stream_through_two_reused_buffers(monkeypatch, dtype):
    monkeypatch.setattr(_staging, "CHUNK_BYTES", 4 * 8 * np.dtype(dtype).itemsize)  # 4 rows
    monkeypatch.setattr(_staging, "MIN_SPLIT_BYTES", 16)
    layout = BlockCyclicLayout((61, 20), (3, 4), (2, 3))
    rng = np.random.default_rng(1)
    a = rng.standard_normal(layout.shape)
    a = (a > 0.3) if dtype == np.bool_ else a.astype(dtype)
    pool = StagingPool(lambda n: np.empty(n, np.uint8))
    copier = HostCopier(3)
    view = local_view(a, layout, 1, 1)
    assert view.shape == (30, 8)
    dev = FakeDevice(view.shape, dtype)
    upload(view, view.shape, dtype, pool, copier, dev.dma_in, dev.wait)
    np.testing.assert_array_equal(dev.data, a[np.ix_(layout.local_rows(1), layout.local_cols(1))])
    assert not dev.busy
    chunks = [(lo, hi) for _, lo, hi, _ in dev.log]
    assert chunks == row_chunks(view.shape, np.dtype(dtype).itemsize) and len(chunks) == 8
    buffers = [addr for *_, addr in dev.log]
    assert len(set(buffers)) == 2 and buffers[0::2] == [buffers[0]] * 4  # alternating
    # download into a fresh global matrix, through the same two buffers
    dev.log.clear()
    back = np.zeros(layout.shape, dtype)
    download(local_view(back, layout, 1, 1), view.shape, dtype, pool, copier, dev.dma_out, dev.wait)
    np.testing.assert_array_equal(
        back[np.ix_(layout.local_rows(1), layout.local_cols(1))], dev.data
    )
    assert not dev.busy and {addr for *_, addr in dev.log} == set(buffers)
    assert pool.allocations == 2  # pinned once, reused by every later transfer
    copier.close()


def test_buffers_are_sized_once_to_a_chunk(monkeypatch):
    monkeypatch.setattr(_staging, "CHUNK_BYTES", 1000)
    pool = StagingPool(lambda n: np.empty(n, np.uint8))
    copier = HostCopier(1)
    dev = FakeDevice((10, 3), np.float64)
    upload(whole_view(np.ones((10, 3))), (10, 3), np.float64, pool, copier, dev.dma_in, dev.wait)
    assert pool.allocations == 2 and pool.nbytes == 1000  # a whole chunk, not just 240 bytes
    wide = np.ones((2, 200))  # one row of 1600 bytes: the buffers grow to one row
    dev = FakeDevice((2, 200), np.float64)
    upload(whole_view(wide), (2, 200), np.float64, pool, copier, dev.dma_in, dev.wait)
    assert pool.allocations == 4 and pool.nbytes == 1600
    np.testing.assert_array_equal(dev.data, wide)


def test_pool_grows_only_when_a_chunk_is_larger(monkeypatch):
    grown = []
    pool = StagingPool(lambda n: np.empty(n, np.uint8), on_grow=lambda: grown.append(1))
    first = pool.buffers(100)
    assert pool.allocations == 2 and pool.nbytes == 100 and not grown
    assert pool.buffers(60) is first and pool.allocations == 2
    pool.buffers(101)
    assert pool.allocations == 4 and pool.nbytes == 101 and grown == [1]
    pool.clear()
    assert pool.nbytes == 0 and grown == [1, 1]


def test_download_conjugates_and_waits_after_an_error(monkeypatch):
    monkeypatch.setattr(_staging, "CHUNK_BYTES", 16 * 2)  # 2 rows of one complex128
    pool = StagingPool(lambda n: np.empty(n, np.uint8))
    copier = HostCopier(1)
    z = (np.arange(6) + 1j * np.arange(6)).reshape(6, 1)
    dev = FakeDevice(z.shape, z.dtype)
    dev.data[...] = z
    out = np.empty_like(z)
    download(whole_view(out), z.shape, z.dtype, pool, copier, dev.dma_out, dev.wait, True)
    np.testing.assert_array_equal(out, z.conj())

    def bad_write(*args, **kwargs):
        raise RuntimeError("host copy failed")

    monkeypatch.setattr(copier, "write", bad_write)
    with pytest.raises(RuntimeError, match="host copy failed"):
        download(whole_view(out), z.shape, z.dtype, pool, copier, dev.dma_out, dev.wait)
    assert not dev.busy  # the DMA in flight was waited for before the error left
